#!/usr/bin/env bash
# Translation quality of the bundled English->German model (tools/en-de-model) on its
# 1,310-sentence test split (tests/fixtures/en-de/test.*), Petrel's model files beside the
# PyTorch model itself: corpus chrF2 and BLEU (13a) as tools/reference/metrics.py computes
# them (sacreBLEU's default settings). Text goes in and out through the engine's own
# tokenizer; decoding uses the checkpoint's settings (forced EOS; beam stop: Hugging Face's
# default heuristic) with the beam given. Each line is translated whole (--no-split), as
# the oracle does: f32 greedy then equals PyTorch's output on every line.
#   bench/quality_en_de.sh [BUILD_DIR] [DTYPES] [--no-pytorch]
#     BUILD_DIR  default build/release; DTYPES default "f32 f16 int8"
# The PyTorch rows need Debian's python3-torch (tools/reference/eval_en_de.py).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
dtypes=${2:-f32 f16 int8}
pytorch=true
[[ "${3:-}" == "--no-pytorch" ]] && pytorch=false
bin=$build/tools
work=build/bench/en-de
mkdir -p "$work"
src=tests/fixtures/en-de/test.en ref=tests/fixtures/en-de/test.de
score() {  # HYPOTHESES -> "chrF | BLEU"
  /usr/bin/python3 tools/reference/eval_en_de.py score "$1" "$ref" 2>/dev/null |
    awk '/^chrF2/ { chrf = $3 } /^BLEU/ { bleu = $3 } END { printf "%s | %s", chrf, bleu }'
}
echo "| model | decoding | chrF2 | BLEU | wall time |"
echo "|---|---|---|---|---|"
for dtype in $dtypes; do
  model=$work/en-de-$dtype.petrel
  "$bin/petrel-convert" tools/en-de-model -o "$model" --quantize "$dtype" --embeddings "$dtype" --quiet
  for beam in 1 4; do
    out=$work/petrel-$dtype-beam$beam.de
    start=$(date +%s.%N)
    "$bin/petrel-run" "$model" --beam "$beam" --no-split <"$src" >"$out" 2>/dev/null
    seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
    echo "| Petrel $dtype ($(du -k "$model" | cut -f1) KiB) | $([[ $beam == 1 ]] && echo greedy || echo "beam $beam") | $(score "$out") | ${seconds} s |"
  done
done
if $pytorch && /usr/bin/python3 -c "import torch" 2>/dev/null; then
  for beam in 1 4; do
    out=$work/pytorch-beam$beam.de
    start=$(date +%s.%N)
    /usr/bin/python3 tools/reference/eval_en_de.py translate tools/en-de-model --beam "$beam" --output "$out" \
      >/dev/null 2>&1
    seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
    echo "| PyTorch f32 (the oracle) | $([[ $beam == 1 ]] && echo greedy || echo "beam $beam") | $(score "$out") | ${seconds} s |"
  done
fi
