#!/usr/bin/env python3
"""chrF2 of the Firefox-shaped student (tools/firefox-student) on the fixture's 320 test
sentences, each translated alone (bergamot's length limit follows its batch's widest
sentence, Petrel's each sentence's own: alone, both are Marian's rule), for bergamot's
committed outputs (tests/fixtures/firefox-student/expected.json) and Petrel's.

    /usr/bin/python3 tools/reference/student_chrf_alone.py build/release/tools
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, HERE)
import metrics  # noqa: E402


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    tools = sys.argv[1]
    e = json.load(open(os.path.join(ROOT, "tests/fixtures/firefox-student/expected.json")))
    src = e["sentences"]
    with open(os.path.join(ROOT, "tests/fixtures/en-de/test.en")) as f:
        assert f.read().split("\n")[:len(src)] == src, "the fixture's sentences are the test split's first lines"
    with open(os.path.join(ROOT, "tests/fixtures/en-de/test.de")) as f:
        refs = f.read().split("\n")[:len(src)]
    with tempfile.TemporaryDirectory() as work:
        inputs = os.path.join(work, "test.en")
        with open(inputs, "w") as f:
            f.write("\n".join(src) + "\n")
        models = {}
        for dtype in ("f32", "int8"):
            models[dtype] = os.path.join(work, f"student-{dtype}.petrel")
            subprocess.run([os.path.join(tools, "petrel-convert"), os.path.join(ROOT, "tools/firefox-student"), "-o",
                            models[dtype], "--quiet", "--quantize", dtype, "--embeddings", dtype], check=True)

        def petrel(model, *flags):
            out = subprocess.run([os.path.join(tools, "petrel-run"), model, "--input", inputs, "--no-split", "--quiet",
                                  *flags], capture_output=True, text=True, check=True).stdout
            return out.rstrip("\n").split("\n")

        rows = {
            "bergamot float32": e["bergamot"]["float32"],
            "bergamot int8shiftAlphaAll": e["bergamot"]["int8shiftAlphaAll"],
            "Petrel f32": petrel(models["f32"]),
            "Petrel int8, dynamic scales": petrel(models["int8"]),
            "Petrel int8, file alphas": petrel(models["int8"], "--activation-scales", "file"),
        }
    print("| system (each sentence alone, 320 test sentences) | chrF2 |\n|---|---:|")
    for name, hyps in rows.items():
        assert len(hyps) == len(refs), name
        print(f"| {name} | {metrics.corpus_chrf(hyps, refs):.2f} |")


if __name__ == "__main__":
    main()
