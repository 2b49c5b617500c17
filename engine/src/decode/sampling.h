// Next-token choice for decoder-only language models: Hugging Face transformers'
// greedy and sampling rules (tools/reference/decoder_only_semantics.md §10), with a
// seeded generator whose draws are the same on every platform.
//
// Order, as transformers' _get_logits_processor: repetition penalty (greedy too), then
// only when sampling: temperature -> top-k -> top-p -> min-p -> softmax (f32) -> one draw.
//
// Defaults: every filter is off here. transformers' generate() fills in top_k = 50 when
// a model gives none; that is a transformers default, not a rule of the sampler: the
// caller (the CLI) applies the model's generation_config.json (Gemma 3: top_k 64,
// top_p 0.95; Qwen3: top_k 20, top_p 0.95, temperature 0.6).
//
// Portability: a seed gives the same ids on x86-64, aarch64, armv7 and WebAssembly.
// The generator is integer-only; every float reduction runs in a fixed order in
// scalar code (sampling.cpp is built with -ffp-contract=off); ties are broken by token
// id, never by what a standard library's sort happens to do. The residual risk is
// libm: std::exp(float) is glibc's expf natively (x86-64 may run its FMA build) and
// musl's (the same ARM optimized-routines algorithm) under Emscripten. Both round a
// double-precision result to float, so they can differ only where that result lies
// within ~1e-16 of a rounding midpoint (about 2^-29 per call); an exp one ulp apart
// then changes a draw only if u·total falls within that ulp of a cumulative boundary
// (~1e-7), or a top-p / min-p comparison sits exactly on its threshold.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "petrel/status.h"

namespace petrel::decode {

// PCG32 (O'Neill's pcg32_random_r, XSH-RR 64/32): integer-only, 8 bytes of state plus
// a stream, published reference outputs to test against, and fast on 32-bit CPUs
// (one 64-bit multiply per number).
class Random {
 public:
  // pcg32_srandom_r(seed, stream); the default stream is that of pcg-c-basic's
  // PCG32_INITIALIZER (increment 0xda3e39cb94b95bdb).
  explicit Random(uint64_t seed, uint64_t stream = kDefaultStream);
  uint32_t next_u32();
  // In [0, 1): the top 24 bits of next_u32() times 2^-24 (exact in a float).
  float uniform();

  static constexpr uint64_t kDefaultStream = 0xda3e39cb94b95bdbULL >> 1;

 private:
  uint64_t state_ = 0, increment_ = 0;
};

struct SamplingOptions {
  bool sample = false;              // false: greedy (argmax, first index among ties); the repetition penalty still applies
  float temperature = 1.0f;         // > 0 (finite)
  uint32_t top_k = 0;               // 0: off
  float top_p = 1.0f;               // (0, 1]; 1: off
  float min_p = 0.0f;               // [0, 1]; 0: off
  float repetition_penalty = 1.0f;  // > 0 (finite); 1: off
  uint64_t seed = 0;
};

// Constrained decoding: logits[i] = -inf wherever allowed[i] is 0 (i < n), before the
// sampler sees them.
void mask_logits(float* logits, size_t n, const uint8_t* allowed);

// Checks the options (all of them, whether sampling or not); the error names the field
// and the bad value.
Status check(const SamplingOptions& options);

class Sampler {
 public:
  // The k largest finite values' ids (kernels::KernelTable::top_k's signature).
  using TopK = size_t (*)(const float* x, size_t n, size_t k, int32_t* ids, float* values);
  // options already checked. top_k: a SIMD kernel for greedy decoding's argmax over the
  // vocabulary (262,144 logits for Gemma 3: a scalar scan costs ~0.4 ms a token); null:
  // the scalar scan.
  explicit Sampler(const SamplingOptions& options, TopK top_k = nullptr);

  // Picks the next token from logits[0, n) (which it modifies: penalized, tempered),
  // given every id of the sequence so far (prompt + generated) for the repetition
  // penalty; ids outside [0, n) are ignored. Returns -1 only for n = 0. Logits are
  // finite or -inf; with a NaN or +inf among the kept ones the result is the
  // highest-scoring kept token (transformers would fail in multinomial).
  // The draw: one uniform u per call; the kept tokens in ascending id order, the first
  // whose cumulative probability (summed in double) exceeds u times their total.
  // After the first call with the largest n, allocates nothing.
  int32_t next(float* logits, size_t n, const int32_t* seen, size_t seen_count);

  // What the last sampling call drew from: the kept ids in ascending order and their
  // softmax probabilities (f32), for tests and diagnostics. Empty after a greedy call.
  const std::vector<int32_t>& kept_ids() const { return kept_ids_; }
  const std::vector<float>& kept_probabilities() const { return kept_probabilities_; }

 private:
  void apply_repetition_penalty(float* logits, size_t n, const int32_t* seen, size_t seen_count);
  float kth_largest(const float* logits, size_t n, size_t k);
  void keep_top_p_of_all(const float* logits, size_t n);
  void keep_top_p_of_kept();
  void keep_min_p();
  int32_t draw();

  SamplingOptions options_;
  TopK top_k_ = nullptr;
  Random random_;
  // 1 - top_p as transformers compares it: in double from the decimal top_p stands for,
  // then rounded to f32.
  float top_p_threshold_ = 0.0f;
  // Scratch, grown to the largest n seen.
  std::vector<uint8_t> penalized_;     // [n]: marks the distinct seen ids
  std::vector<float> heap_;            // top-k: the k largest logits so far (a min-heap)
  std::vector<float> exps_;            // [n]: exp(logit - max) when no top-k restricts
  std::vector<int32_t> order_;         // top-p: candidates by (logit desc, id asc)
  // The tokens still kept, ascending ids, from top-k on; their logits, probabilities.
  std::vector<int32_t> kept_ids_;
  std::vector<float> kept_logits_;
  std::vector<float> kept_probabilities_;
};

}  // namespace petrel::decode
