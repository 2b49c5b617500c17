#!/usr/bin/python3
"""Writes the seed corpus of fuzz_hf_tokenizer (tests/fuzz/corpus/fuzz_hf_tokenizer):
small tokenizer.json files covering each supported step (Gemma-style Replace + Split +
byte fallback, Qwen-style NFC + regex Split + ByteLevel, GPT-2's ByteLevel with its own
regex, Metaspace + Digits + Strip + Prepend, added tokens with lstrip / rstrip, merges as
"a b" strings, BERT-style WordPiece with BertNormalizer + BertPreTokenizer and with
Lowercase + WhitespaceSplit + Punctuation + Whitespace, Unigram + Precompiled (T5-style, with and without byte fallback)) with texts that reach them;
and parts at the limits a model file may give them, each with a text or two that makes
them work hardest (a 4,095-byte added token, 4,096-byte WordPiece and Unigram pieces,
Unigram pieces nested 100 deep, regexes of 1024 instructions, a 3,000-byte Prepend, a
long literal Replace pattern).
Input layout: text NUL tokenizer.json
[NUL tokenizer_config.json].

    /usr/bin/python3 tests/fuzz/make_hf_tokenizer_seeds.py
"""
import json
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz_hf_tokenizer")
SPACE = "\u2581"


def byte_level_chars():
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    out, extra = {}, 256
    for b in range(256):
        if b in printable:
            out[b] = chr(b)
        else:
            out[b] = chr(extra)
            extra += 1
    return out


def bpe(tokens, merges, **model):
    vocab = {}
    for t in tokens:
        vocab.setdefault(t, len(vocab))
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    m = {"type": "BPE", "vocab": vocab, "merges": [[a, b] for a, b in merges]}
    m.update(model)
    return m, vocab


def added(vocab, contents, **flags):
    out = []
    for c in contents:
        vocab.setdefault(c, len(vocab))
        entry = {"id": vocab[c], "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                 "normalized": False, "special": True}
        entry.update(flags.get(c, {}))
        out.append(entry)
    return out


def gemma_style():
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>", SPACE, "\n"] + [chr(c) for c in range(97, 123)]
    tokens += ["<0x%02X>" % b for b in range(256)]
    model, vocab = bpe(tokens, [("t", "h"), ("th", "e"), (SPACE, "the"), ("i", "n"), (SPACE, "a")],
                       unk_token="<unk>", byte_fallback=True, fuse_unk=True)
    return {"version": "1.0", "added_tokens": added(vocab, ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>"]),
            "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": SPACE},
            "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                              "invert": False},
            "post_processor": {"type": "TemplateProcessing",
                               "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                                          {"Sequence": {"id": "A", "type_id": 0}}]},
            "decoder": {"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
            "model": model}


def byte_level(regex, use_own_regex=False, ignore_merges=False):
    chars = byte_level_chars()
    tokens = [chars[b] for b in range(256)]
    g = chars[ord(" ")]
    model, vocab = bpe(tokens, [(g, "t"), ("h", "e"), (g + "t", "he"), ("i", "n"), (g, g), ("'", "s")],
                       ignore_merges=ignore_merges)
    pre = {"type": "ByteLevel", "add_prefix_space": use_own_regex, "trim_offsets": False, "use_regex": use_own_regex}
    if regex:
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}, pre]}
    return {"version": "1.0",
            "added_tokens": added(vocab, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  **{"<|im_start|>": {"rstrip": True}, "<|im_end|>": {"lstrip": True}}),
            "normalizer": {"type": "NFC"}, "pre_tokenizer": pre,
            "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                               "use_regex": False},
            "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
            "model": model}


def metaspace():
    tokens = ["<unk>", "<s>", "</s>", SPACE] + [chr(c) for c in range(97, 123)] + [str(d) for d in range(10)]
    model, vocab = bpe(tokens, [("1", "2"), (SPACE, "a"), ("b", "c")], unk_token="<unk>")
    model["merges"] = [" ".join(m) for m in model["merges"]]  # tokenizers < 0.20's layout
    return {"version": "1.0", "added_tokens": added(vocab, ["<unk>", "<s>", "</s>"]),
            "normalizer": {"type": "Sequence", "normalizers": [
                {"type": "Strip", "strip_left": True, "strip_right": True}, {"type": "Prepend", "prepend": "x"},
                {"type": "NFKC"}]},
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Digits", "individual_digits": True},
                {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "first", "add_prefix_space": True,
                 "split": False}]},
            "post_processor": {"type": "TemplateProcessing",
                               "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                          {"Sequence": {"id": "A", "type_id": 0}},
                                          {"SpecialToken": {"id": "</s>", "type_id": 0}}]},
            "decoder": {"type": "Metaspace", "replacement": SPACE, "add_prefix_space": True},
            "model": model}


def wordpiece(bert):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "##in", "##ing", "un", "##able", "σ", "##ς"]
    tokens += [chr(c) for c in range(97, 123)] + ["##" + chr(c) for c in range(97, 123)] + list(".,!'")
    vocab = {}
    for t in tokens:
        vocab.setdefault(t, len(vocab))
    model = {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
             "max_input_chars_per_word": 100 if bert else 8, "vocab": vocab}
    if bert:
        normalizer = {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                      "strip_accents": None, "lowercase": True}
        pre = {"type": "BertPreTokenizer"}
        post = {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]}
    else:
        normalizer = {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]}
        pre = {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "Punctuation"},
                                                      {"type": "Whitespace"}]}
        post = {"type": "RobertaProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]}
    return {"version": "1.0", "added_tokens": added(vocab, ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]),
            "normalizer": normalizer, "pre_tokenizer": pre, "post_processor": post,
            "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": bert}, "model": model}


# A Precompiled charsmap of 8 rules (spm_train --normalization_rule_tsv: U+FF45 -> e,
# e U+0301 -> U+00E9, U+00A0 / U+FFFD / U+3000 / tab -> space, U+0BC6 U+0BBE -> U+0BCA,
# U+FF21 -> A), base64.
SMALL_CHARSMAP = (
    "AAQAAAAgAAAJDQAAAAAAgMwYAgCBBQAABgAAgKARAACvJAIAhoQDAOC0AgCu/AIAvh0AAAkAAICACAIAoXEAAIA1AAC8/AIAvQAC"
    "AAIAAIC/4AIAhQUAAAQAAIC9UQAAFgAAABkAAAAYAAAAGwAAABoAAAAdAAAAHAAAAB8AAAAeAAAAIQAAACAAAAAjAAAAIgAAACUA"
    "AAAkAAAAJwAAACYAAAApAAAAKAAAACsAAAAqAAAALQAAACwAAAAvAAAALgAAADEAAAAwAAAAMwAAADIAAAA1AAAANAAAADcAAAA2"
    "AAAAOQAAADgAAAA7AAAAOgAAAD0AAAA8AAAAPwAAAD4AAABBAAAAQAAAAEMAAABCAAAARQAAAEQAAABHAAAARgAAAEkAAABIAAAA"
    "SwAAAEoAAABNAAAATAAAAE8AAABOAAAAUQAAAFAAAABTAAAAUgAAAFUAAABUAAAAVwAAAFYAAABZAAAAWAAAAFsAAABaAAAAXQAA"
    "AFwAAABfAAAAXgAAAGEAAABgAAAAYwAAAGIAAABlAAAAZAAAAGcAAABmAAAAaQAAAGgAAABrAAAAagAAAG0AAABliAIAbwAAAG4A"
    "AABxAAAAcAAAAHMAAAByAAAAdQAAAHQAAAB3AAAAdgAAAHkAAAB4AAAAewAAAHoAAAB9AAAAfAAAAH8AAAB+AAAAgQAAAIAAAACD"
    "AAAAggAAAIUAAACEAAAAhwAAAIYAAACJAAAAiAAAAIsAAACKAAAAjQAAAIwAAACPAAAAjgAAAJEAAACQAAAAkwAAAJIAAACVAAAA"
    "lAAAAJcAAACWAAAAmQAAAJgAAACbAAAAmgAAAJ0AAACcAAAAnwAAAJ4AAAChAAAAoAAAAKMAAACiAAAApQAAAKQAAACnAAAApgAA"
    "AKkAAACoAAAAqwAAAKoAAACtAAAArAAAAK8AAACuAAAAsQAAALAAAACzAAAAsgAAALUAAAC0AAAAtwAAALYAAAC5AAAAuAAAALsA"
    "AAC6AAAAvQAAALwAAAC/AAAAvgAAAMEAAADAAAAAwwAAAMIAAADFAAAAxAAAAMcAAADGAAAAyQAAAMgAAADCsAEAygAAAM0AAADM"
    "AAAAzwAAAM4AAADRAAAA0AAAANMAAADSAAAA1QAAANQAAADXAAAA1gAAANkAAADYAAAA2wAAANoAAADdAAAA3AAAAN8AAADeAAAA"
    "4QAAAOAAAADjAAAA4gAAAOUAAADkAAAA5wAAAO8sAQDgAAEA6AAAAOsAAADjmAEA7QAAAOwAAADvAAAA7gAAAPEAAADwAAAA8wAA"
    "APIAAAD1AAAA9AAAAPcAAAD2AAAA+QAAAPgAAAD7AAAA+gAAAP0AAAD8AAAA/wAAAP4AAAAgAEEAZQDDqQDgr4oA")


def unigram(byte_fallback):
    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), (SPACE, -2.0)]
    pieces += [(chr(c), -4.0 - c / 100) for c in range(97, 123)] + [("\u00e9", -5.0), ("A", -6.0)]
    pieces += [(SPACE + w, -3.0) for w in ["the", "he", "a", "in"]] + [("he", -3.5), ("th", -3.5), ("0", -5), ("00", -6)]
    if byte_fallback:
        pieces += [("<0x%02X>" % b, -9.0) for b in range(256)]
    vocab = {p: i for i, (p, _) in enumerate(pieces)}
    meta = {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "always", "split": True}
    return {"version": "1.0", "added_tokens": added(vocab, ["<pad>", "</s>", "<unk>"]),
            "normalizer": {"type": "Sequence", "normalizers": [
                {"type": "Precompiled", "precompiled_charsmap": SMALL_CHARSMAP},
                {"type": "Strip", "strip_left": False, "strip_right": True},
                {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": SPACE}]},
            "pre_tokenizer": meta,
            "post_processor": {"type": "TemplateProcessing",
                               "single": [{"Sequence": {"id": "A", "type_id": 0}},
                                          {"SpecialToken": {"id": "</s>", "type_id": 0}}]},
            "decoder": meta if not byte_fallback else {"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
            "model": {"type": "Unigram", "unk_id": 2, "vocab": [list(p) for p in pieces], "byte_fallback": byte_fallback}}


QWEN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
        r"\s+(?!\S)|\s+")
TEXTS = ["the thin theory", "Über 12 Äpfel, don't SHOUT!\n\n  trailing  ", "<start_of_turn>user\nhi\u00e9 e\u0301",
         "<|im_start|>system\n  hello<|im_end|>  \n", "\u4f60\u597d\u4e16\u754c 123456 \U0001F600", "", "   ",
         "a\tb\r\nc", "1234567890 bc abc", "ΟΔΟΣ İ unable RUNNING\u0000\ufffd [MASK]",
         "\uff45\u0301 e\u0301\u00a0\ufffd\u0338 \u0baa\u0bc6\u0bbe \uff21\u3000000"]
TOKENIZERS = {
    "gemma": gemma_style(),
    "qwen": byte_level(QWEN),
    "llama3": byte_level(QWEN.replace(r"\p{N}|", r"\p{N}{1,3}|"), ignore_merges=True),
    "gpt2": byte_level(None, use_own_regex=True),
    "metaspace": metaspace(),
    "bert": wordpiece(True),
    "wordpiece": wordpiece(False),
    "unigram": unigram(False),
    "unigram_bytes": unigram(True),
}


def tiny_bpe(pre_tokenizer=None, normalizer=None):
    """Letters and a space, one merge: the smallest base for the parts at their limits."""
    model, vocab = bpe(["<unk>", " "] + [chr(c) for c in range(97, 123)], [("a", "a")], unk_token="<unk>")
    return {"version": "1.0", "added_tokens": added(vocab, ["<unk>"]), "normalizer": normalizer,
            "pre_tokenizer": pre_tokenizer, "post_processor": None, "decoder": None, "model": model}, vocab


def split(pattern):
    return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}


def at_limits():
    """(name, tokenizer, texts) of each part at its limit."""
    out = []
    tokenizer, vocab = tiny_bpe()
    tokenizer["added_tokens"] += added(vocab, ["a" * 4095], **{"a" * 4095: {"special": False}})
    out.append(("added_4095", tokenizer, ["a" * 4100, "a" * 4094 + "b a"]))
    vocab = {t: i for i, t in enumerate(["[UNK]", "a", "##a", "b", "##b", "a" * 4096, "##" + "a" * 4094])}
    out.append(("wordpiece_4096", {
        "version": "1.0", "added_tokens": added(vocab, ["[UNK]"]), "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": False},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 4294967295, "vocab": vocab}}, ["a" * 4100 + " " + "a" * 4093 + "b"]))

    def unigram_of(pieces):
        vocab = {p: i for i, (p, _) in enumerate(pieces)}
        return {"version": "1.0", "added_tokens": added(vocab, ["<unk>"]), "normalizer": None,
                "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None, "decoder": None,
                "model": {"type": "Unigram", "unk_id": 0, "vocab": [list(p) for p in pieces], "byte_fallback": False}}
    out.append(("unigram_4096", unigram_of([("<unk>", 0.0), ("a", -2.0), ("b", -2.0), ("a" * 4096, -1.0)]),
                ["a" * 4100 + " b" + "a" * 50]))
    # Each character starts 100 pieces; a word under 128 bytes stays within the edges allowed.
    out.append(("unigram_nested", unigram_of([("<unk>", 0.0)] + [("a" * k, -k / 10) for k in range(1, 101)]),
                ["a" * 120 + " " + "a" * 127, "ab" * 40]))
    out.append(("regex_busy", tiny_bpe(split(r"(?:.?){511}x"))[0], ["y" * 8, "y" * 600 + "x"]))
    out.append(("regex_1024", tiny_bpe(split("a{1023}"))[0], ["a" * 2100, "b" + "a" * 1023]))
    out.append(("prepend_3000", tiny_bpe(split(QWEN), {"type": "Prepend", "prepend": "the user " * 334})[0],
                ["hi there", "a"]))
    out.append(("replace_literal", tiny_bpe(None, {"type": "Replace", "pattern": {"String": "a" * 40 + "b"},
                                                   "content": " "})[0], ["a" * 200 + "a" * 40 + "b" + "a" * 41 + "b"]))
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    for name in os.listdir(OUT):
        if name.startswith("seed-"):
            os.remove(os.path.join(OUT, name))
    for name, tokenizer in TOKENIZERS.items():
        config = json.dumps({"clean_up_tokenization_spaces": name == "gpt2",
                             "additional_special_tokens": ["<|im_start|>"]})
        for i, text in enumerate(TEXTS):
            data = text.encode() + b"\0" + json.dumps(tokenizer, ensure_ascii=False).encode()
            if i % 2 == 0:
                data += b"\0" + config.encode()
            with open(os.path.join(OUT, f"seed-{name}-{i}"), "wb") as f:
                f.write(data)
    for name, tokenizer, texts in at_limits():
        for i, text in enumerate(texts):
            with open(os.path.join(OUT, f"seed-{name}-{i}"), "wb") as f:
                f.write(text.encode() + b"\0" + json.dumps(tokenizer, ensure_ascii=False).encode())


if __name__ == "__main__":
    main()
