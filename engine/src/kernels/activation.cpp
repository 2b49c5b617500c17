#include <cmath>

#include "kernels/canonical.h"
#include "kernels/kernels.h"

namespace petrel::kernels::reference {

// canonical.h's functions: every path computes them bit for bit alike.
void activate(Activation act, float* x, size_t n) {
  using canonical::ScalarOps;
  switch (act) {
    case Activation::kRelu:
      for (size_t i = 0; i < n; ++i) x[i] = x[i] > 0 ? x[i] : 0.0f;
      break;
    case Activation::kGelu:
      for (size_t i = 0; i < n; ++i) x[i] = canonical::gelu<ScalarOps>(x[i]);
      break;
    case Activation::kSwish:
      for (size_t i = 0; i < n; ++i) x[i] = canonical::swish<ScalarOps>(x[i]);
      break;
    case Activation::kGeluTanh:
      for (size_t i = 0; i < n; ++i) x[i] = canonical::gelu_tanh<ScalarOps>(x[i]);
      break;
  }
}

}  // namespace petrel::kernels::reference
