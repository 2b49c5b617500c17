// End-to-end against the PyTorch oracle (tools/reference/make_fixtures.py):
// f32 models match encoder states and logits to 1e-4 and greedy/beam outputs
// exactly; int8 and f16 models are judged by teacher-forced top-1 agreement.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>

#include "convert/convert.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "model_access.h"
#include "models/encoder_decoder.h"
#include "petrel/batch_translator.h"
#include "petrel/petrel.h"
#include "petrel/translator.h"
#include "support/test_support.h"

using namespace petrel;
using namespace petrel::test;
using Catch::Matchers::Contains;
using json = nlohmann::json;

namespace {

const std::vector<std::string> kFixtures = {"post_swish_concat_tied", "pre_gelu_interleaved_untied",
                                            "post_relu_learned_unshared", "older_export_concat", "generation_eos5",
                                            "separate_vocab_untied", "tc_big_d1024"};

// The multilingual families (tools/reference/make_family_fixtures.py): their searches
// start with a forced target-language token.
const std::vector<std::string> kFamilyFixtures = {"m2m100_tiny", "nllb_d1024", "mbart50_tiny"};

std::vector<std::string> all_fixtures() {
  std::vector<std::string> all = kFixtures;
  all.insert(all.end(), kFamilyFixtures.begin(), kFamilyFixtures.end());
  return all;
}

// The two fixtures of d_model 1024.
bool is_big_fixture(const std::string& name) { return name == "tc_big_d1024" || name == "nllb_d1024"; }

// The fixtures a test runs that checks logic the kernels do not decide (pads, the CLI,
// the f16 KV cache: the attention kernels' f16 paths are compared with the reference at
// every size by the [kernels] tests): all of them, or under PETREL_TEST_SUBSET those of
// d_model < 1024 -- the f32 oracle case still runs the big ones on every CPU, and in
// emulated floating point one of them costs more than the others together.
std::vector<std::string> logic_fixtures(std::vector<std::string> names) {
  if (subset_stride() > 1) names.erase(std::remove_if(names.begin(), names.end(), is_big_fixture), names.end());
  return names;
}

// The fixture's searches ran with its forced_bos_id (the target language) when it
// has one; given per call here, also where the checkpoint itself names it.
TranslateOptions with_fixture_language(const json& e, TranslateOptions o) {
  if (e.contains("forced_bos_id") && !e["forced_bos_id"].is_null()) o.target_prefix = {e["forced_bos_id"].get<int32_t>()};
  return o;
}

// Greedy decoding as the fixtures' "greedy" sections were made (not the model's own
// defaults, which generation_eos5 sets otherwise).
TranslateOptions greedy_options(size_t max_new) {
  TranslateOptions o;
  o.beam_size = 1;
  o.length_penalty = 1.0;
  o.max_new_tokens = max_new;
  return o;
}

// The fixture's beam search ("beam": width, alpha) on top of `o`, stopping by `rule`.
TranslateOptions fixture_beam_options(const json& e, TranslateOptions o, BeamStop rule = BeamStop::kFirstK) {
  o.beam_size = o.n_best = e["beam"]["width"];
  o.length_penalty = e["beam"]["alpha"].get<double>();
  o.beam_stop = rule;
  return o;
}

// Converted once per run or process and dtype (shared_file; tc_big_d1024 alone is 50 MB
// of f32 weights); `tmp` is kept for the callers' sake. `output` sets the output
// projection's dtype (the tied table's), else it is `dtype` too.
std::string convert_fixture(const std::string& name, DType dtype, const TempDir& /*tmp*/,
                            std::optional<DType> output = std::nullopt) {
  const std::string file =
      name + "-" + to_string(dtype) + (output ? std::string("-out-") + to_string(*output) : "") + ".petrel";
  return shared_file(file, [&](const std::string& out) {
    convert::ConvertOptions o;
    o.checkpoint_dir = fixture_checkpoint(name);
    o.output_path = out;
    o.linear_dtype = o.embedding_dtype = dtype;
    o.output_dtype = output;
    use_fixture_options(o);
    convert::convert_checkpoint(o);
  });
}

Translator make_translator(std::shared_ptr<const Model> model, const std::string& isa = "", size_t threads = 1) {
  auto t = Translator::create(std::move(model), {isa, threads});
  if (!t) FAIL(t.error().message);
  return std::move(t.value());
}


// The first decoder step (the start token for every sentence at once, caches of
// cache_type): the worst relative error of a sentence's logits against the oracle's.
double first_step_error(const models::EncoderDecoder& graph, const Model& model, const models::EncoderOutput& enc,
                        const json& e, DType cache_type, layers::Workspace& ws) {
  const ModelInfo& info = model.info();
  const size_t sentences = enc.length.size();
  models::DecoderState st;
  std::vector<size_t> rows(sentences);
  for (size_t b = 0; b < sentences; ++b) rows[b] = b;
  graph.start_decoding(enc, rows, 1, cache_type, st, ws);
  std::vector<int32_t> start(sentences, info.decoder_start_id);
  std::vector<float> logits(sentences * info.target_vocab_size);
  models::OutputVocabulary everything;
  everything.use_all(detail::ModelAccess::weights(model));
  graph.decode_step(start.data(), sentences, 0, st, ws, everything, logits.data());
  double worst = 0;
  for (size_t b = 0; b < sentences; ++b)
    worst = std::max(worst, relative_error(&logits[b * info.target_vocab_size],
                                           e["first_step_logits"][b].get<std::vector<float>>()));
  return worst;
}

// Teacher-forced top-1 agreement of `model` with the oracle's argmax over every
// position of every sentence's greedy output.
std::pair<size_t, size_t> teacher_forced_agreement(const Model& model, const json& e, const std::string& isa,
                                                   DType cache_type = DType::kF32) {
  threads::ThreadPool pool(1);
  models::EncoderDecoder graph(detail::ModelAccess::weights(model), table_named(isa), pool);
  layers::Workspace ws;
  models::EncoderOutput enc;
  auto inputs = inputs_of(e);
  graph.encode(inputs, enc, ws);
  const ModelInfo& info = model.info();
  size_t agree = 0, total = 0;
  for (size_t b = 0; b < inputs.size(); ++b) {
    auto tokens = e["teacher_forced"][b]["tokens"].get<std::vector<int32_t>>();
    auto argmax = e["teacher_forced"][b]["argmax"].get<std::vector<int32_t>>();
    models::DecoderState st;
    graph.start_decoding(enc, {b}, tokens.size(), cache_type, st, ws);
    std::vector<float> logits(info.target_vocab_size);
    models::OutputVocabulary everything;
    everything.use_all(detail::ModelAccess::weights(model));
    for (size_t t = 0; t < tokens.size(); ++t) {
      graph.decode_step(&tokens[t], 1, t, st, ws, everything, logits.data());
      for (int32_t bad : info.bad_word_ids) logits[bad] = -INFINITY;  // argmax of log-softmax = of logits
      auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
      agree += best == argmax[t];
      ++total;
    }
  }
  return {agree, total};
}

// Encodes `inputs` on `isa` and compares the encoder states and the first decoder step's
// logits with the oracle's (`expected`: a fixture's results or its padded section).
void check_encoder_and_first_step(const Model& model, const std::string& isa,
                                  const std::vector<std::vector<int32_t>>& inputs, const json& expected) {
  threads::ThreadPool pool(1);
  models::EncoderDecoder graph(detail::ModelAccess::weights(model), table_named(isa), pool);
  layers::Workspace ws;
  models::EncoderOutput enc;
  graph.encode(inputs, enc, ws);
  const size_t d = model.info().d_model;
  for (size_t b = 0; b < inputs.size(); ++b) {
    INFO("input " << b);
    std::vector<float> want;
    for (const auto& row : expected["encoder_states"][b])
      for (float v : row) want.push_back(v);
    REQUIRE(want.size() == enc.length[b] * d);
    CHECK(relative_error(&enc.states[enc.offset[b] * d], want) < 1e-4);
  }
  CHECK(first_step_error(graph, model, enc, expected, DType::kF32, ws) < 1e-4);
}

}  // namespace

TEST_CASE("f32 models match the PyTorch oracle on every kernel path", "[oracle]") {
  const std::string name = GENERATE(from_range(all_fixtures()));
  const std::string isa = GENERATE(from_range(model_test_isas()));
  INFO(name << " on " << isa);
  CAPTURE(name, isa);
  TempDir tmp;
  json e = expected_for(name);
  auto model = load_model(convert_fixture(name, DType::kF32, tmp));
  auto inputs = inputs_of(e);
  const size_t max_new = e["max_new_tokens"];

  check_encoder_and_first_step(*model, isa, inputs, e);

  // Outputs must not depend on the thread count (the pool splits output panels or rows).
  // A loop, not a GENERATE: that would convert and encode again per thread count. Under
  // a subset one thread (the kernels' own thread test still runs there).
  for (size_t threads : subset_stride() > 1 ? thread_counts({1}) : thread_counts({1, 3})) {
    INFO(threads << " threads");
    Translator translator = make_translator(model, isa, threads);
    REQUIRE(std::string(translator.isa()) == isa);
    const TranslateOptions greedy = with_fixture_language(e, greedy_options(max_new));
    auto g = translator.translate(inputs, greedy);
    REQUIRE(g.has_value());
    for (size_t b = 0; b < inputs.size(); ++b) {
      const auto& want = e["greedy"][b];
      REQUIRE(g.value()[b].hypotheses.size() == 1);
      CHECK(g.value()[b].hypotheses[0].ids == want["ids"].get<std::vector<int32_t>>());
      CHECK(g.value()[b].hypotheses[0].score == Approx(want["score"].get<double>()).epsilon(1e-4));
    }

    // Both beam stop rules: stop once K have finished, and Hugging Face's default. Under a
    // subset the big fixtures decode greedily only: their beams search as the small ones'
    // do, at minutes per emulated run.
    if (subset_stride() > 1 && is_big_fixture(name)) continue;
    for (auto [rule, key] : {std::pair{BeamStop::kFirstK, "results"}, std::pair{BeamStop::kHeuristic, "results_heuristic"}}) {
      TranslateOptions beam = fixture_beam_options(e, with_fixture_language(e, {}), rule);
      beam.max_new_tokens = max_new;
      auto r = translator.translate(inputs, beam);
      REQUIRE(r.has_value());
      for (size_t b = 0; b < inputs.size(); ++b) {
        const auto& want = e["beam"][key][b];
        const auto& got = r.value()[b].hypotheses;
        INFO(to_string(rule) << " beam stop, sentence " << b);
        REQUIRE(got.size() == want.size());
        for (size_t k = 0; k < got.size(); ++k) {
          INFO("hypothesis " << k);
          CHECK(got[k].ids == want[k]["ids"].get<std::vector<int32_t>>());
          CHECK(got[k].score == Approx(want[k]["score"].get<double>()).epsilon(1e-4));
        }
      }
    }

    // Beam width 1 is greedy, including the score.
    TranslateOptions one = greedy;
    one.beam_size = 1;
    auto o = translator.translate(inputs, one);
    for (size_t b = 0; b < inputs.size(); ++b) CHECK(o.value()[b].hypotheses[0].ids == g.value()[b].hypotheses[0].ids);
  }

  // f32 teacher-forced agreement is total.
  auto [agree, total] = teacher_forced_agreement(*model, e, isa);
  CHECK(agree == total);
}

// Pad ids inside inputs (make_fixtures.padded_inputs: pads first, in the middle, several
// in a row, at the end, around EOS alone): transformers' generate() masks them, and the
// tokens kept read the family's positions (Marian and mBART: their index in the input;
// M2M100 / NLLB: their count among the tokens kept). The engine leaves the pads out:
// encoder states of the tokens kept, first-step logits, greedy and beam outputs and
// scores match the oracle's, through the graph, the Translator and the BatchTranslator.
TEST_CASE("pad ids inside inputs are masked as transformers' generate() masks them", "[oracle][pads]") {
  const std::string name = GENERATE(from_range(logic_fixtures(all_fixtures())));
  const std::string isa = GENERATE(from_range(model_test_isas()));
  CAPTURE(name, isa);
  TempDir tmp;
  const json e = expected_for(name);
  const json& p = e["padded"];
  auto model = load_model(convert_fixture(name, DType::kF32, tmp));
  const ModelInfo& info = model->info();
  const auto inputs = inputs_of(p);
  const size_t max_new = e["max_new_tokens"];
  for (const auto& input : inputs) REQUIRE(std::count(input.begin(), input.end(), info.pad_id) > 0);

  check_encoder_and_first_step(*model, isa, inputs, p);

  Translator translator = make_translator(model, isa);
  const TranslateOptions greedy = with_fixture_language(e, greedy_options(max_new));
  auto g = translator.translate(inputs, greedy);
  REQUIRE(g.has_value());
  for (size_t b = 0; b < inputs.size(); ++b) {
    INFO("input " << b);
    CHECK(g.value()[b].hypotheses.at(0).ids == p["greedy"][b]["ids"].get<std::vector<int32_t>>());
    CHECK(g.value()[b].hypotheses.at(0).score == Approx(p["greedy"][b]["score"].get<double>()).epsilon(1e-4));
  }
  const TranslateOptions beam = fixture_beam_options(e, greedy);
  auto r = translator.translate(inputs, beam);
  REQUIRE(r.has_value());
  for (size_t b = 0; b < inputs.size(); ++b) {
    const auto& want = p["beam"][b];
    const auto& got = r.value()[b].hypotheses;
    INFO("input " << b);
    REQUIRE(got.size() == want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      CHECK(got[k].ids == want[k]["ids"].get<std::vector<int32_t>>());
      CHECK(got[k].score == Approx(want[k]["score"].get<double>()).epsilon(1e-4));
    }
  }

  auto batch = BatchTranslator::create(model, {isa, 1});
  REQUIRE(batch.has_value());
  size_t delivered = 0;
  REQUIRE(batch.value()
              .translate(inputs, greedy, BatchOptions{},
                         [&](size_t i, Result<Translation>&& t) {
                           ++delivered;
                           REQUIRE(t.has_value());
                           CHECK(t.value().hypotheses.at(0).ids == p["greedy"][i]["ids"].get<std::vector<int32_t>>());
                         })
              .has_value());
  CHECK(delivered == inputs.size());
}

// What generate() does with an input of nothing but pads (attend to every masked key
// alike) translates nothing of it: refused by name, by the Translator and for that input
// alone by the BatchTranslator. The length limit counts the positions an input takes: every
// token for Marian and mBART (transformers reads their position tables over the whole
// input), the tokens besides pads for M2M100 / NLLB. A model whose pad is EOS masks nothing.
TEST_CASE("pads: inputs of only pads are refused, limits count positions, pad == EOS masks nothing",
          "[runtime][pads]") {
  TempDir tmp;
  auto marian = load_model(convert_fixture("post_swish_concat_tied", DType::kF32, tmp));
  auto m2m100 = load_model(convert_fixture("m2m100_tiny", DType::kF32, tmp));
  for (const auto& model : {marian, m2m100}) {
    const ModelInfo& info = model->info();
    CAPTURE(info.source);
    REQUIRE(info.pad_id >= 0);
    REQUIRE(info.pad_id != info.eos_id);
    REQUIRE(info.max_positions == 64);
    const int32_t pad = info.pad_id, eos = info.eos_id, word = 4;
    REQUIRE(word != pad);
    REQUIRE(word != eos);
    Translator translator = make_translator(model);
    const TranslateOptions o = greedy_options(4);
    auto only_pads = translator.translate({{word, eos}, {pad, pad}}, o);
    REQUIRE_FALSE(only_pads.has_value());
    CHECK(only_pads.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(only_pads.error().message,
               Contains("input 2 holds nothing but pad tokens (id " + std::to_string(pad) + ")"));
    CHECK(translator.translate({{pad, pad, eos, pad}}, o).has_value());

    auto batch = BatchTranslator::create(model);
    REQUIRE(batch.has_value());
    std::vector<Result<Translation>> results;
    REQUIRE(batch.value()
                .translate({{word, eos}, {pad}, {pad, word, eos}}, o, BatchOptions{},
                           [&](size_t, Result<Translation>&& t) { results.push_back(std::move(t)); })
                .has_value());
    REQUIRE(results.size() == 3);
    CHECK(results[0].has_value());
    REQUIRE_FALSE(results[1].has_value());
    CHECK_THAT(results[1].error().message, Contains("input 2 holds nothing but pad tokens"));
    CHECK(results[2].has_value());

    // 64 tokens besides pads and 3 pads: 67 positions for Marian, 64 for M2M100.
    std::vector<int32_t> long_input(63, word);
    long_input.push_back(eos);
    long_input.insert(long_input.begin() + 10, 3, pad);
    const bool counts_pads = model == marian;
    auto r = translator.translate({long_input}, o);
    CHECK(r.has_value() == !counts_pads);
    if (counts_pads) CHECK_THAT(r.error().message, Contains("has 67 tokens; the model allows at most 64"));
    long_input.insert(long_input.begin(), word);
    r = translator.translate({long_input}, o);
    REQUIRE_FALSE(r.has_value());
    CHECK_THAT(r.error().message, Contains(counts_pads ? "has 68 tokens;" : "has 65 tokens besides its pads;"));
    std::vector<Result<Translation>> refused;
    REQUIRE(batch.value()
                .translate({long_input}, o, BatchOptions{},
                           [&](size_t, Result<Translation>&& t) { refused.push_back(std::move(t)); })
                .has_value());
    REQUIRE(refused.size() == 1);
    REQUIRE_FALSE(refused[0].has_value());
    CHECK_THAT(refused[0].error().message, Contains("allows at most 64"));
  }

  // transformers builds no mask when pad is EOS (Marian C++ models): every token is read.
  ModelInfo same = marian->info();
  same.pad_id = same.eos_id;
  const models::SourceReader reader(same);
  const std::vector<int32_t> ids = {4, same.eos_id, 5, same.eos_id};
  CHECK_FALSE(reader.masked(same.eos_id));
  CHECK(reader.tokens_read(ids) == ids.size());
  CHECK(models::SourceReader(marian->info()).tokens_read({4, marian->info().pad_id, 5}) == 2);
}

TEST_CASE("int8 and f16 models agree with the f32 oracle (teacher-forced top-1) on every kernel path", "[oracle]") {
  const DType dtype = GENERATE(DType::kInt8, DType::kF16);
  const std::string isa = GENERATE(from_range(model_test_isas()));
  size_t agree = 0, total = 0;
  TempDir tmp;
  for (const auto& name : kFixtures) {
    auto model = load_model(convert_fixture(name, dtype, tmp));
    auto [a, t] = teacher_forced_agreement(*model, expected_for(name), isa);
    agree += a;
    total += t;
  }
  const double rate = double(agree) / total;
  WARN(to_string(dtype) << " on " << isa << ": teacher-forced top-1 agreement with the f32 oracle: " << agree << "/" << total << " = "
                        << rate * 100 << "%");
  // Random weights are harsher than trained ones; floors sit a little under the
  // measured figures (int8 measured 256/258 = 99.2% over the seven fixtures, f16 258/258).
  CHECK(rate >= (dtype == DType::kF16 ? 0.99 : 0.97));
}

// The families' checkpoints carry their own decoding defaults (beam, length penalty,
// max length, forced EOS, and for M2M100 / mBART-50 the target language), and a
// per-call target language overrides the checkpoint's.
TEST_CASE("multilingual families decode with their checkpoint's defaults and per-call target languages", "[oracle]") {
  const std::string name = GENERATE(from_range(logic_fixtures(kFamilyFixtures)));
  CAPTURE(name);
  TempDir tmp;
  json e = expected_for(name);
  auto model = load_model(convert_fixture(name, DType::kF32, tmp));
  const GenerationDefaults& g = model->info().generation;
  const json& want_gen = e["generation"];
  CHECK(g.num_beams == want_gen["num_beams"].get<uint32_t>());
  CHECK(g.forced_bos_id == (want_gen["forced_bos_id"].is_null() ? -1 : want_gen["forced_bos_id"].get<int32_t>()));
  CHECK(g.forced_eos_id == (want_gen["forced_eos_id"].is_null() ? -1 : want_gen["forced_eos_id"].get<int32_t>()));
  Translator translator = make_translator(model);
  auto inputs = inputs_of(e);
  TranslateOptions defaults;  // everything from the file
  defaults.n_best = want_gen["num_beams"];
  auto r = translator.translate(inputs, defaults);
  REQUIRE(r.has_value());
  for (size_t b = 0; b < inputs.size(); ++b) {
    const auto& want = want_gen["outputs"][b];
    REQUIRE(r.value()[b].hypotheses.size() == want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      CHECK(r.value()[b].hypotheses[k].ids == want[k]["ids"].get<std::vector<int32_t>>());
      CHECK(r.value()[b].hypotheses[k].score == Approx(want[k]["score"].get<double>()).epsilon(1e-4));
    }
  }
  for (const json& lang : e["target_languages"]) {
    INFO("target language " << lang["lang"].get<std::string>());
    TranslateOptions o = greedy_options(e["max_new_tokens"]);
    o.target_prefix = {lang["forced_bos_id"].get<int32_t>()};
    auto greedy = translator.translate(inputs, o);
    REQUIRE(greedy.has_value());
    for (size_t b = 0; b < inputs.size(); ++b)
      CHECK(greedy.value()[b].hypotheses[0].ids == lang["greedy"][b]["ids"].get<std::vector<int32_t>>());
    for (auto [rule, key] : {std::pair{BeamStop::kFirstK, "beam"}, std::pair{BeamStop::kHeuristic, "beam_heuristic"}}) {
      o.beam_size = o.n_best = e["beam"]["width"];
      o.length_penalty = e["beam"]["alpha"].get<double>();
      o.beam_stop = rule;
      auto beam = translator.translate(inputs, o);
      REQUIRE(beam.has_value());
      for (size_t b = 0; b < inputs.size(); ++b) {
        const auto& want = lang[key][b];
        REQUIRE(beam.value()[b].hypotheses.size() == want.size());
        for (size_t k = 0; k < want.size(); ++k)
          CHECK(beam.value()[b].hypotheses[k].ids == want[k]["ids"].get<std::vector<int32_t>>());
      }
    }
  }
  // petrel-run: the same through --target-prefix.
  const json& lang = e["target_languages"][0];
  if (can_run_programs()) {
    std::string ids;
    for (int32_t id : inputs[0]) ids += (ids.empty() ? "" : " ") + std::to_string(id);
    int status = 0;
    const std::string out = run_command(petrel_run_command() + " " + convert_fixture(name, DType::kF32, tmp) + " --ids \"" + ids +
                                            "\" --beam 1 --length-penalty 1 --max-new-tokens " +
                                            std::to_string(e["max_new_tokens"].get<int>()) + " --target-prefix " +
                                            std::to_string(lang["forced_bos_id"].get<int>()) + " --json",
                                        &status);
    REQUIRE(status == 0);
    CHECK(json::parse(out)["results"][0]["hypotheses"][0]["ids"] == lang["greedy"][0]["ids"]);
  }

  // A prefix longer than the allowed length, or with an id outside the target vocabulary, is refused.
  TranslateOptions bad = greedy_options(2);
  bad.target_prefix = {4, 4, 4};
  CHECK(translator.translate(inputs, bad).error().code == ErrorCode::kInvalidArgument);
  bad.target_prefix = {static_cast<int32_t>(model->info().target_vocab_size)};
  CHECK(translator.translate(inputs, bad).error().message.find("target prefix") != std::string::npos);
}

// Text to text with each family's tokenizer and language codes, as the fixtures' PyTorch
// reference translated it (tools/reference/family_tokenizers.py + the oracle's greedy),
// through the C++ API, the C API and petrel-run.
TEST_CASE("multilingual families translate text with source and target languages", "[oracle][text]") {
  const std::string name = GENERATE(from_range(kFamilyFixtures));
  CAPTURE(name);
  TempDir tmp;
  json e = expected_for(name);
  const json& t = e["text"];
  const std::string path = convert_fixture(name, DType::kF32, tmp);
  auto model = load_model(path);
  REQUIRE(model->info().has_text_tokenizer);
  Translator translator = make_translator(model);
  TranslateOptions o = greedy_options(e["max_new_tokens"]);
  o.source_language = t["src_lang"];
  o.target_language = t["tgt_lang"];
  petrel_model* c_model = nullptr;
  REQUIRE(petrel_model_load(path.c_str(), &c_model) == PETREL_OK);
  petrel_session* session = nullptr;
  REQUIRE(petrel_session_create(c_model, nullptr, 1, &session) == PETREL_OK);
  for (size_t i = 0; i < t["translations"].size(); i += subset_stride()) {  // under a subset: the first
    const json& want = t["translations"][i];
    const std::string text = want["text"];
    INFO(text);
    auto r = translator.translate_text({text}, o);
    REQUIRE(r.has_value());
    CHECK(r.value()[0].input.ids == want["ids"].get<std::vector<int32_t>>());
    // No source language given: the model's default (tokenizer_config.json's src_lang).
    if (model->info().tokenizer.default_source_language == t["src_lang"].get<std::string>()) {
      auto by_default = tokenize(*model, text);
      REQUIRE(by_default.has_value());
      CHECK(by_default.value().ids == want["ids"].get<std::vector<int32_t>>());
      CHECK(encode_text(*model, text).value() == want["ids"].get<std::vector<int32_t>>());
    }
    REQUIRE(!r.value()[0].hypotheses.empty());
    CHECK(r.value()[0].hypotheses[0].ids == want["output_ids"].get<std::vector<int32_t>>());
    CHECK(r.value()[0].hypotheses[0].text == want["output_text"].get<std::string>());

    petrel_options c;
    petrel_options_init(&c);
    c.beam_size = 1;
    c.length_penalty = 1.0;
    c.max_new_tokens = e["max_new_tokens"];
    const std::string src = t["src_lang"], tgt = t["tgt_lang"];
    c.source_language = src.c_str();
    c.target_language = tgt.c_str();
    char* translation = nullptr;
    REQUIRE(petrel_translate_text(session, text.c_str(), &c, &translation) == PETREL_OK);
    CHECK(std::string(translation) == want["output_text"].get<std::string>());
    petrel_string_free(translation);
    // Streamed to C: each piece ends where the C++ event's does (the C++ piece views the
    // model's string table, which has no NUL after it), and the text is never NULL: ""
    // while the hypothesis holds only the language token (found by review).
    std::vector<std::string> cpp_pieces;
    TranslateOptions streamed = o;
    streamed.on_token = [&](const TokenEvent& ev) {
      if (!ev.final) cpp_pieces.emplace_back(ev.piece);
      return true;
    };
    REQUIRE(translator.translate_text({text}, streamed).has_value());
    struct Streamed {
      std::vector<std::string> pieces;
      std::string text;
      bool null_text = false;
    } got;
    REQUIRE(petrel_translate_stream(
                session, text.c_str(), &c,
                [](void* data, const petrel_token_event* ev) {
                  auto* s = static_cast<Streamed*>(data);
                  s->null_text |= ev->text == nullptr || ev->text_delta == nullptr;
                  if (!ev->final) s->pieces.emplace_back(ev->piece);
                  if (ev->text != nullptr) s->text = ev->text;
                  return 1;
                },
                &got, &translation) == PETREL_OK);
    petrel_string_free(translation);
    CHECK_FALSE(got.null_text);
    CHECK(got.pieces == cpp_pieces);
    CHECK(got.text == want["output_text"].get<std::string>());

    if (!can_run_programs()) continue;
    int status = 0;
    const std::string out = run_command(petrel_run_command() + " " + path + " --text \"" + text + "\" --source-lang " + src +
                                            " --target-lang " + tgt + " --beam 1 --length-penalty 1 --max-new-tokens " +
                                            std::to_string(e["max_new_tokens"].get<int>()) + " --json",
                                        &status);
    REQUIRE(status == 0);
    const json run = json::parse(out);
    CHECK(run["results"][0]["hypotheses"][0]["ids"] == want["output_ids"]);
    CHECK(run["results"][0]["hypotheses"][0]["text"] == want["output_text"]);
  }
  // resolve_options moves the language into the prefix: its result translates the same.
  auto resolved = resolve_options(*model, o);
  REQUIRE(resolved.has_value());
  CHECK(resolved.value().target_language.empty());
  CHECK(resolved.value().target_prefix == std::vector<int32_t>{t["tgt_lang_id"].get<int32_t>()});
  const std::vector<std::vector<int32_t>> ids = {t["translations"][0]["ids"].get<std::vector<int32_t>>()};
  CHECK(translator.translate(ids, resolved.value()).value()[0].hypotheses[0].ids ==
        translator.translate(ids, o).value()[0].hypotheses[0].ids);
  // petrel-run --tokenize honours --source-lang (here the target's code, to tell them apart).
  if (can_run_programs()) {
    int status = 0;
    const std::string tokens = run_command(petrel_run_command() + " " + path + " --tokenize --text file --source-lang " +
                                               t["tgt_lang"].get<std::string>(), &status);
    CHECK(status == 0);
    CHECK_THAT(tokens, Contains(std::to_string(t["tgt_lang_id"].get<int32_t>())));
  }

  // Unknown codes are refused by name.
  TranslateOptions bad = o;
  bad.target_language = "xx_Nope";
  auto r = translator.translate_text({"file"}, bad);
  REQUIRE_FALSE(r.has_value());
  CHECK_THAT(r.error().message, Contains("xx_Nope"));
  bad = o;
  bad.source_language = "xx_Nope";
  r = translator.translate_text({"file"}, bad);
  REQUIRE_FALSE(r.has_value());
  CHECK_THAT(r.error().message, Contains("xx_Nope"));
  petrel_session_free(session);
  petrel_model_free(c_model);
}

// Model files are portable: what this build converts is byte for byte the shared copy,
// which in tools/test.sh's run the native x86-64 build made (so under emulation this
// compares aarch64's or armv7's converter with x86-64's; elsewhere, two conversions).
TEST_CASE("a conversion here is byte for byte the run's shared conversion", "[oracle][portable]") {
  TempDir tmp;
  for (DType dtype : {DType::kInt4, DType::kInt8, DType::kF16}) {
    const std::string shared = convert_fixture("post_swish_concat_tied", dtype, tmp);
    convert::ConvertOptions o;
    o.checkpoint_dir = fixture_checkpoint("post_swish_concat_tied");
    o.output_path = tmp.file("here.petrel");
    o.linear_dtype = o.embedding_dtype = dtype;
    use_fixture_options(o);
    convert::convert_checkpoint(o);
    INFO(to_string(dtype));
    CHECK(read_bytes(o.output_path) == read_bytes(shared));
  }
}

TEST_CASE("int8 multilingual family models agree with the f32 oracle (teacher-forced top-1) on every kernel path",
          "[oracle]") {
  const std::string isa = GENERATE(from_range(model_test_isas()));
  size_t agree = 0, total = 0;
  TempDir tmp;
  for (const auto& name : kFamilyFixtures) {
    auto model = load_model(convert_fixture(name, DType::kInt8, tmp));
    auto [a, t] = teacher_forced_agreement(*model, expected_for(name), isa);
    agree += a;
    total += t;
  }
  const double rate = double(agree) / total;
  WARN("families int8 on " << isa << ": teacher-forced top-1 agreement with the f32 oracle: " << agree << "/" << total
                           << " = " << rate * 100 << "%");
  CHECK(rate >= 0.95);  // measured 101/103 = 98.1% on every path
}

// int4 weights: every linear layer (and with it the output projection) in 4 bits, or
// the layers in 4 bits and the output projection / tied table in int8.
TEST_CASE("int4 models agree with the f32 oracle (teacher-forced top-1) on every kernel path", "[oracle][int4]") {
  const std::optional<DType> output = GENERATE(std::optional<DType>{}, std::optional<DType>{DType::kInt8});
  const std::string isa = GENERATE(from_range(model_test_isas()));
  const std::string setting = output ? "int4 layers + int8 output" : "int4 everywhere";
  size_t agree = 0, total = 0;
  TempDir tmp;
  for (const auto& name : kFixtures) {
    auto model = load_model(convert_fixture(name, DType::kInt4, tmp, output));
    auto [a, t] = teacher_forced_agreement(*model, expected_for(name), isa);
    agree += a;
    total += t;
  }
  const double rate = double(agree) / total;
  WARN(setting << " on " << isa << ": teacher-forced top-1 agreement with the f32 oracle: " << agree << "/" << total
               << " = " << rate * 100 << "%");
  // Random weights are far harsher than trained ones (nearly flat logits: the smallest
  // fixtures, d_model 32, have one block per row). Floors sit a little under the
  // measured figures, the same on every path: int4 everywhere 212/258 = 82.2%, int4
  // layers + int8 output 221/258 = 85.7% (int8 everywhere: 99.2%).
  CHECK(rate >= (output ? 0.83 : 0.80));
}

// An f16 KV cache rounds every cached key and value to 11 significant bits (relative
// 2^-11 = 4.9e-4), so logits may move by about that fraction of their scale: they are
// held to 1e-3 of it (measured 3.3e-4). Outputs are judged like f16 weights
// (teacher-forced top-1 agreement; int8 weights with their own floor), and the
// oracle's greedy and best beam outputs must come out unchanged (they do on every
// fixture and path).
TEST_CASE("an f16 KV cache stays within f16 rounding of the oracle on every kernel path", "[oracle]") {
  const std::string isa = GENERATE(from_range(model_test_isas()));
  CAPTURE(isa);
  TempDir tmp;
  size_t agree = 0, total = 0, int8_agree = 0, int8_total = 0;
  double worst_logits = 0;
  for (const auto& name : logic_fixtures(kFixtures)) {
    json e = expected_for(name);
    auto model = load_model(convert_fixture(name, DType::kF32, tmp));
    auto inputs = inputs_of(e);

    threads::ThreadPool pool(1);
    models::EncoderDecoder graph(detail::ModelAccess::weights(*model), table_named(isa), pool);
    layers::Workspace ws;
    models::EncoderOutput enc;
    graph.encode(inputs, enc, ws);
    worst_logits = std::max(worst_logits, first_step_error(graph, *model, enc, e, DType::kF16, ws));

    auto [a, t] = teacher_forced_agreement(*model, e, isa, DType::kF16);
    agree += a;
    total += t;
    auto int8_model = load_model(convert_fixture(name, DType::kInt8, tmp));
    auto [a8, t8] = teacher_forced_agreement(*int8_model, e, isa, DType::kF16);
    int8_agree += a8;
    int8_total += t8;

    // Through the public API: greedy and beam run, and greedy keeps the oracle's output.
    Translator translator = make_translator(model, isa, 1);
    TranslateOptions greedy = greedy_options(e["max_new_tokens"]);
    greedy.kv_cache_f16 = true;
    auto g = translator.translate(inputs, greedy);
    REQUIRE(g.has_value());
    for (size_t b = 0; b < inputs.size(); ++b)
      CHECK(g.value()[b].hypotheses[0].ids == e["greedy"][b]["ids"].get<std::vector<int32_t>>());
    const TranslateOptions beam = fixture_beam_options(e, greedy);
    auto r = translator.translate(inputs, beam);
    REQUIRE(r.has_value());
    for (size_t b = 0; b < inputs.size(); ++b)
      CHECK(r.value()[b].hypotheses[0].ids == e["beam"]["results"][b][0]["ids"].get<std::vector<int32_t>>());
  }
  WARN("f16 KV cache on " << isa << ": first-step logits within " << worst_logits
                          << " (relative); teacher-forced top-1: f32 weights " << agree << "/" << total
                          << ", int8 weights " << int8_agree << "/" << int8_total);
  CHECK(worst_logits < 1e-3);
  CHECK(double(agree) / total >= 0.99);
  CHECK(double(int8_agree) / int8_total >= 0.97);
}

TEST_CASE("translate rejects bad input with clear errors", "[runtime]") {
  TempDir tmp;
  auto model = load_model(convert_fixture("post_swish_concat_tied", DType::kInt8, tmp));
  Translator translator = make_translator(model);
  auto error_of = [&](const std::vector<std::vector<int32_t>>& batch, TranslateOptions o = {}) {
    auto r = translator.translate(batch, o);
    REQUIRE_FALSE(r.has_value());
    REQUIRE(r.error().code == ErrorCode::kInvalidArgument);
    return r.error().message;
  };
  REQUIRE_THAT(error_of({{1, 2}, {3, 48, 0}}), Contains("input 2, position 2: token id 48 is out of range"));
  REQUIRE_THAT(error_of({{1, -1}}), Contains("token id -1"));
  REQUIRE_THAT(error_of({std::vector<int32_t>(65, 1)}), Contains("65 tokens") && Contains("at most 64"));
  REQUIRE_THAT(error_of({{}}), Contains("input 1 is empty"));
  REQUIRE_THAT(error_of({}), Contains("no inputs"));
  TranslateOptions o;
  o.beam_size = 65;
  REQUIRE_THAT(error_of({{1, 0}}, o), Contains("beam size must be in 1..64"));
  o.beam_size = 2;
  o.n_best = 3;
  REQUIRE_THAT(error_of({{1, 0}}, o), Contains("n-best"));
  o = {};
  o.max_new_tokens = 65;
  REQUIRE_THAT(error_of({{1, 0}}, o), Contains("max new tokens 65"));
}

TEST_CASE("min_new_tokens holds EOS back and the maximum length is honoured", "[runtime]") {
  TempDir tmp;
  auto model = load_model(convert_fixture("post_swish_concat_tied", DType::kF32, tmp));
  Translator translator = make_translator(model);
  TranslateOptions o;
  o.max_new_tokens = o.min_new_tokens = 9;
  auto r = translator.translate({{0}}, o);  // the oracle ends this input with EOS at once
  REQUIRE(r.has_value());
  CHECK(r.value()[0].hypotheses[0].ids.size() == 9);
  CHECK(translator.last_timings().decode_steps == 9);
}

TEST_CASE("text round trip through the model's vocabulary", "[runtime]") {
  TempDir tmp;
  auto model = load_model(convert_fixture("post_swish_concat_tied", DType::kInt8, tmp));
  auto ids = encode_text(*model, "w19 w20 w37");
  REQUIRE(ids.has_value());
  CHECK(ids.value() == std::vector<int32_t>{19, 20, 37, 0});
  CHECK(decode_text(*model, {19, 20, 0}).value() == "w19 w20");
  auto bad = encode_text(*model, "w19 zz");
  REQUIRE_FALSE(bad.has_value());
  CHECK_THAT(bad.error().message, Contains("'z'") && Contains("zz"));
}

TEST_CASE("petrel-run --json reproduces the oracle's greedy and beam outputs", "[cli]") {
  const std::string name = GENERATE(from_range(logic_fixtures(kFixtures)));
  INFO(name);
  TempDir tmp;
  json e = expected_for(name);
  const std::string model = convert_fixture(name, DType::kF32, tmp);
  std::string args = " " + model + " --max-new-tokens " + std::to_string(e["max_new_tokens"].get<int>());
  for (const auto& input : inputs_of(e)) args += " --ids \"" + ids_text(input) + "\"";
  const std::string beam = " --beam " + std::to_string(e["beam"]["width"].get<int>()) + " --n-best " +
                           std::to_string(e["beam"]["width"].get<int>()) + " --length-penalty " +
                           std::to_string(e["beam"]["alpha"].get<double>()) + " --beam-stop first-k";
  int status = 0;
  json greedy = json::parse(run_command(petrel_run_command() + args + " --beam 1 --json", &status));
  REQUIRE(status == 0);
  json beamed = json::parse(run_command(petrel_run_command() + args + beam + " --json", &status));
  REQUIRE(status == 0);
  for (size_t b = 0; b < e["inputs"].size(); ++b) {
    CHECK(greedy["results"][b]["input"] == e["inputs"][b]);
    CHECK(greedy["results"][b]["hypotheses"][0]["ids"] == e["greedy"][b]["ids"]);
    for (size_t k = 0; k < e["beam"]["results"][b].size(); ++k)
      CHECK(beamed["results"][b]["hypotheses"][k]["ids"] == e["beam"]["results"][b][k]["ids"]);
  }
  CHECK(beamed["decoding"]["beam_stop"] == "first-k");
  // Without --beam-stop: the model's rule, Hugging Face's default for these checkpoints.
  const std::string heuristic = beam.substr(0, beam.find(" --beam-stop"));
  json beamed_default = json::parse(run_command(petrel_run_command() + args + heuristic + " --json", &status));
  REQUIRE(status == 0);
  CHECK(beamed_default["decoding"]["beam_stop"] == "heuristic");
  for (size_t b = 0; b < e["inputs"].size(); ++b)
    for (size_t k = 0; k < e["beam"]["results_heuristic"][b].size(); ++k)
      CHECK(beamed_default["results"][b]["hypotheses"][k]["ids"] == e["beam"]["results_heuristic"][b][k]["ids"]);
  for (const char* key : {"load_ms", "encode_ms", "decode_ms", "tokens_per_s"}) CHECK(greedy["timing"].contains(key));
  CHECK(greedy["isa"] == runnable_isas().back());
  CHECK(greedy["kv_cache"] == "f32");
  // The f16 KV cache keeps these outputs (see the f16 KV cache oracle test).
  json half = json::parse(run_command(petrel_run_command() + args + " --beam 1 --kv-cache f16 --json", &status));
  REQUIRE(status == 0);
  CHECK(half["kv_cache"] == "f16");
  for (size_t b = 0; b < e["inputs"].size(); ++b)
    CHECK(half["results"][b]["hypotheses"][0]["ids"] == e["greedy"][b]["ids"]);
}

TEST_CASE("kernel paths are chosen per translator, by option or PETREL_ISA", "[runtime]") {
  TempDir tmp;
  auto model = load_model(convert_fixture("post_swish_concat_tied", DType::kInt8, tmp));
  auto unknown = Translator::create(model, {"sse9"});
  REQUIRE_FALSE(unknown.has_value());
  CHECK_THAT(unknown.error().message, Contains("sse9") && Contains("scalar"));
  for (const auto& isa : runnable_isas()) CHECK(std::string(make_translator(model, isa).isa()) == isa);
  CHECK(std::string(make_translator(model).isa()) == runnable_isas().back());
  ::setenv("PETREL_ISA", "scalar", 1);
  CHECK(std::string(make_translator(model).isa()) == "scalar");
  ::unsetenv("PETREL_ISA");
#if defined(__x86_64__)
  auto arm = Translator::create(model, {"neon"});
  REQUIRE_FALSE(arm.has_value());
  CHECK_THAT(arm.error().message, Contains("not available"));
#endif
}

TEST_CASE("petrel-run reports bad flags and inputs with a non-zero exit", "[cli]") {
  TempDir tmp;
  const std::string model = convert_fixture("post_swish_concat_tied", DType::kInt8, tmp);
  int status = 0;
  std::string out = run_command(petrel_run_command() + " " + model + " --ids \"1 0\" --frobnicate", &status);
  CHECK(status != 0);
  CHECK_THAT(out, Contains("unknown option '--frobnicate'"));
  out = run_command(petrel_run_command() + " " + model + " --ids \"1 99 0\"", &status);
  CHECK(status != 0);
  CHECK_THAT(out, Contains("token id 99 is out of range"));
  out = run_command(petrel_run_command() + " " + model + " --ids \"1 0\" --beam 0", &status);
  CHECK(status != 0);
  CHECK_THAT(out, Contains("--beam"));
  out = run_command(petrel_run_command() + " " + model + " --ids \"1 0\" --kv-cache f8", &status);
  CHECK(status != 0);
  CHECK_THAT(out, Contains("--kv-cache: 'f8' is not one of f32, f16"));
  out = run_command(petrel_run_command() + " " + model + " --ids \"1 x 0\"", &status);
  CHECK(status != 0);
  CHECK_THAT(out, Contains("'x' is not an integer"));
  out = run_command(petrel_run_command() + " " + tmp.file("missing.petrel") + " --ids \"1 0\"", &status);
  CHECK(status != 0);
  CHECK_THAT(out, Contains("missing.petrel") && Contains("cannot open"));
}

TEST_CASE("petrel-run --threads reaches the translator", "[cli]") {
  TempDir tmp;
  const std::string model = convert_fixture("post_swish_concat_tied", DType::kF32, tmp);
  const std::string args = " " + model + " --ids \"19 20 37 19 34 4 0\" --ids \"27 18 24 0\" --beam 3 --json";
  int status = 0;
  json one = json::parse(run_command(petrel_run_command() + args, &status));
  REQUIRE(status == 0);
  json three = json::parse(run_command(petrel_run_command() + args + " --threads 3", &status));
  REQUIRE(status == 0);
  CHECK(one["threads"] == 1);
  CHECK(three["threads"] == 3);
  CHECK(one["results"] == three["results"]);  // matmuls split over threads give the same sums
}

TEST_CASE("model files written on x86-64 load and match the oracle on this platform", "[oracle][portable]") {
  const std::string dtype = GENERATE(std::string("f32"), std::string("int8"));
  const std::string committed = fixture_dir() + "/portable/post_swish_concat_tied-" + dtype + ".petrel";
  json e = expected_for("post_swish_concat_tied");
  // Converting here gives the very same bytes: conversion is deterministic across platforms.
  TempDir tmp;
  const std::string fresh = convert_fixture("post_swish_concat_tied", convert::parse_dtype(dtype, "dtype"), tmp);
  CHECK(read_bytes(fresh) == read_bytes(committed));

  auto model = load_model(committed);
  Translator translator = make_translator(model);
  TranslateOptions beam = fixture_beam_options(e, {});
  beam.max_new_tokens = e["max_new_tokens"];
  auto r = translator.translate(inputs_of(e), beam);
  REQUIRE(r.has_value());
  size_t agree = 0, total = 0;
  for (size_t b = 0; b < e["inputs"].size(); ++b) {
    const auto& want = e["beam"]["results"][b];
    for (size_t k = 0; k < want.size(); ++k) {
      ++total;
      agree += r.value()[b].hypotheses[k].ids == want[k]["ids"].get<std::vector<int32_t>>();
    }
  }
  INFO(dtype << " on " << translator.isa() << ": " << agree << "/" << total << " beam hypotheses as the oracle");
  if (dtype == "f32") CHECK(agree == total);
  else CHECK(agree * 10 >= total * 7);  // int8 may reorder near-tied hypotheses
}
