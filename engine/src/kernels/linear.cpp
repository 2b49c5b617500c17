#include <cmath>

#include "kernels/half.h"
#include "kernels/kernels.h"

namespace petrel::kernels {

void quantize_rows(const float* x, size_t m, size_t k, QuantizedRows out) {
  for (size_t i = 0; i < m; ++i) {
    const float* row = x + i * k;
    float max_abs = 0;
    for (size_t c = 0; c < k; ++c) max_abs = std::max(max_abs, std::fabs(row[c]));
    float scale = max_abs / 127.0f;
    float inv = scale > 0 ? 1.0f / scale : 0.0f;
    for (size_t c = 0; c < k; ++c) out.values[i * k + c] = static_cast<int8_t>(std::nearbyint(row[c] * inv));
    out.scales[i] = scale;
  }
}

void linear(const float* x, size_t m, const detail::Matrix& w, const float* bias, float* y, QuantizedRows scratch) {
  const size_t n = w.rows, k = w.cols;
  switch (w.dtype) {
    case DType::kF32: {
      const float* wf = static_cast<const float*>(w.data);
      for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j) {
          float acc = 0;
          for (size_t c = 0; c < k; ++c) acc += x[i * k + c] * wf[j * k + c];
          y[i * n + j] = acc + (bias ? bias[j] : 0.0f);
        }
      break;
    }
    case DType::kF16: {
      const uint16_t* wh = static_cast<const uint16_t*>(w.data);
      for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j) {
          float acc = 0;
          for (size_t c = 0; c < k; ++c) acc += x[i * k + c] * half_to_float(wh[j * k + c]);
          y[i * n + j] = acc + (bias ? bias[j] : 0.0f);
        }
      break;
    }
    case DType::kInt8: {
      quantize_rows(x, m, k, scratch);
      const int8_t* wq = static_cast<const int8_t*>(w.data);
      for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j) {
          int32_t acc = 0;
          for (size_t c = 0; c < k; ++c) acc += int32_t{scratch.values[i * k + c]} * int32_t{wq[j * k + c]};
          y[i * n + j] = static_cast<float>(acc) * (scratch.scales[i] * w.scales[j]) + (bias ? bias[j] : 0.0f);
        }
      break;
    }
  }
}

}  // namespace petrel::kernels
