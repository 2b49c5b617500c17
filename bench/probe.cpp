// The machine's limits, one core: main-memory read bandwidth (a stream larger than most
// L3s, and a buffer evicted from every cache level before each pass), L2-resident read
// bandwidth, peak f32 FMA and int8 dot-product (vpdpbusd) throughput. Kernel
// benchmarks are read against these (bench/README.md).
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/cache_eviction.h"

namespace {

// Sums a buffer with AVX-512 loads: a pure read stream, or kStreams streams side by side
// (the buffer in kStreams parts, read in step), as the panel kernels read 4-8 panels at
// once: one core's loads then keep more lines in flight, and DRAM delivers ~1.7x a single
// stream's bandwidth here. With `evicted`, the buffer is evicted from every cache level
// before each pass (not timed): main memory's speed even where the L3 would hold the
// buffer — the floor of petrel-bench --cold-cache, which reads a model's weights so.
template <size_t kStreams>
void read_bandwidth(benchmark::State& state, bool evicted) {
  const size_t bytes = static_cast<size_t>(state.range(0)) << 10;
  if (evicted && !petrel::bench::cache_eviction_unavailable().empty()) {
    state.SkipWithError(petrel::bench::cache_eviction_unavailable().c_str());
    return;
  }
  auto* data = static_cast<float*>(std::aligned_alloc(64, bytes));
  std::memset(data, 1, bytes);
  const size_t part = bytes / 4 / kStreams;  // floats; a multiple of 64 for these sizes
  for (auto _ : state) {
    if (evicted) {
      state.PauseTiming();
      petrel::bench::evict_from_caches(data, bytes);
      state.ResumeTiming();
    }
    // 4 accumulators in all (more would spill at 8 streams); one add chain each suffices
    // at memory speed.
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (size_t i = 0; i < part; i += 64) {
      for (size_t s = 0; s < kStreams; ++s) {
        const float* p = data + s * part + i;
        for (size_t j = 0; j < 4; ++j) acc[j] = _mm512_add_ps(acc[j], _mm512_load_ps(p + 16 * j));
      }
    }
    benchmark::DoNotOptimize(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
  }
  state.counters["GB/s"] = benchmark::Counter(double(bytes) * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  std::free(data);
}
void one_stream(benchmark::State& state, bool evicted) { read_bandwidth<1>(state, evicted); }
void eight_streams(benchmark::State& state, bool evicted) { read_bandwidth<8>(state, evicted); }
BENCHMARK_CAPTURE(one_stream, stream, false)->Arg(512 << 10)->Name("probe/read_bandwidth/main_memory_512MB")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(one_stream, evicted, true)->Arg(64 << 10)->Name("probe/read_bandwidth/evicted_64MB")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(eight_streams, evicted, true)->Arg(64 << 10)->Name("probe/read_bandwidth/evicted_64MB_8_streams")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(eight_streams, warm, false)->Arg(64 << 10)->Name("probe/read_bandwidth/warm_64MB_8_streams")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(one_stream, l2, false)->Arg(512)->Name("probe/read_bandwidth/l2_512KB")->Unit(benchmark::kMicrosecond)->UseRealTime();

// 12 independent FMA chains hide the latency: the throughput limit.
template <int kWidth>
void fma_peak(benchmark::State& state) {
  constexpr int kChains = 12, kIters = 1 << 16;
  for (auto _ : state) {
    if constexpr (kWidth == 512) {
      __m512 acc[kChains], x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.9999999f);
      for (auto& a : acc) a = _mm512_setzero_ps();
      for (int i = 0; i < kIters; ++i)
        for (auto& a : acc) a = _mm512_fmadd_ps(a, x, y);
      for (auto& a : acc) benchmark::DoNotOptimize(a);
    } else {
      __m256 acc[kChains], x = _mm256_set1_ps(1.0000001f), y = _mm256_set1_ps(0.9999999f);
      for (auto& a : acc) a = _mm256_setzero_ps();
      for (int i = 0; i < kIters; ++i)
        for (auto& a : acc) a = _mm256_fmadd_ps(a, x, y);
      for (auto& a : acc) benchmark::DoNotOptimize(a);
    }
  }
  const double flops = 2.0 * (kWidth / 32) * kChains * kIters;
  state.counters["GFLOP/s"] = benchmark::Counter(flops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(fma_peak<512>)->Name("probe/f32_fma_peak/avx512")->UseRealTime();
BENCHMARK(fma_peak<256>)->Name("probe/f32_fma_peak/avx2")->UseRealTime();

void vnni_peak(benchmark::State& state) {
  constexpr int kChains = 12, kIters = 1 << 16;
  for (auto _ : state) {
    __m512i acc[kChains], a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
    for (auto& c : acc) c = _mm512_setzero_si512();
    for (int i = 0; i < kIters; ++i)
      for (auto& c : acc) c = _mm512_dpbusd_epi32(c, a, b);
    for (auto& c : acc) benchmark::DoNotOptimize(c);
  }
  const double ops = 2.0 * 64 * kChains * kIters;  // 64 u8 x s8 products per instruction
  state.counters["GOP/s"] = benchmark::Counter(ops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(vnni_peak)->Name("probe/int8_dot_peak/vpdpbusd_zmm")->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
