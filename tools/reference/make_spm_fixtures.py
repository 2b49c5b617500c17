#!/usr/bin/env python3
"""Writes Petrel's SentencePiece fixtures (tests/fixtures/sentencepiece/) from real text
and Debian's sentencepiece 0.1.97 as the oracle:

    /usr/bin/python3 tools/reference/make_spm_fixtures.py tests/fixtures/sentencepiece

* Text: every message of the gettext catalogs under /usr/share/locale (msgid, plural
  msgid and every plural form of msgstr; contexts stripped; one line per text line),
  deduplicated and sorted. A hash of each line puts it in the training part (1 in 4)
  or the held-out part, so the split does not depend on catalog order.
* models/*.spm: small models trained with spm_train on training lines of a few scripts
  (POOLS) — unigram and BPE; with and without byte fallback; user-defined symbols
  (>>fra<< and other language codes) and extra control symbols; nmt_nfkc, nmt_nfkc_cf
  and identity normalization; whitespace as suffix; extra whitespace kept; no dummy
  prefix; and models edited here in the wire format for what spm_train never writes:
  pieces marked UNUSED, escape_whitespaces off, a custom unk_surface. character_coverage is below 1 and held-out
  text has scripts the models never saw, so unknown characters are common.
* corpus.txt.xz: held-out lines balanced over scripts (at least 100,000 lines);
  corpus.json records the count per script. Its first SAMPLE_LINES lines (short ones,
  at most SAMPLE_MAX_BYTES) are the sample whose oracle outputs are committed:
  expected.txt.xz holds, for every model, a line "### MODEL KIND" and then one line per
  sample line of what spm_encode --output_format=piece|id and spm_decode
  --input_format=id|piece print for the sample (KIND piece, id, decode_id,
  decode_piece). To keep it small, an id line is "=" when the ids are the oracle's
  piece_to_id of the pieces, and a decoded line is "=" when it equals the input line
  or (decode_piece) "^" when it equals the decode_id line; any other line is "|"
  followed by the output.
* edge_cases.json: hand-written inputs (empty, spaces, malformed UTF-8, U+FFFD, U+2581,
  literal </s> and <unk>, characters outside the vocabulary, zero-width and full-width
  characters, a 1 MB line, byte pieces forming invalid UTF-8, unknown pieces) with what
  the python3-sentencepiece module returns for each model. Inputs are hex; the 1 MB
  line is a repeated phrase and its outputs are FNV-1a 64 hashes.

--reuse-models keeps the committed models (no retraining) and rewrites the rest.
Needs Debian's sentencepiece and python3-sentencepiece (installed when run as root;
otherwise the apt-get line is printed) and xz-utils. CI uses the committed output.
"""
import collections
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gettext_catalogs  # noqa: E402

PACKAGES = {"spm_train": "sentencepiece", "spm_encode": "sentencepiece", "spm_decode": "sentencepiece",
            "xz": "xz-utils"}
SAMPLE_LINES = 10000
SAMPLE_MAX_BYTES = 64        # the sample's lines are short UI strings: smaller oracle outputs
CORPUS_PER_SCRIPT = 4600    # cap per script; Latin (most of the text) gets LATIN_LINES
LATIN_LINES = 16000
MAX_LINE_BYTES = 400
UD = ">>fra<<,>>deu<<,>>rus<<,>>jpn<<,>>ara<<"

# Training text: lines of a few scripts, as a multilingual translation model sees them
# ("wide") or of a European pair ("narrow"); held-out text in other scripts is then
# unknown to the model (which exercises unknown pieces and byte fallback).
POOLS = {"wide": ("Latin", "Cyrillic", "Greek", "Arabic", "Devanagari", "Han", "Kana", "Hangul", "Hebrew", "Thai"),
         "narrow": ("Latin", "Cyrillic", "Greek")}
POOL_LINES = {"wide": 50000, "narrow": 40000}

# name: (pool, spm_train options besides input/model_prefix). Every behaviour the
# engine implements is exercised by at least one model.
MODELS = {
    "unigram_nfkc": ("wide", dict(model_type="unigram", vocab_size=4000, character_coverage=0.999,
                                  control_symbols="<2en>,<2de>")),
    "unigram_nfkc_bytes_udf": ("wide", dict(model_type="unigram", vocab_size=3000, character_coverage=0.99,
                                            byte_fallback="true", user_defined_symbols=UD)),
    "unigram_nfkc_cf": ("narrow", dict(model_type="unigram", vocab_size=1000, character_coverage=0.995,
                                       normalization_rule_name="nmt_nfkc_cf")),
    "unigram_identity_spaces": ("narrow", dict(model_type="unigram", vocab_size=2000, character_coverage=0.99,
                                               normalization_rule_name="identity",
                                               remove_extra_whitespaces="false")),
    "unigram_identity_suffix": ("narrow", dict(model_type="unigram", vocab_size=1000, character_coverage=0.995,
                                               normalization_rule_name="identity",
                                               treat_whitespace_as_suffix="true")),
    "bpe_identity": ("narrow", dict(model_type="bpe", vocab_size=2000, character_coverage=0.995,
                                    normalization_rule_name="identity")),
    "bpe_identity_bytes_udf": ("wide", dict(model_type="bpe", vocab_size=4000, character_coverage=0.99,
                                            normalization_rule_name="identity", byte_fallback="true",
                                            user_defined_symbols=UD, control_symbols="<2en>")),
    "bpe_identity_suffix_nodummy": ("narrow", dict(model_type="bpe", vocab_size=1000, character_coverage=0.995,
                                                   normalization_rule_name="identity",
                                                   treat_whitespace_as_suffix="true", add_dummy_prefix="false")),
}
# name: (trained model it is derived from, edits: every n-th normal piece marked
# UNUSED, NormalizerSpec varint fields replaced, TrainerSpec.unk_surface set)
DERIVED_MODELS = {
    "unigram_unused": ("unigram_identity_spaces", dict(unused_every=7)),
    "bpe_unused": ("bpe_identity", dict(unused_every=5)),
    # spm_train has no flag for these: spaces stay spaces (and pieces with ▁ never
    # match), and a custom unk_surface for decoding.
    "bpe_noescape": ("bpe_identity", dict(normalizer={5: 0})),
    "unigram_suffix_noescape_unksurface": ("unigram_identity_suffix",
                                           dict(normalizer={5: 0}, unk_surface="<?>")),
}

# First word of a character's Unicode name -> the script it counts for.
SCRIPT_OF_NAME = {
    "LATIN": "Latin", "CYRILLIC": "Cyrillic", "GREEK": "Greek", "ARMENIAN": "Armenian", "HEBREW": "Hebrew",
    "ARABIC": "Arabic", "DEVANAGARI": "Devanagari", "BENGALI": "Bengali", "GURMUKHI": "Gurmukhi",
    "GUJARATI": "Gujarati", "ORIYA": "Oriya", "TAMIL": "Tamil", "TELUGU": "Telugu", "KANNADA": "Kannada",
    "MALAYALAM": "Malayalam", "SINHALA": "Sinhala", "THAI": "Thai", "LAO": "Lao", "TIBETAN": "Tibetan",
    "MYANMAR": "Myanmar", "GEORGIAN": "Georgian", "HANGUL": "Hangul", "ETHIOPIC": "Ethiopic",
    "KHMER": "Khmer", "CJK": "Han", "HIRAGANA": "Kana", "KATAKANA": "Kana", "THAANA": "Thaana",
    "CHEROKEE": "Cherokee", "SYRIAC": "Syriac", "MONGOLIAN": "Mongolian", "TIFINAGH": "Tifinagh",
    "CANADIAN": "Canadian Aboriginal", "OL": "Ol Chiki", "SHAVIAN": "Shavian", "NKO": "NKo",
}


def ensure_tools():
    missing = sorted({pkg for tool, pkg in PACKAGES.items() if shutil.which(tool) is None})
    try:
        import sentencepiece  # noqa: F401
    except ImportError:
        missing.append("python3-sentencepiece")
    if not missing:
        return
    if os.geteuid() != 0:
        sys.exit(f"needs Debian packages {' '.join(missing)}: sudo apt-get install -y {' '.join(missing)}")
    print(f"installing: {' '.join(missing)}")
    subprocess.run(["apt-get", "update", "-qq"], check=True)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing], check=True)


def script_of(line):
    """The script most letters of the line belong to ("Common" when none)."""
    counts = collections.Counter()
    for ch in line:
        if unicodedata.category(ch)[0] not in "LM":
            continue
        name = unicodedata.name(ch, "")
        script = SCRIPT_OF_NAME.get(name.split(" ")[0]) if name else None
        if name.startswith("HALFWIDTH AND FULLWIDTH") or name.startswith("FULLWIDTH LATIN"):
            script = "Latin"
        counts[script or "Other"] += 1
    return counts.most_common(1)[0][0] if counts else "Common"


def catalog_lines():
    """Every distinct non-blank line of every message, sorted."""
    lines = set()
    for _, entry in gettext_catalogs.messages(gettext_catalogs.catalogs()):
        texts = [entry.msgid] + ([entry.msgid_plural] if entry.msgid_plural else []) + entry.msgstrs
        for text in texts:
            for line in text.split("\n"):
                if line.strip() and len(line.encode("utf-8")) <= MAX_LINE_BYTES:
                    lines.add(line)
    return sorted(lines)


def is_training(line):
    return hashlib.sha1(line.encode("utf-8")).digest()[0] < 64


def choose_corpus(held_out):
    """Held-out lines balanced over scripts, in a deterministic shuffled order."""
    by_script = collections.defaultdict(list)
    for line in held_out:
        by_script[script_of(line)].append(line)
    rng = random.Random(20261123)
    corpus = []
    for script in sorted(by_script):
        lines = by_script[script]
        rng.shuffle(lines)
        corpus += lines[:LATIN_LINES if script == "Latin" else CORPUS_PER_SCRIPT]
    rng.shuffle(corpus)
    # The sample (the first SAMPLE_LINES lines) is drawn from the short lines.
    short = [i for i, line in enumerate(corpus) if len(line.encode("utf-8")) <= SAMPLE_MAX_BYTES]
    chosen = set(short[:SAMPLE_LINES])
    return [corpus[i] for i in sorted(chosen)] + [line for i, line in enumerate(corpus) if i not in chosen]


def train(name, options, train_file, models_dir):
    prefix = os.path.join(models_dir, name)
    args = ["spm_train", f"--input={train_file}", f"--model_prefix={prefix}", "--num_threads=2",
            "--input_sentence_size=0", "--minloglevel=2"]
    args += [f"--{key}={value}" for key, value in options.items()]
    done = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if done.returncode != 0:
        sys.exit(f"spm_train failed for {name}:\n{done.stderr.decode(errors='replace')[-2000:]}")
    os.replace(prefix + ".model", prefix + ".spm")
    os.remove(prefix + ".vocab")


def train_models(training, models_dir):
    by_script = collections.defaultdict(list)
    for line in training:
        by_script[script_of(line)].append(line)
    with tempfile.TemporaryDirectory() as tmp:
        for pool, scripts_of_pool in POOLS.items():
            pool_lines = [line for script in scripts_of_pool for line in by_script[script]]
            random.Random(11).shuffle(pool_lines)
            with open(os.path.join(tmp, pool + ".txt"), "w", encoding="utf-8") as f:
                f.write("\n".join(pool_lines[:POOL_LINES[pool]]) + "\n")
        for name, (pool, options) in MODELS.items():
            print(f"training {name} on the {pool} pool")
            train(name, options, os.path.join(tmp, pool + ".txt"), models_dir)


# --- protobuf wire format, just enough to mark pieces UNUSED -----------------------

def read_varint(data, at):
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def fields(data):
    """(number, wire type, raw bytes of the whole field) of a message."""
    at = 0
    while at < len(data):
        start = at
        tag, at = read_varint(data, at)
        wire = tag & 7
        if wire == 0:
            _, at = read_varint(data, at)
        elif wire == 1:
            at += 8
        elif wire == 2:
            length, at = read_varint(data, at)
            at += length
        elif wire == 5:
            at += 4
        else:
            raise ValueError(f"wire type {wire}")
        yield tag >> 3, wire, data[start:at]


def length_delimited(number, body):
    return varint(number << 3 | 2) + varint(len(body)) + body


def body_of(raw):
    """The payload of a length-delimited field."""
    _, at = read_varint(raw, 0)
    length, at = read_varint(raw, at)
    return raw[at:at + length]


def edit_model(data, unused_every=None, normalizer=None, unk_surface=None):
    """The model with every `unused_every`-th NORMAL piece (in id order) typed UNUSED (5),
    the NormalizerSpec varint fields in `normalizer` ({number: value}) replaced, and
    TrainerSpec.unk_surface set."""
    out = bytearray()
    normal = 0
    for number, _, raw in fields(data):
        if number == 1 and unused_every:
            body = body_of(raw)
            kept = [r for n, _, r in fields(body) if n != 3]
            types = [read_varint(r, 1)[0] for n, _, r in fields(body) if n == 3]
            piece_type = types[-1] if types else 1
            if piece_type == 1:
                normal += 1
                if normal % unused_every == 0:
                    piece_type = 5
            new_body = b"".join(kept) + (varint(3 << 3) + varint(piece_type) if piece_type != 1 else b"")
            out += length_delimited(1, new_body)
        elif number == 3 and normalizer:
            body = b"".join(r for n, _, r in fields(body_of(raw)) if n not in normalizer)
            body += b"".join(varint(n << 3) + varint(v) for n, v in sorted(normalizer.items()))
            out += length_delimited(3, body)
        elif number == 2 and unk_surface is not None:
            body = b"".join(r for n, _, r in fields(body_of(raw)) if n != 44)
            out += length_delimited(2, body + length_delimited(44, unk_surface.encode()))
        else:
            out += raw
    return bytes(out)


# --- the oracle ----------------------------------------------------------------------

def section(model, kind, lines):
    assert len(lines) == SAMPLE_LINES, (model, kind)
    return f"### {model} {kind}\n".encode() + b"".join(line + b"\n" for line in lines)


def run_tool(args, input_bytes):
    return subprocess.run(args, input=input_bytes, stdout=subprocess.PIPE, check=True).stdout


def xz(path, data):
    with open(path, "wb") as f:
        f.write(subprocess.run(["xz", "-9e", "-T1", "-c"], input=data, stdout=subprocess.PIPE, check=True).stdout)


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def edge_inputs():
    """(name, bytes) of hand-written encoding cases."""
    cases = [
        ("empty", b""),
        ("one space", b" "),
        ("only spaces", b"     "),
        ("spaces around", b"  Hello   world  "),
        ("tabs and spaces", b"\tHello\t world \t"),
        ("malformed utf-8", b"ab\xff\xfe cd \xc3 \xe2\x82 \xf0\x9f\x98 end"),
        ("overlong and surrogate", b"\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80"),
        ("lone continuation bytes", b"\x80\x81\xbf x"),
        ("replacement character", "a\ufffdb \ufffd".encode()),
        ("lower one eighth block", "\u2581a \u2581\u2581b\u2581".encode()),
        ("only U+2581", "\u2581".encode()),
        ("literal control pieces", b"</s> <s> <unk> <pad> <2en>"),
        ("user-defined symbols", b">>fra<< Bonjour >>deu<<Hallo>>rus<<>>jpn<<"),
        ("byte piece text", b"<0x41> <0xE3>"),
        ("outside the vocabulary", "\U0001F600\U0001F680 \u0F00 \uA000\uA001 \U00010400 \u2603".encode()),
        ("zero-width characters", "a\u200bb\u200cc\u200dd\u2060e\ufeff".encode()),
        ("full-width forms", "\uff21\uff22\uff23 \uff11\uff12\uff13 \uff08\uff09\uff01 \u3000x".encode()),
        ("compatibility characters", "\ufb01 \u2460 \u00bd \u2126 \u212b \u1e9b\u0323 \u3300".encode()),
        ("case folding", "Stra\u00dfe \u0130stanbul \u03a3\u0399\u03a3 DZ\u01c4".encode()),
        ("combining marks", "e\u0301 \u0915\u094d\u0937 \u1100\u1161\u11a8".encode()),
        ("nul byte", b"a\x00b \x00"),
        ("control characters", b"\x01\x02\x1b[0m\x7f\r"),
        ("mixed scripts", "Hello \u041f\u0440\u0438\u0432\u0435\u0442 \u4f60\u597d \u0645\u0631\u062d\u0628\u0627".encode()),
        ("digits", b"12345 3.14159 2026-11-23 %d %s %1$s"),
        ("long word", ("x" * 300 + " " + "\u00e9" * 200).encode()),
    ]
    return cases


def byte_decode_cases():
    """(name, piece strings) for decoding: byte pieces forming invalid UTF-8 and more."""
    return [
        ("bytes: valid character", ["<0xE3>", "<0x81>", "<0x82>"]),
        ("bytes: truncated character", ["\u2581a", "<0xE3>", "<0x81>", "b"]),
        ("bytes: stray continuation", ["<0x81>", "<0x82>", "\u2581x"]),
        ("bytes: surrogate", ["<0xED>", "<0xA0>", "<0x80>"]),
        ("bytes: overlong", ["<0xC0>", "<0xAF>"]),
        ("bytes: newline and nul", ["<0x0A>", "<0x00>", "a"]),
        ("bytes: at the start then space", ["<0x41>", "\u2581b"]),
        ("bytes: between controls", ["<s>", "<0xC3>", "<0xA9>", "</s>"]),
    ]


def piece_decode_cases():
    return [
        ("unknown strings", ["\u2581Hello", "xyz\u2581q", "<unk>", "\u2581"]),
        ("unknown piece first", ["<unk>", "\u2581a"]),
        ("controls first", ["<s>", "\u2581a", "</s>"]),
        ("leading spaces", ["\u2581", "\u2581", "\u2581a", "\u2581b"]),
        ("empty list", []),
        ("user-defined", [">>fra<<", "\u2581a"]),
        ("space symbol inside", ["a\u2581\u2581b", "\u2581"]),
    ]


def edge_cases(models_dir, names):
    import sentencepiece as spm
    out = {"inputs": [], "decode_pieces_inputs": [], "models": {}}
    inputs = edge_inputs()
    out["inputs"] = [{"name": n, "hex": b.hex()} for n, b in inputs]
    decode_cases = byte_decode_cases() + piece_decode_cases()
    out["decode_pieces_inputs"] = [{"name": n, "pieces": p} for n, p in decode_cases]
    phrase = "Der schnelle braune Fuchs \u2014 \u0431\u044b\u0441\u0442\u0440\u0430\u044f \u30ad\u30c4\u30cd! "
    big_times = (1 << 20) // len(phrase.encode()) + 1
    out["big_line"] = {"phrase": phrase, "times": big_times}
    for name in names:
        sp = spm.SentencePieceProcessor(model_file=os.path.join(models_dir, name + ".spm"))
        results = []
        for _, text in inputs:
            pieces = [p.decode("utf-8") for p in sp.encode(text, out_type=str)]
            ids = sp.encode(text, out_type=int)
            results.append({"pieces": pieces, "ids": ids, "decode_ids": sp.decode_ids(ids),
                            "decode_pieces": sp.decode_pieces(pieces)})
        decodes = []
        for _, pieces in decode_cases:
            ids = [sp.piece_to_id(p) for p in pieces]
            decodes.append({"ids": ids, "decode_ids": sp.decode_ids(ids), "decode_pieces": sp.decode_pieces(pieces)})
        big = (phrase * big_times).encode()
        pieces = [p.decode("utf-8") for p in sp.encode(big, out_type=str)]
        ids = sp.encode(big, out_type=int)
        big_result = {"count": len(ids), "pieces_fnv": fnv1a64(" ".join(pieces).encode()),
                      "ids_fnv": fnv1a64(" ".join(map(str, ids)).encode()),
                      "decode_ids_fnv": fnv1a64(sp.decode_ids(ids).encode())}
        out["models"][name] = {"encode": results, "decode": decodes, "big_line": big_result}
    return out


def main():
    args = [a for a in sys.argv[1:] if a != "--reuse-models"]
    reuse_models = len(args) != len(sys.argv) - 1
    if len(args) != 1:
        sys.exit(__doc__)
    ensure_tools()
    out_dir = args[0]
    models_dir = os.path.join(out_dir, "models")
    if not reuse_models:
        shutil.rmtree(models_dir, ignore_errors=True)
        os.makedirs(models_dir)

    lines = catalog_lines()
    training = [line for line in lines if is_training(line)]
    held_out = [line for line in lines if not is_training(line)]
    print(f"{len(lines)} distinct lines: {len(training)} for training, {len(held_out)} held out")
    corpus = choose_corpus(held_out)
    assert len(corpus) >= 100000, len(corpus)
    scripts = collections.Counter(script_of(line) for line in corpus)
    corpus_bytes = ("\n".join(corpus) + "\n").encode()
    xz(os.path.join(out_dir, "corpus.txt.xz"), corpus_bytes)
    with open(os.path.join(out_dir, "corpus.json"), "w") as f:
        json.dump({"lines": len(corpus), "bytes": len(corpus_bytes), "sample_lines": SAMPLE_LINES,
                   "scripts": dict(scripts.most_common()),
                   "sample_scripts": dict(collections.Counter(script_of(x) for x in corpus[:SAMPLE_LINES]).most_common())},
                  f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"corpus: {len(corpus)} lines, {len(scripts)} scripts: {dict(scripts.most_common())}")

    if not reuse_models:
        train_models(training, models_dir)
    for name, (base, edits) in DERIVED_MODELS.items():
        with open(os.path.join(models_dir, base + ".spm"), "rb") as f:
            data = edit_model(f.read(), **edits)
        with open(os.path.join(models_dir, name + ".spm"), "wb") as f:
            f.write(data)
    names = list(MODELS) + list(DERIVED_MODELS)
    import sentencepiece as spm

    # One xz stream for all models: their outputs share most of their text, which
    # compresses away across models.
    sample = ("\n".join(corpus[:SAMPLE_LINES]) + "\n").encode()
    expected = bytearray()
    for name in names:
        model = os.path.join(models_dir, name + ".spm")
        pieces = run_tool(["spm_encode", f"--model={model}", "--output_format=piece"], sample)
        ids = run_tool(["spm_encode", f"--model={model}", "--output_format=id"], sample)
        outputs = {"piece": pieces, "id": ids,
                   "decode_id": run_tool(["spm_decode", f"--model={model}", "--input_format=id"], ids),
                   "decode_piece": run_tool(["spm_decode", f"--model={model}", "--input_format=piece"], pieces)}
        for kind, data in outputs.items():
            assert data.count(b"\n") == SAMPLE_LINES, (name, kind)
        expected += section(name, "piece", outputs["piece"].split(b"\n")[:-1])
        # ids: "=" where they are the pieces' ids (the oracle's piece_to_id; they differ
        # only if a piece is spelled like another one), else "|" and the ids.
        sp = spm.SentencePieceProcessor(model_file=model)
        expected += section(name, "id", [
            b"=" if line.split() == [str(sp.piece_to_id(p.decode())).encode() for p in piece_line.split(b" ") if p]
            else b"|" + line
            for line, piece_line in zip(outputs["id"].split(b"\n")[:-1], outputs["piece"].split(b"\n")[:-1])])
        # Decoded lines: "=" when equal to the input line, "^" when equal to the
        # decode_id line, else "|" and the line.
        inputs = sample.split(b"\n")[:-1]
        by_id = outputs["decode_id"].split(b"\n")[:-1]
        for kind in ("decode_id", "decode_piece"):
            expected += section(name, kind, [
                b"=" if line == source else b"^" if kind == "decode_piece" and line == decoded else b"|" + line
                for line, source, decoded in zip(outputs[kind].split(b"\n")[:-1], inputs, by_id)])
    xz(os.path.join(out_dir, "expected.txt.xz"), bytes(expected))

    with open(os.path.join(out_dir, "edge_cases.json"), "w") as f:
        json.dump(edge_cases(models_dir, names), f, indent=0, ensure_ascii=False)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(root, n)) for root, _, files in os.walk(out_dir) for n in files)
    print(f"wrote {out_dir}: {total} bytes")


if __name__ == "__main__":
    main()
