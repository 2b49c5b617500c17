"""Writers and readers for Marian's own model and shortlist files, the ones Firefox
Translations ships (bergamot-translator): `model.*.bin`, `model.*.npz` and
`lex.*.s2t.bin`. numpy only, so fixtures can be made without torch.

Every layout rule below was read (not copied) in browsermt/marian-dev at commit
2781d735d4a10dca876d61be587afdab2726293c (2024-05-12):

  * src/common/binary.cpp saveItems/loadItems: u64 version 1 (binary.h
    BINARY_FILE_VERSION), u64 item count, one header per item {nameLength incl. NUL,
    type, shapeLength, dataLength}, all names, all shapes (int32), u64 `offset` and that
    many zero bytes with offset = ((pos + 8) // 256 + 1) * 256 - pos - 8 (so it is
    1..256, never 0), then every item's bytes back to back. dataLength is the item's
    byte vector as Marian holds it: a tensor's allocator memory, i.e. the payload
    rounded up to a multiple of 256 (tensor.cpp TensorBase::get, allocator.h
    alignedSize), so every data block starts 256-aligned. `special:model.yml`
    (io.cpp addMetaToItems) is type int8, shape [len+1], YAML + NUL, not padded, and
    comes last; parameters come first in std::map (byte) order.
  * src/common/types.h: float32 0x0404, float16 0x0402, int8 0x0101, intgemm8 0x4101,
    intgemm16 0x4102.
  * src/tensors/cpu/expression_graph_packable.h packAndSave (what
    `marian-conv --gemm-type intgemm8` runs): an item becomes intgemm8 when its name's
    FIRST "_W" sits at len-3 or len-2 (`..._Wq`, `..._W1`, `..._Wt`, `rnn_W`, `rnn_Wf`)
    or the name contains "Wemb" -- a name rule, not a shape rule, so `Wemb_QuantMultA`
    [1,1] is quantized too. quantMult = 127 / max|W| over the whole matrix (float32);
    q = intgemm PrepareA = clamp(round-half-even(w * quantMult), -127, 127); the int8
    values are written transposed ([cols][rows] row-major) except for Wemb names,
    the shape header keeps Marian's [rows, cols]; quantMult follows as a float32 right
    after the rows*cols bytes (types.cpp requiredBytes: elements + 4), then padding.
  * loading (binary.cpp loadItems, integer_common.h unquantizeWemb /
    prepareAndTransposeB): Wemb-named intgemm8 items become float32 q * (1/quantMult)
    at load; the others stay int8 and multiply as q / quantMult.
  * activation multipliers (integer_common.h fetchAlphaFromModelNodeOp,
    intgemm_interface.h affine, layers/generic.cpp Output): `<param>_QuantMultA`, the
    output layer's being `Wemb_QuantMultA` (tied) or `decoder_ff_logit_out_Wt_QuantMultA`.
    scripts/alphas/extract_stats.py adds them to the .npz as float32 (1,) arrays (->
    [1,1]) before marian-conv runs, which is why they pass the name rule above.
  * src/data/shortlist.{h,cpp} BinaryShortlistGenerator: header of six u64 {magic
    0xF11A48D5013417F5, checksum, firstNum, bestNum, wordToOffsetSize, shortListsSize},
    u64 wordToOffset[wordToOffsetSize] (source vocab size + 1; the last equals
    shortListsSize), u32 shortLists[] (each source word's target ids, sorted); file
    size exactly that; checksum = util::hashMem (common/hash.h, boost hash_combine with
    std::hash<uint64_t>: the identity on 64-bit hosts, murmur2 in libc++ on wasm32) over
    the (size - 16) // 8 whole u64 words from firstNum on (an odd u32 tail is left out).
    bergamot checks it only with `check-bytearray: true` (translation_model.cpp).
"""
import io
import struct
import zipfile

import numpy as np

BINARY_FILE_VERSION = 1
TYPE_INT8 = 0x0101
TYPE_INT16 = 0x0102
TYPE_INT32 = 0x0104
TYPE_INT64 = 0x0108
TYPE_UINT8 = 0x0201
TYPE_UINT16 = 0x0202
TYPE_UINT32 = 0x0204
TYPE_UINT64 = 0x0208
TYPE_FLOAT16 = 0x0402
TYPE_FLOAT32 = 0x0404
TYPE_FLOAT64 = 0x0408
TYPE_INTGEMM8 = 0x4101
TYPE_INTGEMM16 = 0x4102

TYPE_NAMES = {TYPE_INT8: "int8", TYPE_INT16: "int16", TYPE_INT32: "int32", TYPE_INT64: "int64",
              TYPE_UINT8: "uint8", TYPE_UINT16: "uint16", TYPE_UINT32: "uint32",
              TYPE_UINT64: "uint64", TYPE_FLOAT16: "float16", TYPE_FLOAT32: "float32",
              TYPE_FLOAT64: "float64", TYPE_INTGEMM8: "intgemm8", TYPE_INTGEMM16: "intgemm16"}
_PLAIN_DTYPES = {TYPE_INT8: np.int8, TYPE_INT16: np.int16, TYPE_INT32: np.int32,
                 TYPE_INT64: np.int64, TYPE_UINT8: np.uint8, TYPE_UINT16: np.uint16,
                 TYPE_UINT32: np.uint32, TYPE_UINT64: np.uint64, TYPE_FLOAT16: np.float16,
                 TYPE_FLOAT32: np.float32, TYPE_FLOAT64: np.float64}

META_NAME = "special:model.yml"
ALIGNMENT = 256
SHORTLIST_MAGIC = 0xF11A48D5013417F5
_MASK64 = (1 << 64) - 1


# ---------------------------------------------------------------- model.yml

def _yaml_scalar(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    text = str(value)
    # Quote what a YAML reader would otherwise turn into something else (empty,
    # bool/null/number look-alikes, indicators, surrounding blanks).
    plain_ok = (
        text != "" and text == text.strip()
        and text.lower() not in ("true", "false", "yes", "no", "on", "off", "null", "~")
        and text[0] not in "-?:,[]{}#&*!|>'\"%@`"
        and ": " not in text and " #" not in text and not text.endswith(":")
    )
    if plain_ok:
        try:
            float(text)
            plain_ok = False
        except ValueError:
            pass
    if plain_ok:
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _yaml_lines(options: dict, indent: str) -> list:
    lines = []
    for key in sorted(options):
        value = options[key]
        if isinstance(value, dict):
            if value:
                lines.append(f"{indent}{key}:")
                lines.extend(_yaml_lines(value, indent + "  "))
            else:
                lines.append(f"{indent}{key}: {{}}")
        elif isinstance(value, (list, tuple)):
            if value:
                lines.append(f"{indent}{key}:")
                lines.extend(f"{indent}  - {_yaml_scalar(v)}" for v in value)
            else:
                lines.append(f"{indent}{key}: []")
        else:
            lines.append(f"{indent}{key}: {_yaml_scalar(value)}")
    return lines


def marian_yaml(options: dict) -> str:
    """Marian-style YAML (as yaml-cpp writes model.yml): sorted keys, `key: value`,
    true/false, block lists `  - x` or `[]`, `""` for the empty string."""
    return "\n".join(_yaml_lines(options, "")) + "\n"


# ---------------------------------------------------------------- model.bin

def _marian_shape(array: np.ndarray) -> tuple:
    # Marian has no 1-D parameters: io.cpp loadItemsFromNpz reads (n,) as [1, n].
    if array.ndim == 1:
        return (1, array.shape[0])
    if array.ndim == 0:
        return (1, 1)
    return tuple(array.shape)


def is_intgemm_name(name: str) -> bool:
    """packAndSave's selection: first "_W" at len-3 or len-2, or "Wemb" anywhere."""
    first_w = name.find("_W")
    return (first_w != -1 and first_w in (len(name) - 3, len(name) - 2)) or "Wemb" in name


def _quantize_intgemm8(matrix: np.ndarray):
    """(int8 values as stored, quantMult, dequantized float32 as a reader sees it)."""
    max_abs = np.float32(np.max(np.abs(matrix)))
    if not max_abs > 0:
        raise ValueError("intgemm8 of an all-zero matrix has no quantMult (Marian writes inf)")
    quant_mult = np.float32(127.0) / max_abs
    scaled = (matrix * quant_mult).astype(np.float32)
    q = np.clip(np.rint(scaled), -127, 127).astype(np.int8)
    # Both load paths end at q * (1/quantMult) in float32 (unquantizeWemb literally;
    # the int8 GEMM as unquant_mult = 1/(aQuantMult*bQuantMult)).
    dequant = q.astype(np.float32) * (np.float32(1.0) / quant_mult)
    return q, quant_mult, dequant


def _pad(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % ALIGNMENT)


def _float_items(weights: dict, alphas) -> dict:
    items = {}
    for name, value in weights.items():
        if name == META_NAME:
            raise ValueError(f"{META_NAME} is written from `options`")
        array = np.asarray(value)
        if not np.issubdtype(array.dtype, np.floating):
            raise TypeError(f"{name}: expected a float array, got {array.dtype}")
        items[name] = np.ascontiguousarray(array, dtype=np.float32).reshape(_marian_shape(array))
    for name, multiplier in (alphas or {}).items():
        key = name + "_QuantMultA"
        if key in items:
            raise ValueError(f"{key} given twice (weights and alphas)")
        items[key] = np.full((1, 1), multiplier, dtype=np.float32)
    return items


def write_model_bin(path, weights: dict, options: dict, intgemm8: bool = False,
                    alphas: dict = None) -> dict:
    """Write marian::io::binary. `weights`: float32 in Marian's layout ([in, out]
    matrices, [1, n] vectors). intgemm8=True quantizes the items marian-conv
    --gemm-type intgemm8 would. `alphas`: weight name -> activation multiplier, written
    as `<name>_QuantMultA` [1,1] (before quantization, as the real pipeline does).
    Returns every item as a reader sees it (dequantized float32, Marian layout)."""
    items = _float_items(weights, alphas)
    seen = {}
    blocks = []  # (name, type, shape, bytes)
    for name in sorted(items, key=lambda n: n.encode()):
        matrix = items[name]
        if intgemm8 and is_intgemm_name(name):
            if matrix.ndim != 2:
                raise ValueError(f"{name}: intgemm8 needs a 2-D matrix, got {matrix.shape}")
            q, quant_mult, dequant = _quantize_intgemm8(matrix)
            stored = q if "Wemb" in name else q.T  # Wemb is not transposed ("hacky", says Marian)
            payload = np.ascontiguousarray(stored).tobytes() + struct.pack("<f", quant_mult)
            blocks.append((name, TYPE_INTGEMM8, matrix.shape, _pad(payload)))
            seen[name] = dequant
        else:
            blocks.append((name, TYPE_FLOAT32, matrix.shape, _pad(matrix.tobytes())))
            seen[name] = matrix.copy()
    meta = marian_yaml(options).encode() + b"\0"
    blocks.append((META_NAME, TYPE_INT8, (len(meta),), meta))

    out = io.BytesIO()
    out.write(struct.pack("<QQ", BINARY_FILE_VERSION, len(blocks)))
    for name, type_, shape, data in blocks:
        out.write(struct.pack("<QQQQ", len(name.encode()) + 1, type_, len(shape), len(data)))
    for name, _, _, _ in blocks:
        out.write(name.encode() + b"\0")
    for _, _, shape, _ in blocks:
        out.write(struct.pack(f"<{len(shape)}i", *shape))
    pos = out.tell()
    next_pos = ((pos + 8) // ALIGNMENT + 1) * ALIGNMENT
    offset = next_pos - pos - 8
    out.write(struct.pack("<Q", offset) + b"\0" * offset)
    for _, _, _, data in blocks:
        out.write(data)
    with open(path, "wb") as f:
        f.write(out.getbuffer())
    return seen


def read_model_bin(path):
    """(name -> float32 array in Marian layout, dequantized; name -> type name;
    model.yml text). `special:model.yml` is returned only as the text."""
    with open(path, "rb") as f:
        blob = f.read()
    view = memoryview(blob)
    version, count = struct.unpack_from("<QQ", blob, 0)
    if version != BINARY_FILE_VERSION:
        raise ValueError(f"{path}: binary file version {version}, expected {BINARY_FILE_VERSION}")
    pos = 16
    headers = [struct.unpack_from("<QQQQ", blob, pos + 32 * i) for i in range(count)]
    pos += 32 * count
    names = []
    for name_len, _, _, _ in headers:
        raw = bytes(view[pos:pos + name_len])
        if len(raw) != name_len or raw[-1:] != b"\0":
            raise ValueError(f"{path}: malformed item name at byte {pos}")
        names.append(raw[:-1].decode())
        pos += name_len
    shapes = []
    for _, _, shape_len, _ in headers:
        shapes.append(struct.unpack_from(f"<{shape_len}i", blob, pos))
        pos += 4 * shape_len
    (offset,) = struct.unpack_from("<Q", blob, pos)
    pos += 8 + offset

    weights, types, yaml_text = {}, {}, None
    for name, (_, type_, _, data_len), shape in zip(names, headers, shapes):
        data = view[pos:pos + data_len]
        if len(data) != data_len:
            raise ValueError(f"{path}: item {name} runs past the end of the file")
        pos += data_len
        elements = int(np.prod(shape)) if shape else 1
        if name == META_NAME:
            yaml_text = bytes(data[:elements]).split(b"\0", 1)[0].decode()
            continue
        types[name] = TYPE_NAMES.get(type_, hex(type_))
        if type_ in (TYPE_INTGEMM8, TYPE_INTGEMM16):
            int_type = np.int8 if type_ == TYPE_INTGEMM8 else np.int16
            width = np.dtype(int_type).itemsize
            need = elements * width + 4
            if data_len < need:
                raise ValueError(f"{path}: {name} has {data_len} bytes, needs {need}")
            q = np.frombuffer(data, dtype=int_type, count=elements)
            (quant_mult,) = struct.unpack_from("<f", data, elements * width)
            rows, cols = elements // shape[-1], shape[-1]
            if "Wemb" not in name:
                q = q.reshape(cols, rows).T  # stored transposed; back to [rows, cols]
            values = q.astype(np.float32) * (np.float32(1.0) / np.float32(quant_mult))
            weights[name] = np.ascontiguousarray(values).reshape(shape)
        elif type_ in _PLAIN_DTYPES:
            dtype = np.dtype(_PLAIN_DTYPES[type_])
            if data_len < elements * dtype.itemsize:
                raise ValueError(f"{path}: {name} has {data_len} bytes, needs {elements * dtype.itemsize}")
            values = np.frombuffer(data, dtype=dtype, count=elements).reshape(shape)
            weights[name] = values.astype(np.float32) if dtype.kind == "f" else values.copy()
        else:
            raise ValueError(f"{path}: {name} has unsupported type {type_:#x}")
    return weights, types, yaml_text


# ---------------------------------------------------------------- model.npz

def write_model_npz(path, weights: dict, options: dict) -> None:
    """A stored (uncompressed) zip of `<name>.npy`, as Marian's cnpy writes it;
    `special:model.yml` is the YAML + NUL as int8."""
    items = _float_items(weights, None)
    meta = np.frombuffer(marian_yaml(options).encode() + b"\0", dtype=np.int8)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        for name in sorted(items, key=lambda n: n.encode()) + [META_NAME]:
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, meta if name == META_NAME else items[name],
                                      allow_pickle=False)
            archive.writestr(name + ".npy", buffer.getvalue())


# ---------------------------------------------------------------- lex.*.s2t.bin

def _libcxx_hash_u64_on_32bit(value: int) -> int:
    """std::hash<uint64_t> of libc++ where size_t is 32-bit (emscripten's wasm32): not
    the identity but murmur2 (__murmur2_or_cityhash<uint32_t>) over the 8 bytes."""
    m, h = 0x5BD1E995, 8
    for k in (value & 0xFFFFFFFF, value >> 32):
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    return h ^ (h >> 15)


def shortlist_checksum(words: np.ndarray, wasm32: bool = False) -> int:
    """util::hashMem<uint64_t, uint64_t>: boost's hash_combine over u64 words, with
    std::hash<uint64_t> the identity (64-bit hosts, where Mozilla's files are made).
    wasm32=True gives what the WASM engine computes instead, which is what its
    `check-bytearray: true` compares against (so it refuses native files; Firefox
    leaves the check off)."""
    seed = 0
    for word in words.tolist():
        hashed = _libcxx_hash_u64_on_32bit(word) if wasm32 else word
        seed ^= (hashed + 0x9E3779B9 + ((seed << 6) & _MASK64) + (seed >> 2)) & _MASK64
    return seed


def write_binary_shortlist(path, first: int, best: int, lists: list, wasm32_checksum: bool = False) -> None:
    """lists[s]: target ids for source id s (any order; stored sorted, duplicates kept).
    Marian's check=true also refuses a file whose last source word has an empty list.
    The checksum is the native one unless wasm32_checksum (see shortlist_checksum)."""
    offsets = [0]
    flat = []
    for targets in lists:
        flat.extend(sorted(int(t) for t in targets))
        offsets.append(len(flat))
    if any(t < 0 or t >= 1 << 32 for t in flat):
        raise ValueError("target ids must fit in u32")
    body = (struct.pack("<QQQQ", first, best, len(offsets), len(flat))
            + np.asarray(offsets, dtype="<u8").tobytes() + np.asarray(flat, dtype="<u4").tobytes())
    words = np.frombuffer(body[:len(body) // 8 * 8], dtype="<u8")
    with open(path, "wb") as f:
        f.write(struct.pack("<QQ", SHORTLIST_MAGIC, shortlist_checksum(words, wasm32_checksum)) + body)


def read_binary_shortlist(path):
    """(first, best, lists), after the checks Marian makes with check=true; the
    checksum may be either flavour (native or wasm32, see shortlist_checksum)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 48:
        raise ValueError(f"{path}: {len(blob)} bytes, too short for the header")
    magic, checksum, first, best, offsets_len, lists_len = struct.unpack_from("<6Q", blob, 0)
    if magic != SHORTLIST_MAGIC:
        raise ValueError(f"{path}: not a binary shortlist (magic {magic:#x})")
    expected = 48 + 8 * offsets_len + 4 * lists_len
    if expected != len(blob):
        raise ValueError(f"{path}: header says {expected} bytes, file has {len(blob)}")
    words = np.frombuffer(blob, dtype="<u8", offset=16, count=(len(blob) - 16) // 8)
    if checksum not in (shortlist_checksum(words), shortlist_checksum(words, wasm32=True)):
        raise ValueError(f"{path}: checksum mismatch")
    offsets = np.frombuffer(blob, dtype="<u8", offset=48, count=offsets_len)
    targets = np.frombuffer(blob, dtype="<u4", offset=48 + 8 * offsets_len, count=lists_len)
    # Marian's contentCheck: every offset but the last < shortListsSize (so a trailing
    # source word with an empty list is refused too), the last == shortListsSize.
    if offsets_len == 0 or offsets[-1] != lists_len or np.any(offsets[:-1] >= lists_len) \
            or np.any(np.diff(offsets.astype(np.int64)) < 0):
        raise ValueError(f"{path}: offsets out of bounds")
    lists = [targets[offsets[s]:offsets[s + 1]].tolist() for s in range(offsets_len - 1)]
    return first, best, lists
