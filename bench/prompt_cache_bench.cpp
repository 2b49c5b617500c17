// Prompt caches (Generator::set_prompt_cache_bytes, save_prompt_cache, load_prompt_cache):
// the time to the first generated token of a 2,000-token prompt (a) cold, (b) warm in
// process (the prompt's state kept by the Generator: the same prompt, and the prompt with
// 16 new tokens after it), (c) from a file (a fresh Generator of the same Model loads the
// state, then generates; the load is timed too). The model is PETREL_BENCH_MODEL (a
// decoder-only .petrel, e.g. the Gemma-3-270M stand-in of bench/README.md); one thread;
// f32 K/V unless PETREL_BENCH_KV=f16.
//
//   PETREL_BENCH_MODEL=gemma-3-270m-int8.petrel petrel_prompt_cache_bench
//
// Counters: reused (prompt tokens not run), run (prompt tokens run), file_MB.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "petrel/generator.h"
#include "petrel/model.h"
#include "bench_model.h"

using namespace petrel;

namespace {

constexpr size_t kPromptTokens = 2000;

std::shared_ptr<const Model> bench_model() { return bench::env_model("prompt_cache_bench"); }

// kPromptTokens + extra ids, the same every run (ids past the special tokens).
std::vector<int32_t> prompt_ids(const Model& model, size_t extra = 0) {
  std::mt19937 rng(2000);
  const uint32_t vocab = model.info().vocab_size;
  std::uniform_int_distribution<int32_t> id(std::min<int32_t>(1000, static_cast<int32_t>(vocab / 2)),
                                            static_cast<int32_t>(vocab) - 1);
  std::vector<int32_t> ids(kPromptTokens + extra);
  for (int32_t& x : ids) x = id(rng);
  return ids;
}

GenerateOptions one_token() {
  GenerateOptions o;
  o.max_new_tokens = 1;
  o.do_sample = false;
  o.ignore_eos = true;
  const char* kv = std::getenv("PETREL_BENCH_KV");
  o.kv_cache_f16 = kv != nullptr && std::string(kv) == "f16";
  return o;
}

Generator make_generator(const std::shared_ptr<const Model>& model) { return std::move(Generator::create(model).value()); }

// Seconds from `start` to the first generated token of `prompt`; the reused count.
double first_token(Generator& g, const std::vector<int32_t>& prompt, std::chrono::steady_clock::time_point start,
                   size_t& reused, benchmark::State& state) {
  GenerateOptions o = one_token();
  std::chrono::steady_clock::time_point first{};
  o.on_token = [&](const TokenEvent& e) {
    if (!e.final && first == std::chrono::steady_clock::time_point{}) first = std::chrono::steady_clock::now();
    return true;
  };
  auto r = g.generate({prompt}, o);
  if (!r) {
    state.SkipWithError(r.error().message.c_str());
    return 0;
  }
  reused = r.value()[0].reused_tokens;
  return std::chrono::duration<double>(first - start).count();
}

void report(benchmark::State& state, size_t reused, size_t prompt) {
  state.counters["reused"] = static_cast<double>(reused);
  state.counters["run"] = static_cast<double>(prompt - reused);
}

void cold(benchmark::State& state) {
  auto model = bench_model();
  if (!model) return state.SkipWithError("set PETREL_BENCH_MODEL to a decoder-only .petrel");
  Generator g = make_generator(model);
  const std::vector<int32_t> prompt = prompt_ids(*model);
  size_t reused = 0;
  for (auto _ : state) state.SetIterationTime(first_token(g, prompt, std::chrono::steady_clock::now(), reused, state));
  report(state, reused, prompt.size());
}

void warm(benchmark::State& state, size_t extra) {
  auto model = bench_model();
  if (!model) return state.SkipWithError("set PETREL_BENCH_MODEL to a decoder-only .petrel");
  Generator g = make_generator(model);
  g.set_prompt_cache_bytes(size_t{1} << 30);
  size_t reused = 0;
  first_token(g, prompt_ids(*model), std::chrono::steady_clock::now(), reused, state);  // keeps its state
  std::vector<int32_t> prompt = prompt_ids(*model);
  std::mt19937 rng(16);
  for (auto _ : state) {
    prompt.resize(kPromptTokens);  // new tokens after it each time: a kept state of the last would hold them
    for (size_t i = 0; i < extra; ++i) prompt.push_back(static_cast<int32_t>(1000 + rng() % 1000));
    state.SetIterationTime(first_token(g, prompt, std::chrono::steady_clock::now(), reused, state));
  }
  report(state, reused, prompt.size());
}

void from_file(benchmark::State& state) {
  auto model = bench_model();
  if (!model) return state.SkipWithError("set PETREL_BENCH_MODEL to a decoder-only .petrel");
  const std::string path = "/tmp/petrel-prompt-cache-bench-" + std::to_string(getpid()) + ".cache";
  {
    Generator writer = make_generator(model);
    writer.set_prompt_cache_bytes(size_t{1} << 30);
    size_t reused = 0;
    first_token(writer, prompt_ids(*model), std::chrono::steady_clock::now(), reused, state);
    if (Status s = writer.save_prompt_cache(path); !s) return state.SkipWithError(s.error().message.c_str());
  }
  const std::vector<int32_t> prompt = prompt_ids(*model);
  size_t reused = 0;
  for (auto _ : state) {
    Generator g = make_generator(model);  // a fresh one: nothing kept but what the file holds
    const auto start = std::chrono::steady_clock::now();
    if (Status s = g.load_prompt_cache(path); !s) {
      state.SkipWithError(s.error().message.c_str());
      break;
    }
    state.SetIterationTime(first_token(g, prompt, start, reused, state));
  }
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    std::fseek(f, 0, SEEK_END);
    state.counters["file_MB"] = static_cast<double>(std::ftell(f)) / 1e6;
    std::fclose(f);
  }
  std::remove(path.c_str());
  report(state, reused, prompt.size());
}

BENCHMARK(cold)->Name("first_token/2000/cold")->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(warm, same, 0)->Name("first_token/2000/warm_same_prompt")->UseManualTime()->Iterations(5)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(warm, plus16, 16)->Name("first_token/2000/warm_plus_16_tokens")->UseManualTime()->Iterations(5)->Unit(benchmark::kMillisecond);
BENCHMARK(from_file)->Name("first_token/2000/from_file")->UseManualTime()->Iterations(5)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
