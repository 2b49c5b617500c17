#!/usr/bin/env bash
# Throughput on a realistic workload (bench/README.md, "Many sentences"): 2,000 English
# messages from Debian's gettext catalogs with their natural length distribution, each
# configuration run one sentence at a time (--max-batch 1) and in the throughput mode
# (sorted by length, packed by a token budget), side by side. Reports inputs/s, target
# tokens/s, wall time and peak RSS (/usr/bin/time).
#   bench/throughput.sh [BUILD_DIR] [LINES]      (default build/release, 2000)
# Models: the real English->German model (tools/en-de-model, int8; outputs end at EOS as
# a real model's do), and Transformer-base int8 (make_bench_checkpoint.py; random weights
# never end on their own, so every sentence decodes exactly 32 tokens there, as in the
# end-to-end protocol) fed the same sentences' token ids.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release} lines=${2:-2000}
bin=$build/tools
work=build/bench/throughput
mkdir -p "$work"

corpus=$work/corpus-en-$lines.txt
if [[ ! -s $corpus ]]; then  # deterministic: messages of the German catalogs, by hash
  /usr/bin/python3 - "$corpus" "$lines" <<'EOF'
import hashlib, sys
sys.path.insert(0, "tools/reference")
import gettext_catalogs as g
seen = set()
for _, e in g.messages(g.catalogs("de")):
    text = " ".join(e.msgid.split())
    if 3 <= len(text) <= 300 and "\n" not in text:
        seen.add(text)
chosen = sorted(seen, key=lambda t: hashlib.sha1(t.encode()).hexdigest())[: int(sys.argv[2])]
open(sys.argv[1], "w").write("\n".join(chosen) + "\n")
EOF
fi
model=$work/en-de-int8.petrel  # converted every run: the bundled model may have changed
"$bin/petrel-convert" tools/en-de-model -o "$model" --quiet
base=build/bench/base-int8.petrel
if [[ ! -s $base ]]; then
  [[ -d build/bench/base ]] || /usr/bin/python3 tools/reference/make_bench_checkpoint.py build/bench/base
  "$bin/petrel-convert" build/bench/base -o "$base" --quiet
fi
ids=$work/corpus-ids-$lines.txt  # the same sentences as token ids (the en-de tokenizer), for the base model
[[ -s $ids ]] || "$bin/petrel-run" "$model" --tokenize --json <"$corpus" |
  /usr/bin/python3 -c "import json,sys; [print(' '.join(map(str, r['ids']))) for r in json.load(sys.stdin)['results']]" >"$ids"

run() {  # MODEL INPUT ARGS... -> "inputs/s tokens/s seconds rss_mb"
  local model=$1 input=$2
  shift 2
  /usr/bin/time -f "%M" -o "$work/rss" "$bin/petrel-run" "$model" --input "$input" --json-lines --quiet "$@" |
    tail -n 1 >"$work/summary.json"
  /usr/bin/python3 - "$work/summary.json" "$work/rss" "$input" "$model" "$@" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
rss = int(open(sys.argv[2]).read().split()[-1]) / 1024
t = s["timing"]
print(f"{s['inputs'] / t['run_s']:.1f} {t['tokens_per_s']:.0f} {t['run_s']:.1f} {rss:.0f}")
EOF
}

echo "corpus: $(wc -l <"$corpus") lines, $(wc -w <"$corpus") words; $(nproc) cores: $(lscpu | sed -n 's/Model name: *//p')"
echo "| model | beam | threads x workers | one at a time: inputs/s, tokens/s, s, RSS MB | batched: inputs/s, tokens/s, s, RSS MB | speed-up | RSS ratio |"
echo "|---|---|---|---|---|---|---|"
for what in en-de base; do
  if [[ $what == en-de ]]; then m=$model in=$corpus extra=(); else m=$base in=$ids extra=(--min-new-tokens 32 --max-new-tokens 32 --no-split); fi
  for beam in 1 4; do
    for shape in "1 1" "2 1" "1 2"; do
      read -r threads workers <<<"$shape"
      args=(--beam "$beam" --threads "$threads" "${extra[@]}")
      read -r s_rate s_tok s_sec s_rss < <(run "$m" "$in" "${args[@]}" --max-batch 1)
      read -r b_rate b_tok b_sec b_rss < <(run "$m" "$in" "${args[@]}" --workers "$workers")
      speedup=$(awk -v a="$b_rate" -v b="$s_rate" 'BEGIN { printf "%.2fx", a / b }')
      ratio=$(awk -v a="$b_rss" -v b="$s_rss" 'BEGIN { printf "%.2fx", a / b }')
      echo "| $what int8 | $beam | $threads x $workers | $s_rate, $s_tok, $s_sec, $s_rss | $b_rate, $b_tok, $b_sec, $b_rss | $speedup | $ratio |"
    done
  done
done
