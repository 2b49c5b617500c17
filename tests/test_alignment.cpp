// Word alignments: the attention probabilities of one head of one decoder layer's
// cross-attention, per output token over the input's, carried by the search with each
// hypothesis (TranslateOptions::alignment).
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "petrel/translator.h"
#include "support/test_support.h"

using namespace petrel;
using namespace petrel::test;
using json = nlohmann::json;

namespace {

std::string native_dir() { return fixture_dir() + "/marian-native"; }

// A Marian-native fixture model (tests/fixtures/marian-native) converted with f32 weights.
std::string native_model(const std::string& model) {
  return shared_file("alignment-native-" + model + ".petrel", [&](const std::string& out) {
    TempDir tmp;
    const std::string dir = tmp.file(model);
    std::filesystem::create_directories(dir);
    write_bytes(dir + "/model.bin", read_bytes(native_dir() + "/" + model + "/model.bin"));
    write_bytes(dir + "/vocab.spm", read_bytes(native_dir() + "/vocab.spm"));
    convert::ConvertOptions o;
    o.checkpoint_dir = dir;
    o.output_path = out;
    o.linear_dtype = o.embedding_dtype = DType::kF32;
    convert::convert_checkpoint(o);
  });
}

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
