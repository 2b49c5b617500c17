// Kernel benchmarks: every kernel on every kernel path this machine runs, at the
// shapes of a Transformer-base model (d_model 512, FFN 2048, vocab 58101) and a
// small one (d_model 256, FFN 1024); and the sampler (scalar, one path) at Gemma 3's
// vocabulary. Rates are GB/s (memory-bound shapes) or GOP/s
// (compute-bound shapes); compare with bench/probe's limits (bench/README.md).
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstring>
#include <memory>
#include <new>
#include <random>

#include "convert/quantize.h"
#include "decode/sampling.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "layers/aligned_vector.h"
#include "petrel/model.h"

using namespace petrel;
using namespace petrel::kernels;

namespace {

constexpr size_t kVocab = 58101;

// On a cache line, as the engine's activations are.
layers::AlignedVector<float> random_values(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  layers::AlignedVector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<float> as_std(const layers::AlignedVector<float>& v) { return {v.begin(), v.end()}; }

// A converted matrix whose data sits on a cache line, as tensors in a model file do
// (the format aligns each blob to 64 bytes).
struct Weights {
  convert::EncodedMatrix encoded;
  layers::AlignedVector<uint8_t> aligned;
  detail::Matrix view;
  Weights(size_t rows, size_t cols, DType dtype, detail::Layout layout = detail::Layout::kPanel16, unsigned seed = 1)
      : encoded(convert::encode_matrix(as_std(random_values(rows * cols, seed)), rows, cols, dtype, 1.0f, layout)),
        aligned(encoded.data.begin(), encoded.data.end()),
        view(convert::as_matrix(encoded, rows, cols)) {
    view.data = aligned.data();
  }
  size_t bytes() const { return encoded.bytes(); }
};

void set_rate(benchmark::State& state, const char* name, double amount) {
  state.counters[name] = benchmark::Counter(amount * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

// Bytes that surely miss the last-level cache: three times its size as the C library
// reports it (hosts of this machine kind have had 32 MB and 260 MB), at least 96 MB.
size_t beyond_last_level_cache() {
  const long l3 = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
  return std::max<size_t>(96u << 20, l3 > 0 ? 3 * static_cast<size_t>(l3) : 0);
}

// A decoder step's weights (Transformer-base: 28 MB in int4, 53 MB in int8): copies of a
// layer's matrix rotated over this span are read from L3 where the host's L3 holds a
// step's weights (as end to end on hosts with a 260-480 MB L3), from DRAM where not.
constexpr size_t kDecoderStepBytes = 64u << 20;

// y = x W^T for m rows. With `rotate_bytes`, copies of W spanning at least that many
// bytes are rotated (beyond_last_level_cache(): a GEMV streams weights from DRAM);
// with 0, one copy stays in cache.
void linear_bench(benchmark::State& state, Isa isa, DType dtype, size_t m, size_t n, size_t k, size_t rotate_bytes) {
  const KernelTable* kt = table_for(isa);
  if (kt == nullptr) return state.SkipWithError("path not runnable here");
  const Weights w(n, k, dtype, detail::Layout::kPanel16);
  const size_t copies = rotate_bytes / w.aligned.size() + 1;
  // Same bytes at different addresses: the kernel's work does not depend on the values.
  // (int4 panels hold their block scales: the copies carry them.)
  const size_t copy_bytes = (w.aligned.size() + 63) / 64 * 64;
  // The engine's own model buffer: from 2 MiB up in 2 MiB pages, as its mapping of a model
  // file petrel-convert wrote is (bench/EXPERIMENTS.md, "Huge pages").
  const std::unique_ptr<void, void (*)(void*)> memory(Model::allocate_buffer(copies * copy_bytes), Model::free_buffer);
  if (memory == nullptr) throw std::bad_alloc();
  std::vector<detail::Matrix> views(copies, w.view);
  for (size_t c = 0; c < copies; ++c) {
    uint8_t* at = static_cast<uint8_t*>(memory.get()) + c * copy_bytes;
    std::memcpy(at, w.aligned.data(), w.aligned.size());
    views[c].data = at;
  }
  auto x = random_values(m * k, 7);
  auto bias = random_values(n, 8);
  layers::AlignedVector<float> y(m * n);
  layers::AlignedVector<int8_t> q(m * quantized_row_bytes(k));
  std::vector<float> qs(m);
  std::vector<int32_t> block_sums(m * quantized_row_bytes(k) / detail::kInt4Block);
  size_t i = 0;
  for (auto _ : state) {
    kt->linear(x.data(), m, views[i], bias.data(), y.data(), n, {q.data(), qs.data(), block_sums.data()});
    benchmark::DoNotOptimize(y.data());
    i = (i + 1) % copies;
  }
  set_rate(state, "GB/s", double(w.bytes()));
  set_rate(state, "GOP/s", 2.0 * m * n * k);
}

void embed_bench(benchmark::State& state, Isa isa, DType dtype, detail::Layout layout, size_t d) {
  const KernelTable* kt = table_for(isa);
  const size_t tokens = 32;
  Weights table(kVocab, d, dtype, layout);
  auto pe = random_values(512 * d, 3);
  // 4096 batches of random ids, cycled: rows come from memory, as in a real encoder.
  constexpr size_t kBatches = 4096;
  std::vector<int32_t> ids(kBatches * tokens), pos(tokens);
  std::mt19937 rng(5);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % kVocab);
  for (size_t t = 0; t < tokens; ++t) pos[t] = static_cast<int32_t>(t);
  std::vector<float> out(tokens * d);
  size_t batch = 0;
  for (auto _ : state) {
    kt->embed(table.view, ids.data() + batch * tokens, pos.data(), tokens, pe.data(), out.data());
    benchmark::DoNotOptimize(out.data());
    batch = (batch + 1) % kBatches;
  }
  // row (with its scales) + position row read, output written
  set_rate(state, "GB/s", double(tokens) * (double(table.bytes()) / kVocab + d * (4 + 4)));
}

// One decoder step's self-attention: 8 heads of 64 over a cache of `positions`,
// stored as f32 or f16 on cache lines as the engine's caches are.
void attention_bench(benchmark::State& state, Isa isa, DType kv, size_t positions) {
  const KernelTable* kt = table_for(isa);
  const size_t heads = 8, hd = 64, d = heads * hd, esize = detail::dtype_size(kv);
  auto q = random_values(d, 1), k = random_values(positions * d, 2), v = random_values(positions * d, 3);
  layers::AlignedVector<uint8_t> ks(k.size() * esize), vs(v.size() * esize);
  kt->store_as(k.data(), k.size(), kv, ks.data());
  kt->store_as(v.data(), v.size(), kv, vs.data());
  std::vector<float> scores(positions), out(d);
  for (auto _ : state) {
    for (size_t h = 0; h < heads; ++h)
      kt->attend(q.data() + h * hd, ks.data() + h * hd * esize, vs.data() + h * hd * esize, kv, nullptr, positions, d,
                 hd, 1, scores.data(), out.data() + h * hd, nullptr);
    benchmark::DoNotOptimize(out.data());
  }
  set_rate(state, "GB/s", double(2 * positions * d * esize));
  set_rate(state, "GOP/s", 4.0 * positions * d);
}

// A decoder-only step's attention with grouped queries: Gemma-3-270M's 4 query heads over
// one K/V head of 256 columns, as one call (the heads take each tile of keys in turn),
// caches in f32 or f16. With `rotate_bytes`, copies of K/V spanning that many bytes are
// rotated, so each call reads its cache from memory as a long context's step does (the
// step's weights stream through the caches between two layers' attention).
void grouped_attention_bench(benchmark::State& state, Isa isa, DType kv, size_t positions, size_t rotate_bytes) {
  const KernelTable* kt = table_for(isa);
  const size_t heads = 4, hd = 256, esize = detail::dtype_size(kv), cache_bytes = positions * hd * esize;
  const size_t copies = rotate_bytes / (2 * cache_bytes) + 1;
  auto q = random_values(heads * hd, 1), k = random_values(positions * hd, 2), v = random_values(positions * hd, 3);
  layers::AlignedVector<uint8_t> ks(copies * cache_bytes), vs(copies * cache_bytes);
  for (size_t c = 0; c < copies; ++c) {
    kt->store_as(k.data(), k.size(), kv, ks.data() + c * cache_bytes);
    kt->store_as(v.data(), v.size(), kv, vs.data() + c * cache_bytes);
  }
  std::vector<float> scores(positions), out(heads * hd);
  size_t copy = 0;
  for (auto _ : state) {
    kt->attend(q.data(), ks.data() + copy * cache_bytes, vs.data() + copy * cache_bytes, kv, nullptr, positions, hd,
               hd, heads, scores.data(), out.data(), nullptr);
    benchmark::DoNotOptimize(out.data());
    copy = (copy + 1) % copies;
  }
  set_rate(state, "GB/s", double(2 * cache_bytes));
  set_rate(state, "GOP/s", 4.0 * positions * hd * heads);
}

// What search does per hypothesis and step: log-sum-exp, then the best 2K (K = 4).
void log_softmax_top_k_bench(benchmark::State& state, Isa isa) {
  const KernelTable* kt = table_for(isa);
  auto logits = random_values(kVocab, 4);
  int32_t ids[8];
  float values[8];
  for (auto _ : state) {
    benchmark::DoNotOptimize(kt->logsumexp(logits.data(), kVocab));
    benchmark::DoNotOptimize(kt->top_k(logits.data(), kVocab, 8, ids, values));
  }
  set_rate(state, "GB/s", double(kVocab * 4 * 2));
}

void layer_norm_bench(benchmark::State& state, Isa isa, size_t rows, size_t d) {
  const KernelTable* kt = table_for(isa);
  auto x = random_values(rows * d, 1), r = random_values(rows * d, 2), g = random_values(d, 3), b = random_values(d, 4);
  std::vector<float> y(rows * d);
  for (auto _ : state) {
    kt->layer_norm(x.data(), r.data(), rows, d, g.data(), b.data(), 1e-5f, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  set_rate(state, "GB/s", double(rows * d * 4 * 3));
}

// Appending to an f16 KV cache: one step of a base decoder's K and V for 6 layers
// and a beam of 4 (6 x 2 x 4 x 512 values).
void store_f16_bench(benchmark::State& state, Isa isa) {
  const KernelTable* kt = table_for(isa);
  const size_t n = 6 * 2 * 4 * 512;
  auto x = random_values(n, 10);
  layers::AlignedVector<uint16_t> out(n);
  for (auto _ : state) {
    kt->store_as(x.data(), n, DType::kF16, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  set_rate(state, "GB/s", double(n * (4 + 2)));
}

void activation_bench(benchmark::State& state, Isa isa, Activation act) {
  const KernelTable* kt = table_for(isa);
  const size_t n = 32 * 2048;
  auto base = random_values(n, 9);
  std::vector<float> x(n);
  for (auto _ : state) {
    std::copy(base.begin(), base.end(), x.begin());
    kt->activate(act, x.data(), n);
    benchmark::DoNotOptimize(x.data());
  }
  set_rate(state, "GB/s", double(n * 4 * 2));
}

// One next-token choice over Gemma 3's vocabulary (262,144), as a decoder-only model
// makes per generated token. Logits N(0, sd^2): sd 4 is peaked, about a trained
// model's (top-p 0.95 keeps ~1% of the vocabulary), sd 1 nearly flat (it keeps ~75%),
// top-p alone's worst case. "kept": the tokens the draw chose among.
void sampling_bench(benchmark::State& state, decode::SamplingOptions options, float sd) {
  constexpr size_t kGemmaVocab = 262144;
  std::vector<float> logits(kGemmaVocab);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, sd);
  for (float& x : logits) x = normal(rng);
  decode::Sampler sampler(options);
  // Temperature 1 and no repetition penalty: next() leaves the logits as they are.
  for (auto _ : state) benchmark::DoNotOptimize(sampler.next(logits.data(), kGemmaVocab, nullptr, 0));
  state.counters["kept"] = static_cast<double>(sampler.kept_ids().size());
}

void register_sampling() {
  decode::SamplingOptions greedy, gemma, top_p;
  gemma.sample = top_p.sample = true;
  gemma.top_k = 64;
  gemma.top_p = top_p.top_p = 0.95f;
  for (float sd : {4.0f, 1.0f}) {
    const std::string d = "_sd" + std::to_string(static_cast<int>(sd));
    benchmark::RegisterBenchmark(("sampling/greedy/262144" + d).c_str(), sampling_bench, greedy, sd)
        ->Unit(benchmark::kMicrosecond)->UseRealTime();
    benchmark::RegisterBenchmark(("sampling/top_k64_top_p0.95/262144" + d).c_str(), sampling_bench, gemma, sd)
        ->Unit(benchmark::kMicrosecond)->UseRealTime();
    benchmark::RegisterBenchmark(("sampling/top_p0.95/262144" + d).c_str(), sampling_bench, top_p, sd)
        ->Unit(benchmark::kMicrosecond)->UseRealTime();
  }
}

void register_all() {
  register_sampling();
  for (Isa isa : runnable_isas()) {
    const std::string p = std::string(isa_name(isa)) + "/";
    for (DType dtype : {DType::kInt4, DType::kInt8, DType::kF32}) {
      const std::string t = p + to_string(dtype) + "/";
      const size_t dram = beyond_last_level_cache();
      // Decoder step (batch 1): weights streamed from memory.
      benchmark::RegisterBenchmark((t + "gemv_from_memory/out_proj_58101x512").c_str(), linear_bench, isa, dtype, 1,
                                   kVocab, 512, dram)->Unit(benchmark::kMillisecond)->UseRealTime();
      // Beam 4 (four hypotheses per step).
      benchmark::RegisterBenchmark((t + "beam4_from_memory/out_proj_4x58101x512").c_str(), linear_bench, isa, dtype,
                                   4, kVocab, 512, dram)->Unit(benchmark::kMillisecond)->UseRealTime();
      // A batch of 8 inputs' beams of 4.
      benchmark::RegisterBenchmark((t + "batch8_beam4_from_memory/out_proj_32x58101x512").c_str(), linear_bench, isa,
                                   dtype, 32, kVocab, 512, dram)->Unit(benchmark::kMillisecond)->UseRealTime();
      // A greedy batch of two or three inputs (the rows a 4-row tile leaves).
      for (size_t m : {2, 3})
        benchmark::RegisterBenchmark((t + "rows" + std::to_string(m) + "_from_memory/out_proj_" + std::to_string(m) +
                                      "x58101x512").c_str(),
                                     linear_bench, isa, dtype, m, kVocab, 512, dram)
            ->Unit(benchmark::kMillisecond)->UseRealTime();
      benchmark::RegisterBenchmark((t + "beam4_in_cache/ffn_4x2048x512").c_str(), linear_bench, isa, dtype, 4, 2048,
                                   512, 0)->Unit(benchmark::kMicrosecond)->UseRealTime();
      benchmark::RegisterBenchmark((t + "gemv_from_memory/ffn_2048x512").c_str(), linear_bench, isa, dtype, 1, 2048, 512,
                                   dram)->Unit(benchmark::kMicrosecond)->UseRealTime();
      benchmark::RegisterBenchmark((t + "gemv_step_span/ffn_2048x512").c_str(), linear_bench, isa, dtype, 1, 2048, 512,
                                   kDecoderStepBytes)->Unit(benchmark::kMicrosecond)->UseRealTime();
      benchmark::RegisterBenchmark((t + "gemv_step_span/ffn_down_512x2048").c_str(), linear_bench, isa, dtype, 1, 512,
                                   2048, kDecoderStepBytes)->Unit(benchmark::kMicrosecond)->UseRealTime();
      benchmark::RegisterBenchmark((t + "gemv_in_cache/ffn_2048x512").c_str(), linear_bench, isa, dtype, 1, 2048, 512,
                                   0)->Unit(benchmark::kMicrosecond)->UseRealTime();
      benchmark::RegisterBenchmark((t + "gemv_in_cache/small_1024x256").c_str(), linear_bench, isa, dtype, 1, 1024, 256,
                                   0)->Unit(benchmark::kMicrosecond)->UseRealTime();
      // A small model's output projection (en-de: 7,828 x 256, 2 MB in int8, about L2's
      // size): one input's beam of 4, and a batch of 8 inputs' beams.
      for (size_t m : {4, 32})
        benchmark::RegisterBenchmark((t + "out_proj_in_cache/small_" + std::to_string(m) + "x7828x256").c_str(),
                                     linear_bench, isa, dtype, m, 7828, 256, 0)
            ->Unit(benchmark::kMicrosecond)->UseRealTime();
      // Encoder (32 tokens): compute-bound.
      benchmark::RegisterBenchmark((t + "gemm/32x2048x512").c_str(), linear_bench, isa, dtype, 32, 2048, 512, 0)
          ->Unit(benchmark::kMicrosecond)->UseRealTime();
      benchmark::RegisterBenchmark((t + "gemm/small_32x1024x256").c_str(), linear_bench, isa, dtype, 32, 1024, 256, 0)
          ->Unit(benchmark::kMicrosecond)->UseRealTime();
    }
    for (DType dtype : {DType::kInt4, DType::kInt8, DType::kF16, DType::kF32})
      benchmark::RegisterBenchmark((p + to_string(dtype) + "/embed_gather_pe/32x512").c_str(), embed_bench, isa, dtype,
                                   detail::Layout::kRowMajor, 512)->UseRealTime();
    for (DType dtype : {DType::kInt4, DType::kInt8})
      benchmark::RegisterBenchmark((p + to_string(dtype) + "/embed_gather_pe_panel/32x512").c_str(), embed_bench, isa,
                                   dtype, detail::Layout::kPanel16, 512)->UseRealTime();
    benchmark::RegisterBenchmark((p + "int8/embed_gather_pe/small_32x256").c_str(), embed_bench, isa, DType::kInt8,
                                 detail::Layout::kRowMajor, 256)->UseRealTime();
    for (DType kv : {DType::kF32, DType::kF16})
      for (size_t positions : {256, 32})
        benchmark::RegisterBenchmark((p + "attention/" + to_string(kv) + "/8x64_over_" + std::to_string(positions)).c_str(),
                                     attention_bench, isa, kv, positions)
            ->Unit(benchmark::kMicrosecond)->UseRealTime();
    for (size_t positions : {128, 1024})
      benchmark::RegisterBenchmark((p + "attention/f32/4x256_grouped_over_" + std::to_string(positions)).c_str(),
                                   grouped_attention_bench, isa, DType::kF32, positions, 0)
          ->Unit(benchmark::kMicrosecond)->UseRealTime();
    for (DType kv : {DType::kF32, DType::kF16})
      benchmark::RegisterBenchmark(
          (p + "attention/" + to_string(kv) + "/4x256_grouped_from_memory_over_2048").c_str(), grouped_attention_bench,
          isa, kv, 2048, beyond_last_level_cache())->Unit(benchmark::kMicrosecond)->UseRealTime();
    benchmark::RegisterBenchmark((p + "store_f16/24576").c_str(), store_f16_bench, isa)->UseRealTime();
    benchmark::RegisterBenchmark((p + "log_softmax_top8/58101").c_str(), log_softmax_top_k_bench, isa)->Unit(benchmark::kMicrosecond)->UseRealTime();
    benchmark::RegisterBenchmark((p + "layer_norm/32x512").c_str(), layer_norm_bench, isa, 32, 512)->UseRealTime();
    benchmark::RegisterBenchmark((p + "layer_norm/1x512").c_str(), layer_norm_bench, isa, 1, 512)->UseRealTime();
    for (Activation act : {Activation::kSwish, Activation::kGelu, Activation::kRelu})
      benchmark::RegisterBenchmark((p + "activation/" + to_string(act) + "/65536").c_str(), activation_bench, isa, act)
          ->Unit(benchmark::kMicrosecond)->UseRealTime();
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  // Memory-bound kernels are judged by wall time, not CPU time.
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
