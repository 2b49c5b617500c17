// tokenizer.json throughput: encode (text -> ids, special tokens added) and decode
// (ids -> text) of the real Gemma 3, Qwen3 and Llama 3 tokenizers over the oracle's 102,690
// gettext lines (tests/fixtures/hf_tokenizer), and what loading a tokenizer costs once
// its file is mapped (binding the stored tables and building the tokenizer).
// bench/hf_tokenizer_speed.sh runs transformers.js on the same lines (bench/README.md).
//
//   petrel_hf_tokenizer_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <sstream>
#include <string>
#include <vector>

#include "bench_support.h"

using namespace petrel;

namespace {

const std::string kDir = PETREL_HF_FIXTURES_DIR;

const std::vector<std::string>& lines() {
  static const std::vector<std::string> all = [] {
    std::vector<std::string> out;
    std::istringstream in(bench::xz_decompress(kDir + "/lines.txt.xz"));
    for (std::string line; std::getline(in, line);) {
      std::string text;  // make_hf_tokenizer_fixtures.py's escapes
      for (size_t i = 0; i < line.size(); ++i) {
        if (line[i] == '\\' && i + 1 < line.size()) {
          const char c = line[++i];
          text.push_back(c == 'n' ? '\n' : c == 't' ? '\t' : c);
        } else {
          text.push_back(line[i]);
        }
      }
      out.push_back(std::move(text));
    }
    return out;
  }();
  return all;
}

const bench::HfFixture& converted(const std::string& name) {
  static std::map<std::string, bench::HfFixture> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, bench::load_hf_fixture(kDir + "/" + name)).first;
  return it->second;
}

void encode(benchmark::State& state, const std::string& name) {
  const text::HfTokenizer& t = *converted(name).tokenizer;
  size_t bytes = 0, tokens = 0;
  for (auto _ : state) {
    for (const std::string& line : lines()) {
      auto ids = t.encode_text(line, true);
      tokens += ids.value().size();
      bytes += line.size();
    }
  }
  state.counters["MB/s"] = benchmark::Counter(static_cast<double>(bytes) / 1e6, benchmark::Counter::kIsRate);
  state.counters["lines/s"] =
      benchmark::Counter(static_cast<double>(lines().size() * state.iterations()), benchmark::Counter::kIsRate);
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}

void decode(benchmark::State& state, const std::string& name) {
  const text::HfTokenizer& t = *converted(name).tokenizer;
  std::vector<std::vector<int32_t>> all;
  for (const std::string& line : lines()) all.push_back(t.encode_text(line, true).value());
  size_t tokens = 0;
  for (auto _ : state)
    for (const auto& ids : all) {
      benchmark::DoNotOptimize(t.decode_ids(ids.data(), ids.size(), true));
      tokens += ids.size();
    }
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}

// Binding the stored tables and building the tokenizer (the model file's part of a
// load, its bytes already in memory).
void load(benchmark::State& state, const std::string& name) {
  const bench::HfFixture& c = converted(name);
  for (auto _ : state) {
    const auto* root = flatbuffers::GetRoot<fb::Tokenizer>(c.buffer.data());
    auto tables = detail::bind_hf_tokenizer(*root, root->vocab_spans()->size(), name);
    auto t = text::HfTokenizer::create(std::move(tables.value()), name);
    benchmark::DoNotOptimize(t);
  }
}

}  // namespace

BENCHMARK_CAPTURE(encode, gemma3, std::string("gemma3"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(encode, qwen3, std::string("qwen3"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(encode, llama3, std::string("llama3"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(decode, gemma3, std::string("gemma3"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(decode, qwen3, std::string("qwen3"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(decode, llama3, std::string("llama3"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(load, gemma3, std::string("gemma3"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(load, qwen3, std::string("qwen3"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(load, llama3, std::string("llama3"))->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
