#!/usr/bin/env python3
"""Makes tests/fixtures/markup/: bergamot-translator 0.4.9's translations of real markup in HTML
mode, with its quality scores, alignments, token and sentence ranges, and its aborts on
malformed markup, for the two Marian-native toy models, for pivoting through both, and for the
Firefox-shaped student of tools/firefox-student with its shortlist (int8shiftAlphaAll as Firefox
runs it, and float32 of its dequantized weights: dequantize_marian.py).

    (cd tools/reference/bergamot && npm ci)    # once
    /usr/bin/python3 tools/reference/make_markup_fixtures.py [--out tests/fixtures/markup]
    /usr/bin/python3 tools/reference/make_markup_fixtures.py --only firefox-student_float32  # one file
    /usr/bin/python3 tools/reference/make_markup_fixtures.py --check-reference   # python3-torch

The inputs are read from this machine: the English msgids with Pango markup in the installed
gettext catalogs (/usr/share/locale/*/LC_MESSAGES/*.mo) and element fragments cut from the
HTML documentation under /usr/share/doc. Every choice is deterministic (sorted inputs, picks by
SHA-256 order, no randomness), so the same machine gives the same files. What each field means:
tests/fixtures/markup/README.md.
"""
import argparse
import glob
import hashlib
import html.parser
import json
import os
import re
import subprocess
import sys
import tempfile

import gettext_catalogs

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MARKUP_MJS = os.path.join(HERE, "bergamot", "markup.mjs")
DEQUANTIZE_PY = os.path.join(HERE, "dequantize_marian.py")
MODELS_DIR = os.path.join(ROOT, "tests", "fixtures", "marian-native")
STUDENT_DIR = os.path.join(ROOT, "tools", "firefox-student")
STUDENT_MODEL, STUDENT_VOCAB = "model.ende.intgemm.alphas.bin", "vocab.ende.spm"
STUDENT_SHORTLIST = "lex.50.50.ende.s2t.bin"
DOC_DIR = "/usr/share/doc"

MIN_BYTES, MAX_BYTES = 20, 400
HTML_DOC_COUNT = 230          # fragments of /usr/share/doc HTML to keep
HTML_DOC_PER_FILE = 4         # at most this many from one document, for variety
HTML_DOC_PER_PACKAGE = 50     # and from one package's documentation
HTML_DOC_UNTRANSLATED = 8     # fragments whose text is all inside elements bergamot leaves as is
PLAIN_COUNT = 30              # plain-text msgids (html off) and the same wrapped in <p>
MALFORMED_COUNT = 30          # made-malformed fragments (besides inputs that abort as found)
ALIGNMENT_MAX_CELLS = 160     # alignments are stored only where they are this small (file size)

# Fragments are whole elements of these kinds, cut where their explicit end tag is.
FRAGMENT_ELEMENTS = {"p", "li", "td", "th", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6", "caption",
                     "figcaption", "blockquote", "pre", "div", "span", "a", "em", "code"}
INLINE_TAGS = {"a", "b", "i", "em", "strong", "code", "tt", "span", "kbd", "var", "samp", "sup", "sub",
               "abbr", "cite", "q", "small", "big", "u", "s", "br", "img", "font", "acronym", "dfn"}
VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
             "source", "track", "wbr"}
PANGO_MARKUP = re.compile(r"<(b|i|u|s|tt|big|small|sub|sup|span|a|markup|em|strong|code|p|br)\b[^>]*>"
                          r"|&(amp|lt|gt|quot|apos|#\d+);")
# bergamot's HTML::Options::ignoredTags, and <script>/<style> its scanner skips: copied untranslated.
IGNORED_ELEMENT = re.compile(r"<(code|kbd|samp|var|dir|acronym|math|script|style)\b.*?</\1\s*>",
                             re.DOTALL | re.IGNORECASE)
ENTITY = re.compile(r"&(#\d+|#x[0-9a-fA-F]+|[A-Za-z]+);")


def sha(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def utf8_len(text):
    return len(text.encode("utf-8"))


class TagChecker(html.parser.HTMLParser):
    """Whether a fragment is balanced markup: every non-void start tag closed in order."""

    def __init__(self):
        super().__init__(convert_charrefs=False)
        self.stack, self.ok, self.tags = [], True, set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        if tag not in VOID_TAGS:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.add(tag)
        if tag not in VOID_TAGS:
            self.ok = False  # <em/> is not HTML: a browser opens <em> and never closes it

    def handle_endtag(self, tag):
        if tag in VOID_TAGS:
            self.ok = False
        elif self.stack and self.stack[-1] == tag:
            self.stack.pop()
        else:
            self.ok = False

    def handle_comment(self, data):
        self.tags.add("!--")

    def handle_decl(self, decl):
        self.ok = False

    def unknown_decl(self, data):
        self.ok = False


def balanced(text):
    checker = TagChecker()
    checker.feed(text)
    checker.close()
    # A '<' the parser kept as text (not followed by a tag name) is not markup.
    stray_lt = re.search(r"<(?![A-Za-z/!])", text) is not None
    return checker.ok and not checker.stack and not stray_lt, checker.tags


class FragmentFinder(html.parser.HTMLParser):
    """Collects [start, end) character offsets of elements with an explicit end tag."""

    def __init__(self, text):
        super().__init__(convert_charrefs=False)
        self.text = text
        self.line_starts = [0]
        for match in re.finditer("\n", text):
            self.line_starts.append(match.end())
        self.stack, self.found = [], []

    def char_offset(self):
        line, column = self.getpos()
        return self.line_starts[line - 1] + column

    def handle_starttag(self, tag, attrs):
        if tag in VOID_TAGS:
            return
        self.stack.append((tag, self.char_offset()))

    def handle_endtag(self, tag):
        # Pop to the matching open element (HTML documents leave <p>, <li> etc. implied).
        for depth in range(len(self.stack) - 1, -1, -1):
            if self.stack[depth][0] == tag:
                start = self.stack[depth][1]
                del self.stack[depth:]
                end = self.text.find(">", self.char_offset()) + 1
                if tag in FRAGMENT_ELEMENTS and end > start:
                    self.found.append((tag, start, end))
                return


def doc_fragments():
    """Balanced element fragments of MIN..MAX bytes with inline markup or an entity, from every
    HTML file under /usr/share/doc: [(origin, text)], at most HTML_DOC_PER_FILE per file."""
    out, seen, per_package = [], set(), {}
    for path in sorted(glob.glob(os.path.join(DOC_DIR, "**", "*.html"), recursive=True)):
        package = os.path.relpath(path, DOC_DIR).split(os.sep)[0]
        try:
            with open(path, "rb") as f:
                text = f.read().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        finder = FragmentFinder(text)
        try:
            finder.feed(text)
            finder.close()
        except Exception:  # html.parser is tolerant; a failure only drops this file
            continue
        picked = []
        for tag, start, end in finder.found:
            fragment = text[start:end]
            if not MIN_BYTES <= utf8_len(fragment) <= MAX_BYTES:
                continue
            ok, tags = balanced(fragment)
            if not ok or "!--" in tags or "script" in tags or "style" in tags:
                continue
            if not (tags & INLINE_TAGS - {tag}) and not ENTITY.search(fragment):
                continue
            # Some text to translate, not only markup.
            if len(re.sub(r"<[^>]*>|&[^;]*;|\s", "", fragment)) < 3 or fragment in seen:
                continue
            seen.add(fragment)
            picked.append((f"{os.path.relpath(path, DOC_DIR)} <{tag}> @{start}", fragment))
        picked.sort(key=lambda item: sha(item[1]))
        room = HTML_DOC_PER_PACKAGE - per_package.get(package, 0)
        picked = picked[:max(0, min(HTML_DOC_PER_FILE, room))]
        per_package[package] = per_package.get(package, 0) + len(picked)
        out.extend(picked)
    return out


def catalog_messages():
    """Unique English msgids of the installed catalogs: (markup ones, plain ones)."""
    markup, plain = {}, {}
    for path, entry in gettext_catalogs.messages(gettext_catalogs.catalogs()):
        for msgid in (entry.msgid, entry.msgid_plural):
            if not msgid:
                continue
            domain = os.path.basename(path)
            if PANGO_MARKUP.search(msgid):
                markup.setdefault(msgid, domain)
            elif "<" not in msgid and "&" not in msgid:
                plain.setdefault(msgid, domain)
    return markup, plain


def malformed_variants(fragments):
    """Deterministic breakages of balanced fragments, each of a kind bergamot is said to refuse
    or that a browser repairs: [(kind, origin, text)]."""
    makers = [
        ("unclosed-at-end", lambda t: t[:t.rfind("</")] if "</" in t else None),
        ("stray-end-tag", lambda t: re.sub(r"(>[^<]*?\s)", r"\1</b>", t, count=1)),
        ("lt-in-text", lambda t: re.sub(r"(>[^<]*?) ", r"\1 < ", t, count=1)),
        ("cut-inside-tag", lambda t: t[:t.find("<", 1) + 3] if t.find("<", 1) > 0 else None),
        ("crossed-nesting", lambda t: "<b><i>" + re.sub(r"<[^>]*>", "", t)[:40] + "</b></i>"),
        ("unknown-entity", lambda t: re.sub(r"(>[^<]*?\s)", r"\1&notanentity; ", t, count=1)),
        ("bare-ampersand", lambda t: re.sub(r"(>[^<]*?\s)", r"\1AT&T ", t, count=1)),
        ("unquoted-attribute", lambda t: "<span class=x>" + t + "</span>"),
        ("comment", lambda t: "<!-- a comment -->" + t),
        ("self-closing-non-void", lambda t: t.replace(">", "><em/>", 1)),
    ]
    out = []
    ordered = sorted(fragments, key=lambda item: sha("malformed" + item[1]))
    per_kind = MALFORMED_COUNT // len(makers)
    for k, (kind, make) in enumerate(makers):
        made = 0
        for origin, text in ordered[k * 7:]:
            broken = make(text)
            if broken and broken != text and MIN_BYTES // 2 <= utf8_len(broken) <= MAX_BYTES + 60:
                out.append((kind, origin, broken))
                made += 1
                if made == per_kind:
                    break
    return out


def request(text, html, kind, origin, quality=False):
    return {"text": text, "html": html, "qualityScores": quality, "alignment": True, "kind": kind,
            "origin": origin}


def candidate_requests():
    markup, plain = catalog_messages()
    requests = []
    # Pango markup msgids: every one that fits; the unbalanced ones are kept too (found aborts).
    pango = sorted(((m, d) for m, d in markup.items() if MIN_BYTES // 2 <= utf8_len(m) <= MAX_BYTES),
                   key=lambda item: sha(item[0]))
    for i, (msgid, domain) in enumerate(pango):
        requests.append(request(msgid, True, "pango", f"gettext {domain}", quality=i % 3 == 0))
    # Mostly fragments with text to translate, and a few that bergamot copies untranslated.
    translatable, untranslated = [], []
    for origin, text in sorted(doc_fragments(), key=lambda item: sha(item[1])):
        outside = re.sub(r"<[^>]*>|&[^;]*;|\s", "", IGNORED_ELEMENT.sub("", text))
        (translatable if len(outside) >= 3 else untranslated).append((origin, text))
    docs = sorted(translatable[:HTML_DOC_COUNT - HTML_DOC_UNTRANSLATED] + untranslated[:HTML_DOC_UNTRANSLATED],
                  key=lambda item: sha(item[1]))
    for i, (origin, text) in enumerate(docs):
        requests.append(request(text, True, "html-doc", origin, quality=i % 3 == 0))
    plains = sorted((m for m in plain if MIN_BYTES <= utf8_len(m) <= 200 and "\n" not in m and "\\" not in m),
                    key=lambda m: sha("plain" + m))[:PLAIN_COUNT]
    for msgid in plains:
        requests.append(request(msgid, False, "plain", f"gettext {plain[msgid]}", quality=True))
        requests.append(request(f"<p>{msgid}</p>", True, "plain-in-p", f"gettext {plain[msgid]}",
                                quality=True))
    for kind, origin, text in malformed_variants(docs):
        requests.append(request(text, True, f"malformed:{kind}", origin))
    return requests


def run_bergamot(requests, model_args):
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in requests)
    result = subprocess.run(["node", MARKUP_MJS] + model_args, input=lines.encode("utf-8"),
                            capture_output=True, check=False)
    if result.returncode != 0:
        sys.exit(f"markup.mjs failed ({result.returncode}): {result.stderr.decode(errors='replace')}")
    responses = [json.loads(line) for line in result.stdout.decode("utf-8").splitlines()]
    if len(responses) != len(requests):
        sys.exit(f"markup.mjs answered {len(responses)} of {len(requests)} requests")
    return responses


def clean_error(response):
    """The abort's reason without the log's timestamps (which would change every run)."""
    if "error" not in response:
        return response
    log = [re.sub(r"^\[[^\]]*\] ", "", line) for line in response.get("engine_log", [])]
    reason = next((line[len("Error: "):] for line in log if line.startswith("Error: ")), None)
    return {"error": response["error"], "reason": reason, "engine_log": log}


class Config:
    """One fixture file: bergamot's model files and settings. `models` are relative to `root`
    (one, or two for pivoting); `dequantize`: bergamot runs the float32 model.bin that
    dequantize_marian.py makes of models[0] (written to a temporary directory)."""

    def __init__(self, stem, root, models, vocab, precision, shortlist=None, dequantize=False):
        self.stem, self.root, self.models, self.vocab = stem, root, models, vocab
        self.precision, self.shortlist, self.dequantize = precision, shortlist, dequantize

    def path(self, name):
        return os.path.join(self.root, name)

    def model_args(self, work_dir):
        first = self.path(self.models[0])
        if self.dequantize:
            first = os.path.join(work_dir, self.stem + ".model.bin")
            subprocess.run([sys.executable, DEQUANTIZE_PY, self.path(self.models[0]), first], check=True)
        vocab = self.path(self.vocab)
        args = ["--model", first, "--vocab", vocab, "--precision", self.precision]
        if self.shortlist:
            args += ["--shortlist", self.path(self.shortlist)]  # as Firefox: no check-bytearray
        if len(self.models) > 1:
            args += ["--pivot-model", self.path(self.models[1]), "--pivot-vocab", vocab]
        return args

    def settings(self):
        where = os.path.relpath(self.root, ROOT)
        settings = {
            "engine": "@browsermt/bergamot-translator 0.4.9 (WASM, bergamot v0.4.5+4917c11)",
            "models": [f"{where}/{m}" for m in self.models],
            "vocab": f"{where}/{self.vocab}",
            "pivot": len(self.models) > 1,
        }
        if self.dequantize:
            settings["dequantized"] = ("bergamot ran the float32 model.bin tools/reference/dequantize_marian.py "
                                       "writes from models[0]: q * (1/quantMult), alphas dropped")
        if self.shortlist:
            settings["shortlist"] = f"{where}/{self.shortlist}"
        settings["config"] = {"beam-size": 1, "normalize": 1.0, "word-penalty": 0, "max-length-break": 128,
                              "mini-batch-words": 1024, "workspace": 128, "max-length-factor": 2.0,
                              "skip-cost": True, "cpu-threads": 0, "gemm-precision": self.precision,
                              "alignment": "soft", "ssplit-mode": "paragraph"}
        settings["one_request_per_call"] = True
        settings["cache_size"] = 0
        return settings


def native(stem, models, precision):
    return Config(stem, MODELS_DIR, models, "vocab.spm", precision)


def student(stem, precision, dequantize):
    return Config(stem, STUDENT_DIR, [STUDENT_MODEL], STUDENT_VOCAB, precision, shortlist=STUDENT_SHORTLIST,
                  dequantize=dequantize)


CONFIGS = [
    native("transformer_float32", ["transformer/model.bin"], "float32"),
    native("transformer_int8shiftAlphaAll", ["transformer/model.intgemm.alphas.bin"], "int8shiftAlphaAll"),
    native("ssru_float32", ["ssru/model.bin"], "float32"),
    native("ssru_int8shiftAlphaAll", ["ssru/model.intgemm.alphas.bin"], "int8shiftAlphaAll"),
    native("pivot-transformer-ssru_float32", ["transformer/model.bin", "ssru/model.bin"], "float32"),
    # The Firefox-shaped student (tools/firefox-student/README.md) as Firefox runs it:
    # int8shiftAlphaAll with its shortlist; and float32 of the same weights, dequantized.
    student("firefox-student_int8shiftAlphaAll", "int8shiftAlphaAll", dequantize=False),
    student("firefox-student_float32", "float32", dequantize=True),
]


def check_against_reference(out_dir):
    """Checks the values read from WASM memory against an independent oracle, the PyTorch
    reference of tools/reference/marian_native_reference.py (needs python3-torch): for every
    plain-text request of the float32 files, each sentence is decoded greedily (as bergamot:
    its length limit from the widest sentence of the request) and forced along its output;
    the stored alignment must be the last decoder layer's cross-attention, head 0, and each
    word score the mean of the chosen tokens' raw logits (skip-cost: true leaves the search's
    scores unnormalised). Prints the largest differences; exits non-zero past 1e-5."""
    import math
    import numpy as np
    import sentencepiece
    import yaml
    import marian_native
    from marian_native_reference import MarianNativeModel

    vocab = sentencepiece.SentencePieceProcessor(model_file=os.path.join(MODELS_DIR, "vocab.spm"))
    eos, unk = 0, 1
    worst = 0.0
    for name in ("transformer", "ssru"):
        weights, _, yaml_text = marian_native.read_model_bin(os.path.join(MODELS_DIR, name, "model.bin"))
        model = MarianNativeModel(weights, yaml.safe_load(yaml_text))
        layer = model.alignment_layer()
        with open(os.path.join(out_dir, f"{name}_float32.json"), encoding="utf-8") as f:
            fixture = json.load(f)
        counts = {"sentences": 0, "texts_equal": 0, "alignments": 0, "scored": 0}
        diffs = {"alignment": 0.0, "word_score": 0.0}
        for req, resp in zip(fixture["requests"], fixture["responses"]):
            if req["html"] or "error" in resp:
                continue
            source, target_text = resp["source"].encode("utf-8"), resp["text"].encode("utf-8")
            ids = [vocab.encode(source[s["source"][0]:s["source"][1]].decode("utf-8")) for s in resp["sentences"]]
            width = max(len(i) + 1 for i in ids)
            for k, (src_ids, sentence) in enumerate(zip(ids, resp["sentences"])):
                target = model.greedy(src_ids, eos, unk, batch_width=width)
                ended = len(target) < math.ceil(2.0 * width)
                counts["sentences"] += 1
                bergamot = target_text[sentence["target"][0]:sentence["target"][1]].decode("utf-8")
                if vocab.decode(target) != bergamot:
                    continue  # not the same output: nothing to compare
                counts["texts_equal"] += 1
                attention, logits = model.teacher_forced_cross_attention(src_ids + [eos], target, ended)
                if "alignments" in resp:
                    expected = attention[:, layer, 0].numpy()
                    got = np.array(resp["alignments"][k], dtype=np.float32)
                    if expected.shape != got.shape:
                        sys.exit(f"{name}: alignment shape {got.shape}, reference {expected.shape}")
                    diffs["alignment"] = max(diffs["alignment"], float(np.abs(expected - got).max()))
                    counts["alignments"] += 1
                if "quality" in resp:
                    chosen = target + ([eos] if ended else [])
                    token_scores = logits[range(len(chosen)), chosen].numpy()
                    quality = resp["quality"][k]
                    for (b, e), score in zip(quality["word_token_ranges"], quality["word_scores"]):
                        diffs["word_score"] = max(diffs["word_score"], abs(float(np.mean(token_scores[b:e])) - score))
                    counts["scored"] += 1
        print(json.dumps({"model": name, **counts, "max_abs_diff": diffs}))
        worst = max(worst, *diffs.values())
    if worst > 1e-5:
        sys.exit(f"the reference differs by {worst}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "markup"))
    parser.add_argument("--check-reference", action="store_true",
                        help="only check the files in --out against the PyTorch reference")
    parser.add_argument("--only", nargs="+", metavar="STEM",
                        help="make only these files (e.g. firefox-student_float32), for the requests "
                             "already in --out's first file")
    args = parser.parse_args()
    if args.check_reference:
        check_against_reference(args.out)
        return

    configs = CONFIGS
    if args.only:
        known = {c.stem for c in CONFIGS}
        unknown = sorted(set(args.only) - known)
        if unknown:
            sys.exit(f"--only: no configuration {unknown}; known: {sorted(known)}")
        configs = [c for c in CONFIGS if c.stem in args.only]

    first = None
    if args.only:
        # The requests as the full run chose them (the first file's), so every file holds the same.
        with open(os.path.join(args.out, CONFIGS[0].stem + ".json"), encoding="utf-8") as f:
            requests = json.load(f)["requests"]
    else:
        candidates = candidate_requests()
        # Which inputs abort does not depend on the model (bergamot parses the HTML before it
        # translates): one pass decides, and inputs found to abort are labelled as such. The same
        # pass decides which requests ask for alignments: those whose matrices are small (the
        # option changes nothing else, which the first model's files check below).
        first = run_bergamot(candidates, CONFIGS[0].model_args(None))
        requests = []
        for req, resp in zip(candidates, first):
            req = dict(req)
            req["expect_error"] = "error" in resp
            cells = sum(len(m) * len(m[0]) for m in resp.get("alignments", []) if m)
            req["alignment"] = "error" not in resp and cells <= ALIGNMENT_MAX_CELLS
            requests.append(req)

    os.makedirs(args.out, exist_ok=True)
    summary = {}
    with tempfile.TemporaryDirectory() as work_dir:
        for config in configs:
            stem = config.stem
            responses = [clean_error(r) for r in run_bergamot(requests, config.model_args(work_dir))]
            for i, (req, resp) in enumerate(zip(requests, responses)):
                if ("error" in resp) != req["expect_error"]:
                    sys.exit(f"{stem}: abort differs from the first pass for {req['text']!r}")
                if first is not None and stem == CONFIGS[0].stem and "error" not in resp:
                    for key in ("text", "source", "sentences", "source_tokens", "target_tokens", "quality"):
                        if resp.get(key) != first[i].get(key):
                            sys.exit(f"{stem}: the alignment option changed {key} for {req['text']!r}")
            fixture = {"settings": config.settings(), "requests": requests, "responses": responses}
            path = os.path.join(args.out, stem + ".json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(fixture, f, ensure_ascii=False, separators=(",", ":"))
                f.write("\n")
            summary[stem] = os.path.getsize(path)

    kinds = {}
    for req in requests:
        counts = kinds.setdefault(req["kind"], [0, 0])
        counts[1 if req["expect_error"] else 0] += 1
    print(json.dumps({"requests": len(requests), "by_kind_ok_error": kinds, "bytes": summary}, indent=1))


if __name__ == "__main__":
    main()
