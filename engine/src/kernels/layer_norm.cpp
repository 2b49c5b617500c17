#include <cmath>

#include "kernels/kernels.h"

namespace petrel::kernels::reference {

void layer_norm(const float* x, const float* residual, size_t m, size_t d, const float* gamma, const float* beta,
                float eps, float* y) {
  for (size_t i = 0; i < m; ++i) {
    const float* xi = x + i * d;
    const float* ri = residual ? residual + i * d : nullptr;
    float* yi = y + i * d;
    double sum = 0;
    for (size_t c = 0; c < d; ++c) {
      float v = ri ? xi[c] + ri[c] : xi[c];
      yi[c] = v;
      sum += v;
    }
    const double mean = sum / d;
    double var = 0;
    for (size_t c = 0; c < d; ++c) var += (yi[c] - mean) * (yi[c] - mean);
    const float inv = static_cast<float>(1.0 / std::sqrt(var / d + eps));
    const float meanf = static_cast<float>(mean);
    for (size_t c = 0; c < d; ++c) yi[c] = (yi[c] - meanf) * inv * gamma[c] + beta[c];
  }
}

void add(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace petrel::kernels::reference
