#!/usr/bin/python3
"""Writes tests/fixtures/split_regex/oracle.json, the oracle of [split_regex]: the matches
JavaScript's RegExp (Node >= 20, flags "gu"; split_regex_oracle.mjs) and Oniguruma itself
(Debian's libonig5 through ctypes, onig_oracle.py: what HF's tokenizers runs) find for the
pre-tokenizer patterns of real tokenizer.json files, over real text (the gettext catalogs
Debian installs, gettext_catalogs.py, in many scripts) and hand-made edge cases; and
Oniguruma's matches for patterns probing the rest of the syntax (ONIG_PATTERNS).

    /usr/bin/python3 tools/reference/make_split_regex_fixtures.py

HF's tokenizers compiles these patterns with Oniguruma, which JS approximates; each
pattern is given in Oniguruma syntax (what text::SplitRegex compiles) and translated for
JS where the syntax differs:
  (?i:'s|'t|...)  ->  (?:'([sS]|[tT]|...))  (as transformers.js does: JS has no (?i:...) groups)
  $               ->  (?![^\\n])             (Oniguruma's $ is a line end: before any \\n too)
  ^               ->  (?:(?<![\\s\\S])|(?<=\\n)(?=[\\s\\S]))  (Oniguruma's line start)
Texts where JS and Oniguruma are known to disagree are left out of the comparison: those
holding U+0085 (in Oniguruma's \\s, not in JS's), U+FEFF (in JS's \\s only), U+017F and
U+212A (which (?i) matches to s and k in Oniguruma, not in the translation), and code
points unassigned in Unicode 15.0 (the engine's tables; Node's ICU may be newer).

The Oniguruma comparison ("onig") needs no translation and no exclusions but one: texts with
code points new in Unicode 15.0 (libonig5 6.9.8 has 14.0 data, the engine 15.0) are
skipped ("-"); it adds texts holding the characters left out of the JS comparison.

Per pattern and corpus text the fixture stores a hash of the match list (FNV-1a 64 over
the (begin, end) byte offsets as little-endian uint32s); for the edge cases, the full
lists.
"""
import json
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gettext_catalogs import catalogs, messages  # noqa: E402
from onig_oracle import Onig  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(ROOT, "tests", "fixtures", "split_regex", "oracle.json")
ORACLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "split_regex_oracle.mjs")

CONTRACTIONS = "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
CONTRACTIONS_JS = "(?:'([sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))"
LETTER_RUN = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"
PATTERNS = {
    "qwen2": CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "llama3": CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "gpt2": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
    "o200k": r"[^\r\n\p{L}\p{N}]?" + LETTER_RUN + r"*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+" + CONTRACTIONS + "?"
             r"|[^\r\n\p{L}\p{N}]?" + LETTER_RUN + r"+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*" + CONTRACTIONS + "?"
             r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "deepseek_digits": r"\p{N}{1,3}",
    "deepseek_cjk": "[一-龥ࠀ-一가-퟿]+",
    "deepseek_main": r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"""
                     r"""| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
    "deepseek_coder": r"\s?[!-/:-~！-／：-～‘-‟　-。]+",
    "deepseek_trailing": r"\s+$",
    "deepseek_punct": r"[^\s\p{L}\p{N}]+",
    "synthetic_lazy_anchor": r"^[ \t]*\p{L}+|\p{Lu}\p{Ll}*?\p{Ll}|[\p{P}\p{S}]{2,3}|\p{Nd}+|[^\n]",
    "synthetic_empty": r"\p{L}*",
}


def to_js(pattern):
    out = pattern.replace(CONTRACTIONS, CONTRACTIONS_JS)
    # ^ and $ outside classes, unescaped (the patterns above have them only there).
    result, i, in_class = [], 0, False
    while i < len(out):
        c = out[i]
        if c == "\\":
            result.append(out[i:i + 2])
            i += 2
            continue
        if c == "[":
            in_class = True
        elif c == "]":
            in_class = False
        elif c == "$" and not in_class:
            c = r"(?![^\n])"
        elif c == "^" and not in_class:
            c = r"(?:(?<![\s\S])|(?<=\n)(?=[\s\S]))"
        result.append(c)
        i += 1
    return "".join(result)


EDGE_CASES = [
    "", " ", "\n", "Hello world", "I'm here, you're there. We'll see; they'd've gone",
    "CAN'T WON'T I'LL SHE'D", "'''''' ''s 's", "a\r\nb\r\n\r\nc", "\t\ttabs\tand  spaces ",
    "trailing spaces   ", "   leading", "x\n\n\n", "  \n  \n  ", "end with newline\n",
    "1234567890 12 3 4567", "\u0661\u0662\u0663\u0664\u0665 \u0666\u0667 \u2460\u2461 \u00bd",
    "\U0001F44D\U0001F3FD hi \U0001F468\u200d\U0001F469\u200d\U0001F467 \U0001F1E9\U0001F1EA!",
    "e\u0301le\u0300ve a\u0308 \u0915\u094d\u0937", "\u01c4emal \u01c5 \u01c8a", "ABCdef GHIjk lMN",
    "\u03b1\u03b2\u03b3 \u0391\u0392\u0393", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3001\u3067\u3059\u3002",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8", "\u4e2d\u6587\uff0c\u6807\u70b9\uff01\u201c\u5f15\u53f7\u201d",
    "x  \u3000 y", "a\u00a0b\u2009c", "line\u2028sep\u2029para", "tab\tsep\tvalues\n",
    "https://example.com/path?q=1&r=two#frag", "foo.bar(baz)[0] = {'k': \"v\"};", "\\d+ \\s* [a-z]",
    "\U0001D7D9\U0001D7DA\U0001D7DB", "\u00df \u1e9e STRASSE", "\u0149 \u01f0",
    "   \n\n   \t\r\n x", "!!!???...", " ... ", "--a", "a--", "\r\r\n\n\r",
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd", "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35", "\u10d2\u10d0\u10db\u10d0\u10e0\u10ef\u10dd\u10d1\u10d0",
    "x" * 300 + " " * 300 + "1" * 300, "'" * 50 + "s", "\u00e9t\u00e9 d'\u00e9t\u00e9",
]

# Oniguruma only: the syntax and semantics JS cannot check.
ONIG_PATTERNS = {
    "onig_case_folding": r"(?i:'s|'t|'re|'ve|'m|'ll|'d|k|[a-c]+|[^\p{L}\s]|\p{Lu}{2})",
    "onig_isolated_option": r"a(?i)b|c|\p{Ll}+",
    "onig_fixed_interval_optional": r"x{2}?|\p{N}{2,}?|\S{,3}",
    "onig_anchors": r"^\s*\S+?$|\A\S|\S\Z|\s$|\z",
    "onig_classes": r"\w+|\d+|\h+|[\W&&[^\s]]|[^\w\s]|.",
    "onig_lookahead": r"\S+(?=\s)|\s+(?!\S)|\p{L}+(?![\p{L}\p{M}])|.",
}
ONIG_EDGE_CASES = [
    "'s 'S '\u017f 'K '\u212a kelvin \u212a", "a\u0085 b\ufeffc \u0085\n", "aB C ab Ab aC abc", "xxx x 12345 99",
    "x\nx\n", "  x\n y  \n", "na\u00efve_1 \u203f deadBEEF", "\u00df SS \u1e9e",
]

EXCLUDED = {0x85, 0xFEFF, 0x17F, 0x212A}
LOCALES = ["de", "fr", "es", "pl", "tr", "vi", "ru", "uk", "el", "ar", "fa", "he", "hi", "bn", "ta", "th",
           "ka", "hy", "am", "km", "ja", "zh_CN", "zh_TW", "ko", "si", "my", "en_GB"]
PER_LOCALE = 100


def assigned():
    out = set()
    first = None
    with open("/usr/share/unicode/UnicodeData.txt", encoding="utf-8") as f:
        for line in f:
            fields = line.split(";")
            cp, name = int(fields[0], 16), fields[1]
            if name.endswith(", First>"):
                first = cp
            elif name.endswith(", Last>"):
                out.update(range(first, cp + 1))
            else:
                out.add(cp)
    return out


def fnv(matches):
    h = 0xCBF29CE484222325
    for pair in matches:
        for v in pair:
            for byte in v.to_bytes(4, "little"):
                h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def random_pattern(rng, depth=0):
    """A random pattern of the supported syntax over a small alphabet, and whether it can
    match empty. A part that can match empty is only made optional (?), never repeated:
    Oniguruma leaves a loop on an empty iteration, which the engine does not (split_regex.h)."""
    def atom():
        r = rng.random()
        if r < 0.3 or depth > 2:
            return rng.choice(["a", "b", "A", " ", "'", "1", "\\n", "x"]), False
        if r < 0.55:
            return rng.choice([r"[ab]", r"[^a]", r"\s", r"\S", r"\p{L}", r"\p{N}", r"[^\s\p{L}]", r"\w", ".",
                               r"[a-c\d]", r"\p{Lu}", r"[\p{Ll}']"]), False
        if r < 0.8:
            branches = [random_pattern(rng, depth + 1) for _ in range(rng.randint(1, 3))]
            return (rng.choice(["(?:", "(", "(?i:"]) + "|".join(b for b, _ in branches) + ")",
                    any(n for _, n in branches))
        if r < 0.9:
            return rng.choice(["^", "$", r"\A", r"\z", r"\Z"]), True
        return rng.choice(["(?=", "(?!"]) + rng.choice(["a", r"\S", r"[ab]", r"\p{L}", r"\s"]) + ")", True
    out, nullable = [], True
    for _ in range(rng.randint(1, 4)):
        a, a_nullable = atom()
        assertion = a.startswith(("(?=", "(?!", "^", "$", "\\A", "\\z", "\\Z"))
        if not assertion and rng.random() < 0.5:
            q = rng.choice(["?"] if a_nullable else ["*", "+", "?", "{2}", "{1,3}", "{2,}", "{,2}"])
            a += q + rng.choice(["", "", "?"])
            a_nullable = a_nullable or q in ("*", "?", "{,2}")
        out.append(a)
        nullable = nullable and a_nullable
    return "".join(out), nullable


def random_text(rng):
    return "".join(rng.choice("aAbB 1'\nx\u00e9\u017f") for _ in range(rng.randint(0, 24)))


def new_in_15():
    """Code points assigned in Unicode 15.0 (DerivedAge.txt)."""
    out = set()
    with open("/usr/share/unicode/DerivedAge.txt", encoding="utf-8") as f:
        for line in f:
            fields = line.split("#")[0].split(";")
            if len(fields) == 2 and fields[1].strip() == "15.0":
                a, _, b = fields[0].strip().partition("..")
                out.update(range(int(a, 16), int(b or a, 16) + 1))
    return out


def main():
    ok = assigned()
    rng = random.Random(20261126)
    extra_rng = random.Random(14)
    corpus, extra, used_locales = [], [], []
    for lang in LOCALES:
        paths = catalogs(lang)
        if not paths:
            continue
        all_texts = sorted({t for _, e in messages(paths) for t in [e.msgid] + e.msgstrs if t})
        texts = [t for t in all_texts if all(ord(c) in ok and ord(c) not in EXCLUDED for c in t)]
        if not texts:
            continue
        used_locales.append(lang)
        corpus.extend(rng.sample(texts, min(PER_LOCALE, len(texts))))
        left_out = [t for t in all_texts if any(ord(c) in EXCLUDED for c in t) and all(ord(c) in ok for c in t)]
        extra.extend(extra_rng.sample(left_out, min(10, len(left_out))))
    names = list(PATTERNS)
    request = {"patterns": [to_js(PATTERNS[n]) for n in names], "texts": corpus + EDGE_CASES}
    result = subprocess.run(["node", ORACLE], input=json.dumps(request), capture_output=True, text=True, check=True)
    matches = json.loads(result.stdout)
    fixture = {
        "about": "Made by tools/reference/make_split_regex_fixtures.py with " +
                 subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip() +
                 " (ICU " + subprocess.run(["node", "-p", "process.versions.icu"], capture_output=True,
                                          text=True).stdout.strip() + "); locales " + " ".join(used_locales),
        "patterns": [{"name": n, "pattern": PATTERNS[n], "js": to_js(PATTERNS[n])} for n in names],
        "texts": corpus,
        "hashes": {n: " ".join(fnv(m) for m in matches[i][:len(corpus)]) for i, n in enumerate(names)},
        "edge_cases": [{"text": t, "matches": {n: matches[i][len(corpus) + k] for i, n in enumerate(names)}}
                       for k, t in enumerate(EDGE_CASES)],
    }

    # Oniguruma: every pattern, the corpus and the texts JS could not check, more edge cases.
    onig = Onig()
    new = new_in_15()
    all_patterns = dict(PATTERNS, **ONIG_PATTERNS)
    onig_texts = corpus + extra
    skipped = sum(1 for t in onig_texts if any(ord(c) in new for c in t))
    fixture["onig"] = {
        "about": f"Oniguruma {onig.version()} (Debian's libonig5, ONIG_SYNTAX_ONIGURUMA, ONIG_OPTION_NONE); "
                 f"{skipped} texts with code points new in Unicode 15.0 skipped (\"-\")",
        "patterns": [{"name": n, "pattern": p} for n, p in ONIG_PATTERNS.items()],
        "extra_texts": extra,
        "hashes": {},
        "edge_cases": [{"text": t, "matches": {}} for t in EDGE_CASES + ONIG_EDGE_CASES],
    }
    for n, p in all_patterns.items():
        regex = onig.compile(p)
        fixture["onig"]["hashes"][n] = " ".join(
            "-" * 16 if any(ord(c) in new for c in t) else fnv(onig.find_iter(regex, t)) for t in onig_texts)
        for e in fixture["onig"]["edge_cases"]:
            e["matches"][n] = [list(m) for m in onig.find_iter(regex, e["text"])]
    # Random patterns of the supported syntax against Oniguruma (a differential test).
    rng = random.Random(7)
    random_texts = [random_text(rng) for _ in range(12)]
    random_patterns = []
    while len(random_patterns) < 400:
        p, _ = random_pattern(rng)
        try:
            regex = onig.compile(p)
        except ValueError:
            continue
        random_patterns.append({"pattern": p, "hashes": " ".join(fnv(onig.find_iter(regex, t)) for t in random_texts)})
    fixture["onig"]["random_texts"] = random_texts
    fixture["onig"]["random_patterns"] = random_patterns
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(fixture, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"{len(corpus)} texts from {len(used_locales)} locales (+{len(extra)} for Oniguruma), "
          f"{len(EDGE_CASES)} (+{len(ONIG_EDGE_CASES)}) edge cases, {len(names)} (+{len(ONIG_PATTERNS)}) patterns; "
          f"{os.path.getsize(OUT)} bytes")


if __name__ == "__main__":
    main()
