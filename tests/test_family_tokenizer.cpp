// Text <-> ids for NLLB-200, M2M100 and mBART-50 checkpoints: the converter's reader
// (convert/family_tokenizer.h) writes the tokenizer table, the loader's binder checks it
// and FairseqTokenizer runs it; every expectation comes from the oracle fixtures
// (expected.json's `text`, made with transformers' rules by
// tools/reference/family_tokenizers.py over Debian's sentencepiece).
#include <catch2/catch.hpp>
#include <fstream>
#include <functional>

#include "convert/family_tokenizer.h"
#include "format/model_file.h"
#include "model_access.h"
#include "petrel_generated.h"
#include "support/test_support.h"
#include "text/fairseq_tokenizer.h"
#include "text/spm_trie.h"

using namespace petrel;
using namespace petrel::test;
using Catch::Matchers::Contains;
using json = nlohmann::json;

namespace {

json read_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  return json::parse(in);
}

void write_json(const std::string& path, const json& j) {
  std::ofstream out(path);
  out << j.dump(1);
  REQUIRE(out);
}

// A checkpoint directory's tokenizer as the engine runs it: the converter's table in a
// FlatBuffer (which the tokenizer views into), bound and built as a model load does.
struct Loaded {
  flatbuffers::FlatBufferBuilder fbb;
  std::unique_ptr<text::FairseqTokenizer> tokenizer;
};

convert::FamilyTokenizer read_tokenizer(const std::string& dir, std::vector<std::string>* notes = nullptr) {
  const json config = read_json(dir + "/config.json");
  auto t = convert::read_family_tokenizer(dir, config.at("model_type").get<std::string>(),
                                          config.value("tokenizer_class", ""), config.at("vocab_size").get<uint32_t>(),
                                          notes);
  REQUIRE(t.has_value());
  return std::move(*t);
}

Result<text::FairseqTokenizer::Parts> bind(Loaded& out, const convert::FamilyTokenizer& t,
                                           convert::StringLayout layout = convert::StringLayout::kSpans) {
  out.fbb.Finish(convert::write_family_tokenizer(out.fbb, t, layout));
  const auto* table = flatbuffers::GetRoot<fb::Tokenizer>(out.fbb.GetBufferPointer());
  return detail::bind_fairseq_tokenizer(*table, static_cast<uint32_t>(t.vocab.size()), "test.petrel");
}

std::unique_ptr<Loaded> load(const convert::FamilyTokenizer& t) {
  auto out = std::make_unique<Loaded>();
  auto parts = bind(*out, t);
  REQUIRE(parts);
  auto tok = text::FairseqTokenizer::create(std::move(parts.value()), "test.petrel");
  REQUIRE(tok);
  out->tokenizer = std::move(tok.value());
  return out;
}

std::vector<int32_t> ids_of(const json& j) { return j.get<std::vector<int32_t>>(); }

}  // namespace

TEST_CASE("family tokenizers: pieces, ids and decoded text as transformers gives them", "[tokenizer][families]") {
  const std::string name = GENERATE(as<std::string>{}, "nllb_d1024", "m2m100_tiny", "mbart50_tiny");
  INFO(name);
  const std::string dir = oracle_dir(name);
  const json text = expected_for(name).at("text");
  const std::string src = text.at("src_lang"), tgt = text.at("tgt_lang");
  std::vector<std::string> notes;
  auto loaded = load(read_tokenizer(dir, &notes));
  const text::FairseqTokenizer& tok = *loaded->tokenizer;
  REQUIRE_THAT(notes.back(), Contains("text tokenizer"));

  CHECK(tok.language_id(src) == text.at("src_lang_id").get<int32_t>());
  CHECK(tok.language_id(tgt) == text.at("tgt_lang_id").get<int32_t>());
  CHECK_FALSE(tok.language_id("xx_YY").has_value());
  CHECK_FALSE(tok.languages().empty());

  for (const json& c : text.at("cases")) {
    const std::string input = c.at("text");
    INFO(input);
    const std::vector<int32_t> ids = ids_of(c.at("ids"));
    auto t = tok.tokenize_in(input, src);
    REQUIRE(t);
    CHECK(t.value().ids == ids);
    // The pieces around the language token and EOS are SentencePiece's and the specials'.
    REQUIRE(t.value().pieces.size() == ids.size());
    const std::vector<std::string>& pieces = t.value().pieces;
    CHECK(std::vector<std::string>(pieces.begin() + 1, pieces.end() - 1) == strings(c.at("pieces")));
    auto by_default = tok.tokenize(input);  // tokenizer_config.json's src_lang
    REQUIRE(by_default);
    CHECK(by_default.value().ids == ids);
    // expected.json decodes the whole source ids (language and EOS are special tokens,
    // skipped); the output convention (without them) gives the same text.
    auto decoded = tok.decode(ids);
    REQUIRE(decoded);
    CHECK(decoded.value() == c.at("decoded").get<std::string>());
    auto inner = tok.decode(std::vector<int32_t>(ids.begin() + 1, ids.end() - 1));
    REQUIRE(inner);
    CHECK(inner.value() == c.at("decoded").get<std::string>());
  }
  for (int32_t id : {0, 2, text.at("src_lang_id").get<int32_t>()}) CHECK(tok.output_token(id).has_value());
  CHECK_FALSE(tok.output_token(-1).has_value());
  CHECK_FALSE(tok.decode({-1}));
}

TEST_CASE("family tokenizers: NLLB's legacy_behaviour puts the language last", "[tokenizer][families]") {
  const json text = expected_for("nllb_d1024").at("text");
  TempDir tmp;
  copy_dir(oracle_dir("nllb_d1024"), tmp.path());
  json config = read_json(tmp.file("tokenizer_config.json"));
  config["legacy_behaviour"] = true;
  write_json(tmp.file("tokenizer_config.json"), config);
  auto loaded = load(read_tokenizer(tmp.path()));
  size_t checked = 0;
  for (const json& c : text.at("cases")) {
    INFO(c.at("text").get<std::string>());
    auto t = loaded->tokenizer->tokenize_in(c.at("text").get<std::string>(), text.at("src_lang").get<std::string>());
    REQUIRE(t);
    CHECK(t.value().ids == ids_of(c.at("ids_legacy")));
    checked += 1;
  }
  CHECK(checked == text.at("cases").size());
}

TEST_CASE("family tokenizers: unknown languages and missing defaults are named errors", "[tokenizer][families]") {
  auto loaded = load(read_tokenizer(oracle_dir("nllb_d1024")));
  auto t = loaded->tokenizer->tokenize_in("Open the file", "xx_Klingon");
  REQUIRE_FALSE(t);
  CHECK(t.error().code == ErrorCode::kInvalidArgument);
  CHECK_THAT(t.error().message, Contains("xx_Klingon") && Contains("ace_Arab") && Contains("202 codes"));

  // M2M100 takes "en" for its "__en__" token, as transformers' src_lang does.
  const json m2m = expected_for("m2m100_tiny").at("text");
  auto m2m_loaded = load(read_tokenizer(oracle_dir("m2m100_tiny")));
  CHECK(m2m_loaded->tokenizer->language_id("__" + m2m.at("src_lang").get<std::string>() + "__") ==
        m2m.at("src_lang_id").get<int32_t>());

  // An NLLB tokenizer_config.json listing other languages and no src_lang: no default.
  TempDir tmp;
  copy_dir(oracle_dir("nllb_d1024"), tmp.path());
  json config = read_json(tmp.file("tokenizer_config.json"));
  config.erase("src_lang");
  config["additional_special_tokens"] = {"fra_Latn", "deu_Latn"};
  config.erase("added_tokens_decoder");
  write_json(tmp.file("tokenizer_config.json"), config);
  auto few = load(read_tokenizer(tmp.path()));
  auto none = few->tokenizer->tokenize("Open the file");
  REQUIRE_FALSE(none);
  CHECK_THAT(none.error().message, Contains("pass the source language"));
  CHECK(few->tokenizer->languages().size() == 2);
  CHECK(few->tokenizer->tokenize_in("Open the file", "deu_Latn"));

  // The other tokenizers have no languages: only an empty source language is accepted.
  auto marian = load_model(en_de_model_path());
  const text::Tokenizer* plain = detail::ModelAccess::tokenizer(*marian);
  REQUIRE(plain != nullptr);
  CHECK(plain->tokenize_in("Hallo", ""));
  auto refused = plain->tokenize_in("Hallo", "de");
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message, Contains("'de'") && Contains("no language codes"));
  CHECK(plain->languages().empty());
  CHECK_FALSE(plain->language_id("de"));
}

TEST_CASE("family tokenizers: a malformed tokenizer_config.json is refused by file and key",
          "[tokenizer][families][convert]") {
  const std::string dir = oracle_dir("nllb_d1024");
  const json original = read_json(dir + "/tokenizer_config.json");
  const std::string eng = std::to_string(expected_for("nllb_d1024").at("text").at("src_lang_id").get<int32_t>());
  REQUIRE(original.at("added_tokens_decoder").at(eng).at("content") == "eng_Latn");
  struct Case {
    std::function<void(json&)> edit;
    std::vector<std::string> message;
  };
  const std::vector<Case> cases = {
      {[&](json& j) {
         j["added_tokens_decoder"]["100"] = j["added_tokens_decoder"][eng];
         j["added_tokens_decoder"].erase(eng);
       },
       {"added_tokens_decoder", "eng_Latn", "a piece's id"}},
      {[&](json& j) { j["added_tokens_decoder"]["99999"] = j["added_tokens_decoder"][eng]; },
       {"added_tokens_decoder[\"99999\"]", "outside"}},
      {[&](json& j) { j["added_tokens_decoder"]["-5"] = j["added_tokens_decoder"][eng]; },
       {"added_tokens_decoder[\"-5\"]", "not a decimal number"}},
      {[&](json& j) {  // fra_Latn moved onto eng_Latn's id, which eng_Latn keeps by the formula
         json& map = j["added_tokens_decoder"];
         for (auto it = map.begin(); it != map.end(); ++it)
           if (it.value()["content"] == "fra_Latn") {
             map.erase(it);
             break;
           }
         map[eng]["content"] = "fra_Latn";
       },
       {"share id " + eng}},
      {[&](json& j) { j["added_tokens_decoder"]["0"]["content"] = "</s>"; }, {"'</s>' is named by two ids"}},
      {[&](json& j) {
         j["added_tokens_decoder"]["5"] = j["added_tokens_decoder"]["2"];
         j["added_tokens_decoder"].erase("2");
       },
       {"'</s>' has id 5, not 2"}},
      {[&](json& j) { j["src_lang"] = "tlh_Latn"; }, {"src_lang 'tlh_Latn'"}},
      {[&](json& j) { j["legacy_behaviour"] = "yes"; }, {"legacy_behaviour"}},
      {[&](json& j) { j["additional_special_tokens"] = 7; }, {"additional_special_tokens"}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i);
    TempDir tmp;
    copy_dir(dir, tmp.path());
    json config = original;
    cases[i].edit(config);
    write_json(tmp.file("tokenizer_config.json"), config);
    try {
      read_tokenizer(tmp.path());
      FAIL("no error");
    } catch (const convert::ConvertError& e) {
      CHECK_THAT(e.what(), Contains(tmp.file("tokenizer_config.json")));
      for (const std::string& part : cases[i].message) CHECK_THAT(e.what(), Contains(part));
    }
  }
  // Without the tokenizer files the model converts with token ids only.
  TempDir empty;
  std::vector<std::string> notes;
  CHECK_FALSE(convert::read_family_tokenizer(empty.path(), "m2m_100", "NllbTokenizer", 404, &notes));
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Contains("use token ids"));
}

TEST_CASE("family tokenizers: a hostile table is refused at load, by field", "[tokenizer][families][format]") {
  const convert::FamilyTokenizer good = read_tokenizer(oracle_dir("mbart50_tiny"));
  const int32_t n = static_cast<int32_t>(good.vocab.size());
  struct Case {
    std::function<void(convert::FamilyTokenizer&)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[&](convert::FamilyTokenizer& t) { t.special_ids.push_back(n); }, "tokenizer.special_ids["},
      {[&](convert::FamilyTokenizer& t) { t.languages[3].second = -2; }, "tokenizer.languages[3].id = -2"},
      {[&](convert::FamilyTokenizer& t) { t.languages[3].second = 10; }, "tokenizer.languages[3].code"},
      {[&](convert::FamilyTokenizer& t) { t.eos_id = n; }, "tokenizer.eos_id"},
      {[&](convert::FamilyTokenizer& t) { t.mask_id = n + 7; }, "tokenizer.mask_id"},
      {[&](convert::FamilyTokenizer& t) { t.spm_vocab_ids[5] = n; }, "tokenizer.source.vocab_ids[5]"},
      {[&](convert::FamilyTokenizer& t) { t.spm_vocab_ids.pop_back(); }, "tokenizer.source.vocab_ids"},
      {[&](convert::FamilyTokenizer& t) { t.family = "marian"; }, "tokenizer.family"},
      {[&](convert::FamilyTokenizer& t) { t.vocab.pop_back(); }, "tokenizer.vocab"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i);
    convert::FamilyTokenizer t = good;
    cases[i].edit(t);
    Loaded out;
    const uint32_t vocab_size = static_cast<uint32_t>(n);
    out.fbb.Finish(convert::write_family_tokenizer(out.fbb, t));
    auto parts = detail::bind_fairseq_tokenizer(*flatbuffers::GetRoot<fb::Tokenizer>(out.fbb.GetBufferPointer()),
                                                vocab_size, "hostile.petrel");
    REQUIRE_FALSE(parts);
    CHECK(parts.error().code == ErrorCode::kFormat);
    CHECK_THAT(parts.error().message, Contains("hostile.petrel") && Contains(cases[i].message));
  }
  // A special token without text would match everywhere: refused when building.
  convert::FamilyTokenizer t = good;
  t.vocab[static_cast<size_t>(t.mask_id)] = "";
  Loaded out;
  auto parts = bind(out, t);
  REQUIRE(parts);
  auto tok = text::FairseqTokenizer::create(std::move(parts.value()), "test.petrel");
  REQUIRE_FALSE(tok);
  CHECK_THAT(tok.error().message, Contains("has no token text"));
  // One longer than kMaxPieceBytes would cost its length at every position of an input.
  t = good;
  t.vocab[static_cast<size_t>(t.mask_id)] = std::string(detail::kMaxPieceBytes + 1, '<');
  Loaded out2;
  auto parts2 = bind(out2, t);
  REQUIRE(parts2);
  auto tok2 = text::FairseqTokenizer::create(std::move(parts2.value()), "test.petrel");
  REQUIRE_FALSE(tok2);
  CHECK_THAT(tok2.error().message, Contains("test.petrel") && Contains("tokenizer.special_ids[") &&
                                       Contains(std::to_string(detail::kMaxPieceBytes + 1) + " bytes"));
}

TEST_CASE("family tokenizers: the stored piece trie is the one the engine builds", "[tokenizer][families][format]") {
  const std::string name = GENERATE(as<std::string>{}, "nllb_d1024", "m2m100_tiny", "mbart50_tiny");
  INFO(name);
  const convert::FamilyTokenizer t = read_tokenizer(oracle_dir(name));
  Loaded out;
  auto parts = bind(out, t);
  REQUIRE(parts);
  const detail::StoredPieceTrie stored = parts.value().spm.trie;
  REQUIRE(stored.size > 0);  // the converter stores it (format 1.5)
  text::PieceTrie built;
  REQUIRE(built.build(t.spm.pieces).first < 0);
  REQUIRE(stored.size == built.node_count());
  size_t differing = 0;
  for (size_t n = 0; n < stored.size; ++n)
    differing += stored.nodes[n].first_child != built.nodes()[n].first_child || stored.nodes[n].id != built.nodes()[n].id ||
                 stored.labels[n] != built.labels()[n];
  CHECK(differing == 0);
  // A file whose strings are [string] (format 1.5) and one without the trie either
  // (format <= 1.4, built at load) tokenize and decode the same.
  Loaded old_out;
  auto old_parts = bind(old_out, t, convert::StringLayout::kStringVectors);
  REQUIRE(old_parts);
  REQUIRE(old_parts.value().spm.trie.size == stored.size);
  REQUIRE(old_parts.value().vocab.size() == parts.value().vocab.size());
  text::FairseqTokenizer::Parts without = old_parts.value();
  without.spm.trie = {};
  auto from_stored = text::FairseqTokenizer::create(std::move(parts.value()), "test.petrel");
  auto from_strings = text::FairseqTokenizer::create(std::move(old_parts.value()), "test.petrel");
  auto from_pieces = text::FairseqTokenizer::create(std::move(without), "test.petrel");
  REQUIRE(from_stored);
  REQUIRE(from_strings);
  REQUIRE(from_pieces);
  const json text = expected_for(name).at("text");
  const std::string src = text.at("src_lang");
  size_t lines = 0;
  for (const json& c : text.at("cases")) {
    const std::string line = c.at("text");
    auto a = from_stored.value()->tokenize_in(line, src);
    auto b = from_pieces.value()->tokenize_in(line, src);
    auto d = from_strings.value()->tokenize_in(line, src);
    REQUIRE(a);
    REQUIRE(b);
    REQUIRE(d);
    CHECK(a.value().ids == b.value().ids);
    CHECK(a.value().pieces == b.value().pieces);
    CHECK(a.value().ids == d.value().ids);
    CHECK(a.value().pieces == d.value().pieces);
    auto decoded_a = from_stored.value()->decode(a.value().ids);
    auto decoded_c = from_strings.value()->decode(a.value().ids);
    REQUIRE(decoded_a);
    REQUIRE(decoded_c);
    CHECK(decoded_a.value() == decoded_c.value());
    ++lines;
  }
  CHECK(lines > 0);
}

TEST_CASE("family tokenizers: a corrupt stored piece trie is refused, by node", "[tokenizer][families][format]") {
  const convert::FamilyTokenizer good = read_tokenizer(oracle_dir("nllb_d1024"));
  text::PieceTrie trie;  // the layout the file holds, to choose nodes to corrupt
  REQUIRE(trie.build(good.spm.pieces).first < 0);
  const auto* nodes = trie.nodes();
  const size_t count = trie.node_count(), last = count - 1;
  auto children = [&](size_t n) { return nodes[n + 1].first_child - nodes[n].first_child; };
  size_t leaf = 0, inner = 0, other_leaf = 0, parent_of_siblings = 0;
  for (size_t n = 1; n < last; ++n) {
    if (nodes[n].id >= 0 && children(n) == 0) (leaf == 0 ? leaf : other_leaf == 0 ? other_leaf : leaf) = n;
    if (nodes[n].id >= 0 && children(n) > 0 && inner == 0) inner = n;
    if (children(n) >= 2 && parent_of_siblings == 0) parent_of_siblings = n;
  }
  REQUIRE((leaf > 0 && other_leaf > 0 && inner > 0 && parent_of_siblings > 0));
  REQUIRE(trie.labels()[leaf] != trie.labels()[other_leaf]);
  const uint32_t sibling = nodes[parent_of_siblings].first_child;
  using Nodes = flatbuffers::Vector<const fb::PieceTrieNode*>;
  struct Case {
    std::string what;
    std::function<void(Nodes&, flatbuffers::Vector<uint8_t>&)> edit;
    std::string message;
  };
  const auto id_of = [&](size_t n) { return nodes[n].id; };
  const std::vector<Case> cases = {
      {"a wrong id (two leaves' ids swapped)",
       [&](Nodes& v, flatbuffers::Vector<uint8_t>&) {
         v.GetMutableObject(static_cast<uint32_t>(leaf))->mutate_id(id_of(other_leaf));
         v.GetMutableObject(static_cast<uint32_t>(other_leaf))->mutate_id(id_of(leaf));
       },
       "its path is not pieces["},
      {"a duplicate id",
       [&](Nodes& v, flatbuffers::Vector<uint8_t>&) { v.GetMutableObject(static_cast<uint32_t>(inner))->mutate_id(id_of(leaf)); },
       // Refused at `inner`: its path is not that piece's, or (after the leaf) a second node ends it.
       "trie_nodes[" + std::to_string(inner) + "]: id " + std::to_string(id_of(leaf))},
      {"a piece no node ends",
       [&](Nodes& v, flatbuffers::Vector<uint8_t>&) { v.GetMutableObject(static_cast<uint32_t>(inner))->mutate_id(-1); },
       "trie_nodes: no node ends pieces[" + std::to_string(id_of(inner)) + "]"},
      {"a leaf without a piece",
       [&](Nodes& v, flatbuffers::Vector<uint8_t>&) { v.GetMutableObject(static_cast<uint32_t>(leaf))->mutate_id(-1); },
       "trie_nodes[" + std::to_string(leaf) + "]: a leaf without a piece"},
      {"an id outside the pieces",
       [&](Nodes& v, flatbuffers::Vector<uint8_t>&) { v.GetMutableObject(static_cast<uint32_t>(leaf))->mutate_id(1 << 30); },
       "trie_nodes[" + std::to_string(leaf) + "]: id 1073741824 is not a piece id"},
      {"siblings out of order",
       [&](Nodes&, flatbuffers::Vector<uint8_t>& labels) {
         const uint8_t a = labels.Get(sibling), b = labels.Get(sibling + 1);
         labels.Mutate(sibling, b);
         labels.Mutate(sibling + 1, a);
       },
       "trie_labels[" + std::to_string(sibling + 1) + "]"},
      {"a child range before its parent",
       [&](Nodes& v, flatbuffers::Vector<uint8_t>&) { v.GetMutableObject(1)->mutate_first_child(1); },
       "trie_nodes[1]: its children start at node 1, not after it"},
      {"first_child going down",
       [&](Nodes& v, flatbuffers::Vector<uint8_t>&) {
         v.GetMutableObject(static_cast<uint32_t>(parent_of_siblings + 1))->mutate_first_child(sibling - 1);
       },
       "trie_nodes[" + std::to_string(parent_of_siblings + 1) + "]: first_child"},
      {"first_child past the closing node (then going down)",
       [&](Nodes& v, flatbuffers::Vector<uint8_t>&) {
         v.GetMutableObject(static_cast<uint32_t>(parent_of_siblings + 1))->mutate_first_child(static_cast<uint32_t>(count + 5));
       },
       "trie_nodes[" + std::to_string(parent_of_siblings + 1) + "]: first_child " + std::to_string(count + 5) +
           " is past the closing node"},
      {"the closing node",
       [&](Nodes& v, flatbuffers::Vector<uint8_t>&) { v.GetMutableObject(static_cast<uint32_t>(last))->mutate_first_child(0); },
       "trie_nodes[" + std::to_string(last) + "]: the closing node"},
      {"fewer labels than nodes",
       [&](Nodes&, flatbuffers::Vector<uint8_t>& labels) {
         auto* size = const_cast<uint8_t*>(labels.Data()) - 4;
         const uint32_t fewer = labels.size() - 1;
         std::memcpy(size, &fewer, 4);
       },
       "tokenizer.source.trie_labels: " + std::to_string(count - 1) + " labels for " + std::to_string(count) + " trie_nodes"},
      {"fewer nodes than a tree of the pieces needs",
       [&](Nodes& v, flatbuffers::Vector<uint8_t>& labels) {
         for (auto* vector : {static_cast<const void*>(v.Data()), static_cast<const void*>(labels.Data())}) {
           const uint32_t two = 2;
           std::memcpy(static_cast<uint8_t*>(const_cast<void*>(vector)) - 4, &two, 4);
         }
       },
       "trie_nodes: 2 nodes for"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    Loaded out;
    out.fbb.Finish(convert::write_family_tokenizer(out.fbb, good));
    auto* source = flatbuffers::GetMutableRoot<fb::Tokenizer>(out.fbb.GetBufferPointer())->mutable_source();
    c.edit(*source->mutable_trie_nodes(), *source->mutable_trie_labels());
    flatbuffers::Verifier verifier(out.fbb.GetBufferPointer(), out.fbb.GetSize());
    REQUIRE(verifier.VerifyBuffer<fb::Tokenizer>(nullptr));
    auto parts = detail::bind_fairseq_tokenizer(*flatbuffers::GetRoot<fb::Tokenizer>(out.fbb.GetBufferPointer()),
                                                static_cast<uint32_t>(good.vocab.size()), "hostile.petrel");
    Error error{ErrorCode::kInternal, "not refused"};
    if (!parts) {
      error = parts.error();
    } else {
      auto tok = text::FairseqTokenizer::create(std::move(parts.value()), "hostile.petrel");
      REQUIRE_FALSE(tok);
      error = tok.error();
    }
    CHECK(error.code == ErrorCode::kFormat);
    CHECK_THAT(error.message, Contains("hostile.petrel") && Contains(c.message));
    if (error.message.find("trie_") != std::string::npos)
      CHECK_THAT(error.message, Contains("tokenizer.source"));
  }
}

TEST_CASE("family tokenizers: a table given both ways, or spans without the blob, is refused by field",
          "[tokenizer][families][format]") {
  auto bind_built = [](const flatbuffers::FlatBufferBuilder& fbb) {
    return detail::bind_fairseq_tokenizer(*flatbuffers::GetRoot<fb::Tokenizer>(fbb.GetBufferPointer()), 1,
                                          "hostile.petrel");
  };
  const std::vector<fb::StringSpan> one_span = {fb::StringSpan(0, 1)};
  flatbuffers::FlatBufferBuilder without_blob;
  {
    auto spans = without_blob.CreateVectorOfStructs(one_span);
    fb::TokenizerBuilder b(without_blob);
    b.add_kind(fb::TokenizerKind::Fairseq);
    b.add_vocab_spans(spans);
    without_blob.Finish(b.Finish());
  }
  auto r = bind_built(without_blob);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Contains("hostile.petrel: tokenizer.vocab_spans: given without tokenizer.strings"));
  flatbuffers::FlatBufferBuilder both;
  {
    auto spans = both.CreateVectorOfStructs(one_span);
    auto strings = both.CreateVectorOfStrings(std::vector<std::string>{"a"});
    const uint8_t a = 'a';
    auto blob = both.CreateVector(&a, 1);
    fb::TokenizerBuilder b(both);
    b.add_kind(fb::TokenizerKind::Fairseq);
    b.add_vocab_spans(spans);
    b.add_vocab(strings);
    b.add_strings(blob);
    both.Finish(b.Finish());
  }
  r = bind_built(both);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Contains("hostile.petrel: tokenizer.vocab: given both as strings and as tokenizer.vocab_spans"));
}

TEST_CASE("family tokenizers: spans overlapping to multiply the blob's text are refused by field",
          "[tokenizer][families][format]") {
  // `count` spans, each of the whole 1000-byte blob: 8 bytes of file stand for 1000 of
  // text. A table may hold up to twice the blob plus 64 KiB (repeated strings).
  auto bind_spans = [](uint32_t count) {
    flatbuffers::FlatBufferBuilder fbb;
    const std::vector<fb::StringSpan> spans(count, fb::StringSpan(0, 1000));
    auto span_vector = fbb.CreateVectorOfStructs(spans);
    const std::string text(1000, 'a');
    auto blob = fbb.CreateVector(reinterpret_cast<const uint8_t*>(text.data()), text.size());
    fb::TokenizerBuilder b(fbb);
    b.add_kind(fb::TokenizerKind::Fairseq);
    b.add_vocab_spans(span_vector);
    b.add_strings(blob);
    fbb.Finish(b.Finish());
    auto r = detail::bind_fairseq_tokenizer(*flatbuffers::GetRoot<fb::Tokenizer>(fbb.GetBufferPointer()), count,
                                            "hostile.petrel");
    return r ? std::string() : r.error().message;
  };
  CHECK_THAT(bind_spans(68), Contains("hostile.petrel: tokenizer.vocab_spans: its strings hold 68000 bytes, more than "
                                      "twice the 1000 bytes of tokenizer.strings"));
  CHECK_THAT(bind_spans(67), !Contains("its strings hold"));  // 67000 <= 2 x 1000 + 65536
}
