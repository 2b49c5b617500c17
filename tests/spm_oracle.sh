#!/usr/bin/env bash
# Petrel's SentencePiece against Debian's, line for line, over the held-out corpus
# (tests/fixtures/sentencepiece/corpus.txt.xz) and one committed model:
# spm_encode --output_format=piece|id and spm_decode --input_format=id|piece against
# spm_tool (tests/spm_tool.cpp) on the same input; any differing line fails.
# (ctest runs one test per model, so they run in parallel.)
#
#   spm_oracle.sh SPM_TOOL MODEL CORPUS_XZ MAX_LINES [EMULATOR...]
#
# MAX_LINES 0 means the whole corpus. PETREL_TEST_SUBSET set (sanitizer and emulated
# runs; the release run checks everything) keeps every 10th line.
# Without spm_encode (Debian package `sentencepiece`)
# or xz it fails, unless PETREL_TEST_SKIP names the tool ("spm" or "xz"): then it exits 77
# (ctest: skipped).
set -euo pipefail

tool=$1 model=$2 corpus_xz=$3 max_lines=$4
shift 4
emulator=("$@")

# A missing tool fails the test unless PETREL_TEST_SKIP (comma-separated) names it.
need() {  # command name-in-PETREL_TEST_SKIP package
  command -v "$1" >/dev/null && return 0
  if [[ ",${PETREL_TEST_SKIP:-}," == *",$2,"* ]]; then
    echo "SKIPPED: $1 is not installed (Debian package '$3') and PETREL_TEST_SKIP names $2"
    exit 77
  fi
  echo "FAILED: $1 is not installed (Debian package '$3'); the oracle comparison needs it" \
       "(PETREL_TEST_SKIP=$2 skips it)"
  exit 1
}
need spm_encode spm sentencepiece
need spm_decode spm sentencepiece
need xz xz xz-utils

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ "$max_lines" -gt 0 ]]; then
  { xz -dc "$corpus_xz" || true; } | head -n "$max_lines" >"$work/all.txt"  # xz: SIGPIPE
else
  xz -dc "$corpus_xz" >"$work/all.txt"
fi
if [[ -n "${PETREL_TEST_SUBSET:-}" ]]; then
  awk 'NR % 10 == 1' "$work/all.txt" >"$work/corpus.txt"
else
  mv "$work/all.txt" "$work/corpus.txt"
fi
lines=$(wc -l <"$work/corpus.txt")
echo "corpus: $lines lines, $(wc -c <"$work/corpus.txt") bytes"

# Compares two outputs line for line; prints the first difference.
same() {  # what expected actual
  if cmp -s "$2" "$3"; then return 0; fi
  echo "  $1 differs:"
  diff <(nl -ba "$2") <(nl -ba "$3") | head -n 6 | sed 's/^/    /'
  return 1
}

name=$(basename "$model" .spm)
ok=1
for format in piece id; do
  spm_encode --model="$model" --output_format=$format <"$work/corpus.txt" >"$work/want.$format"
  "${emulator[@]}" "$tool" "$model" encode $format <"$work/corpus.txt" >"$work/got.$format"
  same "encode $format" "$work/want.$format" "$work/got.$format" || ok=0
  # Decoding reads the oracle's encoding, so a decode check does not depend on ours.
  spm_decode --model="$model" --input_format=$format <"$work/want.$format" >"$work/want.decode"
  "${emulator[@]}" "$tool" "$model" decode $format <"$work/want.$format" >"$work/got.decode"
  same "decode $format" "$work/want.decode" "$work/got.decode" || ok=0
done
pieces=$(wc -w <"$work/want.id")
if [[ $ok == 1 ]]; then
  echo "$name: $lines lines ($pieces pieces): encode piece/id and decode id/piece identical"
else
  echo "$name: FAILED"
  exit 1
fi
