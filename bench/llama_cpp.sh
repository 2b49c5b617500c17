#!/usr/bin/env bash
# llama.cpp's side of the decoder-only benchmark (issue #28): Gemma 3 270M / 1B shapes,
# random weights, GGUF Q8_0 / Q4_0 (llama-quantize's default mix) / Q4_0-pure.
#
#   bench/llama_cpp.sh LLAMA_BUILD_DIR STANDIN_DIR [OUT_DIR]
#
# LLAMA_BUILD_DIR  a CPU Release build of llama.cpp with llama-bench, llama-simple and
#                  llama-quantize in bin/ (bench/README.md, "Against llama.cpp", says how)
# STANDIN_DIR      holds gemma-3-270m/ and gemma-3-1b/; missing checkpoints and GGUF files
#                  are made with tools/reference/make_lm_standin.py and write_gguf.py
#                  (the latter needs llama.cpp's gguf-py: LLAMA_SRC, default: the build's
#                  CMAKE_HOME_DIRECTORY)
# OUT_DIR          raw outputs (default: STANDIN_DIR/results-<UTC time>)
#
# Environment: ROUNDS (3) rounds of llama-bench over all files, interleaved; REPS (5), its
# -r; THREADS (1,2); PP (128), TG (128); TIMEOUT (unset): seconds per llama-bench run;
# LOADS (5, 0 skips) llama-simple runs per file for load time and peak RSS; SHAPES
# ("gemma-3-270m gemma-3-1b"); TYPES ("Q8_0 Q4_0 Q4_0-pure"); DRAM_GBPS (unset): main-memory
# read bandwidth in GB/s (petrel_probe) for the DRAM-ceiling column.
# Prints one JSON object per file, then a table: per test, the median of all ROUNDS x REPS
# llama-bench samples (llama-bench itself reports their mean). Records `uptime` before every
# run: the figures mean little when the load average is above ~0.5 on this 2-core host.
set -euo pipefail

if [[ $# -lt 2 ]]; then
  sed -n '2,22p' "$0"; exit 2
fi
BUILD=$(cd "$1" && pwd)
STANDINS=$(mkdir -p "$2" && cd "$2" && pwd)
OUT=${3:-$STANDINS/results-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-3}; REPS=${REPS:-5}; THREADS=${THREADS:-1,2}; PP=${PP:-128}; TG=${TG:-128}
LOADS=${LOADS:-5}
SHAPES=${SHAPES:-"gemma-3-270m gemma-3-1b"}
TYPES=${TYPES:-"Q8_0 Q4_0 Q4_0-pure"}
PY=/usr/bin/python3
if [[ -z "${LLAMA_SRC:-}" ]]; then
  LLAMA_SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt")
fi
for b in llama-bench llama-simple llama-quantize; do
  [[ -x "$BUILD/bin/$b" ]] || { echo "missing $BUILD/bin/$b" >&2; exit 1; }
done

# 1. checkpoints and GGUF files
for s in $SHAPES; do
  d=$STANDINS/$s
  [[ -f $d/model.safetensors ]] || $PY "$HERE/tools/reference/make_lm_standin.py" "$s" "$d"
  need=()
  for t in $TYPES; do [[ -f $d/gguf/model-$t.gguf ]] || need+=("$t"); done
  if [[ ${#need[@]} -gt 0 ]]; then
    PYTHONPATH=$LLAMA_SRC/gguf-py $PY "$HERE/tools/reference/write_gguf.py" "$d" "$d/gguf" \
      --quantize "$BUILD/bin/llama-quantize" --types "${need[@]}"
  fi
done

{
  echo "date: $(date -u +%FT%TZ)"
  echo "cpu: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p'), $(nproc) CPUs"
  echo "llama.cpp source: $LLAMA_SRC ($(cat "$LLAMA_SRC/PETREL_SOURCE.txt" 2>/dev/null || echo 'commit unknown'))"
  echo "cmake flags: $(grep -E '^(CMAKE_BUILD_TYPE|GGML_NATIVE|GGML_OPENMP|GGML_CPU_REPACK|GGML_AVX512|LLAMA_CURL|CMAKE_C_COMPILER):' "$BUILD/CMakeCache.txt" | tr '\n' ' ')"
} | tee "$OUT/env.txt"

# Every file in the page cache as after a restart (large folios, however it was written),
# as bench/petrel_lm.sh puts Petrel's files.
for s in $SHAPES; do
  for t in $TYPES; do $PY "$HERE/bench/page_cache.py" "$STANDINS/$s/gguf/model-$t.gguf"; done
done | tee -a "$OUT/env.txt"

# 2. speed: llama-bench, ROUNDS rounds, the files interleaved within a round
for r in $(seq 1 "$ROUNDS"); do
  for s in $SHAPES; do
    for t in $TYPES; do
      f=$STANDINS/$s/gguf/model-$t.gguf
      tag=$s.$t.r$r
      echo "$tag $(uptime)" | tee -a "$OUT/uptime.txt" >&2
      # jsonl: one line per finished test, so a run cut short by TIMEOUT keeps what it finished
      ${TIMEOUT:+timeout "$TIMEOUT"} "$BUILD/bin/llama-bench" -m "$f" -p "$PP" -n "$TG" -t "$THREADS" \
        -r "$REPS" -o jsonl > "$OUT/bench.$tag.jsonl" 2> "$OUT/bench.$tag.log" \
        || echo "$tag: llama-bench exited with $? (TIMEOUT=${TIMEOUT:-})" | tee -a "$OUT/uptime.txt" >&2
    done
  done
done

# 3. load time and peak RSS (LOADS=0 skips): a fresh llama-simple per run (mmap on, the default), a 5-token
# prompt, 8 tokens generated. llama.cpp's "load time" runs from the start of the model load
# to the end of the first decode (src/llama-context.cpp: "a more accurate load time, upon
# first eval"), so it includes the prompt's eval and the page faults of mmap. Warm page cache.
for s in $SHAPES; do
  for t in $TYPES; do
    f=$STANDINS/$s/gguf/model-$t.gguf
    for i in $(seq 1 "$LOADS"); do
      tag=$s.$t.l$i
      echo "$tag $(uptime)" | tee -a "$OUT/uptime.txt" >&2
      /usr/bin/time -v "$BUILD/bin/llama-simple" -m "$f" -n 8 "The quick brown fox" \
        > "$OUT/load.$tag.out" 2> "$OUT/load.$tag.log"
    done
  done
done

# 4. summary
PYTHONPATH=$LLAMA_SRC/gguf-py $PY - "$OUT" "$STANDINS" "$SHAPES" "$TYPES" "${DRAM_GBPS:-}" <<'EOF'
import glob, json, os, re, statistics as st, sys
import gguf
out, standins, shapes, types = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
dram = float(sys.argv[5]) if sys.argv[5] else None
def med(xs): return st.median(xs) if xs else float("nan")
def weight_bytes(path):
    """Bytes of weights one generated token reads: every tensor once (token_embd as the
    tied output projection; the embedding lookup adds one row, ignored), KV cache not counted."""
    r = gguf.GGUFReader(path)
    return sum(int(t.n_bytes) for t in r.tensors), {t.name: t.tensor_type.name for t in r.tensors if t.name in ("token_embd.weight", "blk.0.ffn_down.weight", "blk.0.attn_q.weight")}
rows = []
for s in shapes:
    for t in types:
        f = f"{standins}/{s}/gguf/model-{t}.gguf"
        speed = {}
        entries = []
        for path in sorted(glob.glob(f"{out}/bench.{s}.{t}.r*.json*")):
            txt = open(path).read()
            entries += json.loads(txt) if path.endswith(".json") else [json.loads(l) for l in txt.splitlines() if l.strip()]
        for e in entries:
            test = f"pp{e['n_prompt']}" if e["n_gen"] == 0 else f"tg{e['n_gen']}"
            speed.setdefault((test, e["n_threads"]), []).extend(e.get("samples_ts") or [e["avg_ts"]])
        loads, rss, wall = [], [], []
        for path in sorted(glob.glob(f"{out}/load.{s}.{t}.l*.log")):
            txt = open(path).read()
            m = re.search(r"load time =\s*([\d.]+) ms", txt)
            if m: loads.append(float(m.group(1)))
            m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", txt)
            if m: rss.append(int(m.group(1)) / 1024)
            m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", txt)
            if m: wall.append(1e3 * (int(m.group(1) or 0) * 3600 + int(m.group(2)) * 60 + float(m.group(3))))
        wb, kinds = weight_bytes(f)
        row = {"shape": s, "type": t, "file_MiB": round(os.path.getsize(f) / 2**20, 1),
               "weight_MB_per_token": round(wb / 1e6, 1), "tensor_types": kinds,
               "load_ms_median": round(med(loads), 1), "process_wall_ms_median": round(med(wall), 1),
               "peak_rss_MiB_median": round(med(rss), 1),
               "loads": len(loads)}
        if dram:
            row["dram_floor_ms_per_token"] = round(wb / (dram * 1e9) * 1e3, 2)
            row["dram_ceiling_tps"] = round(dram * 1e9 / wb, 1)
        for (test, th), v in sorted(speed.items()):
            row[f"{test}_t{th}_tps_median"] = round(med(v), 2)
            row[f"{test}_t{th}_tps_samples"] = [round(x, 2) for x in v]
        rows.append(row)
        print(json.dumps(row))
keys = sorted({k for r in rows for k in r if k.endswith("_tps_median")})
print()
print("| model | file MiB | weights MB/token | " + " | ".join(k.replace("_tps_median", " t/s") for k in keys)
      + " | load ms | llama-simple wall ms | peak RSS MiB | DRAM ceiling t/s |")
print("|---" * (len(keys) + 7) + "|")
for r in rows:
    print(f"| {r['shape']} {r['type']} | {r['file_MiB']} | {r['weight_MB_per_token']} | "
          + " | ".join(str(r.get(k, "")) for k in keys)
          + f" | {r['load_ms_median']} | {r['process_wall_ms_median']} | {r['peak_rss_MiB_median']} | {r.get('dram_ceiling_tps', '')} |")
json.dump(rows, open(f"{out}/summary.json", "w"), indent=1)
EOF
echo "raw outputs: $OUT" >&2
