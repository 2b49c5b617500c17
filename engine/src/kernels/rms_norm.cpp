#include <cmath>

#include "kernels/kernels.h"

namespace petrel::kernels::reference {

void rms_norm(const float* x, size_t m, size_t d, const float* gamma, float eps, float* y) {
  for (size_t r = 0; r < m; ++r) {
    const float* xr = x + r * d;
    float* yr = y + r * d;
    double sum = 0;
    for (size_t c = 0; c < d; ++c) sum += double(xr[c]) * xr[c];
    const float inv = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(d) + eps));
    for (size_t c = 0; c < d; ++c) yr[c] = xr[c] * inv * gamma[c];
  }
}

void multiply(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] *= x[i];
}

}  // namespace petrel::kernels::reference
