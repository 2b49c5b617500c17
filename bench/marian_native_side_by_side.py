#!/usr/bin/env python3
"""Petrel (native, and its WebAssembly build in Node) vs Firefox's engine
(bergamot-translator 0.4.9, WASM in Node) on one
Marian-native model of Mozilla's "tiny" shape (bench/make_firefox_tiny_standin.py),
side by side, one thread, greedy, the binary shortlist on (as Firefox), the same 300
English sentences. Prints a Markdown table (medians of --runs fresh processes).

    /usr/bin/python3 bench/marian_native_side_by_side.py [--data DIR] [--build DIR] [--runs 3]

DIR (default build/bench/firefox-tiny) is made when missing; --build holds petrel-convert
and petrel-run (default build/release/tools). Every measurement is its own process,
pinned to CPU 0 with taskset, under /usr/bin/time -v (its peak RSS is the one reported,
for both engines: Node's own number is the same counter). Per row:

* One untimed one-line run per engine first, so no row pays for reading its model file
  from disk.
* tok/s: generated tokens / translation time of all 300 lines. Tokens are the decoder
  steps: output pieces plus the EOS when the output stopped on EOS (not at the length
  limit, ceil(2 x source pieces incl. EOS)). Petrel's ids come from its --json; bergamot
  returns only text, so its pieces are the text re-encoded with the vocabulary (the
  same count applied to Petrel's text is reported as a check of that method).
  Time: Petrel's run_s (whole run: reading, batching, tokenizing, translating);
  bergamot's translate_ms (all lines, after it translated line 1 alone to build its graph).
* load: model load + first translation inside the tool (Petrel: load_ms + run_s of a
  run translating line 1 alone; bergamot: load_ms + first_ms), and the whole process's
  wall time of that one-line run (process start, for bergamot also Node and compiling
  the .wasm, to the first translation out).
* peak RSS of the 300-line run; model file: the Marian file each engine was given (and
  the .petrel file Petrel converted it into).
"""
import argparse
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

import sentencepiece as spm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BERGAMOT = os.path.join(ROOT, "tools", "reference", "bergamot")
WORKER = os.path.join(BERGAMOT, "node_modules", "@browsermt", "bergamot-translator", "worker")
EOS = 0
MAX_LENGTH_FACTOR = 2.0
BATCHES = (1, 32)


def run(cmd, stdin_path=None, stderr_json=False):
    """Runs cmd pinned to CPU 0 under /usr/bin/time -v: (stdout, peak RSS bytes, wall s);
    with stderr_json, stdout is (stdout, the JSON object on stderr's last line)."""
    with tempfile.NamedTemporaryFile("r") as timing, \
            open(stdin_path or os.devnull, "rb") as stdin:
        full = ["/usr/bin/time", "-v", "-o", timing.name, "taskset", "-c", "0"] + cmd
        start = time.perf_counter()  # time -v's own wall clock has 10 ms steps
        result = subprocess.run(full, stdin=stdin, capture_output=True)
        seconds = time.perf_counter() - start
        if result.returncode != 0:
            sys.exit(f"failed ({result.returncode}): {' '.join(cmd)}\n{result.stderr.decode()[-2000:]}")
        report = timing.read()
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", report).group(1)) * 1024
    if stderr_json:
        return (result.stdout.decode(), json.loads(result.stderr.decode().strip().splitlines()[-1])), rss, seconds
    return result.stdout.decode(), rss, seconds


def decoder_steps(pieces, source_len):
    """Output pieces + the EOS step unless the output stopped at the length limit."""
    limit = math.ceil(MAX_LENGTH_FACTOR * (source_len + 1))
    return pieces + (0 if pieces >= limit else 1)


class Petrel:
    def __init__(self, name, model, extra):
        self.name, self.model, self.extra = name, model, extra

    def full(self, tools, sentences_path, batch):
        cmd = [os.path.join(tools, "petrel-run"), self.model, "--input", sentences_path, "--no-split",
               "--max-batch", str(batch), "--threads", "1", "--json", "--quiet"] + self.extra
        out, rss, _ = run(cmd)
        j = json.loads(out)
        results = sorted(j["results"], key=lambda r: r["index"])
        texts = [r["hypotheses"][0]["text"] for r in results]
        steps = [decoder_steps(len(r["hypotheses"][0]["ids"]), len(r["input"]) - 1) for r in results]
        return {"texts": texts, "steps": sum(steps), "seconds": j["timing"]["run_s"], "rss": rss,
                "own_steps": True}

    def first(self, tools, first_line):
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
            f.write(first_line + "\n")
            f.flush()
            cmd = [os.path.join(tools, "petrel-run"), self.model, "--input", f.name, "--no-split",
                   "--threads", "1", "--json", "--quiet"] + self.extra
            out, _, wall = run(cmd)
        t = json.loads(out)["timing"]
        return t["load_ms"] + 1000 * t["run_s"], wall * 1000


class PetrelWasm:
    """Petrel's WebAssembly build in Node through the JavaScript package's CLI."""

    def __init__(self, name, package, model, extra):
        self.name, self.model = name, model
        self.base = ["node", os.path.join(package, "petrel-translate.mjs"), model, "--no-split", "--json",
                     "--stats"] + extra

    def _run(self, sentences_path, batch):
        out, rss, wall = run(self.base + ["--batch", str(batch)], sentences_path, stderr_json=True)
        lines, stats = out
        return [json.loads(l) for l in lines.splitlines() if l], stats, rss, wall

    def full(self, tools, sentences_path, batch):
        results, stats, rss, _ = self._run(sentences_path, batch)
        return {"texts": [r["text"] for r in results], "ids": [r["ids"] for r in results],
                "seconds": stats["translate_ms"] / 1000, "rss": rss, "own_steps": "ids"}

    def first(self, tools, first_line):
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
            f.write(first_line + "\n")
            f.flush()
            _, stats, _, wall = self._run(f.name, 1)
        return stats["load_ms"] + stats["first_ms"], wall * 1000


class Bergamot:
    def __init__(self, name, model, vocab, shortlist, precision):
        self.name, self.model, self.precision = name, model, precision
        self.base = ["node", os.path.join(BERGAMOT, "translate.mjs"), "--model", model, "--vocab", vocab,
                     "--shortlist", shortlist, "--precision", precision,
                     "--max-length-factor", str(MAX_LENGTH_FACTOR)]

    def full(self, tools, sentences_path, batch):
        out, rss, _ = run(self.base + ["--batch", str(batch)], sentences_path)
        j = json.loads(out)
        return {"texts": j["translations"], "seconds": j["translate_ms"] / 1000, "rss": rss, "own_steps": False}

    def first(self, tools, first_line):
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
            f.write(first_line + "\n")
            f.flush()
            out, _, wall = run(self.base + ["--batch", "1"], f.name)
        j = json.loads(out)
        return j["load_ms"] + j["first_ms"], wall * 1000


def ensure_data(data, tools):
    if not os.path.exists(os.path.join(data, "standin.json")):
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "make_firefox_tiny_standin.py"), data],
                       check=True)
    for name, src, extra in (("tiny-int8.petrel", data, []),
                             ("tiny-f32.petrel", os.path.join(data, "float32"),
                              ["--quantize", "f32", "--embeddings", "f32"])):
        path = os.path.join(data, name)
        if not os.path.exists(path):
            subprocess.run([os.path.join(tools, "petrel-convert"), src, "-o", path, "--quiet"] + extra, check=True)


def mib(n):
    return f"{n / 2**20:.1f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=os.path.join(ROOT, "build", "bench", "firefox-tiny"))
    parser.add_argument("--build", default=os.path.join(ROOT, "build", "release", "tools"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--wasm", default=os.path.join(ROOT, "build", "wasm", "js"),
                        help="Petrel's JavaScript package (cmake --preset wasm && cmake --build build/wasm); "
                             "'' leaves its rows out")
    parser.add_argument("--json-out", help="also write every run's numbers here")
    args = parser.parse_args()
    data, tools = os.path.abspath(args.data), os.path.abspath(args.build)
    if not os.path.isdir(os.path.join(BERGAMOT, "node_modules")):
        sys.exit(f"run `npm ci` in {BERGAMOT} first")
    ensure_data(data, tools)

    sentences_path = os.path.join(data, "sentences.en.txt")
    with open(sentences_path, encoding="utf-8") as f:
        sentences = f.read().split("\n")[:-1]
    vocab = os.path.join(data, "vocab.tiny.spm")
    processor = spm.SentencePieceProcessor(model_file=vocab)
    source_lens = [len(processor.encode(s)) for s in sentences]
    int8_bin = os.path.join(data, "model.tiny.intgemm.alphas.bin")
    f32_bin = os.path.join(data, "float32", "model.tiny.float32.bin")
    lex = os.path.join(data, "lex.50.50.tiny.s2t.bin")
    int8_petrel, f32_petrel = os.path.join(data, "tiny-int8.petrel"), os.path.join(data, "tiny-f32.petrel")

    engines = [
        (Petrel("Petrel int8, dynamic scales", int8_petrel, ["--activation-scales", "dynamic"]), int8_bin, int8_petrel),
        (Petrel("Petrel int8, file alphas", int8_petrel, ["--activation-scales", "file"]), int8_bin, int8_petrel),
        (Petrel("Petrel f32", f32_petrel, []), f32_bin, f32_petrel),
    ]
    wasm = os.path.abspath(args.wasm) if args.wasm else None
    if wasm and not os.path.exists(os.path.join(wasm, "petrel-translate.mjs")):
        sys.exit(f"no petrel-translate.mjs in {wasm}: build the wasm preset, or pass --wasm ''")
    if wasm:
        engines += [
            (PetrelWasm("Petrel WASM int8, dynamic scales", wasm, int8_petrel, ["--activation-scales", "dynamic"]),
             int8_bin, int8_petrel),
            (PetrelWasm("Petrel WASM int8, file alphas", wasm, int8_petrel, ["--activation-scales", "file"]),
             int8_bin, int8_petrel),
            (PetrelWasm("Petrel WASM f32", wasm, f32_petrel, []), f32_bin, f32_petrel),
        ]
    engines += [
        (Bergamot("bergamot int8shiftAlphaAll", int8_bin, vocab, lex, "int8shiftAlphaAll"), int8_bin, None),
        (Bergamot("bergamot int8shiftAll", int8_bin, vocab, lex, "int8shiftAll"), int8_bin, None),
        (Bergamot("bergamot float32", f32_bin, vocab, lex, "float32"), f32_bin, None),
    ]

    def count_steps(texts):
        return sum(decoder_steps(len(processor.encode(t)), n) for t, n in zip(texts, source_lens))

    rows = []
    for engine, marian_file, petrel_file in engines:
        engine.first(tools, sentences[0])  # untimed: the model file into the page cache
        loads = [engine.first(tools, sentences[0]) for _ in range(args.runs)]
        for batch in BATCHES:
            runs = [engine.full(tools, sentences_path, batch) for _ in range(args.runs)]
            texts = runs[0]["texts"]
            if any(r["texts"] != texts for r in runs):
                print(f"note: {engine.name} batch {batch}: outputs differ between runs", file=sys.stderr)
            if runs[0]["own_steps"] == "ids":  # the CLI's ids, as petrel-run's
                runs[0]["steps"] = sum(decoder_steps(len(ids), n) for ids, n in zip(runs[0]["ids"], source_lens))
            steps = runs[0]["steps"] if runs[0]["own_steps"] else count_steps(texts)
            tok_s = statistics.median(steps / r["seconds"] for r in runs)
            sent_s = statistics.median(len(sentences) / r["seconds"] for r in runs)
            row = {"engine": engine.name, "batch": batch, "steps": steps,
                   "steps_reencoded": count_steps(texts), "mean_output_steps": steps / len(sentences),
                   "tok_s": tok_s, "sent_s": sent_s, "seconds": [r["seconds"] for r in runs],
                   "load_ms": statistics.median(l for l, _ in loads),
                   "first_wall_ms": statistics.median(w for _, w in loads),
                   "rss": statistics.median(r["rss"] for r in runs), "rss_runs": [r["rss"] for r in runs],
                   "marian_bytes": os.path.getsize(marian_file),
                   "petrel_bytes": os.path.getsize(petrel_file) if petrel_file else None,
                   "texts": texts}
            rows.append(row)
            print(f"  {engine.name} batch {batch}: {tok_s:.0f} tok/s", file=sys.stderr)

    # agreement of each engine's text with bergamot's of the same precision at batch 1:
    # Petrel limits each sentence's length by its own source, bergamot by its batch's
    # longest source, so batched bergamot outputs that hit the limit run longer
    by = {(r["engine"], r["batch"]): r["texts"] for r in rows}
    pairs = {"Petrel int8, dynamic scales": "bergamot int8shiftAlphaAll",
             "Petrel int8, file alphas": "bergamot int8shiftAlphaAll", "Petrel f32": "bergamot float32"}
    if wasm:
        pairs.update({"Petrel WASM int8, dynamic scales": "bergamot int8shiftAlphaAll",
                      "Petrel WASM int8, file alphas": "bergamot int8shiftAlphaAll",
                      "Petrel WASM f32": "bergamot float32"})

    cpu = next((l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True, text=True)
                .stdout.splitlines() if l.startswith("Model name")), platform.processor())
    flags = open("/proc/cpuinfo").read()
    wasm_bytes = os.path.getsize(os.path.join(WORKER, "bergamot-translator-worker.wasm"))
    glue = os.path.getsize(os.path.join(WORKER, "bergamot-translator-worker.js"))
    print(f"\nMachine: {cpu}, avx512_vnni {'yes' if 'avx512_vnni' in flags else 'no'}, "
          f"shared (2 cores, other jobs running); CPU 0 only; node {subprocess.run(['node', '--version'], capture_output=True, text=True).stdout.strip()}.")
    shipped = f"bergamot ships {mib(wasm_bytes)} MiB .wasm + {glue / 1024:.0f} KiB JS glue"
    if wasm:
        ours = [os.path.join(wasm, f) for f in os.listdir(wasm) if f.endswith((".wasm", ".js", ".mjs"))]
        petrel_wasm = sum(os.path.getsize(f) for f in ours if f.endswith(".wasm"))
        petrel_js = sum(os.path.getsize(f) for f in ours if not f.endswith(".wasm"))
        shipped += (f"; Petrel's package {mib(petrel_wasm)} MiB .wasm + {petrel_js / 1024:.0f} KiB JavaScript "
                    f"(glue, API, worker, CLI)")
    if wasm:  # int8 rounds per kernel path (natively too): near-ties may go either way
        same = [f"{a['engine'].replace('Petrel WASM ', '')} b{a['batch']} "
                f"{sum(x == y for x, y in zip(a['texts'], b['texts']))}/{len(b['texts'])}"
                for a in rows for b in rows
                if a["batch"] == b["batch"] and a["engine"].replace("WASM ", "") == b["engine"] and a is not b]
        shipped += ". Petrel WASM text equal to Petrel native (its avx512 path): " + ", ".join(same)
    print(f"{len(sentences)} sentences, {sum(source_lens) / len(sentences):.1f} source pieces on average; "
          f"medians of {args.runs} fresh processes. {shipped}.\n")
    print("| engine | batch | tok/s | sentences/s | mean output tokens | load + 1st translation, in tool (ms) "
          "| process start to 1st translation (ms) | peak RSS (MiB) | model file (MiB) | same text as bergamot batch 1 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        same = ""
        if r["engine"] in pairs:
            ref = by[(pairs[r["engine"]], 1)]
            same = f"{sum(a == b for a, b in zip(r['texts'], ref))}/{len(ref)} ({pairs[r['engine']].split()[1]})"
        model = mib(r["marian_bytes"]) + (f" (.petrel {mib(r['petrel_bytes'])})" if r["petrel_bytes"] else "")
        print(f"| {r['engine']} | {r['batch']} | {r['tok_s']:.0f} | {r['sent_s']:.0f} | {r['mean_output_steps']:.2f} "
              f"| {r['load_ms']:.0f} | {r['first_wall_ms']:.0f} | {mib(r['rss'])} | {model} | {same} |")
    b1 = {r["engine"]: r for r in rows if r["batch"] == 1}
    ref = b1["bergamot int8shiftAlphaAll"]
    print("\nBatch 1 vs bergamot int8shiftAlphaAll (Firefox's setting):")
    for name in pairs:
        r = b1[name]
        print(f"  {name}: {r['tok_s'] / ref['tok_s']:.1f}x the tok/s, {r['rss'] / ref['rss']:.3f} of the peak RSS")
    print("Token counts by re-encoding text (bergamot's method) vs Petrel's ids: " + ", ".join(
        f"{r['engine']} b{r['batch']} {r['steps_reencoded']}/{r['steps']}" for r in rows if r["engine"] in pairs))
    _, node_rss, _ = run(["node", "-e", ""])
    print(f"Node alone (node -e ''): peak RSS {mib(node_rss)} MiB.")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
