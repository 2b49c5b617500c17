// Transformer layers composed from kernels: dense (linear), multi-head attention
// (packed self-attention, cached self-attention, cross-attention), feed-forward,
// and the residual + LayerNorm wiring for post-LN and pre-LN blocks.
#pragma once

#include <cstddef>
#include <vector>

#include "format/weights.h"
#include "layers/aligned_vector.h"
#include "kernels/kernels.h"
#include "threads/thread_pool.h"

namespace petrel::layers {

// Scratch private to one thread of the pool.
struct ThreadScratch {
  AlignedVector<int8_t> quantized;
  std::vector<float> quantized_scales, scores;
  AlignedVector<float> partial;  // one partition's attention for a group of heads, and their log-sum-exps
  std::vector<int32_t> block_sums;  // int4 weights
  kernels::QuantizedRows quantized_rows() { return {quantized.data(), quantized_scales.data(), block_sums.data()}; }
};

// Buffers the layers write into, sized once per batch shape so the decode loop
// never allocates.
struct Workspace {
  AlignedVector<float> normed, out, q, k, v, context, hidden, gate;
  // One query row's attention partitions, computed side by side (attend_rows).
  AlignedVector<float> partitions;
  std::vector<ThreadScratch> per_thread;

  void reserve(size_t rows, size_t d, size_t ffn, size_t max_keys, size_t threads);
};

// What every layer runs with: the kernel path, the thread pool, the buffers.
struct Context {
  const kernels::KernelTable& k;
  threads::ThreadPool& pool;
  Workspace& ws;
};

// Below this many multiply-adds a matmul is not worth waking the pool for.
constexpr size_t kParallelWork = size_t{1} << 16;

// A matmul splits its rows over the threads when each gets this many (a full row tile
// of the widest GEMM path); fewer rows split the output panels instead.
constexpr size_t kRowsPerThread = 8;

// y[rows][n] = x . W^T + bias over the pool: a decoder step's few rows (one, or a
// beam's) split by output panels, many rows (an encoder, a batch) by rows.
void matmul(Context& c, const detail::Matrix& w, const float* bias, const float* x, size_t rows, float* y);
inline void dense(Context& c, const detail::Linear& l, const float* x, size_t rows, float* y) {
  matmul(c, l.weight, l.bias, x, rows, y);
}

// Which key rows a query row attends: keys [first, first + count) of the K/V buffers,
// or of a list of their rows.
struct KeyRange {
  size_t first, count;
};

// The heads of an attention: q and context rows hold heads x head_dim values, K and V
// rows kv_heads x head_dim; query head h reads K/V head h / (heads / kv_heads)
// (grouped-query attention; kv_heads = heads is multi-head attention).
struct HeadShape {
  size_t heads, kv_heads, head_dim;
  static HeadShape multi_head(size_t d, size_t heads) { return {heads, heads, d / heads}; }
  size_t q_width() const { return heads * head_dim; }
  size_t kv_width() const { return kv_heads * head_dim; }
};

// Attention runs over partitions of this many keys, merged in order: every row's result
// is the same whichever threads computed its partitions (and however many there were).
constexpr size_t kKeysPerPartition = 256;

// out/lse = the attention of `heads` heads over keys A and B, from out/lse over A and
// part_out/part_lse over B (each normalized; lse the log-sum-exp of its scores).
void merge_attention(float* out, float* lse, const float* part_out, const float* part_lse, size_t heads,
                     size_t head_dim);

// context[r] = MultiHead(q[r], K[keys[r]], V[keys[r]]) for every row; q, K, V, context
// are row-major as `shape` says; K and V hold elements of type kv (f32, or f16 for a
// half-precision KV cache), or for kInt8 rows of kernels::int8_kv_row_bytes (int8 values
// and a scale per K/V head). With key_rows, row r attends K/V rows
// key_rows[keys[r].first + j] (j < keys[r].count) instead. Over the pool: rows and K/V
// heads side by side; one row (a step of one sequence) with fewer K/V heads than
// threads, its partitions side by side.
void attend_rows(Context& c, const float* q, const void* k, const void* v, DType kv, const KeyRange* keys,
                 size_t rows, const HeadShape& shape, float* context, const size_t* key_rows = nullptr);

// A residual block: x = LN(x + f(x)) (post) or x = x + f(LN(x)) (pre). `f(in, out)`
// reads rows of `in` and writes rows of `out` (ws.out).
template <class Sublayer>
void residual_block(Context& c, NormPlacement placement, const detail::Norm& norm, float eps, float* x, size_t rows,
                    size_t d, Sublayer f) {
  const kernels::KernelTable& k = c.k;
  Workspace& ws = c.ws;
  if (placement == NormPlacement::kPre) {
    k.layer_norm(x, nullptr, rows, d, norm.gamma, norm.beta, eps, ws.normed.data());
    f(ws.normed.data(), ws.out.data());
    k.add(ws.out.data(), x, rows * d);
  } else {
    f(x, ws.out.data());
    k.layer_norm(ws.out.data(), x, rows, d, norm.gamma, norm.beta, eps, x);
  }
}

// out = fc2(act(fc1(x)))
void feed_forward(Context& c, const detail::Layer& layer, Activation act, const float* x, size_t rows, float* out);

}  // namespace petrel::layers
