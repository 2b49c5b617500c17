// A checkpoint's own decoding settings (config.json / generation_config.json) travel in
// the model file and apply whenever the caller leaves an option unset; the caller's
// value always wins. Expected outputs come from the PyTorch oracle
// (tools/reference/make_fixtures.py, fixture generation_eos5: EOS id 5, forced EOS,
// beam 3, length penalty 0.8, max_length 9 in generation_config.json, which wins over
// config.json's num_beams 1 and max_length 40).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <fstream>

#include "convert/convert.h"
#include "petrel/petrel.h"
#include "petrel/translator.h"
#include "support/test_support.h"

using namespace petrel;
using namespace petrel::test;
using Catch::Matchers::Contains;
using json = nlohmann::json;

namespace {

std::string convert_to_file(const std::string& dir, const TempDir& tmp, convert::ConvertReport* report = nullptr) {
  convert::ConvertOptions o;
  o.checkpoint_dir = dir;
  o.output_path = tmp.file("m.petrel");
  o.linear_dtype = o.embedding_dtype = DType::kF32;
  auto r = convert::convert_checkpoint(o);
  if (report) *report = r;
  return o.output_path;
}

void require_hypotheses(const std::vector<Translation>& got, const json& want, size_t n) {
  REQUIRE(got.size() == want.size());
  for (size_t b = 0; b < got.size(); ++b) {
    REQUIRE(got[b].hypotheses.size() == n);
    for (size_t k = 0; k < n; ++k) {
      const json& w = want[b].is_array() ? want[b][k] : want[b];
      INFO("sentence " << b << ", hypothesis " << k);
      CHECK(got[b].hypotheses[k].ids == w["ids"].get<std::vector<int32_t>>());
      CHECK(got[b].hypotheses[k].score == Approx(w["score"].get<double>()).epsilon(1e-4));
    }
  }
}

}  // namespace

TEST_CASE("generation_config.json's settings are stored and decode as the oracle's generate()", "[generation]") {
  TempDir tmp;
  convert::ConvertReport report;
  auto model = load_model(convert_to_file(oracle_dir("generation_eos5"), tmp, &report));
  const json e = expected_for("generation_eos5");
  const json& g = e["generation"];
  const GenerationDefaults& defaults = model->info().generation;
  CHECK(defaults.from_checkpoint);
  CHECK(defaults.num_beams == g["num_beams"]);
  CHECK(defaults.max_length == g["max_new_tokens"].get<uint32_t>() + 1);
  CHECK(defaults.length_penalty == Approx(g["length_penalty"].get<double>()));
  CHECK(defaults.beam_stop == BeamStop::kHeuristic);
  CHECK(defaults.forced_eos_id == g["forced_eos_id"]);
  CHECK(model->info().eos_id == 5);
  bool noted = false;
  for (const auto& n : report.notes) noted |= n.find("decoding defaults from generation_config.json: beam 3") == 0;
  CHECK(noted);

  auto created = Translator::create(model);
  REQUIRE(created.has_value());
  Translator& translator = created.value();
  const auto inputs = inputs_of(e);

  auto resolved = resolve_options(*model, {});
  REQUIRE(resolved.has_value());
  CHECK(resolved.value().beam_size == 3);
  CHECK(resolved.value().max_new_tokens == 8);
  CHECK(*resolved.value().length_penalty == Approx(0.8));
  CHECK(resolved.value().beam_stop == BeamStop::kHeuristic);

  // Nothing set: the checkpoint's beam search (best hypothesis), then all three.
  auto r = translator.translate(inputs, {});
  REQUIRE(r.has_value());
  std::vector<json> best;
  for (const auto& hyps : g["beam"]) best.push_back(hyps[0]);
  require_hypotheses(r.value(), best, 1);
  TranslateOptions three;
  three.n_best = 3;
  r = translator.translate(inputs, three);
  REQUIRE(r.has_value());
  require_hypotheses(r.value(), g["beam"], 3);
  for (const auto& t : r.value())  // the forced EOS ends every hypothesis by the 8th token
    for (const auto& h : t.hypotheses) CHECK(h.ids.size() <= 7);

  // The caller's options win: greedy over the same length, with the model's penalty.
  TranslateOptions greedy;
  greedy.beam_size = 1;
  r = translator.translate(inputs, greedy);
  REQUIRE(r.has_value());
  require_hypotheses(r.value(), g["greedy"], 1);
  greedy.max_new_tokens = 12;
  greedy.length_penalty = 1.0;
  r = translator.translate(inputs, greedy);
  REQUIRE(r.has_value());
  require_hypotheses(r.value(), e["greedy"], 1);
}

TEST_CASE("without generation_config.json the settings come from config.json", "[generation]") {
  TempDir tmp;
  copy_dir(oracle_dir("generation_eos5"), tmp.file("ckpt"));
  std::remove(tmp.file("ckpt/generation_config.json").c_str());
  auto model = load_model(convert_to_file(tmp.file("ckpt"), tmp));
  const GenerationDefaults& g = model->info().generation;
  CHECK(g.num_beams == 1);
  CHECK(g.max_length == 40);
  CHECK(g.forced_eos_id == 5);
  CHECK(g.length_penalty == 1.0);
  // A file written before format 1.2 records none: the engine's own defaults.
  auto old = load_model(fixture_dir() + "/portable/post_swish_concat_tied-f32.petrel");
  CHECK(old->info().generation.num_beams == 1);
  auto resolved = resolve_options(*old, {});
  REQUIRE(resolved.has_value());
  CHECK(resolved.value().beam_size == 1);
  CHECK(resolved.value().max_new_tokens == std::min<size_t>(256, old->info().max_positions));
  CHECK(resolved.value().beam_stop == BeamStop::kHeuristic);
}

TEST_CASE("unsupported generation settings are refused or reported by name", "[generation]") {
  TempDir tmp;
  copy_dir(oracle_dir("generation_eos5"), tmp.file("ckpt"));
  const std::string path = tmp.file("ckpt/generation_config.json");
  auto with = [&](const std::string& key, const json& value) {
    json g = json::parse(std::ifstream(oracle_dir("generation_eos5") + "/generation_config.json"));
    g[key] = value;
    std::ofstream(path) << g.dump();
  };
  auto error_of = [&]() -> std::string {
    try {
      convert_to_file(tmp.file("ckpt"), tmp);
    } catch (const convert::ConvertError& e) {
      return e.what();
    }
    return "";
  };
  with("early_stopping", "never");
  CHECK_THAT(error_of(), Contains("generation_config.json") && Contains("early_stopping \"never\" is not supported"));
  with("num_beams", 100);
  CHECK_THAT(error_of(), Contains("generation_config.json") && Contains("num_beams 100 exceeds 64"));
  with("length_penalty", "long");
  CHECK_THAT(error_of(), Contains("length_penalty must be a number"));
  with("eos_token_id", 7);
  CHECK_THAT(error_of(), Contains("eos_token_id 7 differs from config.json's 5"));
  with("repetition_penalty", 1.3);
  convert::ConvertReport report;
  convert_to_file(tmp.file("ckpt"), tmp, &report);
  bool noted = false;
  for (const auto& n : report.notes) noted |= n.find("not applied by Petrel: repetition_penalty = 1.3") == 0;
  CHECK(noted);
}

TEST_CASE("the two beam stop rules differ on a fixture, so both are really tested", "[generation]") {
  const json e = expected_for("post_swish_concat_tied");
  CHECK(e["beam"]["results"] != e["beam"]["results_heuristic"]);
}

TEST_CASE("C API: unset options take the model's defaults, beam_stop is read by struct size", "[generation][capi]") {
  TempDir tmp;
  const std::string path = convert_to_file(oracle_dir("generation_eos5"), tmp);
  const json e = expected_for("generation_eos5");
  petrel_model* model = nullptr;
  REQUIRE(petrel_model_load(path.c_str(), &model) == PETREL_OK);
  petrel_session* session = nullptr;
  REQUIRE(petrel_session_create(model, nullptr, 1, &session) == PETREL_OK);
  const auto inputs = inputs_of(e);
  auto best_ids = [&](const petrel_options& options) {
    std::vector<const int32_t*> ptrs;
    std::vector<size_t> lengths;
    for (const auto& in : inputs) {
      ptrs.push_back(in.data());
      lengths.push_back(in.size());
    }
    petrel_result* result = nullptr;
    std::vector<std::vector<int32_t>> out;
    if (petrel_translate_ids(session, ptrs.data(), lengths.data(), ptrs.size(), &options, &result) != PETREL_OK)
      return out;
    for (size_t i = 0; i < inputs.size(); ++i) {
      size_t n = 0;
      const int32_t* ids = petrel_result_ids(result, i, 0, &n);
      out.emplace_back(ids, ids + n);
    }
    petrel_result_free(result);
    return out;
  };
  std::vector<std::vector<int32_t>> model_beam, model_greedy;
  for (const auto& hyps : e["generation"]["beam"]) model_beam.push_back(hyps[0]["ids"].get<std::vector<int32_t>>());
  for (const auto& h : e["generation"]["greedy"]) model_greedy.push_back(h["ids"].get<std::vector<int32_t>>());

  petrel_options options;
  petrel_options_init(&options);
  CHECK(options.beam_size == 0);
  CHECK(std::isnan(options.length_penalty));
  CHECK(options.beam_stop == PETREL_BEAM_STOP_DEFAULT);
  CHECK(best_ids(options) == model_beam);
  options.beam_size = 1;
  CHECK(best_ids(options) == model_greedy);
  options.beam_stop = 7;
  CHECK(best_ids(options).empty());
  CHECK_THAT(petrel_last_error(), Contains("beam_stop = 7"));
  // A caller built before beam_stop existed: its struct ends before the field, which
  // is then never read (here it holds garbage).
  options.struct_size = offsetof(petrel_options, beam_stop);
  CHECK(best_ids(options) == model_greedy);
  petrel_session_free(session);
  petrel_model_free(model);
}
