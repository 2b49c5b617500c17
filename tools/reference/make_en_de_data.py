#!/usr/bin/env python3
"""English -> German sentence pairs from the gettext catalogs Debian installs: real human
translations of user-interface messages, split into train / dev / test.

    /usr/bin/python3 tools/reference/make_en_de_data.py build/en-de/data [--fixture tests/fixtures/en-de]

Writes DIR/{train,dev,test}.{en,de} (one message per line, line i of .en translates line i
of .de) and DIR/stats.json; with --fixture also FIXTURE/test.en and FIXTURE/test.de (the
committed copy of the test split). Needs Debian's python3 only; the catalogs come with the
packages listed in CATALOG_PACKAGES (installed when run as root, as tools/install-deps.sh
does). The counts depend on which packages are installed: the pairs are only reproducible
on a machine with the same catalogs.

Rules, in order (each says why):
* Catalogs: /usr/share/locale/de/LC_MESSAGES/*.mo only. de_DE has no catalogs here;
  de_CH and de_AT are regional variants (Swiss spelling has no "ß") that would give one
  English string two competing spellings, so they are left out.
* Entries: msgctxt is dropped (it disambiguates, it is not text); plural entries give two
  pairs, msgid -> msgstr[0] and msgid_plural -> msgstr[1]; empty translations are dropped
  (untranslated).
* Whitespace: every run of whitespace (newlines of wrapped help text, tabs, alignment
  spaces) becomes one space, ends stripped: the model translates running text, and the
  layout of a terminal message is not translation.
* Accelerators: GTK marks a menu mnemonic with "_" ("_Open" -> "Ö_ffnen"). It is
  stripped when both sides carry exactly one "_" that starts a word or sits inside a word
  before a lower-case letter, and, inside a word, the source word holding it does not recur
  in the translation (so identifiers such as "LC_ALL", "KP_Left" or "role_name" stay). Text handed to the
  model at run time has no mnemonics, and a "_" at an arbitrary place inside a German word
  would only teach noise. "&" is no accelerator in these catalogs (it appears as "AT&T",
  "&lt;"), so it stays.
* Dropped pairs: translation equal to the source (untranslated, or a name kept as is -
  over 10,000 of them in the ISO code lists; they would make the scores measure copying);
  a source with fewer than two letters once printf/brace placeholders are removed (pure
  format strings like "%s: %s"); either side over 200 characters (long help paragraphs,
  costly to train on and rare in UI text); one side over three times as long as the other
  plus 20 characters (a misaligned or commented translation).
* Duplicates: one translation per English string: the most frequent one across catalogs,
  ties broken by the first occurrence in sorted catalog path order then entry order.
* Split: by a hash (SHA-256) of the source's *key* - lower-cased, accelerators removed,
  every run of non-alphanumerics a single space - so near-duplicates ("Open", "_Open",
  "Open...") land in the same split and the test split never has a near-copy in training:
  key hash % 100 < 3 -> test, < 5 -> dev, otherwise train.
"""
import argparse
import collections
import hashlib
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gettext_catalogs  # noqa: E402

LOCALE = "de"
# The Debian packages that own /usr/share/locale/de/LC_MESSAGES/*.mo on the machine the
# committed model was trained on (dpkg -S); the counts in tools/en-de-model/README.md come from them.
CATALOG_PACKAGES = [
    "adduser", "appstream", "apt", "at-spi2-common", "bash", "binutils-common", "coreutils", "diffutils",
    "dpkg", "findutils", "fp-utils-3.2.2", "gettext", "gettext-base", "git", "gnucobol3", "gnupg-l10n", "grep",
    "gsettings-desktop-schemas", "iso-codes", "krb5-locales", "libapt-pkg6.0", "libavahi-common-data",
    "libc-l10n", "libdpkg-perl", "libelf1", "libexif12", "libgdk-pixbuf2.0-common", "libglib2.0-data",
    "libgnutls30", "libgphoto2-port12", "libgstreamer-plugins-base1.0-0", "libgstreamer1.0-0",
    "libgtk2.0-common", "libidn2-0", "libpam-runtime", "libpq5", "libzvbi-common", "login", "make", "man-db",
    "net-tools", "packagekit", "polkitd", "postgresql-15", "postgresql-client-15", "procps", "psmisc",
    "python-apt-common", "sed", "shared-mime-info", "software-properties-common", "systemd", "tar", "wget",
    "xdg-user-dirs", "xkb-data", "xz-utils",
]
MAX_CHARS = 200
TEST_PERCENT, DEV_PERCENT = 3, 2

PLACEHOLDER = re.compile(r"%(\d+\$)?[-+ #0']*(\d+|\*)?(\.(\d+|\*))?(hh|h|ll|l|L|q|j|z|t|I64)?[diouxXeEfFgGaAcspnm%]"
                         r"|\{[^{}]*\}|\$\{?\w+\}?")
# "_" starting a word, or inside a word before a lower-case letter ("C_onnect", "Ö_ffnen").
ACCELERATOR = re.compile(r"(?<!\w)_(?=\w)|(?<=[^\W\d_])_(?=[^\W\d_A-ZÄÖÜ])")


def install_catalog_packages():
    """As tools/install-deps.sh: install what is missing when root, else only report it."""
    missing = [p for p in CATALOG_PACKAGES
               if subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True)
               .stdout.find("install ok installed") < 0]
    if not missing:
        return
    if os.getuid() != 0:
        print(f"note: not installed (fewer pairs): {' '.join(missing)}; "
              f"sudo apt-get install -y {' '.join(missing)}", file=sys.stderr)
        return
    print(f"installing: {' '.join(missing)}", file=sys.stderr)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends"] + missing, check=True, env=env,
                   stdout=subprocess.DEVNULL)


def normalize_space(text):
    return " ".join(text.split())


def word_at(text, index):
    start, end = index, index
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    while end < len(text) and (text[end].isalnum() or text[end] == "_"):
        end += 1
    return text[start:end]


def strip_accelerators(source, target):
    """Removes a GTK mnemonic from both sides when both carry one (see the rules above)."""
    if source.count("_") != 1 or target.count("_") != 1:
        return source, target
    s_match, t_match = ACCELERATOR.search(source), ACCELERATOR.search(target)
    if not s_match or not t_match:
        return source, target
    word_start = s_match.start() == 0 or not source[s_match.start() - 1].isalnum()
    if not word_start and word_at(source, s_match.start()) in target:
        return source, target  # an identifier kept in the translation, not a mnemonic
    return (source[:s_match.start()] + source[s_match.end():],
            target[:t_match.start()] + target[t_match.end():])


def keep(source, target):
    """The drop rules of the module docstring; returns the reason to drop, or None."""
    if source == target:
        return "identical"
    if sum(c.isalpha() for c in PLACEHOLDER.sub("", source)) < 2:
        return "format string"
    if len(source) > MAX_CHARS or len(target) > MAX_CHARS:
        return "too long"
    if len(source) > 3 * len(target) + 20 or len(target) > 3 * len(source) + 20:
        return "length ratio"
    return None


def split_key(source):
    return " ".join(re.sub(r"[\W_]+", " ", source.lower()).split())


def split_of(source):
    bucket = int.from_bytes(hashlib.sha256(split_key(source).encode()).digest()[:8], "big") % 100
    if bucket < TEST_PERCENT:
        return "test"
    if bucket < TEST_PERCENT + DEV_PERCENT:
        return "dev"
    return "train"


def raw_pairs(paths):
    """(source, target) for every translated message and plural form, in catalog order."""
    for _, entry in gettext_catalogs.messages(paths):
        forms = [(entry.msgid, entry.msgstrs[0])]
        if entry.msgid_plural is not None and len(entry.msgstrs) > 1:
            forms.append((entry.msgid_plural, entry.msgstrs[1]))
        for source, target in forms:
            if source.strip() and target.strip():
                yield source, target


def collect(paths):
    dropped = collections.Counter()
    translations = collections.defaultdict(collections.Counter)  # source -> Counter(target)
    first_seen = {}  # (source, target) -> order of first occurrence
    total = 0
    for source, target in raw_pairs(paths):
        total += 1
        source, target = strip_accelerators(normalize_space(source), normalize_space(target))
        reason = keep(source, target)
        if reason:
            dropped[reason] += 1
            continue
        translations[source][target] += 1
        first_seen.setdefault((source, target), len(first_seen))
    pairs = []
    for source, counts in translations.items():
        best = min(counts, key=lambda t: (-counts[t], first_seen[(source, t)]))
        pairs.append((source, best))
    pairs.sort(key=lambda p: first_seen[p])
    duplicates = total - sum(dropped.values()) - len(pairs)
    return pairs, {"catalog_pairs": total, "dropped": dict(dropped), "duplicates_removed": duplicates}


def write_split(directory, name, pairs):
    with open(os.path.join(directory, name + ".en"), "w", encoding="utf-8") as en, \
         open(os.path.join(directory, name + ".de"), "w", encoding="utf-8") as de:
        for source, target in pairs:
            en.write(source + "\n")
            de.write(target + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--fixture", help="also write the test split here (test.en, test.de)")
    args = parser.parse_args()
    install_catalog_packages()
    paths = gettext_catalogs.catalogs(LOCALE)
    if not paths:
        sys.exit(f"no catalogs under {gettext_catalogs.LOCALE_DIR}/{LOCALE}/LC_MESSAGES")
    pairs, stats = collect(paths)
    splits = {"train": [], "dev": [], "test": []}
    for pair in pairs:
        splits[split_of(pair[0])].append(pair)
    os.makedirs(args.out_dir, exist_ok=True)
    for name, split_pairs in splits.items():
        write_split(args.out_dir, name, split_pairs)
    if args.fixture:
        os.makedirs(args.fixture, exist_ok=True)
        write_split(args.fixture, "test", splits["test"])
    stats.update({"catalogs": len(paths), "unique_pairs": len(pairs),
                  **{name: len(p) for name, p in splits.items()}})
    with open(os.path.join(args.out_dir, "stats.json"), "w") as f:
        json.dump(stats, f, indent=1)
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
