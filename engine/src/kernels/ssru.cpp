#include <cmath>

#include "kernels/canonical.h"
#include "kernels/kernels.h"

namespace petrel::kernels::reference {

void ssru(const float* x, const float* forget, size_t n, float* cell, float* out) {
  for (size_t i = 0; i < n; ++i) {
    const float f = canonical::sigmoid<canonical::ScalarOps>(forget[i]);
    cell[i] = f * cell[i] + (1.0f - f) * x[i];
    out[i] = cell[i] > 0 ? cell[i] : 0.0f;
  }
}

}  // namespace petrel::kernels::reference
