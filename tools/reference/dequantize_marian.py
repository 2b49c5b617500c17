#!/usr/bin/env python3
"""Writes the float32 marian::io::binary model that an intgemm8 model holds: every intgemm8
item dequantized as Marian reads it (q * (1/quantMult) in float32, back in Marian's [in, out]
layout), float32 items as stored, the `<W>_QuantMultA` activation alphas dropped (a float32
model has no use for them), model.yml unchanged.

    /usr/bin/python3 tools/reference/dequantize_marian.py model.intgemm.alphas.bin model.bin

bergamot's float32 run of the output then computes with the same numbers as
`petrel-convert <dir> --quantize f32 --embeddings f32` of the intgemm8 file (its reader
dequantizes with the same float32 rule: tools/convert/marian_model_file.cpp read_f32).
Needs numpy and PyYAML (tools/reference/marian_native.py).
"""
import argparse
import os
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import marian_native  # noqa: E402

ALPHA_SUFFIX = "_QuantMultA"


def dequantize(source, target):
    """Writes `target`; returns (intgemm8 items dequantized, alphas dropped)."""
    weights, types, yaml_text = marian_native.read_model_bin(source)
    if yaml_text is None:
        raise ValueError(f"{source}: no special:model.yml item")
    options = yaml.safe_load(yaml_text)
    if marian_native.marian_yaml(options) != yaml_text:
        raise ValueError(f"{source}: model.yml would not be written back unchanged")
    not_float = sorted(n for n, t in types.items() if t not in ("float32", "intgemm8"))
    if not_float:
        raise ValueError(f"{source}: items of other types than float32/intgemm8: {not_float[:5]}")
    alphas = [n for n in weights if n.endswith(ALPHA_SUFFIX)]
    floats = {n: w for n, w in weights.items() if not n.endswith(ALPHA_SUFFIX)}
    written = marian_native.write_model_bin(target, floats, options)
    # What a reader of the written file sees is what the intgemm8 file held, bit for bit.
    for name, values in floats.items():
        if values.tobytes() != written[name].tobytes():
            raise ValueError(f"{name}: written values differ from the dequantized ones")
    return sum(t == "intgemm8" and not n.endswith(ALPHA_SUFFIX) for n, t in types.items()), len(alphas)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="an intgemm8 marian::io::binary model (e.g. model.intgemm.alphas.bin)")
    parser.add_argument("target", help="the float32 model.bin to write")
    args = parser.parse_args()
    matrices, alphas = dequantize(args.source, args.target)
    print(f"{args.target}: {matrices} intgemm8 matrices dequantized, {alphas} alphas dropped", file=sys.stderr)


if __name__ == "__main__":
    main()
