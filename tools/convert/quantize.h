// Encodes f32 matrices into the stored dtypes and measures what it cost.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "format/weights.h"
#include "petrel/model.h"

namespace petrel::convert {

// round(x) half away from zero (as std::lround) clamped to [-limit, limit], for |limit|
// < 2^23. Inline and branch-free: the int4 scale search rounds every value once per
// candidate scale (32 per block), and a libm call per value was most of a conversion.
inline int32_t round_clamped(float x, int32_t limit) {
  const float bound = static_cast<float>(limit) + 1.0f;  // beyond it every x rounds past limit
  x = std::min(bound, std::max(-bound, x));
  const auto toward_zero = static_cast<int32_t>(x);
  const float fraction = x - static_cast<float>(toward_zero);  // exact
  const int32_t q = toward_zero + (fraction >= 0.5f) - (fraction <= -0.5f);
  return std::min(limit, std::max(-limit, q));
}

struct EncodedMatrix {
  DType dtype = DType::kF32;
  detail::Layout layout = detail::Layout::kRowMajor;
  std::vector<uint8_t> data;
  std::vector<float> scales;          // int8, int4: one per row
  std::vector<int32_t> row_sums;      // int8 Panel16: sum of each row's int8 values
  std::vector<uint8_t> block_scales;  // int4: one per stored row and block (Matrix::block_scale_index)
  double max_abs_error = 0;   // against `values` x row_scale
  double snr_db = 0;          // +inf when exact
  float activation_scale = 0;  // int8: a static scale for the layer's input (Tensor.activation_scale); 0: none
  uint64_t streamed_bytes = 0;  // MatrixEncoder: the stored values' bytes, handed out by block (data is empty)
  // Bytes of the data and every side array.
  uint64_t bytes() const {
    return data.size() + streamed_bytes + (scales.size() + row_sums.size()) * 4 + block_scales.size();
  }
};

// Encodes values[rows][cols]. The stored matrix represents values x row_scale (the
// embed_scale fold: ARCHITECTURE.md, "Where each fold happens"):
// * int8: q = round(v / s) with s = max|row| / 127; the stored scale is s x row_scale.
// * int4: per row s = max|row| / (7 x 255), per block of 32 columns a u8 scale b
//   (searched near max|block| / (7 s) for the smallest squared error), q = round(v /
//   (b s)) in [-7, 7]; the stored row scale is s x row_scale.
// * f32/f16 store the pre-multiplied values.
// With `layout` Panel16 the bytes are ordered for the matmul kernels (detail::traits).
EncodedMatrix encode_matrix(const std::vector<float>& values, size_t rows, size_t cols, DType dtype,
                            float row_scale = 1.0f, detail::Layout layout = detail::Layout::kRowMajor);

// encode_matrix a block of rows at a time, so that a table larger than memory allows
// is never held as f32 whole: the converter reads a block, encodes it and writes its
// bytes out before reading the next. Blocks start at panel boundaries, so each block's
// stored bytes are the next stretch of the whole matrix's (detail::Matrix::row_slice);
// the side arrays (one scale per row, ...) and the error statistics are accumulated
// in row order, so the result is bit for bit encode_matrix's.
class MatrixEncoder {
 public:
  // Values per block (1 MB of f32): small against any table worth streaming, large
  // enough that a block's overhead does not count.
  static constexpr size_t kBlockValues = size_t{1} << 18;

  MatrixEncoder(size_t rows, size_t cols, DType dtype, float row_scale, detail::Layout layout,
                size_t block_values = kBlockValues);
  // Rows per block: a whole number of panels near block_values values (at least one panel).
  size_t block_rows() const { return block_rows_; }
  // Encodes the next `count` rows (values[count][cols]): block_rows() of them, fewer only
  // for the last block. Returns their stored bytes, valid until the next call.
  const std::vector<uint8_t>& encode_rows(const float* values, size_t count);
  // The side arrays and the error once every row is encoded; `data` stays empty (the
  // bytes were handed out by encode_rows).
  EncodedMatrix finish();

 private:
  size_t rows_, cols_, block_rows_, done_ = 0;
  float row_scale_;
  EncodedMatrix out_;     // side arrays and error so far
  EncodedMatrix block_;   // the current block
  double signal_ = 0, noise_ = 0;
};

// int8 values already quantized (q[rows][cols], e.g. a Marian intgemm8 item), stored as
// they are: every row's scale is scale x row_scale. No requantization, so no error.
EncodedMatrix encode_quantized_int8(const std::vector<int8_t>& q, size_t rows, size_t cols, float scale,
                                    float row_scale = 1.0f, detail::Layout layout = detail::Layout::kRowMajor);

// The engine's view of an encoded matrix (pointing into `m`, which must outlive it).
detail::Matrix as_matrix(const EncodedMatrix& m, size_t rows, size_t cols);

// Decodes an encoded matrix back to f32 (for error reports and tests), exactly as the
// kernels dequantize: int8 q x scale, int4 float(q x block scale) x row scale.
std::vector<float> decode_matrix(const EncodedMatrix& m, size_t rows, size_t cols);

}  // namespace petrel::convert
