#include <cmath>

#include "kernels/canonical.h"
#include "kernels/kernels.h"

namespace petrel::kernels::reference {

float logsumexp(const float* x, size_t n) {
  float max_value = -INFINITY;
  for (size_t i = 0; i < n; ++i) max_value = std::max(max_value, x[i]);
  if (max_value == -INFINITY) return -INFINITY;
  // canonical.h's e^x and order: every path gets these bits.
  const float sum = canonical::sum(n, [&](size_t i) { return canonical::exp<canonical::ScalarOps>(x[i] - max_value); });
  return max_value + canonical::log(sum);
}

size_t top_k(const float* x, size_t n, size_t k, int32_t* ids, float* values) {
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (!(v > -INFINITY)) continue;  // -inf (masked) and NaN never qualify
    if (count == k && !(v > values[k - 1])) continue;
    size_t at = count < k ? count++ : k - 1;
    while (at > 0 && v > values[at - 1]) {  // strictly better: equal values keep index order
      values[at] = values[at - 1];
      ids[at] = ids[at - 1];
      --at;
    }
    values[at] = v;
    ids[at] = static_cast<int32_t>(i);
  }
  return count;
}

}  // namespace petrel::kernels::reference
