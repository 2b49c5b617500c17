// The engine's bound view of a model's tensors: pointers into the mapped file,
// checked by the loader so that every later read is in bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

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

struct Linear {
  Matrix weight;              // [out, in]
  const float* bias = nullptr;  // [out] or null
};

struct Norm {
  const float* gamma = nullptr;
  const float* beta = nullptr;
  bool present() const { return gamma != nullptr; }
};

struct Attention {
  Linear q, k, v, o;  // q already carries 1/sqrt(head_dim)
};

struct Layer {
  Attention self_attn;
  Norm self_attn_norm;
  Attention cross_attn;  // decoder only
  Norm cross_attn_norm;  // decoder only
  Linear fc1, fc2;
  Norm ffn_norm;
};

struct Stack {
  Matrix embed_tokens;  // [vocab, d_model], embedding scale folded in
  PositionInfo positions{};
  // [max_positions, d_model] f32: the learned table in the file, or the sinusoidal
  // table generated at load time (owned by the model).
  const float* position_table = nullptr;
  std::vector<Layer> layers;
  Norm final_norm;  // pre-LN only
};

// The file's lexical shortlist, in place (schema: Shortlist); ids checked at load.
struct Shortlist {
  const int32_t* always = nullptr;
  size_t always_size = 0;
  const uint32_t* offsets = nullptr;  // [vocab + 1], non-decreasing
  const int32_t* candidates = nullptr;
  bool present() const { return offsets != nullptr; }
};

struct ModelWeights {
  const ModelInfo* info = nullptr;
  Stack encoder, decoder;
  Matrix output_proj;  // [vocab, d_model]; the decoder table when tied
  const float* final_logits_bias = nullptr;
  Shortlist shortlist;
};

}  // namespace petrel::detail
