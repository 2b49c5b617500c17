#!/usr/bin/python3
"""Makes tests/fixtures/hf_unigram: tokenizer.json files with a Unigram model and the
Precompiled normalizer (T5 / mT5 style), and what SentencePiece itself (Debian's
python3-sentencepiece 0.1.97, the independent oracle) makes of real text with the
models they were converted from, for tests/test_hf_unigram.cpp.

    /usr/bin/python3 tools/reference/make_hf_unigram_fixtures.py

1. Trains two unigram models with Debian's spm_train (sentencepiece 0.1.97): 8,000
   pieces, --normalization_rule_name=nmt_nfkc, T5's special ids (pad 0, eos 1, unk 2,
   no bos), on gettext messages (/usr/share/locale/*/LC_MESSAGES/*.mo) of 16 locales
   in 12 scripts that are NOT among the test lines; "t5" as is, "t5_byte_fallback" with
   --byte_fallback.
2. Converts each .model into tokenizer.json as transformers' convert_slow_tokenizer.py
   T5Converter(SpmConverter) writes it (followed: transformers main at commit
   00111b31e6624701fe598078e80d36127ac95241, the v5 development line; tokenizers >= 0.19
   serialization): model Unigram (vocab [piece, score] in id order, unk_id from the
   trainer spec, byte_fallback false as T5Converter has no handle_byte_fallback),
   normalizer Sequence[Precompiled(charsmap), Strip(right), Replace(Regex(" {2,}"),
   "\u2581")], pre_tokenizer Metaspace("\u2581", prepend_scheme "always", split true),
   decoder Metaspace (same), post_processor TemplateProcessing(single ["$A", "</s>"]),
   added tokens the control pieces (special) and <unk> (as T5TokenizerFast saves it).
   T5's 100 <extra_id_*> tokens are left out (ids past SentencePiece's vocabulary,
   never produced from text). The byte-fallback variant is the same pipeline with
   Unigram(byte_fallback: true) and the decoder LlamaConverter gives byte-fallback
   models: Sequence[Replace("\u2581", " "), ByteFallback, Fuse, Strip(" ", 1, 0)].
3. Encodes every 4th line of tests/fixtures/hf_tokenizer/lines.txt.xz (the shared
   gettext test lines, 20 locales, >= 10 scripts: 25,673 lines, all held out of
   training; the byte-fallback variant every 16th line from the 3rd, 6,418)
   with sentencepiece's encode, appends </s> (the post-processor), and decodes with
   sentencepiece (the ids less <unk>: Hugging Face skips that special token where
   SentencePiece would print " \u2047 ").

Writes, xz-compressed:
  <name>/tokenizer.json.xz, <name>/tokenizer_config.json.xz (clean_up_tokenization_spaces
                           false, transformers v5's default)
  <name>/expected.bin.xz   per test line: u32 line number (in lines.txt), u32 count of
                           ids, the ids (u16 LE), u32 byte length of the decoded text,
                           the decoded text (UTF-8); length 0xFFFFFFFF (no
                           text): the line itself
"""
import base64
import json
import lzma
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gettext_catalogs  # noqa: E402
import sentencepiece  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
LINES = os.path.join(ROOT, "tests", "fixtures", "hf_tokenizer", "lines.txt.xz")
OUT = os.path.join(ROOT, "tests", "fixtures", "hf_unigram")
TRAIN_LOCALES = ["de", "fr", "ru", "uk", "el", "ar", "fa", "he", "hi", "bn", "ta", "th", "ja", "zh_CN", "ko", "ka"]
PER_LOCALE = 12000
SPACE = "\u2581"
# transformers v5's default (no clean-up of " ." and the like after decoding), which
# SentencePiece's decode matches.
CONFIG = {"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>", "clean_up_tokenization_spaces": False}


def unescape(line):
    out, i = [], 0
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line):
            out.append({"n": "\n", "t": "\t", "\\": "\\"}.get(line[i + 1], line[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def test_lines():
    with lzma.open(LINES, "rt", encoding="utf-8") as f:
        return [unescape(line.rstrip("\n")) for line in f]


def training_text(held_out):
    seen, lines = set(held_out), []
    for locale in TRAIN_LOCALES:
        taken = 0
        for _, entry in gettext_catalogs.messages(gettext_catalogs.catalogs(locale)):
            for text in entry.msgstrs:
                text = text.replace("\n", " ").strip()
                if text and text not in seen and taken < PER_LOCALE:
                    seen.add(text)
                    lines.append(text)
                    taken += 1
            if taken >= PER_LOCALE:
                break
    return lines


def proto_fields(data):
    """(field number, wire type, value) of a protobuf message's top level."""
    i = 0

    def varint():
        nonlocal i
        shift = value = 0
        while True:
            b = data[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return value

    while i < len(data):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            yield field, wire, varint()
        elif wire == 1:
            yield field, wire, data[i:i + 8]
            i += 8
        elif wire == 2:
            n = varint()
            yield field, wire, data[i:i + n]
            i += n
        elif wire == 5:
            yield field, wire, data[i:i + 4]
            i += 4
        else:
            raise ValueError(f"wire type {wire}")


def precompiled_charsmap(model_bytes):
    for field, _, value in proto_fields(model_bytes):
        if field == 3:  # ModelProto.normalizer_spec
            for f, _, v in proto_fields(value):
                if f == 2:  # NormalizerSpec.precompiled_charsmap
                    return v
    raise ValueError("no precompiled_charsmap")


def tokenizer_json(sp, charsmap, byte_fallback):
    vocab = [[sp.id_to_piece(i), sp.get_score(i)] for i in range(sp.get_piece_size())]
    added = []
    for i in range(sp.get_piece_size()):
        if sp.is_control(i) or sp.is_unknown(i):
            added.append({"id": i, "content": sp.id_to_piece(i), "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True})
    metaspace = {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "always", "split": True}
    if byte_fallback:
        decoder = {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    else:
        decoder = metaspace
    eos = sp.eos_id()
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode("ascii")},
            {"type": "Strip", "strip_left": False, "strip_right": True},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": SPACE}]},
        "pre_tokenizer": metaspace,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "special_tokens": {"</s>": {"id": "</s>", "ids": [eos], "tokens": ["</s>"]}}},
        "decoder": decoder,
        "model": {"type": "Unigram", "unk_id": sp.unk_id(), "vocab": vocab, "byte_fallback": byte_fallback},
    }


def main():
    lines = test_lines()
    train = training_text(lines)
    print(f"{len(train)} training lines, {len(lines)} test lines", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "train.txt")
        with open(corpus, "w", encoding="utf-8") as f:
            f.write("".join(t + "\n" for t in train))
        for name, byte_fallback in [("t5", False), ("t5_byte_fallback", True)]:
            prefix = os.path.join(tmp, name)
            subprocess.run(["spm_train", f"--input={corpus}", f"--model_prefix={prefix}", "--model_type=unigram",
                            "--vocab_size=8000", "--normalization_rule_name=nmt_nfkc", "--pad_id=0", "--eos_id=1",
                            "--unk_id=2", "--bos_id=-1", "--num_threads=2", "--input_sentence_size=400000",
                            "--seed_sentencepiece_size=200000", f"--byte_fallback={str(byte_fallback).lower()}"],
                           check=True, capture_output=True)
            with open(prefix + ".model", "rb") as f:
                model = f.read()
            sp = sentencepiece.SentencePieceProcessor(model_proto=model)
            assert sp.get_piece_size() < 65536
            os.makedirs(os.path.join(OUT, name), exist_ok=True)
            doc = tokenizer_json(sp, precompiled_charsmap(model), byte_fallback)
            with lzma.open(os.path.join(OUT, name, "tokenizer.json.xz"), "wb", preset=9 | lzma.PRESET_EXTREME) as f:
                f.write(json.dumps(doc, ensure_ascii=False, indent=2).encode("utf-8"))
            with lzma.open(os.path.join(OUT, name, "tokenizer_config.json.xz"), "wb", preset=9 | lzma.PRESET_EXTREME) as f:
                f.write(json.dumps(CONFIG, indent=2).encode("utf-8"))
            out = bytearray()
            # t5: every 4th line (25,673); the byte-fallback variant every 16th, from the 3rd.
            for number in (range(0, len(lines), 4) if not byte_fallback else range(2, len(lines), 16)):
                ids = sp.encode(lines[number]) + [sp.eos_id()]
                decoded = sp.decode([i for i in ids[:-1] if i != sp.unk_id()]).encode("utf-8")
                out += struct.pack("<II", number, len(ids)) + struct.pack(f"<{len(ids)}H", *ids)
                if decoded == lines[number].encode("utf-8"):
                    out += struct.pack("<I", 0xFFFFFFFF)  # the line itself
                else:
                    out += struct.pack("<I", len(decoded)) + decoded
            with lzma.open(os.path.join(OUT, name, "expected.bin.xz"), "wb", preset=9 | lzma.PRESET_EXTREME) as f:
                f.write(bytes(out))
            print(f"{name}: {len(out)} bytes of expectations", file=sys.stderr)


if __name__ == "__main__":
    main()
