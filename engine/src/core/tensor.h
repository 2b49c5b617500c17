// The engine's compute view of a tensor: element types and their storage traits, the
// byte layouts the kernels stream, and Matrix, a typed view of a 2-D weight. Kernels,
// layers, the file-format binder and the converter's packer all include this; it knows
// nothing of the file format.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/checked.h"
#include "petrel/types.h"

namespace petrel::detail {

// Byte order of a matrix (schema/petrel.fbs, Layout): row-major, or panels of
// kPanelRows rows in the order the matmul kernels stream them.
enum class Layout { kRowMajor, kPanel16 };
constexpr size_t kPanelRows = 16;
constexpr size_t kInt8Group = 4;    // int8 panels interleave groups of 4 columns
constexpr size_t kInt4Group = 8;    // int4 panels: groups of 8 columns in 4 bytes
constexpr size_t kInt4Block = 32;   // int4: columns sharing one u8 block scale
constexpr int32_t kInt4Offset = 8;  // an int4 value q in [-7, 7] is stored as the nibble q + 8
// int4 panels: a panel's blocks come in groups of this many, each group's nibbles (4 x 256
// bytes) followed by their u8 block scales (4 x 16 bytes), so a GEMV reads one stream.
constexpr size_t kInt4ScaleGroup = 4;
constexpr size_t kInt4PanelBlockBytes = kPanelRows * kInt4Block / 2;  // one block of one panel's nibbles

// How each element type is stored, as ggml's type traits: one table that the
// loader's size checks, Matrix indexing, the gathers and the converter's packer
// all read, instead of assuming whole bytes per element.
//
// int4 (symmetric, 4.31 bits per weight for k = 512; bench/README.md, "4-bit weights"):
// value = (nibble - 8) x block_scale x row_scale with block_scale a u8 per row and
// 32 columns and row_scale an f32 per row. In every group of 8 columns (4 bytes),
// byte j holds column j in its low nibble and column j + 4 in its high nibble, so
// one mask and one shift turn 4 bytes into two runs of 4 int8 columns — the groups
// the int8 dot products (vpdpbusd, sdot) consume. Row-major int4 keeps its block scales
// in a side array; Panel16 int4 keeps them inside the panels (Matrix::int4_panel_bytes),
// beside the nibbles they scale: a decoder step's GEMV then reads one sequential stream
// instead of two (format 1.10; bench/README, "int4 in one stream").
struct TypeTraits {
  DType dtype;
  uint32_t bits;          // per stored element
  size_t block;           // columns sharing one block scale; 1: no block scales
  size_t panel_run;       // Panel16: consecutive columns of one row stored side by side
  size_t packed_cols;     // Panel16: stored columns are a multiple of this (zero padded)
  size_t row_major_cols;  // RowMajor: the same
  bool row_scales;        // one f32 per row (value = q x scale)
  bool packed_row_sums;   // Panel16: one int32 per row, the sum of its values (int8: u8 x s8 kernels)
};

inline const TypeTraits& traits(DType d) {
  static const TypeTraits kF32{DType::kF32, 32, 1, 1, 1, 1, false, false};
  static const TypeTraits kF16{DType::kF16, 16, 1, 1, 1, 1, false, false};
  static const TypeTraits kInt8{DType::kInt8, 8, 1, kInt8Group, kInt8Group, 1, true, true};
  static const TypeTraits kInt4{DType::kInt4, 4, kInt4Block, kInt4Group, kInt4Block, kInt4Block, true, false};
  switch (d) {
    case DType::kF16: return kF16;
    case DType::kInt8: return kInt8;
    case DType::kInt4: return kInt4;
    default: return kF32;
  }
}

inline size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }
// Bytes per element of whole-byte types (f32, f16, int8): KV caches and vectors.
inline size_t dtype_size(DType d) { return traits(d).bits / 8; }

// The bytes a [rows][cols] matrix of `dtype` in `layout` occupies, with overflow
// checks (the loader calls this with a file's shapes). Side arrays are separate
// blobs in the file.
struct StoredSize {
  uint64_t rows = 0, cols = 0;  // as stored: padded to whole panels / column groups
  uint64_t data = 0;            // bytes of values
  uint64_t row_scales = 0;      // f32 per row (rows as given, not padded)
  uint64_t row_sums = 0;        // int32 per row
  uint64_t block_scales = 0;    // u8 per stored row and block (row-major int4; Panel16 int4 holds them in data)
};
inline bool stored_size(DType dtype, Layout layout, uint64_t rows, uint64_t cols, StoredSize* out) {
  const TypeTraits& t = traits(dtype);
  const bool packed = layout == Layout::kPanel16;
  auto padded = [](uint64_t n, uint64_t m, uint64_t* r) { return checked_mul(n / m + (n % m != 0), m, r); };
  StoredSize s;
  if (!padded(rows, packed ? kPanelRows : 1, &s.rows) || !padded(cols, packed ? t.packed_cols : t.row_major_cols, &s.cols))
    return false;
  uint64_t bits = 0;
  if (!checked_mul(s.rows, s.cols, &bits) || !checked_mul(bits, t.bits, &bits)) return false;
  s.data = bits / 8;  // whole bytes: int4 columns are padded to a multiple of 32
  if (t.row_scales && !checked_mul(rows, 4, &s.row_scales)) return false;
  if (t.packed_row_sums && packed && !checked_mul(rows, 4, &s.row_sums)) return false;
  if (t.block > 1) {
    uint64_t block_scales = 0;
    if (!checked_mul(s.rows, s.cols / t.block, &block_scales)) return false;
    if (!packed) s.block_scales = block_scales;
    else if (!checked_add(s.data, block_scales, &s.data)) return false;  // inside the panels
  }
  *out = s;
  return true;
}

// A [rows][cols] matrix. Quantized rows carry one f32 scale each; int8 panels also the
// sum of each row's values, int4 rows a u8 scale per block of 32 columns.
struct Matrix {
  DType dtype = DType::kF32;
  Layout layout = Layout::kRowMajor;
  size_t rows = 0, cols = 0;
  const void* data = nullptr;
  const float* scales = nullptr;          // int8, int4
  const int32_t* row_sums = nullptr;      // int8 Panel16 only
  const uint8_t* block_scales = nullptr;  // row-major int4 only (block_scale_index); Panel16: in data
  // Int8: quantize the activations this matrix multiplies with this one scale (q =
  // clamp(round(x / s), -127, 127)) instead of each row's max |x| / 127; 0: per row.
  float activation_scale = 0;

  bool present() const { return data != nullptr; }
  const TypeTraits& traits() const { return detail::traits(dtype); }
  bool packed() const { return layout == Layout::kPanel16; }
  // Columns as stored (padded: see TypeTraits).
  size_t stored_cols() const {
    return round_up(cols, packed() ? traits().packed_cols : traits().row_major_cols);
  }
  size_t stored_rows() const { return packed() ? round_up(rows, kPanelRows) : rows; }
  // Block scales per stored row (int4).
  size_t blocks() const { return traits().block > 1 ? stored_cols() / traits().block : 0; }
  // Bytes holding `elements` consecutive stored elements (a whole number: runs and
  // rows always start and end on a byte). Never elements x bits: with a 32-bit size_t
  // (armv7, wasm32) that overflows from 2^27 f32 elements, a 512 MB embedding table.
  size_t bytes(size_t elements) const {
    const size_t bits = traits().bits;
    return bits >= 8 ? elements * (bits / 8) : elements / (8 / bits);
  }
  // How many consecutive elements of a row are stored side by side: the whole
  // (stored) row when row-major; a group of columns (int8 4, int4 8) or one wider
  // element in a panel. Copying a row takes stored_cols() / row_run() runs.
  size_t row_run() const { return packed() ? traits().panel_run : stored_cols(); }
  // Panel16 int4: the bytes of one panel, its nibbles and block scales; of its group of
  // blocks holding block b, the offset in the panel; and the offset of b's 16 scales.
  bool int4_panels() const { return dtype == DType::kInt4 && packed(); }
  size_t int4_panel_bytes() const { return kPanelRows * stored_cols() / 2 + kPanelRows * blocks(); }
  size_t int4_block_offset(size_t b) const {
    return b / kInt4ScaleGroup * kInt4ScaleGroup * (kInt4PanelBlockBytes + kPanelRows) +
           b % kInt4ScaleGroup * kInt4PanelBlockBytes;
  }
  size_t int4_scales_offset(size_t b) const {
    const size_t group_start = b / kInt4ScaleGroup * kInt4ScaleGroup;
    const size_t in_group = std::min(kInt4ScaleGroup, blocks() - group_start);
    return int4_block_offset(group_start) + in_group * kInt4PanelBlockBytes + b % kInt4ScaleGroup * kPanelRows;
  }
  // Bytes before stored row `first` (a panel's first row when packed).
  size_t row_offset_bytes(size_t first) const {
    return int4_panels() ? first / kPanelRows * int4_panel_bytes() : bytes(first * stored_cols());
  }
  // Rows [first, first + count) as a matrix of their own; `first` must start a
  // panel when packed.
  Matrix row_slice(size_t first, size_t count) const {
    Matrix s = *this;
    s.rows = count;
    s.data = static_cast<const uint8_t*>(data) + row_offset_bytes(first);
    if (scales) s.scales = scales + first;
    if (row_sums) s.row_sums = row_sums + first;
    if (block_scales) s.block_scales = block_scales + first * blocks();
    return s;
  }
  // Index of element (r, c) in the stored array, in elements (int4: nibbles; nibble
  // i is the low half of byte i / 2 when i is even).
  size_t index(size_t r, size_t c) const {
    const size_t k = stored_cols(), run = row_run();
    // int4: column c % 8 of its group sits in nibble 2 (c % 4) + (c % 8) / 4.
    const size_t within = dtype == DType::kInt4 ? c / kInt4Group * kInt4Group + 2 * (c % 4) + c % kInt4Group / 4 : c;
    if (!packed()) return r * k + within;
    const size_t panel = r / kPanelRows, lane = r % kPanelRows;
    if (int4_panels())  // nibbles: twice the byte offsets
      return 2 * (panel * int4_panel_bytes() + int4_block_offset(c / kInt4Block)) +
             (c % kInt4Block / run) * kPanelRows * run + lane * run + within % run;
    return panel * kPanelRows * k + (c / run) * kPanelRows * run + lane * run + within % run;
  }
  // Index of row r's scale for block b in block_scales (row-major int4).
  size_t block_scale_index(size_t r, size_t b) const { return r * blocks() + b; }
  // Row r's u8 scale of block b (int4).
  uint8_t block_scale(size_t r, size_t b) const {
    if (!packed()) return block_scales[block_scale_index(r, b)];
    const size_t panel = r / kPanelRows, lane = r % kPanelRows;
    return static_cast<const uint8_t*>(data)[panel * int4_panel_bytes() + int4_scales_offset(b) + lane];
  }
  // Calls visit(c, index(r, c)) for each column c of row r in order, stepping from run
  // to run instead of dividing per element: the reference kernels' inner loops (the
  // scalar path runs them on every weight of every step).
  template <typename Visit>
  void for_each_in_row(size_t r, Visit&& visit) const {
    const size_t run = row_run(), step = packed() ? kPanelRows * run : run;
    size_t start = index(r, 0);
    for (size_t c0 = 0; c0 < cols; c0 += run, start += step) {
      if (int4_panels() && c0 % kInt4Block == 0) start = index(r, c0);  // past a group's scales

      for (size_t o = 0; o < run && c0 + o < cols; ++o)  // int4: the nibble order of index()
        visit(c0 + o, start + (dtype == DType::kInt4 ? (o & ~size_t{7}) + 2 * (o & 3) + (o >> 2 & 1) : o));
    }
  }
  // The stored integer of an int8 or int4 element at index i (int4: nibble - 8).
  int32_t quantized_at(size_t i) const {
    if (dtype == DType::kInt8) return static_cast<const int8_t*>(data)[i];
    const uint8_t byte = static_cast<const uint8_t*>(data)[i / 2];
    return static_cast<int32_t>(i % 2 ? byte >> 4 : byte & 0x0F) - kInt4Offset;
  }
  int32_t quantized(size_t r, size_t c) const { return quantized_at(index(r, c)); }
  // int4: q x block scale, an exact integer (|q| <= 8, scale <= 255).
  int32_t scaled_int4(size_t r, size_t c) const {
    return quantized(r, c) * int32_t{block_scale(r, c / kInt4Block)};
  }
};

}  // namespace petrel::detail
