#!/usr/bin/env bash
# The README's test command (also what CI runs): every test in a release build
# (including an app built against the installed package), under AddressSanitizer +
# UndefinedBehaviorSanitizer, the concurrency tests under ThreadSanitizer, every test
# again built by clang with its sanitizers followed by 60 s of fuzzing per fuzz
# target (tools/fuzz.sh), and cross-compiled for
# aarch64 (run under qemu on a CPU with and one without the dot-product
# extension) and armv7 (run under qemu).
#   tools/test.sh            everything
#   tools/test.sh --native   x86-64 builds only
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
native_only=false
[[ "${1:-}" == "--native" ]] && native_only=true

if $native_only; then tools/install-deps.sh; else tools/install-deps.sh --cross; fi

echo "== release build + tests (x86-64; every kernel path this CPU runs)"
cmake --preset release >/dev/null
cmake --build --preset release -j"$jobs"
ctest --preset release -j"$jobs"

echo "== ASan/UBSan build + tests"
cmake --preset asan >/dev/null
cmake --build --preset asan -j"$jobs"
ctest --preset asan -j"$jobs"

echo "== ThreadSanitizer: sessions on several threads sharing one model, intra-op thread pools"
cmake --preset tsan >/dev/null
cmake --build --preset tsan -j"$jobs" --target petrel_tests
build/tsan/tests/petrel_tests "[threads],[oracle],[capi]"

echo "== clang 14 + libFuzzer + ASan/UBSan: every test and fuzz corpus, then 60 s of fuzzing per target"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j"$jobs"
ctest --preset fuzz -j"$jobs"
tools/fuzz.sh --seconds 60 --no-build

$native_only && exit 0

echo "== the same x86-64 test binary on emulated CPUs: Haswell (AVX2, no AVX-512) and Nehalem (no AVX)"
# Proves run-time dispatch: no AVX-512 or AVX instruction leaks into the paths these
# CPUs are given (qemu prints warnings about CPUID bits it does not model: dropped).
QEMU_CPU=Haswell PETREL_EXPECT_BEST_ISA=avx2 \
  qemu-x86_64 build/release/tests/petrel_tests "[oracle],[kernels]" 2>/dev/null
QEMU_CPU=Nehalem PETREL_EXPECT_BEST_ISA=scalar \
  qemu-x86_64 build/release/tests/petrel_tests "[oracle],[kernels]" 2>/dev/null

echo "== aarch64 cross build; tests under qemu -cpu max (dotprod) and -cpu cortex-a53 (no dotprod)"
cmake --preset aarch64 >/dev/null
cmake --build --preset aarch64 -j"$jobs"
QEMU_CPU=max PETREL_EXPECT_BEST_ISA=dotprod ctest --preset aarch64 -j"$jobs"
QEMU_CPU=cortex-a53 PETREL_EXPECT_BEST_ISA=neon ctest --preset aarch64 -j"$jobs"

echo "== armv7 hard-float cross build; tests under qemu -cpu cortex-a15"
cmake --preset armv7 >/dev/null
cmake --build --preset armv7 -j"$jobs"
QEMU_CPU=cortex-a15 PETREL_EXPECT_BEST_ISA=neon ctest --preset armv7 -j"$jobs"
