#!/usr/bin/env python3
"""Instruction counts of the innermost loop around a multiply instruction, per function.

No ARM hardware here to time kernels on (bench/README.md, "ARM i8mm"): the blocking of the
smmla and sdot kernels is compared by what the compiler emits for their hot loops.

  bench/arm_inner_loops.py OBJECT FUNCTION_REGEX MNEMONIC
  bench/arm_inner_loops.py build/aarch64/engine/CMakeFiles/petrel_engine_objects.dir/src/kernels/arm/i8mm.cpp.o 'int8_blockILm4ELm1E' smmla

For each function whose (mangled) name matches, prints the smallest loop (a backward
branch and the instructions it spans) that holds MNEMONIC, with a count per mnemonic.
"""
import collections
import re
import subprocess
import sys


def functions(obj):
    text = subprocess.run(["aarch64-linux-gnu-objdump", "-d", "--no-show-raw-insn", obj],
                          capture_output=True, text=True, check=True).stdout
    for chunk in re.split(r"\n(?=[0-9a-f]+ <)", text):
        name = re.match(r"[0-9a-f]+ <([^>]*)>:", chunk)
        if not name:
            continue
        code = []
        for line in chunk.split("\n")[1:]:
            m = re.match(r"\s*([0-9a-f]+):\s+(\S+)\s*(.*)", line)
            if m:
                code.append((int(m.group(1), 16), m.group(2), m.group(3)))
        yield name.group(1), code


def innermost_loop(code, mnemonic):
    best = None
    for address, op, args in code:
        target = re.match(r"([0-9a-f]+)\s", args)
        if not op.startswith("b") or op.startswith("bl") or not target:
            continue
        start = int(target.group(1), 16)
        if start >= address:
            continue
        body = [x for x in code if start <= x[0] <= address]
        if any(x[1] == mnemonic for x in body) and (best is None or len(body) < len(best)):
            best = body
    return best


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    obj, pattern, mnemonic = sys.argv[1:]
    for name, code in functions(obj):
        if not re.search(pattern, name):
            continue
        loop = innermost_loop(code, mnemonic)
        if loop:
            counts = collections.Counter(op for _, op, _ in loop)
            print(f"{name}: {len(loop)} instructions:", ", ".join(f"{n} {op}" for op, n in counts.most_common()))


if __name__ == "__main__":
    main()
