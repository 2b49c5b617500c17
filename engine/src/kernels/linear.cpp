#include <cmath>

#include "kernels/half.h"
#include "kernels/kernels.h"

namespace petrel::kernels::reference {

void quantize_rows(const float* x, size_t m, size_t k, float fixed_scale, QuantizedRows out) {
  const size_t stride = detail::round_up(k, detail::kInt8Group);
  for (size_t i = 0; i < m; ++i) {
    const float* row = x + i * k;
    float scale = fixed_scale;
    if (scale == 0) {
      float max_abs = 0;
      for (size_t c = 0; c < k; ++c) max_abs = std::max(max_abs, std::fabs(row[c]));
      scale = max_abs / 127.0f;
    }
    const float inv = scale > 0 ? 1.0f / scale : 0.0f;
    int8_t* q = out.values + i * stride;
    if (fixed_scale == 0)
      for (size_t c = 0; c < k; ++c) q[c] = round_to_int8(row[c] * inv);
    else  // a static scale: values beyond it saturate (as intgemm's)
      for (size_t c = 0; c < k; ++c) q[c] = round_to_int8(std::min(std::max(row[c] * inv, -127.0f), 127.0f));
    for (size_t c = k; c < stride; ++c) q[c] = 0;
    out.scales[i] = scale;
  }
}

void linear(const float* x, size_t m, const detail::Matrix& w, const float* bias, float* y, size_t y_stride,
            QuantizedRows scratch) {
  const size_t n = w.rows, k = w.cols;
  switch (w.dtype) {
    case DType::kF32: {
      const float* wf = static_cast<const float*>(w.data);
      for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j) {
          float acc = 0;
          w.for_each_in_row(j, [&](size_t c, size_t at) { acc += x[i * k + c] * wf[at]; });
          y[i * y_stride + j] = acc + (bias ? bias[j] : 0.0f);
        }
      break;
    }
    case DType::kF16: {
      const uint16_t* wh = static_cast<const uint16_t*>(w.data);
      for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j) {
          float acc = 0;
          w.for_each_in_row(j, [&](size_t c, size_t at) { acc += x[i * k + c] * half_to_float(wh[at]); });
          y[i * y_stride + j] = acc + (bias ? bias[j] : 0.0f);
        }
      break;
    }
    case DType::kInt8: {
      quantize_rows(x, m, k, w.activation_scale, scratch);
      const size_t stride = detail::round_up(k, detail::kInt8Group);
      const int8_t* wq = static_cast<const int8_t*>(w.data);
      for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j) {
          const int8_t* xq = scratch.values + i * stride;
          int32_t acc = 0;  // |acc| <= 128 * 128 * k: within int32 for the loader's k <= 2^16
          w.for_each_in_row(j, [&](size_t c, size_t at) { acc += int32_t{xq[c]} * wq[at]; });
          y[i * y_stride + j] = static_cast<float>(acc) * (scratch.scales[i] * w.scales[j]) + (bias ? bias[j] : 0.0f);
        }
      break;
    }
    case DType::kInt4: {
      quantize_rows(x, m, k, w.activation_scale, scratch);
      const size_t stride = detail::round_up(k, detail::kInt8Group);
      constexpr size_t kBlock = detail::kInt4Block;
      for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j) {
          const int8_t* xq = scratch.values + i * stride;
          float acc = 0;
          int32_t dot = 0;  // one block's: |dot| <= 32 x 127 x 8, times a u8 scale: an exact float
          w.for_each_in_row(j, [&](size_t c, size_t at) {
            dot += int32_t{xq[c]} * w.quantized_at(at);
            if (c % kBlock == kBlock - 1 || c + 1 == k) {
              acc += static_cast<float>(dot * int32_t{w.block_scale(j, c / kBlock)});
              dot = 0;
            }
          });
          y[i * y_stride + j] = acc * (scratch.scales[i] * w.scales[j]) + (bias ? bias[j] : 0.0f);
        }
      break;
    }
  }
}

}  // namespace petrel::kernels::reference
