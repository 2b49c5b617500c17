#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>

#include "kernels/half.h"
#include "kernels/canonical.h"
#include "kernels/kernels.h"

namespace petrel::kernels::reference {

namespace {

inline float to_float(float x) { return x; }
inline float to_float(uint16_t h) { return half_to_float(h); }
inline float to_float(int8_t x) { return static_cast<float>(x); }

float scale_at(const int8_t* row, size_t offset) {
  float s;
  std::memcpy(&s, row + offset, sizeof s);
  return s;
}

// One head's attention as kernels.h specifies it (every path's arithmetic): key j's values
// at k + row(j), its score multiplied by key_scale(j), its weight by value_scale(j) (1 for
// f32 and f16: exact).
template <class T, class Row, class KeyScale, class ValueScale>
void attend_head(const float* q, const T* k, const T* v, Row row, KeyScale key_scale, ValueScale value_scale, size_t n,
                 size_t head_dim, float* scores, float* out, float* lse) {
  using canonical::ScalarOps;
  float running_max = -INFINITY, running_sum = 0;
  std::fill(out, out + head_dim, 0.0f);
  for (size_t j0 = 0; j0 < n; j0 += kAttentionTile) {
    const size_t len = std::min(kAttentionTile, n - j0);
    float tile_max = -INFINITY;
    for (size_t j = 0; j < len; ++j) {
      const T* kj = k + row(j0 + j);
      scores[j] = canonical::sum(head_dim, [&](size_t c) { return q[c] * to_float(kj[c]); }) * key_scale(j0 + j);
      tile_max = std::max(tile_max, scores[j]);
    }
    if (tile_max > running_max) {
      const float rescale = canonical::exp<ScalarOps>(running_max - tile_max);
      running_sum *= rescale;
      for (size_t c = 0; c < head_dim; ++c) out[c] *= rescale;
      running_max = tile_max;
    }
    running_sum +=
        canonical::sum(len, [&](size_t j) { return scores[j] = canonical::exp<ScalarOps>(scores[j] - running_max); });
    for (size_t j = 0; j < len; ++j) {
      const float p = scores[j] * value_scale(j0 + j);
      const T* vj = v + row(j0 + j);
      for (size_t c = 0; c < head_dim; ++c) out[c] += p * to_float(vj[c]);
    }
  }
  const float inv = 1.0f / running_sum;
  for (size_t c = 0; c < head_dim; ++c) out[c] *= inv;
  if (lse != nullptr) *lse = running_max + canonical::log(running_sum);
}

}  // namespace

void attend(const float* q, const void* k, const void* v, DType kv, const size_t* rows, size_t n, size_t stride,
            size_t head_dim, size_t heads, float* scores, float* out, float* lse) {
  auto row = [&](size_t j) { return (rows != nullptr ? rows[j] : j) * stride; };
  auto one = [](size_t) { return 1.0f; };
  for (size_t h = 0; h < heads; ++h, q += head_dim, out += head_dim) {  // one head at a time
    float* head_lse = lse != nullptr ? lse + h : nullptr;
    if (kv == DType::kF16)
      attend_head(q, static_cast<const uint16_t*>(k), static_cast<const uint16_t*>(v), row, one, one, n, head_dim,
                  scores, out, head_lse);
    else
      attend_head(q, static_cast<const float*>(k), static_cast<const float*>(v), row, one, one, n, head_dim, scores,
                  out, head_lse);
  }
}

void store_as(const float* x, size_t n, DType type, void* out) {
  if (type == DType::kF16) {
    auto* h = static_cast<uint16_t*>(out);
    for (size_t i = 0; i < n; ++i) h[i] = float_to_half(x[i]);
  } else {
    std::memcpy(out, x, n * sizeof(float));
  }
}

void attend_int8(const float* q, const int8_t* k, const int8_t* v, const size_t* rows, size_t n, size_t row_bytes,
                 size_t scale_offset, size_t head_dim, size_t heads, float* scores, float* out, float* lse) {
  auto row = [&](size_t j) { return (rows != nullptr ? rows[j] : j) * row_bytes; };
  auto key_scale = [&](size_t j) { return scale_at(k + row(j), scale_offset); };
  auto value_scale = [&](size_t j) { return scale_at(v + row(j), scale_offset); };
  for (size_t h = 0; h < heads; ++h, q += head_dim, out += head_dim)
    attend_head(q, k, v, row, key_scale, value_scale, n, head_dim, scores, out, lse != nullptr ? lse + h : nullptr);
}

void store_int8_kv(const float* x, size_t m, size_t heads, size_t head_dim, void* out) {
  const size_t width = heads * head_dim, scales_at = int8_kv_scales_offset(heads, head_dim);
  const size_t row_bytes = int8_kv_row_bytes(heads, head_dim);
  for (size_t r = 0; r < m; ++r) {
    auto* row = static_cast<uint8_t*>(out) + r * row_bytes;
    auto* q = reinterpret_cast<int8_t*>(row);
    for (size_t h = 0; h < heads; ++h) {
      const float* xh = x + r * width + h * head_dim;
      float max_abs = 0;
      for (size_t c = 0; c < head_dim; ++c) max_abs = std::max(max_abs, std::fabs(xh[c]));
      // A scale below the smallest normal float is 0 (and the values zeros): ARMv7's NEON
      // flushes subnormals, and every path must store the same bytes.
      const float scale = max_abs / 127.0f >= std::numeric_limits<float>::min() ? max_abs / 127.0f : 0.0f;
      const float inv = scale > 0 ? 1.0f / scale : 0.0f;
      for (size_t c = 0; c < head_dim; ++c) q[h * head_dim + c] = round_to_int8(xh[c] * inv);
      std::memcpy(row + scales_at + h * sizeof(float), &scale, sizeof scale);
    }
    std::fill(row + width, row + scales_at, uint8_t{0});
  }
}

}  // namespace petrel::kernels::reference

namespace petrel::kernels {

namespace {
template <typename T>
void probabilities_typed(const float* q, const T* k, const size_t* rows, size_t n, size_t stride, size_t head_dim,
                         float* probs) {
  float max_score = -INFINITY;
  for (size_t j = 0; j < n; ++j) {
    const T* key = k + (rows != nullptr ? rows[j] : j) * stride;
    float sums[4] = {0, 0, 0, 0};  // four chains: the products overlap instead of waiting on one sum
    size_t c = 0;
    for (; c + 4 <= head_dim; c += 4)
      for (size_t i = 0; i < 4; ++i) sums[i] += q[c + i] * reference::to_float(key[c + i]);
    for (; c < head_dim; ++c) sums[0] += q[c] * reference::to_float(key[c]);
    const float s = (sums[0] + sums[1]) + (sums[2] + sums[3]);
    probs[j] = s;
    max_score = std::max(max_score, s);
  }
  float sum = 0;
  for (size_t j = 0; j < n; ++j) {
    probs[j] = canonical::exp<canonical::ScalarOps>(probs[j] - max_score);
    sum += probs[j];
  }
  const float inv = 1.0f / sum;
  for (size_t j = 0; j < n; ++j) probs[j] *= inv;
}
}  // namespace

void attention_probabilities(const float* q, const void* k, DType kv, const size_t* rows, size_t n, size_t stride,
                             size_t head_dim, float* probs) {
  if (kv == DType::kF16)
    probabilities_typed(q, static_cast<const uint16_t*>(k), rows, n, stride, head_dim, probs);
  else
    probabilities_typed(q, static_cast<const float*>(k), rows, n, stride, head_dim, probs);
}

}  // namespace petrel::kernels
