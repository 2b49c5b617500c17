// tokenizer.json WordPiece tokenizers (BERT family) against transformers.js 3.7: three
// tokenizers built from the gettext catalogs by tools/reference/make_hf_wordpiece_fixtures.py
// (BertNormalizer / Lowercase, BertPreTokenizer / WhitespaceSplit + Punctuation /
// Whitespace, the WordPiece decoder, Template / Bert / Roberta post-processors) on
// ~20,000 held-out lines in 16 locales; JavaScript's toLowerCase on every cased code
// point and the context cases; hostile tables, converter refusals, linear time.
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "convert/convert_error.h"
#include "convert/hf_tokenizer.h"
#include "core/unicode_case.h"
#include "core/utf8.h"
#include "format/model_file.h"
#include "petrel/generator.h"
#include "petrel/petrel.h"
#include "petrel_generated.h"
#include "support/hf_test_support.h"
#include "support/test_support.h"
#include "text/hf_tokenizer.h"

namespace hf_wordpiece_test {

using json = nlohmann::json;

std::string wp_fixture(const std::string& name) { return petrel::test::fixture_dir() + "/hf_wordpiece/" + name; }

std::optional<petrel::convert::HfTokenizerFiles> wp_fixture_files(const std::string& name) {
  return petrel::test::hf::fixture_files(wp_fixture(name));
}


std::string wp_ids_text(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

// A small BERT-style tokenizer.json: letters, "##" letters, a few words and pieces.
json small_wordpiece_json() {
  std::vector<std::string> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able",
                                     "runn",  "##ing", "the",   ".",     ",",      "!"};
  for (char c = 'a'; c <= 'z'; ++c) {
    tokens.emplace_back(1, c);
    tokens.push_back(std::string("##") + c);
  }
  json vocab = json::object();
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = i;
  json added = json::array();
  for (int id = 0; id < 5; ++id)
    added.push_back({{"id", id}, {"content", tokens[static_cast<size_t>(id)]}, {"single_word", false},
                     {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", true}});
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer",
           {{"type", "BertNormalizer"}, {"clean_text", true}, {"handle_chinese_chars", true},
            {"strip_accents", true}, {"lowercase", true}}},
          {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
          {"post_processor", {{"type", "BertProcessing"}, {"sep", {"[SEP]", 3}}, {"cls", {"[CLS]", 2}}}},
          {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
          {"model",
           {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"continuing_subword_prefix", "##"},
            {"max_input_chars_per_word", 100}, {"vocab", vocab}}}};
}

petrel::test::hf::LoadedHfTokenizer load_small_wordpiece(const json& j) {
  petrel::convert::HfTokenizerFiles files;
  files.dir = "small-wordpiece";
  files.tokenizer_json = j.dump();
  return petrel::test::hf::load_hf_tokenizer(files);
}

}  // namespace hf_wordpiece_test

TEST_CASE("tokenizer.json WordPiece: three BERT-style tokenizers encode and decode real text as transformers.js does",
          "[bulk][hf_wordpiece]") {
  using namespace hf_wordpiece_test;
  const auto expected_text = petrel::test::xz_decompress(wp_fixture("expected.bin.xz"));
  const char* const names[] = {"uncased", "cased", "lower"};
  std::vector<petrel::test::hf::LoadedHfTokenizer> loaded;
  for (const char* name : names) {
    const auto files = wp_fixture_files(name);
    if (!files || !expected_text) return;  // PETREL_TEST_SKIP=xz
    petrel::convert::HfTokenizerSummary summary;
    (void)petrel::convert::hf_tokenizer_buffer(*files, 0, &summary);
    INFO(summary.pipeline);
    CHECK(summary.pipeline.find("| WordPiece |") != std::string::npos);
    loaded.push_back(petrel::test::hf::load_hf_tokenizer(*files));
  }
  const std::string& bytes = *expected_text;
  petrel::test::hf::FixtureReader expected{bytes};
  const size_t stride = petrel::test::subset_stride();
  size_t lines = 0, wrong[3][2] = {};
  std::string report;
  while (!expected.done()) {
    const std::string line = expected.text();
    for (size_t v = 0; v < 3; ++v) {
      std::vector<int32_t> want(expected.get(2));
      for (int32_t& id : want) id = static_cast<int32_t>(expected.get(2));
      const std::string want_text = expected.text();
      if (lines % stride != 0) continue;  // sanitizer and emulated runs check a subset
      const petrel::text::HfTokenizer& tok = *loaded[v].tokenizer;
      auto got = tok.encode_text(line, true);
      REQUIRE(got);
      if (got.value() != want && ++wrong[v][0] <= 4)
        report += std::string(names[v]) + " line " + std::to_string(lines) + " '" + line + "'\n  want " +
                  wp_ids_text(want) + "\n  got  " + wp_ids_text(got.value()) + "\n";
      auto text = tok.decode_ids(want.data(), want.size(), true);
      REQUIRE(text);
      if (text.value() != want_text && ++wrong[v][1] <= 4)
        report += std::string(names[v]) + " decode line " + std::to_string(lines) + ": want '" + want_text +
                  "' got '" + text.value() + "'\n";
    }
    ++lines;
  }
  CHECK(lines >= 20000);
  INFO(report);
  for (size_t v = 0; v < 3; ++v) {
    INFO(names[v]);
    CHECK(wrong[v][0] == 0);
    CHECK(wrong[v][1] == 0);
  }
}

TEST_CASE("Lowercase is JavaScript's toLowerCase: every cased code point, İ, final sigma, ẞ, Cherokee, Deseret",
          "[hf_wordpiece]") {
  const auto text = petrel::test::xz_decompress(hf_wordpiece_test::wp_fixture("lowercase.txt.xz"));
  if (!text) return;
  std::istringstream in(*text);
  size_t count = 0, wrong = 0;
  std::string report;
  for (std::string line; std::getline(in, line); ++count) {
    const size_t tab = line.find('\t');
    REQUIRE(tab != std::string::npos);
    const std::string from = petrel::test::hf::unescape_line(line.substr(0, tab));
    const std::string want = petrel::test::hf::unescape_line(line.substr(tab + 1));
    std::string got;
    petrel::detail::append_lowercase(from, got);
    if (got != want && ++wrong <= 8) report += "'" + from + "': want '" + want + "' got '" + got + "'\n";
  }
  INFO(report);
  CHECK(count > 1900);
  CHECK(wrong == 0);
  std::string s;
  petrel::detail::append_lowercase("\xce\x9f\xce\x94\xce\x9f\xce\xa3 \xce\x9f\xce\x94\xce\x9f\xce\xa3.", s);  // ΟΔΟΣ ΟΔΟΣ.
  CHECK(s == "\xce\xbf\xce\xb4\xce\xbf\xcf\x82 \xce\xbf\xce\xb4\xce\xbf\xcf\x82.");                       // οδος οδος.
  s.clear();
  petrel::detail::append_lowercase("\xc4\xb0", s);  // İ -> i + U+0307
  CHECK(s == "i\xcc\x87");
}

TEST_CASE("WordPiece: greedy longest match, the continuing prefix, [UNK] for a word without a split",
          "[hf_wordpiece]") {
  using namespace hf_wordpiece_test;
  auto loaded = load_small_wordpiece(small_wordpiece_json());
  const petrel::text::HfTokenizer& tok = *loaded.tokenizer;
  auto id = [&](const char* t) { return tok.token_id(t).value(); };
  auto ids = tok.encode_text("UnAffable running\xe2\x80\x94the!", true);  // an em dash: not in the vocabulary
  REQUIRE(ids);
  CHECK(ids.value() == std::vector<int32_t>{id("[CLS]"), id("un"), id("##aff"), id("##able"), id("runn"), id("##ing"),
                                            id("[UNK]"), id("the"), id("!"), id("[SEP]")});
  auto text = tok.decode(ids.value());
  REQUIRE(text);
  CHECK(text.value() == "unaffable running the!");  // [UNK] is special: skipped
  // Accents stripped (strip_accents true), CJK ideographs spaced (no token: [UNK] each).
  ids = tok.encode_text("Ûn\xe4\xb8\xad\xe6\x96\x87", false);
  REQUIRE(ids);
  CHECK(ids.value() == std::vector<int32_t>{id("un"), id("[UNK]"), id("[UNK]")});
  // A word of 101 characters: [UNK] whole.
  ids = tok.encode_text(std::string(101, 'a'), false);
  REQUIRE(ids);
  CHECK(ids.value() == std::vector<int32_t>{id("[UNK]")});
}

TEST_CASE("A hostile WordPiece table is refused by field", "[hf_wordpiece]") {
  using namespace hf_wordpiece_test;
  petrel::convert::HfTokenizerFiles files;
  files.dir = "small";
  json j = small_wordpiece_json();
  j["model"]["max_input_chars_per_word"] = 1000;  // written (not the default)
  files.tokenizer_json = j.dump();
  const std::vector<uint8_t> good = petrel::convert::hf_tokenizer_buffer(files);
  auto mutated = [&](const std::function<bool(petrel::fb::Tokenizer*)>& change) {
    std::vector<uint8_t> bytes = good;
    auto* root = flatbuffers::GetMutableRoot<petrel::fb::Tokenizer>(bytes.data());
    REQUIRE(change(root));
    return bytes;
  };
  auto bind = [](const std::vector<uint8_t>& bytes) {
    const auto* root = flatbuffers::GetRoot<petrel::fb::Tokenizer>(bytes.data());
    return petrel::detail::bind_hf_tokenizer(*root, root->vocab_spans()->size(), "hostile.petrel");
  };
  REQUIRE(bind(good));
  struct Case {
    const char* field;
    std::function<bool(petrel::fb::Tokenizer*)> change;
  };
  const std::vector<Case> cases = {
      {"tokenizer.hf.model", [](petrel::fb::Tokenizer* t) { return t->mutable_hf()->mutate_model(static_cast<petrel::fb::HfModelKind>(77)); }},
      {"normalizers[0].strip_accents",
       [](petrel::fb::Tokenizer* t) {
         return t->mutable_hf()->mutable_normalizers()->GetMutableObject(0)->mutate_strip_accents(
             static_cast<petrel::fb::HfStripAccents>(9));
       }},
      {"pre_tokenizers[0].kind",
       [](petrel::fb::Tokenizer* t) {
         return t->mutable_hf()->mutable_pre_tokenizers()->GetMutableObject(0)->mutate_kind(
             static_cast<petrel::fb::HfPreTokenizerKind>(77));
       }},
      {"decoders[0].kind",
       [](petrel::fb::Tokenizer* t) {
         return t->mutable_hf()->mutable_decoders()->GetMutableObject(0)->mutate_kind(
             static_cast<petrel::fb::HfDecoderKind>(77));
       }},
      {"normalizers[0].kind",
       [](petrel::fb::Tokenizer* t) {
         return t->mutable_hf()->mutable_normalizers()->GetMutableObject(0)->mutate_kind(
             static_cast<petrel::fb::HfNormalizerKind>(0));
       }},
  };
  for (const Case& c : cases) {
    INFO(c.field);
    auto bound = bind(mutated(c.change));
    REQUIRE_FALSE(bound);
    CHECK_THAT(bound.error().message, Catch::Contains("hostile.petrel") && Catch::Contains(c.field));
  }
  // A huge max_input_chars_per_word binds (a word's cost is bounded by the longest token).
  auto huge = mutated([](petrel::fb::Tokenizer* t) { return t->mutable_hf()->mutate_max_input_chars_per_word(0xffffffffu); });
  auto bound = bind(huge);
  REQUIRE(bound);
  auto tok = petrel::text::HfTokenizer::create(std::move(bound.value()), "huge");
  REQUIRE(tok);
  auto ids = tok.value()->encode_text(std::string(size_t{1} << 20, 'a'), false);  // "a" then "##a" x (2^20 - 1)
  REQUIRE(ids);
  CHECK(ids.value().size() == size_t{1} << 20);
}

TEST_CASE("petrel-convert refuses WordPiece features it does not run, naming the JSON path", "[hf_wordpiece]") {
  using namespace hf_wordpiece_test;
  struct Case {
    const char* expect;
    std::function<void(json&)> change;
  };
  const std::vector<Case> cases = {
      {"model: missing key 'continuing_subword_prefix'", [](json& j) { j["model"].erase("continuing_subword_prefix"); }},
      {"model.max_input_chars_per_word: must be", [](json& j) { j["model"]["max_input_chars_per_word"] = -1; }},
      {"model.vocab: ids must be integers", [](json& j) { j["model"]["vocab"]["zz"] = -1; }},
      {"model.type: 'WordLevel' is not supported", [](json& j) { j["model"]["type"] = "WordLevel"; }},
      {"normalizer.lowercase: must be true or false", [](json& j) { j["normalizer"]["lowercase"] = "yes"; }},
      {"normalizer.type: normalizer 'StripAccents' is not supported",
       [](json& j) { j["normalizer"] = {{"type", "StripAccents"}}; }},
      {"pre_tokenizer.behavior: Punctuation with behavior 'Removed'",
       [](json& j) { j["pre_tokenizer"] = {{"type", "Punctuation"}, {"behavior", "Removed"}}; }},
      {"pre_tokenizer.type: pre-tokenizer 'UnicodeScripts' is not supported",
       [](json& j) { j["pre_tokenizer"] = {{"type", "UnicodeScripts"}}; }},
      {"post_processor.cls: must be [token, id]", [](json& j) { j["post_processor"]["cls"] = 2; }},
      {"post_processor.sep[0]: token 'nope' is not in the vocabulary",
       [](json& j) { j["post_processor"]["sep"] = {"nope", 3}; }},
      {"decoder: missing key 'prefix'", [](json& j) { j["decoder"].erase("prefix"); }},
  };
  for (const Case& c : cases) {
    INFO(c.expect);
    json j = small_wordpiece_json();
    c.change(j);
    petrel::convert::HfTokenizerFiles files;
    files.dir = "ckpt";
    files.tokenizer_json = j.dump();
    try {
      petrel::convert::hf_tokenizer_buffer(files);
      FAIL("accepted");
    } catch (const petrel::convert::ConvertError& e) {
      CHECK_THAT(e.what(), Catch::Contains("ckpt/tokenizer.json") && Catch::Contains(c.expect));
    }
  }
}

TEST_CASE("WordPiece tokenizing is linear: 4 MiB of text, 1 MiB of one word, megabytes of spaces and punctuation",
          "[hf_wordpiece]") {
  using namespace hf_wordpiece_test;
  auto loaded = load_small_wordpiece(small_wordpiece_json());
  const petrel::text::HfTokenizer& tok = *loaded.tokenizer;
  const size_t size = (size_t{4} << 20) / std::min<size_t>(petrel::test::subset_stride(), 4);  // emulated runs: 1 MiB
  std::string words;
  while (words.size() < size) words += "Unaffable RUNNING, the\xce\xa3\xce\xa3 \xe4\xb8\xad\xe6\x96\x87 x\xcc\x81yz! ";
  const std::vector<std::string> texts = {words, std::string(size / 4, 'a'), std::string(size, ' '),
                                          std::string(size, '!'), std::string(size / 2, '\t')};
  for (const std::string& text : texts) {
    auto ids = tok.encode_text(text, true);
    REQUIRE(ids);
    auto back = tok.decode_ids(ids.value().data(), ids.value().size(), true);
    REQUIRE(back);
    CHECK(ids.value().size() >= 2);
  }
  // One word of 1 MiB: more than max_input_chars_per_word characters, [UNK] at once.
  auto ids = tok.encode_text(std::string(size / 4, 'a'), false);
  REQUIRE(ids);
  CHECK(ids.value() == std::vector<int32_t>{tok.token_id("[UNK]").value()});
}

TEST_CASE("A language model with a WordPiece tokenizer: petrel-inspect's pipeline names its steps, text goes in",
          "[hf_wordpiece][decoder_only]") {
  using namespace hf_wordpiece_test;
  const std::string path = petrel::test::shared_file("lm-gemma3-wordpiece.petrel", [](const std::string& out) {
    petrel::test::TempDir dir;
    petrel::test::copy_dir(petrel::test::fixture_dir() + "/decoder_only/gemma3_f32", dir.path());
    json j = small_wordpiece_json();
    j["normalizer"] = {{"type", "Sequence"},
                       {"normalizers", json::array({j["normalizer"], {{"type", "Lowercase"}}})}};
    j["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers", json::array({{{"type", "WhitespaceSplit"}}, {{"type", "Punctuation"}},
                                                         {{"type", "Whitespace"}}, {{"type", "BertPreTokenizer"}}})}};
    std::ofstream(dir.path() + "/tokenizer.json") << j.dump();
    petrel::convert::ConvertOptions o;
    o.checkpoint_dir = dir.path();
    o.output_path = out;
    o.linear_dtype = o.embedding_dtype = petrel::DType::kF32;
    petrel::convert::convert_checkpoint(o);
  });
  auto model = petrel::test::load_model(path);
  CHECK(model->info().tokenizer.kind == "huggingface");
  CHECK(model->info().tokenizer.pipeline ==
        "BertNormalizer Lowercase | WhitespaceSplit Punctuation Whitespace BertPreTokenizer | WordPiece | WordPiece");
  auto generator = petrel::Generator::create(model);
  REQUIRE(generator);
  petrel::GenerateOptions o;
  o.max_new_tokens = 3;
  auto text = generator.value().generate_text("Unaffable running!", o);
  REQUIRE(text);
}

namespace hf_wordpiece_test {

// WordPiece as encode_wordpiece ran before its automaton, kept as the reference: at each
// position every candidate of whole characters up to the longest token's length (the
// continuing prefix before it past the first position), longest first, looked up.
std::vector<int32_t> greedy_reference(const petrel::text::HfTokenizer& t, const std::string& word) {
  const auto& tables = t.tables();
  size_t longest = 0;
  for (size_t i = 0; i < tables.vocab.size(); ++i) longest = std::max(longest, tables.vocab[i].size());
  longest = std::min(longest, petrel::detail::kMaxPieceBytes);
  const std::vector<int32_t> unknown = {tables.unk_id};
  size_t chars = 0;
  for (size_t at = 0; at < word.size(); at += petrel::detail::utf8_decode(word, at).length)
    if (++chars > tables.max_input_chars_per_word) return unknown;
  std::vector<int32_t> ids;
  for (size_t at = 0; at < word.size();) {
    std::string key = at > 0 ? std::string(tables.continuing_subword_prefix) : "";
    const size_t prefix = key.size();
    std::vector<size_t> ends;
    for (size_t k = at; k < word.size();) {
      const size_t length = petrel::detail::utf8_decode(word, k).length;
      if (key.size() + length > longest) break;
      key.append(word, k, length);
      k += length;
      ends.push_back(key.size());
    }
    std::optional<int32_t> id;
    size_t taken = 0;
    for (size_t e = ends.size(); e-- > 0 && !id;) {
      id = t.token_id(key.substr(0, ends[e]));
      taken = ends[e] - prefix;
    }
    if (!id) return unknown;
    ids.push_back(*id);
    at += taken;
  }
  return ids;
}

// A WordPiece tokenizer.json over `tokens` ([UNK] first), words split at spaces.
json random_wordpiece_json(const std::vector<std::string>& tokens, const std::string& prefix, uint32_t max_chars) {
  json vocab = json::object();
  vocab["[UNK]"] = 0;
  for (const std::string& t : tokens)
    if (!vocab.contains(t)) vocab[t] = vocab.size();
  return {{"version", "1.0"},
          {"added_tokens", json::array({{{"id", 0}, {"content", "[UNK]"}, {"single_word", false}, {"lstrip", false},
                                         {"rstrip", false}, {"normalized", false}, {"special", true}}})},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "WhitespaceSplit"}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "WordPiece"}, {"prefix", prefix}, {"cleanup", false}}},
          {"model",
           {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"continuing_subword_prefix", prefix},
            {"max_input_chars_per_word", max_chars}, {"vocab", vocab}}}};
}

}  // namespace hf_wordpiece_test

TEST_CASE("WordPiece's automaton gives the ids of the per-position lookups: small alphabets, long tokens, any prefix",
          "[hf_wordpiece]") {
  using namespace hf_wordpiece_test;
  std::mt19937 rng(4242);
  const std::vector<std::vector<std::string>> alphabets = {{"a", "b"}, {"a", "b", "c"}, {"a", "\xc3\xa9", "\xe4\xb8\xad"}};
  auto random_string = [&](const std::vector<std::string>& alphabet, size_t length) {
    std::string s;
    for (size_t i = 0; i < length; ++i) s += alphabet[rng() % alphabet.size()];
    return s;
  };
  for (size_t trial = 0; trial < 150; ++trial) {
    const auto& alphabet = alphabets[trial % alphabets.size()];
    const std::string prefix = std::vector<std::string>{"##", "", alphabet[1]}[trial % 3];
    const bool long_tokens = trial % 4 == 3;
    std::vector<std::string> tokens;
    const size_t count = 1 + rng() % 40;
    for (size_t i = 0; i < count; ++i) {
      const size_t length = 1 + rng() % (long_tokens ? 400 : 6);
      std::string token = rng() % 3 ? random_string(alphabet, length) : [&] {  // runs: long shared prefixes
        std::string s;
        for (size_t k = 0; k < length; ++k) s += alphabet[0];
        return s;
      }();
      tokens.push_back(rng() % 2 ? prefix + token : token);
    }
    if (trial % 5 != 0) tokens.push_back(alphabet[0]), tokens.push_back(prefix + alphabet[0]);  // most words split
    const uint32_t max_chars = trial % 7 == 0 ? 20 : 100000;
    auto loaded = load_small_wordpiece(random_wordpiece_json(tokens, prefix, max_chars));
    const petrel::text::HfTokenizer& tok = *loaded.tokenizer;
    for (int k = 0; k < 20; ++k) {
      std::string text;
      std::vector<std::string> words;
      for (size_t w = rng() % 6; w-- > 0;) {
        words.push_back(k % 4 == 0 ? std::string(rng() % 900, 'a') : random_string(alphabet, 1 + rng() % (long_tokens ? 600 : 30)));
        if (words.back().empty()) words.back() = alphabet[0];
        text += (text.empty() ? "" : " ") + words.back();
      }
      std::vector<int32_t> expected;
      for (const std::string& word : words) {
        const std::vector<int32_t> ids = greedy_reference(tok, word);
        expected.insert(expected.end(), ids.begin(), ids.end());
      }
      auto got = tok.encode_text(text, false);
      REQUIRE(got);
      INFO("trial " << trial << " (prefix '" << prefix << "', " << tokens.size() << " tokens): " << text.substr(0, 200));
      REQUIRE(got.value() == expected);
    }
  }
}

// A WordPiece vocabulary with a 4,096-byte token and a continuing one as long, words of
// 1 MiB (max_input_chars_per_word at its largest): each position's longest token was a
// walk of 4,096 candidate lookups.
TEST_CASE("WordPiece: a 4,096-byte token over a word of 1 MiB", "[.][linear]") {
  using namespace hf_wordpiece_test;
  const std::string big(4096, 'a'), big_rest = "##" + std::string(4094, 'a');
  auto loaded = load_small_wordpiece(random_wordpiece_json({"a", "##a", "b", "##b", big, big_rest}, "##", 0xffffffffu));
  const petrel::text::HfTokenizer& tok = *loaded.tokenizer;
  const size_t n = size_t{1} << 20;
  auto ids = tok.encode_text(std::string(n, 'a'), false);
  REQUIRE(ids);
  // Greedy: the 4,096-byte token, then the continuing 4,094 'a' while that many are left,
  // then "##a" one at a time.
  std::vector<int32_t> expected = {tok.token_id(big).value()};
  expected.insert(expected.end(), (n - 4096) / 4094, tok.token_id(big_rest).value());
  expected.insert(expected.end(), (n - 4096) % 4094, tok.token_id("##a").value());
  CHECK(ids.value() == expected);
  // "a" x 4,093 then "b", repeated: the long tokens never fit, but each position is a
  // prefix of them as deep as its run goes.
  std::string text;
  while (text.size() + 4094 <= n) text += std::string(4093, 'a') + "b";
  ids = tok.encode_text(text, false);
  REQUIRE(ids);
  CHECK(ids.value().size() == text.size());
  CHECK(ids.value().front() == tok.token_id("a").value());
}
