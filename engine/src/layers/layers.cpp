#include "layers/layers.h"

#include <algorithm>

namespace petrel::layers {

void Workspace::reserve(size_t rows, size_t d, size_t ffn, size_t max_keys, size_t threads) {
  for (auto* buffer : {&normed, &out, &q, &k, &v, &context})
    if (buffer->size() < rows * d) buffer->resize(rows * d);
  if (hidden.size() < rows * ffn) hidden.resize(rows * ffn);
  if (gate.size() < rows * ffn) gate.resize(rows * ffn);
  if (per_thread.size() < threads) per_thread.resize(threads);
  const size_t widest = kernels::quantized_row_bytes(std::max(d, ffn)), blocks = widest / detail::kInt4Block;
  for (ThreadScratch& s : per_thread) {
    if (s.scores.size() < max_keys) s.scores.resize(max_keys);
    if (s.quantized.size() < rows * widest) s.quantized.resize(rows * widest);
    if (s.quantized_scales.size() < rows) s.quantized_scales.resize(rows);
    if (s.block_sums.size() < rows * blocks) s.block_sums.resize(rows * blocks);
  }
}

void matmul(Context& c, const detail::Matrix& w, const float* bias, const float* x, size_t rows, float* y) {
  const size_t threads = c.pool.size(), n = w.rows, k = w.cols;
  if (threads == 1 || rows * n * k < kParallelWork) {
    c.k.linear(x, rows, w, bias, y, c.ws.per_thread[0].quantized_rows());
    return;
  }
  if (rows == 1) {  // split the output panels
    const size_t panels = (n + detail::kPanelRows - 1) / detail::kPanelRows;
    const size_t chunks = std::min(threads, panels);
    c.pool.run(chunks, [&](size_t chunk, size_t thread) {
      const size_t p0 = panels * chunk / chunks, p1 = panels * (chunk + 1) / chunks;
      const size_t r0 = p0 * detail::kPanelRows, r1 = std::min(n, p1 * detail::kPanelRows);
      c.k.linear(x, 1, w.row_slice(r0, r1 - r0), bias ? bias + r0 : nullptr, y + r0,
                 c.ws.per_thread[thread].quantized_rows());
    });
    return;
  }
  const size_t chunks = std::min(threads, rows);  // split the rows
  c.pool.run(chunks, [&](size_t chunk, size_t thread) {
    const size_t r0 = rows * chunk / chunks, r1 = rows * (chunk + 1) / chunks;
    c.k.linear(x + r0 * k, r1 - r0, w, bias, y + r0 * n, c.ws.per_thread[thread].quantized_rows());
  });
}

void attend_rows(Context& c, const float* q, const void* k, const void* v, DType kv, const KeyRange* keys,
                 size_t rows, const HeadShape& shape, float* context, const size_t* key_rows) {
  const size_t head_dim = shape.head_dim, q_width = shape.q_width(), kv_width = shape.kv_width();
  const size_t group = shape.heads / shape.kv_heads, esize = detail::dtype_size(kv);  // f32 or f16
  const size_t chunks = rows >= 8 ? std::min(c.pool.size(), rows) : 1;
  c.pool.run(chunks, [&](size_t chunk, size_t thread) {
    float* scores = c.ws.per_thread[thread].scores.data();
    for (size_t r = rows * chunk / chunks; r < rows * (chunk + 1) / chunks; ++r) {
      // Listed rows are found from the buffers' starts; a range starts at its first row.
      const size_t first = key_rows != nullptr ? 0 : keys[r].first;
      const size_t* listed = key_rows != nullptr ? key_rows + keys[r].first : nullptr;
      const auto* kr = static_cast<const uint8_t*>(k) + first * kv_width * esize;
      const auto* vr = static_cast<const uint8_t*>(v) + first * kv_width * esize;
      for (size_t kv_head = 0; kv_head < shape.kv_heads; ++kv_head) {  // its query heads together
        const size_t h = kv_head * group, kv_off = kv_head * head_dim;
        c.k.attend(q + r * q_width + h * head_dim, kr + kv_off * esize, vr + kv_off * esize, kv, listed,
                   keys[r].count, kv_width, head_dim, group, scores, context + r * q_width + h * head_dim);
      }
    }
  });
}

void feed_forward(Context& c, const detail::Layer& layer, Activation act, const float* x, size_t rows, float* out) {
  const size_t ffn = layer.fc1.weight.rows;
  dense(c, layer.fc1, x, rows, c.ws.hidden.data());
  if (layer.gated()) {  // fc2(act(gate x) * fc1 x)
    dense(c, layer.fc_gate, x, rows, c.ws.gate.data());
    c.k.activate(act, c.ws.gate.data(), rows * ffn);
    c.k.multiply(c.ws.gate.data(), c.ws.hidden.data(), rows * ffn);
  } else {
    c.k.activate(act, c.ws.hidden.data(), rows * ffn);
  }
  dense(c, layer.fc2, c.ws.hidden.data(), rows, out);
}

}  // namespace petrel::layers
