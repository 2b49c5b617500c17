#!/usr/bin/env bash
# Petrel's side of the decoder-only benchmark (issue #28), measured as llama-bench measures
# llama.cpp (bench/llama_cpp.sh): prompt processing of PP tokens (tokens/s of the prefill),
# generation of TG tokens after a one-token prompt (tokens/s of the TG one-token steps, EOS
# ignored; the sampler's time included), load time and
# peak RSS of a fresh process, at 1 and 2 threads. Each file is first put into the page
# cache as after a restart (bench/page_cache.py).
#
#   bench/petrel_lm.sh PETREL_RUN MODEL.petrel...
#
# Environment: REPS (5) runs per test, the median reported; THREADS ("1 2"); PP (128), TG (128).
# Prints one JSON object per model and thread count. Records `uptime` with each: the figures
# mean little when the load average is above ~0.5 on a 2-core host.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  sed -n '2,12p' "$0"; exit 2
fi
RUN=$1; shift
REPS=${REPS:-5}; THREADS=${THREADS:-"1 2"}; PP=${PP:-128}; TG=${TG:-128}
PY=/usr/bin/python3

for model in "$@"; do
  # In the page cache as after a restart (large folios), as bench/llama_cpp.sh puts its files.
  $PY "$(dirname "$0")/page_cache.py" "$model" >&2
  vocab=$("$(dirname "$RUN")/petrel-inspect" --json "$model" | $PY -c "import json,sys; print(json.load(sys.stdin)['vocab_size'])")
  # A fixed prompt of PP ids spread over the vocabulary (random weights: any ids will do).
  prompt=$($PY -c "print(' '.join(str(2 + (i * 7919) % ($vocab - 2)) for i in range($PP)))")
  for t in $THREADS; do
    load=$(uptime | sed 's/.*load average: //')
    pp=(); tg=(); load_ms=(); rss=()
    for r in $(seq "$REPS"); do
      out=$(/usr/bin/time -f "%M" -o /tmp/petrel_lm_rss.$$ "$RUN" "$model" --ids "$prompt" --max-new-tokens 1 \
            --ignore-eos --threads "$t" --json --quiet)
      pp+=("$(echo "$out" | $PY -c "import json,sys; t=json.load(sys.stdin)['timing']; print(t['prompt_tokens_per_s'])")")
      # TG + 1 tokens: the first comes from the prompt's prefill, then TG steps of one token each.
      out=$(/usr/bin/time -f "%M" -o /tmp/petrel_lm_rss.$$ "$RUN" "$model" --ids "2" --max-new-tokens $((TG + 1)) \
            --ignore-eos --threads "$t" --json --quiet)
      tg+=("$(echo "$out" | $PY -c "import json,sys; t=json.load(sys.stdin)['timing']; print((t['generated_tokens'] - 1) / (t['generate_ms'] / 1000))")")
      load_ms+=("$(echo "$out" | $PY -c "import json,sys; print(json.load(sys.stdin)['timing']['load_ms'])")")
      rss+=("$(cat /tmp/petrel_lm_rss.$$)")
    done
    rm -f /tmp/petrel_lm_rss.$$
    $PY - "$model" "$t" "$load" "$(stat -c %s "$model")" "${pp[*]}" "${tg[*]}" "${load_ms[*]}" "${rss[*]}" <<'EOF'
import json, statistics, sys
model, threads, load, size, pp, tg, load_ms, rss = sys.argv[1:]
nums = lambda s: [float(x) for x in s.split()]
print(json.dumps({"model": model, "threads": int(threads), "file_mib": round(int(size) / 2**20, 1),
                  "pp_tokens_per_s": round(statistics.median(nums(pp)), 1),
                  "tg_tokens_per_s": round(statistics.median(nums(tg)), 2),
                  "load_ms": round(statistics.median(nums(load_ms)), 2),
                  "peak_rss_mib": round(statistics.median(nums(rss)) / 1024, 1),
                  "uptime_load": load}))
EOF
  done
done
