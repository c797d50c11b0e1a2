"""Read ``hs_{i}.safetensors`` files without safetensors' loader: header from the bytes, tensors with numpy.

Why not ``safetensors.safe_open``: the header pass must tell *why* a file is unusable
(a truncated copy, a header that points past the end) in one line per file, and touch only
the first kilobytes; the value pass must read each file once, sequentially, into one
reused buffer, so a worker's memory does not grow with the number of files. The format
is small enough to parse here: 8 bytes little-endian header length, a JSON header
``{name: {dtype, shape, data_offsets: [begin, end]}}`` (offsets relative to the end of
the header), then the tensors' bytes back to back.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from math import prod

import numpy as np

#: safetensors dtype names -> (itemsize, how this reader decodes them).
ITEMSIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
            "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
#: Names a contract writes (torch's spelling) -> safetensors' spelling.
DTYPE_NAMES = {"bfloat16": "BF16", "float16": "F16", "float32": "F32", "float8_e4m3fn": "F8_E4M3",
               "float8_e5m2": "F8_E5M2"}
_NUMPY = {"U8": np.uint8, "I8": np.int8, "I16": np.int16, "U16": np.uint16, "I32": np.int32, "U32": np.uint32,
          "I64": np.int64, "U64": np.uint64, "F16": np.float16, "F32": np.float32, "F64": np.float64, "BOOL": np.bool_}
#: A header larger than this is not a hidden-states file (safetensors' own limit is 100 MB).
MAX_HEADER = 100_000_000
#: The first read of a file: the header and, as safetensors writes int64 tensors first, token_ids
#: (a 335-token row: 2.7 KB); a longer row takes a second read.
FIRST_READ = 8192


class HeaderError(ValueError):
    """A file whose header cannot be trusted; the message says what is wrong, for the verdict."""


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int  # absolute byte offsets in the file
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin


@dataclass
class Header:
    """A parsed header: tensors by name, the file's size, and the bytes already read from its start."""

    tensors: dict[str, TensorInfo]
    file_size: int
    head: bytes  # the file's first bytes (FIRST_READ of them, or all of a smaller file)

    def read(self, fd: int, name: str) -> bytes:
        """A tensor's bytes: from the first read when they lie inside it, else one pread."""
        t = self.tensors[name]
        if t.end <= len(self.head):
            return self.head[t.begin:t.end]
        data = os.pread(fd, t.nbytes, t.begin)
        if len(data) != t.nbytes:
            raise HeaderError(f"{name}: read {len(data):,} of {t.nbytes:,} bytes (file shrank while being read?)")
        return data


def parse_header(head: bytes, file_size: int) -> Header:
    """Validate a header as safetensors does (length, JSON, dtypes, shapes, contiguous in-file ranges)."""
    if file_size < 8 or len(head) < 8:
        raise HeaderError(f"file of {file_size:,} bytes has no header (an empty or cut file)")
    (n,) = struct.unpack("<Q", head[:8])
    if n > MAX_HEADER:
        raise HeaderError(f"header length {n:,} bytes is not plausible (not a safetensors file?)")
    if 8 + n > file_size:
        raise HeaderError(f"header of {n:,} bytes runs past the end of the {file_size:,}-byte file (truncated copy)")
    raw = head[8:8 + n] if 8 + n <= len(head) else None
    if raw is None:
        raise HeaderError("header larger than the first read")  # caller re-reads with a bigger window
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise HeaderError(f"header is not JSON ({type(exc).__name__}: {str(exc)[:80]})") from None
    if not isinstance(doc, dict):
        raise HeaderError("header is not a JSON object")
    data_start = 8 + n
    tensors: dict[str, TensorInfo] = {}
    for name, spec in doc.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = spec["dtype"], tuple(spec["shape"]), spec["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise HeaderError(f"tensor {name!r}: entry lacks dtype, shape or data_offsets") from None
        if dtype not in ITEMSIZE:
            raise HeaderError(f"tensor {name!r}: unknown dtype {dtype!r}")
        if (not all(isinstance(d, int) and d >= 0 for d in shape)
                or not (isinstance(begin, int) and isinstance(end, int))):
            raise HeaderError(f"tensor {name!r}: shape or offsets are not non-negative integers")
        if end < begin or end - begin != prod(shape) * ITEMSIZE[dtype]:
            raise HeaderError(f"tensor {name!r}: byte range [{begin}, {end}) does not hold {dtype} {list(shape)}")
        tensors[name] = TensorInfo(name, dtype, shape, data_start + begin, data_start + end)
    spans = sorted((t.begin, t.end, t.name) for t in tensors.values())
    at = data_start
    for begin, end, name in spans:
        if begin != at:
            raise HeaderError(f"tensor {name!r} starts at byte {begin:,}, expected {at:,} (gap or overlap)")
        at = end
    for begin, end, name in spans:
        if end > file_size:
            raise HeaderError(f"tensor {name!r} ends at byte {end:,}, past the end of the {file_size:,}-byte file "
                              f"(truncated copy: {end - file_size:,} bytes missing)")
    if at != file_size:
        raise HeaderError(f"{file_size - at:,} bytes after the last tensor (file size {file_size:,}, "
                          f"data ends at {at:,})")
    return Header(tensors, file_size, head)


def open_header(path: str) -> tuple[int, Header]:
    """Open a file and parse its header from one read of its first bytes; the caller closes the fd."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        head = os.pread(fd, FIRST_READ, 0)
        try:
            return fd, parse_header(head, size)
        except HeaderError as exc:
            if str(exc) != "header larger than the first read":
                raise
            (n,) = struct.unpack("<Q", head[:8])
            return fd, parse_header(os.pread(fd, 8 + n, 0), size)
    except BaseException:
        os.close(fd)
        raise


def int_tensor(data: bytes, dtype: str) -> np.ndarray:
    return np.frombuffer(data, dtype=_NUMPY[dtype])


# --- float decoding ---------------------------------------------------------------------------------


def _fp8_table(exp_bits: int, man_bits: int, bias: int, e4m3fn: bool) -> np.ndarray:
    """float32 value of every byte of an 8-bit float format (NaN codes included)."""
    codes = np.arange(256, dtype=np.int64)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exp = (codes >> man_bits) & ((1 << exp_bits) - 1)
    man = codes & ((1 << man_bits) - 1)
    normal = (1.0 + man / (1 << man_bits)) * np.exp2(exp.astype(np.float64) - bias)
    sub = (man / (1 << man_bits)) * np.exp2(1.0 - bias)
    out = sign * np.where(exp == 0, sub, normal)
    if e4m3fn:  # no infinities; S.1111.111 is NaN
        out[(codes & 0x7F) == 0x7F] = np.nan
    else:  # e5m2: IEEE-like
        top = exp == (1 << exp_bits) - 1
        out[top & (man == 0)] = sign[top & (man == 0)] * np.inf
        out[top & (man != 0)] = np.nan
    return out.astype(np.float32)


FP8_E4M3 = _fp8_table(4, 3, 7, True)
FP8_E5M2 = _fp8_table(5, 2, 15, False)


class Decoder:
    """Decodes a float tensor's bytes into a reused float32 buffer (no allocation per file once warm)."""

    def __init__(self) -> None:
        self._f32 = np.empty(0, dtype=np.float32)

    def buffer(self, n: int) -> np.ndarray:
        if len(self._f32) < n:
            self._f32 = np.empty(max(n, int(len(self._f32) * 1.5)), dtype=np.float32)
        return self._f32[:n]

    def decode(self, raw: np.ndarray | bytes | memoryview, dtype: str, count: int) -> np.ndarray:
        out = self.buffer(count)
        if dtype == "BF16":
            np.left_shift(np.frombuffer(raw, dtype=np.uint16, count=count), 16, out=out.view(np.uint32),
                          dtype=np.uint32)
        elif dtype == "F8_E4M3":
            np.take(FP8_E4M3, np.frombuffer(raw, dtype=np.uint8, count=count), out=out)
        elif dtype == "F8_E5M2":
            np.take(FP8_E5M2, np.frombuffer(raw, dtype=np.uint8, count=count), out=out)
        elif dtype == "F16":
            out[:] = np.frombuffer(raw, dtype=np.float16, count=count)
        elif dtype == "F32":
            out[:] = np.frombuffer(raw, dtype=np.float32, count=count)
        else:
            raise HeaderError(f"dtype {dtype} is not a float format")
        return out


class SequentialReader:
    """Reads a byte range of a file into one reused buffer, in large sequential chunks."""

    def __init__(self) -> None:
        self._buf = bytearray(0)

    def read(self, fd: int, begin: int, nbytes: int) -> memoryview:
        if len(self._buf) < nbytes:
            self._buf = bytearray(max(nbytes, int(len(self._buf) * 1.5)))
        view = memoryview(self._buf)[:nbytes]
        got = 0
        os.lseek(fd, begin, os.SEEK_SET)
        while got < nbytes:
            n = os.readv(fd, [view[got:]])
            if n == 0:
                raise HeaderError(f"read {got:,} of {nbytes:,} tensor bytes (file shrank while being read?)")
            got += n
        return view
