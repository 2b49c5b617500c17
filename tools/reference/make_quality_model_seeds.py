#!/usr/bin/env python3
"""Writes the seed corpus of tests/fuzz/fuzz_quality_model: bergamot's `.quality.lr`
files (LogisticRegressorQualityEstimator::toAlignedMemory on a little-endian host:
uint64 magic 0x78cc336f1d54b180, uint64 dims, float32 stds[dims], means[dims],
coefficients[dims], intercept), valid ones and ones the reader must refuse.

    /usr/bin/python3 tools/reference/make_quality_model_seeds.py [OUT_DIR]
"""
import math
import os
import struct
import sys

MAGIC = 0x78CC336F1D54B180


def lr_file(stds, means, coefficients, intercept, dims=None, magic=MAGIC, endian="<"):
    dims = len(stds) if dims is None else dims
    out = struct.pack(endian + "QQ", magic, dims)
    for values in (stds, means, coefficients):
        out += struct.pack(endian + "%df" % len(values), *values)
    return out + struct.pack(endian + "f", intercept)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        here, "..", "..", "tests", "fuzz", "corpus", "fuzz_quality_model")
    os.makedirs(out_dir, exist_ok=True)
    # Parameters of the shape a trained model has: features (word mean log-prob, its
    # minimum, its token count, the sentence's mean log-prob).
    stds = [0.9, 1.6, 0.8, 0.45]
    means = [-0.6, -1.1, 1.4, -0.55]
    coefficients = [0.35, 0.9, -0.2, 0.5]
    intercept = -1.7
    valid = lr_file(stds, means, coefficients, intercept)
    seeds = {
        "hand-valid.lr": valid,
        "hand-valid_negative_std.lr": lr_file([-0.9] + stds[1:], means, coefficients, intercept),
        "hand-valid_extreme.lr": lr_file([1e-30, 3e38, 1.0, 1e-10], [-3e38, 0.0, 1e30, -1e-30],
                                         [1e-30, -3e38, 0.0, 1e-5], 80.0),
        "hand-truncated_header.lr": valid[:11],
        "hand-truncated_parameters.lr": valid[:41],
        "hand-trailing_byte.lr": valid + b"\0",
        "hand-big_endian.lr": lr_file(stds, means, coefficients, intercept, endian=">"),
        "hand-dims_0.lr": lr_file(stds, means, coefficients, intercept, dims=0),
        "hand-dims_3.lr": lr_file(stds[:3], means[:3], coefficients[:3], intercept),
        "hand-dims_huge.lr": lr_file(stds, means, coefficients, intercept, dims=(1 << 62) + 1),
        "hand-nan_coefficient.lr": lr_file(stds, means, coefficients[:2] + [math.nan] + coefficients[3:], intercept),
        "hand-inf_intercept.lr": lr_file(stds, means, coefficients, math.inf),
        "hand-zero_std.lr": lr_file(stds[:1] + [0.0] + stds[2:], means, coefficients, intercept),
    }
    for name, data in sorted(seeds.items()):
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
