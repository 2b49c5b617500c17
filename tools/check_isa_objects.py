#!/usr/bin/env python3
"""Fails when a per-ISA object of a build defines a weak function that uses its ISA.

The kernel files compiled with extra ISA flags (-mavx2, -mavx512*, -mavxvnni,
+dotprod, +i8mm) are only entered after run-time dispatch chose them. An inline
function they instantiate (a std:: template, an xsimd helper) is emitted as a weak
symbol; when another object defines the same symbol, the linker keeps one of the
copies for every caller. If it keeps the per-ISA copy and that copy holds the ISA's
instructions, code on a CPU without the ISA runs them: SIGILL, only on some CPUs and
only in some builds. Their own kernels sit in per-ISA namespaces and are inlined; this
check makes sure that whatever the compiler emitted weakly holds no such instruction.

  tools/check_isa_objects.py BUILD_DIR...   check every per-ISA object under each build
  tools/check_isa_objects.py --self-test     show that the check fails where it must
"""
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

# Per-ISA object (path suffix) -> a regex matching an instruction line only that ISA's
# flags allow, in llvm-objdump's AT&T (x86) or ARM syntax, and the disassembler options
# that decode those instructions. An instruction it cannot decode counts as the ISA's.
X86_VEX = (r"\t(v[a-z0-9]+)\b|%[yz]mm\d|%k[0-7]\b|<unknown>", [])  # AVX, AVX2, FMA, F16C, AVX-512
ARM_MATTR = ["--mattr=+dotprod,+i8mm"]
ARM_DOT = (r"\t([su]dot|usdot|sudot)\b|<unknown>", ARM_MATTR)
ARM_MMLA = (r"\t([su]mmla|usmmla|usdot|sudot|[su]dot)\b|<unknown>", ARM_MATTR)
PER_ISA_OBJECTS = {
    "kernels/x86/avx2.cpp.o": X86_VEX,
    "kernels/x86/avx_vnni.cpp.o": X86_VEX,
    "kernels/x86/avx512.cpp.o": X86_VEX,
    "support/avx_vnni_emulated.cpp.o": X86_VEX,
    "kernels/arm/dotprod.cpp.o": ARM_DOT,
    "kernels/arm/i8mm.cpp.o": ARM_MMLA,
}


# Reads objects of every target (x86-64, aarch64): Debian's llvm-14 package.
OBJDUMP = shutil.which("llvm-objdump") or shutil.which("llvm-objdump-14") or "llvm-objdump-14"


def weak_functions(obj):
    """Names of the functions obj defines with weak or unique (COMDAT) binding."""
    out = subprocess.run([OBJDUMP, "--syms", str(obj)], check=True,
                         capture_output=True, text=True).stdout
    names = []
    for line in out.splitlines():
        # "0000000000000000  w    F .text._ZN...\t0000000000000004 .hidden _ZN..."
        fields = line.split()
        if len(fields) < 5 or " F " not in line or "*UND*" in line:
            continue
        flags = line[17:24]
        if "w" in flags or "u" in flags:
            names.append(fields[-1])
    return names


def offending_functions(obj, isa):
    """Weak functions of obj with an instruction of isa (PER_ISA_OBJECTS' values): {name: first such line}."""
    pattern, options = isa
    names = set(weak_functions(obj))
    if not names:
        return {}
    out = subprocess.run([OBJDUMP, "-d", "--no-show-raw-insn", *options, str(obj)], check=True,
                         capture_output=True, text=True).stdout
    found, current = {}, None
    instruction = re.compile(pattern)
    for line in out.splitlines():
        header = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if header:
            current = header.group(1) if header.group(1) in names else None
        elif current and current not in found and instruction.search(line):
            found[current] = line.strip()
    return found


def check_build(build):
    checked, bad = 0, 0
    for obj in sorted(pathlib.Path(build).rglob("*.o")):
        isa = next((i for suffix, i in PER_ISA_OBJECTS.items() if obj.as_posix().endswith(suffix)), None)
        if isa is None:
            continue
        checked += 1
        for name, line in offending_functions(obj, isa).items():
            demangled = subprocess.run(["c++filt", name], capture_output=True, text=True).stdout.strip()
            print(f"{obj}: weak function {demangled} holds its ISA's instruction "
                  f"'{line}': the linker may give it to callers on CPUs without that ISA "
                  "(make it internal, or keep the code out of inline functions)", file=sys.stderr)
            bad += 1
    return checked, bad


def self_test():
    """The check must flag a weak AVX2 function and pass its SSE2 twin."""
    source = ("#include <vector>\n"
              "float sum(const std::vector<float>& v) { float s = 0; for (float x : v) s += x; return s; }\n"
              "template <class T> T twice(const T* p, int n) { T s = 0; for (int i = 0; i < n; ++i) s += 2 * p[i]; return s; }\n"
              "template float twice<float>(const float*, int);\n"
              "inline int __attribute__((noinline)) used(int* p) { for (int i = 0; i < 64; ++i) p[i] *= 3; return p[0]; }\n"
              "int call(int* p) { return used(p); }\n")
    with tempfile.TemporaryDirectory() as tmp:
        src = pathlib.Path(tmp, "t.cpp")
        src.write_text(source)
        results = {}
        for flags, where in ((["-O2", "-mavx2"], "isa"), (["-O2"], "plain")):
            obj = pathlib.Path(tmp, where, "kernels/x86/avx2.cpp.o")
            obj.parent.mkdir(parents=True)
            subprocess.run(["c++", "-c", *flags, str(src), "-o", str(obj)], check=True)
            results[where] = offending_functions(obj, PER_ISA_OBJECTS["kernels/x86/avx2.cpp.o"])
    if not results["isa"] or results["plain"]:
        print(f"check_isa_objects self-test failed: -mavx2 found {sorted(results['isa'])}, "
              f"without it {sorted(results['plain'])}", file=sys.stderr)
        return 1
    print(f"check_isa_objects self-test: flags {len(results['isa'])} weak AVX2 function(s), none without -mavx2")
    return 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    if not argv or any(a.startswith("-") for a in argv):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    failed = False
    for build in argv:
        if not pathlib.Path(build).is_dir():
            print(f"check_isa_objects: no build directory {build}", file=sys.stderr)
            return 2
        checked, bad = check_build(build)
        if checked == 0:
            print(f"check_isa_objects: {build} has no per-ISA object (is it built?)", file=sys.stderr)
            failed = True
        elif bad:
            failed = True
        else:
            print(f"check_isa_objects: {build}: {checked} per-ISA objects, no weak function uses its ISA")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
