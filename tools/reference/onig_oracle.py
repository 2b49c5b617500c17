"""Oniguruma itself, through ctypes: the regex engine Hugging Face's tokenizers runs its
Split patterns with (the onig crate: onig_new with ONIG_OPTION_NONE, UTF-8,
ONIG_SYNTAX_ONIGURUMA, the library's default syntax), from Debian's libonig5 (Oniguruma
6.9.8, Unicode 14.0 data; no headers needed). find_iter follows the onig crate's
FindMatches: each search starts at the last match's end and sees the whole text; an empty
match right at the last match's end is skipped and the search moves one code point on.

    from onig_oracle import Onig
    onig = Onig()
    regex = onig.compile(pattern)          # raises ValueError on a pattern Oniguruma refuses
    onig.find_iter(regex, text)            # [(begin, end), ...] as UTF-8 byte offsets
"""
import ctypes


class _Region(ctypes.Structure):
    _fields_ = [("allocated", ctypes.c_int), ("num_regs", ctypes.c_int),
                ("beg", ctypes.POINTER(ctypes.c_int)), ("end", ctypes.POINTER(ctypes.c_int))]


class _ErrorInfo(ctypes.Structure):
    _fields_ = [("enc", ctypes.c_void_p), ("par", ctypes.c_void_p), ("par_end", ctypes.c_void_p)]


class Onig:
    def __init__(self, library="libonig.so.5"):
        self.lib = ctypes.CDLL(library)
        self.lib.onig_version.restype = ctypes.c_char_p
        self.lib.onig_region_new.restype = ctypes.POINTER(_Region)
        self.encoding = ctypes.addressof(ctypes.c_byte.in_dll(self.lib, "OnigEncodingUTF8"))
        self.syntax = ctypes.addressof(ctypes.c_byte.in_dll(self.lib, "OnigSyntaxOniguruma"))
        encodings = (ctypes.c_void_p * 1)(self.encoding)
        if self.lib.onig_initialize(encodings, 1) != 0:
            raise RuntimeError("onig_initialize failed")
        self.keep = []

    def version(self):
        return self.lib.onig_version().decode()

    def compile(self, pattern):
        data = pattern.encode()
        buf = ctypes.create_string_buffer(data, len(data) + 1)
        regex = ctypes.c_void_p()
        info = _ErrorInfo()
        r = self.lib.onig_new(ctypes.byref(regex), buf, ctypes.c_void_p(ctypes.addressof(buf) + len(data)), 0,
                              ctypes.c_void_p(self.encoding), ctypes.c_void_p(self.syntax), ctypes.byref(info))
        if r != 0:
            raise ValueError(f"Oniguruma refuses {pattern!r} (error {r})")
        self.keep.append(buf)
        return regex

    def find_iter(self, regex, text):
        data = text.encode()
        buf = ctypes.create_string_buffer(data, len(data) + 1)
        base = ctypes.addressof(buf)
        end = base + len(data)
        region = self.lib.onig_region_new()
        out, last_end, last_match_end = [], 0, None
        try:
            while last_end <= len(data):
                self.lib.onig_region_clear(region)
                r = self.lib.onig_search(regex, ctypes.c_void_p(base), ctypes.c_void_p(end),
                                         ctypes.c_void_p(base + last_end), ctypes.c_void_p(end), region, 0)
                if r == -1:  # ONIG_MISMATCH
                    break
                if r < 0:
                    raise RuntimeError(f"onig_search failed ({r})")
                begin, finish = region.contents.beg[0], region.contents.end[0]
                if begin == finish and last_match_end == finish:
                    if last_end >= len(data):
                        break
                    step = 1
                    while last_end + step < len(data) and (data[last_end + step] & 0xC0) == 0x80:
                        step += 1
                    last_end += step
                    continue
                last_end = last_match_end = finish
                out.append((begin, finish))
        finally:
            self.lib.onig_region_free(region, 1)
        return out
