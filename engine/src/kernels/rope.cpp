#include "kernels/rope.h"

#include <cmath>

#include "kernels/kernels.h"

namespace petrel::kernels {

void rope_angles(const float* inv_freq, size_t half, size_t position, float* cos, float* sin) {
  // As transformers: the angle is an f32 product (inv_freq @ position_ids in f32), its
  // cosine and sine taken in f32.
  const float p = static_cast<float>(position);
  for (size_t i = 0; i < half; ++i) {
    const float angle = p * inv_freq[i];
    cos[i] = std::cos(angle);
    sin[i] = std::sin(angle);
  }
}

namespace reference {

void rope(float* x, size_t m, size_t heads, size_t head_dim, size_t stride, const float* cos, const float* sin) {
  const size_t half = head_dim / 2;
  for (size_t r = 0; r < m; ++r) {
    const float* c = cos + r * half;
    const float* s = sin + r * half;
    for (size_t h = 0; h < heads; ++h) {
      float* v = x + r * stride + h * head_dim;
      for (size_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i] + a * s[i];
      }
    }
  }
}

}  // namespace reference
}  // namespace petrel::kernels
