// The float operations every kernel path computes bit for bit alike, so that the element-wise
// and row kernels give one answer on every device (the scalar reference, AVX2, AVX-512, NEON,
// SIMD128): sums in one fixed order, and e^x and erf(x) built from +, -, x, / and exponent
// bits only, none fused (the build has -ffp-contract=off) and none from the C library, whose
// expf and erff differ between glibc, emscripten's musl and xsimd's own.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace petrel::kernels::canonical {
// Internal to each file that includes it: the per-ISA kernel files compile these with their
// own instruction sets, and a weak (inline) copy of theirs could be linked into callers on
// CPUs without them (tools/check_isa_objects.py).
namespace {

// A sum's order: kLanes interleaved partial sums (lane l adds elements l, l + 16, ... of the
// first n / 16 x 16, from 0, in element order), reduced in halves (lane l plus lane l + 8,
// then + 4, + 2, + 1), then the remaining elements added one by one. A SIMD path holds the
// lanes in 16 / W vectors; 16 is the widest vector (AVX-512's), so every path's loop is whole
// vectors.
constexpr size_t kLanes = 16;

inline float reduce_lanes(float* lanes) {
  for (size_t w = kLanes / 2; w >= 1; w /= 2)
    for (size_t i = 0; i < w; ++i) lanes[i] += lanes[i + w];
  return lanes[0];
}

// The sum of term(i) for i < n in the order above.
template <class Term>
float sum(size_t n, Term&& term) {
  float lanes[kLanes] = {};
  const size_t whole = n / kLanes * kLanes;
  for (size_t i = 0; i < whole; i += kLanes)
    for (size_t l = 0; l < kLanes; ++l) lanes[l] += term(i + l);
  float total = reduce_lanes(lanes);
  for (size_t i = whole; i < n; ++i) total += term(i);
  return total;
}

// The element operations exp and erf need, for T = float (ScalarOps) or a SIMD vector (each
// path's VectorOps in simd_kernels.inc): splat, min and max (a > b ? a : b), round (to nearest,
// ties to even), div (IEEE's correctly rounded quotient), pow2 (2^k for an integral k in
// [-126, 127], from exponent bits), abs, and
// lanewise choices: below(x, lo, yes, no) = x < lo ? yes : no, above likewise with >,
// unless_nan(x, y) = x if x is NaN, else y.
struct ScalarOps {
  static float splat(float v) { return v; }
  static float min(float a, float b) { return a < b ? a : b; }
  static float max(float a, float b) { return a > b ? a : b; }
  static float round(float a) { return std::nearbyint(a); }
  static float div(float a, float b) { return a / b; }
  static float pow2(float k) {
    const int32_t bits = (static_cast<int32_t>(k) + 127) * (int32_t{1} << 23);
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  static float abs(float a) { return std::fabs(a); }
  static float below(float x, float lo, float yes, float no) { return x < lo ? yes : no; }
  static float above(float x, float hi, float yes, float no) { return x > hi ? yes : no; }
  static float unless_nan(float x, float y) { return x == x ? y : x; }
};

// e^x: Cody-Waite reduction x = k ln 2 + r (|r| <= ln2 / 2), a degree-6 polynomial for e^r
// (Cephes' expf coefficients) and 2^k assembled in the exponent bits. Within 2 ulp of expf;
// 0 below ln(FLT_MIN) (-inf included), NaN kept, inf above 88.37 (about 127.5 ln 2: 2^k must
// fit the exponent bits; e^x there is within 2^0.5 of FLT_MAX).
template <class Ops, class T>
T exp(T x) {
  const T lo = Ops::splat(-87.33654f), hi = Ops::splat(88.37f);
  const T clamped = Ops::min(Ops::max(x, lo), hi);
  const T k = Ops::round(clamped * Ops::splat(1.44269504088896341f));
  T r = clamped - k * Ops::splat(0.693359375f);
  r = r - k * Ops::splat(-2.12194440e-4f);
  T p = Ops::splat(1.9875691500e-4f);
  p = p * r + Ops::splat(1.3981999507e-3f);
  p = p * r + Ops::splat(8.3334519073e-3f);
  p = p * r + Ops::splat(4.1665795894e-2f);
  p = p * r + Ops::splat(1.6666665459e-1f);
  p = p * r + Ops::splat(5.0000001201e-1f);
  p = p * (r * r) + r + Ops::splat(1.0f);
  T y = p * Ops::pow2(k);
  y = Ops::below(x, lo, Ops::splat(0.0f), y);
  y = Ops::above(x, hi, Ops::splat(INFINITY), y);
  return Ops::unless_nan(x, y);
}

// erf(x) = sign(x) (1 - erfc(|x|)), erfc by the Chebyshev fit of Numerical Recipes (erfcc:
// fractional error below 1.2e-7 in exact arithmetic). In floats within 3.2e-7 of erff
// (absolute; near 0 relatively worse: erf(1e-8) = 0), which GELU, x (1 + erf) / 2, does not see.
template <class Ops, class T>
T erf(T x) {
  const T z = Ops::abs(x);
  const T t = Ops::div(Ops::splat(1.0f), Ops::splat(1.0f) + Ops::splat(0.5f) * z);
  T p = Ops::splat(0.17087277f);
  p = p * t + Ops::splat(-0.82215223f);
  p = p * t + Ops::splat(1.48851587f);
  p = p * t + Ops::splat(-1.13520398f);
  p = p * t + Ops::splat(0.27886807f);
  p = p * t + Ops::splat(-0.18628806f);
  p = p * t + Ops::splat(0.09678418f);
  p = p * t + Ops::splat(0.37409196f);
  p = p * t + Ops::splat(1.00002368f);
  p = p * t + Ops::splat(-1.26551223f);
  const T erfc = t * exp<Ops>(p - z * z);
  const T magnitude = Ops::splat(1.0f) - erfc;
  return Ops::below(x, Ops::splat(0.0f), Ops::splat(0.0f) - magnitude, magnitude);
}

// The activations and the SSRU gate, written once for both kinds of T.
template <class Ops, class T>
T swish(T x) {
  return Ops::div(x, Ops::splat(1.0f) + exp<Ops>(Ops::splat(0.0f) - x));
}
// PyTorch's gelu(x, approximate="tanh") = x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
// computed as x / (1 + exp(-2u)) (the same function: (1 + tanh(u)) / 2 = sigmoid(2u)).
template <class Ops, class T>
T gelu_tanh(T x) {
  const T two_u = Ops::splat(1.5957691216057308f) * (x + Ops::splat(0.044715f) * x * x * x);  // 2 sqrt(2/pi)
  return Ops::div(x, Ops::splat(1.0f) + exp<Ops>(Ops::splat(0.0f) - two_u));
}
// Exact (erf) GELU, as PyTorch's default.
template <class Ops, class T>
T gelu(T x) {
  return Ops::splat(0.5f) * x * (Ops::splat(1.0f) + erf<Ops>(x * Ops::splat(0.70710678118654752f)));
}
template <class Ops, class T>
T sigmoid(T x) {
  return Ops::div(Ops::splat(1.0f), Ops::splat(1.0f) + exp<Ops>(Ops::splat(0.0f) - x));
}

// log of a positive float sum: the C library's double log, rounded once to float (its error,
// below 1 ulp of a double, moves the float result only for an argument within 2^-29 of a
// rounding boundary).
inline float log(float x) { return static_cast<float>(std::log(static_cast<double>(x))); }

}  // namespace
}  // namespace petrel::kernels::canonical
