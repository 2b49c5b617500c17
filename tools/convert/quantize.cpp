#include "convert/quantize.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/half.h"

namespace petrel::convert {

detail::Matrix as_matrix(const EncodedMatrix& m, size_t rows, size_t cols) {
  detail::Matrix v;
  v.dtype = m.dtype;
  v.layout = m.layout;
  v.rows = rows;
  v.cols = cols;
  v.data = m.data.data();
  v.scales = m.scales.empty() ? nullptr : m.scales.data();
  v.row_sums = m.row_sums.empty() ? nullptr : m.row_sums.data();
  return v;
}

namespace {

// Reorders row-major bytes into Panel16 order (zero padding), and for int8 sums rows.
void pack_panels(EncodedMatrix& m, size_t rows, size_t cols) {
  const size_t esize = detail::dtype_size(m.dtype);
  m.layout = detail::Layout::kPanel16;
  const detail::Matrix packed = as_matrix(m, rows, cols);
  std::vector<uint8_t> out(detail::round_up(rows, detail::kPanelRows) * packed.stored_cols() * esize, 0);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c)
      std::memcpy(&out[packed.index(r, c) * esize], &m.data[(r * cols + c) * esize], esize);
  if (m.dtype == DType::kInt8) {
    m.row_sums.assign(rows, 0);
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c) m.row_sums[r] += static_cast<int8_t>(m.data[r * cols + c]);
  }
  m.data = std::move(out);
}

}  // namespace

EncodedMatrix encode_matrix(const std::vector<float>& values, size_t rows, size_t cols, DType dtype,
                            float row_scale, detail::Layout layout) {
  EncodedMatrix m;
  m.dtype = dtype;
  if (dtype == DType::kInt8) {
    m.data.resize(rows * cols);
    m.scales.resize(rows);
    for (size_t r = 0; r < rows; ++r) {
      const float* row = values.data() + r * cols;
      float max_abs = 0;
      for (size_t c = 0; c < cols; ++c) max_abs = std::max(max_abs, std::fabs(row[c]));
      float s = max_abs / 127.0f;
      for (size_t c = 0; c < cols; ++c) {
        long q = s > 0 ? std::lround(row[c] / s) : 0;
        q = std::min(127l, std::max(-127l, q));
        m.data[r * cols + c] = static_cast<uint8_t>(static_cast<int8_t>(q));
      }
      m.scales[r] = s * row_scale;
    }
  } else if (dtype == DType::kF16) {
    m.data.resize(rows * cols * 2);
    for (size_t i = 0; i < rows * cols; ++i) {
      uint16_t h = kernels::float_to_half(values[i] * row_scale);
      std::memcpy(&m.data[2 * i], &h, 2);
    }
  } else {
    m.data.resize(rows * cols * 4);
    for (size_t i = 0; i < rows * cols; ++i) {
      float v = values[i] * row_scale;
      std::memcpy(&m.data[4 * i], &v, 4);
    }
  }
  if (layout == detail::Layout::kPanel16) pack_panels(m, rows, cols);
  std::vector<float> decoded = decode_matrix(m, rows, cols);
  double signal = 0, noise = 0;
  for (size_t i = 0; i < rows * cols; ++i) {
    double target = static_cast<double>(values[i]) * row_scale;
    double err = decoded[i] - target;
    m.max_abs_error = std::max(m.max_abs_error, std::fabs(err));
    signal += target * target;
    noise += err * err;
  }
  m.snr_db = noise == 0 ? std::numeric_limits<double>::infinity() : 10.0 * std::log10(signal / noise);
  return m;
}

std::vector<float> decode_matrix(const EncodedMatrix& m, size_t rows, size_t cols) {
  std::vector<float> out(rows * cols);
  const detail::Matrix v = as_matrix(m, rows, cols);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      const size_t i = v.index(r, c);
      float& dst = out[r * cols + c];
      if (m.dtype == DType::kInt8) {
        dst = static_cast<float>(static_cast<int8_t>(m.data[i])) * m.scales[r];
      } else if (m.dtype == DType::kF16) {
        uint16_t h;
        std::memcpy(&h, &m.data[2 * i], 2);
        dst = kernels::half_to_float(h);
      } else {
        std::memcpy(&dst, &m.data[4 * i], 4);
      }
    }
  }
  return out;
}

}  // namespace petrel::convert
