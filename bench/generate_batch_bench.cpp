// Language-model requests stepped together (Generator::generate_text_batch) against the
// same requests one after another (generate_text): generated tokens per second of wall
// time for N requests of 64 new tokens each (greedy, EOS ignored: every request runs its
// whole length), prompts of a few words. A step reads every weight once for all the
// sequences it runs, so the batch's throughput grows with N until the products stop
// being memory-bound. The model is PETREL_BENCH_MODEL (a decoder-only .petrel with its
// tokenizer, e.g. the Gemma-3-270M stand-in of bench/README.md); PETREL_BENCH_THREADS
// threads (1 unless set).
//
//   PETREL_BENCH_MODEL=gemma-3-270m-int8.petrel petrel_generate_batch_bench
//
// Counters: tokens_per_s (generated tokens / wall time), requests.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "petrel/generator.h"
#include "petrel/model.h"
#include "bench_model.h"

using namespace petrel;

namespace {

constexpr size_t kNewTokens = 64;

std::shared_ptr<const Model> bench_model() { return bench::env_model("generate_batch_bench"); }

std::vector<TextRequest> requests(size_t n) {
  const char* starts[] = {"The weather today", "Once upon a time", "The file could not be", "Translate this",
                          "In the beginning", "Press the button to", "Error while reading", "My favourite"};
  std::vector<TextRequest> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i].prompt = std::string(starts[i % 8]) + " " + std::to_string(i);
    out[i].options.max_new_tokens = kNewTokens;
    out[i].options.do_sample = false;
    out[i].options.ignore_eos = true;
  }
  return out;
}

Generator make_generator(benchmark::State& state) {
  TranslatorOptions t;
  if (const char* threads = std::getenv("PETREL_BENCH_THREADS")) t.threads = std::strtoul(threads, nullptr, 10);
  auto g = Generator::create(bench_model(), t);
  if (!g) state.SkipWithError(g.error().message.c_str());
  return std::move(g.value());
}

void BM_one_at_a_time(benchmark::State& state) {
  if (!bench_model()) return state.SkipWithError("set PETREL_BENCH_MODEL to a language model file");
  Generator g = make_generator(state);
  const auto batch = requests(static_cast<size_t>(state.range(0)));
  size_t tokens = 0;
  for (auto _ : state)
    for (const TextRequest& r : batch) {
      auto out = g.generate_text(r.prompt, r.options);
      if (!out) return state.SkipWithError(out.error().message.c_str());
      tokens += out.value().ids.size();
    }
  state.counters["tokens_per_s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.counters["requests"] = static_cast<double>(batch.size());
}

void BM_stepped_together(benchmark::State& state) {
  if (!bench_model()) return state.SkipWithError("set PETREL_BENCH_MODEL to a language model file");
  Generator g = make_generator(state);
  const auto batch = requests(static_cast<size_t>(state.range(0)));
  size_t tokens = 0;
  for (auto _ : state) {
    for (const auto& out : g.generate_text_batch(batch)) {
      if (!out) return state.SkipWithError(out.error().message.c_str());
      tokens += out.value().ids.size();
    }
  }
  state.counters["tokens_per_s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.counters["requests"] = static_cast<double>(batch.size());
}

}  // namespace

BENCHMARK(BM_one_at_a_time)->Arg(1)->Arg(4)->Arg(8)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
BENCHMARK(BM_stepped_together)->Arg(1)->Arg(4)->Arg(8)->Arg(16)->Arg(32)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
BENCHMARK_MAIN();
