// WebAssembly SIMD128 (single-threaded; the whole wasm build has -msimd128): int8
// products by widening to int16 and i32x4.dot_i16x8_s (pmaddwd once the runtime
// compiles it for x86; smull + addp on ARM), exact as every int8 product here; int4
// products the same way on the unpacked nibbles. Relaxed SIMD's int8 dot product is
// not used: emscripten 3.1.6's headers and clang have no intrinsic for it, Node 20
// needs a flag for it, and its result for operands above 127 depends on the CPU.
#include <wasm_simd128.h>

#include <cstring>

#include "kernels/half.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/wasm/simd128_vec.h"

namespace petrel::kernels::simd128 {
namespace {

using Arch = vec::wasm_simd128;
using F = vec::batch<float, Arch>;
// One row and one panel at a time: the runtime's code generator keeps 16 registers
// (x86-64's xmm), and wider blocks spill: measured (petrel-bench, Firefox-tiny stand-in,
// Node 20) 2 rows x 1 panel 12% slower at batch 32, 4 x 1 and 2 x 2 50% slower. An int8
// dot product takes two pmaddwd per 16 products whatever the blocking.
constexpr size_t kGemmRows = 1, kGemmPanels = 1, kGemvPanels = 1, kFloatGemvPanels = 1;
constexpr size_t kInt4GemmRows = 2, kInt4GemmPanels = 1, kInt4GemvPanels = 2, kInt4OneStreamGemvPanels = 2;

// 4 bytes splatted to every 32-bit lane.
v128_t splat4(const void* p) {
  int32_t four;
  std::memcpy(&four, p, 4);
  return wasm_i32x4_splat(four);
}

F load_i8(const int8_t* p) {
  return wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(wasm_i16x8_extend_low_i8x16(splat4(p))));
}

F load_u8(const uint8_t* p) {
  return wasm_f32x4_convert_u32x4(wasm_u32x4_extend_low_u16x8(wasm_u16x8_extend_low_u8x16(splat4(p))));
}

// Halves to floats by their bits: the exponent and mantissa shifted into place and
// multiplied by 2^112 rebias normal and subnormal halves exactly; infinities and NaNs
// get the float's all-ones exponent.
F load_f16(const uint16_t* p) {
  const v128_t h = wasm_u32x4_extend_low_u16x8(wasm_v128_load64_zero(p));
  const v128_t magnitude = wasm_v128_and(h, wasm_i32x4_splat(0x7FFF));
  const v128_t shifted = wasm_i32x4_shl(magnitude, 13);
  const v128_t finite = wasm_f32x4_mul(shifted, wasm_i32x4_splat(0x77800000));  // 2^112
  const v128_t special = wasm_v128_or(shifted, wasm_i32x4_splat(0x7F800000));
  const v128_t is_special = wasm_i32x4_ge(magnitude, wasm_i32x4_splat(0x7C00));
  const v128_t value = wasm_v128_bitselect(special, finite, is_special);
  return wasm_v128_or(value, wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16));
}

// Round to nearest even lane by lane (the half KV cache's stores; not a hot loop).
void store_f16(F x, uint16_t* p) {
  alignas(16) float f[4];
  x.store_aligned(f);
  for (size_t i = 0; i < 4; ++i) p[i] = float_to_half(f[i]);
}

void store_i8(vec::batch<int32_t, Arch> x, int8_t* p) {  // saturating
  const v128_t halves = wasm_i16x8_narrow_i32x4(x.data, x.data);
  const int32_t four = wasm_i32x4_extract_lane(wasm_i8x16_narrow_i16x8(halves, halves), 0);
  std::memcpy(p, &four, 4);
}

// Lane i = the sum of a[i]'s 4 lanes in canonical.h's order ((l0 + l2) + (l1 + l3)).
F row_sums(const F* a) {
  const v128_t s01 = wasm_f32x4_add(wasm_i32x4_shuffle(a[0], a[1], 0, 1, 4, 5), wasm_i32x4_shuffle(a[0], a[1], 2, 3, 6, 7));
  const v128_t s23 = wasm_f32x4_add(wasm_i32x4_shuffle(a[2], a[3], 0, 1, 4, 5), wasm_i32x4_shuffle(a[2], a[3], 2, 3, 6, 7));
  return wasm_f32x4_add(wasm_i32x4_shuffle(s01, s23, 0, 2, 4, 6), wasm_i32x4_shuffle(s01, s23, 1, 3, 5, 7));
}

// lo holds pair sums of outputs 0-1 (lanes 0-1, 2-3), hi of outputs 2-3: the 4 outputs.
v128_t pair_sums(v128_t lo, v128_t hi) {
  return wasm_i32x4_add(wasm_i32x4_shuffle(lo, hi, 0, 2, 4, 6), wasm_i32x4_shuffle(lo, hi, 1, 3, 5, 7));
}

struct Int8Ops {
  static constexpr bool kUnsigned = false;
  // Each 16-byte vector of a panel holds 4 outputs x 4 columns; its halves widened to
  // int16 meet the row's 4 activations (widened, repeated) in dot_i16x8.
  template <size_t MR, size_t NR>
  static void dot(const uint8_t* acts, size_t kp, const int8_t* panels, size_t panel_bytes, int32_t* acc) {
    v128_t lo[MR][NR * 4], hi[MR][NR * 4];
    for (size_t i = 0; i < MR; ++i)
      for (size_t j = 0; j < NR * 4; ++j) lo[i][j] = hi[i][j] = wasm_i32x4_splat(0);
    for (size_t g = 0; g < kp; g += 4) {
      v128_t wl[NR * 4], wh[NR * 4];
      for (size_t p = 0; p < NR; ++p)
        for (size_t q = 0; q < 4; ++q) {
          const v128_t w = wasm_v128_load(panels + p * panel_bytes + g * 16 + q * 16);
          wl[p * 4 + q] = wasm_i16x8_extend_low_i8x16(w);
          wh[p * 4 + q] = wasm_i16x8_extend_high_i8x16(w);
        }
      for (size_t i = 0; i < MR; ++i) {
        const v128_t a = wasm_i16x8_extend_low_i8x16(splat4(acts + i * kp + g));
        for (size_t j = 0; j < NR * 4; ++j) {
          lo[i][j] = wasm_i32x4_add(lo[i][j], wasm_i32x4_dot_i16x8(wl[j], a));
          hi[i][j] = wasm_i32x4_add(hi[i][j], wasm_i32x4_dot_i16x8(wh[j], a));
        }
      }
    }
    for (size_t i = 0; i < MR; ++i)
      for (size_t j = 0; j < NR * 4; ++j) wasm_v128_store(acc + i * NR * 16 + j * 4, pair_sums(lo[i][j], hi[i][j]));
  }
};

struct Int4Ops {
  // d = init + one block (32 columns) of nibble x activation products, 4 outputs per
  // vector: per group of 8 columns, each row's byte holds columns j (low nibble) and
  // j + 4 (high), met by the activations of columns 0-3 and 4-7.
  template <size_t MR, size_t NR>
  static void block(const int8_t* acts, size_t stride, const uint8_t* panels, size_t panel_bytes, const int32_t* init,
                    vec::batch<int32_t, Arch>* d) {
    v128_t lo[MR][NR * 4], hi[MR][NR * 4];
    for (size_t i = 0; i < MR; ++i)
      for (size_t j = 0; j < NR * 4; ++j) lo[i][j] = hi[i][j] = wasm_i32x4_splat(0);
    const v128_t low_nibbles = wasm_i8x16_splat(0x0F);
    for (size_t g = 0; g < 4; ++g) {
      v128_t w0l[NR * 4], w0h[NR * 4], w1l[NR * 4], w1h[NR * 4];  // columns 0-3 / 4-7, outputs 0-1 / 2-3
      for (size_t p = 0; p < NR; ++p)
        for (size_t q = 0; q < 4; ++q) {
          const v128_t v = wasm_v128_load(panels + p * panel_bytes + g * 64 + q * 16);
          const v128_t first = wasm_v128_and(v, low_nibbles), second = wasm_u8x16_shr(v, 4);
          w0l[p * 4 + q] = wasm_u16x8_extend_low_u8x16(first);
          w0h[p * 4 + q] = wasm_u16x8_extend_high_u8x16(first);
          w1l[p * 4 + q] = wasm_u16x8_extend_low_u8x16(second);
          w1h[p * 4 + q] = wasm_u16x8_extend_high_u8x16(second);
        }
      for (size_t i = 0; i < MR; ++i) {
        const v128_t a0 = wasm_i16x8_extend_low_i8x16(splat4(acts + i * stride + g * 8));
        const v128_t a1 = wasm_i16x8_extend_low_i8x16(splat4(acts + i * stride + g * 8 + 4));
        for (size_t j = 0; j < NR * 4; ++j) {
          lo[i][j] = wasm_i32x4_add(lo[i][j], wasm_i32x4_add(wasm_i32x4_dot_i16x8(w0l[j], a0), wasm_i32x4_dot_i16x8(w1l[j], a1)));
          hi[i][j] = wasm_i32x4_add(hi[i][j], wasm_i32x4_add(wasm_i32x4_dot_i16x8(w0h[j], a0), wasm_i32x4_dot_i16x8(w1h[j], a1)));
        }
      }
    }
    for (size_t i = 0; i < MR; ++i)
      for (size_t j = 0; j < NR * 4; ++j)
        d[i * NR * 4 + j] = wasm_i32x4_add(pair_sums(lo[i][j], hi[i][j]), wasm_i32x4_splat(init[i]));
  }
};

}  // namespace
}  // namespace petrel::kernels::simd128

#define PETREL_SIMD_NAMESPACE simd128
#define PETREL_SIMD_NAME "simd128"
#include "kernels/simd/simd_kernels.inc"

namespace petrel::kernels {
const KernelTable& simd128_table() { return simd128::table(); }
}  // namespace petrel::kernels
