#!/usr/bin/env bash
# The README's main command: install what is missing, build, convert the bundled
# demo model (numbers in digits -> English words), describe it and run it.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh
cmake --preset tools >/dev/null
cmake --build --preset tools -j"$(nproc)" >/dev/null
bin=build/tools/tools
mkdir -p build/demo

echo "== petrel-convert tools/demo-model -o build/demo/numbers.petrel   (int8, scales folded)"
"$bin/petrel-convert" tools/demo-model -o build/demo/numbers.petrel | tail -n 8
echo
echo "== petrel-inspect build/demo/numbers.petrel --no-tensors"
"$bin/petrel-inspect" build/demo/numbers.petrel --no-tensors
echo
echo "== petrel-run build/demo/numbers.petrel --text 7 --text 42 ...   (greedy, one batch)"
"$bin/petrel-run" build/demo/numbers.petrel \
  --text 7 --text 42 --text 4096 --text 80808 --text 250017 --text 999999
