// NEON (armv7 hard-float and aarch64 baseline): int8 products with vmull_s8 and
// pairwise accumulation (vpadal), for cores without the dot-product extension; int4
// products with vmlal_s8 into int16 over a block.
#include <arm_neon.h>

#include <xsimd/xsimd.hpp>

#include "kernels/half.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"

namespace petrel::kernels::neon {
namespace {

namespace vec = xsimd;

#if defined(__aarch64__)
using Arch = xsimd::neon64;
#else
using Arch = xsimd::neon;
#endif
constexpr size_t kGemmRows = 2, kGemmPanels = 1, kGemvPanels = 2, kFloatGemvPanels = 2;
constexpr size_t kInt4GemmRows = 2, kInt4GemmPanels = 1, kInt4GemvPanels = 2, kInt4OneStreamGemvPanels = 2;

#include "kernels/arm/neon_loads.inc"

struct Int8Ops {
  static constexpr bool kUnsigned = false;
  template <size_t MR, size_t NR>
  static void dot(const uint8_t* acts, size_t kp, const int8_t* panels, size_t panel_bytes, int32_t* acc) {
    // Per 4 outputs: lo holds pair sums of outputs 0-1, hi of outputs 2-3.
    int32x4_t lo[MR][NR * 4], hi[MR][NR * 4];
    for (size_t i = 0; i < MR; ++i)
      for (size_t j = 0; j < NR * 4; ++j) lo[i][j] = hi[i][j] = vdupq_n_s32(0);
    for (size_t g = 0; g < kp; g += 4) {
      int8x16_t w[NR * 4];
      for (size_t p = 0; p < NR; ++p)
        for (size_t q = 0; q < 4; ++q) w[p * 4 + q] = vld1q_s8(panels + p * panel_bytes + g * 16 + q * 16);
      for (size_t i = 0; i < MR; ++i) {
        int32_t four;
        std::memcpy(&four, acts + i * kp + g, 4);
        const int8x8_t a = vreinterpret_s8_s32(vdup_n_s32(four));
        for (size_t j = 0; j < NR * 4; ++j) {
          lo[i][j] = vpadalq_s16(lo[i][j], vmull_s8(vget_low_s8(w[j]), a));
          hi[i][j] = vpadalq_s16(hi[i][j], vmull_s8(vget_high_s8(w[j]), a));
        }
      }
    }
    for (size_t i = 0; i < MR; ++i)
      for (size_t j = 0; j < NR * 4; ++j) {
        const int32x2_t o01 = vpadd_s32(vget_low_s32(lo[i][j]), vget_high_s32(lo[i][j]));
        const int32x2_t o23 = vpadd_s32(vget_low_s32(hi[i][j]), vget_high_s32(hi[i][j]));
        vst1q_s32(acc + i * NR * 16 + j * 4, vcombine_s32(o01, o23));
      }
  }
};

struct Int4Ops {
  // d = init + one block (32 columns) of nibble x activation products, 4 outputs per
  // vector. Products (at most 15 x 127) are accumulated in int16 with vmlal_s8: a lane
  // takes 8 of them per block (4 groups, low and high nibbles), at most 15240.
  template <size_t MR, size_t NR>
  static void block(const int8_t* acts, size_t stride, const uint8_t* panels, size_t panel_bytes, const int32_t* init,
                    xsimd::batch<int32_t, Arch>* d) {
    // Per 4 outputs: lo holds the column products of outputs 0-1, hi of outputs 2-3.
    int16x8_t lo[MR][NR * 4], hi[MR][NR * 4];
    for (size_t i = 0; i < MR; ++i)
      for (size_t j = 0; j < NR * 4; ++j) lo[i][j] = hi[i][j] = vdupq_n_s16(0);
    for (size_t g = 0; g < 4; ++g) {
      int8x16_t wl[NR * 4], wh[NR * 4];
      for (size_t p = 0; p < NR; ++p)
        for (size_t q = 0; q < 4; ++q) unpack_int4(panels + p * panel_bytes + g * 64 + q * 16, &wl[p * 4 + q], &wh[p * 4 + q]);
      for (size_t i = 0; i < MR; ++i) {
        int32_t a0, a1;
        std::memcpy(&a0, acts + i * stride + g * 8, 4);
        std::memcpy(&a1, acts + i * stride + g * 8 + 4, 4);
        const int8x8_t b0 = vreinterpret_s8_s32(vdup_n_s32(a0)), b1 = vreinterpret_s8_s32(vdup_n_s32(a1));
        for (size_t j = 0; j < NR * 4; ++j) {
          lo[i][j] = vmlal_s8(vmlal_s8(lo[i][j], vget_low_s8(wl[j]), b0), vget_low_s8(wh[j]), b1);
          hi[i][j] = vmlal_s8(vmlal_s8(hi[i][j], vget_high_s8(wl[j]), b0), vget_high_s8(wh[j]), b1);
        }
      }
    }
    for (size_t i = 0; i < MR; ++i)
      for (size_t j = 0; j < NR * 4; ++j) {
        const int32x4_t pl = vpaddlq_s16(lo[i][j]), ph = vpaddlq_s16(hi[i][j]);
#if defined(__aarch64__)
        const int32x4_t sums = vpaddq_s32(pl, ph);
#else
        const int32x4_t sums = vcombine_s32(vpadd_s32(vget_low_s32(pl), vget_high_s32(pl)),
                                            vpadd_s32(vget_low_s32(ph), vget_high_s32(ph)));
#endif
        d[i * NR * 4 + j] = vaddq_s32(sums, vdupq_n_s32(init[i]));
      }
  }
};

}  // namespace
}  // namespace petrel::kernels::neon

#define PETREL_SIMD_NAMESPACE neon
#define PETREL_SIMD_NAME "neon"
#include "kernels/simd/simd_kernels.inc"

namespace petrel::kernels {
const KernelTable& neon_table() { return neon::table(); }
}  // namespace petrel::kernels
