// Every SIMD kernel against the scalar reference, on every kernel path this
// machine runs, on random shapes including 1, odd tails and non-multiples of the
// vector width. (Under qemu the ARM builds run the same file.)
#include <catch2/catch.hpp>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <sstream>
#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#ifndef HWCAP2_I8MM  // as kernels/isa.cpp: older sysroots' headers lack it
#define HWCAP2_I8MM (1 << 13)
#endif
#endif

#include "convert/quantize.h"
#include "kernels/half.h"
#include "kernels/isa.h"
#include "kernels/canonical.h"
#include "kernels/kernels.h"
#include "kernels/positions.h"
#include "layers/layers.h"
#include "support/test_support.h"
#include "threads/thread_pool.h"

using namespace petrel;
using namespace petrel::kernels;

namespace {

std::vector<Isa> simd_paths() {
  std::vector<Isa> out;
  for (Isa isa : runnable_isas())
    if (isa != Isa::kScalar) out.push_back(isa);
  return out;
}

#if defined(__x86_64__) || defined(_M_X64)
}  // namespace
namespace petrel::kernels {
const KernelTable& avx_vnni_emulated_table();  // tests/support/avx_vnni_emulated.cpp
}  // namespace petrel::kernels
namespace {
#endif

// The tables the linear tests compare with the reference, named for messages: every
// SIMD path's; on x86 the AVX2 and AVX-512 paths in both single-row int8 GEMV orders
// (avx2_table() and avx512_table() run the one this CPU's vendor reads fastest) and,
// where AVX2 runs, the AVX-VNNI path with its one instruction emulated.
std::vector<std::pair<std::string, const KernelTable*>> linear_tables() {
  std::vector<std::pair<std::string, const KernelTable*>> out;
  for (Isa isa : simd_paths()) out.emplace_back(isa_name(isa), table_for(isa));
#if defined(__x86_64__) || defined(_M_X64)
  // A path's table in both orders instead of the one its vendor rule picks.
  const auto in_both_orders = [&out](Isa isa, const KernelTable& (*table)(GemvOrder)) {
    const KernelTable* vendor_order = table_for(isa);
    if (!vendor_order) return;
    out.erase(std::remove_if(out.begin(), out.end(), [&](const auto& named) { return named.second == vendor_order; }),
              out.end());
    out.emplace_back(std::string(isa_name(isa)) + " (panels side by side)", &table(GemvOrder::kPanelsSideBySide));
    out.emplace_back(std::string(isa_name(isa)) + " (one panel at a time)", &table(GemvOrder::kOnePanelAtATime));
  };
  in_both_orders(Isa::kAvx2, avx2_table);
  in_both_orders(Isa::kAvx512, avx512_table);
  if (table_for(Isa::kAvx2)) out.emplace_back("avxvnni (vpdpbusd emulated)", &avx_vnni_emulated_table());
#endif
  return out;
}

std::vector<float> random_values(std::mt19937& rng, size_t n, float scale = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = test::normal_float(rng, scale);
  return v;
}

// Values as a KV cache stores them (f32, or f16 rounded as the reference rounds).
std::vector<uint8_t> stored_as(const std::vector<float>& values, DType kv) {
  std::vector<uint8_t> bytes(values.size() * detail::dtype_size(kv));
  reference::store_as(values.data(), values.size(), kv, bytes.data());
  return bytes;
}

// Rows of heads x head_dim values as an int8 KV cache stores them (the reference's bytes:
// int8_kv_row_bytes per row).
std::vector<uint8_t> stored_int8(const std::vector<float>& values, size_t heads, size_t head_dim) {
  const size_t rows = values.size() / (heads * head_dim);
  std::vector<uint8_t> bytes(rows * int8_kv_row_bytes(heads, head_dim));
  reference::store_int8_kv(values.data(), rows, heads, head_dim, bytes.data());
  return bytes;
}

// Rows of K or V as a cache of `kv` stores them: f32, f16 or int8 (with kv_heads heads).
std::vector<uint8_t> stored_rows(const std::vector<float>& values, DType kv, size_t kv_heads, size_t head_dim) {
  return kv == DType::kInt8 ? stored_int8(values, kv_heads, head_dim) : stored_as(values, kv);
}

// Element i of stored_as's bytes, as a float.
float stored_element(const std::vector<uint8_t>& bytes, DType kv, size_t i) {
  if (kv == DType::kF16) return half_to_float(reinterpret_cast<const uint16_t*>(bytes.data())[i]);
  return reinterpret_cast<const float*>(bytes.data())[i];
}

// A weight matrix encoded like the converter does, kept alive with its view.
struct TestMatrix {
  convert::EncodedMatrix encoded;
  detail::Matrix view;
  TestMatrix(const std::vector<float>& values, size_t rows, size_t cols, DType dtype, detail::Layout layout)
      : encoded(convert::encode_matrix(values, rows, cols, dtype, 1.0f, layout)),
        view(convert::as_matrix(encoded, rows, cols)) {}
};

// Scratch for a linear layer's int8 activations (kernels::QuantizedRows), sized for
// every weight type.
struct Scratch {
  std::vector<int8_t> values;
  std::vector<float> scales;
  std::vector<int32_t> block_sums;
  Scratch(size_t m, size_t k)
      : values(m * quantized_row_bytes(k)), scales(m), block_sums(m * quantized_row_bytes(k) / detail::kInt4Block) {}
  QuantizedRows rows() { return {values.data(), scales.data(), block_sums.data()}; }
};

void require_close(const std::vector<float>& got, const std::vector<float>& want, double tolerance,
                   const std::string& what) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  // One assertion per vector, not per element: a Catch assertion costs microseconds, and
  // under emulation the 800,000 of one test took most of its minute.
  auto close = [&](size_t i) {  // Approx(want).epsilon(tolerance).margin(tolerance)
    const double diff = std::fabs(double(got[i]) - double(want[i]));
    return got[i] == want[i] || diff <= tolerance || diff <= tolerance * std::fabs(double(want[i]));
  };
  size_t first_wrong = 0;
  while (first_wrong < got.size() && close(first_wrong)) ++first_wrong;
  if (first_wrong == got.size()) return;
  INFO("element " << first_wrong);
  REQUIRE(got[first_wrong] == Approx(want[first_wrong]).epsilon(tolerance).margin(tolerance));
}

const char* layout_name(detail::Layout l) { return l == detail::Layout::kPanel16 ? "panel16" : "row-major"; }

}  // namespace

TEST_CASE("kernel paths: scalar always runs and every runnable path has a table", "[kernels]") {
  auto isas = runnable_isas();
  REQUIRE(isas.front() == Isa::kScalar);
  for (Isa isa : isas) REQUIRE(table_for(isa) != nullptr);
  REQUIRE(std::string(table_for(Isa::kScalar)->isa) == "scalar");
}

// The SIMD paths implement the layout the converter writes for linear weights
// (Panel16) and hand row-major weights to the reference, whose row-major path is
// checked on its own below.
TEST_CASE("linear matches the reference for f32 f16 int8 int4 in GEMV and GEMM shapes", "[kernels]") {
  std::mt19937 rng(11);
  // Each case's data and reference once, then every path (the reference and the
  // quantizer are most of this test's time under emulation).
  for (DType dtype : {DType::kF32, DType::kF16, DType::kInt8, DType::kInt4}) {
    const detail::Layout layout = detail::Layout::kPanel16;
    for (size_t m : {1, 2, 3, 4, 5, 7, 9}) {  // AVX-512 7: tiles of 4, 2 and 1 rows
      for (size_t n : {1, 15, 16, 17, 33, 64, 70}) {
        for (size_t k : {1, 3, 4, 7, 16, 33, 64, 95}) {
          TestMatrix w(random_values(rng, n * k), n, k, dtype, layout);
          auto x = random_values(rng, m * k);
          auto bias = random_values(rng, n);
          Scratch scratch(m, k);
          std::vector<float> want(m * n);
          // Odd n: the paths run without a bias.
          reference::linear(x.data(), m, w.view, n % 2 ? nullptr : bias.data(), want.data(), n, scratch.rows());
          for (const auto& [name, simd] : linear_tables()) {
            // Rows of y 3 floats wider than n (a slice of a matrix writes into a wider
            // y): the gaps must stay as they were.
            const size_t stride = n + 3;
            std::vector<float> wide(m * stride, -7.0f), got(m * n);
            simd->linear(x.data(), m, w.view, (n % 2 ? nullptr : bias.data()), wide.data(), stride, scratch.rows());
            for (size_t i = 0; i < m; ++i) {
              std::copy_n(wide.begin() + i * stride, n, got.begin() + i * n);
              for (size_t c = n; c < stride; ++c) REQUIRE(wide[i * stride + c] == -7.0f);
            }
            // int8 sums are exact integers on every path, int4 block sums exact floats
            // added in the same order; float sums differ in order only.
            const bool quantized = dtype == DType::kInt8 || dtype == DType::kInt4;
            const double tol = quantized ? 1e-6 : 2e-5 * std::sqrt(double(k));
            require_close(got, want, tol,
                          name + " " + to_string(dtype) + " " + layout_name(layout) + " m=" + std::to_string(m) +
                              " n=" + std::to_string(n) + " k=" + std::to_string(k));
          }
        }
      }
    }
  }
}

// Wide int8 matrices are taken in chunks of panels (32 KB of weights each), every
// row tile within a chunk before the next: several chunks, every kind of row tile
// (8, 4 and single rows on AVX-512) and partial chunks and panels.
TEST_CASE("int8 linear matches the reference over many chunks of panels, in every GEMV order", "[kernels]") {
  std::mt19937 rng(29);
  for (size_t n : {1000, 7828 / 4 + 1}) {
    for (size_t k : {33, 600}) {
      TestMatrix w(random_values(rng, n * k), n, k, DType::kInt8, detail::Layout::kPanel16);
      for (size_t m : {1, 13, 32}) {
        auto x = random_values(rng, m * k), bias = random_values(rng, n);
        Scratch scratch(m, k);
        std::vector<float> want(m * n);
        reference::linear(x.data(), m, w.view, bias.data(), want.data(), n, scratch.rows());  // once: slow under qemu
        for (const auto& [name, simd] : linear_tables()) {
          std::vector<float> got(m * n, NAN);
          simd->linear(x.data(), m, w.view, bias.data(), got.data(), n, scratch.rows());
          require_close(got, want, 1e-6,
                        name + " int8 m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
        }
      }
    }
  }
}

// Transformer shapes (k = 512, 2048: 16 and 64 blocks), a decoder step, beam 4 and an
// encoder batch, with activations of very different magnitudes per row.
// Under a subset (sanitizers, emulated CPUs) the two largest have an 8th of their rows:
// the same blocks along k, and encoding their 1 M weights cost most of the test there.
TEST_CASE("int4 linear matches the reference at model shapes with many blocks", "[kernels][int4]") {
  std::mt19937 rng(31);
  const size_t big = petrel::test::subset_stride() > 1 ? 8 : 1;
  for (auto [m, n, k] : {std::tuple<size_t, size_t, size_t>{1, 2048 / big, 512}, {4, 512 / big, 2048}, {1, 1000, 512},
                         {9, 130, 512}, {32, 64, 257}}) {
    TestMatrix w(random_values(rng, n * k, 0.05f), n, k, DType::kInt4, detail::Layout::kPanel16);
    auto x = random_values(rng, m * k);
    for (size_t i = 0; i < m; ++i)
      for (size_t c = 0; c < k; ++c) x[i * k + c] *= std::pow(10.0f, float(int(i % 5) - 2));
    auto bias = random_values(rng, n);
    Scratch scratch(m, k);
    std::vector<float> want(m * n);
    reference::linear(x.data(), m, w.view, bias.data(), want.data(), n, scratch.rows());
    for (const auto& [name, simd] : linear_tables()) {
      std::vector<float> got(m * n, NAN);
      simd->linear(x.data(), m, w.view, bias.data(), got.data(), n, scratch.rows());
      require_close(got, want, 1e-6,
                    name + " int4 m=" + std::to_string(m) + " n=" + std::to_string(n) +
                        " k=" + std::to_string(k));
    }
  }
}

// Nibbles 0 (q = -8, which the converter never writes but a file may hold) and 15,
// u8 block scales of 255 and activations of +-127: the largest products any path
// must carry without overflow (AVX2 and NEON sum a block in int16).
TEST_CASE("int4 linear stays exact at the extremes of nibbles, block scales and activations", "[kernels][int4]") {
  for (const auto& [name, simd] : linear_tables()) {
    for (uint8_t nibble : {0, 15}) {
      for (size_t m : {1, 2}) {  // the GEMV and the GEMM row tiles
        const size_t n = 17, k = 96;
        TestMatrix w(std::vector<float>(n * k, 1.0f), n, k, DType::kInt4, detail::Layout::kPanel16);
        std::fill(w.encoded.data.begin(), w.encoded.data.end(), static_cast<uint8_t>(nibble | nibble << 4));
        for (size_t p = 0; p < w.view.stored_rows() / detail::kPanelRows; ++p)  // the scales inside the panels
          for (size_t b = 0; b < w.view.blocks(); ++b)
            std::fill_n(w.encoded.data.begin() + p * w.view.int4_panel_bytes() + w.view.int4_scales_offset(b),
                        detail::kPanelRows, 255);
        std::vector<float> x(m * k);
        for (size_t c = 0; c < k; ++c) {
          x[c] = 1.0f;                                  // every activation quantizes to 127
          if (m == 2) x[k + c] = c % 2 ? 1.0f : -1.0f;  // +-127
        }
        Scratch scratch(m, k);
        std::vector<float> want(m * n), got(m * n, NAN);
        reference::linear(x.data(), m, w.view, nullptr, want.data(), n, scratch.rows());
        simd->linear(x.data(), m, w.view, nullptr, got.data(), n, scratch.rows());
        INFO(name << " nibble " << int(nibble) << " m=" << m);
        // Row 0: k x 127 x (nibble - 8) x 255, row scale and activation scale 1/127 and the converter's.
        const double q = int(nibble) - 8;
        REQUIRE(want[0] == Approx(k * q * 255 * w.view.scales[0]).epsilon(1e-6));
        if (m == 2) REQUIRE(want[n] == Approx(0).margin(1e-6));
        require_close(got, want, 1e-6, "extremes");
      }
    }
  }
}

TEST_CASE("a row's elements are visited in column order at their index()", "[kernels]") {
  std::mt19937 rng(20);
  for (DType dtype : {DType::kF32, DType::kF16, DType::kInt8, DType::kInt4})
    for (detail::Layout layout : {detail::Layout::kRowMajor, detail::Layout::kPanel16})
      for (size_t n : {1, 15, 17, 40})
        for (size_t k : {1, 3, 7, 8, 9, 33, 70, 257}) {
          TestMatrix m(random_values(rng, n * k), n, k, dtype, layout);
          INFO(to_string(dtype) << " " << layout_name(layout) << " n=" << n << " k=" << k);
          for (size_t r = 0; r < n; ++r) {
            std::vector<size_t> visited, want;
            m.view.for_each_in_row(r, [&](size_t c, size_t at) {
              visited.push_back(c);
              visited.push_back(at);
            });
            for (size_t c = 0; c < k; ++c) {
              want.push_back(c);
              want.push_back(m.view.index(r, c));
            }
            REQUIRE(visited == want);
          }
        }
}

TEST_CASE("the reference linear gives the same products for row-major and panel weights", "[kernels]") {
  std::mt19937 rng(21);
  for (DType dtype : {DType::kF32, DType::kF16, DType::kInt8, DType::kInt4}) {
    for (size_t m : {1, 3, 5}) {
      for (size_t n : {1, 15, 17, 40}) {
        for (size_t k : {1, 3, 7, 33, 70}) {
          const auto values = random_values(rng, n * k);
          TestMatrix rows(values, n, k, dtype, detail::Layout::kRowMajor);
          TestMatrix panels(values, n, k, dtype, detail::Layout::kPanel16);
          auto x = random_values(rng, m * k), bias = random_values(rng, n);
          Scratch scratch(m, k);
          // The row-major product into rows of y wider than n (the gaps stay as they were).
          std::vector<float> from_rows(m * n), wide(m * (n + 2), -7.0f), from_panels(m * n, NAN);
          reference::linear(x.data(), m, rows.view, bias.data(), wide.data(), n + 2, scratch.rows());
          reference::linear(x.data(), m, panels.view, bias.data(), from_panels.data(), n, scratch.rows());
          INFO(to_string(dtype) << " m=" << m << " n=" << n << " k=" << k);
          for (size_t i = 0; i < m; ++i) {
            std::copy_n(wide.begin() + i * (n + 2), n, from_rows.begin() + i * n);
            REQUIRE(wide[i * (n + 2) + n] == -7.0f);
            REQUIRE(wide[i * (n + 2) + n + 1] == -7.0f);
          }
          REQUIRE(from_rows == from_panels);  // same values, same order of sums
          // And both are the product: within quantization error of a double-precision sum.
          for (size_t i = 0; i < m; ++i)
            for (size_t j = 0; j < n; ++j) {
              double want = bias[j], magnitude = std::fabs(bias[j]), x_max = 0, w_max = 0;
              for (size_t c = 0; c < k; ++c) {
                want += double(x[i * k + c]) * values[j * k + c];
                magnitude += std::fabs(double(x[i * k + c]) * values[j * k + c]);
                x_max = std::max(x_max, std::fabs(double(x[i * k + c])));
                w_max = std::max(w_max, std::fabs(double(values[j * k + c])));
              }
              // int8: each product is off by at most ~max|x| max|w| / 127 (both rounded to a 127th of their row's max).
              // int4: a weight by at most half a step, max|w| / 14 (+ a block scale's rounding, max|w| / 255).
              const double tol = dtype == DType::kInt8   ? k * x_max * w_max / 127 + 1e-6
                                 : dtype == DType::kInt4 ? k * x_max * w_max * (1.0 / 14 + 1.0 / 255 + 1.0 / 127) + 1e-6
                                 : dtype == DType::kF16 ? 1e-3 * magnitude + 1e-6
                                                        : 1e-5 * magnitude + 1e-6;
              REQUIRE(std::fabs(from_rows[i * n + j] - want) <= tol);
            }
        }
      }
    }
  }
}

// canonical.h's sums, e^x and erf: every path gives the reference's bits.
TEST_CASE("layer_norm, activations, add, logsumexp give the reference's bits", "[kernels]") {
  std::mt19937 rng(12);
  for (Isa isa : simd_paths()) {
    const KernelTable& simd = *table_for(isa);
    INFO(simd.isa);
    for (size_t d : {1, 3, 8, 16, 17, 64, 100, 513}) {
      const size_t m = 1 + d % 3;
      auto x = random_values(rng, m * d, 2.0f), r = random_values(rng, m * d);
      auto g = random_values(rng, d), b = random_values(rng, d);
      for (bool residual : {false, true}) {
        std::vector<float> want(m * d), got(m * d);
        reference::layer_norm(x.data(), residual ? r.data() : nullptr, m, d, g.data(), b.data(), 1e-5f, want.data());
        simd.layer_norm(x.data(), residual ? r.data() : nullptr, m, d, g.data(), b.data(), 1e-5f, got.data());
        require_close(got, want, 0, "layer_norm d=" + std::to_string(d));
      }
      for (Activation act : {Activation::kRelu, Activation::kGelu, Activation::kSwish, Activation::kGeluTanh}) {
        auto want = random_values(rng, d, 3.0f), got = want;
        reference::activate(act, want.data(), d);
        simd.activate(act, got.data(), d);
        require_close(got, want, 0, std::string("activate ") + to_string(act) + " n=" + std::to_string(d));
      }
      auto y = random_values(rng, d), want = y, got = y;
      reference::add(x.data(), want.data(), d);
      simd.add(x.data(), got.data(), d);
      require_close(got, want, 0, "add");
      auto logits = random_values(rng, d, 4.0f);
      CHECK(simd.logsumexp(logits.data(), d) == reference::logsumexp(logits.data(), d));
    }
  }
}

// canonical.h's e^x against the C library's, and every path's activations at the extremes
// of its range (where clamps and selects decide) against the reference's.
TEST_CASE("canonical e^x is within 2 ulp of expf and every path agrees at its extremes", "[kernels]") {
  for (float x = -87.0f; x < 88.0f; x += 0.0137f) {
    const float got = canonical::exp<canonical::ScalarOps>(x), want = std::exp(x);
    INFO("x = " << x);
    REQUIRE(std::fabs(got - want) <= 2 * (std::nextafter(want, INFINITY) - want));
  }
  CHECK(canonical::exp<canonical::ScalarOps>(-INFINITY) == 0.0f);
  CHECK(canonical::exp<canonical::ScalarOps>(-100.0f) == 0.0f);
  CHECK(canonical::exp<canonical::ScalarOps>(INFINITY) == INFINITY);
  CHECK(std::isnan(canonical::exp<canonical::ScalarOps>(NAN)));
  CHECK(canonical::erf<canonical::ScalarOps>(-0.5f) == -canonical::erf<canonical::ScalarOps>(0.5f));
  CHECK(std::fabs(canonical::erf<canonical::ScalarOps>(0.5f) - std::erf(0.5f)) < 4e-7f);
  const std::vector<float> extremes = {-INFINITY, INFINITY, NAN,      -1e30f,  1e30f,   -100.0f, 100.0f, 88.3f,
                                       88.4f,     -87.3f,   -87.4f,   -0.0f,   0.0f,    1e-30f,  -1e-30f, 3.0f,
                                       -3.0f,     44.0f,    -44.0f,   -20.0f,  20.0f,   0.5f,    -0.5f,   7.0f};
  auto same = [](float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  // A NaN anywhere makes the log-sum-exp NaN (a corrupt file's logits are caught by it).
  std::vector<float> logits(40);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(float(i));
  for (Isa isa : simd_paths()) {
    const KernelTable& simd = *table_for(isa);
    for (size_t at : {0, 5, 16, 17, 33, 39}) {
      auto with_nan = logits;
      with_nan[at] = NAN;
      INFO(simd.isa << " NaN at " << at);
      CHECK(std::isnan(simd.logsumexp(with_nan.data(), with_nan.size())));
      CHECK(std::isnan(reference::logsumexp(with_nan.data(), with_nan.size())));
    }
    for (Activation act : {Activation::kGelu, Activation::kSwish, Activation::kGeluTanh}) {
      auto want = extremes, got = extremes;
      reference::activate(act, want.data(), want.size());
      simd.activate(act, got.data(), got.size());
      for (size_t i = 0; i < got.size(); ++i) {
        INFO(simd.isa << " " << to_string(act) << "(" << extremes[i] << ")");
        CHECK(same(got[i], want[i]));
      }
    }
  }
}

// The decoder-only models' element-wise kernels: RMSNorm, rotary embeddings, the gated
// feed-forward's product, on odd widths (tails) and several rows / heads.
TEST_CASE("rms_norm, rope and multiply give the reference's bits", "[kernels]") {
  std::mt19937 rng(29);
  for (Isa isa : simd_paths()) {
    const KernelTable& simd = *table_for(isa);
    INFO(simd.isa);
    for (size_t d : {1, 2, 3, 8, 17, 64, 100, 256, 513}) {
      const size_t m = 1 + d % 4;
      auto x = random_values(rng, m * d, 3.0f), g = random_values(rng, d);
      std::vector<float> want(m * d), got(m * d);
      reference::rms_norm(x.data(), m, d, g.data(), 1e-6f, want.data());
      simd.rms_norm(x.data(), m, d, g.data(), 1e-6f, got.data());
      require_close(got, want, 0, "rms_norm d=" + std::to_string(d));
      got = x;  // in place
      simd.rms_norm(got.data(), m, d, g.data(), 1e-6f, got.data());
      require_close(got, want, 0, "rms_norm in place d=" + std::to_string(d));
      auto y = random_values(rng, m * d);
      want = y;
      got = y;
      reference::multiply(x.data(), want.data(), m * d);
      simd.multiply(x.data(), got.data(), m * d);
      require_close(got, want, 0, "multiply");
    }
    for (size_t head_dim : {2, 6, 16, 34, 64, 128, 256}) {
      for (size_t heads : {1, 3}) {
        const size_t m = 1 + head_dim % 3, half = head_dim / 2, stride = heads * head_dim + 5;  // rows with a gap
        auto x = random_values(rng, m * stride), angles = random_values(rng, m * half, 10.0f);
        std::vector<float> cos(m * half), sin(m * half);
        for (size_t i = 0; i < angles.size(); ++i) {
          cos[i] = std::cos(angles[i]);
          sin[i] = std::sin(angles[i]);
        }
        auto want = x, got = x;
        reference::rope(want.data(), m, heads, head_dim, stride, cos.data(), sin.data());
        simd.rope(got.data(), m, heads, head_dim, stride, cos.data(), sin.data());
        require_close(got, want, 0, "rope head_dim=" + std::to_string(head_dim));
        // The gap between rows is never written; each pair is rotated (its norm kept).
        for (size_t r = 0; r < m; ++r)
          for (size_t i = heads * head_dim; i < stride; ++i) CHECK(got[r * stride + i] == x[r * stride + i]);
        const float a = x[0], b = x[half], c = got[0], e = got[half];
        CHECK(c * c + e * e == Approx(a * a + b * b).epsilon(1e-5));
      }
    }
  }
}

// The reference RMSNorm and rotation against their formulas in double precision.
TEST_CASE("the reference rms_norm and rope follow their formulas", "[kernels]") {
  std::mt19937 rng(30);
  const size_t d = 37;
  auto x = random_values(rng, d, 2.0f), g = random_values(rng, d);
  std::vector<float> y(d);
  reference::rms_norm(x.data(), 1, d, g.data(), 1e-5f, y.data());
  double ms = 0;
  for (float v : x) ms += double(v) * v;
  ms /= d;
  for (size_t i = 0; i < d; ++i) CHECK(y[i] == Approx(x[i] / std::sqrt(ms + 1e-5) * g[i]).epsilon(1e-6));
  // rotate-half: pair (i, i + half) turned by the angle (Hugging Face's apply_rotary_pos_emb).
  std::vector<float> v = {1, 2, 3, 4}, c = {std::cos(0.5f), std::cos(1.5f)}, s = {std::sin(0.5f), std::sin(1.5f)};
  reference::rope(v.data(), 1, 1, 4, 4, c.data(), s.data());
  CHECK(v[0] == Approx(1 * std::cos(0.5) - 3 * std::sin(0.5)));
  CHECK(v[2] == Approx(3 * std::cos(0.5) + 1 * std::sin(0.5)));
  CHECK(v[1] == Approx(2 * std::cos(1.5) - 4 * std::sin(1.5)));
  CHECK(v[3] == Approx(4 * std::cos(1.5) + 2 * std::sin(1.5)));
  // GELU (tanh approximation) as PyTorch writes it, in double.
  for (double t : {-6.0, -1.5, -0.3, 0.0, 0.7, 2.0, 9.0}) {
    float f = static_cast<float>(t);
    reference::activate(Activation::kGeluTanh, &f, 1);
    const double want = 0.5 * t * (1 + std::tanh(std::sqrt(2 / 3.141592653589793) * (t + 0.044715 * t * t * t)));
    CHECK(f == Approx(want).epsilon(1e-6).margin(1e-7));
  }
}

// Marian's SSRU step: the SIMD paths against the reference, and the reference against
// the formula in double precision (f = sigmoid, c = f c + (1 - f) x, out = relu(c)).
TEST_CASE("the SSRU step matches the reference and the formula", "[kernels][ssru]") {
  std::mt19937 rng(41);
  for (size_t n : {1, 3, 8, 15, 16, 17, 64, 100, 257}) {
    auto x = random_values(rng, n, 2.0f), forget = random_values(rng, n, 3.0f), cell = random_values(rng, n);
    std::vector<float> want_cell = cell, want(n);
    reference::ssru(x.data(), forget.data(), n, want_cell.data(), want.data());
    for (size_t i = 0; i < n; ++i) {
      const double f = 1.0 / (1.0 + std::exp(-double(forget[i])));
      const double c = f * cell[i] + (1.0 - f) * x[i];
      REQUIRE(want_cell[i] == Approx(c).margin(1e-6));
      REQUIRE(want[i] == Approx(std::max(c, 0.0)).margin(1e-6));
    }
    for (Isa isa : simd_paths()) {
      const KernelTable& simd = *table_for(isa);
      std::vector<float> got_cell = cell, got(n);
      simd.ssru(x.data(), forget.data(), n, got_cell.data(), got.data());
      require_close(got_cell, want_cell, 0, std::string(simd.isa) + " ssru cell n=" + std::to_string(n));
      require_close(got, want, 0, std::string(simd.isa) + " ssru out n=" + std::to_string(n));
    }
  }
}

// A matrix's static activation scale (Marian's alphas): every row is quantized with it,
// values beyond it saturate at +-127; the SIMD paths give the reference's exact products.
TEST_CASE("int8 linear with a static activation scale saturates and matches the reference", "[kernels][ssru]") {
  std::mt19937 rng(43);
  for (size_t m : {1, 2, 5, 9})
    for (size_t n : {1, 16, 33})
      for (size_t k : {1, 7, 64, 95}) {
        TestMatrix w(random_values(rng, n * k), n, k, DType::kInt8, detail::Layout::kPanel16);
        auto x = random_values(rng, m * k, 2.0f);
        w.view.activation_scale = 2.0f / 127.0f;  // clips |x| > 2: some entries of every larger row
        Scratch scratch(m, k);
        std::vector<float> want(m * n), got(m * n, NAN);
        reference::linear(x.data(), m, w.view, nullptr, want.data(), n, scratch.rows());
        const size_t stride = detail::round_up(k, detail::kInt8Group);
        for (size_t i = 0; i < m; ++i) {
          REQUIRE(scratch.scales[i] == w.view.activation_scale);
          for (size_t c = 0; c < k; ++c) {
            const float q = std::min(std::max(std::nearbyint(x[i * k + c] / w.view.activation_scale), -127.0f), 127.0f);
            REQUIRE(float(scratch.values[i * stride + c]) == Approx(q).margin(1.0));  // 1/s rounding
            if (std::fabs(x[i * k + c]) > 2.1f) REQUIRE(std::abs(scratch.values[i * stride + c]) == 127);
          }
        }
        for (const auto& [name, simd] : linear_tables()) {
          simd->linear(x.data(), m, w.view, nullptr, got.data(), n, scratch.rows());
          require_close(got, want, 1e-6, name + " static scale m=" + std::to_string(m) +
                                             " n=" + std::to_string(n) + " k=" + std::to_string(k));
        }
      }
}

// A corrupt model's activations (NaN, infinities) and rows so small that 1 / scale
// overflows: every path quantizes them to the reference's int8 values (round_to_int8:
// no int8, no value: 0), with or without a static scale.
TEST_CASE("activations quantize as the reference's when tiny, infinite or NaN", "[kernels]") {
  const size_t k = 40;  // vector bodies and a scalar tail on every path
  std::vector<float> x(4 * k, 0.5f);
  for (size_t c = 0; c < k; ++c) x[c] = (c % 3 == 0 ? 1e-40f : -2e-39f);  // scale 1.6e-41: 1 / scale = inf
  x[k + 5] = NAN;
  x[k + 33] = NAN;
  x[2 * k + 1] = INFINITY;
  x[2 * k + 34] = -INFINITY;
  x[3 * k + 2] = NAN;
  x[3 * k + 3] = 3.0f;
  for (const float activation_scale : {0.0f, 1.0f / 127.0f}) {
    TestMatrix w(std::vector<float>(16 * k, 0.25f), 16, k, DType::kInt8, detail::Layout::kPanel16);
    w.view.activation_scale = activation_scale;
    Scratch want(4, k);
    std::vector<float> y(4 * 16);
    reference::linear(x.data(), 4, w.view, nullptr, y.data(), 16, want.rows());
    for (const auto& [name, simd] : linear_tables()) {
      Scratch got(4, k);
      simd->linear(x.data(), 4, w.view, nullptr, y.data(), 16, got.rows());
      // The paths whose products are unsigned (AVX-512, AVX-VNNI) leave each value of the
      // 4 rows (stored_cols() apart) shifted by 128, its top bit flipped: all values are
      // the reference's, or all are the reference's flipped. Past the rows, as the
      // reference left them.
      const size_t used = 4 * w.view.stored_cols();
      std::vector<int8_t> flipped = got.values;
      for (size_t i = 0; i < used; ++i) flipped[i] = static_cast<int8_t>(static_cast<uint8_t>(flipped[i]) ^ 0x80);
      INFO(name << " static scale " << activation_scale);
      CHECK((got.values == want.values || flipped == want.values));
    }
  }
}

TEST_CASE("top-k over the vocabulary matches the reference, ties and masks included", "[kernels]") {
  std::mt19937 rng(16);
  for (Isa isa : runnable_isas()) {
    const KernelTable& kt = *table_for(isa);
    for (size_t n : {1, 2, 7, 16, 33, 1000, 58101}) {
      for (size_t k : {1, 2, 8}) {
        auto x = random_values(rng, n);
        for (size_t i = 0; i < n; i += 5) x[i] = std::round(x[i] * 2) / 2;  // exact ties
        for (size_t i = 3; i < n; i += 11) x[i] = -INFINITY;                  // masked tokens
        std::vector<int32_t> want_ids(k), got_ids(k);
        std::vector<float> want(k), got(k);
        const size_t wn = reference::top_k(x.data(), n, k, want_ids.data(), want.data());
        const size_t gn = kt.top_k(x.data(), n, k, got_ids.data(), got.data());
        INFO(kt.isa << " n=" << n << " k=" << k);
        REQUIRE(gn == wn);
        REQUIRE(wn == std::min(k, n - (n > 3 ? (n - 4) / 11 + 1 : 0)));
        for (size_t j = 0; j < wn; ++j) {
          REQUIRE(got_ids[j] == want_ids[j]);
          REQUIRE(got[j] == want[j]);
          if (j > 0) REQUIRE((want[j - 1] > want[j] || (want[j - 1] == want[j] && want_ids[j - 1] < want_ids[j])));
        }
        // Nothing left out is better than the last one kept (counted: an assertion per
        // token made 350 thousand of them a run).
        size_t better_left_out = 0;
        for (size_t i = 0; i < n && wn == k; ++i)
          if (x[i] > want[k - 1] && std::find(want_ids.begin(), want_ids.end(), int32_t(i)) == want_ids.end())
            ++better_left_out;
        CHECK(better_left_out == 0);
      }
    }
  }
}

TEST_CASE("attention for one head gives the reference's bits (f32 and f16 keys/values, consecutive or listed rows)",
          "[kernels]") {
  std::mt19937 rng(13);
  for (DType kv : {DType::kF32, DType::kF16}) {
    for (size_t n : {1, 2, 5, 17, 64, 257, 600}) {  // 257, 600: two and three tiles of 256
      // 160: more than one register block of 8 vectors; 256: one of 16 (AVX-512); 300: 16 + 2 + a tail
      for (size_t head_dim : {1, 3, 8, 16, 17, 64, 100, 160, 256, 300}) {
        const size_t stride = head_dim + (n % 3);
        // q carries 1/sqrt(head_dim) as the model's folded W_q does: scores of unit scale.
        auto q = random_values(rng, head_dim, 1.0f / std::sqrt(float(head_dim)));
        auto k = random_values(rng, n * stride), v = random_values(rng, n * stride);
        // Both paths read the same stored elements (the reference's f32 -> f16 rounding).
        const std::vector<uint8_t> ks = stored_as(k, kv), vs = stored_as(v, kv);
        std::vector<float> scores(n), want(head_dim);
        float want_lse = 0;
        reference::attend(q.data(), ks.data(), vs.data(), kv, nullptr, n, stride, head_dim, 1, scores.data(),
                          want.data(), &want_lse);
        {  // the log-sum-exp of the scores, in double
          double sum = 0;
          for (size_t j = 0; j < n; ++j) {
            double dot = 0;
            for (size_t c = 0; c < head_dim; ++c)
              dot += double(q[c]) * stored_element(ks, kv, j * stride + c);
            sum += std::exp(dot);
          }
          REQUIRE(std::abs(want_lse - std::log(sum)) < 1e-5 * std::max(1.0, std::abs(std::log(sum))));
        }
        // Keys by a list of rows (a beam's cache): rows in any order, some twice, some
        // never. The reference reads them as the consecutive rows of a gathered copy.
        std::vector<size_t> rows(n);
        for (size_t& row : rows) row = rng() % n;
        const size_t row_bytes = stride * detail::dtype_size(kv);
        std::vector<uint8_t> kg(n * row_bytes), vg(n * row_bytes);
        for (size_t j = 0; j < n; ++j) {
          std::copy_n(&ks[rows[j] * row_bytes], row_bytes, &kg[j * row_bytes]);
          std::copy_n(&vs[rows[j] * row_bytes], row_bytes, &vg[j * row_bytes]);
        }
        std::vector<float> gathered(head_dim), listed(head_dim);
        reference::attend(q.data(), kg.data(), vg.data(), kv, nullptr, n, stride, head_dim, 1, scores.data(),
                          gathered.data(), nullptr);
        reference::attend(q.data(), ks.data(), vs.data(), kv, rows.data(), n, stride, head_dim, 1, scores.data(),
                          listed.data(), nullptr);
        REQUIRE(listed == gathered);
        for (Isa isa : simd_paths()) {
          const KernelTable& simd = *table_for(isa);
          std::vector<float> got(head_dim);
          float got_lse = 0;
          simd.attend(q.data(), ks.data(), vs.data(), kv, nullptr, n, stride, head_dim, 1, scores.data(), got.data(),
                      &got_lse);
          const std::string what = std::string(simd.isa) + " attend " + to_string(kv) + " n=" + std::to_string(n) +
                                   " hd=" + std::to_string(head_dim);
          require_close(got, want, 0, what);
          require_close({got_lse}, {want_lse}, 0, what + " log-sum-exp");
          simd.attend(q.data(), ks.data(), vs.data(), kv, rows.data(), n, stride, head_dim, 1, scores.data(),
                      got.data(), nullptr);
          require_close(got, listed, 0, what + " listed rows");
          // The SIMD path does the same arithmetic whichever way it finds the keys.
          std::vector<float> simd_gathered(head_dim);
          simd.attend(q.data(), kg.data(), vg.data(), kv, nullptr, n, stride, head_dim, 1, scores.data(),
                      simd_gathered.data(), nullptr);
          REQUIRE(got == simd_gathered);
        }
      }
    }
  }
}

TEST_CASE("attention for a group of heads sharing K and V is each head's attention, bit for bit", "[kernels]") {
  std::mt19937 rng(29);
  for (DType kv : {DType::kF32, DType::kF16}) {
    for (size_t heads : {2, 3, 4, 9}) {  // 9: more than one pass of 8 heads
      for (size_t n : {1, 17, 257, 600}) {
        for (size_t head_dim : {8, 17, 64, 256}) {
          const size_t stride = head_dim + 3;
          auto q = random_values(rng, heads * head_dim, 1.0f / std::sqrt(float(head_dim)));
          auto k = random_values(rng, n * stride), v = random_values(rng, n * stride);
          const std::vector<uint8_t> ks = stored_as(k, kv), vs = stored_as(v, kv);
          std::vector<size_t> rows(n);
          for (size_t& row : rows) row = rng() % n;
          std::vector<float> scores(n), want(heads * head_dim), got(heads * head_dim), alone(heads * head_dim);
          std::vector<float> got_lse(heads), alone_lse(heads);
          const std::string what = std::string(to_string(kv)) + " heads=" + std::to_string(heads) +
                                   " n=" + std::to_string(n) + " hd=" + std::to_string(head_dim);
          const size_t* listed_rows = rows.data();
          for (const size_t* listed : {static_cast<const size_t*>(nullptr), listed_rows}) {
            reference::attend(q.data(), ks.data(), vs.data(), kv, listed, n, stride, head_dim, heads, scores.data(),
                              want.data(), nullptr);
            for (size_t h = 0; h < heads; ++h) {  // the reference's group is its heads one by one
              std::vector<float> one(head_dim);
              reference::attend(q.data() + h * head_dim, ks.data(), vs.data(), kv, listed, n, stride, head_dim, 1,
                                scores.data(), one.data(), nullptr);
              REQUIRE(std::equal(one.begin(), one.end(), want.begin() + h * head_dim));
            }
            for (Isa isa : simd_paths()) {
              const KernelTable& simd = *table_for(isa);
              simd.attend(q.data(), ks.data(), vs.data(), kv, listed, n, stride, head_dim, heads, scores.data(),
                          got.data(), got_lse.data());
              require_close(got, want, 1e-5, std::string(simd.isa) + " grouped attend " + what);
              for (size_t h = 0; h < heads; ++h)
                simd.attend(q.data() + h * head_dim, ks.data(), vs.data(), kv, listed, n, stride, head_dim, 1,
                            scores.data(), alone.data() + h * head_dim, alone_lse.data() + h);
              REQUIRE(got == alone);
              REQUIRE(got_lse == alone_lse);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("storing as f16 rounds like the reference, bit for bit", "[kernels]") {
  std::mt19937 rng(17);
  // Ordinary values, values near f16's limits (subnormals, 65504, overflow to inf),
  // exact halfway cases between two halves, signed zeros and infinities.
  std::vector<float> x = random_values(rng, 1000, 100.0f);
  for (float f : {0.0f, -0.0f, 1e-8f, -3e-6f, 6.1e-5f, 5.96e-8f, 2.98e-8f, 65504.0f, 65519.0f, 65520.0f, -70000.0f,
                  1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, INFINITY, -INFINITY})
    x.push_back(f);
  for (Isa isa : simd_paths()) {
    const KernelTable& simd = *table_for(isa);
    for (size_t n : {size_t(1), size_t(7), size_t(33), x.size()}) {
      std::vector<uint16_t> want(n), got(n);
      reference::store_as(x.data() + x.size() - n, n, DType::kF16, want.data());
      simd.store_as(x.data() + x.size() - n, n, DType::kF16, got.data());
      INFO(simd.isa << " n=" << n);
      REQUIRE(got == want);
    }
    std::vector<float> copy(x.size());
    simd.store_as(x.data(), x.size(), DType::kF32, copy.data());
    REQUIRE(std::equal(copy.begin(), copy.end(), x.begin()));
  }
}

TEST_CASE("an int8 KV row holds each head's values rounded by its absmax scale, as the reference stores them",
          "[kernels]") {
  std::mt19937 rng(41);
  for (size_t heads : {1, 2, 3}) {
    for (size_t head_dim : {1, 3, 8, 17, 64, 100, 256}) {  // 3 heads of 1, 3 or 17: padding before the scales
      const size_t m = 3, width = heads * head_dim, row_bytes = int8_kv_row_bytes(heads, head_dim);
      const size_t scales_at = int8_kv_scales_offset(heads, head_dim);
      REQUIRE(scales_at % 4 == 0);
      REQUIRE(row_bytes == scales_at + 4 * heads);
      auto x = random_values(rng, m * width, 3.0f);
      // Row 1's first head all zeros (scale 0), its last so small that 1 / scale is infinite.
      std::fill_n(x.begin() + width, head_dim, 0.0f);
      if (heads > 1) std::fill_n(x.begin() + 2 * width - head_dim, head_dim, -2e-39f);
      std::vector<uint8_t> want(m * row_bytes, 0xAB);  // padding must be written, not left
      reference::store_int8_kv(x.data(), m, heads, head_dim, want.data());
      const std::string what = "heads=" + std::to_string(heads) + " hd=" + std::to_string(head_dim);
      // The reference against the layout's definition, in double.
      for (size_t r = 0; r < m; ++r) {
        const uint8_t* row = want.data() + r * row_bytes;
        for (size_t i = width; i < scales_at; ++i) REQUIRE(row[i] == 0);
        for (size_t h = 0; h < heads; ++h) {
          const float* xh = x.data() + r * width + h * head_dim;
          float scale;
          std::memcpy(&scale, row + scales_at + 4 * h, 4);
          double max_abs = 0;
          for (size_t c = 0; c < head_dim; ++c) max_abs = std::max(max_abs, std::fabs(double(xh[c])));
          INFO(what << " row " << r << " head " << h);
          const float exact = float(max_abs) / 127.0f;  // a subnormal scale is stored as 0
          REQUIRE(scale == (exact >= std::numeric_limits<float>::min() ? exact : 0.0f));
          for (size_t c = 0; c < head_dim; ++c) {
            const int q = reinterpret_cast<const int8_t*>(row)[h * head_dim + c];
            REQUIRE(std::abs(q) <= 127);
            if (!(1.0f / scale <= 3.4e38f)) {  // scale 0 (or 1 / scale overflows): zeros
              REQUIRE(q == 0);
              continue;
            }
            REQUIRE(std::fabs(double(xh[c]) / scale - q) <= 0.5 + 1e-4);
          }
        }
      }
      for (Isa isa : simd_paths()) {
        const KernelTable& simd = *table_for(isa);
        std::vector<uint8_t> got(m * row_bytes, 0xCD);
        simd.store_int8_kv(x.data(), m, heads, head_dim, got.data());
        INFO(simd.isa << " " << what);
        REQUIRE(got == want);
      }
    }
  }
}

TEST_CASE("attention over an int8 KV cache matches the reference, and the reference the dequantized attention",
          "[kernels]") {
  std::mt19937 rng(43);
  // Rows of two K/V heads; the second is attended, so its values and its scale are not
  // where the first head's are.
  const size_t kv_heads = 2, h = 1;
  for (size_t heads : {1, 3, 9}) {                  // a group of query heads; 9: two passes of 8
    for (size_t n : {1, 2, 5, 17, 64, 257, 600}) {  // 257, 600: two and three tiles of 256
      for (size_t head_dim : {1, 3, 8, 16, 17, 64, 100, 160, 256, 300}) {
        if (heads == 9 && head_dim > 64 && n > 64) continue;  // enough: the group's loop is the same
        const size_t width = kv_heads * head_dim, row_bytes = int8_kv_row_bytes(kv_heads, head_dim);
        const size_t scale_offset = int8_kv_scales_offset(kv_heads, head_dim) + h * 4 - h * head_dim;
        auto q = random_values(rng, heads * head_dim, 1.0f / std::sqrt(float(head_dim)));
        const auto ks = stored_int8(random_values(rng, n * width), kv_heads, head_dim);
        const auto vs = stored_int8(random_values(rng, n * width), kv_heads, head_dim);
        const int8_t* k = reinterpret_cast<const int8_t*>(ks.data()) + h * head_dim;
        const int8_t* v = reinterpret_cast<const int8_t*>(vs.data()) + h * head_dim;
        std::vector<size_t> rows(n);
        for (size_t& row : rows) row = rng() % n;
        const std::string what = "heads=" + std::to_string(heads) + " n=" + std::to_string(n) +
                                 " hd=" + std::to_string(head_dim);
        for (const size_t* listed : {static_cast<const size_t*>(nullptr), static_cast<const size_t*>(rows.data())}) {
          INFO(what << (listed ? " listed rows" : ""));
          std::vector<float> scores(n), want(heads * head_dim), want_lse(heads);
          reference::attend_int8(q.data(), k, v, listed, n, row_bytes, scale_offset, head_dim, heads, scores.data(),
                                 want.data(), want_lse.data());
          // The reference against attention over the dequantized keys and values, in double.
          auto element = [&](const std::vector<uint8_t>& bytes, size_t j, size_t c) {
            const uint8_t* row = bytes.data() + (listed ? listed[j] : j) * row_bytes;
            float scale;
            std::memcpy(&scale, row + int8_kv_scales_offset(kv_heads, head_dim) + 4 * h, 4);
            return double(reinterpret_cast<const int8_t*>(row)[h * head_dim + c]) * scale;
          };
          for (size_t g = 0; g < heads; ++g) {
            std::vector<double> s(n), o(head_dim, 0.0);
            double max_s = -INFINITY, sum = 0;
            for (size_t j = 0; j < n; ++j) {
              for (size_t c = 0; c < head_dim; ++c) s[j] += double(q[g * head_dim + c]) * element(ks, j, c);
              max_s = std::max(max_s, s[j]);
            }
            for (size_t j = 0; j < n; ++j) sum += std::exp(s[j] - max_s);
            for (size_t j = 0; j < n; ++j)
              for (size_t c = 0; c < head_dim; ++c) o[c] += std::exp(s[j] - max_s) / sum * element(vs, j, c);
            std::vector<float> oracle(o.begin(), o.end());
            require_close(std::vector<float>(want.begin() + g * head_dim, want.begin() + (g + 1) * head_dim), oracle,
                          1e-5, "reference against double, head " + std::to_string(g));
            require_close({want_lse[g]}, {float(max_s + std::log(sum))}, 1e-5, "log-sum-exp against double");
          }
          for (Isa isa : simd_paths()) {
            const KernelTable& simd = *table_for(isa);
            std::vector<float> got(heads * head_dim), got_lse(heads), alone(heads * head_dim), alone_lse(heads);
            simd.attend_int8(q.data(), k, v, listed, n, row_bytes, scale_offset, head_dim, heads, scores.data(),
                             got.data(), got_lse.data());
            require_close(got, want, 0, std::string(simd.isa) + " attend int8");
            require_close(got_lse, want_lse, 0, std::string(simd.isa) + " attend int8 log-sum-exp");
            // A group's heads are each head's attention alone, bit for bit.
            for (size_t g = 0; g < heads; ++g)
              simd.attend_int8(q.data() + g * head_dim, k, v, listed, n, row_bytes, scale_offset, head_dim, 1,
                               scores.data(), alone.data() + g * head_dim, alone_lse.data() + g);
            REQUIRE(got == alone);
            REQUIRE(got_lse == alone_lse);
          }
        }
      }
    }
  }
}

TEST_CASE("embedding gather with positions matches the reference", "[kernels]") {
  std::mt19937 rng(14);
  for (Isa isa : simd_paths()) {
    const KernelTable& simd = *table_for(isa);
    for (DType dtype : {DType::kF32, DType::kF16, DType::kInt8, DType::kInt4}) {
      for (detail::Layout layout : {detail::Layout::kRowMajor, detail::Layout::kPanel16}) {
        for (size_t d : {1, 4, 7, 16, 33, 64, 300}) {
          const size_t vocab = 37, m = 9, positions_rows = 12;
          TestMatrix table(random_values(rng, vocab * d), vocab, d, dtype, layout);
          auto pe = random_values(rng, positions_rows * d);
          std::vector<int32_t> ids(m), pos(m);
          for (size_t i = 0; i < m; ++i) {
            ids[i] = static_cast<int32_t>(rng() % vocab);
            pos[i] = static_cast<int32_t>(rng() % positions_rows);
          }
          for (bool with_pe : {false, true}) {
            std::vector<float> want(m * d), got(m * d);
            const float* p = with_pe ? pe.data() : nullptr;
            reference::embed(table.view, ids.data(), pos.data(), m, p, want.data());
            simd.embed(table.view, ids.data(), pos.data(), m, p, got.data());
            require_close(got, want, 1e-6,
                          std::string(simd.isa) + " embed " + to_string(dtype) + " " + layout_name(layout) +
                              " d=" + std::to_string(d));
          }
        }
      }
    }
  }
}

// The CPU's features as the OS reports them, independently of the engine's own
// detection: /proc/cpuinfo's flags on x86-64, the auxiliary vector on aarch64.
static std::string best_isa_by_the_os() {
#if defined(__x86_64__)
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags{std::istream_iterator<std::string>(words), {}};
    auto has = [&](std::initializer_list<const char*> names) {
      return std::all_of(names.begin(), names.end(), [&](const char* n) { return flags.count(n) != 0; });
    };
    if (has({"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni", "f16c"})) return "avx512";
    if (has({"avx2", "fma", "f16c", "avx_vnni"})) return "avxvnni";
    if (has({"avx2", "fma", "f16c"})) return "avx2";
    return "scalar";
  }
  return "";
#elif defined(__aarch64__)
  if (!(getauxval(AT_HWCAP) & HWCAP_ASIMDDP)) return "neon";
  return (getauxval(AT_HWCAP2) & HWCAP2_I8MM) ? "i8mm" : "dotprod";
#elif defined(__arm__)
  return "neon";
#elif defined(__wasm_simd128__)  // the module was compiled for SIMD128, so it runs it
  return "simd128";
#else
  return "scalar";
#endif
}

TEST_CASE("the best path is the one this CPU should run", "[kernels]") {
  // tools/test.sh sets PETREL_EXPECT_BEST_ISA for each emulated CPU model (i8mm on
  // -cpu max, dotprod on -cpu cortex-a76, neon on -cpu cortex-a53, avx2 on Haswell,
  // scalar on Nehalem), where the OS's report would describe the host rather than the
  // emulated CPU.
  const char* expected = std::getenv("PETREL_EXPECT_BEST_ISA");
  const std::string want = expected != nullptr ? expected : best_isa_by_the_os();
  REQUIRE_FALSE(want.empty());
  CHECK(std::string(isa_name(best_isa())) == want);
  CHECK(runnable_isas().back() == best_isa());
}

TEST_CASE("sinusoidal tables match the double-precision formula to 1e-6", "[kernels]") {
  for (PositionKind kind : {PositionKind::kSinusoidalConcatenated, PositionKind::kSinusoidalInterleaved}) {
    for (FrequencyConvention freq : {FrequencyConvention::kPaper, FrequencyConvention::kMarianCpp}) {
      for (uint32_t first : {0u, 2u}) {
        const size_t rows = 300, d = 64, half = d / 2;
        std::vector<float> table(rows * d);
        sinusoidal_table({kind, freq, first}, rows, d, table.data());
        double worst = 0;
        for (size_t r = 0; r < rows; ++r) {
          for (size_t i = 0; i < half; ++i) {
            const double e = freq == FrequencyConvention::kPaper ? 2.0 * i / d : double(i) / (half - 1.0);
            const double angle = double(r + first) / std::pow(10000.0, e);
            const bool il = kind == PositionKind::kSinusoidalInterleaved;
            worst = std::max(worst, std::fabs(table[r * d + (il ? 2 * i : i)] - std::sin(angle)));
            worst = std::max(worst, std::fabs(table[r * d + (il ? 2 * i + 1 : half + i)] - std::cos(angle)));
          }
        }
        INFO(to_string(kind) << " " << to_string(freq) << " first " << first);
        CHECK(worst < 1e-6);
      }
    }
  }
}

TEST_CASE("matmul over a thread pool equals the single-thread result exactly", "[kernels][threads]") {
  std::mt19937 rng(15);
  threads::ThreadPool one(1), three(3);
  for (DType dtype : {DType::kInt8, DType::kInt4, DType::kF32, DType::kF16}) {
    for (size_t n : {1000, 2049}) {
      const size_t k = 80;
      TestMatrix w(random_values(rng, n * k), n, k, dtype, detail::Layout::kPanel16);  // once: every m and path
      auto bias = random_values(rng, n);
      for (size_t m : {1, 2, 5, 40}) {
        REQUIRE(m * n * k >= layers::kParallelWork);  // every case really splits the work
        auto x = random_values(rng, m * k);
        for (Isa isa : runnable_isas()) {
          std::vector<float> y1(m * n), y3(m * n, NAN);
          layers::Workspace ws1, ws3;
          ws1.reserve(m, k, k, 1, 1);
          ws3.reserve(m, k, k, 1, 3);
          layers::Context c1{*table_for(isa), one, ws1}, c3{*table_for(isa), three, ws3};
          layers::matmul(c1, w.view, bias.data(), x.data(), m, y1.data());
          layers::matmul(c3, w.view, bias.data(), x.data(), m, y3.data());
          INFO(isa_name(isa) << " " << to_string(dtype) << " m=" << m << " n=" << n);
          REQUIRE(y1 == y3);
        }
      }
    }
  }
}

TEST_CASE("attention over partitions of keys is the whole softmax and the same for every thread count",
          "[kernels][threads]") {
  std::mt19937 rng(31);
  threads::ThreadPool one(1), two(2), three(3);
  struct Case {
    layers::HeadShape shape;
    size_t rows, keys;
  };
  // One row (a step) with one K/V head: its partitions side by side; with four, the heads
  // side by side; several rows: rows side by side. 600 and 1000 keys: 3 and 4 partitions.
  for (const Case& t : {Case{{4, 1, 32}, 1, 1000}, Case{{8, 1, 17}, 1, 600}, Case{{4, 4, 32}, 1, 1000},
                        Case{{6, 2, 16}, 3, 600}, Case{{8, 1, 64}, 1, 200}}) {
    const size_t q_width = t.shape.q_width(), kv_width = t.shape.kv_width(), group = t.shape.heads / t.shape.kv_heads;
    REQUIRE(t.rows * t.keys * q_width >= layers::kParallelWork);  // every case is worth the pool
    // Keys: row r attends [r, r + keys); listed, row r attends key_rows[r..] (any rows).
    const size_t stored = t.keys + t.rows;
    auto q = random_values(rng, t.rows * q_width, 1.0f / std::sqrt(float(t.shape.head_dim)));
    std::vector<size_t> key_rows(stored);
    for (size_t& row : key_rows) row = rng() % stored;
    std::vector<layers::KeyRange> ranges(t.rows);
    for (size_t r = 0; r < t.rows; ++r) ranges[r] = {r, t.keys};
    for (DType kv : {DType::kF32, DType::kF16, DType::kInt8}) {
      const auto ks = stored_rows(random_values(rng, stored * kv_width), kv, t.shape.kv_heads, t.shape.head_dim);
      const auto vs = stored_rows(random_values(rng, stored * kv_width), kv, t.shape.kv_heads, t.shape.head_dim);
      for (const size_t* listed : {static_cast<const size_t*>(nullptr), static_cast<const size_t*>(key_rows.data())}) {
        // The reference over all of a row's keys at once.
        std::vector<float> want(t.rows * q_width), scores(t.keys);
        for (size_t r = 0; r < t.rows; ++r)
          for (size_t h = 0; h < t.shape.kv_heads; ++h) {
            const size_t first = listed != nullptr ? 0 : r;
            const float* qh = q.data() + r * q_width + h * group * t.shape.head_dim;
            float* out = want.data() + r * q_width + h * group * t.shape.head_dim;
            const size_t* rows = listed != nullptr ? listed + r : nullptr;
            if (kv == DType::kInt8) {
              const size_t row_bytes = int8_kv_row_bytes(t.shape.kv_heads, t.shape.head_dim);
              const size_t off = first * row_bytes + h * t.shape.head_dim;
              const size_t scale_offset = int8_kv_scales_offset(t.shape.kv_heads, t.shape.head_dim) +
                                          h * sizeof(float) - h * t.shape.head_dim;
              reference::attend_int8(qh, reinterpret_cast<const int8_t*>(ks.data() + off),
                                     reinterpret_cast<const int8_t*>(vs.data() + off), rows, t.keys, row_bytes,
                                     scale_offset, t.shape.head_dim, group, scores.data(), out, nullptr);
              continue;
            }
            const size_t off = (first * kv_width + h * t.shape.head_dim) * detail::dtype_size(kv);
            reference::attend(qh, ks.data() + off, vs.data() + off, kv, rows, t.keys, kv_width, t.shape.head_dim,
                              group, scores.data(), out, nullptr);
          }
        for (Isa isa : runnable_isas()) {
          std::vector<std::vector<float>> got;
          for (threads::ThreadPool* pool : {&one, &two, &three}) {
            layers::Workspace ws;
            ws.reserve(t.rows, q_width, q_width, t.keys, pool->size());
            layers::Context c{*table_for(isa), *pool, ws};
            got.emplace_back(t.rows * q_width, NAN);
            layers::attend_rows(c, q.data(), ks.data(), vs.data(), kv, ranges.data(), t.rows, t.shape,
                                got.back().data(), listed);
          }
          INFO(isa_name(isa) << " " << to_string(kv) << (listed ? " listed" : "") << " heads " << t.shape.heads
                             << "/" << t.shape.kv_heads << " x " << t.shape.head_dim << " rows " << t.rows
                             << " keys " << t.keys);
          require_close(got[0], want, 1e-5, "against the reference");
          REQUIRE(got[1] == got[0]);
          REQUIRE(got[2] == got[0]);
        }
      }
    }
  }
}

// Back-to-back small jobs: a worker that is late leaving one job must not claim a
// task of the next (a race the pool once had: run twice, or run the old job's call).
TEST_CASE("the thread pool keeps back-to-back jobs apart", "[threads]") {
  threads::ThreadPool pool(2);
  std::atomic<int> a[3], b[3];
  bool ok = true;
  for (int repeat = 0; repeat < 20000 && ok; ++repeat) {
    const size_t tasks = 1 + repeat % 3;
    auto* hits = repeat % 2 ? a : b;
    for (size_t t = 0; t < 3; ++t) hits[t] = 0;
    pool.run(tasks, [&](size_t task, size_t) { hits[task].fetch_add(1); });
    for (size_t t = 0; t < 3; ++t) ok &= hits[t].load() == (t < tasks ? 1 : 0);
  }
  REQUIRE(ok);
}

TEST_CASE("the thread pool runs every task exactly once, call after call", "[threads]") {
  threads::ThreadPool pool(4);
  for (size_t tasks : {1, 2, 3, 7, 64, 1000}) {
    for (int repeat = 0; repeat < 50; ++repeat) {
      std::vector<std::atomic<int>> hits(tasks);
      std::atomic<bool> bad_thread{false};  // Catch2 assertions are not thread-safe
      pool.run(tasks, [&](size_t task, size_t thread) {
        if (thread >= pool.size()) bad_thread = true;
        hits[task].fetch_add(1);
      });
      REQUIRE_FALSE(bad_thread);
      for (auto& h : hits) REQUIRE(h.load() == 1);
    }
  }
}
