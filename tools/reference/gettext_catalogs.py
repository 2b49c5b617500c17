"""Reads the gettext catalogs Debian installs (/usr/share/locale/<lang>/LC_MESSAGES/*.mo):
real text in ~190 locales, each message an English msgid with its human translation.

    for entry in read_mo(path): entry.context, entry.msgid, entry.msgid_plural, entry.msgstrs

The .mo format (GNU gettext manual, "The Format of GNU MO Files"): a magic number that
also gives the byte order, a revision, the message count N, then two tables of N
(length, offset) pairs for the original and the translated strings. An original may
carry a context ("ctx\\x04msgid") and a plural form ("singular\\x00plural"); a
translation holds one string per plural form, separated by NUL. Entry 0 with an empty
msgid is the catalog header, skipped here.
"""
import glob
import os
import struct
from typing import Iterator, List, NamedTuple, Optional

LOCALE_DIR = "/usr/share/locale"


class Entry(NamedTuple):
    context: Optional[str]
    msgid: str
    msgid_plural: Optional[str]
    msgstrs: List[str]


def read_mo(path: str) -> List[Entry]:
    """Every entry of one catalog; raises ValueError on a malformed file."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 20:
        raise ValueError(f"{path}: too short for a .mo file")
    magic = struct.unpack_from("<I", data)[0]
    if magic == 0x950412DE:
        order = "<"
    elif magic == 0xDE120495:
        order = ">"
    else:
        raise ValueError(f"{path}: not a .mo file (magic {magic:#x})")
    _, count, originals, translations = struct.unpack_from(order + "4I", data, 4)

    def string_at(table: int, i: int) -> bytes:
        length, offset = struct.unpack_from(order + "2I", data, table + 8 * i)
        if offset + length > len(data):
            raise ValueError(f"{path}: string {i} runs past the end of the file")
        return data[offset:offset + length]

    entries = []
    for i in range(count):
        original = string_at(originals, i).decode("utf-8", errors="replace")
        translated = string_at(translations, i).decode("utf-8", errors="replace")
        context = None
        if "\x04" in original:
            context, original = original.split("\x04", 1)
        if not original:
            continue  # the catalog header
        singular, _, plural = original.partition("\x00")
        entries.append(Entry(context, singular, plural or None, translated.split("\x00")))
    return entries


def catalogs(lang: Optional[str] = None) -> List[str]:
    """Paths of the installed catalogs, sorted; of one locale directory when lang is given
    (e.g. "de" — not "de_AT", which is a locale of its own)."""
    pattern = os.path.join(LOCALE_DIR, lang or "*", "LC_MESSAGES", "*.mo")
    return sorted(glob.glob(pattern))


def locale_of(path: str) -> str:
    """The locale directory a catalog lives in ("de", "pt_BR", "sr@latin", ...)."""
    return os.path.basename(os.path.dirname(os.path.dirname(path)))


def messages(paths: List[str]) -> Iterator[tuple]:
    """(path, entry) for every entry of the given catalogs, skipping unreadable files."""
    for path in paths:
        try:
            for entry in read_mo(path):
                yield path, entry
        except (OSError, ValueError):
            continue
