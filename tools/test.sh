#!/usr/bin/env bash
# The README's test command (also what CI runs): every test, in a release build
# and under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

tools/install-deps.sh

echo "== release build + tests"
cmake --preset release -DPETREL_BUILD_BENCH=ON >/dev/null
cmake --build --preset release -j"$jobs"
ctest --preset release -j"$jobs"

echo "== ASan/UBSan build + tests"
cmake --preset asan >/dev/null
cmake --build --preset asan -j"$jobs"
ctest --preset asan -j"$jobs"
