// AVX-512 (F/BW/DQ/VL) with VNNI: int8 products with vpdpbusd (u8 x s8, the
// activations shifted by +128 and corrected by the converter's row sums).
#include <immintrin.h>

#include <xsimd/xsimd.hpp>

#include "kernels/half.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"

namespace petrel::kernels::avx512 {
namespace {

using Arch = xsimd::avx512bw;
constexpr size_t kGemmRows = 8, kGemmPanels = 2, kGemvPanels = 4;

xsimd::batch<float, Arch> load_i8(const int8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
xsimd::batch<float, Arch> load_f16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

struct Int8Ops {
  static constexpr bool kUnsigned = true;
  // acc[MR][NR * 16] = sum over k of acts[r][k] (u8) x panel[p][k][16] (s8)
  template <size_t MR, size_t NR>
  static void dot(const uint8_t* acts, size_t kp, const int8_t* panels, size_t panel_bytes, int32_t* acc) {
    __m512i c[MR][NR];
    for (size_t i = 0; i < MR; ++i)
      for (size_t p = 0; p < NR; ++p) c[i][p] = _mm512_setzero_si512();
    for (size_t g = 0; g < kp; g += 4) {
      __m512i w[NR];
      for (size_t p = 0; p < NR; ++p) w[p] = _mm512_loadu_si512(panels + p * panel_bytes + g * 16);
      for (size_t i = 0; i < MR; ++i) {
        int32_t four;
        std::memcpy(&four, acts + i * kp + g, 4);
        const __m512i a = _mm512_set1_epi32(four);
        for (size_t p = 0; p < NR; ++p) c[i][p] = _mm512_dpbusd_epi32(c[i][p], a, w[p]);
      }
    }
    for (size_t i = 0; i < MR; ++i)
      for (size_t p = 0; p < NR; ++p) _mm512_store_si512(acc + (i * NR + p) * 16, c[i][p]);
  }
};

}  // namespace
}  // namespace petrel::kernels::avx512

#define PETREL_SIMD_NAMESPACE avx512
#define PETREL_SIMD_NAME "avx512"
#include "kernels/simd/simd_kernels.inc"

namespace petrel::kernels {
const KernelTable& avx512_table() { return avx512::table(); }
}  // namespace petrel::kernels
