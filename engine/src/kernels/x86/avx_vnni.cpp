// AVX-VNNI: AVX2 with the VEX-encoded vpdpbusd on 256-bit vectors (Intel cores since
// Alder Lake, including the Gracemont E-cores of N100-class edge boxes, none of which
// have AVX-512). vpdpbusd adds four u8 x s8 products into each int32 lane in one
// instruction, where AVX2 takes three (int4) or four (int8): the int8 and int4 products
// are AVX-512's (avx512.cpp) on half the width, with their own blocking below; the other
// kernels are the AVX2 path's code.
//
// No CPU this was written on has AVX-VNNI. tests/support/avx_vnni_emulated.cpp builds
// this file again with vpdpbusd computed by an exact AVX2 sequence, so that the linear
// kernel tests check its int8 and int4 products, all but that one instruction, against
// the scalar reference; its other kernels are the AVX2 path's code, tested as that path.
#include <immintrin.h>

#include <xsimd/xsimd.hpp>

#include "kernels/half.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/x86/prefetch.h"

#if defined(PETREL_AVX_VNNI_EMULATED)
#define PETREL_SIMD_NAMESPACE avx_vnni_emulated
#define PETREL_SIMD_NAME "avxvnni (vpdpbusd emulated)"
#else
#define PETREL_SIMD_NAMESPACE avx_vnni
#define PETREL_SIMD_NAME "avxvnni"
#endif

namespace petrel::kernels::PETREL_SIMD_NAMESPACE {
namespace {

namespace vec = xsimd;

using Arch = xsimd::fma3<xsimd::avx2>;
// Blocking (bench/README.md, "AVX-VNNI"; llvm-mca, not measured): a GEMM block's
// accumulators (4 rows x 2 vectors per panel) fill half of AVX2's 16 registers, as on
// AVX2. A GEMV row reads panels side by side, prefetching the next ones, the order that
// reached the DRAM floor on Intel (avx2.cpp): int8 four, as each accumulator takes one
// vpdpbusd per group of columns, whose 5-cycle latency would bind two panels' 4 chains;
// int4 two (each accumulator takes 8 per block; four panels gave the same estimate,
// with spills).
constexpr size_t kGemmRows = 4, kGemmPanels = 1, kGemvPanels = 4, kFloatGemvPanels = 2;
constexpr size_t kInt4GemmRows = 4, kInt4GemmPanels = 1, kInt4GemvPanels = 2, kInt4OneStreamGemvPanels = 2;

#include "kernels/x86/avx2_shared.inc"

// acc + the sum of 4 u8 x s8 products per int32 lane, wrapping as vpdpbusd does.
__m256i dot_accumulate(__m256i acc, __m256i u8s, __m256i s8s) {
#if defined(PETREL_AVX_VNNI_EMULATED)
  // Even and odd bytes widened to int16 (u8 by zero, s8 by sign extension); each
  // vpmaddwd adds two products (|sum| < 2^17) into an int32 lane.
  const __m256i u_even = _mm256_and_si256(u8s, _mm256_set1_epi16(0x00FF)), u_odd = _mm256_srli_epi16(u8s, 8);
  const __m256i s_even = _mm256_srai_epi16(_mm256_slli_epi16(s8s, 8), 8), s_odd = _mm256_srai_epi16(s8s, 8);
  return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(u_even, s_even), _mm256_madd_epi16(u_odd, s_odd)));
#else
  return _mm256_dpbusd_avx_epi32(acc, u8s, s8s);
#endif
}

struct Int8Ops {
  static constexpr bool kUnsigned = true;  // activations as u8 (vpdpbusd's unsigned side)
  template <size_t MR, size_t NR>
  static void dot(const uint8_t* acts, size_t kp, const int8_t* panels, size_t panel_bytes, int32_t* acc) {
    int8_dot<MR, NR>(acts, kp, panels, panel_bytes, acc,
                     [](__m256i c, __m256i a, __m256i w) { return dot_accumulate(c, a, w); });
  }
};

struct Int4Ops {
  // d[MR][NR * 2] = init[r] + sum over one block (32 columns) of nibble x acts[r][k] for
  // the 16 outputs of each panel. A 64-byte group holds 8 columns of 16 rows (rows 0-7 in
  // its first 32 bytes): its low nibbles are columns 0-3 and its high nibbles 4-7, each
  // lane's 4 bytes one vpdpbusd operand (u8 nibble x s8 activation). The high nibbles are
  // shifted down rather than used in place as AVX-512 does (16 x nibble, its sums divided
  // by 16 once per block): that needs a second set of sums, which AVX2's 16 registers do
  // not hold beside a GEMM block's.
  template <size_t MR, size_t NR>
  static void block(const int8_t* acts, size_t stride, const uint8_t* panels, size_t panel_bytes, const int32_t* init,
                    xsimd::batch<int32_t, Arch>* d) {
    __m256i c[MR][NR * 2];
    for (size_t i = 0; i < MR; ++i)
      for (size_t j = 0; j < NR * 2; ++j) c[i][j] = _mm256_set1_epi32(init[i]);
    const __m256i low = _mm256_set1_epi8(0x0F);
    // A block is 256 bytes of each panel; into L2, as every int4 kernel's (prefetch.h).
    x86::prefetch_next_panels<NR, true>(panels, panel_bytes, 4);
    for (size_t g = 0; g < 4; ++g)
      for (size_t p = 0; p < NR; ++p)
        for (size_t h = 0; h < 2; ++h) {
          const __m256i v =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panels + p * panel_bytes + g * 64 + h * 32));
          const __m256i lo = _mm256_and_si256(v, low), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
          for (size_t i = 0; i < MR; ++i) {
            int32_t a0, a1;
            std::memcpy(&a0, acts + i * stride + g * 8, 4);
            std::memcpy(&a1, acts + i * stride + g * 8 + 4, 4);
            c[i][2 * p + h] = dot_accumulate(c[i][2 * p + h], lo, _mm256_set1_epi32(a0));
            c[i][2 * p + h] = dot_accumulate(c[i][2 * p + h], hi, _mm256_set1_epi32(a1));
          }
        }
    for (size_t i = 0; i < MR; ++i)
      for (size_t j = 0; j < NR * 2; ++j) d[i * NR * 2 + j] = c[i][j];
  }
};

}  // namespace
}  // namespace petrel::kernels::PETREL_SIMD_NAMESPACE

#include "kernels/simd/simd_kernels.inc"

namespace petrel::kernels {
#if defined(PETREL_AVX_VNNI_EMULATED)
const KernelTable& avx_vnni_emulated_table() { return avx_vnni_emulated::table(); }
#else
const KernelTable& avx_vnni_table() { return avx_vnni::table(); }
#endif
}  // namespace petrel::kernels
