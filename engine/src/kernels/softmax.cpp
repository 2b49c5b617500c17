#include <cmath>

#include "kernels/kernels.h"

namespace petrel::kernels::reference {

void log_softmax(float* x, size_t n) {
  float max_value = -INFINITY;
  for (size_t i = 0; i < n; ++i) max_value = std::max(max_value, x[i]);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i] - max_value));
  const float log_sum = static_cast<float>(std::log(sum));
  for (size_t i = 0; i < n; ++i) x[i] = x[i] - max_value - log_sum;
}

}  // namespace petrel::kernels::reference
