#!/bin/sh
# Converts the Firefox-shaped student for Petrel and races Petrel's JavaScript package
# against bergamot-translator on it (markup_speed.mjs; README.md here).
#   bench/wasm-markup/run.sh [--pkg DIR] [other markup_speed.mjs options] > result.json
# PETREL_CONVERT: the native converter (default build/release/tools/petrel-convert).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CONVERT=${PETREL_CONVERT:-$ROOT/build/release/tools/petrel-convert}
MODEL_DIR=$ROOT/build/wasm-markup
MODEL=$MODEL_DIR/firefox-student.petrel

if [ ! -x "$CONVERT" ]; then
  echo "run.sh: $CONVERT not found: cmake --preset release && cmake --build --preset release" >&2
  exit 2
fi
mkdir -p "$MODEL_DIR"
# Converted on every run (about a second), so the file always matches the converter.
"$CONVERT" "$ROOT/tools/firefox-student" -o "$MODEL" --quiet

# The host, for the record (JSON on stdout stays clean).
lscpu | grep -E '^Model name' >&2 || true
echo "node $(node --version)" >&2
exec nice -n 0 node "$ROOT/bench/wasm-markup/markup_speed.mjs" --petrel-model "$MODEL" "$@"
