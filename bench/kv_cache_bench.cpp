// The decoder-only KV cache's types, f32, f16 and int8 (GenerateOptions::kv_cache_f16,
// kv_cache_int8): (1) one query's attention over 2,048 and 8,192 cached positions at
// Gemma-3-270M's shape (4 query heads over 1 K/V head of 256 columns), on the best kernel
// path, from cache and from memory; (2) with PETREL_BENCH_MODEL=<decoder-only .petrel>,
// one generation step (one token through every layer, one thread) at a context of 2,048
// and 8,192 positions per cache type, with the caches' bytes as counters.
//
//   PETREL_BENCH_MODEL=gemma-3-270m-int8.petrel petrel_kv_cache_bench --benchmark_min_time=2
//
// Rates: GB/s of K/V bytes an attention reads; steps: time per token (tokens/s counter).
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>

#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "layers/aligned_vector.h"
#include "model_access.h"
#include "models/decoder_only.h"
#include "petrel/model.h"
#include "threads/thread_pool.h"

using namespace petrel;
using namespace petrel::kernels;

namespace {

constexpr DType kCacheTypes[] = {DType::kF32, DType::kF16, DType::kInt8};

const char* type_name(DType t) { return t == DType::kInt8 ? "int8" : t == DType::kF16 ? "f16" : "f32"; }

layers::AlignedVector<float> random_values(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  layers::AlignedVector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

void set_rate(benchmark::State& state, const char* name, double amount) {
  state.counters[name] = benchmark::Counter(amount * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

// Bytes that surely miss the last-level cache (as kernel_bench.cpp's): three times its
// size, at least 96 MB.
size_t beyond_last_level_cache() {
  const long l3 = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
  return std::max<size_t>(96u << 20, l3 > 0 ? 3 * static_cast<size_t>(l3) : 0);
}

// One step's attention for one layer: 4 query heads over one K/V head of 256 columns and
// `positions` keys, as one kernel call (the engine splits long contexts into partitions of
// 256 keys and merges them; the bytes read are the same). With `rotate_bytes`, copies of
// K/V spanning that many bytes are rotated so each call reads its cache from memory.
void attention_bench(benchmark::State& state, Isa isa, DType type, size_t positions, size_t rotate_bytes) {
  const KernelTable* kt = table_for(isa);
  if (kt == nullptr) return state.SkipWithError("path not runnable here");
  const size_t heads = 4, hd = 256;
  const size_t row_bytes = models::cache_row_bytes(type, 1, hd), cache_bytes = positions * row_bytes;
  const size_t copies = rotate_bytes / (2 * cache_bytes) + 1;
  const auto q = random_values(heads * hd, 1);
  const auto k = random_values(positions * hd, 2), v = random_values(positions * hd, 3);
  layers::AlignedVector<uint8_t> ks(copies * cache_bytes), vs(copies * cache_bytes);
  for (size_t c = 0; c < copies; ++c) {
    if (type == DType::kInt8) {
      kt->store_int8_kv(k.data(), positions, 1, hd, ks.data() + c * cache_bytes);
      kt->store_int8_kv(v.data(), positions, 1, hd, vs.data() + c * cache_bytes);
    } else {
      kt->store_as(k.data(), k.size(), type, ks.data() + c * cache_bytes);
      kt->store_as(v.data(), v.size(), type, vs.data() + c * cache_bytes);
    }
  }
  const size_t scale_offset = int8_kv_scales_offset(1, hd);
  std::vector<float> scores(positions), out(heads * hd);
  size_t copy = 0;
  for (auto _ : state) {
    const uint8_t* kc = ks.data() + copy * cache_bytes;
    const uint8_t* vc = vs.data() + copy * cache_bytes;
    if (type == DType::kInt8)
      kt->attend_int8(q.data(), reinterpret_cast<const int8_t*>(kc), reinterpret_cast<const int8_t*>(vc), nullptr,
                      positions, row_bytes, scale_offset, hd, heads, scores.data(), out.data(), nullptr);
    else
      kt->attend(q.data(), kc, vc, type, nullptr, positions, hd, hd, heads, scores.data(), out.data(), nullptr);
    benchmark::DoNotOptimize(out.data());
    copy = (copy + 1) % copies;
  }
  set_rate(state, "GB/s", double(2 * cache_bytes));
  state.counters["kv_bytes"] = double(2 * cache_bytes);
}

// A decoder-only model's generation step at a context of `context` positions: the caches
// are filled once by a prompt of that many ids, then each iteration runs one token at
// position `context` and rewinds (so every step sees the same context).
struct LoadedModel {
  std::shared_ptr<const Model> model;
  std::string error;
};

const LoadedModel& bench_model() {
  static const LoadedModel loaded = [] {
    LoadedModel m;
    const char* path = std::getenv("PETREL_BENCH_MODEL");
    if (path == nullptr) return m;
    auto r = Model::load(path);
    if (!r) m.error = r.error().message;
    else if (!r.value()->info().decoder_only) m.error = std::string(path) + " is not a decoder-only model";
    else m.model = std::move(r.value());
    return m;
  }();
  return loaded;
}

// Steps timed per context and cache type (PETREL_BENCH_STEPS overrides).
const int kSteps = std::getenv("PETREL_BENCH_STEPS") ? std::atoi(std::getenv("PETREL_BENCH_STEPS")) : 64;

void step_bench(benchmark::State& state, DType type, size_t context) {
  const LoadedModel& m = bench_model();
  if (!m.model) return state.SkipWithError(m.error.c_str());
  const ModelInfo& info = m.model->info();
  if (context + 1 > info.max_positions) return state.SkipWithError("the model has fewer positions");
  threads::ThreadPool pool(1);
  models::DecoderOnly graph(detail::ModelAccess::weights(*m.model), *table_for(best_isa()), pool);
  layers::Workspace ws;
  graph.reserve(ws);
  models::LmState st;
  graph.start(context + 1, type, st);
  // A fixed prompt spread over the vocabulary (random weights: any ids will do).
  std::vector<int32_t> prompt(context);
  for (size_t i = 0; i < context; ++i) prompt[i] = static_cast<int32_t>(2 + (i * 7919) % (info.vocab_size - 2));
  std::vector<float> logits(graph.vocab_size());
  graph.forward(prompt.data(), prompt.size(), st, ws, logits.data());
  size_t kv_bytes = 0;
  for (size_t l = 0; l < st.k.size(); ++l) kv_bytes += st.k[l].size() + st.v[l].size();
  const int32_t token = 5;
  for (auto _ : state) {
    graph.forward(&token, 1, st, ws, logits.data());
    benchmark::DoNotOptimize(logits.data());
    graph.rewind(context, st);
  }
  state.counters["tokens/s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["kv_MiB"] = double(kv_bytes) / (1 << 20);
}

void register_all() {
  const Isa isa = best_isa();
  const std::string path = isa_name(isa);
  for (size_t positions : {size_t{2048}, size_t{8192}})
    for (DType type : kCacheTypes) {
      const std::string shape = "/" + std::string(type_name(type)) + "/" + std::to_string(positions);
      benchmark::RegisterBenchmark(("attention_in_cache/" + path + shape).c_str(), attention_bench, isa, type,
                                   positions, size_t{0})
          ->UseRealTime();
      benchmark::RegisterBenchmark(("attention_from_memory/" + path + shape).c_str(), attention_bench, isa, type,
                                   positions, beyond_last_level_cache())
          ->UseRealTime();
    }
  if (std::getenv("PETREL_BENCH_MODEL") == nullptr) return;
  for (size_t context : {size_t{2048}, size_t{8192}})
    for (DType type : kCacheTypes)
      benchmark::RegisterBenchmark(
          ("step/" + std::string(type_name(type)) + "/" + std::to_string(context)).c_str(), step_bench, type, context)
          ->UseRealTime()
          ->Iterations(kSteps)  // one call: the prefill of the context runs once
          ->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
