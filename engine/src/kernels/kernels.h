// The engine's numeric operations. Each has a plain scalar reference
// (namespace reference, one file per operation) that is the specification; the
// SIMD versions (kernels/x86, kernels/arm) must match it. Kernels know matrices
// and vectors, never models. Callers reach them through a KernelTable chosen per
// instruction set at run time (kernels/isa.h).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/tensor.h"

namespace petrel::kernels {

// Scratch a linear layer needs for int8 activations: m rows of
// quantized_row_bytes(k) bytes, m scales, and for int4 weights m x
// quantized_row_bytes(k) / 32 block sums.
struct QuantizedRows {
  int8_t* values;
  float* scales;
  int32_t* block_sums = nullptr;
};
// Bytes per quantized activation row: a whole number of int4 blocks (the int8 paths
// use the first round_up(k, 4)).
inline size_t quantized_row_bytes(size_t k) { return detail::round_up(k, detail::kInt4Block); }

// x rounded half to even as an int8 (|x| <= 127 for a quantized activation). A
// non-finite x — only a corrupt model's weights produce one — gives 0 rather than
// an undefined float-to-int conversion.
inline int8_t round_to_int8(float x) {
  const float r = std::nearbyint(x);
  return r >= -128.0f && r <= 127.0f ? static_cast<int8_t>(r) : 0;
}

// How a single-row int8 GEMV (a decoder step) walks a matrix's 16-row panels: several
// side by side, as most paths do (more streams for the hardware prefetchers), or one at a
// time, a single sequential stream, which an AMD Zen 4's prefetchers follow at DRAM speed
// where several streams and software prefetches lose a third of it (bench/README, "AVX2 on
// AMD").
// The products are exact integers: the order changes no result.
enum class GemvOrder { kPanelsSideBySide, kOnePanelAtATime };

// Keys per tile of attention's online softmax (reference::attend): every path takes the keys in
// these tiles, so its rescales fall where the reference's do. 1 KB of scores stays in L1.
constexpr size_t kAttentionTile = 256;

// An int8 KV cache's row (one position's keys, or its values, for `heads` K/V heads):
// the heads x head_dim int8 values, padded to 4 bytes, then one f32 scale per head
// (max |x| / 127 of that head's values; 0 for a row of zeros), so a row keeps its scales
// beside it and rows stay 4-byte aligned.
inline size_t int8_kv_scales_offset(size_t heads, size_t head_dim) { return detail::round_up(heads * head_dim, 4); }
inline size_t int8_kv_row_bytes(size_t heads, size_t head_dim) {
  return int8_kv_scales_offset(heads, head_dim) + heads * sizeof(float);
}

struct KernelTable {
  const char* isa;
  void (*linear)(const float* x, size_t m, const detail::Matrix& w, const float* bias, float* y, size_t y_stride,
                 QuantizedRows scratch);
  void (*layer_norm)(const float* x, const float* residual, size_t m, size_t d, const float* gamma,
                     const float* beta, float eps, float* y);
  void (*activate)(Activation act, float* x, size_t n);
  void (*add)(const float* x, float* y, size_t n);
  void (*embed)(const detail::Matrix& table, const int32_t* ids, const int32_t* pos, size_t m,
                const float* positions, float* out);
  void (*attend)(const float* q, const void* k, const void* v, DType kv, const size_t* rows, size_t n, size_t stride,
                 size_t head_dim, size_t heads, float* scores, float* out, float* lse);
  void (*store_as)(const float* x, size_t n, DType type, void* out);
  void (*attend_int8)(const float* q, const int8_t* k, const int8_t* v, const size_t* rows, size_t n,
                      size_t row_bytes, size_t scale_offset, size_t head_dim, size_t heads, float* scores, float* out,
                      float* lse);
  void (*store_int8_kv)(const float* x, size_t m, size_t heads, size_t head_dim, void* out);
  float (*logsumexp)(const float* x, size_t n);
  size_t (*top_k)(const float* x, size_t n, size_t k, int32_t* ids, float* values);
  void (*ssru)(const float* x, const float* forget, size_t n, float* cell, float* out);
  void (*rms_norm)(const float* x, size_t m, size_t d, const float* gamma, float eps, float* y);
  void (*rope)(float* x, size_t m, size_t heads, size_t head_dim, size_t stride, const float* cos, const float* sin);
  void (*multiply)(const float* x, float* y, size_t n);
};

namespace reference {

// y[m][n] = x[m][k] . W[n][k] + bias[n]  (bias may be null), y's rows y_stride >= n
// floats apart (a slice of W's rows writes its columns of a wider y). For int8 and int4
// weights the rows of x are quantized to int8 first (into `scratch`; quantize_rows with
// the matrix's activation_scale): int8 y = (sum_k a q) sa sw; int4 y = (sum over blocks of
// float(sum_k a q) x block scale, in block order) x (sa x sw) — each block's product is
// an exact float, so every path that sums blocks in order gets the same result.
void linear(const float* x, size_t m, const detail::Matrix& w, const float* bias, float* y, size_t y_stride,
            QuantizedRows scratch);

// Symmetric int8 quantization of each row: q = round_half_even(x * (1/s)) with s =
// max|x| / 127 per row (fixed_scale 0), or s = fixed_scale for every row with q clamped
// to [-127, 127] first (a matrix's static activation_scale).
void quantize_rows(const float* x, size_t m, size_t k, float fixed_scale, QuantizedRows out);

// y[i] = LayerNorm(x[i] (+ residual[i])) with gamma, beta; y may alias x or residual.
void layer_norm(const float* x, const float* residual, size_t m, size_t d, const float* gamma, const float* beta,
                float eps, float* y);

// x = act(x) in place.
void activate(Activation act, float* x, size_t n);

// y += x
void add(const float* x, float* y, size_t n);

// out[i] = table[ids[i]] (x folded row scale) + positions[pos[i]]  (positions may be null).
// int4: float(q x block scale) x row scale, as the converter decodes.
void embed(const detail::Matrix& table, const int32_t* ids, const int32_t* pos, size_t m, const float* positions,
           float* out);

// Attention for one query and `heads` heads that share K and V (grouped-query attention;
// 1 without it): per head h, out_h = softmax(q_h . K^T) V over n keys, q_h and out_h
// head_dim apart in q and out. Computed as every path computes it, bit for bit: tiles of
// kAttentionTile keys in order (online softmax); per tile, each score is canonical.h's sum
// of q_h[c] k_j[c]; if the tile's largest score m' exceeds the running maximum m, the running
// sum and out_h are multiplied by e^(m - m') and m = m'; the weights p_j = e^(score_j - m)
// (canonical.h's e^x) add their canonical sum to the running sum, then out_h[c] += p_j
// v_j[c] for each key in order; at the end out_h is multiplied by 1 / the running sum. K and V
// hold elements of type kv (f32 or f16: a KV cache may be stored in half precision),
// rows `stride` elements apart; key j is row rows[j] of K and V, or row j when rows is
// null (a beam's cache: its positions live in the rows that wrote them, so reordering
// beams moves indices, not keys). scores needs n floats (the SIMD paths use one tile of
// them: they run a tiled online softmax, a single pass over K and V). lse, unless null,
// receives each head's log(sum_j exp(q_h . k_j)), with which attentions over disjoint
// sets of keys merge into the attention over all of them (layers::merge_attention).
void attend(const float* q, const void* k, const void* v, DType kv, const size_t* rows, size_t n, size_t stride,
            size_t head_dim, size_t heads, float* scores, float* out, float* lse);

// out[i] = x[i] stored as `type`: f32 copies, f16 rounds to nearest even (IEEE).
void store_as(const float* x, size_t n, DType type, void* out);

// attend over an int8 KV cache: as attend, where key j's head_dim int8 values start
// row(j) x row_bytes bytes into k (row(j) = rows[j], or j when rows is null) and its f32
// scale s_j lies scale_offset bytes after them (int8_kv_row_bytes' layout: for K/V head
// h, k points at the head's values, scale_offset = int8_kv_scales_offset + 4h - h
// head_dim); likewise for v with scales t_j. score_j = (q_h . k_j) s_j and
// out_h = sum_j (p_j t_j) v_j: a head's scale multiplies its products, never each value.
void attend_int8(const float* q, const int8_t* k, const int8_t* v, const size_t* rows, size_t n, size_t row_bytes,
                 size_t scale_offset, size_t head_dim, size_t heads, float* scores, float* out, float* lse);

// m rows of heads x head_dim floats into m rows of int8_kv_row_bytes(heads, head_dim)
// bytes: per head, s = max |x| / 127 and q = round_half_even(x (1 / s)) (quantize_rows'
// rule, so |q| <= 127; s = 0 gives zeros; a non-finite product gives 0), padding zeroed.
void store_int8_kv(const float* x, size_t m, size_t heads, size_t head_dim, void* out);

// log(sum exp(x)) over n values, max-subtracted: log_softmax(x)[i] = x[i] - logsumexp(x).
float logsumexp(const float* x, size_t n);

// The k largest finite values of x, best first (ties: lower index), as ids and
// values; returns how many (< k when fewer are finite). With logsumexp this is
// log-softmax + top-k in two reads of x and no write.
size_t top_k(const float* x, size_t n, size_t k, int32_t* ids, float* values);

// One step of Marian's SSRU over n values: f = sigmoid(forget), cell = f cell + (1 - f) x,
// out = relu(cell). out may alias x or forget, not cell.
void ssru(const float* x, const float* forget, size_t n, float* cell, float* out);

// y[i] = x[i] / sqrt(mean(x[i]^2) + eps) * gamma over rows of d values (RMSNorm: Llama's
// x w, and Gemma's x (1 + w) with gamma = 1 + w); y may alias x.
void rms_norm(const float* x, size_t m, size_t d, const float* gamma, float eps, float* y);

// Rotary position embedding in place, rotate-half layout (Hugging Face's
// apply_rotary_pos_emb): each of `heads` heads of row r (at x + r stride + h head_dim)
// has its pairs (i, i + head_dim / 2) rotated by the angle whose cosine and sine are
// cos[r half + i], sin[r half + i] (half = head_dim / 2):
//   a, b = x[i], x[i + half];  x[i] = a cos - b sin;  x[i + half] = b cos + a sin.
void rope(float* x, size_t m, size_t heads, size_t head_dim, size_t stride, const float* cos, const float* sin);

// y *= x element-wise (a gated feed-forward's act(gate) * up).
void multiply(const float* x, float* y, size_t n);

}  // namespace reference

const KernelTable& reference_table();

// One head's attention probabilities: probs[j] = softmax over j of q . k[row(j)] (k's
// rows `stride` elements apart, f32 or f16; row(j) = rows[j], or j when rows is null),
// over n >= 1 keys. Word alignments read one head of one layer per step (a few hundred
// products): scalar on every path, as attend's reference computes them.
void attention_probabilities(const float* q, const void* k, DType kv, const size_t* rows, size_t n, size_t stride,
                             size_t head_dim, float* probs);

}  // namespace petrel::kernels
