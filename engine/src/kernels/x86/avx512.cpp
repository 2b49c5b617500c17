// AVX-512 (F/BW/DQ/VL) with VNNI: int8 products with vpdpbusd (u8 x s8, the
// activations shifted by +128 and corrected by the converter's row sums); int4
// products with vpdpbusd too, the unsigned nibbles as the u8 side.
#include <immintrin.h>

#include <xsimd/xsimd.hpp>

#include "kernels/half.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/x86/prefetch.h"

namespace petrel::kernels::avx512 {
namespace {

using Arch = xsimd::avx512bw;

// xsimd 8.1 has no AVX-512 fma: its generic x * y + z, under the project's
// -ffp-contract=off, compiles to a multiply and an add, two passes through the FMA pipes
// and two roundings. The kernels' vec::fma is the fused instruction here, as xsimd's is on
// AVX2 and NEON (f32 GEMM 1.4-1.5x faster, bench/EXPERIMENTS.md "Fused multiply-add on AVX-512").
// Everything else is xsimd's.
namespace vec {
using namespace xsimd;
inline batch<float, Arch> fma(batch<float, Arch> x, batch<float, Arch> y, batch<float, Arch> z) {
  return _mm512_fmadd_ps(x, y, z);
}
}  // namespace vec

// An int8 GEMV reads 8 panels side by side on Intel: 8 streams keep one core's DRAM reads
// busier than 4 (Gemma-3-shaped int8 steps from memory ~5% faster, bench/README
// "Decoder-only"); in cache the same within noise. On AMD one panel at a time
// (x86::vendor_gemv_order), int4 too: with 512-bit products its kernel keeps up with one
// stream of memory. f32 keeps 4 (8 was slower in cache).
constexpr size_t kGemmRows = 8, kGemmPanels = 2, kGemvPanels = 8, kFloatGemvPanels = 4;
constexpr size_t kInt4GemmRows = 4, kInt4GemmPanels = 2, kInt4GemvPanels = 4, kInt4OneStreamGemvPanels = 1;

xsimd::batch<float, Arch> load_i8(const int8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
xsimd::batch<float, Arch> load_u8(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
xsimd::batch<float, Arch> load_f16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
void store_f16(xsimd::batch<float, Arch> x, uint16_t* p) {  // round to nearest even
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}
void store_i8(xsimd::batch<int32_t, Arch> x, int8_t* p) {  // saturating
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtsepi32_epi8(x));
}
// Lane i = the sum of a[i]'s 16 lanes in canonical.h's order (lane l + lane l + 8, then + 4,
// + 2, + 1): four levels of folds (31 shuffles for 16 sums, where 16 separate reductions take ~100).
xsimd::batch<float, Arch> row_sums(const xsimd::batch<float, Arch>* a) {
  // 16 -> 8: b[i] holds 8 partial sums of a[2i] (128-bit chunks 0-1) and of a[2i+1] (2-3).
  __m512 b[8];
  for (int i = 0; i < 8; ++i)
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
  // 8 -> 4: chunk j of c[i] holds 4 partial sums of a[4i + j].
  __m512 c[4];
  for (int i = 0; i < 4; ++i)
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xDD));
  // 4 -> 2 -> 1 within chunks: element m of chunk j ends as the sum of a[4m + j].
  const __m512 d0 = _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], 0x44), _mm512_shuffle_ps(c[0], c[1], 0xEE));
  const __m512 d1 = _mm512_add_ps(_mm512_shuffle_ps(c[2], c[3], 0x44), _mm512_shuffle_ps(c[2], c[3], 0xEE));
  const __m512 e = _mm512_add_ps(_mm512_shuffle_ps(d0, d1, 0x88), _mm512_shuffle_ps(d0, d1, 0xDD));
  // Lane i takes the sum of a[i] from element i / 4 of chunk i % 4.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(order, e);
}

struct Int8Ops {
  static constexpr bool kUnsigned = true;
  // acc[MR][NR * 16] = sum over k of acts[r][k] (u8) x panel[p][k][16] (s8)
  template <size_t MR, size_t NR>
  static void dot(const uint8_t* acts, size_t kp, const int8_t* panels, size_t panel_bytes, int32_t* acc) {
    if constexpr (NR == 1) {  // one panel (AMD's order; its tail): two chains of sums per row,
      // even and odd groups of 4 columns, so vpdpbusd's latency does not bind the loop (the
      // GEMV in cache 1.25x faster on Zen 4, bench/EXPERIMENTS.md "AVX-512 on AMD"); exact integers
      __m512i even[MR], odd[MR];
      for (size_t i = 0; i < MR; ++i) even[i] = odd[i] = _mm512_setzero_si512();
      size_t g = 0;
      for (; g + 8 <= kp; g += 8) {
        const __m512i w0 = _mm512_loadu_si512(panels + g * 16), w1 = _mm512_loadu_si512(panels + (g + 4) * 16);
        for (size_t i = 0; i < MR; ++i) {
          int32_t a0, a1;
          std::memcpy(&a0, acts + i * kp + g, 4);
          std::memcpy(&a1, acts + i * kp + g + 4, 4);
          even[i] = _mm512_dpbusd_epi32(even[i], _mm512_set1_epi32(a0), w0);
          odd[i] = _mm512_dpbusd_epi32(odd[i], _mm512_set1_epi32(a1), w1);
        }
      }
      if (g < kp) {
        const __m512i w0 = _mm512_loadu_si512(panels + g * 16);
        for (size_t i = 0; i < MR; ++i) {
          int32_t a0;
          std::memcpy(&a0, acts + i * kp + g, 4);
          even[i] = _mm512_dpbusd_epi32(even[i], _mm512_set1_epi32(a0), w0);
        }
      }
      for (size_t i = 0; i < MR; ++i) _mm512_store_si512(acc + i * 16, _mm512_add_epi32(even[i], odd[i]));
      return;
    }
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

struct Int4Ops {
  // d[MR][NR] = init[r] + sum over one block (32 columns) of nibble x acts[r][k] for the
  // 16 outputs of each panel. A 64-byte group holds 8 columns of 16 rows: its low
  // nibbles are columns 0-3 and its high nibbles 4-7, each lane's 4 bytes one vpdpbusd
  // operand (u8 nibble x s8 activation). The high nibbles are used in place (byte & 0xF0
  // = 16 x nibble, still a u8) and their sums divided by 16 once per block, exactly (each
  // is 16 x an integer): one instruction less per 64 bytes than shifting every byte.
  template <size_t MR, size_t NR>
  static void block(const int8_t* acts, size_t stride, const uint8_t* panels, size_t panel_bytes, const int32_t* init,
                    xsimd::batch<int32_t, Arch>* d) {
    __m512i c[MR][NR], high_sums[MR][NR];
    for (size_t i = 0; i < MR; ++i)
      for (size_t p = 0; p < NR; ++p) {
        c[i][p] = _mm512_set1_epi32(init[i]);
        high_sums[i][p] = _mm512_setzero_si512();
      }
    const __m512i low = _mm512_set1_epi8(0x0F);
    // A block is 256 bytes of each panel. One panel (AMD's GEMV order) is one sequential
    // stream, which the hardware prefetchers follow best alone (bench/EXPERIMENTS.md, "AVX-512 on AMD").
    if constexpr (NR > 1) x86::prefetch_next_panels<NR, true>(panels, panel_bytes, 4);
    for (size_t g = 0; g < 4; ++g) {
      __m512i lo[NR], hi[NR];
      for (size_t p = 0; p < NR; ++p) {
        const __m512i v = _mm512_loadu_si512(panels + p * panel_bytes + g * 64);
        lo[p] = _mm512_and_si512(v, low);
        hi[p] = _mm512_andnot_si512(low, v);
      }
      for (size_t i = 0; i < MR; ++i) {
        int32_t a0, a1;
        std::memcpy(&a0, acts + i * stride + g * 8, 4);
        std::memcpy(&a1, acts + i * stride + g * 8 + 4, 4);
        const __m512i b0 = _mm512_set1_epi32(a0), b1 = _mm512_set1_epi32(a1);
        for (size_t p = 0; p < NR; ++p) {
          c[i][p] = _mm512_dpbusd_epi32(c[i][p], lo[p], b0);
          high_sums[i][p] = _mm512_dpbusd_epi32(high_sums[i][p], hi[p], b1);
        }
      }
    }
    for (size_t i = 0; i < MR; ++i)
      for (size_t p = 0; p < NR; ++p) d[i * NR + p] = _mm512_add_epi32(c[i][p], _mm512_srai_epi32(high_sums[i][p], 4));
  }
};

}  // namespace
}  // namespace petrel::kernels::avx512

#define PETREL_SIMD_NAMESPACE avx512
#define PETREL_SIMD_NAME "avx512"
#include "kernels/simd/simd_kernels.inc"

namespace petrel::kernels {
const KernelTable& avx512_table() { return avx512_table(x86::vendor_gemv_order()); }
const KernelTable& avx512_table(GemvOrder order) {
  return order == GemvOrder::kOnePanelAtATime ? avx512::table<GemvOrder::kOnePanelAtATime>() : avx512::table();
}
}  // namespace petrel::kernels
