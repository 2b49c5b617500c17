// Decoder-only language models (Gemma 3, Llama 3, Qwen2, Qwen3) against the PyTorch
// oracle (tools/reference/make_decoder_only_fixtures.py, written from the transformers
// source): logits of every prompt position (prefill), of each prompt's last position, of
// each generated step, and the greedy ids, on every kernel path, in f32; int8 and int4
// by their agreement with the f32 oracle.
#include <algorithm>
#include <fstream>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "convert/convert.h"
#include "format/model_file.h"
#include "petrel_generated.h"
#include "kernels/isa.h"
#include "model_access.h"
#include "models/decoder_only.h"
#include "petrel/generator.h"
#include "petrel/petrel.h"
#include "support/test_support.h"
#include "threads/thread_pool.h"

using namespace petrel;
using namespace petrel::test;
using json = nlohmann::json;

namespace {

const std::vector<std::string> kFixtures = {"gemma3_f32", "gemma3_bf16", "llama3", "qwen2", "qwen3"};

std::string lm_fixture_dir(const std::string& name) { return fixture_dir() + "/decoder_only/" + name; }

json lm_expected(const std::string& name) {
  std::ifstream in(lm_fixture_dir(name) + "/expected.json");
  REQUIRE(in);
  return json::parse(in);
}

std::string convert_lm(const std::string& name, DType dtype) {
  return shared_conversion("lm-" + name, lm_fixture_dir(name), dtype);
}

std::vector<std::vector<int32_t>> id_lists(const json& j) {
  std::vector<std::vector<int32_t>> out;
  for (const json& ids : j) out.push_back(ids.get<std::vector<int32_t>>());
  return out;
}

// The graph on one kernel path, with its own state.
struct Graph {
  Graph(const Model& model, const std::string& isa)
      : pool(1), graph(detail::ModelAccess::weights(model), table_named(isa), pool) {
    graph.reserve(ws);
  }
  std::vector<float> run(const std::vector<int32_t>& tokens, bool every_row, bool restart = true,
                         DType cache = DType::kF32) {
    if (restart) graph.start(512, cache, state);
    std::vector<float> logits((every_row ? tokens.size() : 1) * graph.vocab_size());
    graph.forward(tokens.data(), tokens.size(), state, ws, logits.data(), every_row);
    return logits;
  }
  threads::ThreadPool pool;
  models::DecoderOnly graph;
  models::LmState state;
  layers::Workspace ws;
};

// A copy of decoder-only fixture `fixture` at `dir` with its config.json edited.
std::string edited_fixture(const std::string& fixture, const std::string& dir, const std::function<void(json&)>& edit) {
  copy_dir(lm_fixture_dir(fixture), dir);
  json config = json::parse(std::ifstream(dir + "/config.json"));
  edit(config);
  std::ofstream(dir + "/config.json") << config.dump();
  return dir;
}

Generator make_generator(std::shared_ptr<const Model> model, const std::string& isa, size_t threads = 1) {
  auto g = Generator::create(std::move(model), {isa, threads});
  if (!g) FAIL(g.error().message);
  return std::move(g.value());
}

// The converter's message for checkpoint `dir` (written to `out`), or "converted".
std::string conversion_message(const std::string& dir, const std::string& out) {
  convert::ConvertOptions o;
  o.checkpoint_dir = dir;
  o.output_path = out;
  try {
    convert::convert_checkpoint(o);
  } catch (const convert::ConvertError& e) {
    return e.what();
  }
  return "converted";
}

}  // namespace

TEST_CASE("decoder-only models match the PyTorch oracle in f32 on every kernel path", "[decoder_only][oracle]") {
  for (const std::string& name : kFixtures) {
    INFO(name);
    const json e = lm_expected(name);
    auto model = load_model(convert_lm(name, DType::kF32));
    REQUIRE(model->info().decoder_only);
    const auto prompts = id_lists(e["prompts"]);
    const size_t vocab = model->info().vocab_size, max_new = e["max_new_tokens"];
    for (const std::string& isa : model_test_isas()) {
      INFO(isa);
      Graph g(*model, isa);
      // Prefill: every position of the longest prompt.
      const auto all = g.run(prompts[2], true);
      for (size_t t = 0; t < prompts[2].size(); ++t) {
        INFO("prompt 2 position " << t);
        CHECK(relative_error(&all[t * vocab], e["prompt_logits"][t].get<std::vector<float>>()) < 1e-4);
      }
      for (size_t p = 0; p < prompts.size(); ++p) {
        INFO("prompt " << p);
        CHECK(relative_error(g.run(prompts[p], false).data(), e["last_logits"][p].get<std::vector<float>>()) < 1e-4);
        // An f16 KV cache: keys and values rounded to 2^-11, logits within about that of their scale.
        CHECK(relative_error(g.run(prompts[p], false, true, DType::kF16).data(),
                             e["last_logits"][p].get<std::vector<float>>()) < 2e-3);
      }
      // Generated steps, one token at a time through the KV caches (teacher-forced along
      // the oracle's greedy output of prompt 2).
      g.run(prompts[2], false);
      const auto greedy2 = e["greedy"][2].get<std::vector<int32_t>>();
      for (size_t t = 1; t < e["step_logits"].size(); ++t) {
        INFO("step " << t);
        const auto logits = g.run({greedy2[t - 1]}, false, /*restart=*/false);
        CHECK(relative_error(logits.data(), e["step_logits"][t].get<std::vector<float>>()) < 1e-4);
      }
      // Greedy generation through the public API, stopping at EOS and past it; matrix
      // products split over threads give the same sums.
      GenerateOptions o;
      o.max_new_tokens = max_new;
      for (size_t threads : subset_stride() > 1 ? thread_counts({1}) : thread_counts({1, 3})) {
        INFO(threads << " threads");
        auto out = make_generator(model, isa, threads).generate(prompts, o);
        REQUIRE(out);
        for (size_t p = 0; p < prompts.size(); ++p) {
          INFO("prompt " << p);
          CHECK(out.value()[p].ids == e["greedy"][p].get<std::vector<int32_t>>());
          const auto eos = e["eos_token_ids"].get<std::vector<int32_t>>();
          const auto& ids = out.value()[p].ids;
          CHECK(out.value()[p].ended_on_eos == (std::find(eos.begin(), eos.end(), ids.back()) != eos.end()));
        }
      }
      Generator generator = make_generator(model, isa);
      auto out = generator.generate(prompts, o);
      REQUIRE(out);
      o.ignore_eos = true;
      out = generator.generate(prompts, o);
      REQUIRE(out);
      for (size_t p = 0; p < prompts.size(); ++p) CHECK(out.value()[p].ids == e["greedy_ignore_eos"][p].get<std::vector<int32_t>>());
    }
  }
}

// Prefill in one call equals the same tokens one at a time: across chunks of
// kPrefillChunk and the sliding-window layers' rings wrapping (window 6), the caches
// hold the same keys at the same positions (an int8 cache too: each row is quantized
// on its own, whichever chunk stores it).
TEST_CASE("decoder-only prefill in chunks equals token-by-token decoding", "[decoder_only]") {
  std::mt19937 rng(7);
  for (const std::string& name : {std::string("gemma3_f32"), std::string("llama3")}) {
    for (DType cache : {DType::kF32, DType::kInt8}) {
      INFO(name << " cache " << to_string(cache));
      auto model = load_model(convert_lm(name, DType::kF32));
      std::uniform_int_distribution<int32_t> id(3, static_cast<int32_t>(model->info().vocab_size) - 1);
      std::vector<int32_t> tokens(models::DecoderOnly::kPrefillChunk * 2 + 17);
      for (int32_t& t : tokens) t = id(rng);
      const std::string isa = kernels::isa_name(kernels::best_isa());
      Graph whole(*model, isa), steps(*model, isa);
      const auto every = whole.run(tokens, true, true, cache);
      steps.graph.start(512, cache, steps.state);
      const size_t vocab = model->info().vocab_size;
      double worst = 0;
      for (size_t t = 0; t < tokens.size(); ++t) {
        const auto one = steps.run({tokens[t]}, false, /*restart=*/false);
        const std::vector<float> want(&every[t * vocab], &every[(t + 1) * vocab]);
        worst = std::max(worst, relative_error(one.data(), want));
      }
      CHECK(worst < 1e-5);
    }
  }
}

TEST_CASE("a sliding-window ring grows with the sequence, not allocated whole for a short one", "[decoder_only]") {
  // A conversation's session starts its caches for the model's positions: each sliding
  // layer's ring (window + kPrefillChunk slots) was allocated whole for the first
  // message; a window near max_positions made a 22-token message allocate gigabytes.
  auto model = load_model(convert_lm("gemma3_f32", DType::kF32));
  Graph graph(*model, kernels::isa_name(kernels::best_isa()));
  graph.run({5, 6, 7}, false);  // start(512): rings of 6 + 128 slots for the sliding layers
  const auto& layers = detail::ModelAccess::weights(*model).decoder.layers;
  size_t rings = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    INFO("layer " << l);
    rings += graph.state.ring[l] != 0;
    CHECK(graph.state.slots[l] == 3);
  }
  CHECK(rings == 2);
}

// A rewind gives up positions; the slots of a ring they held keep what came after the
// rewind's point only from then on. A second rewind further back must not use the ring
// slots the first one gave up: DecoderOnly::rewind refuses it; one it accepts leaves
// caches whose next logits equal a fresh run's.
TEST_CASE("decoder-only rewinds refuse what an earlier rewind gave up, and give a fresh run's logits", "[decoder_only]") {
  auto model = load_model(convert_lm("gemma3_f32", DType::kF32));
  const std::string isa = kernels::isa_name(kernels::best_isa());
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> id(3, static_cast<int32_t>(model->info().vocab_size) - 1);
  std::vector<int32_t> tokens(300);
  for (int32_t& t : tokens) t = id(rng);
  // Token by token, so that both runs below compute every position alike.
  auto run_each = [](Graph& graph, const std::vector<int32_t>& ids, size_t n) {
    graph.graph.start(512, DType::kF32, graph.state);  // rings of 6 + 128 slots for the sliding layers
    for (size_t i = 0; i < n; ++i) graph.run({ids[i]}, false, /*restart=*/false);
  };
  Graph g(*model, isa);
  run_each(g, tokens, 300);
  REQUIRE(g.state.length == 300);
  REQUIRE_FALSE(g.graph.rewind(300 - 129, g.state));  // past a ring's spare slots
  REQUIRE(g.graph.rewind(220, g.state));                // 80 back: the rings hold 166..299
  REQUIRE(g.state.length == 220);
  // 150 is within 128 of 220, but the window behind 150 (144..149) was overwritten by
  // positions 278..299 before the first rewind.
  REQUIRE_FALSE(g.graph.rewind(150, g.state));
  REQUIRE(g.state.length == 220);
  REQUIRE(g.graph.rewind(200, g.state));  // the window behind 200 (194..199) is still held
  const std::vector<int32_t> next = {tokens[200], 17, 42};
  const auto rewound = g.run(next, false, /*restart=*/false);
  Graph fresh(*model, isa);
  run_each(fresh, tokens, 200);
  const auto want = fresh.run(next, false, /*restart=*/false);
  REQUIRE(rewound == want);
}

TEST_CASE("a model's RoPE tables are one per kind of layer, equal ones shared", "[decoder_only][format]") {
  // A file giving each of its layers a table of its own made every forward compute cos/sin
  // rows per layer, and allocate them (32 MB per table at head_dim 65536), uncounted.
  std::vector<uint8_t> bytes = read_bytes(convert_lm("gemma3_f32", DType::kF32));
  fb::Model* m = fb::GetMutableModel(bytes.data() + 4);
  auto layer = [&](uint32_t i) { return m->mutable_decoder()->mutable_layers()->GetMutableObject(i); };
  REQUIRE(layer(0)->sliding_window() != 0);
  REQUIRE(layer(1)->sliding_window() == 0);
  REQUIRE(layer(2)->sliding_window() != 0);
  {
    auto loaded = load_bytes(bytes);
    REQUIRE(loaded);
    Graph graph(*loaded.value(), kernels::isa_name(kernels::best_isa()));
    graph.run({5, 6}, false);
    CHECK(graph.state.rope_tables.size() == 2);
  }
  // A sliding layer with the full-attention layer's table, beside one with its own.
  std::vector<uint8_t> mixed = bytes;
  fb::Model* mm = fb::GetMutableModel(mixed.data() + 4);
  auto* layer2 = mm->mutable_decoder()->mutable_layers()->GetMutableObject(2);
  REQUIRE(layer2->mutate_rope_inv_freq(layer(1)->rope_inv_freq()));
  auto refused = load_bytes(mixed);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message, Catch::Matchers::Contains("decoder.layers.2.rope_inv_freq differs from "
                                                                "decoder.layers.0's, a layer of the same kind "
                                                                "(sliding-window attention)"));
  // The sliding layers' own table given the full one's values: two tensors, one table.
  auto data_of = [&](int32_t index) {
    const fb::Tensor* t = m->tensors()->Get(static_cast<uint32_t>(index));
    uint32_t flatbuffer_size;
    std::memcpy(&flatbuffer_size, bytes.data(), 4);
    return bytes.data() + detail::data_section_start(flatbuffer_size) + t->data()->offset();
  };
  REQUIRE(layer(0)->rope_inv_freq() != layer(1)->rope_inv_freq());
  REQUIRE(m->head_dim() > 0);
  std::memcpy(data_of(layer(0)->rope_inv_freq()), data_of(layer(1)->rope_inv_freq()), m->head_dim() / 2 * sizeof(float));
  auto shared = load_bytes(bytes);
  REQUIRE(shared);
  Graph graph(*shared.value(), kernels::isa_name(kernels::best_isa()));
  graph.run({5, 6}, false);
  CHECK(graph.state.rope_tables.size() == 1);
}

// Quantized weights: the oracle's greedy choices, teacher-forced, mostly survive. Random
// models 48-64 wide have nearly flat logits, and int4's noise (one scale per 32 weights)
// is large beside their margins, so its floor is low (measured: 131 of 240 agree); the
// en-de model's are the real quality tests of the quantizers.
TEST_CASE("int8 and int4 decoder-only models agree with the f32 oracle", "[decoder_only][oracle]") {
  for (DType dtype : {DType::kInt8, DType::kInt4}) {
    size_t agree = 0, total = 0;
    for (const std::string& name : kFixtures) {
      const json e = lm_expected(name);
      auto model = load_model(convert_lm(name, dtype));
      Graph g(*model, kernels::isa_name(kernels::best_isa()));
      const auto prompts = id_lists(e["prompts"]);
      const size_t vocab = model->info().vocab_size;
      for (size_t p = 0; p < prompts.size(); ++p) {
        std::vector<int32_t> tokens = prompts[p];
        const auto greedy = e["greedy_ignore_eos"][p].get<std::vector<int32_t>>();
        tokens.insert(tokens.end(), greedy.begin(), greedy.end() - 1);
        const auto logits = g.run(tokens, true);
        for (size_t t = 0; t < greedy.size(); ++t) {
          const float* row = &logits[(prompts[p].size() - 1 + t) * vocab];
          agree += std::max_element(row, row + vocab) - row == greedy[t];
          ++total;
        }
      }
    }
    INFO(to_string(dtype) << ": " << agree << " of " << total << " teacher-forced greedy choices agree");
    WARN(to_string(dtype) << ": " << agree << " of " << total << " teacher-forced greedy choices agree");
    CHECK(agree >= total * (dtype == DType::kInt8 ? 0.9 : 0.5));
  }
}

// An int8 KV cache (GenerateOptions::kv_cache_int8): each position's keys and values
// rounded per head to 1/127 of the head's largest. Against the f32 oracle on every
// fixture and kernel path: the logits of every prompt position, of each prompt's last
// position and of teacher-forced steps; f16's error beside it for comparison.
TEST_CASE("an int8 KV cache stays near the f32 oracle", "[decoder_only][oracle]") {
  double worst_int8 = 0, worst_f16 = 0;
  size_t agree = 0, choices = 0, same_sequences = 0, sequences = 0;
  for (const std::string& name : kFixtures) {
    INFO(name);
    const json e = lm_expected(name);
    auto model = load_model(convert_lm(name, DType::kF32));
    const auto prompts = id_lists(e["prompts"]);
    const size_t vocab = model->info().vocab_size;
    const auto greedy2 = e["greedy"][2].get<std::vector<int32_t>>();
    for (const std::string& isa : model_test_isas()) {
      INFO(isa);
      Graph g(*model, isa);
      for (DType cache : {DType::kInt8, DType::kF16}) {
        double& worst = cache == DType::kInt8 ? worst_int8 : worst_f16;
        const auto all = g.run(prompts[2], true, true, cache);
        for (size_t t = 0; t < prompts[2].size(); ++t)
          worst = std::max(worst, relative_error(&all[t * vocab], e["prompt_logits"][t].get<std::vector<float>>()));
        for (size_t p = 0; p < prompts.size(); ++p)
          worst = std::max(worst, relative_error(g.run(prompts[p], false, true, cache).data(),
                                                 e["last_logits"][p].get<std::vector<float>>()));
        g.run(prompts[2], false, true, cache);
        for (size_t t = 1; t < e["step_logits"].size(); ++t) {
          const auto logits = g.run({greedy2[t - 1]}, false, /*restart=*/false);
          worst = std::max(worst, relative_error(logits.data(), e["step_logits"][t].get<std::vector<float>>()));
        }
      }
    }
    // Greedy choices along the oracle's output (teacher-forced: one early difference does
    // not make every later one differ), then free-running greedy generation.
    Graph g(*model, kernels::isa_name(kernels::best_isa()));
    GenerateOptions o;
    o.max_new_tokens = e["max_new_tokens"];
    o.ignore_eos = true;
    o.kv_cache_int8 = true;
    auto out = make_generator(model, kernels::isa_name(kernels::best_isa())).generate(prompts, o);
    REQUIRE(out);
    for (size_t p = 0; p < prompts.size(); ++p) {
      std::vector<int32_t> tokens = prompts[p];
      const auto greedy = e["greedy_ignore_eos"][p].get<std::vector<int32_t>>();
      tokens.insert(tokens.end(), greedy.begin(), greedy.end() - 1);
      const auto logits = g.run(tokens, true, true, DType::kInt8);
      for (size_t t = 0; t < greedy.size(); ++t) {
        const float* row = &logits[(prompts[p].size() - 1 + t) * vocab];
        agree += std::max_element(row, row + vocab) - row == greedy[t];
        ++choices;
      }
      same_sequences += out.value()[p].ids == greedy;
      ++sequences;
    }
  }
  WARN("int8 KV cache: worst relative logit error " << worst_int8 << " (f16: " << worst_f16 << "); " << agree
                                                     << " of " << choices << " teacher-forced greedy choices agree; "
                                                     << same_sequences << " of " << sequences
                                                     << " greedy sequences equal f32's");
  // Measured (gcc 12, x86-64; scalar, avx2, avxvnni, avx512 alike): the worst relative
  // error 4.0e-2 for int8 (llama3's steps; gemma3's 3.5e-2), 1.4e-3 for f16: the rounding
  // error of a value, 1/254 of its head's largest against 2^-11 of itself, is ~30 times
  // f16's, and so is the logits'. 240 of 240 teacher-forced choices and 15 of 15 greedy
  // sequences (16 tokens, EOS ignored) equal f32's.
  CHECK(worst_int8 < 6e-2);
  CHECK(worst_f16 < 2e-3);
  CHECK(agree == choices);
  CHECK(same_sequences == sequences);
}

// A slot holds kv_heads x head_dim int8 values (padded to 4 bytes) and a scale per head:
// (head_dim + 4) / (4 head_dim) of f32's bytes with one K/V head, 0.25-0.27 at head_dim
// 64-256.
TEST_CASE("an int8 KV cache's slots are cache_row_bytes: about a quarter of f32's", "[decoder_only]") {
  for (size_t head_dim : {64, 128, 256})
    for (size_t kv_heads : {1, 2, 8}) {
      const double ratio = double(models::cache_row_bytes(DType::kInt8, kv_heads, head_dim)) /
                           models::cache_row_bytes(DType::kF32, kv_heads, head_dim);
      INFO(kv_heads << " x " << head_dim);
      CHECK(ratio == double(kv_heads * head_dim + 4 * kv_heads) / (4 * kv_heads * head_dim));
      CHECK(ratio >= 0.25);
      CHECK(ratio < 0.27);
    }
  CHECK(models::cache_row_bytes(DType::kInt8, 3, 5) == 16 + 12);  // 15 values padded to 16, then 3 scales
  CHECK(models::cache_row_bytes(DType::kF16, 3, 5) == 30);
  auto model = load_model(convert_lm("gemma3_f32", DType::kF32));
  const ModelInfo& info = model->info();
  Graph f32(*model, kernels::isa_name(kernels::best_isa())), int8(*model, kernels::isa_name(kernels::best_isa()));
  const std::vector<int32_t> tokens(40, 7);
  f32.run(tokens, false, true, DType::kF32);
  int8.run(tokens, false, true, DType::kInt8);
  size_t f32_bytes = 0, int8_bytes = 0;
  for (size_t l = 0; l < info.decoder_layers; ++l) {
    INFO("layer " << l);
    CHECK(int8.state.slots[l] == f32.state.slots[l]);
    CHECK(int8.state.slots[l] >= std::min<size_t>(tokens.size(), int8.state.ring[l] ? int8.state.ring[l] : 512));
    for (const auto* cache : {&int8.state.k[l], &int8.state.v[l]})
      CHECK(cache->size() ==
            int8.state.slots[l] * models::cache_row_bytes(DType::kInt8, info.num_kv_heads, info.head_dim));
    f32_bytes += f32.state.k[l].size() + f32.state.v[l].size();
    int8_bytes += int8.state.k[l].size() + int8.state.v[l].size();
  }
  // The fixture's 2 K/V heads of 16: (32 + 8) / 128 of f32's bytes.
  CHECK(int8_bytes * 128 == f32_bytes * 40);
}

TEST_CASE("decoder-only generation refuses bad prompts and options by name", "[decoder_only]") {
  auto model = load_model(convert_lm("qwen3", DType::kF32));
  Generator g = make_generator(model, "");
  auto expect_error = [&](const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& o,
                          const std::string& words) {
    auto r = g.generate(prompts, o);
    REQUIRE_FALSE(r);
    INFO(r.error().message);
    CHECK(r.error().message.find(words) != std::string::npos);
  };
  expect_error({{}}, {}, "the prompt is empty");
  expect_error({{5, 7}, {5, 136}}, {}, "prompt 2: position 1: id 136 is outside the vocabulary");
  expect_error({std::vector<int32_t>(512, 7)}, {}, "no room to generate");
  GenerateOptions o;
  o.max_new_tokens = 100000;
  expect_error({{5}}, o, "max_new_tokens");
  o = {};
  o.kv_cache_f16 = true;
  o.kv_cache_int8 = true;
  expect_error({{5}}, o, "kv_cache_f16 and kv_cache_int8");
  o = {};
  o.temperature = 0.0f;
  o.do_sample = true;
  expect_error({{5}}, o, "temperature");
  // A translator is not a generator, and the other way round.
  auto t = Translator::create(model);
  REQUIRE_FALSE(t);
  CHECK(t.error().message.find("decoder-only") != std::string::npos);
}

TEST_CASE("a model with fewer positions than the default budget generates with default options",
          "[decoder_only]") {
  // With neither the call nor the model giving max_new_tokens, the default of 256 was
  // refused by a model of 100 positions; the translator clamps its default the same way.
  TempDir tmp;
  convert::ConvertOptions o;
  o.checkpoint_dir = edited_fixture("qwen3", tmp.file("qwen3-100"), [](json& c) { c["max_position_embeddings"] = 100; });
  o.output_path = tmp.file("qwen3-100.petrel");
  convert::convert_checkpoint(o);
  auto model = load_model(o.output_path);
  REQUIRE(model->info().max_positions == 100);
  REQUIRE(model->info().lm.max_new_tokens == 0);
  Generator g = make_generator(model, "");
  GenerateOptions ignore_eos;
  ignore_eos.ignore_eos = true;
  auto r = g.generate({{5, 6, 7}}, ignore_eos);
  REQUIRE(r);
  CHECK(r.value()[0].ids.size() == 97);  // every position there is
}

TEST_CASE("decoder-only files record their folds and structure", "[decoder_only]") {
  const auto gemma_model = load_model(convert_lm("gemma3_bf16", DType::kInt8));
  const ModelInfo& gemma = gemma_model->info();
  CHECK(gemma.architecture == "decoder-only");
  CHECK(gemma.norm_kind == NormKind::kRmsNorm);
  CHECK(gemma.num_kv_heads == 1);
  CHECK(gemma.head_dim == 16);
  CHECK(gemma.sliding_window_layers == 3);  // sliding_window_pattern 3 over 4 layers: S S F S
  CHECK(gemma.final_logit_softcap == 5.0f);
  CHECK(gemma.activation == Activation::kGeluTanh);
  CHECK(gemma.lm.eos_ids == lm_expected("gemma3_bf16")["eos_token_ids"].get<std::vector<int32_t>>());
  auto fold = [&](const ModelInfo& info, const std::string& what) {
    auto it = std::find_if(info.folds.begin(), info.folds.end(), [&](const FoldInfo& f) { return f.what == what; });
    REQUIRE(it != info.folds.end());
    return *it;
  };
  // √56 = 7.483..., rounded to bf16 as transformers multiplies in the weights' dtype.
  CHECK(fold(gemma, "embed_scale").value == 7.46875);
  CHECK(fold(gemma, "embed_scale").value == lm_expected("gemma3_bf16")["embed_scale"].get<double>());
  CHECK(fold(gemma, "attention_scale").value == Approx(1 / std::sqrt(20.0)));  // query_pre_attn_scalar 20
  CHECK(fold(gemma, "attention_scale").targets[0].find("q_norm") != std::string::npos);
  const auto f32_model = load_model(convert_lm("gemma3_f32", DType::kInt8));
  const ModelInfo& f32 = f32_model->info();
  CHECK(fold(f32, "embed_scale").value == Approx(std::sqrt(48.0)).epsilon(1e-7));
  CHECK(f32.sliding_window_layers == 2);  // layer_types S F S, not the ignored _sliding_window_pattern
  const auto llama_model = load_model(convert_lm("llama3", DType::kInt8));
  const ModelInfo& llama = llama_model->info();
  CHECK(fold(llama, "attention_scale").targets[0].find("self_attn.q.weight") != std::string::npos);
  CHECK_FALSE(llama.tied_output);
  CHECK(load_model(convert_lm("qwen2", DType::kInt8))->info().sliding_window_layers == 0);  // use_sliding_window false
}

TEST_CASE("C API: a language model's session generates what the C++ Generator does, streaming each token",
          "[decoder_only]") {
  const std::string path = convert_lm("gemma3_f32", DType::kInt8);
  const json e = lm_expected("gemma3_f32");
  const auto prompt = e["prompts"][2].get<std::vector<int32_t>>();
  petrel_model* model = nullptr;
  REQUIRE(petrel_model_load(path.c_str(), &model) == PETREL_OK);
  CHECK(petrel_model_is_decoder_only(model) == 1);
  petrel_session* session = nullptr;
  REQUIRE(petrel_session_create(model, nullptr, 1, &session) == PETREL_OK);

  GenerateOptions cpp;
  cpp.max_new_tokens = 9;
  cpp.do_sample = true;
  cpp.top_k = 20u;
  cpp.temperature = 0.8f;
  cpp.seed = 1234;
  auto want = make_generator(load_model(path), "").generate({prompt}, cpp);
  REQUIRE(want);

  petrel_generate_options o;
  petrel_generate_options_init(&o);
  o.max_new_tokens = 9;
  o.do_sample = 1;
  o.top_k = 20;
  o.temperature = 0.8f;
  o.seed = 1234;
  struct Seen {
    std::vector<int32_t> last;
    size_t events = 0, finals = 0;
  } seen;
  o.on_token = [](void* data, const petrel_token_event* ev) {
    auto* s = static_cast<Seen*>(data);
    s->events += !ev->final;
    s->finals += ev->final != 0;
    s->last.assign(ev->ids, ev->ids + ev->length);
    return 1;
  };
  o.on_token_data = &seen;
  petrel_result* result = nullptr;
  REQUIRE(petrel_generate(session, prompt.data(), prompt.size(), &o, &result) == PETREL_OK);
  size_t n = 0;
  const int32_t* ids = petrel_result_ids(result, 0, 0, &n);
  REQUIRE(ids != nullptr);
  CHECK(std::vector<int32_t>(ids, ids + n) == want.value()[0].ids);
  CHECK(seen.events == n);
  CHECK(seen.finals == 1);
  CHECK(seen.last == want.value()[0].ids);
  petrel_result_free(result);

  // A callback calling back into its own session is refused, and the call goes on.
  struct Nested {
    petrel_session* session;
    const std::vector<int32_t>* prompt;
    std::vector<petrel_status> statuses;
  } nested{session, &prompt, {}};
  o.on_token = [](void* data, const petrel_token_event*) {
    auto* n = static_cast<Nested*>(data);
    petrel_result* inner = nullptr;
    n->statuses.push_back(petrel_generate(n->session, n->prompt->data(), n->prompt->size(), nullptr, &inner));
    petrel_result_free(inner);
    return 1;
  };
  o.on_token_data = &nested;
  REQUIRE(petrel_generate(session, prompt.data(), prompt.size(), &o, &result) == PETREL_OK);
  ids = petrel_result_ids(result, 0, 0, &n);
  REQUIRE(ids != nullptr);
  CHECK(std::vector<int32_t>(ids, ids + n) == want.value()[0].ids);
  CHECK(nested.statuses == std::vector<petrel_status>(n + 1, PETREL_INVALID_ARGUMENT));  // n tokens, one final
  petrel_result_free(result);
  o.on_token = nullptr;
  o.max_new_tokens = 100000;  // past the model's positions: refused before anything is computed
  CHECK(petrel_generate(session, prompt.data(), (size_t{1} << 20) + 1, &o, &result) == PETREL_INVALID_ARGUMENT);
  CHECK_THAT(petrel_last_error(), Catch::Matchers::Contains("far over any model's positions"));

  // A language model's session does not translate; a bad struct_size is refused by name.
  const int32_t* inputs[] = {prompt.data()};
  const size_t lengths[] = {prompt.size()};
  CHECK(petrel_translate_ids(session, inputs, lengths, 1, nullptr, &result) == PETREL_INVALID_ARGUMENT);
  CHECK(std::string(petrel_last_error()).find("petrel_generate") != std::string::npos);
  o.max_new_tokens = 4;
  o.top_k = -2;  // -1 is the model's; below is a caller's mistake, not a silent default
  CHECK(petrel_generate(session, prompt.data(), prompt.size(), &o, &result) == PETREL_INVALID_ARGUMENT);
  CHECK_THAT(petrel_last_error(), Catch::Matchers::Contains("top_k is -2"));
  o.top_k = 20;
  o.struct_size = 8;
  CHECK(petrel_generate(session, prompt.data(), prompt.size(), &o, &result) == PETREL_INVALID_ARGUMENT);
  CHECK(std::string(petrel_last_error()).find("struct_size") != std::string::npos);
  petrel_session_free(session);
  petrel_model_free(model);
}

// The loader's checks of what decoder-only files add (format 1.7): each hostile value is
// refused naming its field.
TEST_CASE("crafted hostile decoder-only fields are rejected by name", "[decoder_only][format]") {
  std::vector<uint8_t> bytes = read_bytes(convert_lm("gemma3_f32", DType::kInt8));
  fb::Model* m = fb::GetMutableModel(bytes.data() + 4);
  auto expect_rejected = [&](const std::string& a, const std::string& b) {
    auto r = load_bytes(bytes);
    REQUIRE_FALSE(r.has_value());
    INFO(r.error().message);
    CHECK(r.error().message.find(a) != std::string::npos);
    CHECK(r.error().message.find(b) != std::string::npos);
  };
  auto layer = [&](uint32_t i) { return m->mutable_decoder()->mutable_layers()->GetMutableObject(i); };
  auto tensor_data = [&](int32_t index) {
    const fb::Tensor* t = m->tensors()->Get(static_cast<uint32_t>(index));
    uint32_t flatbuffer_size;
    std::memcpy(&flatbuffer_size, bytes.data(), 4);
    return bytes.data() + detail::data_section_start(flatbuffer_size) + t->data()->offset();
  };
  SECTION("K/V heads that do not divide the query heads") {
    REQUIRE(m->mutate_num_kv_heads(3));
    expect_rejected("num_heads 4", "not a multiple of num_kv_heads 3");
  }
  SECTION("a head width the tensors do not have") {
    REQUIRE(m->mutate_head_dim(20));
    expect_rejected("decoder.layers.0.self_attn.q", "expected [80, 48]");
  }
  SECTION("a sliding window past every position") {
    REQUIRE(layer(0)->mutate_sliding_window(0xffffffffu));
    expect_rejected("decoder.layers.0.sliding_window", "out of range");
  }
  SECTION("a layer without its rotary frequencies") {
    REQUIRE(layer(1)->mutate_rope_inv_freq(-1));
    expect_rejected("decoder.layers.1.rope_inv_freq", "missing");
  }
  SECTION("non-finite rotary frequencies") {
    const float nan = std::nanf("");
    std::memcpy(tensor_data(layer(1)->rope_inv_freq()) + 4, &nan, 4);  // the full-attention layer's own table
    expect_rejected("decoder.layers.1.rope_inv_freq[1]", "not finite");
  }
  SECTION("an unknown norm kind") {
    REQUIRE(m->mutate_norm_kind(static_cast<fb::NormKind>(7)));
    expect_rejected("norm_kind", "unknown value");
  }
  SECTION("an EOS outside the vocabulary") {
    m->mutable_lm()->mutable_eos_ids()->Mutate(0, 128);
    expect_rejected("lm.eos_ids", "not a token id");
  }
  SECTION("a sampling default out of range") {
    REQUIRE(m->mutable_lm()->mutate_temperature(-1.0f));
    expect_rejected("lm.temperature", "out of range");
  }
  SECTION("a soft cap that is not a number") {
    REQUIRE(m->mutate_final_logit_softcap(std::nanf("")));
    expect_rejected("final_logit_softcap", "0..1e6");
  }
  SECTION("positions a decoder-only model does not use") {
    REQUIRE(m->mutable_decoder()->mutable_positions()->mutate_kind(fb::PositionKind::Learned));
    expect_rejected("decoder.positions", "rotary");
  }
  SECTION("a final logits bias a decoder-only model would ignore") {
    REQUIRE(m->mutate_final_logits_bias(layer(0)->rope_inv_freq()));
    expect_rejected("final_logits_bias", "has none");
  }
  SECTION("an encoder-decoder file claiming to be decoder-only") {
    REQUIRE(m->mutate_architecture(fb::Architecture::EncoderDecoder));
    expect_rejected("encoder-decoder models need", "num_kv_heads");
  }
}

// Converter refusals name the file and key (a checkpoint is untrusted input too).
TEST_CASE("the converter refuses what decoder-only configs may not say, by key", "[decoder_only][convert]") {
  TempDir tmp;
  auto refused = [&](const std::string& fixture, const std::function<void(json&)>& edit, const std::string& words) {
    const std::string dir = edited_fixture(fixture, tmp.file(fixture + "-edited"), edit);
    convert::ConvertOptions o;
    o.checkpoint_dir = dir;
    o.output_path = tmp.file("out.petrel");
    try {
      convert::convert_checkpoint(o);
      FAIL("converted: " << words);
    } catch (const convert::ConvertError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(words) != std::string::npos);
    }
    std::system(("rm -rf '" + dir + "'").c_str());
  };
  refused("llama3", [](json& c) { c["rope_scaling"]["rope_type"] = "yarn"; }, "rope scaling type 'yarn'");
  refused("llama3", [](json& c) { c["hidden_act"] = "relu2"; }, "activation 'relu2'");
  refused("llama3", [](json& c) { c["num_key_value_heads"] = 3; }, "not a multiple of num_key_value_heads");
  refused("llama3", [](json& c) { c["partial_rotary_factor"] = 0.5; }, "partial_rotary_factor");
  refused("gemma3_f32", [](json& c) { c["layer_types"] = {"sliding_attention"}; }, "layer_types");
  refused("gemma3_f32", [](json& c) { c["hidden_size"] = 64; }, "model.embed_tokens.weight");
  refused("qwen3", [](json& c) { c["eos_token_id"] = 1000; }, "key 'eos_token_id' must hold token ids below vocab_size 136");
}

// A crafted checkpoint's config value that would convert and then fail (logits not finite
// at the first step; a template refused when a chat starts; nlohmann's type_error with no
// file or key) is refused at conversion by the file, the key (with its path in the file),
// the range it must be in and the value given.
TEST_CASE("converter refusals name the file, the key, its range and the value", "[decoder_only][convert]") {
  using Catch::Matchers::Contains;
  TempDir tmp;
  struct Files {
    std::function<void(json&)> config;
    std::function<void(const std::string&)> extra;  // writes other files into the checkpoint
  };
  auto message_of = [&](const std::string& fixture, const Files& files) -> std::string {
    const std::string dir = edited_fixture(fixture, tmp.file(fixture + "-crafted"), files.config ? files.config : [](json&) {});
    if (files.extra) files.extra(dir);
    convert::ConvertOptions o;
    o.checkpoint_dir = dir;
    o.output_path = tmp.file("out.petrel");
    std::string message = "converted";
    try {
      convert::convert_checkpoint(o);
    } catch (const convert::ConvertError& e) {
      message = e.what();
    }
    std::system(("rm -rf '" + dir + "'").c_str());
    return message;
  };
  auto refused = [&](const std::string& fixture, const std::function<void(json&)>& edit,
                     const std::vector<std::string>& words) {
    const std::string message = message_of(fixture, {edit, nullptr});
    INFO(message);
    for (const std::string& w : words) CHECK_THAT(message, Contains(w));
  };

  SECTION("keys that must be strings") {
    refused("llama3", [](json& c) { c["rope_scaling"]["rope_type"] = 3; },
            {"config.json: key 'rope_scaling.rope_type' must be a string, got 3"});
    refused("llama3",
            [](json& c) {
              c["rope_scaling"].erase("rope_type");
              c["rope_scaling"]["type"] = 3;
            },
            {"config.json: key 'rope_scaling.type' must be a string, got 3"});
    refused("llama3",
            [](json& c) {
              c["rope_parameters"] = {{"rope_type", 2.5}, {"rope_theta", 10000.0}};
              c.erase("rope_scaling");
            },
            {"config.json: key 'rope_parameters.rope_type' must be a string, got 2.5"});
    refused("gemma3_f32",
            [](json& c) {
              c["rope_parameters"] = {{"full_attention", {{"rope_type", json::array()}}},
                                      {"sliding_attention", {{"rope_type", "default"}}}};
            },
            {"config.json: key 'rope_parameters.full_attention.rope_type' must be a string, got []"});
    refused("gemma3_f32", [](json& c) { c["rope_parameters"] = {{"full_attention", json::object()}}; },
            {"config.json: missing key 'rope_parameters.sliding_attention'"});
    refused("llama3", [](json& c) { c["rope_scaling"]["rope_type"] = "yarn"; },
            {"config.json: key 'rope_scaling.rope_type' names rope scaling type 'yarn', which is not supported"});
  }
  SECTION("sizes past the model file's limits") {
    refused("llama3", [](json& c) { c["vocab_size"] = uint64_t{1} << 31; },
            {"config.json: key 'vocab_size' must be a positive integer at most 16777216 (the model file's limit), "
             "got 2147483648"});
    refused("gemma3_f32", [](json& c) { c["sliding_window"] = uint64_t{1} << 31; },
            {"config.json: key 'sliding_window' must be a positive integer at most 1048576 (the model file's "
             "limit), got 2147483648"});
    refused("gemma3_f32", [](json& c) { c["sliding_window"] = 0; },
            {"key 'sliding_window' must be a positive integer at most 1048576", "got 0"});
    refused("llama3", [](json& c) { c["hidden_size"] = 1 << 17; },
            {"config.json: key 'hidden_size' must be a positive integer at most 65536", "got 131072"});
    refused("llama3", [](json& c) { c["num_hidden_layers"] = 5000; },
            {"key 'num_hidden_layers' must be a positive integer at most 1024", "got 5000"});
    refused("llama3", [](json& c) { c["max_position_embeddings"] = -512; },
            {"key 'max_position_embeddings' must be a positive integer at most 1048576", "got -512"});
    refused("llama3", [](json& c) { c["head_dim"] = 32768; },
            {"config.json: num_attention_heads x head_dim = 4 x 32768 = 131072 is more than 65536"});
    refused("llama3", [](json& c) { c["head_dim"] = 15; },
            {"config.json: key 'head_dim' must be even and positive", "got 15"});
    refused("llama3",
            [](json& c) {
              c.erase("head_dim");
              c["num_attention_heads"] = 128;
            },
            {"key 'head_dim' must be even and positive", "hidden_size / num_attention_heads = 64 / 128 = 0"});
  }
  SECTION("numbers that feed the attention scale, the norms and the soft cap") {
    for (const double scalar : {0.0, -24.0, 1e-300, 0.5, 1e300}) {
      INFO(scalar);
      refused("gemma3_f32", [&](json& c) { c["query_pre_attn_scalar"] = scalar; },
              {"config.json: key 'query_pre_attn_scalar' must be a number in [1, 65536]",
               "got " + json(scalar).dump()});
    }
    refused("gemma3_f32", [](json& c) { c["query_pre_attn_scalar"] = "24"; },
            {"key 'query_pre_attn_scalar' must be a number in [1, 65536]", "got \"24\""});
    refused("qwen3", [](json& c) { c["rms_norm_eps"] = 1e-300; },
            {"config.json: key 'rms_norm_eps' must be a number in [1e-30, 1)", "got 1e-300"});
    for (const double cap : {0.0, -30.0, 0.5, 1e7}) {
      INFO(cap);
      refused("gemma3_f32", [&](json& c) { c["final_logit_softcapping"] = cap; },
              {"config.json: key 'final_logit_softcapping' must be a number in [1, 1000000] (null: no cap)"});
    }
    refused("llama3", [](json& c) { c["attn_logit_softcapping"] = 50.0; },
            {"key 'attn_logit_softcapping' must be null", "got 50"});
  }
  SECTION("every RoPE input, where it is read") {
    for (const double theta : {0.0, -10000.0, 1.0, 1e-300, 1e13}) {
      INFO(theta);
      refused("llama3", [&](json& c) { c["rope_theta"] = theta; },
              {"config.json: key 'rope_theta' must be a number in (1, 1e+12]", "got " + json(theta).dump()});
    }
    refused("gemma3_f32", [](json& c) { c["rope_local_base_freq"] = 0.0; },
            {"config.json: key 'rope_local_base_freq' must be a number in (1, 1e+12]", "got 0.0"});
    refused("gemma3_f32",
            [](json& c) {
              c["rope_parameters"] = {{"full_attention", {{"rope_theta", 1e6}}},
                                      {"sliding_attention", {{"rope_theta", -1.0}}}};
            },
            {"config.json: key 'rope_parameters.sliding_attention.rope_theta' must be a number in (1, 1e+12]"});
    refused("llama3", [](json& c) { c["rope_scaling"]["factor"] = 0.0; },
            {"config.json: key 'rope_scaling.factor' must be a number in [1, 1048576]", "got 0.0"});
    refused("llama3", [](json& c) { c["rope_scaling"].erase("factor"); },
            {"config.json: missing key 'rope_scaling.factor'"});
    refused("llama3", [](json& c) { c["rope_scaling"]["low_freq_factor"] = -1.0; },
            {"key 'rope_scaling.low_freq_factor' must be a number in (0, 1000000]", "got -1.0"});
    refused("llama3", [](json& c) { c["rope_scaling"]["high_freq_factor"] = 1.0; },
            {"key 'rope_scaling.high_freq_factor' must exceed low_freq_factor 1, got 1"});
    refused("llama3", [](json& c) { c["rope_scaling"]["original_max_position_embeddings"] = 0; },
            {"key 'rope_scaling.original_max_position_embeddings' must be a positive integer at most 1048576",
             "got 0"});
    refused("llama3", [](json& c) { c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 0.5}}; },
            {"key 'rope_scaling.factor' must be a number in [1, 1048576]", "got 0.5"});
    refused("llama3",
            [](json& c) {
              c["rope_parameters"] = {{"rope_theta", 10000.0}, {"partial_rotary_factor", 0.25}};
              c.erase("rope_scaling");
            },
            {"key 'rope_parameters.partial_rotary_factor' must be 1", "got 0.25"});
  }
  SECTION("generation_config.json's sampling defaults, in the engine's ranges") {
    auto generation = [&](const json& g) {
      return message_of("qwen3", {nullptr, [g](const std::string& dir) {
                                    std::ofstream(dir + "/generation_config.json") << g.dump();
                                  }});
    };
    CHECK_THAT(generation({{"temperature", 1e-9}}),
               Contains("generation_config.json: key 'temperature' must be a number in [1e-06, 1000000], got 1e-09"));
    CHECK_THAT(generation({{"top_k", -1}}),
               Contains("generation_config.json: key 'top_k' must be an integer in 0..16777216 (0: no top-k), got -1"));
    CHECK_THAT(generation({{"top_p", 0.0}}), Contains("key 'top_p' must be a number in [1e-06, 1], got 0.0"));
    CHECK_THAT(generation({{"repetition_penalty", 1e7}}),
               Contains("key 'repetition_penalty' must be a number in [1e-06, 1000000]"));
  }
}

// A chat template the engine cannot run was converted, inspected and loaded, and refused
// only when a chat started: the converter parses it, and names the file it came from and
// the parser's line:column.
TEST_CASE("a chat template that does not parse is refused at conversion, naming its file and position",
          "[decoder_only][convert]") {
  using Catch::Matchers::Contains;
  TempDir tmp;
  const std::string macro = "{% macro greet(m) %}{{ m.content }}{% endmacro %}{% for m in messages %}{{ greet(m) }}{% endfor %}";
  auto message_of = [&](const std::string& name, const std::function<void(json&)>& edit,
                        const std::function<void(const std::string&)>& write) {
    const std::string dir = edited_fixture("gemma3_f32", tmp.file(name), edit);
    write(dir);
    return conversion_message(dir, tmp.file(name + ".petrel"));
  };
  auto tokenizer_config = [](const json& config) {
    return [config](const std::string& dir) { std::ofstream(dir + "/tokenizer_config.json") << config.dump(); };
  };
  const auto unchanged = [](json&) {};
  // chat_template.jinja: the file is named, and the construct at line 1, column 4.
  std::string m = message_of("jinja", unchanged, [&](const std::string& dir) { std::ofstream(dir + "/chat_template.jinja") << macro; });
  CHECK_THAT(m, Contains("/chat_template.jinja: chat template 1:4: '{% macro %}' is not supported"));
  // tokenizer_config.json's chat_template, a string or the "default" of named templates.
  m = message_of("config", unchanged, tokenizer_config({{"chat_template", "\n\n" + macro}}));
  CHECK_THAT(m, Contains("/tokenizer_config.json: key 'chat_template': chat template 3:4: '{% macro %}'"));
  m = message_of("named", unchanged,
                 tokenizer_config({{"chat_template", {{{"name", "tool_use"}, {"template", "{{ x }}"}},
                                                      {{"name", "default"}, {"template", macro}}}}}));
  CHECK_THAT(m, Contains("key 'chat_template[1].template': chat template 1:4: '{% macro %}'"));
  // Named templates whose entries are not {name: string, template: string}: the entry and key.
  m = message_of("name-number", unchanged,
                 tokenizer_config({{"chat_template", {{{"name", 3}, {"template", "{{ x }}"}}}}}));
  CHECK_THAT(m, Contains("tokenizer_config.json: key 'chat_template[0].name' must be a string, got 3"));
  m = message_of("entry", unchanged, tokenizer_config({{"chat_template", {{{"name", "default"}}, 7}}}));
  CHECK_THAT(m, Contains("tokenizer_config.json: key 'chat_template[0].template' must be a string, got nothing"));
  m = message_of("bos", unchanged, tokenizer_config({{"bos_token", 5}}));
  CHECK_THAT(m, Contains("tokenizer_config.json: key 'bos_token' must be a token's text"));
  // Checked before the weights are read: a checkpoint whose weights are wrong too is
  // refused for its template (no minutes of quantization first).
  m = message_of("early", [](json& c) { c["hidden_size"] = 64; },
                 [&](const std::string& dir) { std::ofstream(dir + "/chat_template.jinja") << macro; });
  CHECK_THAT(m, Contains("chat_template.jinja: chat template 1:4:"));
  // A template that parses converts, and the model carries it.
  const std::string good = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}";
  REQUIRE(message_of("good", unchanged, [&](const std::string& dir) { std::ofstream(dir + "/chat_template.jinja") << good; }) ==
          "converted");
  CHECK(load_model(tmp.file("good.petrel"))->info().lm.chat_template == good);
}

// tokenizer.json's regexes are compiled at conversion as the engine compiles them at
// load: a pattern it would refuse is named by its JSON path, not by the written file's
// field (tokenizer.hf.pre_tokenizers[1].pattern) and a .partial path.
TEST_CASE("a tokenizer.json regex the engine cannot run is refused at conversion by its JSON path",
          "[decoder_only][convert]") {
  TempDir tmp;
  auto convert_with = [&](const std::string& name, const json& pre_tokenizer, const json& normalizer) {
    const std::string dir = edited_fixture("gemma3_f32", tmp.file(name), [](json&) {});
    json tokenizer = {{"model", {{"type", "BPE"}, {"vocab", {{"a", 3}, {"b", 4}, {"ab", 5}}}, {"merges", {"a b"}}}},
                      {"added_tokens", json::array()}};
    if (!pre_tokenizer.is_null()) tokenizer["pre_tokenizer"] = pre_tokenizer;
    if (!normalizer.is_null()) tokenizer["normalizer"] = normalizer;
    std::ofstream(dir + "/tokenizer.json") << tokenizer.dump();
    return conversion_message(dir, tmp.file(name + ".petrel"));
  };
  auto split = [](const std::string& regex) {
    return json{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
  };
  const json sequence = {{"type", "Sequence"}, {"pretokenizers", {split("a"), split("(?<=a)b")}}};
  std::string m = convert_with("lookbehind", sequence, nullptr);
  INFO(m);
  CHECK_THAT(m, Catch::Matchers::Contains("/tokenizer.json: pre_tokenizer.pretokenizers[1].pattern.Regex: ") &&
                    Catch::Matchers::Contains("lookbehind"));
  m = convert_with("replace", nullptr, {{"type", "Replace"}, {"pattern", {{"Regex", "(a"}}}, {"content", "b"}});
  CHECK_THAT(m, Catch::Matchers::Contains("/tokenizer.json: normalizer.pattern.Regex: ") &&
                    Catch::Matchers::Contains("'(' without its ')'"));
  m = convert_with("not-a-string", {{"type", "Split"}, {"pattern", {{"Regex", 5}}}, {"behavior", "Isolated"}}, nullptr);
  CHECK_THAT(m, Catch::Matchers::Contains("/tokenizer.json: pre_tokenizer.pattern.Regex: must be a string, got 5"));
  CHECK(convert_with("runs", {{"type", "Sequence"}, {"pretokenizers", {split("a"), split("\\s+|b")}}}, nullptr) ==
        "converted");
}

// A multimodal Gemma 3 checkpoint (Gemma3ForConditionalGeneration): its text tower, in
// either layout transformers has saved, converts to the same model as the text-only
// checkpoint, the vision tower left out.
TEST_CASE("a multimodal gemma3 checkpoint's text tower converts, in both layouts", "[decoder_only][convert]") {
  TempDir tmp;
  const json e = lm_expected("gemma3_f32");
  const auto tensors = read_checkpoint(lm_fixture_dir("gemma3_f32") + "/model.safetensors");
  json text_config = json::parse(std::ifstream(lm_fixture_dir("gemma3_f32") + "/config.json"));
  json config = {{"model_type", "gemma3"}, {"architectures", {"Gemma3ForConditionalGeneration"}},
                 {"eos_token_id", text_config["eos_token_id"]}, {"vision_config", {{"hidden_size", 8}}}};
  text_config.erase("eos_token_id");  // taken from the top level, as a real multimodal config has it
  text_config["model_type"] = "gemma3_text";
  config["text_config"] = text_config;
  for (const std::string layout : {"model.language_model.", "language_model.model."}) {
    INFO(layout);
    const std::string dir = tmp.file("mm-" + std::to_string(layout.size()) + layout.substr(0, 5));
    REQUIRE(std::system(("mkdir -p '" + dir + "'").c_str()) == 0);
    std::map<std::string, RawTensor> renamed;
    for (const auto& [name, t] : tensors) renamed[layout + name.substr(std::string("model.").size())] = t;
    const std::string vision = layout == "model.language_model." ? "model.vision_tower." : "vision_tower.";
    renamed[vision + "patch_embedding.weight"] = {{2, 3}, {1, 2, 3, 4, 5, 6}};
    renamed["multi_modal_projector.mm_input_projection_weight"] = {{3}, {1, 2, 3}};
    write_checkpoint(dir + "/model.safetensors", renamed);
    std::ofstream(dir + "/config.json") << config.dump();
    std::ofstream(dir + "/generation_config.json") << std::ifstream(lm_fixture_dir("gemma3_f32") + "/generation_config.json").rdbuf();
    convert::ConvertOptions o;
    o.checkpoint_dir = dir;
    o.output_path = dir + "/m.petrel";
    o.linear_dtype = o.embedding_dtype = DType::kF32;
    const convert::ConvertReport report = convert::convert_checkpoint(o);
    CHECK(std::any_of(report.notes.begin(), report.notes.end(),
                      [](const std::string& n) { return n.find("2 vision tensors left out") != std::string::npos; }));
    auto model = load_model(o.output_path);
    CHECK(model->info().model_type == "gemma3");
    auto out = make_generator(model, "").generate(id_lists(e["prompts"]), [&] {
      GenerateOptions g;
      g.max_new_tokens = e["max_new_tokens"];
      return g;
    }());
    REQUIRE(out);
    for (size_t p = 0; p < out.value().size(); ++p) CHECK(out.value()[p].ids == e["greedy"][p].get<std::vector<int32_t>>());
  }
}

// transformers 5 saves RoPE as rope_parameters (one object, or Gemma 3's one per layer
// type): the same model as the older rope_theta / rope_scaling / rope_local_base_freq keys.
TEST_CASE("rope_parameters (transformers 5 configs) convert to the same model", "[decoder_only][convert]") {
  TempDir tmp;
  auto greedy_with = [&](const std::string& fixture, const std::function<void(json&)>& edit) {
    const std::string dir = edited_fixture(fixture, tmp.file(fixture + "-v5"), edit);
    convert::ConvertOptions o;
    o.checkpoint_dir = dir;
    o.output_path = dir + "/m.petrel";
    o.linear_dtype = o.embedding_dtype = DType::kF32;
    convert::convert_checkpoint(o);
    const json e = lm_expected(fixture);
    GenerateOptions g;
    g.max_new_tokens = e["max_new_tokens"];
    auto out = make_generator(load_model(o.output_path), "").generate(id_lists(e["prompts"]), g);
    REQUIRE(out);
    for (size_t p = 0; p < out.value().size(); ++p) CHECK(out.value()[p].ids == e["greedy"][p].get<std::vector<int32_t>>());
  };
  greedy_with("llama3", [](json& c) {
    json params = c["rope_scaling"];
    params["rope_theta"] = c["rope_theta"];
    c["rope_parameters"] = params;
    c.erase("rope_scaling");
    c.erase("rope_theta");
  });
  greedy_with("gemma3_f32", [](json& c) {
    c["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", c["rope_theta"]}}},
                            {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", c["rope_local_base_freq"]}}}};
    c.erase("rope_theta");
    c.erase("rope_local_base_freq");
  });
  // And the values are read, not defaulted: the stored frequencies follow a changed theta
  // (pair i turns at theta^(-2i / head_dim); head_dim 16).
  const std::string dir = edited_fixture("gemma3_f32", tmp.file("gemma-theta"), [](json& c) {
    c["rope_parameters"] = {{"full_attention", {{"rope_theta", 5000.0}}}, {"sliding_attention", {{"rope_theta", 123.0}}}};
  });
  convert::ConvertOptions o;
  o.checkpoint_dir = dir;
  o.output_path = dir + "/m.petrel";
  convert::convert_checkpoint(o);
  auto model = load_model(o.output_path);
  const auto& layers = detail::ModelAccess::weights(*model).decoder.layers;  // S F S
  CHECK(layers[0].rope_inv_freq[1] == Approx(std::pow(123.0, -2.0 / 16)).epsilon(1e-6));
  CHECK(layers[1].rope_inv_freq[1] == Approx(std::pow(5000.0, -2.0 / 16)).epsilon(1e-6));
}
