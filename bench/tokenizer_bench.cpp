// SentencePiece throughput: encode (text -> pieces and ids) and decode (ids -> text)
// over the held-out corpus (tests/fixtures/sentencepiece/corpus.txt.xz, 105k real lines
// in 34 scripts), and the cost of building a model (SentencePiece::create, paid at model
// load). Rates: input MB/s and lines/s. bench/spm_encode_speed.sh times Debian's
// spm_encode and spm_tool on the same lines for comparison (bench/README.md).
//
//   petrel_tokenizer_bench [--benchmark_filter=...]
//   PETREL_SPM_BENCH_MODEL=path/to/large.spm petrel_tokenizer_bench   # also a model of your own
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_support.h"
#include "convert/convert_error.h"
#include "convert/spm_model.h"
#include "text/sentencepiece.h"

using namespace petrel;

namespace {

std::vector<std::string> read_corpus(const std::string& path) {
  std::vector<std::string> lines;
  std::istringstream in(bench::xz_decompress(path));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

struct BenchModel {
  std::string name;
  convert::SpmModel file;
  std::unique_ptr<text::SentencePiece> sp;
};

size_t total_bytes(const std::vector<std::string>& lines) {
  size_t n = 0;
  for (const std::string& l : lines) n += l.size() + 1;
  return n;
}

void encode_corpus(benchmark::State& state, const BenchModel* m, const std::vector<std::string>* lines) {
  text::Encoding e;
  size_t pieces = 0;
  for (auto _ : state) {
    for (const std::string& line : *lines) {
      if (!m->sp->encode(line, e)) state.SkipWithError("encode failed");
      pieces += e.pieces().size();
    }
    benchmark::DoNotOptimize(pieces);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * total_bytes(*lines)));
  state.counters["lines/s"] = benchmark::Counter(static_cast<double>(state.iterations() * lines->size()),
                                                 benchmark::Counter::kIsRate);
}

void decode_corpus(benchmark::State& state, const BenchModel* m, const std::vector<std::string>* lines) {
  std::vector<std::vector<int32_t>> ids;
  text::Encoding e;
  for (const std::string& line : *lines) {
    if (!m->sp->encode(line, e)) state.SkipWithError("encode failed");
    ids.emplace_back();
    for (const text::Piece& p : e.pieces()) ids.back().push_back(p.id);
  }
  std::string out;
  size_t bytes = 0;
  for (auto _ : state) {
    for (const std::vector<int32_t>& line : ids) {
      if (!m->sp->decode(line, out)) state.SkipWithError("decode failed");
      bytes += out.size();
    }
    benchmark::DoNotOptimize(bytes);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * total_bytes(*lines)));
  state.counters["lines/s"] = benchmark::Counter(static_cast<double>(state.iterations() * lines->size()),
                                                 benchmark::Counter::kIsRate);
}

void build_model(benchmark::State& state, const BenchModel* m) {
  const text::SentencePieceSpec spec = m->file.spec();
  for (auto _ : state) {
    auto sp = text::SentencePiece::create(spec, m->name);
    if (!sp) state.SkipWithError(sp.error().message.c_str());
    benchmark::DoNotOptimize(sp);
  }
  state.counters["pieces"] = static_cast<double>(m->file.pieces.size());
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const std::string dir = PETREL_SPM_FIXTURES_DIR;
  static const std::vector<std::string> corpus = read_corpus(dir + "/corpus.txt.xz");
  if (corpus.empty()) {
    std::cerr << "cannot read " << dir << "/corpus.txt.xz (is xz installed?)\n";
    return 1;
  }
  std::vector<std::pair<std::string, std::string>> paths = {
      {"unigram_nfkc", dir + "/models/unigram_nfkc.spm"},
      {"bpe_identity_bytes_udf", dir + "/models/bpe_identity_bytes_udf.spm"}};
  if (const char* extra = std::getenv("PETREL_SPM_BENCH_MODEL")) paths.emplace_back("custom", extra);

  static std::vector<std::unique_ptr<BenchModel>> models;
  for (const auto& [name, path] : paths) {
    auto m = std::make_unique<BenchModel>();
    m->name = name;
    try {
      m->file = convert::read_spm_model(path);
    } catch (const convert::ConvertError& e) {
      std::cerr << e.what() << "\n";
      return 1;
    }
    auto sp = text::SentencePiece::create(m->file.spec(), path);
    if (!sp) {
      std::cerr << sp.error().message << "\n";
      return 1;
    }
    m->sp = std::make_unique<text::SentencePiece>(std::move(sp.value()));
    models.push_back(std::move(m));
  }
  for (const auto& m : models) {
    const std::string suffix = m->name + " (" + std::to_string(m->file.pieces.size()) + " pieces)";
    benchmark::RegisterBenchmark(("encode/" + suffix).c_str(), encode_corpus, m.get(), &corpus)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("decode/" + suffix).c_str(), decode_corpus, m.get(), &corpus)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("create/" + suffix).c_str(), build_model, m.get())->Unit(benchmark::kMicrosecond);
  }
  std::cerr << "corpus: " << corpus.size() << " lines, " << total_bytes(corpus) << " bytes\n";
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
