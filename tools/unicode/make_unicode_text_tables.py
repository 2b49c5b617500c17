#!/usr/bin/python3
"""Writes the Unicode tables of the tokenizer.json text primitives (text/split_regex and
text/unicode_normalize), from Debian's unicode-data package (/usr/share/unicode,
Unicode 15.0). A sibling of make_unicode_tables.py; run it again when that package moves:

    /usr/bin/python3 tools/unicode/make_unicode_text_tables.py

engine/src/core/unicode_category_tables.h
  kCategoryStarts  General_Category of every code point as one sorted table of uint32
                   (first code point << 5 | category): a range runs to the next entry's
                   first code point; unassigned code points are Cn entries.
  kCaseFolding     simple case folding (CaseFolding.txt statuses C and S) as uint64
                   (code point << 21 | folded), sorted.
engine/src/core/unicode_normalization_tables.h
  kCombiningClassStarts  Canonical_Combining_Class as (first << 8 | class) range starts.
  kDecompositionKeys / kDecompositionInfo / kDecompositionPool: the full (recursive)
                   canonical and compatibility decompositions of every code point that has
                   one (Hangul syllables are algorithmic, not stored): one pool entry per
                   key, its canonical decomposition or, when it has none, its compatibility
                   one; kCompatibilityDiffers lists the few keys (16 in 15.0) whose
                   compatibility decomposition is another.
  kCompositionKeys / kCompositionValues: the primary composites: (first << 21 | second)
                   -> composite for every canonical decomposition of two code points that
                   is not Full_Composition_Exclusion (DerivedNormalizationProps.txt).
engine/src/core/unicode_case_tables.h
  kLowercase       full lowercase mapping as JavaScript's String.prototype.toLowerCase does
                   it (ICU's root locale): UnicodeData.txt's simple lowercase mappings as
                   uint64 (code point << 21 | lowercase), sorted, and SpecialCasing.txt's
                   unconditional mappings to more than one code point (kLowercaseSpecial:
                   code point, then 3 code points, 0-padded); U+03A3's Final_Sigma context
                   reads kCaseContextStarts: (first << 2 | Cased | Case_Ignorable << 1)
                   range starts (DerivedCoreProperties.txt).
tests/fixtures/unicode/NormalizationTest.txt.xz
  The standard's conformance file, its comments stripped (the test reads it with xz).
"""
import bz2
import lzma
import os
import re

UCD = "/usr/share/unicode"
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CORE = os.path.join(ROOT, "engine", "src", "core")
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "unicode", "NormalizationTest.txt.xz")

CATEGORIES = ["Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
              "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"]


def version():
    with open(os.path.join(UCD, "PropList.txt"), encoding="utf-8") as f:
        return re.match(r"# PropList-(\S+)\.txt", f.readline()).group(1)


def unicode_data():
    """{code point: (category, ccc, decomposition string)} for every assigned code point."""
    out = {}
    first = None
    with open(os.path.join(UCD, "UnicodeData.txt"), encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split(";")
            cp, name = int(fields[0], 16), fields[1]
            value = (fields[2], int(fields[3]), fields[5])
            if name.endswith(", First>"):
                first = cp
                continue
            if name.endswith(", Last>"):
                for c in range(first, cp + 1):
                    out[c] = (value[0], value[1], "")
                continue
            out[cp] = value
    return out


def property_set(filename, name):
    out = set()
    with open(os.path.join(UCD, filename), encoding="utf-8") as f:
        for line in f:
            m = re.match(r"([0-9A-F]+)(?:\.\.([0-9A-F]+))?\s*;\s*" + name + r"\b", line)
            if m:
                out.update(range(int(m.group(1), 16), int(m.group(2) or m.group(1), 16) + 1))
    return out


def starts(values, shift):
    """Range starts of a code point -> small int map (default 0) over 0..10FFFF."""
    out = []
    prev = None
    for c in range(0x110000):
        v = values.get(c, 0)
        if v != prev:
            out.append(c << shift | v)
            prev = v
    return out


def array(ctype, name, values, per_line=8, fmt="0x{:X}"):
    body = ",".join(("\n    " if i % per_line == 0 else " ") + fmt.format(v) for i, v in enumerate(values))
    return f"inline constexpr {ctype} {name}[] = {{{body}}};\n"


def case_tables(ver):
    lower = []
    with open(os.path.join(UCD, "UnicodeData.txt"), encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split(";")
            if fields[13]:
                lower.append(int(fields[0], 16) << 21 | int(fields[13], 16))
    lower.sort()
    special = []
    with open(os.path.join(UCD, "SpecialCasing.txt"), encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            fields = [x.strip() for x in line.split(";")]
            if fields[4]:  # a condition (Final_Sigma, a language): not unconditional
                continue
            to = [int(x, 16) for x in fields[1].split()]
            if len(to) > 1:
                assert len(to) <= 3
                special.append([int(fields[0], 16)] + to + [0] * (3 - len(to)))
    special.sort()
    cased = property_set("DerivedCoreProperties.txt", "Cased")
    ignorable = property_set("DerivedCoreProperties.txt", "Case_Ignorable")
    context = {c: (1 if c in cased else 0) | (2 if c in ignorable else 0) for c in cased | ignorable}
    context_starts = starts(context, 2)
    text = f"""// Generated by tools/unicode/make_unicode_text_tables.py from the Unicode Character Database
// {ver} (Debian's unicode-data: UnicodeData.txt, SpecialCasing.txt, DerivedCoreProperties.txt).
// Do not edit: run the script. core/unicode_case.h reads them.
#pragma once

#include <cstdint>

namespace petrel::detail::unicode_tables {{

// Simple lowercase mappings: {len(lower)} entries (code point << 21 | lowercase), sorted.
{array("uint64_t", "kLowercase", lower, 6)}
// SpecialCasing.txt's unconditional lowercase mappings to several code points: code point,
// then its mapping (0-padded to 3), sorted.
{array("uint32_t", "kLowercaseSpecial", [x for row in special for x in row], 4)}
// Cased (bit 0) and Case_Ignorable (bit 1): {len(context_starts)} ranges (first << 2 | bits), sorted.
{array("uint32_t", "kCaseContextStarts", context_starts)}
}}  // namespace petrel::detail::unicode_tables
"""
    with open(os.path.join(CORE, "unicode_case_tables.h"), "w", encoding="utf-8") as f:
        f.write(text)


def main():
    data = unicode_data()
    ver = version()
    case_tables(ver)

    # General_Category.
    categories = {c: CATEGORIES.index(v[0]) for c, v in data.items()}
    category_starts = starts(categories, 5)
    folds = []
    with open(os.path.join(UCD, "CaseFolding.txt"), encoding="utf-8") as f:
        for line in f:
            m = re.match(r"([0-9A-F]+); ([CS]); ([0-9A-F]+);", line)
            if m:
                folds.append(int(m.group(1), 16) << 21 | int(m.group(3), 16))
    folds.sort()
    names = ", ".join(f"k{c} = {i}" for i, c in enumerate(CATEGORIES))
    text = f"""// Generated by tools/unicode/make_unicode_text_tables.py from the Unicode Character Database
// {ver} (Debian's unicode-data: UnicodeData.txt, CaseFolding.txt). Do not edit: run the script.
// core/unicode.h looks code points up in them.
#pragma once

#include <cstdint>

namespace petrel::detail::unicode_tables {{

// General_Category values (kCn: unassigned).
enum GeneralCategory : uint8_t {{ {names} }};

// {len(category_starts)} ranges: (first code point << 5 | category), sorted; a range ends where the next begins.
{array("uint32_t", "kCategoryStarts", category_starts)}
// Simple case folding (statuses C and S): {len(folds)} entries (code point << 21 | folded), sorted.
{array("uint64_t", "kCaseFolding", folds, 6)}
}}  // namespace petrel::detail::unicode_tables
"""
    with open(os.path.join(CORE, "unicode_category_tables.h"), "w", encoding="utf-8") as f:
        f.write(text)

    # Normalization.
    ccc = {c: v[1] for c, v in data.items() if v[1]}
    ccc_starts = starts(ccc, 8)
    single = {}  # one level: code point -> (compatibility?, [code points])
    for c, (_, _, d) in data.items():
        if d:
            parts = d.split()
            compat = parts[0].startswith("<")
            if compat:
                parts = parts[1:]
            single[c] = (compat, [int(p, 16) for p in parts])

    def full(c, compat):
        if c not in single or (single[c][0] and not compat):
            return [c]
        return [x for p in single[c][1] for x in full(p, compat)]

    pool = []
    index = {}

    def place(seq):
        key = tuple(seq)
        if key not in index:
            index[key] = len(pool)
            pool.extend(seq)
        return index[key]

    keys, info, differs, differs_info = [], [], [], []
    for c in sorted(single):
        canon = full(c, False)
        compat = full(c, True)
        assert len(canon) < 32 and len(compat) < 32
        if canon == [c]:  # compatibility only
            info.append(place(compat) << 6 | len(compat) << 1 | 1)
        else:
            info.append(place(canon) << 6 | len(canon) << 1)
            if compat != canon:
                differs.append(c)
                differs_info.append(place(compat) << 5 | len(compat))
        keys.append(c)
    exclusions = property_set("DerivedNormalizationProps.txt", "Full_Composition_Exclusion")
    compositions = sorted((single[c][1][0] << 21 | single[c][1][1], c) for c in single
                          if not single[c][0] and len(single[c][1]) == 2 and c not in exclusions)
    text = f"""// Generated by tools/unicode/make_unicode_text_tables.py from the Unicode Character Database
// {ver} (Debian's unicode-data: UnicodeData.txt, DerivedNormalizationProps.txt). Do not edit:
// run the script. text/unicode_normalize.cpp reads them; Hangul syllables are algorithmic.
#pragma once

#include <cstdint>

namespace petrel::detail::unicode_tables {{

// Canonical_Combining_Class: {len(ccc_starts)} ranges (first code point << 8 | class), sorted.
{array("uint32_t", "kCombiningClassStarts", ccc_starts)}
// The {len(keys)} code points with a decomposition, sorted.
{array("uint32_t", "kDecompositionKeys", keys)}
// Per key: (offset << 6 | length << 1 | compatibility only) into the pool: its canonical
// decomposition, which is also its compatibility one unless listed below; or, with the low
// bit set, its compatibility decomposition (it has no canonical one).
{array("uint32_t", "kDecompositionInfo", info)}
// The {len(differs)} keys whose full compatibility decomposition differs from their canonical one, sorted,
// and (offset << 5 | length) of the former.
{array("uint32_t", "kCompatibilityDiffers", differs)}
{array("uint32_t", "kCompatibilityDiffersInfo", differs_info)}
// Full decompositions, shared where equal: {len(pool)} code points.
{array("uint32_t", "kDecompositionPool", pool)}
// Primary composites: {len(compositions)} (first << 21 | second), sorted, and the composite of each.
{array("uint64_t", "kCompositionKeys", [k for k, _ in compositions], 6)}
{array("uint32_t", "kCompositionValues", [v for _, v in compositions])}
}}  // namespace petrel::detail::unicode_tables
"""
    with open(os.path.join(CORE, "unicode_normalization_tables.h"), "w", encoding="utf-8") as f:
        f.write(text)

    # The conformance file, without comments.
    lines = []
    with bz2.open(os.path.join(UCD, "NormalizationTest.txt.bz2"), "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i == 0:
                lines.append(line.rstrip("\n"))
                continue
            line = line.split("#", 1)[0].rstrip()
            if line:
                lines.append(line)
    os.makedirs(os.path.dirname(FIXTURE), exist_ok=True)
    with lzma.open(FIXTURE, "wb", preset=9 | lzma.PRESET_EXTREME) as f:
        f.write(("\n".join(lines) + "\n").encode("utf-8"))


if __name__ == "__main__":
    main()
