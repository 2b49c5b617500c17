#include <cmath>

#include "kernels/kernels.h"

namespace petrel::kernels::reference {

void activate(Activation act, float* x, size_t n) {
  switch (act) {
    case Activation::kRelu:
      for (size_t i = 0; i < n; ++i) x[i] = x[i] > 0 ? x[i] : 0.0f;
      break;
    case Activation::kGelu:  // exact (erf) GELU, as PyTorch's default
      for (size_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
      break;
    case Activation::kSwish:
      for (size_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i]));
      break;
    case Activation::kGeluTanh:
      for (size_t i = 0; i < n; ++i) x[i] = gelu_tanh(x[i]);
      break;
  }
}

}  // namespace petrel::kernels::reference
