// Lexical shortlists: the converter stores Marian-format tables, the loader checks
// them, and decoding over a shortlist matches the PyTorch oracle restricted to each
// sentence's allowed tokens, whatever the batching.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "convert/convert.h"
#include "petrel/translator.h"
#include "petrel_generated.h"
#include "support/test_support.h"

using namespace petrel;
using namespace petrel::test;
using Catch::Matchers::Contains;
using json = nlohmann::json;

namespace {

const std::string kFixture = "post_swish_concat_tied";

std::string convert_with_shortlist(const TempDir& tmp, DType dtype, const std::string& lex, uint32_t first,
                                   uint32_t best, const std::string& checkpoint = oracle_dir(kFixture)) {
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

}  // namespace

TEST_CASE("shortlist decoding matches the PyTorch oracle on every kernel path, batched or not", "[oracle][shortlist]") {
  const json e = expected_for(kFixture);
  const json& want = e["shortlist"];
  TempDir tmp;
  auto model = load_model(convert_with_shortlist(tmp, DType::kF32, oracle_dir(kFixture) + "/" + want["file"].get<std::string>(),
                                           want["first"], want["best"]));
  const ShortlistInfo& info = model->info().shortlist;
  REQUIRE(info.present);
  CHECK(info.first == want["first"]);
  CHECK(info.best == want["best"]);
  CHECK(info.source == "lex.s2t");

  const auto inputs = e["inputs"].get<std::vector<std::vector<int32_t>>>();
  const std::string isa = GENERATE(from_range(runnable_isas()));
  const size_t threads = GENERATE(1, 3);
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
  const json e = expected_for(kFixture);
  const auto inputs = e["inputs"].get<std::vector<std::vector<int32_t>>>();
  // Every source token lists every target: the shortlist is the whole vocabulary.
  const auto vocab = load_model(fixture_dir() + "/portable/post_swish_concat_tied-f32.petrel")->info().vocab;
  {
    std::ofstream lex(tmp.file("all.s2t"));
    for (const auto& s : vocab)
      for (const auto& t : vocab) lex << t << " " << s << " 0.5\n";
  }
  const DType dtype = GENERATE(DType::kF32, DType::kInt8, DType::kInt4);
  auto model = load_model(convert_with_shortlist(tmp, dtype, tmp.file("all.s2t"), 0, static_cast<uint32_t>(vocab.size())));
  auto created = Translator::create(model, {"", 2});
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
  const std::string lex = oracle_dir(kFixture) + "/lex.s2t";
  auto convert_error = [&](const std::string& lex_path, const std::string& checkpoint = oracle_dir(kFixture),
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
  CHECK_THAT(convert_error(tmp.file("unknown.s2t")), Contains("no line names two tokens"));
  CHECK_THAT(convert_error(lex, oracle_dir("older_export_concat")), Contains("vocab.json"));
  CHECK_THAT(convert_error(lex, oracle_dir(kFixture), 0), Contains("--shortlist-best"));

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
    shortlist_of(damaged)->mutable_candidates()->Mutate(0, 4000);
    expect_rejected(damaged, "shortlist.candidates[0] = 4000");
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
