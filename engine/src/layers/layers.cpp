#include "layers/layers.h"

#include <algorithm>

namespace petrel::layers {

void Workspace::reserve(size_t rows, size_t d, size_t ffn, size_t max_keys) {
  for (auto* buffer : {&normed, &out, &q, &k, &v, &context})
    if (buffer->size() < rows * d) buffer->resize(rows * d);
  if (hidden.size() < rows * ffn) hidden.resize(rows * ffn);
  if (scores.size() < max_keys) scores.resize(max_keys);
  const size_t widest = detail::round_up(std::max(d, ffn), detail::kInt8Group);
  if (quantized.size() < rows * widest) quantized.resize(rows * widest);
  if (quantized_scales.size() < rows) quantized_scales.resize(rows);
}

void dense(const kernels::KernelTable& k, const detail::Linear& l, const float* x, size_t rows, float* y,
           Workspace& ws) {
  k.linear(x, rows, l.weight, l.bias, y, ws.quantized_rows());
}

void attend_rows(const kernels::KernelTable& kt, const float* q, const float* k, const float* v, const KeyRange* keys, size_t rows, size_t d,
                 size_t heads, float* scores, float* context) {
  const size_t head_dim = d / heads;
  for (size_t r = 0; r < rows; ++r) {
    const float* kr = k + keys[r].first * d;
    const float* vr = v + keys[r].first * d;
    for (size_t h = 0; h < heads; ++h) {
      const size_t off = h * head_dim;
      kt.attend(q + r * d + off, kr + off, vr + off, keys[r].count, d, head_dim, scores,
                      context + r * d + off);
    }
  }
}

void feed_forward(const kernels::KernelTable& k, const detail::Layer& layer, Activation act, const float* x,
                  size_t rows, float* out, Workspace& ws) {
  const size_t ffn = layer.fc1.weight.rows;
  dense(k, layer.fc1, x, rows, ws.hidden.data(), ws);
  k.activate(act, ws.hidden.data(), rows * ffn);
  dense(k, layer.fc2, ws.hidden.data(), rows, out, ws);
}

}  // namespace petrel::layers
