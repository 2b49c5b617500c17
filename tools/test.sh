#!/usr/bin/env bash
# The README's test command (also what CI runs): every test in a release build
# (including an app built against the installed package), every test again built by
# clang under AddressSanitizer + UndefinedBehaviorSanitizer followed by 20 s of fuzzing
# per fuzz target, the concurrency tests under ThreadSanitizer, compiled to WebAssembly
# (tests and the JavaScript package under Node, the web page in headless Chromium), and
# cross-compiled for aarch64 by clang (the whole suite under qemu) and by gcc (the kernels
# under qemu on CPUs with i8mm, with dotprod only and with neither) and armv7 (every test
# but the [bulk] ones under qemu). Each stage prints its wall time. Each stage runs what
# only it can show: the release build runs every test on every kernel path this CPU has;
# the sanitized and emulated runs check a subset of the heavy tests' data
# (PETREL_TEST_SUBSET).
# Compiles go through ccache when it is installed (a second run recompiles only what
# changed, in this clone or in another at any path; set CCACHE_DISABLE=1 to measure a
# cold build).
#   tools/test.sh            everything
#   tools/test.sh --native   x86-64 builds only
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
started=$SECONDS
if command -v ccache >/dev/null; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR=$PWD  # clones at other paths share the cache
fi
# CPU minutes of every finished child process (/proc/$$/stat's cutime + cstime, in clock
# ticks): stage times on a busy machine are read against them.
cpu_minutes() { local f; read -ra f </proc/$$/stat; echo $(( (f[15] + f[16]) / $(getconf CLK_TCK) / 60 )); }
elapsed() { printf '%d:%02d' $(( (SECONDS - started) / 60 )) $(( (SECONDS - started) % 60 )); }
stage() { echo "== [$(elapsed) min, CPU $(cpu_minutes) min] $*"; }
step() { echo "-- [$(elapsed)] $*"; }  # a stage's parts (build, tests, fuzzing): where its time goes
# Runs shell commands side by side (an emulated test binary is one single-threaded
# process: one per core), then prints each one's output in order; fails if any failed.
side_by_side() {
  local dir cmd pids=() failed=0 i
  dir=$(mktemp -d)
  i=0
  for cmd in "$@"; do
    bash -c "$cmd" >"$dir/$i.log" 2>&1 &
    pids+=($!)
    i=$((i + 1))
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || failed=1
    cat "$dir/$i.log"
  done
  rm -rf "$dir"
  return $failed
}
# A test program built from some of the test files (its command, $2) must list every
# test of tag expression $1 that the whole suite (the release build's) lists.
holds_every_test() {
  if ! diff <(build/release/tests/petrel_tests --list-test-names-only "$1" | sort) \
            <($2 --list-test-names-only "$1" | sort); then
    echo "tests/CMakeLists.txt: ${2##*/} misses a file with $1 tests" >&2
    exit 1
  fi
}
# Models the tests convert are converted once per run, by the first test process that
# needs one, and loaded by every later process and stage (tests/support: shared_file):
# the sanitized and emulated builds then test loading files converted elsewhere, as
# devices do, instead of converting in emulated floating point for minutes.
export PETREL_TEST_MODEL_CACHE="$PWD/build/test-model-cache"
rm -rf "$PETREL_TEST_MODEL_CACHE"
native_only=false
[[ "${1:-}" == "--native" ]] && native_only=true

if $native_only; then tools/install-deps.sh; else tools/install-deps.sh --cross; fi

stage "layering: every #include in engine/src follows ARCHITECTURE.md's order"
tools/check_layers.sh

stage "release build + tests (x86-64; every kernel path this CPU runs)"
cmake --preset release >/dev/null
cmake --build --preset release -j"$jobs"
# No weak function of a per-ISA object may hold its ISA's instructions (the script says why).
tools/check_isa_objects.py --self-test
tools/check_isa_objects.py build/release
step "tests"
ctest --preset release -j"$jobs"
# Sanitized and WebAssembly runs below check a subset of the heavy tests' data
# (PETREL_TEST_SUBSET=5: every 5th case; whole-model tests on the chosen kernel path
# only), emulated CPUs every 20th; the release run above checks all of it.
export PETREL_TEST_SUBSET=5

stage "clang 14 + ASan/UBSan (+ libFuzzer): every test and fuzz corpus, then 20 s of fuzzing per target"
# The sanitizer build is clang's (it also proves the clang build); gcc's ASan/UBSan
# build stays available as the asan preset.
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j"$jobs"
tools/check_isa_objects.py build/fuzz
step "tests and fuzz corpora"
ctest --preset fuzz -j"$jobs"
step "fuzzing"
tools/fuzz.sh --seconds 20 --no-build --parallel "$jobs"

stage "ThreadSanitizer: sessions on several threads sharing one model, intra-op thread pools, batch workers"
cmake --preset tsan >/dev/null
cmake --build --preset tsan -j"$jobs" --target petrel_concurrency_tests
# The concurrency tests' files alone: first check they hold every such test there is.
concurrency="[threads],[capi],[batch]"
holds_every_test "$concurrency" build/tsan/tests/petrel_concurrency_tests
step "tests"
build/tsan/tests/petrel_concurrency_tests "$concurrency"

$native_only && { stage "done"; exit 0; }

stage "WebAssembly (emscripten, SIMD128): kernel/oracle tests and the JavaScript package's tests under Node; the web page in headless Chromium"
cmake --preset wasm -DPETREL_WASM_TOOLS_LINK_OPTIMIZATION=-O1 >/dev/null
# Both of the package's builds: the single-threaded one and, in build/wasm/threads (the
# engine again, with -pthread), the threaded one; the tests and the page run each.
cmake --build --preset wasm -j"$jobs"
# The package's tests compare its translations with the native build's petrel-run.
step "tests under Node"
PETREL_NATIVE_TOOLS="$PWD/build/release/tools" ctest --preset wasm -j"$jobs"
build/release/tools/petrel-convert tools/en-de-model -o build/wasm/en-de.petrel --quiet
# The page translates token by token in a real browser; its text must equal petrel-run's.
# Its screenshot is an artifact: $PETREL_ARTIFACTS (default build/artifacts)/petrel-web.png.
step "the page in Chromium"
# Its chat mode holds a conversation with a small language model: each reply must equal
# petrel-run --chat's.
build/release/tools/petrel-convert tests/fixtures/decoder_only/gemma3_chat -o build/wasm/chat.petrel --quiet \
  --quantize f32 --embeddings f32
node examples/web/test-in-chromium.mjs --model build/wasm/en-de.petrel --pkg build/wasm/js \
  --native-run build/release/tools/petrel-run --screenshot "${PETREL_ARTIFACTS:-build/artifacts}/petrel-web.png" \
  --chat-model build/wasm/chat.petrel --chat-screenshot "${PETREL_ARTIFACTS:-build/artifacts}/petrel-web-chat.png"

export PETREL_TEST_SUBSET=20
stage "the same x86-64 test binary on emulated CPUs: Haswell (AVX2, no AVX-512) and Nehalem (no AVX)"
# Proves run-time dispatch: no AVX-512 or AVX instruction leaks into the paths these
# CPUs are given: the kernel tests, and a whole translation ([portable]). The oracle
# tests already ran on every path natively, and emulated AVX is slow (over 25 min).
# (qemu prints warnings about CPUID bits it does not model: dropped).
side_by_side \
  'QEMU_CPU=Haswell PETREL_EXPECT_BEST_ISA=avx2 qemu-x86_64 build/release/tests/petrel_tests "[kernels],[portable]" 2>/dev/null' \
  'QEMU_CPU=Nehalem PETREL_EXPECT_BEST_ISA=scalar qemu-x86_64 build/release/tests/petrel_tests "[kernels],[portable]" 2>/dev/null'

stage "aarch64 cross build by clang; every test under qemu -cpu max (i8mm, dotprod)"
cmake --preset aarch64-clang >/dev/null
cmake --build --preset aarch64-clang -j"$jobs"
tools/check_isa_objects.py build/aarch64-clang
step "tests under qemu"
QEMU_CPU=max PETREL_EXPECT_BEST_ISA=i8mm ctest --preset aarch64-clang -j"$jobs"

stage "aarch64 cross build by gcc; kernels and a whole translation under qemu -cpu max, cortex-a53 (no dotprod), cortex-a76 (dotprod, no i8mm)"
# Every kernel path against the scalar reference on -cpu max; the NEON kernels on a CPU
# without dotprod (no dotprod instruction leaks into them); on cortex-a76 the choice of
# path and a whole translation (only i8mm.cpp holds i8mm instructions).
cmake --preset aarch64 >/dev/null
cmake --build --preset aarch64 -j"$jobs" --target petrel_kernel_tests
tools/check_isa_objects.py build/aarch64
# The kernel and portable tests' files alone: first check they hold every such test there is.
aarch64_tests="qemu-aarch64 -L /usr/aarch64-linux-gnu build/aarch64/tests/petrel_kernel_tests"
holds_every_test "[kernels],[portable]" "$aarch64_tests"
step "tests under qemu"
side_by_side \
  "QEMU_CPU=max PETREL_EXPECT_BEST_ISA=i8mm $aarch64_tests '[kernels],[portable]'" \
  "QEMU_CPU=cortex-a53 PETREL_EXPECT_BEST_ISA=neon $aarch64_tests '[kernels],[portable]' &&
   QEMU_CPU=cortex-a76 PETREL_EXPECT_BEST_ISA=dotprod $aarch64_tests '[portable],the best path is the one this CPU should run'"

stage "armv7 hard-float cross build; every test but the [bulk] ones under qemu -cpu cortex-a15"
# [bulk]: tests whose time goes to much data through code that is the same on every
# platform (text oracles over thousands of lines, batch scheduling, draw statistics),
# and that ran above natively, under the sanitizers and on aarch64: what armv7 alone
# shows is its own kernels and 32-bit sizes, which every other test still covers here.
# (Catch2 exits with the number of tests it lists.)
bulk_tests=$({ build/release/tests/petrel_tests --list-test-names-only "[bulk]" || true; } |
               sed -e '/^$/d' -e 's/[][\\.^$*+?()|]/\\&/g' -e 's/^/^/' -e 's/$/$/' | paste -sd'|')
[[ -n $bulk_tests ]] || { echo "no [bulk] tests listed" >&2; exit 1; }
cmake --preset armv7 >/dev/null
cmake --build --preset armv7 -j"$jobs"
step "tests under qemu"
QEMU_CPU=cortex-a15 PETREL_EXPECT_BEST_ISA=neon ctest --preset armv7 -j"$jobs" -E "$bulk_tests"
stage "done"
