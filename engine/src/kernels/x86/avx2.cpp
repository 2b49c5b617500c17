// AVX2 + FMA + F16C: int8 products with vpmaddubsw on |a| x sign(w, a), exact
// because weights and activations are limited to [-127, 127]; int4 products with
// vpmaddubsw on the unsigned nibbles x activations directly.
#include <immintrin.h>

#include <xsimd/xsimd.hpp>

#include "kernels/half.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/x86/prefetch.h"

namespace petrel::kernels::avx2 {
namespace {

namespace vec = xsimd;

using Arch = xsimd::fma3<xsimd::avx2>;
constexpr size_t kGemmRows = 4, kGemmPanels = 1, kGemvPanels = 2, kFloatGemvPanels = 2;
// int4 GEMVs read two panels in either order: the kernel is ALU-bound near the memory's
// speed, and one panel at a time was slower on AMD too (bench/EXPERIMENTS.md, "AVX-512 on AMD").
constexpr size_t kInt4GemmRows = 4, kInt4GemmPanels = 1, kInt4GemvPanels = 2, kInt4OneStreamGemvPanels = 2;

#include "kernels/x86/avx2_shared.inc"

// An empty asm that "changes" x: the compiler can no longer reassociate the additions
// before it with those after it, and keeps x in a register between them.
inline void kept_in_order(__m256i& x) { __asm__("" : "+x"(x)); }

struct Int8Ops {
  static constexpr bool kUnsigned = false;
  // |a| x sign(w, a): vpmaddubsw's pairs stay below 2^15 as both sides are within
  // [-127, 127]; vpmaddwd adds the pairs.
  template <size_t MR, size_t NR>
  static void dot(const uint8_t* acts, size_t kp, const int8_t* panels, size_t panel_bytes, int32_t* acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    int8_dot<MR, NR>(acts, kp, panels, panel_bytes, acc, [ones](__m256i c, __m256i a, __m256i w) {
      const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(a, a), _mm256_sign_epi8(w, a));
      return _mm256_add_epi32(c, _mm256_madd_epi16(pairs, ones));
    });
  }
};

struct Int4Ops {
  // As avx512.cpp's, with vpmaddubsw (u8 nibble x s8 activation, pairs summed to int16):
  // a pair is at most 2 x 15 x 127 = 3810, so a block's 8 pair sums (4 groups, low and
  // high nibbles) stay below 2^15 in int16 before one vpmaddwd widens them.
  template <size_t MR, size_t NR>
  static void block(const int8_t* acts, size_t stride, const uint8_t* panels, size_t panel_bytes, const int32_t* init,
                    xsimd::batch<int32_t, Arch>* d) {
    __m256i c[MR][NR * 2];
    for (size_t i = 0; i < MR; ++i)
      for (size_t j = 0; j < NR * 2; ++j) c[i][j] = _mm256_setzero_si256();
    const __m256i low = _mm256_set1_epi8(0x0F);
    x86::prefetch_next_panels<NR, true>(panels, panel_bytes, 4);  // a block is 256 bytes of each panel
    // Each vector is unpacked and used at once, and each sum is added in order: AVX2 has 16
    // registers, and gcc 12 otherwise reassociates a block's 16 products per sum into a
    // tree (the sums start at 0) and spills them. In order, the GEMV runs 1.25x faster in
    // cache and from memory (bench/EXPERIMENTS.md, "AVX2 int4 without spills").
    for (size_t g = 0; g < 4; ++g) {
      __m256i b0[MR], b1[MR];
      for (size_t i = 0; i < MR; ++i) {
        int32_t a0, a1;
        std::memcpy(&a0, acts + i * stride + g * 8, 4);
        std::memcpy(&a1, acts + i * stride + g * 8 + 4, 4);
        b0[i] = _mm256_set1_epi32(a0);
        b1[i] = _mm256_set1_epi32(a1);
      }
      for (size_t p = 0; p < NR; ++p)
        for (size_t h = 0; h < 2; ++h) {
          const __m256i v =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panels + p * panel_bytes + g * 64 + h * 32));
          const __m256i lo = _mm256_and_si256(v, low), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
          for (size_t i = 0; i < MR; ++i)
            c[i][2 * p + h] = _mm256_add_epi16(c[i][2 * p + h], _mm256_add_epi16(_mm256_maddubs_epi16(lo, b0[i]),
                                                                                _mm256_maddubs_epi16(hi, b1[i])));
          for (size_t i = 0; i < MR; ++i) kept_in_order(c[i][2 * p + h]);
        }
    }
    const __m256i ones = _mm256_set1_epi16(1);
    for (size_t i = 0; i < MR; ++i)
      for (size_t j = 0; j < NR * 2; ++j)
        d[i * NR * 2 + j] = _mm256_add_epi32(_mm256_madd_epi16(c[i][j], ones), _mm256_set1_epi32(init[i]));
  }
};

}  // namespace
}  // namespace petrel::kernels::avx2

#define PETREL_SIMD_NAMESPACE avx2
#define PETREL_SIMD_NAME "avx2"
#include "kernels/simd/simd_kernels.inc"

namespace petrel::kernels {
const KernelTable& avx2_table() { return avx2_table(x86::vendor_gemv_order()); }
const KernelTable& avx2_table(GemvOrder order) {
  return order == GemvOrder::kOnePanelAtATime ? avx2::table<GemvOrder::kOnePanelAtATime>() : avx2::table();
}
}  // namespace petrel::kernels
