#!/usr/bin/env bash
# Speculative decoding beside plain decoding, in one run, one thread, one input at a time:
# the same model's greedy output with and without drafts (prompt lookup, a draft model),
# tokens per second, the drafts' acceptance rate and the tokens each verification gave.
# Every speculative run's outputs are checked equal to the plain run's (the script fails
# otherwise): speculation may only change the speed.
#   bench/speculation.sh [BUILD_DIR] [LINES] [DRAFT_DIR...]
#     BUILD_DIR  default build/release
#     LINES      test lines (default 300: the first of tests/fixtures/en-de/test.en, held out
#                from every model trained here)
#     DRAFT_DIR  Hugging Face translation checkpoints with the teacher's vocabulary to draft
#                with (default: tools/en-de-draft when it exists); the teacher's own int4
#                file always drafts too (issue #60's "the model's own lower-precision file")
# Repeats each run REPEATS times (environment, default 3) and keeps the fastest.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
lines=${2:-300}
shift $(( $# > 2 ? 2 : $# )) || true
drafts=("$@")
[[ ${#drafts[@]} -eq 0 && -f tools/en-de-draft/config.json ]] && drafts=(tools/en-de-draft)
repeats=${REPEATS:-3}
bin=$build/tools
work=build/bench/speculation
mkdir -p "$work"
head -n "$lines" tests/fixtures/en-de/test.en > "$work/test.en"

"$bin/petrel-convert" tools/en-de-model -o "$work/teacher-int8.petrel" --quiet
"$bin/petrel-convert" tools/en-de-model -o "$work/teacher-int4.petrel" --quantize int4 --output-proj int4 --quiet
draft_files=("$work/teacher-int4.petrel")
for d in "${drafts[@]}"; do  # each draft in int8 and in int4 (a quarter of the teacher's step)
  "$bin/petrel-convert" "$d" -o "$work/$(basename "$d")-int8.petrel" --quiet
  "$bin/petrel-convert" "$d" -o "$work/$(basename "$d")-int4.petrel" --quantize int4 --output-proj int4 --quiet
  draft_files+=("$work/$(basename "$d")-int8.petrel" "$work/$(basename "$d")-int4.petrel")
done

# run NAME FLAGS...: the fastest of the repeats' JSON summaries, as NAME.json
run() {
  local name=$1
  shift
  for _ in $(seq "$repeats"); do
    "$bin/petrel-run" "$work/teacher-int8.petrel" --input "$work/test.en" --beam 1 --max-batch 1 --threads 1 \
      --json "$@" > "$work/try.json"
    python3 - "$work/try.json" "$work/$name.json" <<'EOF'
import json, os, sys
tried, kept = sys.argv[1], sys.argv[2]
t = json.load(open(tried))
if not os.path.exists(kept) or t["timing"]["run_s"] < json.load(open(kept))["timing"]["run_s"]:
    os.replace(tried, kept)
EOF
  done
}
rm -f "$work"/*.json
run plain
run lookup2 --lookup 2
run lookup3-k6 --lookup 3 --max-draft 6
for f in "${draft_files[@]}"; do
  run "draft-$(basename "$f" .petrel)" --draft "$f"
  run "draft-$(basename "$f" .petrel)-k4" --draft "$f" --max-draft 4
  run "draft-$(basename "$f" .petrel)-lookup2" --draft "$f" --lookup 2
  case "$f" in  # a draft trained on the teacher's frozen encoder reads the teacher's states
    *teacher*) ;;
    *) run "draft-$(basename "$f" .petrel)-shared-encoder" --draft "$f" --draft-shares-encoder
       run "draft-$(basename "$f" .petrel)-shared-encoder-lookup2" --draft "$f" --draft-shares-encoder --lookup 2 ;;
  esac
done

rm -f "$work/try.json"
python3 - "$work" <<'EOF'
import glob, json, os, subprocess, sys
work = sys.argv[1]
runs = {os.path.basename(p)[:-5]: json.load(open(p)) for p in glob.glob(work + "/*.json")}
plain = runs.pop("plain")
texts = lambda d: [r["hypotheses"][0]["ids"] for r in d["results"]]
want = texts(plain)
base = plain["timing"]["run_s"]
tokens = sum(len(t) for t in want)
cpu = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout.strip()
print(f"{len(want)} inputs, {tokens} output tokens, one thread, one input at a time; {cpu}")
print("| run | s | tokens/s | speed-up | acceptance | tokens per verification | same output |")
print("|---|---:|---:|---:|---:|---:|---|")
print(f"| plain greedy | {base:.2f} | {tokens / base:.0f} | 1.00x | | | |")
ok = True
for name, d in sorted(runs.items()):
    s = d["timing"]["run_s"]
    spec = d["speculation"]
    same = texts(d) == want
    ok = ok and same
    print(f"| {name} | {s:.2f} | {tokens / s:.0f} | {base / s:.2f}x | {spec['acceptance_rate']:.2f} | "
          f"{spec['tokens_per_verification']:.2f} | {'yes' if same else 'NO'} |")
sys.exit(0 if ok else 1)
EOF
