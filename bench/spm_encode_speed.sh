#!/usr/bin/env bash
# Times Debian's spm_encode / spm_decode and Petrel's spm_tool (tests/spm_tool.cpp) on
# the same lines (the held-out corpus), whole processes as a user runs them: model load,
# reading stdin, writing stdout. Medians of RUNS runs.
#   bench/spm_encode_speed.sh [BUILD_DIR] [RUNS]     (default build/release, 5)
set -euo pipefail
build=${1:-build/release} runs=${2:-5}
fixtures=$(dirname "$0")/../tests/fixtures/sentencepiece
tool=$build/tests/spm_tool
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
xz -dc "$fixtures/corpus.txt.xz" >"$work/corpus.txt"
lines=$(wc -l <"$work/corpus.txt")
echo "corpus: $lines lines, $(wc -c <"$work/corpus.txt") bytes; median of $runs runs"

median_seconds() {  # command... (stdin: $work/in)
  local times=()
  for ((i = 0; i < runs; ++i)); do
    local start end
    start=$(date +%s.%N)
    "$@" <"$work/in" >/dev/null
    end=$(date +%s.%N)
    times+=("$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.4f", b - a }')")
  done
  printf '%s\n' "${times[@]}" | sort -g | sed -n "$(((runs + 1) / 2))p"
}

rate() { awk -v n="$lines" -v t="$1" 'BEGIN { print n / t }'; }

printf '%-26s %-12s %10s %12s %10s %12s\n' model what spm_s spm_lines/s petrel_s petrel_lines/s
for name in unigram_nfkc bpe_identity_bytes_udf; do
  model=$fixtures/models/$name.spm
  spm_encode --model="$model" --output_format=id <"$work/corpus.txt" >"$work/ids"
  for what in "encode piece" "encode id" "decode id"; do
    set -- $what
    if [[ $1 == encode ]]; then
      cp "$work/corpus.txt" "$work/in"
      a=$(median_seconds spm_encode --model="$model" --output_format=$2)
    else
      cp "$work/ids" "$work/in"
      a=$(median_seconds spm_decode --model="$model" --input_format=$2)
    fi
    b=$(median_seconds "$tool" "$model" $1 $2)
    printf '%-26s %-12s %10.3f %12.0f %10.3f %12.0f\n' "$name" "$what" "$a" "$(rate "$a")" \
      "$b" "$(rate "$b")"
  done
done
