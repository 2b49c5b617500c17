#!/usr/bin/env python3
"""Writes the pytorch_model.bin fixtures for Petrel's checkpoint reader
(tools/convert/pytorch_checkpoint.h), each made by torch.save itself:

  model_zip.bin      the oracle checkpoint post_swish_concat_tied as Hugging Face
                     saves it: torch.save's default (zip) format, the tied tables
                     as four names of one tensor, a module's _metadata
  model_legacy.bin   the same weights in the legacy format (PyTorch < 1.6), every
                     tensor a view into one flat storage and every matrix stored
                     transposed (storage offsets and strides on every read)
  model_f16.bin      the same weights as float16 (zip)
  m2m100_tiny.bin    the M2M100 family fixture (tests/fixtures/oracle/m2m100_tiny) as
                     M2M100ForConditionalGeneration saves it: model.shared and its three
                     tied names one tensor, the stored sinusoid table included (zip)
  layouts_zip.bin, layouts_legacy.bin, layouts_protocol4_zip.bin
                     small tensors in every layout a state dict can hold: bf16,
                     f16, views of one storage at different offsets, transposed,
                     sliced, permuted, expanded (stride 0), 0-dimensional, empty
                     (torch.save's pickle protocol 2; protocol 4 adds FRAME,
                     SHORT_BINUNICODE, MEMOIZE and STACK_GLOBAL);
  layouts_expected.safetensors
                     what torch reads from them (float32, contiguous): the oracle
  hostile_*.bin      files Petrel must refuse: a pickled torch.nn.Linear (zip
                     and legacy), an object whose unpickling calls os.system, and
                     a zip whose records are deflate-compressed

    /usr/bin/python3 tools/reference/make_pickle_fixtures.py tests/fixtures/pickle

Needs Debian's python3-torch; CI uses the committed output and needs no PyTorch.
"""
import collections
import json
import os
import struct
import sys
import zipfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import marian_reference as ref  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE = os.path.join(ROOT, "tests/fixtures/oracle/post_swish_concat_tied/model.safetensors")
TIED = ["model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"]


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = collections.OrderedDict()
    for name in sorted(header):
        if name == "__metadata__":
            continue
        meta = header[name]
        assert meta["dtype"] == "F32"
        begin, end = meta["data_offsets"]
        data = np.frombuffer(raw[8 + n + begin:8 + n + end], dtype="<f4").copy()
        out[name] = torch.from_numpy(data.reshape(meta["shape"]))
    return out


def module_state_dict(tensors):
    """What MarianMTModel.state_dict() looks like: the tied tables under every name
    (one tensor, so one storage) and the per-module version metadata."""
    sd = collections.OrderedDict(tensors)
    for name in TIED:
        sd[name] = sd["model.shared.weight"]
    modules = sorted({k.rsplit(".", 1)[0] for k in sd} | {""})
    sd._metadata = collections.OrderedDict((m, {"version": 1}) for m in modules)
    return sd


def flat_views(tensors):
    """Every tensor a view into one flat storage; matrices stored transposed, so the
    view is non-contiguous. Tied names stay one tensor."""
    chunks, offset, spans = [], 0, {}
    for name, t in tensors.items():
        stored = t.t().contiguous() if t.dim() == 2 else t
        chunks.append(stored.reshape(-1))
        spans[name] = (offset, stored.shape)
        offset += stored.numel()
    flat = torch.cat(chunks)
    out = collections.OrderedDict()
    for name, t in tensors.items():
        begin, shape = spans[name]
        view = flat[begin:begin + t.numel()].view(shape)
        out[name] = view.t() if t.dim() == 2 else view
        assert torch.equal(out[name], t)
    assert not out["model.shared.weight"].is_contiguous()
    return out


def layouts():
    gen = torch.Generator().manual_seed(11)

    def randn(*shape):
        return torch.randn(*shape, generator=gen)

    base = randn(40)
    half_base = randn(24).half()
    t = collections.OrderedDict()
    t["bf16.matrix"] = randn(3, 5).bfloat16()
    t["bf16.transposed"] = randn(3, 4).bfloat16().t()
    t["f16.vector"] = randn(7).half()
    t["f16.shared.a"] = half_base[4:16].view(3, 4)
    t["f16.shared.b"] = half_base[16:24]
    t["shared.a"] = base[0:12].view(3, 4)
    t["shared.b"] = base[12:30].view(2, 9)
    t["shared.c"] = base[30:40]
    t["shared.a.transposed"] = t["shared.a"].t()
    t["transposed"] = randn(4, 6).t()
    t["sliced"] = randn(5, 8)[1:4, ::3]
    t["permuted"] = randn(2, 3, 4).permute(2, 0, 1)
    t["expanded"] = randn(3, 1).expand(3, 5)
    t["scalar"] = torch.tensor(2.5)
    t["empty"] = torch.zeros(0, 4)
    return t


class CallsOsSystem:
    """Unpickling this runs a shell command: what a hostile checkpoint does."""

    def __reduce__(self):
        return (os.system, ("echo petrel-fixture-was-executed",))


def recompress(src, dst):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info.filename))


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/pickle"
    os.makedirs(out_dir, exist_ok=True)
    path = lambda name: os.path.join(out_dir, name)  # noqa: E731

    weights = read_safetensors(SOURCE)
    sd = module_state_dict(weights)
    torch.save(sd, path("model_zip.bin"))
    torch.save(module_state_dict(flat_views(weights)), path("model_legacy.bin"), _use_new_zipfile_serialization=False)
    torch.save(module_state_dict({k: v.half() for k, v in weights.items()}), path("model_f16.bin"))
    m2m100 = read_safetensors(os.path.join(ROOT, "tests/fixtures/oracle/m2m100_tiny/model.safetensors"))
    for name in TIED:  # the fixture stores them as equal copies; a module saves one tensor
        assert torch.equal(m2m100[name], m2m100["model.shared.weight"]), name
    torch.save(module_state_dict(m2m100), path("m2m100_tiny.bin"))

    lay = layouts()
    torch.save(lay, path("layouts_zip.bin"))
    torch.save(lay, path("layouts_legacy.bin"), _use_new_zipfile_serialization=False)
    torch.save(lay, path("layouts_protocol4_zip.bin"), pickle_protocol=4)
    ref.write_safetensors(path("layouts_expected.safetensors"), {k: v.float().contiguous() for k, v in lay.items()})

    torch.save(torch.nn.Linear(2, 2), path("hostile_module_zip.bin"))
    torch.save(torch.nn.Linear(2, 2), path("hostile_module_legacy.bin"), _use_new_zipfile_serialization=False)
    torch.save({"weight": CallsOsSystem()}, path("hostile_os_system_zip.bin"))
    recompress(path("layouts_zip.bin"), path("hostile_compressed_zip.bin"))

    # torch reads back what was written (the fixtures are what torch.load accepts).
    for name in ("model_zip.bin", "model_legacy.bin", "m2m100_tiny.bin", "layouts_zip.bin", "layouts_legacy.bin",
                 "layouts_protocol4_zip.bin"):
        # torch 1.13's weights_only unpickler lacks protocol 4's FRAME; these files are our own.
        loaded = torch.load(path(name), weights_only="protocol4" not in name)
        source = sd if name.startswith("model") else module_state_dict(m2m100) if name.startswith("m2m100") else lay
        assert all(torch.equal(loaded[k], source[k]) for k in source), name
    for name in sorted(os.listdir(out_dir)):
        print(f"{name}: {os.path.getsize(path(name))} bytes")


if __name__ == "__main__":
    main()
