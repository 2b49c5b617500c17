#include "convert/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

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
  v.block_scales = m.block_scales.empty() ? nullptr : m.block_scales.data();
  return v;
}

namespace {

// q = round(v / s) (half away from zero) clamped to [-limit, limit]; 0 when s is 0.
int32_t quantize_value(float v, float s, int32_t limit) { return s > 0 ? round_clamped(v / s, limit) : 0; }

// sum (q[i] x step - v[i])^2 in double, as four interleaved partial sums: a fixed order
// (every machine picks the same scale) that vectorizes where one running sum cannot.
double squared_error(const int32_t* q, const float* v, size_t n, float step) {
  double partial[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (size_t j = 0; j < 4; ++j) {
      const double d = static_cast<double>(q[i + j]) * step - v[i + j];
      partial[j] += d * d;
    }
  }
  for (size_t j = 0; i < n; ++i, ++j) {
    const double d = static_cast<double>(q[i]) * step - v[i];
    partial[j] += d * d;
  }
  return (partial[0] + partial[1]) + (partial[2] + partial[3]);
}

// int4 scales of one row (see encode_matrix): the f32 row scale and a u8 per block,
// and the row's values q in [-7, 7].
float quantize_int4_row(const float* row, size_t cols, uint8_t* block_scales, int32_t* q) {
  constexpr size_t kBlock = detail::kInt4Block;
  float max_abs = 0;
  for (size_t c = 0; c < cols; ++c) max_abs = std::max(max_abs, std::fabs(row[c]));
  const float s = max_abs / (7.0f * 255.0f);
  for (size_t b = 0; b * kBlock < cols; ++b) {
    const size_t c0 = b * kBlock, c1 = std::min(cols, c0 + kBlock);
    float block_max = 0;
    for (size_t c = c0; c < c1; ++c) block_max = std::max(block_max, std::fabs(row[c]));
    if (!(s > 0)) {
      block_scales[b] = 0;
      std::fill(q + c0, q + c1, 0);
      continue;
    }
    // The block scale that best fits the block (smallest squared error), searched near
    // max|block| / 7: floor and ceil of 0.70, 0.72 .. 1.00 times it (0.5 dB better than
    // max / 7 alone on trained and random weights: bench/int4_schemes.py).
    // A scale met again (floor and ceil often agree) cannot beat its first error: skipped.
    const double ideal = block_max / (7.0 * s);
    double best_error = INFINITY;
    bool tried[256] = {};
    int32_t candidate_q[kBlock];
    for (int i = 0; i <= 15; ++i) {
      for (bool up : {false, true}) {
        const double candidate = up ? std::ceil(ideal * (0.70 + 0.02 * i)) : std::floor(ideal * (0.70 + 0.02 * i));
        const auto scale = static_cast<uint8_t>(std::min(255.0, std::max(1.0, candidate)));
        if (tried[scale]) continue;
        tried[scale] = true;
        const float step = static_cast<float>(scale) * s;
        for (size_t c = c0; c < c1; ++c) candidate_q[c - c0] = round_clamped(row[c] / step, 7);
        const double error = squared_error(candidate_q, row + c0, c1 - c0, step);
        if (error < best_error) {
          best_error = error;
          block_scales[b] = scale;
          std::copy(candidate_q, candidate_q + (c1 - c0), q + c0);
        }
      }
    }
  }
  return s;
}

// An all-zero matrix of `dtype` in `layout` (padding included: nibble 8 is int4's 0).
EncodedMatrix allocate_matrix(size_t rows, size_t cols, DType dtype, detail::Layout layout) {
  EncodedMatrix m;
  m.dtype = dtype;
  m.layout = layout;
  detail::StoredSize size;
  if (!detail::stored_size(dtype, layout, rows, cols, &size)) throw std::length_error("matrix too large");
  m.data.assign(size.data, dtype == DType::kInt4 ? 0x88 : 0);
  const detail::Matrix view = as_matrix(m, rows, cols);
  if (view.int4_panels())  // the block scales inside the panels start at 0 (padding rows keep it)
    for (size_t p = 0; p < view.stored_rows() / detail::kPanelRows; ++p)
      for (size_t b = 0; b < view.blocks(); ++b)
        std::fill_n(m.data.begin() + p * view.int4_panel_bytes() + view.int4_scales_offset(b), detail::kPanelRows, 0);
  m.block_scales.assign(size.block_scales, 0);
  if (detail::traits(dtype).row_scales) m.scales.resize(rows);
  return m;
}

// The side arrays computed from the stored values (int8 Panel16's row sums), and the
// error against `values` x row_scale, accumulated into max_abs_error, signal and noise
// (in element order: blocks give the same sums as one pass).
void measure_matrix(EncodedMatrix& m, const float* values, size_t rows, size_t cols, float row_scale, double* signal,
                    double* noise) {
  const detail::Matrix view = as_matrix(m, rows, cols);
  if (m.dtype == DType::kInt8 && m.layout == detail::Layout::kPanel16) {
    m.row_sums.assign(rows, 0);
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c) m.row_sums[r] += view.quantized(r, c);
  }
  std::vector<float> decoded = decode_matrix(m, rows, cols);
  for (size_t i = 0; i < rows * cols; ++i) {
    double target = static_cast<double>(values[i]) * row_scale;
    double err = decoded[i] - target;
    m.max_abs_error = std::max(m.max_abs_error, std::fabs(err));
    *signal += target * target;
    *noise += err * err;
  }
}

double snr_db(double signal, double noise) {
  return noise == 0 ? std::numeric_limits<double>::infinity() : 10.0 * std::log10(signal / noise);
}

void finish_matrix(EncodedMatrix& m, const float* values, size_t rows, size_t cols, float row_scale) {
  double signal = 0, noise = 0;
  measure_matrix(m, values, rows, cols, row_scale, &signal, &noise);
  m.snr_db = snr_db(signal, noise);
}

// Encodes values[rows][cols] into m (allocate_matrix's, of `rows` rows).
void encode_values(EncodedMatrix& m, const float* values, size_t rows, size_t cols, float row_scale) {
  const detail::Matrix view = as_matrix(m, rows, cols);
  std::vector<int32_t> q(cols);
  std::vector<uint8_t> row_blocks(view.blocks());
  for (size_t r = 0; r < rows; ++r) {
    const float* row = values + r * cols;
    switch (m.dtype) {
      case DType::kInt8: {
        float max_abs = 0;
        for (size_t c = 0; c < cols; ++c) max_abs = std::max(max_abs, std::fabs(row[c]));
        const float s = max_abs / 127.0f;
        for (size_t c = 0; c < cols; ++c)
          m.data[view.index(r, c)] = static_cast<uint8_t>(static_cast<int8_t>(quantize_value(row[c], s, 127)));
        m.scales[r] = s * row_scale;
        break;
      }
      case DType::kInt4: {
        m.scales[r] = quantize_int4_row(row, cols, row_blocks.data(), q.data()) * row_scale;
        for (size_t b = 0; b < row_blocks.size(); ++b) {
          if (view.int4_panels())  // inside the panel, after its group of blocks
            m.data[r / detail::kPanelRows * view.int4_panel_bytes() + view.int4_scales_offset(b) +
                   r % detail::kPanelRows] = row_blocks[b];
          else
            m.block_scales[view.block_scale_index(r, b)] = row_blocks[b];
        }
        for (size_t c = 0; c < cols; ++c) {
          const size_t i = view.index(r, c);
          const auto nibble = static_cast<uint8_t>(q[c] + detail::kInt4Offset);
          uint8_t& byte = m.data[i / 2];
          byte = i % 2 ? static_cast<uint8_t>((byte & 0x0F) | (nibble << 4)) : static_cast<uint8_t>((byte & 0xF0) | nibble);
        }
        break;
      }
      case DType::kF16:
        for (size_t c = 0; c < cols; ++c) {
          const uint16_t h = kernels::float_to_half(row[c] * row_scale);
          std::memcpy(&m.data[view.index(r, c) * 2], &h, 2);
        }
        break;
      case DType::kF32:
        for (size_t c = 0; c < cols; ++c) {
          const float v = row[c] * row_scale;
          std::memcpy(&m.data[view.index(r, c) * 4], &v, 4);
        }
        break;
    }
  }
}

}  // namespace

EncodedMatrix encode_quantized_int8(const std::vector<int8_t>& q, size_t rows, size_t cols, float scale,
                                    float row_scale, detail::Layout layout) {
  if (q.size() != rows * cols) throw std::length_error("int8 values do not fill the matrix");
  EncodedMatrix m = allocate_matrix(rows, cols, DType::kInt8, layout);
  const detail::Matrix view = as_matrix(m, rows, cols);
  std::vector<float> values(rows * cols);  // what the values stand for, for the error report (none)
  for (size_t r = 0; r < rows; ++r) {
    m.scales[r] = scale * row_scale;
    for (size_t c = 0; c < cols; ++c) {
      m.data[view.index(r, c)] = static_cast<uint8_t>(q[r * cols + c]);
      values[r * cols + c] = static_cast<float>(q[r * cols + c]) * scale;
    }
  }
  finish_matrix(m, values.data(), rows, cols, row_scale);
  return m;
}

EncodedMatrix encode_matrix(const std::vector<float>& values, size_t rows, size_t cols, DType dtype,
                            float row_scale, detail::Layout layout) {
  if (values.size() != rows * cols) throw std::length_error("values do not fill the matrix");
  MatrixEncoder encoder(rows, cols, dtype, row_scale, layout);
  std::vector<uint8_t> data = encoder.encode_rows(values.data(), rows);  // one block: all rows
  EncodedMatrix m = encoder.finish();
  m.data = std::move(data);
  m.streamed_bytes = 0;
  return m;
}

MatrixEncoder::MatrixEncoder(size_t rows, size_t cols, DType dtype, float row_scale, detail::Layout layout,
                             size_t block_values)
    : rows_(rows), cols_(cols), row_scale_(row_scale) {
  const size_t panel = layout == detail::Layout::kPanel16 ? detail::kPanelRows : 1;
  block_rows_ = std::max<size_t>(1, block_values / std::max<size_t>(1, cols) / panel) * panel;
  out_.dtype = dtype;
  out_.layout = layout;
  detail::StoredSize size;  // the whole matrix must be storable (and its rows x cols not overflow)
  if (!detail::stored_size(dtype, layout, rows, cols, &size)) throw std::length_error("matrix too large");
  out_.scales.reserve(size.row_scales / 4);
  out_.row_sums.reserve(size.row_sums / 4);
  out_.block_scales.reserve(size.block_scales);
}

const std::vector<uint8_t>& MatrixEncoder::encode_rows(const float* values, size_t count) {
  if (count == 0 || count > rows_ - done_ || (count % block_rows_ != 0 && done_ + count != rows_))
    throw std::logic_error("MatrixEncoder: blocks must be whole panels, in order, up to the row count");
  block_ = allocate_matrix(count, cols_, out_.dtype, out_.layout);
  encode_values(block_, values, count, cols_, row_scale_);
  measure_matrix(block_, values, count, cols_, row_scale_, &signal_, &noise_);
  out_.max_abs_error = std::max(out_.max_abs_error, block_.max_abs_error);
  out_.scales.insert(out_.scales.end(), block_.scales.begin(), block_.scales.end());
  out_.row_sums.insert(out_.row_sums.end(), block_.row_sums.begin(), block_.row_sums.end());
  out_.block_scales.insert(out_.block_scales.end(), block_.block_scales.begin(), block_.block_scales.end());
  done_ += count;
  out_.streamed_bytes += block_.data.size();
  return block_.data;
}

EncodedMatrix MatrixEncoder::finish() {
  if (done_ != rows_) throw std::logic_error("MatrixEncoder: rows left unencoded");
  out_.snr_db = snr_db(signal_, noise_);
  return std::move(out_);
}

std::vector<float> decode_matrix(const EncodedMatrix& m, size_t rows, size_t cols) {
  std::vector<float> out(rows * cols);
  const detail::Matrix v = as_matrix(m, rows, cols);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      float& dst = out[r * cols + c];
      switch (m.dtype) {
        case DType::kInt8: dst = static_cast<float>(v.quantized(r, c)) * m.scales[r]; break;
        case DType::kInt4: dst = static_cast<float>(v.scaled_int4(r, c)) * m.scales[r]; break;
        case DType::kF16: {
          uint16_t h;
          std::memcpy(&h, &m.data[2 * v.index(r, c)], 2);
          dst = kernels::half_to_float(h);
          break;
        }
        case DType::kF32: std::memcpy(&dst, &m.data[4 * v.index(r, c)], 4); break;
      }
    }
  }
  return out;
}

}  // namespace petrel::convert
