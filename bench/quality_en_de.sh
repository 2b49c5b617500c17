#!/usr/bin/env bash
# Translation quality of the bundled English->German model (tools/en-de-model) on its
# 1,310-sentence test split (tests/fixtures/en-de/test.*), Petrel's model files beside the
# PyTorch model itself: corpus chrF2 and BLEU (13a) as tools/reference/metrics.py computes
# them (sacreBLEU's default settings). Text goes in and out through the engine's own
# tokenizer, each test line translated whole (--no-split, as the PyTorch side does);
# decoding uses the checkpoint's settings (forced EOS; beam stop: Hugging Face's default
# heuristic) with the beam given. The one command that produces bench/README.md's quality
# table (issue #17): re-run it when the checkpoint changes.
#   bench/quality_en_de.sh [BUILD_DIR] [SETTINGS] [--no-pytorch]
#     BUILD_DIR  default build/release
#     SETTINGS   default "f32 f16 int8 int4-out8 int4"; each names the weights of the
#                linear layers, then of the output projection (tied here to the embedding
#                table, which reads the same matrix):
#                  f32 / f16 / int8  everything in that type
#                  int4-out8         int4 layers, int8 output projection + embeddings
#                  int4              int4 everything
# The PyTorch rows need Debian's python3-torch (tools/reference/eval_en_de.py).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
settings=${2:-f32 f16 int8 int4-out8 int4}
pytorch=true
[[ "${3:-}" == "--no-pytorch" ]] && pytorch=false
bin=$build/tools
work=build/bench/en-de
mkdir -p "$work"
src=tests/fixtures/en-de/test.en ref=tests/fixtures/en-de/test.de
beams="1 4"

convert_flags() {  # SETTING -> petrel-convert flags
  case "$1" in
    f32 | f16 | int8) echo "--quantize $1 --embeddings $1" ;;
    int4-out8) echo "--quantize int4 --output-proj int8" ;;
    int4) echo "--quantize int4 --output-proj int4" ;;
    *) echo "quality_en_de.sh: unknown setting '$1' (f32 f16 int8 int4-out8 int4)" >&2; return 1 ;;
  esac
}
describe() {  # SETTING -> the table's words for it
  case "$1" in
    int4-out8) echo "int4 layers + int8 output" ;;
    int4) echo "int4 everything" ;;
    *) echo "$1" ;;
  esac
}
score() {  # HYPOTHESES -> "chrF BLEU"
  /usr/bin/python3 tools/reference/eval_en_de.py score "$1" "$ref" 2>/dev/null |
    awk '/^chrF2/ { chrf = $3 } /^BLEU/ { bleu = $3 } END { printf "%s %s\n", chrf, bleu }'
}
seconds_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# Translate and score everything first: the table shows each row's chrF beside int8's.
declare -A chrf bleu wall size
for setting in $settings; do
  model=$work/en-de-$setting.petrel
  flags=$(convert_flags "$setting")  # an unknown setting stops the script here
  # shellcheck disable=SC2086  # the flags are words
  "$bin/petrel-convert" tools/en-de-model -o "$model" $flags --quiet
  size[$setting]=$(du -k "$model" | cut -f1)
  for beam in $beams; do
    out=$work/petrel-$setting-beam$beam.de
    start=$(date +%s.%N)
    "$bin/petrel-run" "$model" --input "$src" --no-split --beam "$beam" --quiet >"$out"
    wall[$setting,$beam]=$(seconds_since "$start")
    read -r "chrf[$setting,$beam]" "bleu[$setting,$beam]" < <(score "$out")
  done
done

echo "checkpoint: tools/en-de-model ($(head -1 tools/en-de-model/README.md | sed 's/^# *//')," \
  "model.safetensors sha256 $(sha256sum tools/en-de-model/model.safetensors | cut -c1-12))"
echo
echo "| weights | file | decoding | chrF2 | BLEU | chrF2 − int8 | lines as int8's | wall time (1 thread) |"
echo "|---|---|---|---|---|---|---|---|"
for setting in $settings; do
  for beam in $beams; do
    delta="" same=""
    if [[ -n "${chrf[int8,$beam]:-}" && $setting != int8 ]]; then
      delta=$(awk -v a="${chrf[$setting,$beam]}" -v b="${chrf[int8,$beam]}" 'BEGIN { printf "%+.2f", a - b }')
      same=$(paste -d '\t' "$work/petrel-$setting-beam$beam.de" "$work/petrel-int8-beam$beam.de" |
        awk -F '\t' '$1 == $2 { n++ } END { printf "%d / %d", n, NR }')
    fi
    echo "| Petrel $(describe "$setting") | ${size[$setting]} KiB | $([[ $beam == 1 ]] && echo greedy || echo "beam $beam") |" \
      "${chrf[$setting,$beam]} | ${bleu[$setting,$beam]} | $delta | $same | ${wall[$setting,$beam]} s |"
  done
done
if $pytorch && /usr/bin/python3 -c "import torch" 2>/dev/null; then
  for beam in $beams; do
    out=$work/pytorch-beam$beam.de
    start=$(date +%s.%N)
    /usr/bin/python3 tools/reference/eval_en_de.py translate tools/en-de-model --beam "$beam" --output "$out" \
      >/dev/null 2>&1
    seconds=$(seconds_since "$start")
    read -r c b < <(score "$out")
    echo "| PyTorch f32 (the oracle) | | $([[ $beam == 1 ]] && echo greedy || echo "beam $beam") | $c | $b | | | ${seconds} s |"
  done
fi
