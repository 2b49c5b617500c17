#include <cmath>

#include "kernels/kernels.h"

namespace petrel::kernels::reference {

void attend(const float* q, const float* k, const float* v, size_t n, size_t stride, size_t head_dim, float* scores,
            float* out) {
  float max_score = -INFINITY;
  for (size_t j = 0; j < n; ++j) {
    float s = 0;
    for (size_t c = 0; c < head_dim; ++c) s += q[c] * k[j * stride + c];
    scores[j] = s;
    max_score = std::max(max_score, s);
  }
  float sum = 0;
  for (size_t j = 0; j < n; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
  const float inv = 1.0f / sum;
  for (size_t c = 0; c < head_dim; ++c) out[c] = 0;
  for (size_t j = 0; j < n; ++j) {
    const float p = scores[j] * inv;
    for (size_t c = 0; c < head_dim; ++c) out[c] += p * v[j * stride + c];
  }
}

}  // namespace petrel::kernels::reference
