// Word alignments: the attention probabilities of one head of one decoder layer's
// cross-attention, per output token over the input's, carried by the search with each
// hypothesis (TranslateOptions::alignment).
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "petrel/batch_translator.h"
#include "petrel/translator.h"
#include "support/native_fixture.h"
#include "support/test_support.h"

using namespace petrel;
using namespace petrel::test;
using json = nlohmann::json;

namespace {

std::vector<std::vector<int32_t>> native_inputs(const std::string& model, size_t count) {
  std::ifstream in(native_dir() + "/" + model + "/expected.json");
  REQUIRE(in);
  const json e = json::parse(in);
  std::vector<std::vector<int32_t>> inputs;
  for (size_t i = 0; i < e["source_ids"].size() && inputs.size() < count; i += 7) {
    auto ids = e["source_ids"][i].get<std::vector<int32_t>>();
    ids.push_back(0);  // </s>
    inputs.push_back(std::move(ids));
  }
  return inputs;
}

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double most = 0;
  for (size_t i = 0; i < a.size(); ++i) most = std::max(most, std::fabs(static_cast<double>(a[i]) - b[i]));
  return most;
}

}  // namespace

TEST_CASE("alignments follow their hypotheses through beam search: each equals a decode forced on its tokens",
          "[alignment][marian-native]") {
  const std::string model = GENERATE(as<std::string>{}, "transformer", "ssru");
  CAPTURE(model);
  auto loaded = load_model(native_model(model));
  CHECK(loaded->info().alignment_layer == static_cast<int32_t>(loaded->info().decoder_layers) - 1);  // "last"
  auto translator = Translator::create(loaded);
  REQUIRE(translator);
  const auto inputs = native_inputs(model, 12);
  TranslateOptions o;
  o.beam_size = o.n_best = 4;
  o.max_length_factor = 2.0;
  o.alignment = true;
  auto beams = translator.value().translate(inputs, o);
  REQUIRE(beams);

  TranslateOptions plain = o;
  plain.alignment = false;
  auto without = translator.value().translate(inputs, plain);
  REQUIRE(without);
  size_t hypotheses = 0;
  for (size_t s = 0; s < inputs.size(); ++s) {
    REQUIRE(beams.value()[s].hypotheses.size() == without.value()[s].hypotheses.size());
    for (size_t k = 0; k < beams.value()[s].hypotheses.size(); ++k) {
      const Hypothesis& h = beams.value()[s].hypotheses[k];
      CAPTURE(s, k);
      // Asking for alignments changes no output, and nothing is computed when not asked.
      CHECK(h.ids == without.value()[s].hypotheses[k].ids);
      CHECK(h.score == without.value()[s].hypotheses[k].score);
      CHECK(without.value()[s].hypotheses[k].alignment.empty());
      // A row per token, EOS included; a column per input token; each row a distribution.
      REQUIRE(h.alignment.size() == h.ids.size() + (h.ended_on_eos ? 1 : 0));
      for (const auto& row : h.alignment) {
        REQUIRE(row.size() == inputs[s].size());
        double sum = 0;
        for (float p : row) {
          CHECK(p >= 0);
          sum += p;
        }
        CHECK(std::fabs(sum - 1) < 1e-5);
      }
      // The rows are those of the steps that made this hypothesis: a greedy decode forced
      // on its tokens (and its EOS) computes the same attention at each step.
      TranslateOptions forced;
      forced.beam_size = 1;
      forced.alignment = true;
      forced.target_prefix = h.ids;
      if (h.ended_on_eos) forced.target_prefix.push_back(loaded->info().eos_id);
      forced.max_new_tokens = forced.target_prefix.size();
      auto replay = translator.value().translate({inputs[s]}, forced);
      REQUIRE(replay);
      const Hypothesis& r = replay.value()[0].hypotheses[0];
      REQUIRE(r.alignment.size() == h.alignment.size());
      for (size_t t = 0; t < h.alignment.size(); ++t) {
        CAPTURE(t);
        CHECK(max_difference(r.alignment[t], h.alignment[t]) < 1e-5);
      }
      ++hypotheses;
    }
  }
  CHECK(hypotheses >= inputs.size() * 3);
}

TEST_CASE("alignment options are checked by name, and any layer and head can be asked for",
          "[alignment][marian-native]") {
  auto loaded = load_model(native_model("transformer"));
  auto translator = Translator::create(loaded);
  REQUIRE(translator);
  const auto inputs = native_inputs("transformer", 2);
  TranslateOptions o;
  o.alignment = true;
  o.alignment_layer = loaded->info().decoder_layers;
  auto bad_layer = translator.value().translate(inputs, o);
  REQUIRE_FALSE(bad_layer);
  CHECK(bad_layer.error().message.find("alignment layer 2 is not one of the model's 2 decoder layers") == 0);
  o.alignment_layer = 0;
  o.alignment_head = loaded->info().num_heads;
  auto bad_head = translator.value().translate(inputs, o);
  REQUIRE_FALSE(bad_head);
  CHECK(bad_head.error().message.find("alignment head 4 is not one of the model's 4 attention heads") == 0);
  // Another layer and head: other rows, still distributions over the input.
  o.alignment_head = 3;
  auto other = translator.value().translate(inputs, o);
  REQUIRE(other);
  o.alignment_layer.reset();
  o.alignment_head = 0;
  auto guided = translator.value().translate(inputs, o);
  REQUIRE(guided);
  const Hypothesis& a = other.value()[0].hypotheses[0];
  const Hypothesis& b = guided.value()[0].hypotheses[0];
  REQUIRE(a.alignment.size() == b.alignment.size());
  double differs = 0;
  for (size_t t = 0; t < a.alignment.size(); ++t) differs = std::max(differs, max_difference(a.alignment[t], b.alignment[t]));
  CHECK(differs > 1e-3);
}

TEST_CASE("a text translation's alignment has a row per output piece and a column per input piece",
          "[alignment][marian-native][text]") {
  auto loaded = load_model(native_model("ssru"));
  auto translator = Translator::create(loaded);
  REQUIRE(translator);
  TranslateOptions o;
  o.alignment = true;
  auto r = translator.value().translate_text({"Open the file", "Save all changes before closing"}, o);
  REQUIRE(r);
  for (const TextTranslation& t : r.value()) {
    const TextHypothesis& h = t.hypotheses.at(0);
    REQUIRE(h.alignment.size() == h.pieces.size() + (h.ended_on_eos ? 1 : 0));
    for (const auto& row : h.alignment) CHECK(row.size() == t.input.pieces.size());
  }
}

namespace {

json alignment_fixture(const std::string& name) {
  std::ifstream in(fixture_dir() + "/alignment/" + name + ".json");
  REQUIRE(in);
  return json::parse(in);
}

// The model of an alignment fixture, converted with f32 weights.
std::string fixture_model(const json& fixture) {
  const std::string model = fixture["model"];
  const std::string native = "marian-native/";  // marian-native/<model>/model.bin
  if (model.rfind(native, 0) == 0) return native_model(model.substr(native.size(), model.find('/', native.size()) - native.size()));
  const std::string name = model.substr(std::string("oracle/").size());
  return shared_file(name + "-f32.petrel", [&](const std::string& out) {  // as test_oracle.cpp converts it
    convert::ConvertOptions o;
    o.checkpoint_dir = fixture_checkpoint(name);
    o.output_path = out;
    o.linear_dtype = o.embedding_dtype = DType::kF32;
    use_fixture_options(o);
    convert::convert_checkpoint(o);
  });
}

}  // namespace

TEST_CASE("alignments equal the PyTorch references' (Marian's rules, bergamot's values) on every kernel path",
          "[alignment][oracle]") {
  const std::string name = GENERATE(as<std::string>{}, "marian_native_transformer", "marian_native_ssru",
                                    "hf_post_swish_concat_tied");
  const std::string isa = GENERATE(from_range(model_test_isas()));
  const bool half_cache = GENERATE(false, true);
  CAPTURE(name, isa, half_cache);
  const json fixture = alignment_fixture(name);
  auto model = load_model(fixture_model(fixture));
  const ModelInfo& info = model->info();
  auto translator = Translator::create(model, {isa, 1});
  REQUIRE(translator);
  // The encoder leaves out the pads a model masks; the reference gives them probability 0.
  const bool masks_pads = info.pad_id >= 0 && info.pad_id != info.eos_id;
  const double tolerance = half_cache ? 1e-3 : 1e-4;
  double worst = 0;
  size_t rows = 0;
  for (const json& c : fixture["cases"]) {
    CAPTURE(c["origin"].get<std::string>());
    const auto source = c["source_ids"].get<std::vector<int32_t>>();
    TranslateOptions o;
    o.beam_size = 1;
    o.use_shortlist = false;
    o.kv_cache_f16 = half_cache;
    o.alignment = true;
    o.alignment_layer = fixture["layer"].get<size_t>();
    o.alignment_head = fixture["head"].get<size_t>();
    o.target_prefix = c["target_ids"].get<std::vector<int32_t>>();
    if (c["ended_on_eos"].get<bool>()) o.target_prefix.push_back(info.eos_id);
    o.max_new_tokens = o.target_prefix.size();
    auto r = translator.value().translate({source}, o);
    REQUIRE(r);
    const Hypothesis& h = r.value()[0].hypotheses.at(0);
    const auto want = c["alignment"].get<std::vector<std::vector<float>>>();
    REQUIRE(h.alignment.size() == want.size());
    std::vector<std::vector<float>> wide;  // the engine's rows with the reference's columns
    for (size_t t = 0; t < want.size(); ++t) {
      std::vector<float> row;
      size_t k = 0;
      for (size_t j = 0; j < source.size(); ++j) {
        if (masks_pads && source[j] == info.pad_id) {
          CHECK(want[t][j] < 1e-6f);
          row.push_back(0.0f);
          continue;
        }
        REQUIRE(k < h.alignment[t].size());
        row.push_back(h.alignment[t][k++]);
      }
      REQUIRE(k == h.alignment[t].size());
      for (size_t j = 0; j < row.size(); ++j)
        worst = std::max(worst, std::fabs(static_cast<double>(row[j]) - want[t][j]));
      wide.push_back(std::move(row));
      ++rows;
    }
    // Marian's hard rule on them, at bergamot's and Marian's usual thresholds. The
    // fixture lists no near ties, so f16 rounding must not change them either.
    for (const char* threshold : {"1.0", "0.2"}) {
      std::vector<std::pair<size_t, size_t>> expected;
      for (const json& pair : c["hard"][threshold]) expected.emplace_back(pair[0].get<size_t>(), pair[1].get<size_t>());
      CHECK(hard_alignment(wide, std::stof(threshold)) == expected);
    }
  }
  CHECK(rows >= 100);
  CHECK(worst < tolerance);
  WARN(name << " on " << isa << (half_cache ? ", f16 cache" : "") << ": " << rows
            << " rows, largest difference from the reference " << worst);
}

TEST_CASE("petrel-run --alignment writes each hypothesis' rows into its JSON", "[alignment][cli]") {
  if (!can_run_programs()) return;
  const std::string model = native_model("ssru");
  int status = 0;
  const json j = json::parse(run_command(petrel_run_command() + " " + model +
                                             " --text 'Open the file' --beam 2 --n-best 2 --alignment --json",
                                         &status, true));
  REQUIRE(status == 0);
  const json& result = j["results"][0];
  REQUIRE(result["hypotheses"].size() == 2);
  for (const json& h : result["hypotheses"]) {
    REQUIRE(h["alignment"].size() == h["ids"].size() + 1);  // both end on EOS here
    for (const json& row : h["alignment"]) CHECK(row.size() == result["input"].size());
  }
  const std::string usage = run_command(petrel_run_command() + " " + model + " --text 'Open' --alignment", &status);
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(usage.find("--alignment needs --json or --json-lines") != std::string::npos);
  run_command(petrel_run_command() + " " + model + " --text 'Open' --alignment-head 1 --json", &status);
  CHECK(WEXITSTATUS(status) == 2);
}

TEST_CASE("a text split into sentences joins their alignments, each sentence's rows over its own columns",
          "[alignment][marian-native]") {
  auto model = load_model(native_model("transformer"));
  auto batch = BatchTranslator::create(model);
  REQUIRE(batch);
  TranslateOptions o;
  o.alignment = true;
  BatchOptions batching;
  batching.split_sentences = true;
  std::vector<Result<TextTranslation>> got;
  REQUIRE(batch.value().translate_text({"Open the file. Save all changes. Close the window."}, o, batching,
                                       [&](size_t, Result<TextTranslation>&& r) { got.push_back(std::move(r)); }));
  REQUIRE(got.size() == 1);
  REQUIRE(got[0]);
  const TextTranslation& t = got[0].value();
  const TextHypothesis& joined = t.hypotheses.at(0);
  // The sentences' columns: the joined input's pieces, each sentence ending in </s>.
  std::vector<size_t> sentence_of_column;
  size_t sentences = 0;
  for (const std::string& piece : t.input.pieces) {
    sentence_of_column.push_back(sentences);
    if (piece == "</s>") ++sentences;
  }
  REQUIRE(sentences == 3);
  REQUIRE(joined.alignment.size() == joined.ids.size() + (joined.ended_on_eos ? 1 : 0));
  // Each row is a distribution over one sentence's columns, the sentences in order, each
  // with at least one row.
  size_t previous = 0;
  std::vector<size_t> rows_of(sentences, 0);
  for (const auto& row : joined.alignment) {
    REQUIRE(row.size() == t.input.pieces.size());
    double sum = 0;
    size_t sentence = SIZE_MAX;
    for (size_t j = 0; j < row.size(); ++j) {
      if (row[j] == 0) continue;
      if (sentence == SIZE_MAX) sentence = sentence_of_column[j];
      CHECK(sentence_of_column[j] == sentence);
      sum += row[j];
    }
    CHECK(std::fabs(sum - 1) < 1e-5);
    REQUIRE(sentence != SIZE_MAX);
    CHECK(sentence >= previous);
    previous = sentence;
    ++rows_of[sentence];
  }
  for (size_t n : rows_of) CHECK(n > 0);
}
