// ARMv8.6 int8 matrix multiply (smmla): built with +dotprod+i8mm in this file only and
// chosen at run time where the OS reports both (getauxval), so a Cortex-A76 never runs it.
// smmla multiplies a 2x8 by an 8x2 int8 matrix into a 2x2 int32 tile: 32 products per
// instruction, twice sdot's, where two rows share each weight vector. It takes the
// GEMM blocks (pairs of rows: encoder, prefill, batched and beam steps); single rows
// (GEMV, the batch-1 decoder step) keep dotprod's sdot code, compiled here too. The
// blocking and its instruction counts: bench/README.md, "i8mm".
#include <arm_neon.h>

#include <xsimd/xsimd.hpp>

#include "kernels/half.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"

namespace petrel::kernels::i8mm {
namespace {

namespace vec = xsimd;

using Arch = xsimd::neon64;
constexpr size_t kGemmRows = 4, kGemmPanels = 1, kGemvPanels = 2, kFloatGemvPanels = 2;
constexpr size_t kInt4GemmRows = 4, kInt4GemmPanels = 1, kInt4GemvPanels = 2, kInt4OneStreamGemvPanels = 2;

#include "kernels/arm/neon_loads.inc"
#include "kernels/arm/sdot_ops.inc"

// smmla's operands. Its left operand is two rows of 8 int8 (row-major); its right one is
// two columns of 8 int8, stored like rows: here two outputs' weights for the same 8
// columns. A tile c[2 rows][2 outputs] of int32 is [r0·o0, r0·o1, r1·o0, r1·o1].

// Rows p and p + stride, 8 columns each.
int8x16_t load_row_pair(const int8_t* p, size_t stride) { return vcombine_s8(vld1_s8(p), vld1_s8(p + stride)); }

// The same for a last run of 4 columns (stored int8 rows are a multiple of 4, not of 8):
// each row's 4 values twice; the weights' zeros for the other 4 columns cancel them.
int8x16_t load_row_pair_4(const int8_t* p, size_t stride) {
  int32_t r0, r1;
  std::memcpy(&r0, p, 4);
  std::memcpy(&r1, p + stride, 4);
  return vreinterpretq_s8_s32(vcombine_s32(vdup_n_s32(r0), vdup_n_s32(r1)));
}

// Panel16 weights hold 4 columns of each of 4 outputs per 16 bytes (int8: one group; int4:
// a group's low or high nibbles). Two such vectors for the same outputs, columns c..c+3
// (lo) and c+4..c+7 (hi), zipped by 32-bit lanes: outputs 0-1 and 2-3, 8 columns each.
void pair_outputs(int8x16_t lo, int8x16_t hi, int8x16_t* b01, int8x16_t* b23) {
  *b01 = vreinterpretq_s8_s32(vzip1q_s32(vreinterpretq_s32_s8(lo), vreinterpretq_s32_s8(hi)));
  *b23 = vreinterpretq_s8_s32(vzip2q_s32(vreinterpretq_s32_s8(lo), vreinterpretq_s32_s8(hi)));
}

// c[i][j] += rows (2i, 2i+1) x outputs (2j, 2j+1) over 8 columns.
template <size_t P, size_t J>
void mmla(int32x4_t (&c)[P][J], const int8x16_t (&a)[P], const int8x16_t (&b)[J]) {
  for (size_t i = 0; i < P; ++i)
    for (size_t j = 0; j < J; ++j) c[i][j] = vmmlaq_s32(c[i][j], a[i], b[j]);
}

// Tiles of outputs (4v, 4v+1) and (4v+2, 4v+3) of a row pair as the rows' vectors of
// outputs 4v..4v+3.
void split_rows(int32x4_t t01, int32x4_t t23, int32x4_t* row0, int32x4_t* row1) {
  *row0 = vreinterpretq_s32_s64(vzip1q_s64(vreinterpretq_s64_s32(t01), vreinterpretq_s64_s32(t23)));
  *row1 = vreinterpretq_s32_s64(vzip2q_s64(vreinterpretq_s64_s32(t01), vreinterpretq_s64_s32(t23)));
}

// Activations and weights are both signed (kUnsigned false, as dotprod): smmla is
// s8 x s8, so the integer sums are the reference's.
struct Int8Ops {
  static constexpr bool kUnsigned = false;
  template <size_t MR, size_t NR>
  static void dot(const uint8_t* acts_bytes, size_t kp, const int8_t* panels, size_t panel_bytes, int32_t* acc) {
    if constexpr (MR % 2 != 0) {
      SdotInt8Ops::dot<MR, NR>(acts_bytes, kp, panels, panel_bytes, acc);
    } else {
      constexpr size_t P = MR / 2, J = NR * 8;  // row pairs, output pairs
      const auto* acts = reinterpret_cast<const int8_t*>(acts_bytes);
      int32x4_t c[P][J];
      for (auto& row : c)
        for (auto& t : row) t = vdupq_n_s32(0);
      int8x16_t a[P], b[J];
      size_t g = 0;
      for (; g + 8 <= kp; g += 8) {  // two groups of 4 columns
        for (size_t p = 0; p < NR; ++p)
          for (size_t q = 0; q < 4; ++q) {
            const int8_t* w = panels + p * panel_bytes + g * 16 + q * 16;
            pair_outputs(vld1q_s8(w), vld1q_s8(w + 64), &b[p * 8 + q * 2], &b[p * 8 + q * 2 + 1]);
          }
        for (size_t i = 0; i < P; ++i) a[i] = load_row_pair(acts + 2 * i * kp + g, kp);
        mmla(c, a, b);
      }
      if (g < kp) {  // a last group of 4 columns
        for (size_t p = 0; p < NR; ++p)
          for (size_t q = 0; q < 4; ++q)
            pair_outputs(vld1q_s8(panels + p * panel_bytes + g * 16 + q * 16), vdupq_n_s8(0), &b[p * 8 + q * 2],
                         &b[p * 8 + q * 2 + 1]);
        for (size_t i = 0; i < P; ++i) a[i] = load_row_pair_4(acts + 2 * i * kp + g, kp);
        mmla(c, a, b);
      }
      for (size_t i = 0; i < P; ++i)
        for (size_t v = 0; v < NR * 4; ++v) {
          int32x4_t row0, row1;
          split_rows(c[i][2 * v], c[i][2 * v + 1], &row0, &row1);
          vst1q_s32(acc + (2 * i) * NR * 16 + v * 4, row0);
          vst1q_s32(acc + (2 * i + 1) * NR * 16 + v * 4, row1);
        }
    }
  }
};

struct Int4Ops {
  // d = init + one block (32 columns) of nibble x activation products: per group of 8
  // columns, the low nibbles (columns 0-3) and high nibbles (4-7) of each output zipped
  // into its 8 columns, then smmla with the row pairs' same 8 columns.
  template <size_t MR, size_t NR>
  static void block(const int8_t* acts, size_t stride, const uint8_t* panels, size_t panel_bytes, const int32_t* init,
                    xsimd::batch<int32_t, Arch>* d) {
    if constexpr (MR % 2 != 0) {
      SdotInt4Ops::block<MR, NR>(acts, stride, panels, panel_bytes, init, d);
    } else {
      constexpr size_t P = MR / 2, J = NR * 8;
      int32x4_t c[P][J];
      for (size_t i = 0; i < P; ++i) {
        const int32x4_t start = vcombine_s32(vdup_n_s32(init[2 * i]), vdup_n_s32(init[2 * i + 1]));
        for (auto& t : c[i]) t = start;
      }
      int8x16_t a[P], b[J];
      for (size_t g = 0; g < 4; ++g) {
        for (size_t p = 0; p < NR; ++p)
          for (size_t q = 0; q < 4; ++q) {
            int8x16_t low, high;
            unpack_int4(panels + p * panel_bytes + g * 64 + q * 16, &low, &high);
            pair_outputs(low, high, &b[p * 8 + q * 2], &b[p * 8 + q * 2 + 1]);
          }
        for (size_t i = 0; i < P; ++i) a[i] = load_row_pair(acts + 2 * i * stride + g * 8, stride);
        mmla(c, a, b);
      }
      for (size_t i = 0; i < P; ++i)
        for (size_t v = 0; v < NR * 4; ++v) {
          int32x4_t row0, row1;
          split_rows(c[i][2 * v], c[i][2 * v + 1], &row0, &row1);
          d[(2 * i) * NR * 4 + v] = row0;
          d[(2 * i + 1) * NR * 4 + v] = row1;
        }
    }
  }
};

}  // namespace
}  // namespace petrel::kernels::i8mm

#define PETREL_SIMD_NAMESPACE i8mm
#define PETREL_SIMD_NAME "i8mm"
#include "kernels/simd/simd_kernels.inc"

namespace petrel::kernels {
const KernelTable& i8mm_table() { return i8mm::table(); }
}  // namespace petrel::kernels
