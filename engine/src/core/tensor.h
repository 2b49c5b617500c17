// The engine's compute view of a tensor: element types, the byte layouts the
// kernels stream, and Matrix, a typed view of a 2-D weight. Kernels, layers and the
// file-format binder all include this; it knows nothing of the file format.
#pragma once

#include <cstddef>
#include <cstdint>

#include "petrel/model.h"

namespace petrel::detail {

// Byte order of a matrix (schema/petrel.fbs, Layout): row-major, or panels of
// kPanelRows rows in the order the matmul kernels stream them.
enum class Layout { kRowMajor, kPanel16 };
constexpr size_t kPanelRows = 16;
constexpr size_t kInt8Group = 4;  // int8 panels interleave groups of 4 columns

inline size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }
inline size_t dtype_size(DType d) { return d == DType::kF32 ? 4 : d == DType::kF16 ? 2 : 1; }

// A [rows][cols] matrix. Int8 rows carry one f32 scale each (and, packed, the sum
// of their int8 values).
struct Matrix {
  DType dtype = DType::kF32;
  Layout layout = Layout::kRowMajor;
  size_t rows = 0, cols = 0;
  const void* data = nullptr;
  const float* scales = nullptr;     // int8 only
  const int32_t* row_sums = nullptr;  // int8 Panel16 only

  bool present() const { return data != nullptr; }
  // Columns as stored (int8 panels pad to a multiple of 4).
  size_t stored_cols() const {
    return layout == Layout::kPanel16 && dtype == DType::kInt8 ? round_up(cols, kInt8Group) : cols;
  }
  size_t element_size() const { return dtype_size(dtype); }
  // How many consecutive elements of a row are stored side by side: the whole
  // (stored) row when row-major; a group of kInt8Group int8 columns, or one wider
  // element, in a panel. Copying a row takes stored_cols() / row_run() runs.
  size_t row_run() const {
    if (layout == Layout::kRowMajor) return stored_cols();
    return dtype == DType::kInt8 ? kInt8Group : 1;
  }
  // Rows [first, first + count) as a matrix of their own; `first` must start a
  // panel when packed.
  Matrix row_slice(size_t first, size_t count) const {
    Matrix s = *this;
    s.rows = count;
    s.data = static_cast<const uint8_t*>(data) + first * stored_cols() * element_size();
    if (scales) s.scales = scales + first;
    if (row_sums) s.row_sums = row_sums + first;
    return s;
  }
  // Index of element (r, c) in the stored array.
  size_t index(size_t r, size_t c) const {
    if (layout == Layout::kRowMajor) return r * cols + c;
    const size_t panel = r / kPanelRows, lane = r % kPanelRows;
    if (dtype != DType::kInt8) return (panel * cols + c) * kPanelRows + lane;
    const size_t k = stored_cols();
    return panel * kPanelRows * k + (c / kInt8Group) * kPanelRows * kInt8Group + lane * kInt8Group + c % kInt8Group;
  }
};

}  // namespace petrel::detail
