// The machine's limits, one core: main-memory read bandwidth, L2-resident read
// bandwidth, peak f32 FMA and int8 dot-product (vpdpbusd) throughput. Kernel
// benchmarks are read against these (bench/README.md).
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

// Sums a buffer with 4 independent AVX-512 accumulators: a pure read stream.
void read_bandwidth(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0)) << 10;
  auto* data = static_cast<float*>(std::aligned_alloc(64, bytes));
  std::memset(data, 1, bytes);
  for (auto _ : state) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < bytes / 4; i += 64) {
      a0 = _mm512_add_ps(a0, _mm512_load_ps(data + i));
      a1 = _mm512_add_ps(a1, _mm512_load_ps(data + i + 16));
      a2 = _mm512_add_ps(a2, _mm512_load_ps(data + i + 32));
      a3 = _mm512_add_ps(a3, _mm512_load_ps(data + i + 48));
    }
    benchmark::DoNotOptimize(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  }
  state.counters["GB/s"] = benchmark::Counter(double(bytes) * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  std::free(data);
}
BENCHMARK(read_bandwidth)->Arg(512 << 10)->Name("probe/read_bandwidth/main_memory_512MB")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(read_bandwidth)->Arg(512)->Name("probe/read_bandwidth/l2_512KB")->Unit(benchmark::kMicrosecond)->UseRealTime();

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
