#!/usr/bin/env python3
"""Writes hostile pytorch_model.bin files that make a naive pickle reader copy its
values over and over (issue #24): small files that once drove petrel-convert to
gigabytes before it refused them. Each is a regression reproducer of the
fuzz_pytorch_checkpoint corpus; Petrel must refuse each quickly, naming the limit.

  regress-memoized_size_tuple.bin     the issue's file: a zip whose data.pkl (404 KB)
                                      memoizes one 200,000-int tuple and rebuilds 300
                                      tensors with it as size and stride (970 MB)
  regress-ordered_dict_copies.bin     one memoized list of 50,000 pairs rebuilt into
                                      2,000 OrderedDicts (each a copy: 800 MB)
  regress-legacy_storage_key_copies.bin
                                      a legacy file whose 2,000 storage views name one
                                      200,000-byte root key (each storage a copy: 400 MB)
  regress-shared_expanded_tensor_names.bin
                                      30,000 names of one tensor of 100,000 copies of a
                                      float (stride 0): reading every entry read 3e9
                                      elements from a 390 KB file

    python3 tools/reference/make_hostile_pickles.py tests/fuzz/corpus/fuzz_pytorch_checkpoint

Pickle opcodes are written by hand (no torch needed; torch.save cannot write these).
"""
import io
import os
import struct
import sys
import zipfile

PROTO2 = b"\x80\x02"
MARK, STOP, TUPLE, TUPLE1, REDUCE, BINPERSID = b"(", b".", b"t", b"\x85", b"R", b"Q"
EMPTY_TUPLE, EMPTY_LIST, EMPTY_DICT = b")", b"]", b"}"
APPEND, APPENDS, SETITEMS, NEWFALSE, NONE = b"a", b"e", b"u", b"\x89", b"N"


def binint1(n):
    return b"K" + bytes([n])


def string(s):
    data = s.encode()
    return b"X" + struct.pack("<I", len(data)) + data


def glob(module, name):
    return b"c" + f"{module}\n{name}\n".encode()


def put(i):
    return b"r" + struct.pack("<I", i)


def get(i):
    return b"j" + struct.pack("<I", i)


def ordered_dict():
    return glob("collections", "OrderedDict") + EMPTY_TUPLE + REDUCE


def memoized_size_tuple(dims=200_000, tensors=300):
    p = [PROTO2, ordered_dict(), MARK]
    for i in range(tensors):
        p.append(string(f"t{i}"))
        p.append(glob("torch._utils", "_rebuild_tensor_v2") if i == 0 else get(0))
        if i == 0:
            p.append(put(0))
        p.append(MARK)
        if i == 0:
            p += [MARK, string("storage"), glob("torch", "FloatStorage"), string("0"), string("cpu"), binint1(1),
                  TUPLE, put(1)]
        else:
            p.append(get(1))
        p += [BINPERSID, binint1(0)]
        if i == 0:
            p += [MARK, binint1(1) * dims, TUPLE, put(2)]
        else:
            p.append(get(2))
        p += [get(2), NEWFALSE, ordered_dict(), TUPLE, REDUCE]
    p += [SETITEMS, STOP]
    return b"".join(p)


def ordered_dict_copies(pairs=50_000, copies=2_000):
    # An outer list first holds the memoized parts (APPENDS takes them off the stack),
    # then the copies.
    p = [PROTO2, EMPTY_LIST, MARK, string("w"), NONE, b"\x86", put(0)]  # the pair ('w', None)
    p += [EMPTY_LIST, MARK, get(0) * pairs, APPENDS, put(1)]  # [pair] * pairs
    p += [get(1), TUPLE1, put(2), glob("collections", "OrderedDict"), put(3), APPENDS]
    p += [(get(3) + get(2) + REDUCE + APPEND) * copies, STOP]
    return b"".join(p)


def shared_expanded_tensor(names=30_000, elements=100_000):
    # One tensor of `elements` copies of one float (stride 0), under `names` names.
    p = [PROTO2, ordered_dict(), MARK]
    for i in range(names):
        name = f"n{i}".encode()
        p.append(b"\x8c" + bytes([len(name)]) + name)  # SHORT_BINUNICODE
        if i == 0:
            p += [glob("torch._utils", "_rebuild_tensor_v2"), MARK, MARK, string("storage"), glob("torch", "FloatStorage"),
                  string("0"), string("cpu"), binint1(1), TUPLE, BINPERSID, binint1(0),
                  b"J" + struct.pack("<i", elements), TUPLE1, binint1(0), TUPLE1, NEWFALSE, ordered_dict(), TUPLE,
                  REDUCE, put(0)]
        else:
            p.append(get(0))
    p += [SETITEMS, STOP]
    return b"".join(p)


def zip_checkpoint(pickle, storages):
    buf = io.BytesIO()
    def record(name, data):  # a fixed date: the files are the same on every run
        z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)

    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        record("archive/data.pkl", pickle)
        for key, data in storages.items():
            record(f"archive/data/{key}", data)
        record("archive/version", b"3\n")
    return buf.getvalue()


def legacy_storage_key_copies(key_bytes=200_000, views=2_000):
    magic = PROTO2 + b"\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little") + STOP
    protocol = PROTO2 + b"M" + struct.pack("<H", 1001) + STOP
    info = PROTO2 + EMPTY_DICT + string("little_endian") + b"\x88" + b"s" + STOP
    # The list starts with the four memoized parts (APPENDS takes them off the stack).
    p = [PROTO2, EMPTY_LIST, MARK, string("storage"), put(0), glob("torch", "FloatStorage"), put(1),
         string("k" * key_bytes), put(2), string("cpu"), put(3), APPENDS]
    # Each view: ('storage', FloatStorage, <long root key>, 'cpu', 4, ('v<i>', 0, 1)), kept in the list.
    for i in range(views):
        p += [MARK, get(0), get(1), get(2), get(3), binint1(4), MARK, string(f"v{i}"), binint1(0), binint1(1), TUPLE,
              TUPLE, BINPERSID, APPEND]
    p.append(STOP)
    return magic + protocol + info + b"".join(p)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fuzz/corpus/fuzz_pytorch_checkpoint"
    os.makedirs(out, exist_ok=True)
    files = {
        "regress-memoized_size_tuple.bin": zip_checkpoint(memoized_size_tuple(), {"0": struct.pack("<f", 1.0)}),
        "regress-ordered_dict_copies.bin": zip_checkpoint(ordered_dict_copies(), {}),
        "regress-legacy_storage_key_copies.bin": legacy_storage_key_copies(),
        "regress-shared_expanded_tensor_names.bin": zip_checkpoint(shared_expanded_tensor(),
                                                                   {"0": struct.pack("<f", 1.0)}),
    }
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
