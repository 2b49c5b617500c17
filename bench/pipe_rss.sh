#!/usr/bin/env bash
# petrel-run on inputs of growing size: peak RSS (/usr/bin/time) must not grow with the
# input (it reads a window at a time; bench/README.md, "petrel-run on a pipe").
# The input is tests/fixtures/en-de/test.en (1,310 real UI messages, 48 KB) repeated
# to each size and piped in through standard input. Tokenizing (the same reader and
# windows, no translation) runs up to 1 GB; translating (the bundled en-de model, int8,
# greedy) up to TRANSLATE_MB, since it goes at ~1-2 thousand lines/s here.
#   bench/pipe_rss.sh [BUILD_DIR] [TRANSLATE_MB]      (default build/release, 16)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release} translate_mb=${2:-16}
bin=$build/tools
work=build/bench/pipe
mkdir -p "$work"
model=$work/en-de-int8.petrel
"$bin/petrel-convert" tools/en-de-model -o "$model" --quiet
# Repeats the test lines to `mb` MiB on standard output.
feed() {
  /usr/bin/python3 -c '
import sys
data = open("tests/fixtures/en-de/test.en", "rb").read()
left = int(sys.argv[1]) << 20
out = sys.stdout.buffer
while left > 0:
    chunk = data[:left]
    out.write(chunk)
    left -= len(chunk)
' "$1"
}
measure() {  # mode mb args...
  local mode=$1 mb=$2
  shift 2
  local start=$SECONDS
  feed "$mb" | /usr/bin/time -f "%M" -o "$work/rss" "$bin/petrel-run" "$model" "$@" --quiet >"$work/out" || true
  local lines
  lines=$(wc -l <"$work/out")
  printf "| %s | %6d MiB | %9d | %5d s | %6.1f MiB |\n" "$mode" "$mb" "$lines" $((SECONDS - start)) \
    "$(echo "$(cat "$work/rss") / 1024" | bc -l)"
}
echo "| mode | input | output lines | wall | peak RSS |"
echo "|---|---|---|---|---|"
for mb in 1 16 256 1024; do measure "--tokenize" "$mb" --tokenize; done
mb=1
while ((mb <= translate_mb)); do
  measure "translate (--beam 1)" "$mb" --beam 1
  mb=$((mb * 4))
done
