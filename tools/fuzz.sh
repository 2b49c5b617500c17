#!/usr/bin/env bash
# Fuzzes Petrel's parsers of untrusted input with libFuzzer, one target at a time
# (tests/fuzz/README.md lists them):
#   tools/fuzz.sh --minutes N [TARGET...]    a campaign: N minutes per target (default: all targets)
#   tools/fuzz.sh --seconds S [TARGET...]    the same in seconds (e.g. 60 per target)
#   --no-build                               use build/fuzz as it is (already built)
#   --parallel N                             N targets at a time (default 1; CI: the core count)
# Builds the fuzz preset (clang, libFuzzer, ASan + UBSan), then runs each target on a
# working corpus (build/fuzz/corpus/TARGET: the committed seeds plus what earlier runs
# found, so coverage keeps growing between campaigns). A crash, a leak, a sanitizer
# report, an input slower than 30 s or a memory blow-up (one allocation over 256 MB, or
# a process over 1.5 GB) is a finding: its
# reproducer is written to build/fuzz/findings/TARGET/ (emptied when the target starts:
# keep what you need) and the script exits non-zero after all targets ran. Prints
# executions, coverage (cov: edges, ft: features) and findings per target; full logs
# in build/fuzz/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=""
build=true
parallel=1
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --minutes) seconds=$(( $2 * 60 )); shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --no-build) build=false; shift ;;
    --parallel) parallel=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "tools/fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [[ -z "$seconds" || ! "$seconds" =~ ^[0-9]+$ || "$seconds" -eq 0 ]]; then
  echo "tools/fuzz.sh: give the time per target: --minutes N or --seconds S (see --help)" >&2
  exit 2
fi
if [[ ! "$parallel" =~ ^[1-9][0-9]*$ ]]; then
  echo "tools/fuzz.sh: --parallel takes a count of targets (1 or more), not '$parallel'" >&2
  exit 2
fi
# The targets: tests/fuzz/CMakeLists.txt's PETREL_FUZZ_TARGETS, the one list there is.
mapfile -t all < <(sed -n '/^set(PETREL_FUZZ_TARGETS fuzz_/,/)/p' tests/fuzz/CMakeLists.txt | grep -oE 'fuzz_[a-z0-9_]+')
[[ ${#all[@]} -ge 10 ]] || { echo "tools/fuzz.sh: no PETREL_FUZZ_TARGETS list in tests/fuzz/CMakeLists.txt" >&2; exit 2; }
[[ ${#targets[@]} -eq 0 ]] && targets=("${all[@]}")
for t in "${targets[@]}"; do
  [[ " ${all[*]} " == *" $t "* ]] || { echo "tools/fuzz.sh: unknown target $t (${all[*]})" >&2; exit 2; }
done

if $build; then
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j"$(nproc)" --target "${targets[@]}"
fi

out=build/fuzz
# Fuzzes one target; its one-line result goes to $out/logs/TARGET.result.
fuzz_one() {
  local t=$1
  local corpus=$out/corpus/$t findings=$out/findings/$t log=$out/logs/$t.log result=$out/logs/$t.result
  rm -rf "$findings"
  mkdir -p "$corpus" "$findings"
  local dict=()
  [[ -f tests/fuzz/$t.dict ]] && dict=(-dict="tests/fuzz/$t.dict")
  # Inputs near a megabyte: bugs of time, memory and depth show only there (#24: a pickle
  # copying one memoized value, a piece with a 4 MB prefix, a line of '>'); libFuzzer's
  # default stops at the corpus's longest file.
  local max_len=()
  case $t in fuzz_pytorch_checkpoint | fuzz_text | fuzz_spm_model) max_len=(-max_len=1100000) ;; esac
  local status=0
  # One process per target (-jobs=1 is the default); --parallel runs targets side by side.
  # -report_slow_units as -timeout: libFuzzer writes a "slow unit" from 10 s, and any file
  # written counts as a finding here (a chat template at its work budget, 0.4 s in a
  # release build, ran 11 s instrumented).
  # Memory per execution: one allocation over 256 MB is a finding (-malloc_limit_mb; a
  # chat template's `[0] * 16777216` asked for 1.2 GB at once), and so is a process over
  # 1.5 GB (-rss_limit_mb: ASan's shadow and quarantine included; a split into 16 M
  # strings reached 3.4 GB in small pieces). Petrel's devices have no overcommit.
  "$out/tests/fuzz/$t" "$corpus" "tests/fuzz/corpus/$t" "${dict[@]}" "${max_len[@]}" \
    -max_total_time="$seconds" -timeout=30 -report_slow_units=30 -rss_limit_mb=1536 -malloc_limit_mb=256 \
    -print_final_stats=1 \
    -artifact_prefix="$findings/" >"$log" 2>&1 || status=$?
  local executions rate coverage found
  executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  coverage=$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+' || true)
  found=$(ls "$findings" 2>/dev/null | tr '\n' ' ')
  if [[ $status -ne 0 || -n "$found" ]]; then
    { echo "$t: FINDING (exit $status) after ${executions:-?} executions: ${found:-see $log}"
      grep -E 'ERROR: |runtime error|SUMMARY|broken promise|terminate called|what\(\)' "$log" | head -6 | sed 's/^/    /'
      # A clean clone's CI keeps only its log: a small reproducer travels in it.
      for f in "$findings"/*; do
        [[ -f "$f" && $(stat -c %s "$f") -le 16384 ]] && { echo "    $(basename "$f") as base64:"; base64 -w 100 "$f" | sed 's/^/      /'; }
      done; } >"$result"
    return 1
  fi
  echo "$t: ${executions:-?} executions in ${seconds} s (${rate:-?}/s), ${coverage:-cov ?}, corpus $(ls "$corpus" | wc -l) inputs, no findings" >"$result"
}

mkdir -p "$out/logs"
failed=()
declare -A pid_of
running=0
for t in "${targets[@]}"; do
  if [[ $running -ge $parallel ]]; then wait -n || true; running=$((running - 1)); fi
  fuzz_one "$t" &
  pid_of[$t]=$!
  running=$((running + 1))
done
for t in "${targets[@]}"; do  # results in the targets' order
  wait "${pid_of[$t]}" || failed+=("$t")
  cat "$out/logs/$t.result"
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "tools/fuzz.sh: findings in ${failed[*]} (reproducers in $out/findings/; re-run one with $out/tests/fuzz/TARGET FILE)" >&2
  exit 1
fi
