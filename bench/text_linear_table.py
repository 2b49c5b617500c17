#!/usr/bin/python3
"""Runs petrel_text_linear_bench and prints bench/README.md's tables: µs per input byte of
each text pass on each adversarial input at 64 KB and 1 MB, and their ratio (a linear
pass stays near 1; a quadratic one would show 16); then the same for the tokenizer parts
and chat templates at their limits (rows "limits:..."), whose µs per byte is the bound
itself. Medians of 3 repetitions, since the machine is shared. An optional second
argument is a --benchmark_filter regex (e.g. 'limits:' for the second table alone).

    /usr/bin/python3 bench/text_linear_table.py build/release/bench/petrel_text_linear_bench [FILTER]
"""
import json
import subprocess
import sys
import tempfile


def table(title, rows):
    print(f"| {title} | input | µs/B 64 KB | µs/B 1 MB | 1 MB / 64 KB |")
    print("|---|---|---:|---:|---:|")
    worst = 0.0
    for (pass_name, text), v in rows.items():
        if "64KB" not in v or "1MB" not in v:
            continue
        ratio = v["1MB"] / v["64KB"] if v["64KB"] > 0 else float("nan")
        worst = max(worst, ratio)
        print(f"| {pass_name} | {text} | {v['64KB']:.4f} | {v['1MB']:.4f} | {ratio:.2f} |")
    print(f"\nLargest ratio: {worst:.2f}\n")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    command = [sys.argv[1], "--benchmark_min_time=0.2", "--benchmark_repetitions=3",
               "--benchmark_report_aggregates_only=true"]
    if len(sys.argv) == 3:
        command.append(f"--benchmark_filter={sys.argv[2]}")
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run(command + [f"--benchmark_out={out.name}", "--benchmark_out_format=json"], check=True,
                       stdout=subprocess.DEVNULL)
        results = json.load(open(out.name))["benchmarks"]
    passes, limits = {}, {}
    for b in results:
        if b.get("aggregate_name") != "median":
            continue
        pass_name, text, size = b["run_name"].split("/")[:3]
        if pass_name.startswith("limits:"):
            limits.setdefault((pass_name[len("limits:"):], text), {})[size] = b["us/B"]
        else:
            passes.setdefault((pass_name, text), {})[size] = b["us/B"]
    if passes:
        table("pass", passes)
    if limits:
        table("at its limit", limits)


if __name__ == "__main__":
    main()
