#include <cmath>

#include "kernels/kernels.h"

namespace petrel::kernels::reference {

void ssru(const float* x, const float* forget, size_t n, float* cell, float* out) {
  for (size_t i = 0; i < n; ++i) {
    const float f = 1.0f / (1.0f + std::exp(-forget[i]));
    cell[i] = f * cell[i] + (1.0f - f) * x[i];
    out[i] = cell[i] > 0 ? cell[i] : 0.0f;
  }
}

}  // namespace petrel::kernels::reference
