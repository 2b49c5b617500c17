// Lexical shortlists: the converter stores Marian-format tables, the loader checks
// them, and decoding over a shortlist matches the PyTorch oracle restricted to each
// sentence's allowed tokens, whatever the batching.
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "convert/convert.h"
#include "convert/convert_error.h"
#include "convert/shortlist.h"
#include "petrel/translator.h"
#include "petrel_generated.h"
#include "support/test_support.h"

using namespace petrel;
using namespace petrel::test;
using Catch::Matchers::Contains;
using json = nlohmann::json;

namespace {

const std::string kShortlistFixture = "post_swish_concat_tied";

std::string convert_with_shortlist(const TempDir& tmp, DType dtype, const std::string& lex, uint32_t first,
                                   uint32_t best, const std::string& checkpoint = oracle_dir(kShortlistFixture)) {
  convert::ConvertOptions o;
  o.checkpoint_dir = checkpoint;
  o.output_path = tmp.file("shortlist-" + std::string(to_string(dtype)) + ".petrel");
  o.linear_dtype = o.embedding_dtype = dtype;
  o.shortlist_path = lex;
  o.shortlist_first = first;
  o.shortlist_best = best;
  convert::convert_checkpoint(o);
  return o.output_path;
}

std::vector<Translation> translate(Translator& t, const std::vector<std::vector<int32_t>>& batch,
                                   const TranslateOptions& o) {
  auto r = t.translate(batch, o);
  if (!r) FAIL(r.error().message);
  return r.value();
}

// Marian's binary shortlist as marian-conv writes it (marian-dev src/data/shortlist.cpp,
// BinaryShortlistGenerator::import): six u64 header words, u64 offsets, u32 target ids.
struct BinaryShortlist {
  uint64_t magic = 0xF11A48D5013417F5ull;
  uint64_t first = 2, best = 3;
  std::vector<uint64_t> offsets;
  std::vector<uint32_t> ids;
  // Header fields that lie about the arrays; unset: the arrays' sizes.
  uint64_t offsets_size = UINT64_MAX, ids_size = UINT64_MAX;
};

// Marian's checksum written out independently: util::hashMem<uint64_t, uint64_t>, i.e.
// boost's hash_combine with std::hash over the whole u64 words after magic and checksum,
// as a 64-bit build computes it (std::hash<uint64_t> is the identity there; a 32-bit
// std::hash truncates, so it is not called here: the files are the native tools').
uint64_t marian_checksum(const std::vector<uint8_t>& file) {
  uint64_t seed = 0;
  for (size_t at = 16; at + 8 <= file.size(); at += 8) {
    uint64_t word;
    std::memcpy(&word, file.data() + at, 8);  // the tests run on little-endian machines, as Marian does
    seed ^= word + 0x9e3779b9 + (seed << 6) + (seed >> 2);
  }
  return seed;
}

void set_u64(std::vector<uint8_t>& out, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[at + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
}

std::vector<uint8_t> write_binary_shortlist(const BinaryShortlist& s) {
  std::vector<uint8_t> out;
  put64(out, s.magic);
  put64(out, 0);  // the checksum, below
  put64(out, s.first);
  put64(out, s.best);
  put64(out, s.offsets_size != UINT64_MAX ? s.offsets_size : s.offsets.size());
  put64(out, s.ids_size != UINT64_MAX ? s.ids_size : s.ids.size());
  for (uint64_t o : s.offsets) put64(out, o);
  for (uint32_t id : s.ids)
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(id >> (8 * i)));
  set_u64(out, 8, marian_checksum(out));
  return out;
}

// Six source ids over a target vocabulary of six: an empty list (source 1), a target
// listed twice (source 2), lists in id order as Marian writes them.
BinaryShortlist small_shortlist() {
  BinaryShortlist s;
  s.offsets = {0, 2, 2, 5, 6, 7, 8};
  s.ids = {3, 5, 1, 4, 4, 0, 2, 5};
  return s;
}

std::string binary_error(const std::vector<uint8_t>& bytes, uint32_t source_vocab = 6, uint32_t target_vocab = 6,
                         int32_t eos_id = 0, bool shared = false) {
  try {
    convert::read_binary_shortlist(bytes.data(), bytes.size(), "lex.bin", source_vocab, target_vocab, eos_id, shared);
  } catch (const convert::ConvertError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("shortlist decoding matches the PyTorch oracle on every kernel path, batched or not", "[oracle][shortlist]") {
  const json e = expected_for(kShortlistFixture);
  const json& want = e["shortlist"];
  static TempDir tmp;  // converted once: the GENERATEs below run this body per path and thread count
  static const std::shared_ptr<const Model> model = load_model(convert_with_shortlist(
      tmp, DType::kF32, oracle_dir(kShortlistFixture) + "/" + want["file"].get<std::string>(), want["first"], want["best"]));
  const ShortlistInfo& info = model->info().shortlist;
  REQUIRE(info.present);
  CHECK(info.first == want["first"]);
  CHECK(info.best == want["best"]);
  CHECK(info.source == "lex.s2t");

  const auto inputs = inputs_of(e);
  const std::string isa = GENERATE(from_range(model_test_isas()));
  const size_t threads = GENERATE(from_range(thread_counts({1, 3})));
  CAPTURE(isa, threads);
  auto created = Translator::create(model, {isa, threads});
  REQUIRE(created.has_value());
  Translator& t = created.value();

  TranslateOptions greedy;
  greedy.max_new_tokens = e["max_new_tokens"];
  greedy.use_shortlist = true;
  TranslateOptions beam = greedy;
  beam.beam_size = beam.n_best = e["beam"]["width"];
  beam.length_penalty = e["beam"]["alpha"].get<double>();
  beam.beam_stop = BeamStop::kFirstK;  // the rule the shortlist fixture was made with

  const auto batched_greedy = translate(t, inputs, greedy);
  const auto batched_beam = translate(t, inputs, beam);
  for (size_t b = 0; b < inputs.size(); ++b) {
    CAPTURE(b);
    const auto alone_greedy = translate(t, {inputs[b]}, greedy);
    const auto alone_beam = translate(t, {inputs[b]}, beam);
    for (const auto* got : {&batched_greedy[b], &alone_greedy[0]}) {
      CHECK(got->hypotheses[0].ids == want["greedy"][b]["ids"].get<std::vector<int32_t>>());
      CHECK(got->hypotheses[0].score == Approx(want["greedy"][b]["score"].get<double>()).margin(1e-4));
    }
    const json& hyps = want["beam"][b];
    for (const auto* got : {&batched_beam[b], &alone_beam[0]}) {
      REQUIRE(got->hypotheses.size() == hyps.size());
      for (size_t k = 0; k < hyps.size(); ++k) {
        CHECK(got->hypotheses[k].ids == hyps[k]["ids"].get<std::vector<int32_t>>());
        CHECK(got->hypotheses[k].score == Approx(hyps[k]["score"].get<double>()).margin(1e-4));
      }
    }
    // Only allowed tokens appear.
    const auto allowed = want["allowed"][b].get<std::vector<int32_t>>();
    for (const auto& h : batched_beam[b].hypotheses)
      for (int32_t id : h.ids) CHECK(std::binary_search(allowed.begin(), allowed.end(), id));
  }
  // The shortlist really restricts: without it the oracle's full-vocabulary output differs.
  greedy.use_shortlist = false;
  const auto full = translate(t, inputs, greedy);
  bool differs = false;
  for (size_t b = 0; b < inputs.size(); ++b)
    differs |= full[b].hypotheses[0].ids != want["greedy"][b]["ids"].get<std::vector<int32_t>>();
  CHECK(differs);
}

TEST_CASE("a shortlist of every token decodes exactly as the full vocabulary", "[shortlist]") {
  TempDir tmp;
  const json e = expected_for(kShortlistFixture);
  const auto inputs = inputs_of(e);
  // Every source token lists every target: the shortlist is the whole vocabulary.
  const auto vocab = load_model(fixture_dir() + "/portable/post_swish_concat_tied-f32.petrel")->info().vocab;
  {
    std::ofstream lex(tmp.file("all.s2t"));
    for (const auto& s : vocab)
      for (const auto& t : vocab) lex << t << " " << s << " 0.5\n";
  }
  const DType dtype = GENERATE(DType::kF32, DType::kInt8, DType::kInt4);
  auto model = load_model(convert_with_shortlist(tmp, dtype, tmp.file("all.s2t"), 0, static_cast<uint32_t>(vocab.size())));
  auto created = Translator::create(model, {"", thread_counts({1, 2}).back()});
  REQUIRE(created.has_value());
  TranslateOptions o;
  o.beam_size = o.n_best = 3;
  o.max_new_tokens = 10;
  const auto full = translate(created.value(), inputs, o);
  o.use_shortlist = true;
  const auto listed = translate(created.value(), inputs, o);
  for (size_t b = 0; b < inputs.size(); ++b) {
    REQUIRE(listed[b].hypotheses.size() == full[b].hypotheses.size());
    for (size_t k = 0; k < full[b].hypotheses.size(); ++k) {
      CHECK(listed[b].hypotheses[k].ids == full[b].hypotheses[k].ids);
      CHECK(listed[b].hypotheses[k].score == full[b].hypotheses[k].score);  // the same arithmetic
    }
  }
}

TEST_CASE("shortlist problems are named: the converter's input, the file, the request", "[shortlist]") {
  TempDir tmp;
  const std::string lex = oracle_dir(kShortlistFixture) + "/lex.s2t";
  auto convert_error = [&](const std::string& lex_path, const std::string& checkpoint = oracle_dir(kShortlistFixture),
                           uint32_t best = 3) {
    try {
      convert_with_shortlist(tmp, DType::kInt8, lex_path, 4, best, checkpoint);
    } catch (const std::exception& ex) {
      return std::string(ex.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(convert_error(tmp.file("missing.s2t")), Contains("missing.s2t") && Contains("cannot open"));
  std::ofstream(tmp.file("bad-line.s2t")) << "w1 w2 0.5\nw1 w2\n";
  CHECK_THAT(convert_error(tmp.file("bad-line.s2t")), Contains("bad-line.s2t:2") && Contains("TARGET SOURCE PROBABILITY"));
  std::ofstream(tmp.file("bad-prob.s2t")) << "w1 w2 1.5\n";
  CHECK_THAT(convert_error(tmp.file("bad-prob.s2t")), Contains("bad-prob.s2t:1") && Contains("not in [0, 1]"));
  std::ofstream(tmp.file("unknown.s2t")) << "x1 y2 0.5\nNULL w2 0.5\n";
  CHECK_THAT(convert_error(tmp.file("unknown.s2t")), Contains("no source token has a candidate"));
  CHECK_THAT(convert_error(lex, oracle_dir("older_export_concat")), Contains("vocab.json"));
  CHECK_THAT(convert_error(lex, oracle_dir(kShortlistFixture), 0), Contains("--shortlist-best"));

  // Hostile shortlist fields are rejected by name.
  auto bytes = read_bytes(convert_with_shortlist(tmp, DType::kInt8, lex, 4, 3));
  auto expect_rejected = [](std::vector<uint8_t> damaged, const std::string& what) {
    auto r = Model::load_from_memory(damaged.data(), damaged.size(), "hostile.petrel");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == ErrorCode::kFormat);
    CHECK_THAT(r.error().message, Contains("hostile.petrel") && Contains(what));
  };
  auto shortlist_of = [](std::vector<uint8_t>& b) { return fb::GetMutableModel(b.data() + 4)->mutable_shortlist(); };
  {
    auto damaged = bytes;
    shortlist_of(damaged)->mutable_candidates16()->Mutate(0, 4000);  // a small vocabulary: 16-bit ids
    expect_rejected(damaged, "shortlist.candidates16[0] = 4000");
  }
  {
    auto damaged = bytes;
    shortlist_of(damaged)->mutable_offsets()->Mutate(5, 1u << 30);
    expect_rejected(damaged, "shortlist.offsets[6] decreases");
  }
  {
    auto damaged = bytes;
    auto* always = shortlist_of(damaged)->mutable_always();
    for (uint32_t i = 0; i < always->size(); ++i) always->Mutate(i, 2);  // no EOS left
    expect_rejected(damaged, "must contain eos_id");
  }

  // Asking for a shortlist the file does not have.
  auto plain = Model::load(fixture_dir() + "/portable/post_swish_concat_tied-int8.petrel");
  REQUIRE(plain.has_value());
  CHECK_FALSE(plain.value()->info().shortlist.present);
  auto created = Translator::create(plain.value());
  REQUIRE(created.has_value());
  TranslateOptions o;
  o.use_shortlist = true;
  auto r = created.value().translate({{5, 0}}, o);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == ErrorCode::kInvalidArgument);
  CHECK_THAT(r.error().message, Contains("no shortlist"));
}

TEST_CASE("a binary shortlist reads as Marian selects from it", "[shortlist][binary_shortlist]") {
  const auto bytes = write_binary_shortlist(small_shortlist());
  SECTION("separate vocabularies: the lists as stored, duplicates dropped") {
    auto t = convert::read_binary_shortlist(bytes.data(), bytes.size(), "lex.bin", 6, 6, 0, false);
    CHECK(t.first == 2);
    CHECK(t.best == 3);
    CHECK(t.always == std::vector<int32_t>{0, 1});
    CHECK(t.offsets == std::vector<uint32_t>{0, 2, 2, 4, 5, 6, 7});
    CHECK(t.candidates == std::vector<int32_t>{3, 5, 1, 4, 0, 2, 5});
  }
  SECTION("a shared vocabulary: each source id is a candidate of itself (Marian's generate with shared_)") {
    auto t = convert::read_binary_shortlist(bytes.data(), bytes.size(), "lex.bin", 6, 6, 0, true);
    CHECK(t.offsets == std::vector<uint32_t>{0, 3, 4, 7, 9, 11, 12});
    // In id order: 0 before {3, 5}; 1 alone; 2 between 1 and 4; 5 is listed already.
    CHECK(t.candidates == std::vector<int32_t>{0, 3, 5, 1, 1, 2, 4, 0, 3, 2, 4, 5});
  }
  SECTION("EOS past firstNum is always allowed too") {
    auto t = convert::read_binary_shortlist(bytes.data(), bytes.size(), "lex.bin", 6, 6, 4, false);
    CHECK(t.always == std::vector<int32_t>{0, 1, 4});
    auto none_first = small_shortlist();
    none_first.first = 0;
    const auto b = write_binary_shortlist(none_first);
    CHECK(convert::read_binary_shortlist(b.data(), b.size(), "lex.bin", 6, 6, 0, false).always ==
          std::vector<int32_t>{0});
  }
  SECTION("from a file; the magic tells it from a text lex.s2t") {
    TempDir tmp;
    write_bytes(tmp.file("lex.50.50.s2t.bin"), bytes);
    std::ofstream(tmp.file("lex.s2t")) << "w1 w2 0.5\n";
    CHECK(convert::is_binary_shortlist(tmp.file("lex.50.50.s2t.bin")));
    CHECK_FALSE(convert::is_binary_shortlist(tmp.file("lex.s2t")));
    CHECK_FALSE(convert::is_binary_shortlist(tmp.file("missing.bin")));
    auto t = convert::read_binary_shortlist(tmp.file("lex.50.50.s2t.bin"), 6, 6, 0, false);
    CHECK(t.candidates.size() == 7);
    CHECK_THAT(binary_error({}), Contains("lex.bin") && Contains("not a binary shortlist"));
    try {
      convert::read_binary_shortlist(tmp.file("missing.bin"), 6, 6, 0, false);
      FAIL("no error");
    } catch (const convert::ConvertError& e) {
      CHECK_THAT(e.what(), Contains("missing.bin") && Contains("cannot open"));
    }
  }
  SECTION("trailing empty lists and an empty table are fine") {
    BinaryShortlist s;
    s.offsets = {0, 1, 1, 1, 1, 1, 1};
    s.ids = {2};
    auto b = write_binary_shortlist(s);
    CHECK(convert::read_binary_shortlist(b.data(), b.size(), "lex.bin", 6, 6, 0, false).candidates ==
          std::vector<int32_t>{2});
    s.offsets.assign(7, 0);
    s.ids.clear();
    b = write_binary_shortlist(s);
    CHECK(convert::read_binary_shortlist(b.data(), b.size(), "lex.bin", 6, 6, 0, false).candidates.empty());
  }
}

TEST_CASE("the binary shortlist's checksum covers whole u64 words only, as Marian's", "[shortlist][binary_shortlist]") {
  // 7 ids: the last one's 4 bytes are not part of any whole word after the header.
  auto s = small_shortlist();
  s.offsets = {0, 2, 2, 5, 6, 7, 7};
  s.ids = {3, 5, 1, 4, 4, 0, 2};
  auto bytes = write_binary_shortlist(s);
  bytes[bytes.size() - 4] = 5;  // id 2 -> 5, checksum unchanged
  auto t = convert::read_binary_shortlist(bytes.data(), bytes.size(), "lex.bin", 6, 6, 0, false);
  CHECK(t.candidates.back() == 5);
  bytes[bytes.size() - 4] = 9;  // still read, still range-checked
  CHECK_THAT(binary_error(bytes), Contains("shortLists[6] = 9 is not a target token id"));
  bytes[bytes.size() - 5] ^= 1;  // inside the last whole word
  CHECK_THAT(binary_error(bytes), Contains("header.checksum"));
}

TEST_CASE("binary shortlist problems are named by field and index", "[shortlist][binary_shortlist]") {
  const auto good = write_binary_shortlist(small_shortlist());
  auto damaged = [](auto change) {
    auto s = small_shortlist();
    change(s);
    return write_binary_shortlist(s);
  };
  SECTION("not one: magic, header") {
    CHECK_THAT(binary_error(damaged([](auto& s) { s.magic ^= 1; })), Contains("lex.bin: not a binary shortlist"));
    CHECK_THAT(binary_error({good.begin(), good.begin() + 7}), Contains("not a binary shortlist"));
    CHECK_THAT(binary_error({good.begin(), good.begin() + 40}), Contains("truncated") && Contains("48-byte header"));
  }
  SECTION("the checksum") {
    auto b = good;
    b[good.size() - 8] ^= 0x10;
    CHECK_THAT(binary_error(b), Contains("header.checksum") && Contains("corrupted"));
    b = good;
    b[8] ^= 1;
    CHECK_THAT(binary_error(b), Contains("header.checksum"));
  }
  SECTION("sizes: truncated, trailing bytes, huge declarations") {
    CHECK_THAT(binary_error({good.begin(), good.end() - 4}), Contains("truncated") && Contains("header.shortListsSize = 8"));
    CHECK_THAT(binary_error({good.begin(), good.begin() + 48 + 30}),
               Contains("truncated") && Contains("header.wordToOffsetSize = 7"));
    auto longer = good;
    longer.insert(longer.end(), {0, 0, 0});
    CHECK_THAT(binary_error(longer), Contains("3 trailing bytes") && Contains("header.shortListsSize = 8"));
    CHECK_THAT(binary_error(damaged([](auto& s) { s.ids_size = 6; })), Contains("8 trailing bytes"));
    CHECK_THAT(binary_error(damaged([](auto& s) { s.ids_size = uint64_t{1} << 60; })),
               Contains("truncated") && Contains("header.shortListsSize = 1152921504606846976"));
    CHECK_THAT(binary_error(damaged([](auto& s) { s.offsets_size = uint64_t{1} << 60; })),
               Contains("truncated") && Contains("header.wordToOffsetSize = 1152921504606846976"));
    // Sizes whose byte counts wrap to 0 in 64 bits (2^61 * 8, 2^62 * 4): still too big.
    CHECK_THAT(binary_error(damaged([](auto& s) { s.offsets_size = uint64_t{1} << 61; })), Contains("truncated"));
    CHECK_THAT(binary_error(damaged([](auto& s) { s.ids_size = uint64_t{1} << 62; })), Contains("truncated"));
    CHECK_THAT(binary_error(damaged([](auto& s) { s.ids_size = UINT64_MAX - 1; })), Contains("truncated"));
  }
  SECTION("the vocabularies") {
    CHECK_THAT(binary_error(good, 7), Contains("header.wordToOffsetSize = 7, expected the source vocabulary size + 1 = 8"));
    CHECK_THAT(binary_error(good, 5), Contains("header.wordToOffsetSize = 7"));
    CHECK_THAT(binary_error(good, 6, 5), Contains("shortLists[1] = 5 is not a target token id (target vocabulary of 5)"));
    CHECK_THAT(binary_error(damaged([](auto& s) { s.ids[3] = 0xFFFFFFFF; })), Contains("shortLists[3] = 4294967295"));
    CHECK_THAT(binary_error(damaged([](auto& s) { s.first = 7; })), Contains("header.firstNum = 7 exceeds"));
    CHECK_THAT(binary_error(damaged([](auto& s) { s.best = uint64_t{1} << 40; })), Contains("header.bestNum = "));
    CHECK_THAT(binary_error(good, 6, 6, 6), Contains("eos_id 6 is not a target token id"));
    CHECK_THAT(binary_error(good, 6, 6, -1), Contains("eos_id -1"));
    CHECK_THAT(binary_error(good, 6, 7, 0, true), Contains("shared vocabulary needs equal"));
  }
  SECTION("the offsets") {
    CHECK_THAT(binary_error(damaged([](auto& s) { s.offsets[0] = 1; })), Contains("wordToOffset[0] = 1, must be 0"));
    CHECK_THAT(binary_error(damaged([](auto& s) { s.offsets[3] = 1; })),
               Contains("wordToOffset[3] = 1 decreases (wordToOffset[2] = 2)"));
    CHECK_THAT(binary_error(damaged([](auto& s) { s.offsets[6] = 7; })),
               Contains("wordToOffset[6] = 7, must equal header.shortListsSize = 8"));
    // Past the ids and back: refused before any id beyond the array is read.
    CHECK_THAT(binary_error(damaged([](auto& s) { s.offsets[2] = uint64_t{1} << 62; })),
               Contains("wordToOffset[2] = 4611686018427387904 exceeds header.shortListsSize = 8"));
    CHECK_THAT(binary_error(damaged([](auto& s) { s.best = 2; })),
               Contains("source id 2 lists 3 targets, more than header.bestNum = 2"));
  }
}

TEST_CASE("a binary shortlist of 200,000 source ids reads in one pass", "[shortlist][binary_shortlist]") {
  // Shaped like Firefox's lex.50.50.*.s2t.bin over a large vocabulary; a reader that is
  // quadratic anywhere (per list, per duplicate) would take minutes here.
  constexpr uint32_t kVocab = 200000, kPerSource = 8;
  BinaryShortlist s;
  s.first = s.best = 50;
  s.offsets.reserve(kVocab + 1);
  s.ids.reserve(size_t{kVocab} * kPerSource);
  for (uint32_t source = 0; source < kVocab; ++source) {
    s.offsets.push_back(s.ids.size());
    for (uint32_t k = 0; k < kPerSource; ++k) s.ids.push_back((source * 7919u + k * 4001u) % kVocab);
  }
  s.offsets.push_back(s.ids.size());
  const auto bytes = write_binary_shortlist(s);
  auto t = convert::read_binary_shortlist(bytes.data(), bytes.size(), "lex.bin", kVocab, kVocab, 0, true);
  CHECK(t.offsets.size() == kVocab + 1);
  CHECK(t.offsets.back() == t.candidates.size());
  CHECK(t.candidates.size() >= size_t{kVocab} * kPerSource);
  CHECK(t.always.size() == 50);
}
