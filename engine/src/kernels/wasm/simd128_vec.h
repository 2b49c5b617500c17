// The part of xsimd's API that kernels/simd/simd_kernels.inc uses, written on
// wasm_simd128.h: xsimd 8.1 has no WebAssembly backend. Float and int32 batches of 4
// lanes, their arithmetic and comparisons, and the float functions the kernels call
// (nearbyint, bitwise_cast, ...; exp and erf are canonical.h's). Semantics follow xsimd's x86 backend where the two
// could differ: max/min return the second operand when either is NaN (as maxps/minps,
// so a ReLU of NaN is 0 as in the scalar reference), casts to int32 truncate.
// Included only by kernels/wasm/simd128.cpp (compiled with -msimd128).
#pragma once

#include <wasm_simd128.h>

#include <cstddef>
#include <cstdint>

namespace petrel::kernels::simd128::vec {

struct wasm_simd128 {};  // the architecture tag

template <class T, class A>
struct batch;

template <class T, class A>
struct batch_bool {
  v128_t data;
};

template <class A>
struct batch<float, A> {
  static constexpr size_t size = 4;
  v128_t data;

  batch() = default;
  batch(v128_t v) : data(v) {}  // NOLINT: a register converts, as xsimd's batches do
  batch(float x) : data(wasm_f32x4_splat(x)) {}  // NOLINT: a broadcast, as in xsimd
  operator v128_t() const { return data; }

  static batch load_unaligned(const float* p) { return wasm_v128_load(p); }
  static batch load_aligned(const float* p) { return wasm_v128_load(p); }
  void store_unaligned(float* p) const { wasm_v128_store(p, data); }
  void store_aligned(float* p) const { wasm_v128_store(p, data); }

  friend batch operator+(batch a, batch b) { return wasm_f32x4_add(a.data, b.data); }
  friend batch operator-(batch a, batch b) { return wasm_f32x4_sub(a.data, b.data); }
  friend batch operator*(batch a, batch b) { return wasm_f32x4_mul(a.data, b.data); }
  friend batch operator/(batch a, batch b) { return wasm_f32x4_div(a.data, b.data); }
  friend batch operator-(batch a) { return wasm_f32x4_neg(a.data); }
  friend batch_bool<float, A> operator>(batch a, batch b) { return {wasm_f32x4_gt(a.data, b.data)}; }
  friend batch_bool<float, A> operator<(batch a, batch b) { return {wasm_f32x4_lt(a.data, b.data)}; }
  friend batch_bool<float, A> operator==(batch a, batch b) { return {wasm_f32x4_eq(a.data, b.data)}; }
  batch& operator+=(batch b) { return *this = *this + b; }
  batch& operator-=(batch b) { return *this = *this - b; }
  batch& operator*=(batch b) { return *this = *this * b; }
};

template <class A>
struct batch<int32_t, A> {
  static constexpr size_t size = 4;
  v128_t data;

  batch() = default;
  batch(v128_t v) : data(v) {}  // NOLINT
  batch(int32_t x) : data(wasm_i32x4_splat(x)) {}  // NOLINT
  operator v128_t() const { return data; }

  static batch load_unaligned(const int32_t* p) { return wasm_v128_load(p); }
  static batch load_aligned(const int32_t* p) { return wasm_v128_load(p); }
  void store_unaligned(int32_t* p) const { wasm_v128_store(p, data); }
  void store_aligned(int32_t* p) const { wasm_v128_store(p, data); }

  // Wrapping, as the integer lanes of every SIMD instruction set.
  friend batch operator+(batch a, batch b) { return wasm_i32x4_add(a.data, b.data); }
  friend batch operator-(batch a, batch b) { return wasm_i32x4_sub(a.data, b.data); }
  friend batch operator*(batch a, batch b) { return wasm_i32x4_mul(a.data, b.data); }
  friend batch operator<<(batch a, int32_t bits) { return wasm_i32x4_shl(a.data, bits); }
  batch& operator+=(batch b) { return *this = *this + b; }
  batch& operator-=(batch b) { return *this = *this - b; }
};

template <class A>
bool any(batch_bool<float, A> b) {
  return wasm_v128_any_true(b.data);
}

template <class A>
batch<float, A> select(batch_bool<float, A> c, batch<float, A> yes, batch<float, A> no) {
  return wasm_v128_bitselect(yes.data, no.data, c.data);
}

// maxps(a, b) = a > b ? a : b; wasm's pmax(b, a) = b < a ? a : b: the same, NaN included.
template <class A>
batch<float, A> max(batch<float, A> a, batch<float, A> b) {
  return wasm_f32x4_pmax(b.data, a.data);
}
template <class A>
batch<float, A> min(batch<float, A> a, batch<float, A> b) {
  return wasm_f32x4_pmin(b.data, a.data);
}
template <class A>
batch<float, A> abs(batch<float, A> a) {
  return wasm_f32x4_abs(a.data);
}

// SIMD128 has no fused multiply-add (relaxed SIMD's is not in this toolchain's headers):
// two roundings, as the scalar reference.
template <class A>
batch<float, A> fma(batch<float, A> a, batch<float, A> b, batch<float, A> c) {
  return a * b + c;
}
template <class A>
batch<float, A> nearbyint(batch<float, A> a) {  // to nearest, ties to even
  return wasm_f32x4_nearest(a.data);
}
// The bits of one lane type as another (xsimd's bitwise_cast<B>).
template <class B, class A>
B bitwise_cast(batch<int32_t, A> a) {
  return B(a.data);
}

template <class To, class A>
batch<To, A> batch_cast(batch<float, A> a) {
  static_assert(sizeof(To) == 4, "float to int32");
  return wasm_i32x4_trunc_sat_f32x4(a.data);
}
template <class To, class A>
batch<To, A> batch_cast(batch<int32_t, A> a) {
  static_assert(sizeof(To) == 4, "int32 to float");
  return wasm_f32x4_convert_i32x4(a.data);
}

}  // namespace petrel::kernels::simd128::vec
