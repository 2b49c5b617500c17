// Transformer layers composed from kernels: dense (linear), multi-head attention
// (packed self-attention, cached self-attention, cross-attention), feed-forward,
// and the residual + LayerNorm wiring for post-LN and pre-LN blocks.
#pragma once

#include <cstddef>
#include <vector>

#include "format/weights.h"
#include "kernels/kernels.h"

namespace petrel::layers {

// Buffers the layers write into, sized once per batch shape so the decode loop
// never allocates.
struct Workspace {
  std::vector<float> normed, out, q, k, v, context, hidden, scores;
  std::vector<int8_t> quantized;
  std::vector<float> quantized_scales;

  void reserve(size_t rows, size_t d, size_t ffn, size_t max_keys);
  kernels::QuantizedRows quantized_rows() { return {quantized.data(), quantized_scales.data()}; }
};

void dense(const kernels::KernelTable& k, const detail::Linear& l, const float* x, size_t rows, float* y, Workspace& ws);

// Which key rows a query row attends: keys [first, first + count) of the K/V buffers.
struct KeyRange {
  size_t first, count;
};

// context[r] = MultiHead(q[r], K[keys[r]], V[keys[r]]) for every row; q, K, V, context
// are row-major with d floats per row, `heads` heads of d/heads each.
void attend_rows(const kernels::KernelTable& kt, const float* q, const float* k, const float* v, const KeyRange* keys, size_t rows, size_t d,
                 size_t heads, float* scores, float* context);

// A residual block: x = LN(x + f(x)) (post) or x = x + f(LN(x)) (pre). `f(in, out)`
// reads rows of `in` and writes rows of `out` (ws.out).
template <class Sublayer>
void residual_block(const kernels::KernelTable& k, NormPlacement placement, const detail::Norm& norm, float eps, float* x, size_t rows, size_t d,
                    Workspace& ws, Sublayer f) {
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
void feed_forward(const kernels::KernelTable& k, const detail::Layer& layer, Activation act, const float* x, size_t rows, float* out,
                  Workspace& ws);

}  // namespace petrel::layers
