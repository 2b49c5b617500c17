#!/usr/bin/env python3
"""Converts a Hugging Face MarianMT checkpoint (config.json, model.safetensors,
vocab.json, source.spm, target.spm) into a CTranslate2 model directory, without the
transformers library: the peer for bench/argos_style_translate.py.

    CT2_PYTHON bench/ct2_convert_marian.py tools/en-de-model OUT_DIR [--quantization float32|int8]

(CT2_PYTHON: a Python where `import ctranslate2, torch` works, e.g. a venv made with
--system-site-packages over Debian's python3-torch, ctranslate2 built from source.)

It builds the same ctranslate2.specs.TransformerSpec that CTranslate2's own
`ct2-transformers-converter` builds for a MarianMTModel (its MarianMTLoader, which
extends BartLoader, in python/ctranslate2/converters/transformers.py), from the
tensors as transformers would load them:

* post-norm layers, no layer norm on the embeddings, the config's activation
  ("swish" -> Activation.SWISH); q/k/v fused into one linear for self-attention,
  k/v fused for cross-attention;
* embeddings scaled by sqrt(d_model) when scale_embedding; the tied output projection
  is the shared embedding table, final_logits_bias its bias when it is not all zero;
* sinusoidal positions as transformers' MarianSinusoidalPositionalEmbedding makes
  them (sin in the first half of the columns, cos in the second), in the checkpoint's
  dtype: loading an f16 checkpoint, transformers creates that table in f16, so the
  converter writes f16-rounded positions. --positions-dtype float32 keeps them
  unrounded (what an f32 load would give);
* the decoder starts from a zero embedding (start_from_zero_embedding); the
  vocabulary is vocab.json in id order, cut to vocab_size, and a trailing "<pad>"
  (the decoder-start token transformers adds) removed with its embedding row and bias
  entry, so pad can never be generated; decoder_start_token = eos_token = "</s>";
* source.spm and target.spm are copied beside the model (the client tokenizes with
  them).

Weights are read from model.safetensors by hand (the header is JSON; each tensor's
bytes follow) into torch tensors in their stored dtype; the spec's optimize() does the
quantization ("float32" converts f16 to f32, "int8" quantizes the linear and embedding
weights per row), exactly as ct2-transformers-converter --quantization would.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch

import ctranslate2
from ctranslate2.converters import utils
from ctranslate2.converters.converter import Converter
from ctranslate2.specs import common_spec, transformer_spec

ACTIVATIONS = {
    "gelu": common_spec.Activation.GELU,
    "gelu_new": common_spec.Activation.GELUTanh,
    "relu": common_spec.Activation.RELU,
    "silu": common_spec.Activation.SWISH,
    "swish": common_spec.Activation.SWISH,
}

SAFETENSORS_DTYPES = {
    "F16": (np.float16, torch.float16),
    "F32": (np.float32, torch.float32),
    "BF16": (np.uint16, torch.bfloat16),
}

# A safetensors header above this size is not a checkpoint this script is meant for.
MAX_HEADER_BYTES = 100 * 1024 * 1024


def read_safetensors(path):
    """Returns {name: torch.Tensor} in the stored dtypes and the file's dtype name."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError("%s: shorter than the 8-byte header length" % path)
    (header_len,) = struct.unpack("<Q", data[:8])
    if header_len > min(MAX_HEADER_BYTES, len(data) - 8):
        raise ValueError("%s: header length %d does not fit the file" % (path, header_len))
    header = json.loads(data[8:8 + header_len].decode("utf-8"))
    body = memoryview(data)[8 + header_len:]
    tensors = {}
    dtypes = set()
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] not in SAFETENSORS_DTYPES:
            raise ValueError("%s: tensor %s has dtype %s" % (path, name, entry["dtype"]))
        np_dtype, torch_dtype = SAFETENSORS_DTYPES[entry["dtype"]]
        begin, end = entry["data_offsets"]
        count = math.prod(entry["shape"])
        if not 0 <= begin <= end <= len(body) or end - begin != count * np.dtype(np_dtype).itemsize:
            raise ValueError("%s: tensor %s: data_offsets %s do not match shape %s"
                             % (path, name, entry["data_offsets"], entry["shape"]))
        array = np.frombuffer(body[begin:end], dtype=np_dtype).reshape(entry["shape"]).copy()
        tensor = torch.from_numpy(array)
        if torch_dtype == torch.bfloat16:
            tensor = tensor.view(torch.bfloat16)
        tensors[name] = tensor
        dtypes.add(torch_dtype)
    if len(dtypes) != 1:
        raise ValueError("%s: mixed dtypes %s" % (path, sorted(map(str, dtypes))))
    return tensors, dtypes.pop()


def marian_sinusoids(num_positions, dim, dtype):
    """transformers' MarianSinusoidalPositionalEmbedding._init_weight: computed in float64,
    sin of the even angles in columns [0, dim/2), cos of the odd ones in [dim/2, dim),
    stored in the embedding's dtype."""
    position_enc = np.array(
        [[pos / np.power(10000, 2 * (j // 2) / dim) for j in range(dim)]
         for pos in range(num_positions)])
    out = torch.empty(num_positions, dim, dtype=dtype)
    sentinel = dim // 2 if dim % 2 == 0 else dim // 2 + 1
    out[:, 0:sentinel] = torch.FloatTensor(np.sin(position_enc[:, 0::2]))
    out[:, sentinel:] = torch.FloatTensor(np.cos(position_enc[:, 1::2]))
    return out


class MarianCheckpointConverter(Converter):
    """ctranslate2's Converter over a MarianMT checkpoint directory read by hand."""

    def __init__(self, checkpoint_dir, positions_dtype="checkpoint"):
        self.checkpoint_dir = checkpoint_dir
        self.positions_dtype = positions_dtype

    def _path(self, name):
        return os.path.join(self.checkpoint_dir, name)

    def _load(self):
        with open(self._path("config.json"), encoding="utf-8") as f:
            config = json.load(f)
        if config.get("model_type") != "marian":
            raise ValueError("%s: model_type is %r, not 'marian'"
                             % (self._path("config.json"), config.get("model_type")))
        if config.get("activation_function") not in ACTIVATIONS:
            raise ValueError("config.json: activation_function %r is not one of %s"
                             % (config.get("activation_function"), sorted(ACTIVATIONS)))
        if not config.get("share_encoder_decoder_embeddings", True):
            raise ValueError("config.json: separate encoder/decoder vocabularies are not handled")
        self.config = config
        self.weights, self.dtype = read_safetensors(self._path("model.safetensors"))
        positions_dtype = self.dtype if self.positions_dtype == "checkpoint" else torch.float32
        self.positions = marian_sinusoids(config["max_position_embeddings"], config["d_model"],
                                          positions_dtype)

        spec = transformer_spec.TransformerSpec.from_config(
            (config["encoder_layers"], config["decoder_layers"]),
            config["encoder_attention_heads"],
            pre_norm=False,  # MarianMTLoader: normalize_before = False
            activation=ACTIVATIONS[config["activation_function"]],
            layernorm_embedding=False,  # MarianMTLoader: normalize_embedding = False
        )
        self.set_stack(spec.encoder, "model.encoder", config["encoder_layers"], cross=False)
        spec.decoder.start_from_zero_embedding = True
        self.set_stack(spec.decoder, "model.decoder", config["decoder_layers"], cross=True)

        # lm_head is tied to the shared embedding table and has no bias of its own.
        spec.decoder.projection.weight = self.embedding_table()
        final_logits_bias = self.weights.get("final_logits_bias")
        if final_logits_bias is not None and final_logits_bias.nonzero().numel() != 0:
            spec.decoder.projection.bias = final_logits_bias.squeeze()

        tokens = self.vocabulary()
        self.remove_pad_weights(spec, tokens)
        spec.register_source_vocabulary(tokens)
        spec.register_target_vocabulary(tokens)
        spec.config.eos_token = "</s>"
        spec.config.unk_token = "<unk>"
        # Any token: the decoder starts from a zero embedding.
        spec.config.decoder_start_token = "</s>"
        for name in ("source.spm", "target.spm"):
            spec.register_file(self._path(name))
        return spec

    def embedding_table(self):
        for name in ("model.shared.weight", "model.encoder.embed_tokens.weight"):
            if name in self.weights:
                return self.weights[name]
        raise ValueError("model.safetensors: no model.shared.weight")

    def vocabulary(self):
        with open(self._path("vocab.json"), encoding="utf-8") as f:
            vocab = json.load(f)
        tokens = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]
        ids = sorted(vocab.values())
        if ids != list(range(len(ids))):
            raise ValueError("vocab.json: ids are not 0..%d without gaps" % (len(ids) - 1))
        return tokens[:self.config["vocab_size"]]

    def remove_pad_weights(self, spec, tokens):
        """MarianMTLoader.get_vocabulary and _remove_pad_weights: a trailing <pad> leaves
        the vocabulary, its embedding row and its output bias entry."""
        if tokens[-1] != "<pad>":
            return
        tokens.pop()
        new_size = len(tokens)
        for vocab_spec in (spec.encoder.embeddings[0], spec.decoder.embeddings,
                           spec.decoder.projection):
            if vocab_spec.weight.shape[0] == new_size + 1:
                vocab_spec.weight = vocab_spec.weight[:-1]
            if (isinstance(vocab_spec, common_spec.LinearSpec) and vocab_spec.has_bias()
                    and vocab_spec.bias.shape[0] == new_size + 1):
                vocab_spec.bias = vocab_spec.bias[:-1]

    def tensor(self, name):
        if name not in self.weights:
            raise ValueError("model.safetensors: missing tensor %s" % name)
        return self.weights[name]

    def set_linear(self, spec, prefix):
        spec.weight = self.tensor(prefix + ".weight")
        if prefix + ".bias" in self.weights:
            spec.bias = self.weights[prefix + ".bias"]

    def set_layer_norm(self, spec, prefix):
        spec.gamma = self.tensor(prefix + ".weight")
        spec.beta = self.tensor(prefix + ".bias")

    def set_attention(self, spec, prefix, self_attention):
        split = [common_spec.LinearSpec() for _ in range(3)]
        for linear, proj in zip(split, ("q_proj", "k_proj", "v_proj")):
            self.set_linear(linear, "%s.%s" % (prefix, proj))
        if self_attention:
            utils.fuse_linear(spec.linear[0], split)
        else:
            utils.fuse_linear(spec.linear[0], split[:1])
            utils.fuse_linear(spec.linear[1], split[1:])
        self.set_linear(spec.linear[-1], prefix + ".out_proj")

    def set_stack(self, spec, prefix, num_layers, cross):
        if len(spec.layer) != num_layers:
            raise ValueError("%s: spec has %d layers, config %d" % (prefix, len(spec.layer), num_layers))
        spec.scale_embeddings = (math.sqrt(self.config["d_model"])
                                 if self.config.get("scale_embedding", False) else 1.0)
        spec.position_encodings.encodings = self.positions
        embeddings = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
        embeddings.weight = self.embedding_table()
        for i, layer_spec in enumerate(spec.layer):
            layer = "%s.layers.%d" % (prefix, i)
            self.set_attention(layer_spec.self_attention, layer + ".self_attn", True)
            self.set_layer_norm(layer_spec.self_attention.layer_norm, layer + ".self_attn_layer_norm")
            if cross:
                self.set_attention(layer_spec.attention, layer + ".encoder_attn", False)
                self.set_layer_norm(layer_spec.attention.layer_norm, layer + ".encoder_attn_layer_norm")
            self.set_linear(layer_spec.ffn.linear_0, layer + ".fc1")
            self.set_linear(layer_spec.ffn.linear_1, layer + ".fc2")
            self.set_layer_norm(layer_spec.ffn.layer_norm, layer + ".final_layer_norm")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="MarianMT checkpoint directory")
    parser.add_argument("output_dir", help="CTranslate2 model directory to write (replaced)")
    parser.add_argument("--quantization", default="float32",
                        help="CTranslate2 weight type: float32 (default), int8, int8_float32, ...")
    parser.add_argument("--positions-dtype", choices=("checkpoint", "float32"), default="checkpoint",
                        help="sinusoid table rounded to the checkpoint's dtype as transformers "
                             "loads it (default, what ct2-transformers-converter writes), or float32")
    args = parser.parse_args()
    converter = MarianCheckpointConverter(args.checkpoint, args.positions_dtype)
    out = converter.convert(args.output_dir, quantization=args.quantization, force=True)
    print("%s: ctranslate2 %s, quantization %s, positions %s"
          % (out, ctranslate2.__version__, args.quantization, args.positions_dtype), file=sys.stderr)


if __name__ == "__main__":
    main()
