// ARMv8.2 dot product (sdot): built with +dotprod in this file only and chosen at
// run time where the OS reports it (getauxval), so a Cortex-A53 never runs it.
#include <arm_neon.h>

#include <xsimd/xsimd.hpp>

#include "kernels/half.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"

namespace petrel::kernels::dotprod {
namespace {

using Arch = xsimd::neon64;
constexpr size_t kGemmRows = 4, kGemmPanels = 1, kGemvPanels = 2;

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

}  // namespace
}  // namespace petrel::kernels::dotprod

#define PETREL_SIMD_NAMESPACE dotprod
#define PETREL_SIMD_NAME "dotprod"
#include "kernels/simd/simd_kernels.inc"

namespace petrel::kernels {
const KernelTable& dotprod_table() { return dotprod::table(); }
}  // namespace petrel::kernels
