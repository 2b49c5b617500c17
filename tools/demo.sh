#!/usr/bin/env bash
# The README's main command: install what is missing, build, convert the bundled
# checkpoint, describe it and translate with it.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh
cmake --preset release -DPETREL_BUILD_TESTS=OFF -DPETREL_BUILD_BENCH=OFF >/dev/null
cmake --build --preset release -j"$(nproc)" >/dev/null
bin=build/release/tools
mkdir -p build/demo

echo "== petrel-convert: bundled checkpoint -> build/demo/model.petrel"
"$bin/petrel-convert" tests/fixtures/oracle/post_swish_concat_tied -o build/demo/model.petrel
echo
echo "== petrel-inspect build/demo/model.petrel"
"$bin/petrel-inspect" build/demo/model.petrel --no-tensors
