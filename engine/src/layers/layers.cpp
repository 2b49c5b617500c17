#include "layers/layers.h"

#include <algorithm>
#include <cmath>

#include "kernels/canonical.h"

namespace petrel::layers {

void Workspace::reserve(size_t rows, size_t d, size_t ffn, size_t max_keys, size_t threads) {
  for (auto* buffer : {&normed, &out, &q, &k, &v, &context})
    if (buffer->size() < rows * d) buffer->resize(rows * d);
  if (hidden.size() < rows * ffn) hidden.resize(rows * ffn);
  if (gate.size() < rows * ffn) gate.resize(rows * ffn);
  if (per_thread.size() < threads) per_thread.resize(threads);
  const size_t widest = kernels::quantized_row_bytes(std::max(d, ffn)), blocks = widest / detail::kInt4Block;
  // Attention partitions: a query row's heads (d >= the q width >= heads) and their
  // log-sum-exps, each partition; per thread one partition and two sets of log-sum-exps.
  const size_t partitions_max = (max_keys + kKeysPerPartition - 1) / kKeysPerPartition;
  if (partitions.size() < partitions_max * 2 * d) partitions.resize(partitions_max * 2 * d);
  for (ThreadScratch& s : per_thread) {
    if (s.scores.size() < max_keys) s.scores.resize(max_keys);
    if (s.partial.size() < 3 * d) s.partial.resize(3 * d);
    if (s.quantized.size() < rows * widest) s.quantized.resize(rows * widest);
    if (s.quantized_scales.size() < rows) s.quantized_scales.resize(rows);
    if (s.block_sums.size() < rows * blocks) s.block_sums.resize(rows * blocks);
  }
}

void matmul(Context& c, const detail::Matrix& w, const float* bias, const float* x, size_t rows, float* y) {
  const size_t threads = c.pool.size(), n = w.rows, k = w.cols;
  if (threads == 1 || rows * n * k < kParallelWork) {
    c.k.linear(x, rows, w, bias, y, n, c.ws.per_thread[0].quantized_rows());
    return;
  }
  if (rows >= threads * kRowsPerThread) {  // enough rows for every thread's full row tiles: split the rows
    c.pool.run(threads, [&](size_t chunk, size_t thread) {
      const size_t r0 = rows * chunk / threads, r1 = rows * (chunk + 1) / threads;
      c.k.linear(x + r0 * k, r1 - r0, w, bias, y + r0 * n, n, c.ws.per_thread[thread].quantized_rows());
    });
    return;
  }
  // Few rows (a step: one row, or a beam's): split the output panels, so every thread
  // runs the row tiles one thread would (a beam's 4 rows one 4-row tile, not 1-row
  // GEMVs each reading the weights again) over its share of the weights.
  const size_t panels = (n + detail::kPanelRows - 1) / detail::kPanelRows;
  const size_t chunks = std::min(threads, panels);
  c.pool.run(chunks, [&](size_t chunk, size_t thread) {
    const size_t p0 = panels * chunk / chunks, p1 = panels * (chunk + 1) / chunks;
    const size_t r0 = p0 * detail::kPanelRows, r1 = std::min(n, p1 * detail::kPanelRows);
    c.k.linear(x, rows, w.row_slice(r0, r1 - r0), bias ? bias + r0 : nullptr, y + r0, n,
               c.ws.per_thread[thread].quantized_rows());
  });
}

void merge_attention(float* out, float* lse, const float* part_out, const float* part_lse, size_t heads,
                     size_t head_dim) {
  for (size_t h = 0; h < heads; ++h) {
    const float m = std::max(lse[h], part_lse[h]);
    // canonical.h's e^x and log: the merge is the same on every device.
    const float wa = kernels::canonical::exp<kernels::canonical::ScalarOps>(lse[h] - m);
    const float wb = kernels::canonical::exp<kernels::canonical::ScalarOps>(part_lse[h] - m), sum = wa + wb;
    const float a = wa / sum, b = wb / sum;
    float* o = out + h * head_dim;
    const float* p = part_out + h * head_dim;
    for (size_t c = 0; c < head_dim; ++c) o[c] = o[c] * a + p[c] * b;
    lse[h] = m + kernels::canonical::log(sum);
  }
}

void attend_rows(Context& c, const float* q, const void* k, const void* v, DType kv, const KeyRange* keys,
                 size_t rows, const HeadShape& shape, float* context, const size_t* key_rows) {
  const size_t head_dim = shape.head_dim, q_width = shape.q_width(), kv_width = shape.kv_width();
  const size_t group = shape.heads / shape.kv_heads, group_width = group * head_dim, threads = c.pool.size();
  // A K/V row's bytes: kv_width elements of f32 or f16, or int8 values and their scales.
  const bool int8 = kv == DType::kInt8;
  const size_t row_bytes = int8 ? kernels::int8_kv_row_bytes(shape.kv_heads, head_dim)
                                : kv_width * detail::dtype_size(kv);
  auto partitions = [&](size_t r) { return (keys[r].count + kKeysPerPartition - 1) / kKeysPerPartition; };
  // Partition p of row r for one K/V head's group of query heads, into out and lse.
  auto attend_partition = [&](size_t r, size_t kv_head, size_t p, float* scores, float* out, float* lse) {
    const size_t j0 = p * kKeysPerPartition, n = std::min(kKeysPerPartition, keys[r].count - j0);
    // Listed rows are found from the buffers' starts; a range starts at its first row.
    const size_t first = key_rows != nullptr ? 0 : keys[r].first + j0;
    const size_t* listed = key_rows != nullptr ? key_rows + keys[r].first + j0 : nullptr;
    const float* qh = q + r * q_width + kv_head * group_width;
    if (int8) {  // the head's values, and its scale after the row's values
      const size_t off = first * row_bytes + kv_head * head_dim;
      const size_t scale_offset = kernels::int8_kv_scales_offset(shape.kv_heads, head_dim) +
                                  kv_head * sizeof(float) - kv_head * head_dim;
      c.k.attend_int8(qh, static_cast<const int8_t*>(k) + off, static_cast<const int8_t*>(v) + off, listed, n,
                      row_bytes, scale_offset, head_dim, group, scores, out, lse);
      return;
    }
    const size_t kv_off = first * row_bytes + kv_head * head_dim * detail::dtype_size(kv);
    c.k.attend(qh, static_cast<const uint8_t*>(k) + kv_off, static_cast<const uint8_t*>(v) + kv_off, kv, listed, n,
               kv_width, head_dim, group, scores, out, lse);
  };
  size_t work = 0;  // multiply-adds / 2
  for (size_t r = 0; r < rows; ++r) work += keys[r].count * q_width;
  const bool parallel = threads > 1 && work >= kParallelWork;

  if (parallel && rows == 1 && shape.kv_heads < threads && partitions(0) > 1) {
    // One row: its partitions side by side, then merged in order as below.
    const size_t parts = partitions(0), stride = group_width + group;
    float* results = c.ws.partitions.data();
    c.pool.run(shape.kv_heads * parts, [&](size_t task, size_t thread) {
      float* result = results + task * stride;
      attend_partition(0, task / parts, task % parts, c.ws.per_thread[thread].scores.data(), result,
                       result + group_width);
    });
    for (size_t kv_head = 0; kv_head < shape.kv_heads; ++kv_head) {
      const float* first = results + kv_head * parts * stride;
      float* out = context + kv_head * group_width;
      float* lse = c.ws.per_thread[0].partial.data();
      std::copy_n(first, group_width, out);
      std::copy_n(first + group_width, group, lse);
      for (size_t p = 1; p < parts; ++p)
        merge_attention(out, lse, first + p * stride, first + p * stride + group_width, group, head_dim);
    }
    return;
  }
  // Rows and K/V heads side by side, each over its partitions in order.
  const size_t pairs = rows * shape.kv_heads, chunks = parallel ? std::min(threads, pairs) : 1;
  c.pool.run(chunks, [&](size_t chunk, size_t thread) {
    ThreadScratch& s = c.ws.per_thread[thread];
    float* part = s.partial.data();
    for (size_t pair = pairs * chunk / chunks; pair < pairs * (chunk + 1) / chunks; ++pair) {
      const size_t r = pair / shape.kv_heads, kv_head = pair % shape.kv_heads;
      float* out = context + r * q_width + kv_head * group_width;
      float* lse = part + group_width;  // the partitions so far; the next one goes to part
      attend_partition(r, kv_head, 0, s.scores.data(), out, lse);
      for (size_t p = 1; p < partitions(r); ++p) {
        attend_partition(r, kv_head, p, s.scores.data(), part, lse + group);
        merge_attention(out, lse, part, lse + group, group, head_dim);
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
