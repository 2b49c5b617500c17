// The machine's limits, one core: main-memory read bandwidth (a stream larger than most
// L3s, and a buffer evicted from every cache level before each pass), L2-resident read
// bandwidth, peak f32 FMA and int8 dot-product throughput, on each x86 ISA the CPU has.
// Kernel benchmarks are read against these (bench/README.md).
#include <benchmark/benchmark.h>
#include <cpuid.h>
#include <immintrin.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/cache_eviction.h"

namespace {

// Every kernel below is compiled for its own ISA (target attributes, not file-wide -m
// flags, so nothing else in this file uses AVX-512) and runs only where the CPU has it: an
// AVX2-only host skips the AVX-512 rows instead of dying of SIGILL.
bool has_avx512() { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"); }
bool has_avx512_vnni() { return has_avx512() && __builtin_cpu_supports("avx512vnni"); }
bool has_avx2_fma() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
bool has_avx_vnni() {  // CPUID leaf 7, sub-leaf 1, EAX bit 4 (the compilers' builtins do not all know it)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return has_avx2_fma() && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 4)) != 0;
}

// One pass over `streams` equal parts of a buffer read in step (`part` floats each, a
// multiple of 64), 4 accumulators in all (more would spill at 8 streams); one add chain
// each suffices at memory speed. The AVX-512 and AVX2 passes read the same bytes.
__attribute__((target("avx512f"))) float read_pass_avx512(const float* data, size_t part, size_t streams) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  for (size_t i = 0; i < part; i += 64)
    for (size_t s = 0; s < streams; ++s) {
      const float* p = data + s * part + i;
      for (size_t j = 0; j < 4; ++j) acc[j] = _mm512_add_ps(acc[j], _mm512_load_ps(p + 16 * j));
    }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
  float sum = 0;
  for (float lane : lanes) sum += lane;
  return sum;
}
__attribute__((target("avx2"))) float read_pass_avx2(const float* data, size_t part, size_t streams) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (size_t i = 0; i < part; i += 64)
    for (size_t s = 0; s < streams; ++s) {
      const float* p = data + s * part + i;
      for (size_t j = 0; j < 4; ++j)
        acc[j] = _mm256_add_ps(acc[j], _mm256_add_ps(_mm256_load_ps(p + 16 * j), _mm256_load_ps(p + 16 * j + 8)));
    }
  const __m256 sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
}

// Sums a buffer: a pure read stream, or kStreams streams side by side (the buffer in
// kStreams parts, read in step), as the panel kernels read 4-8 panels at once: one core's
// loads then keep more lines in flight, and DRAM delivers ~1.7x a single stream's
// bandwidth here. With `evicted`, the buffer is evicted from every cache level before each
// pass (not timed): main memory's speed even where the L3 would hold the buffer — the
// floor of petrel-bench --cold-cache, which reads a model's weights so.
// With `huge_pages`, the buffer is in 2 MiB pages where the kernel gives them, as the
// engine's mapping of a model file that petrel-convert wrote is (bench/README, "Huge
// pages"); in 4 KiB pages one core reads DRAM up to 1.4x slower.
template <size_t kStreams>
void read_bandwidth(benchmark::State& state, bool evicted, bool huge_pages = false) {
  const size_t bytes = static_cast<size_t>(state.range(0)) << 10;
  if (evicted && !petrel::bench::cache_eviction_unavailable().empty()) {
    state.SkipWithError(petrel::bench::cache_eviction_unavailable().c_str());
    return;
  }
  if (!has_avx2_fma()) {
    state.SkipWithError("needs AVX2");
    return;
  }
  const auto pass = has_avx512() ? read_pass_avx512 : read_pass_avx2;
  state.SetLabel(has_avx512() ? "avx512 loads" : "avx2 loads");
  auto* data = static_cast<float*>(std::aligned_alloc(huge_pages ? size_t{2} << 20 : 64, bytes));
#ifdef MADV_HUGEPAGE
  if (huge_pages) ::madvise(data, bytes, MADV_HUGEPAGE);
#endif
  std::memset(data, 1, bytes);
  const size_t part = bytes / 4 / kStreams;  // floats; a multiple of 64 for these sizes
  for (auto _ : state) {
    if (evicted) {
      state.PauseTiming();
      petrel::bench::evict_from_caches(data, bytes);
      state.ResumeTiming();
    }
    benchmark::DoNotOptimize(pass(data, part, kStreams));
  }
  state.counters["GB/s"] = benchmark::Counter(double(bytes) * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  std::free(data);
}
void one_stream(benchmark::State& state, bool evicted) { read_bandwidth<1>(state, evicted); }
void huge_pages(benchmark::State& state, bool evicted) { read_bandwidth<1>(state, evicted, true); }
void eight_streams(benchmark::State& state, bool evicted) { read_bandwidth<8>(state, evicted); }
// The floor of petrel-bench --cold-cache as its steps meet it: the weights evicted, in the
// 2 MiB pages the engine maps a model file into.
void evicted_huge_pages(benchmark::State& state, bool evicted) { read_bandwidth<1>(state, evicted, true); }
BENCHMARK_CAPTURE(one_stream, stream, false)->Arg(512 << 10)->Name("probe/read_bandwidth/main_memory_512MB")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(huge_pages, stream, false)->Arg(512 << 10)->Name("probe/read_bandwidth/main_memory_512MB_huge_pages")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(one_stream, evicted, true)->Arg(64 << 10)->Name("probe/read_bandwidth/evicted_64MB")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(evicted_huge_pages, evicted, true)->Arg(64 << 10)->Name("probe/read_bandwidth/evicted_64MB_huge_pages")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(eight_streams, evicted, true)->Arg(64 << 10)->Name("probe/read_bandwidth/evicted_64MB_8_streams")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(eight_streams, warm, false)->Arg(64 << 10)->Name("probe/read_bandwidth/warm_64MB_8_streams")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(one_stream, l2, false)->Arg(512)->Name("probe/read_bandwidth/l2_512KB")->Unit(benchmark::kMicrosecond)->UseRealTime();

// 12 independent FMA chains hide the latency: the throughput limit.
constexpr int kChains = 12, kIters = 1 << 16;
__attribute__((target("avx512f"))) void fma_chains_avx512() {
  __m512 acc[kChains], x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.9999999f);
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (int i = 0; i < kIters; ++i)
    for (auto& a : acc) a = _mm512_fmadd_ps(a, x, y);
  for (auto& a : acc) benchmark::DoNotOptimize(a);
}
__attribute__((target("avx2,fma"))) void fma_chains_avx2() {
  __m256 acc[kChains], x = _mm256_set1_ps(1.0000001f), y = _mm256_set1_ps(0.9999999f);
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (int i = 0; i < kIters; ++i)
    for (auto& a : acc) a = _mm256_fmadd_ps(a, x, y);
  for (auto& a : acc) benchmark::DoNotOptimize(a);
}

// u8 x s8 dot products: AVX-512 VNNI's vpdpbusd (64 products per instruction), the same
// on ymm (32; AVX-VNNI's VEX form or AVX-512 VL's EVEX one), and AVX2's vpmaddubsw +
// vpmaddwd + vpaddd (32 products per three instructions), the int8 kernels' inner step on each.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void dot_chains_vnni() {
  __m512i acc[kChains], a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (auto& c : acc) c = _mm512_setzero_si512();
  for (int i = 0; i < kIters; ++i)
    for (auto& c : acc) c = _mm512_dpbusd_epi32(c, a, b);
  for (auto& c : acc) benchmark::DoNotOptimize(c);
}
__attribute__((target("avx2,avxvnni"))) void dot_chains_avx_vnni() {
  __m256i acc[kChains], a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2);
  for (auto& c : acc) c = _mm256_setzero_si256();
  for (int i = 0; i < kIters; ++i)
    for (auto& c : acc) c = _mm256_dpbusd_avx_epi32(c, a, b);
  for (auto& c : acc) benchmark::DoNotOptimize(c);
}
// The same 256-bit vpdpbusd as AVX-512 VL + VNNI encodes it (EVEX): CPUs with AVX-512 VNNI
// and without AVX-VNNI (Ice Lake, Zen 4) run it so.
__attribute__((target("avx512f,avx512vl,avx512vnni"))) void dot_chains_vnni_ymm() {
  __m256i acc[kChains], a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2);
  for (auto& c : acc) c = _mm256_setzero_si256();
  for (int i = 0; i < kIters; ++i)
    for (auto& c : acc) c = _mm256_dpbusd_epi32(c, a, b);
  for (auto& c : acc) benchmark::DoNotOptimize(c);
}
bool has_ymm_vnni() { return has_avx_vnni() || (has_avx512_vnni() && __builtin_cpu_supports("avx512vl")); }
void ymm_vnni_chains() { has_avx_vnni() ? dot_chains_avx_vnni() : dot_chains_vnni_ymm(); }
__attribute__((target("avx2"))) void dot_chains_avx2() {
  __m256i acc[kChains], a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
  for (auto& c : acc) c = _mm256_setzero_si256();
  for (int i = 0; i < kIters; ++i)
    for (auto& c : acc) c = _mm256_add_epi32(c, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
  for (auto& c : acc) benchmark::DoNotOptimize(c);
}

// Runs one of the chain kernels above where the CPU has its ISA; `ops`: operations per call.
void peak(benchmark::State& state, bool (*supported)(), void (*chains)(), double ops, const char* unit) {
  if (!supported()) {
    state.SkipWithError("this CPU lacks the instructions");
    return;
  }
  for (auto _ : state) chains();
  state.counters[unit] = benchmark::Counter(ops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}
// A call runs kChains x kIters steps (one instruction; AVX2's dot: three) of two operations
// per lane: a multiply and an add (the dot products: a u8 x s8 product and its sum per byte).
constexpr double kSteps = double(kChains) * kIters;
BENCHMARK_CAPTURE(peak, avx512, has_avx512, fma_chains_avx512, 2 * 16 * kSteps, "GFLOP/s")
    ->Name("probe/f32_fma_peak/avx512")->UseRealTime();
BENCHMARK_CAPTURE(peak, avx2, has_avx2_fma, fma_chains_avx2, 2 * 8 * kSteps, "GFLOP/s")
    ->Name("probe/f32_fma_peak/avx2")->UseRealTime();
BENCHMARK_CAPTURE(peak, vnni, has_avx512_vnni, dot_chains_vnni, 2 * 64 * kSteps, "GOP/s")
    ->Name("probe/int8_dot_peak/vpdpbusd_zmm")->UseRealTime();
BENCHMARK_CAPTURE(peak, avx_vnni, has_ymm_vnni, ymm_vnni_chains, 2 * 32 * kSteps, "GOP/s")
    ->Name("probe/int8_dot_peak/vpdpbusd_ymm")->UseRealTime();
BENCHMARK_CAPTURE(peak, avx2_dot, has_avx2_fma, dot_chains_avx2, 2 * 32 * kSteps, "GOP/s")
    ->Name("probe/int8_dot_peak/vpmaddubsw_ymm")->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
