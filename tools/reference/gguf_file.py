"""A small self-contained GGUF v3 writer and reader (numpy only): the subset llama.cpp's
loader needs for a dense decoder -- typed KV metadata, tensor infos, 32-byte aligned tensor
data -- with F32, F16, BF16 and Q8_0 tensors.

Layout (ggml/docs/gguf.md): "GGUF", u32 version 3, u64 tensor count, u64 KV count; each KV
as (string key, u32 value type, value); each tensor info as (string name, u32 n_dims,
u64 ne[n_dims] innermost first, u32 ggml type, u64 offset into the data section); padding
to `general.alignment` (32 unless set); the data section, every tensor starting at a
multiple of the alignment. Strings are u64 byte length + UTF-8 bytes, arrays are
u32 element type + u64 count + elements. Everything little-endian.

Q8_0 is ggml's quantize_row_q8_0_ref: blocks of 32 along the innermost dimension,
d = max|x| / 127 stored as f16, q = roundf(x / d) (halves away from zero) as int8.
"""
import struct

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32

# gguf_type
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
_SCALAR = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
           FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}
_NUMPY = {UINT8: "<u1", INT8: "<i1", UINT16: "<u2", INT16: "<i2", UINT32: "<u4", INT32: "<i4",
          FLOAT32: "<f4", BOOL: "<u1", UINT64: "<u8", INT64: "<i8", FLOAT64: "<f8"}

# ggml_type: (id, elements per block, bytes per block)
GGML_TYPES = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q8_0": (8, 32, 34), "BF16": (30, 1, 2)}
GGML_TYPE_NAMES = {v[0]: k for k, v in GGML_TYPES.items()}

# llama_ftype (general.file_type)
FILE_TYPES = {"F32": 0, "F16": 1, "Q8_0": 7, "BF16": 32}

# llama_token_type (tokenizer.ggml.token_type)
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = 1, 2, 3, 4, 5, 6

QK8_0 = 32


def quantize_q8_0(x):
    """f32 array whose innermost dimension is a multiple of 32 -> Q8_0 bytes (numpy uint8)."""
    x = np.asarray(x, dtype=np.float32)
    if x.shape[-1] % QK8_0 != 0:
        raise ValueError(f"Q8_0 needs the innermost dimension to be a multiple of {QK8_0}, got {x.shape}")
    blocks = x.reshape(-1, QK8_0)
    d = np.abs(blocks).max(axis=1, keepdims=True) / np.float32(127.0)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1.0) / d, np.float32(0.0)).astype(np.float32)
    v = blocks * inv
    q = np.trunc(v + np.copysign(np.float32(0.5), v)).astype(np.int8)  # roundf
    out = np.empty((blocks.shape[0], 34), dtype=np.uint8)
    out[:, :2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.reshape(-1)


def dequantize_q8_0(raw, count):
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 34)[: count // QK8_0]
    d = b[:, :2].copy().view(np.float16).astype(np.float32)
    return (b[:, 2:].copy().view(np.int8).astype(np.float32) * d).reshape(-1)


def f32_to_bf16_bits(x):
    """Round to nearest even, as ggml_compute_fp32_to_bf16 (NaN kept quiet)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((u + (np.uint32(0x7FFF) + ((u >> 16) & 1))) >> 16).astype(np.uint16)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, ((u >> 16) | 64).astype(np.uint16), rounded)


def tensor_nbytes(ggml_type, shape):
    _, block, size = GGML_TYPES[ggml_type]
    n = int(np.prod(shape, dtype=np.int64))
    if shape[-1] % block != 0:
        raise ValueError(f"{ggml_type}: innermost dimension {shape[-1]} is not a multiple of {block}")
    return n // block * size


def _pack_string(s):
    b = s if isinstance(s, bytes) else s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


class GGUFWriter:
    """Collects metadata and tensors, then write(path) streams them to disk. A tensor's data
    is given as a callable returning its bytes (numpy array or bytes), so a whole model
    never has to sit in memory at once."""

    def __init__(self, architecture):
        self.kv = []  # (key, type, value, array element type)
        self.tensors = []  # (name, shape (numpy order), ggml type name, producer)
        self.add_string("general.architecture", architecture)

    def _add(self, key, vtype, value, etype=None):
        if any(k == key for k, _, _, _ in self.kv):
            raise ValueError(f"duplicate GGUF key {key}")
        self.kv.append((key, vtype, value, etype))

    def add_uint32(self, key, v): self._add(key, UINT32, int(v))
    def add_int32(self, key, v): self._add(key, INT32, int(v))
    def add_float32(self, key, v): self._add(key, FLOAT32, float(v))
    def add_bool(self, key, v): self._add(key, BOOL, bool(v))
    def add_string(self, key, v): self._add(key, STRING, v)
    def add_array(self, key, etype, values): self._add(key, ARRAY, values, etype)

    def add_tensor(self, name, shape, ggml_type, producer):
        if ggml_type not in GGML_TYPES:
            raise ValueError(f"{name}: unsupported ggml type {ggml_type}")
        if len(name.encode("utf-8")) >= 64:
            raise ValueError(f"{name}: tensor names are limited to 63 bytes (GGML_MAX_NAME)")
        shape = tuple(int(d) for d in shape)
        tensor_nbytes(ggml_type, shape)  # validates the block size
        self.tensors.append((name, shape, ggml_type, producer))

    def _kv_bytes(self):
        out = []
        for key, vtype, value, etype in self.kv:
            out.append(_pack_string(key) + struct.pack("<I", vtype))
            if vtype == STRING:
                out.append(_pack_string(value))
            elif vtype == ARRAY:
                out.append(struct.pack("<IQ", etype, len(value)))
                if etype == STRING:
                    out.append(b"".join(_pack_string(s) for s in value))
                else:
                    out.append(np.asarray(value, dtype=_NUMPY[etype]).tobytes())
            else:
                out.append(struct.pack(_SCALAR[vtype], value))
        return b"".join(out)

    def write(self, path):
        infos, offset, layout = [], 0, []
        for name, shape, ggml_type, _ in self.tensors:
            nbytes = tensor_nbytes(ggml_type, shape)
            infos.append(_pack_string(name) + struct.pack("<I", len(shape))
                         + b"".join(struct.pack("<Q", d) for d in reversed(shape))
                         + struct.pack("<IQ", GGML_TYPES[ggml_type][0], offset))
            layout.append((offset, nbytes))
            offset += -(-nbytes // ALIGNMENT) * ALIGNMENT
        with open(path, "wb") as f:
            f.write(GGUF_MAGIC + struct.pack("<IQQ", GGUF_VERSION, len(self.tensors), len(self.kv)))
            f.write(self._kv_bytes())
            f.write(b"".join(infos))
            f.write(b"\0" * (-f.tell() % ALIGNMENT))
            base = f.tell()
            for (name, _, _, producer), (off, nbytes) in zip(self.tensors, layout):
                f.write(b"\0" * (base + off - f.tell()))
                data = producer()
                raw = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
                if len(raw) != nbytes:
                    raise ValueError(f"{name}: {len(raw)} bytes of data, its type and shape need {nbytes}")
                f.write(raw)
            f.write(b"\0" * (-f.tell() % ALIGNMENT))


class GGUFReader:
    """Reads metadata and tensor infos; tensor(name) memory-maps a tensor's raw bytes."""

    def __init__(self, path):
        self.path = path
        self.data = np.memmap(path, dtype=np.uint8, mode="r")
        self.pos = 0
        if bytes(self.data[:4]) != GGUF_MAGIC:
            raise ValueError(f"{path}: not a GGUF file")
        version, n_tensors, n_kv = struct.unpack_from("<IQQ", self.data, 4)
        if version != GGUF_VERSION:
            raise ValueError(f"{path}: GGUF version {version}, expected {GGUF_VERSION}")
        self.pos = 24
        self.kv = {}
        for _ in range(n_kv):
            key = self._string()
            (vtype,) = self._unpack("<I")
            self.kv[key] = self._value(vtype)
        self.tensors = {}
        for _ in range(n_tensors):
            name = self._string()
            (n_dims,) = self._unpack("<I")
            ne = [self._unpack("<Q")[0] for _ in range(n_dims)]
            ttype, off = self._unpack("<IQ")
            self.tensors[name] = (tuple(reversed(ne)), GGML_TYPE_NAMES.get(ttype, ttype), off)
        align = self.kv.get("general.alignment", ALIGNMENT)
        self.data_start = -(-self.pos // align) * align

    def _unpack(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def _string(self):
        (n,) = self._unpack("<Q")
        s = bytes(self.data[self.pos:self.pos + n]).decode("utf-8")
        self.pos += n
        return s

    def _value(self, vtype):
        if vtype == STRING:
            return self._string()
        if vtype == ARRAY:
            etype, n = self._unpack("<IQ")
            if etype == STRING:
                return [self._string() for _ in range(n)]
            arr = np.frombuffer(self.data, dtype=_NUMPY[etype], count=n, offset=self.pos)
            self.pos += arr.nbytes
            return arr.tolist()
        return self._unpack(_SCALAR[vtype])[0]

    def tensor(self, name):
        shape, ttype, off = self.tensors[name]
        start = self.data_start + off
        return self.data[start:start + tensor_nbytes(ttype, shape)]

    def tensor_f32(self, name):
        shape, ttype, _ = self.tensors[name]
        raw = self.tensor(name)
        if ttype == "F32":
            return raw.view(np.float32).reshape(shape)
        if ttype == "F16":
            return raw.view(np.float16).astype(np.float32).reshape(shape)
        if ttype == "BF16":
            return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(shape)
        return dequantize_q8_0(raw, int(np.prod(shape))).reshape(shape)
