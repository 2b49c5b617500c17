#!/usr/bin/env bash
# The command-line tools built as Node programs (the WebAssembly build's tools/*.js)
# against the native build's: petrel-convert.js writes the demo model byte for byte as
# petrel-convert does; petrel-run.js translates as petrel-run does, from --input and from
# a pipe; petrel-inspect.js describes the file as petrel-inspect does (but for the kernel
# path); petrel-bench.js measures it; a bad flag exits 2 and a missing file 1.
#   wasm_tools.sh NODE WASM_TOOLS_DIR SOURCE_DIR
# PETREL_NATIVE_TOOLS: the native build's tools directory (unset: skipped, exit 77).
set -euo pipefail
node=$1 wasm=$2 src=$3
native=${PETREL_NATIVE_TOOLS:-}
if [[ ! -x $native/petrel-run ]]; then
  echo "PETREL_NATIVE_TOOLS is not a native build's tools directory: skipped"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "wasm_tools: $*" >&2; exit 1; }

"$node" "$wasm/petrel-convert.js" "$src/tools/en-de-model" -o "$work/wasm.petrel" --quiet
"$native/petrel-convert" "$src/tools/en-de-model" -o "$work/native.petrel" --quiet
cmp "$work/wasm.petrel" "$work/native.petrel" || fail "petrel-convert.js wrote a different model file"

head -40 "$src/tests/fixtures/en-de/test.en" >"$work/in.txt"
"$native/petrel-run" "$work/native.petrel" --input "$work/in.txt" >"$work/native.txt" 2>/dev/null
[[ $(wc -l <"$work/native.txt") -eq 40 ]] || fail "the native petrel-run did not translate 40 lines"
"$node" "$wasm/petrel-run.js" "$work/native.petrel" --input "$work/in.txt" >"$work/wasm.txt" 2>/dev/null
cmp "$work/wasm.txt" "$work/native.txt" || fail "petrel-run.js --input translated differently"
cat "$work/in.txt" | "$node" "$wasm/petrel-run.js" "$work/native.petrel" >"$work/piped.txt" 2>/dev/null
cmp "$work/piped.txt" "$work/native.txt" || fail "petrel-run.js from a pipe translated differently"
# On a live pipe (a coprocess): each line is answered before the next is written.
coproc live { "$node" "$wasm/petrel-run.js" "$work/native.petrel" 2>/dev/null; }
for n in 1 2; do
  sed -n "${n}p" "$work/in.txt" >&"${live[1]}"
  read -r -t 120 answer <&"${live[0]}" || fail "petrel-run.js did not answer line $n before line $((n + 1)) was written"
  [[ $answer == "$(sed -n "${n}p" "$work/native.txt")" ]] || fail "petrel-run.js on a live pipe: line $n is '$answer'"
done
eval "exec ${live[1]}>&-"
wait "$live_PID"

"$native/petrel-inspect" "$work/native.petrel" --json >"$work/native.json"
"$node" "$wasm/petrel-inspect.js" "$work/native.petrel" --json >"$work/wasm.json"
"$node" -e 'const fs = require("fs");
            const [a, b] = process.argv.slice(1).map((f) => JSON.parse(fs.readFileSync(f, "utf8")));
            if (b.isa !== "simd128") process.exit(1);
            for (const r of [a, b]) { delete r.isa; delete r.isa_paths; }
            if (JSON.stringify(a) !== JSON.stringify(b)) process.exit(1);' "$work/native.json" "$work/wasm.json" ||
  fail "petrel-inspect.js describes the file differently: $(diff "$work/native.json" "$work/wasm.json")"

"$node" "$wasm/petrel-bench.js" --model "$work/native.petrel" --runs 1 --target-tokens 4 --json >"$work/bench.json"
"$node" -e 'const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
            if (!(r.isa === "simd128" && r.runs === 1 && r.sentences_per_s > 0)) process.exit(1);' "$work/bench.json" ||
  fail "petrel-bench.js printed $(cat "$work/bench.json")"

status=0
"$node" "$wasm/petrel-run.js" --no-such-flag 2>/dev/null || status=$?
[[ $status -eq 2 ]] || fail "petrel-run.js --no-such-flag exited $status, not 2"
status=0
"$node" "$wasm/petrel-run.js" "$work/absent.petrel" 2>"$work/err.txt" </dev/null || status=$?
[[ $status -eq 1 ]] && grep -q 'absent.petrel' "$work/err.txt" || fail "petrel-run.js on a missing file: exit $status, $(cat "$work/err.txt")"
echo "wasm_tools: petrel-convert.js, petrel-run.js, petrel-inspect.js and petrel-bench.js agree with the native tools"
