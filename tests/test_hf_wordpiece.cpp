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
#include <sstream>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "convert/convert_error.h"
#include "convert/hf_tokenizer.h"
#include "core/unicode_case.h"
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
