#!/usr/bin/python3
"""Makes tests/fixtures/hf_wordpiece: BERT-style WordPiece tokenizer.json files built here
from real text, and what transformers.js (npm @lenml/tokenizers 3.7.2, the oracle) makes
of held-out real text with them, for tests/test_hf_wordpiece.cpp. No BERT tokenizer is
downloaded: the vocabulary is derived from the gettext catalogs Debian installs.

    /usr/bin/python3 tools/reference/make_hf_wordpiece_fixtures.py /work/npm-oracles/node_modules

Text: the msgids and msgstrs of /usr/share/locale/<locale>/LC_MESSAGES/*.mo in 14 locales
(Latin, Greek, Cyrillic, Arabic, Hebrew, Devanagari, Thai, Georgian, Han, Kana, Hangul
scripts; German ß, Turkish İ and ı, Greek final sigma), each locale's messages split
alternately into a training half (the vocabulary) and a held-out half (the test lines).

Vocabulary (~10,000 entries): [PAD] [UNK] [CLS] [SEP] [MASK], every character seen in the
training text both as a word-initial piece and as "##" + character, then by frequency the
commonest whole words (BERT-uncased-style normalization: lowercase, accents stripped,
CJK ideographs alone), word-initial prefixes of 2..6 characters and "##" suffixes of
2..6 characters of the words that are not whole tokens.

Writes, xz-compressed:
  <name>/tokenizer.json.xz, <name>/tokenizer_config.json.xz  for the three variants:
      uncased   BertNormalizer (clean_text, handle_chinese_chars, lowercase, strip_accents
                null), BertPreTokenizer, WordPiece, TemplateProcessing [CLS] $A [SEP],
                WordPiece decoder (cleanup), clean_up_tokenization_spaces
      cased     BertNormalizer (lowercase false, strip_accents false), Sequence
                [WhitespaceSplit, Punctuation], BertProcessing, WordPiece decoder
      lower     Sequence [NFC, Lowercase], Whitespace, RobertaProcessing, no decoder
                (transformers.js joins tokens with spaces), max_input_chars_per_word 20
  expected.bin.xz     the held-out lines (>= 20,000) then the special cases below, per line
                      (little-endian): u32 length + UTF-8 of the line, then for uncased,
                      cased and lower in turn: u16 count, u16 ids of encode(line), u32
                      length + UTF-8 of decode(ids, skip_special_tokens: true)
                      (wordpiece_oracle.mjs); one stream, so xz shares what the texts share
  lowercase.txt.xz    per line: an escaped text, a tab, its toLowerCase() in Node (every
                      code point whose lowercase differs, then sigma / İ / ß / Cherokee /
                      Deseret contexts)
"""
import json
import lzma
import os
import struct
import subprocess
import sys
import unicodedata
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gettext_catalogs  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "fixtures", "hf_wordpiece")
LOCALES = ["de", "fr", "tr", "pl", "vi", "ru", "uk", "el", "ar", "he", "hi", "th", "ka", "ja", "zh_CN", "ko"]
PER_LOCALE = 1270  # held-out lines per locale (and as many for training)
MAX_CHARS = 160
VOCAB_SIZE = 10000
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
SPECIAL_CASES = [
    "İstanbul İZMİR ıi", "ΟΔΟΣ ΟΔΟΣ.", "Σ", "ΑΣ", "ΑΣ'Σ", "Α\u0345Σ", "ὈΔΥΣΣΕΎΣ ΣΑΣ", "Straße STRASSE ẞ",
    "ᏣᎳᎩ ꭰꮳ", "\U00010400\U00010428 \U0001e900", "Ǆǅǆ ǈ", "ﬀ ﬁ ﬃ", "a\u0000b\ufffdc\u200bd\u00ade", "x\u000by\u000cz\u0085w",
    "\ufeffbom", "e\u0301 n\u0303 A\u030a", "中文字符和日本語の文章", "\U00020000\U0002a6d6 \uf900\ufa6d", "don't I'm . , ! ?",
    "<b>bold</b> [CLS] [SEP]", "a\u00a0b\u2003c\u3000d", "tab\there\nnew", "emoji 😀👍🏽", "1234567 89,5%",
    "x" * 150, "ab" * 60 + " " + "é" * 30, "", " ", "   spaced   out   ", "Ⅻ ⅻ ⓐ Ⓐ", "ǅungla",
]


def escape(text):
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")


def collect():
    seen = set()
    train, test = [], []
    for locale in LOCALES:
        taken = 0
        for _, entry in gettext_catalogs.messages(gettext_catalogs.catalogs(locale)):
            for text in [entry.msgid] + list(entry.msgstrs):
                if not text or text in seen or len(text) > MAX_CHARS or "\r" in text:
                    continue
                seen.add(text)
                (train if taken % 2 == 0 else test).append(text)
                taken += 1
            if taken >= 2 * PER_LOCALE:
                break
    return train, test


def is_punct(c):
    o = ord(c)
    return (0x21 <= o <= 0x2F or 0x3A <= o <= 0x40 or 0x5B <= o <= 0x60 or 0x7B <= o <= 0x7E
            or unicodedata.category(c).startswith("P"))


def bert_words(text):
    """An approximation of the uncased pipeline (the vocabulary need not follow it exactly)."""
    out = []
    for c in text:
        o = ord(c)
        if 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0xF900 <= o <= 0xFAFF:
            out.append(f" {c} ")
        else:
            out.append(c)
    text = unicodedata.normalize("NFD", "".join(out).lower())
    text = "".join(c for c in text if unicodedata.category(c) != "Mn")
    words, cur = [], []
    for c in text:
        if c.isspace():
            if cur:
                words.append("".join(cur))
            cur = []
        elif is_punct(c):
            if cur:
                words.append("".join(cur))
            cur = []
            words.append(c)
        else:
            cur.append(c)
    if cur:
        words.append("".join(cur))
    return words


def make_vocab(train):
    words = Counter()
    chars = set()
    for line in train + SPECIAL_CASES:
        for w in bert_words(line):
            words[w] += 1
        for form in (line, line.lower(), unicodedata.normalize("NFD", line.lower())):
            chars.update(c for c in form if not c.isspace())
    vocab = list(SPECIALS)
    have = set(vocab)

    def add(token):
        if token not in have and len(vocab) < VOCAB_SIZE:
            have.add(token)
            vocab.append(token)

    for c in sorted(chars):
        add(c)
        add("##" + c)
    budget = VOCAB_SIZE - len(vocab)
    for w, _ in words.most_common(budget * 5 // 10):
        add(w)
    prefixes, suffixes = Counter(), Counter()
    for w, n in words.items():
        if w in have or len(w) < 3:
            continue
        for k in range(2, min(6, len(w) - 1) + 1):
            prefixes[w[:k]] += n * k
            suffixes["##" + w[-k:]] += n * k
    for p, _ in prefixes.most_common(budget * 2 // 10):
        add(p)
    for s, _ in suffixes.most_common(VOCAB_SIZE):
        add(s)
    return vocab


def tokenizer_json(vocab, variant):
    ids = {t: i for i, t in enumerate(vocab)}
    added = [{"id": ids[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for t in SPECIALS]
    model = {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
             "max_input_chars_per_word": 100, "vocab": ids}
    if variant == "uncased":
        normalizer = {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                      "strip_accents": None, "lowercase": True}
        pre = {"type": "BertPreTokenizer"}
        post = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                           {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                "pair": [], "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [ids["[CLS]"]], "tokens": ["[CLS]"]},
                                               "[SEP]": {"id": "[SEP]", "ids": [ids["[SEP]"]], "tokens": ["[SEP]"]}}}
        decoder = {"type": "WordPiece", "prefix": "##", "cleanup": True}
        cleanup = True
    elif variant == "cased":
        normalizer = {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                      "strip_accents": False, "lowercase": False}
        pre = {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
                                                      {"type": "Punctuation", "behavior": "Isolated"}]}
        post = {"type": "BertProcessing", "sep": ["[SEP]", ids["[SEP]"]], "cls": ["[CLS]", ids["[CLS]"]]}
        decoder = {"type": "WordPiece", "prefix": "##", "cleanup": False}
        cleanup = False
    else:
        normalizer = {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]}
        pre = {"type": "Whitespace"}
        post = {"type": "RobertaProcessing", "sep": ["[SEP]", ids["[SEP]"]], "cls": ["[CLS]", ids["[CLS]"]],
                "trim_offsets": True, "add_prefix_space": False}
        decoder = None
        model["max_input_chars_per_word"] = 20
        cleanup = False
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": normalizer,
           "pre_tokenizer": pre, "post_processor": post, "decoder": decoder, "model": model}
    config = {"clean_up_tokenization_spaces": cleanup, "do_lower_case": variant != "cased", "model_max_length": 512,
              "cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]",
              "mask_token": "[MASK]", "tokenizer_class": "BertTokenizer"}
    return tok, config


def xz_write(path, data):
    with lzma.open(path, "wb", preset=9 | lzma.PRESET_EXTREME) as f:
        f.write(data)


def lowercase_cases(modules):
    texts = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and (
        chr(c).lower() != chr(c) or unicodedata.category(chr(c)) in ("Lu", "Lt"))]
    # Python's lower() is close to JavaScript's; the characters where Node says otherwise are found below.
    texts += [chr(c) for c in (0x130, 0x3A3, 0x1E9E, 0x13A0, 0xAB70, 0x10400, 0x1E900)]
    texts += SPECIAL_CASES + ["ΣΑΣ ΣΑΣ", "Σ.Σ", "ΑΣ\u0301", "ΑΣ\u0301Β", "Α.Σ", "Α'Σ'", "ʰΣ", "ΑΣʰ", "ΑΣ" * 5 + "."]
    data = "".join(escape(t) + "\n" for t in texts).encode("utf-8")
    script = os.path.join(HERE, "wordpiece_oracle.mjs")
    result = subprocess.run(["node", script, modules, "lowercase"], input=data, capture_output=True, check=True)
    lowered = result.stdout.decode("utf-8").split("\n")[:-1]
    assert len(lowered) == len(texts)
    return "".join(escape(t) + "\t" + low + "\n" for t, low in zip(texts, lowered)).encode("utf-8")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    modules = sys.argv[1]
    train, test = collect()
    vocab = make_vocab(train)
    lines = test + SPECIAL_CASES
    os.makedirs(OUT, exist_ok=True)
    text = "".join(escape(line) + "\n" for line in lines).encode("utf-8")
    expected = {}
    xz_write(os.path.join(OUT, "lowercase.txt.xz"), lowercase_cases(modules))
    script = os.path.join(HERE, "wordpiece_oracle.mjs")
    for variant in ["uncased", "cased", "lower"]:
        d = os.path.join(OUT, variant)
        os.makedirs(d, exist_ok=True)
        tok, config = tokenizer_json(vocab, variant)
        for name, obj in [("tokenizer.json", tok), ("tokenizer_config.json", config)]:
            data = json.dumps(obj, ensure_ascii=False, indent=1).encode("utf-8")
            with open(os.path.join("/tmp", f"wp_{variant}_{name}"), "wb") as f:
                f.write(data)
            xz_write(os.path.join(d, name + ".xz"), data)
        tmp = f"/tmp/wp_{variant}"
        os.makedirs(tmp, exist_ok=True)
        for name in ["tokenizer.json", "tokenizer_config.json"]:
            os.replace(os.path.join("/tmp", f"wp_{variant}_{name}"), os.path.join(tmp, name))
        result = subprocess.run(["node", script, modules, "encode", tmp], input=text, capture_output=True, check=True)
        expected[variant] = result.stdout
        print(f"{variant}: {len(lines)} lines, {len(vocab)} tokens, {len(result.stdout)} bytes of expectations",
              file=sys.stderr)
    out = bytearray()
    at = {v: 0 for v in expected}
    for line in lines:
        raw = line.encode("utf-8")
        out += struct.pack("<I", len(raw)) + raw
        for variant, data in expected.items():
            p = at[variant]
            n = struct.unpack_from("<H", data, p)[0]
            p += 2 + 2 * n
            p += 4 + struct.unpack_from("<I", data, p)[0]
            out += data[at[variant]:p]
            at[variant] = p
    assert all(at[v] == len(expected[v]) for v in expected)
    xz_write(os.path.join(OUT, "expected.bin.xz"), bytes(out))


if __name__ == "__main__":
    main()
