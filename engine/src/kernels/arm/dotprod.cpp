// ARMv8.2 dot product (sdot): built with +dotprod in this file only and chosen at
// run time where the OS reports it (getauxval), so a Cortex-A53 never runs it.
#include <arm_neon.h>

#include <xsimd/xsimd.hpp>

#include "kernels/half.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"

namespace petrel::kernels::dotprod {
namespace {

namespace vec = xsimd;

using Arch = xsimd::neon64;
constexpr size_t kGemmRows = 4, kGemmPanels = 1, kGemvPanels = 2;
constexpr size_t kInt4GemmRows = 4, kInt4GemmPanels = 1, kInt4GemvPanels = 2;

#include "kernels/arm/neon_loads.inc"

struct Int8Ops {
  static constexpr bool kUnsigned = false;
  template <size_t MR, size_t NR>
  static void dot(const uint8_t* acts, size_t kp, const int8_t* panels, size_t panel_bytes, int32_t* acc) {
    int32x4_t c[MR][NR * 4];
    for (size_t i = 0; i < MR; ++i)
      for (size_t j = 0; j < NR * 4; ++j) c[i][j] = vdupq_n_s32(0);
    for (size_t g = 0; g < kp; g += 4) {
      int8x16_t w[NR * 4];
      for (size_t p = 0; p < NR; ++p)
        for (size_t q = 0; q < 4; ++q) w[p * 4 + q] = vld1q_s8(panels + p * panel_bytes + g * 16 + q * 16);
      for (size_t i = 0; i < MR; ++i) {
        int32_t four;
        std::memcpy(&four, acts + i * kp + g, 4);
        const int8x16_t a = vreinterpretq_s8_s32(vdupq_n_s32(four));
        for (size_t j = 0; j < NR * 4; ++j) c[i][j] = vdotq_s32(c[i][j], w[j], a);
      }
    }
    for (size_t i = 0; i < MR; ++i)
      for (size_t j = 0; j < NR * 4; ++j) vst1q_s32(acc + i * NR * 16 + j * 4, c[i][j]);
  }
};

struct Int4Ops {
  // d = init + one block (32 columns) of nibble x activation products: sdot of each
  // row's 4 low nibbles (columns 0-3 of a group) and 4 high nibbles (4-7).
  template <size_t MR, size_t NR>
  static void block(const int8_t* acts, size_t stride, const uint8_t* panels, size_t panel_bytes, const int32_t* init,
                    xsimd::batch<int32_t, Arch>* d) {
    int32x4_t c[MR][NR * 4];
    for (size_t i = 0; i < MR; ++i)
      for (size_t j = 0; j < NR * 4; ++j) c[i][j] = vdupq_n_s32(init[i]);
    for (size_t g = 0; g < 4; ++g) {
      int8x16_t wl[NR * 4], wh[NR * 4];
      for (size_t p = 0; p < NR; ++p)
        for (size_t q = 0; q < 4; ++q) unpack_int4(panels + p * panel_bytes + g * 64 + q * 16, &wl[p * 4 + q], &wh[p * 4 + q]);
      for (size_t i = 0; i < MR; ++i) {
        int32_t a0, a1;
        std::memcpy(&a0, acts + i * stride + g * 8, 4);
        std::memcpy(&a1, acts + i * stride + g * 8 + 4, 4);
        const int8x16_t b0 = vreinterpretq_s8_s32(vdupq_n_s32(a0)), b1 = vreinterpretq_s8_s32(vdupq_n_s32(a1));
        for (size_t j = 0; j < NR * 4; ++j) c[i][j] = vdotq_s32(vdotq_s32(c[i][j], wl[j], b0), wh[j], b1);
      }
    }
    for (size_t i = 0; i < MR; ++i)
      for (size_t j = 0; j < NR * 4; ++j) d[i * NR * 4 + j] = c[i][j];
  }
};

}  // namespace
}  // namespace petrel::kernels::dotprod

#define PETREL_SIMD_NAMESPACE dotprod
#define PETREL_SIMD_NAME "dotprod"
#include "kernels/simd/simd_kernels.inc"

namespace petrel::kernels {
const KernelTable& dotprod_table() { return dotprod::table(); }
}  // namespace petrel::kernels
