#!/usr/bin/env python3
"""Instruction counts of the innermost loop around a multiply instruction, per function.

For kernel paths no CPU here runs (ARM: bench/README.md, "ARM i8mm"; x86 AVX-VNNI:
"AVX-VNNI"), blockings are compared by what the compiler emits for their hot loops, and
on x86 by llvm-mca's estimate of their cycles on a named CPU model.

  bench/inner_loops.py [--mca CPU] [--at-least N] OBJECT FUNCTION_REGEX MNEMONIC
  bench/inner_loops.py build/aarch64/engine/CMakeFiles/petrel_engine_objects.dir/src/kernels/arm/i8mm.cpp.o 'int8_blockILm4ELm1E' smmla
  bench/inner_loops.py --mca alderlake build/release/engine/CMakeFiles/petrel_engine_objects.dir/src/kernels/x86/avx_vnni.cpp.o 'int4_blockILm1ELm2E' vpdpbusd

For each function whose (mangled) name matches, prints the smallest loop (a backward
branch and the instructions it spans) that holds MNEMONIC (N times), with a count per mnemonic and,
with --mca (x86), llvm-mca's cycles per iteration.
"""
import argparse
import collections
import re
import subprocess
import tempfile


def objdump_for(obj):
    header = subprocess.run(["objdump", "-f", obj], capture_output=True, text=True).stdout
    return "objdump" if "x86-64" in header else "aarch64-linux-gnu-objdump"


def functions(obj):
    tool = objdump_for(obj)
    args = [tool, "-d", "--no-show-raw-insn"] + (["-M", "att"] if tool == "objdump" else []) + [obj]
    text = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    for chunk in re.split(r"\n(?=[0-9a-f]+ <)", text):
        name = re.match(r"[0-9a-f]+ <([^>]*)>:", chunk)
        if not name:
            continue
        code = []
        for line in chunk.split("\n")[1:]:
            m = re.match(r"\s*([0-9a-f]+):\s+(?:\{\w+\}\s+)?(\S+)\s*(.*)", line)  # {vex} vpdpbusd
            if m:
                code.append((int(m.group(1), 16), m.group(2), m.group(3).split("#")[0].strip()))
        yield name.group(1), code


def is_branch(op):
    return (op.startswith("b") and not op.startswith("bl")) or (op.startswith("j") and op != "jmpq")


def innermost_loop(code, mnemonic, at_least):
    best = None
    for address, op, args in code:
        target = re.match(r"([0-9a-f]+)\s", args + " ")
        if not is_branch(op) or not target:
            continue
        start = int(target.group(1), 16)
        if start >= address:
            continue
        body = [x for x in code if start <= x[0] <= address]
        if sum(x[1] == mnemonic for x in body) >= at_least and (best is None or len(body) < len(best)):
            best = body
    return best


def mca_cycles(loop, cpu):
    """llvm-mca's cycles per iteration of the loop without its closing branch."""
    with tempfile.NamedTemporaryFile("w", suffix=".s") as f:
        f.write("\n".join(f"{'{vex} ' if op == 'vpdpbusd' and '%ymm' in args else ''}{op} "
                          f"{re.sub(r'<[^>]*>', '', args)}" for _, op, args in loop[:-1]) + "\n")
        f.flush()
        out = subprocess.run(["llvm-mca", f"-mcpu={cpu}", "-iterations=100", f.name],
                             capture_output=True, text=True, check=True).stdout
    return int(re.search(r"Total Cycles:\s+(\d+)", out).group(1)) / 100


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mca", metavar="CPU", help="llvm-mca's cycles per iteration on this CPU model (x86)")
    parser.add_argument("--at-least", metavar="N", type=int, default=1,
                        help="the smallest loop with at least N of MNEMONIC (default 1)")
    parser.add_argument("object")
    parser.add_argument("function_regex")
    parser.add_argument("mnemonic")
    args = parser.parse_args()
    for name, code in functions(args.object):
        if not re.search(args.function_regex, name):
            continue
        loop = innermost_loop(code, args.mnemonic, args.at_least)
        if loop:
            counts = collections.Counter(op for _, op, _ in loop)
            line = f"{name}: {len(loop)} instructions: " + ", ".join(f"{n} {op}" for op, n in counts.most_common())
            if args.mca:
                line += f"; llvm-mca -mcpu={args.mca}: {mca_cycles(loop, args.mca):.1f} cycles per iteration"
            print(line)


if __name__ == "__main__":
    main()
