"""A shard's row range and its list columns as flat numpy, read from the Arrow buffers.

Split from ``dataset/reader.py`` so that the layouts (``dataset/layouts.py``, ``dataset/layout_rows.py``), which turn
a trainer's columns into the arrays every check reads (``dataset.layout_rows.ShardArrays``), and the
dataset, which opens the files and asks the layout for a shard, can both use them. Integer
values without nulls are zero-copy views of the memory-mapped Arrow buffers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa


@dataclass(frozen=True)
class Shard:
    """A half-open row range [start, stop); the unit pytest parametrizes and xdist spreads."""

    index: int
    start: int
    stop: int

    @property
    def id(self) -> str:
        return f"shard-{self.index:05d}[{self.start}:{self.stop}]"

    @property
    def rows(self) -> int:
        return self.stop - self.start


@dataclass
class ListColumn:
    """One list column of a shard, flattened: ``values[offsets[i]:offsets[i+1]]`` is row i."""

    values: np.ndarray
    offsets: np.ndarray  # int64, len rows + 1, offsets[0] == 0
    null_rows: np.ndarray | None  # bool per row, None when the column has no null rows
    null_elements: np.ndarray | None  # bool per value, None when no value is null

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)


def arrow_type_name(t: pa.DataType) -> str:
    """A short, stable spelling of an Arrow type, as contracts write it ("list<int32>")."""
    if pa.types.is_large_list(t):
        return f"large_list<{arrow_type_name(t.value_type)}>"
    if pa.types.is_list(t):
        return f"list<{arrow_type_name(t.value_type)}>"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    return str(t)


_INT_DTYPES = {pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64,
               pa.uint8(): np.uint8, pa.uint16(): np.uint16, pa.uint32(): np.uint32, pa.uint64(): np.uint64}


def to_numpy(arr: pa.Array) -> np.ndarray:
    """A primitive Arrow array as numpy: integers without nulls zero-copy, booleans unpacked.

    Straight from the buffers because ``pa.Array.to_numpy`` imports pandas on first
    use, about a second per process (controller and every xdist worker) of the
    suite's fixed cost. Arrays with nulls take pyarrow's path (nulls read as 0).
    """
    n = len(arr)
    if arr.null_count:
        return arr.fill_null(False if pa.types.is_boolean(arr.type) else 0).to_numpy(zero_copy_only=False)
    buf = arr.buffers()[1] if n else None
    if pa.types.is_boolean(arr.type):
        if buf is None:
            return np.zeros(0, dtype=np.bool_)
        bits = np.frombuffer(buf, dtype=np.uint8)
        return np.unpackbits(bits, count=arr.offset + n, bitorder="little")[arr.offset:].view(np.bool_)
    dtype = _INT_DTYPES.get(arr.type)
    if dtype is None:
        return arr.to_numpy(zero_copy_only=False)
    if buf is None:
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(buf, dtype=dtype, count=n, offset=arr.offset * np.dtype(dtype).itemsize)


def _offsets(arr: pa.Array) -> np.ndarray:
    """The n+1 offsets of a list array (its own slice of the offsets buffer)."""
    dtype = np.int64 if pa.types.is_large_list(arr.type) else np.int32
    if arr.buffers()[1] is None:
        return np.zeros(len(arr) + 1, dtype=dtype)
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr) + 1,
                         offset=arr.offset * np.dtype(dtype).itemsize)


def _chunk_column(arr: pa.Array) -> ListColumn:
    """One Arrow list chunk as flat numpy; integer values without nulls are zero-copy views."""
    offsets = _offsets(arr).astype(np.int64, copy=False)
    first, last = int(offsets[0]), int(offsets[-1])
    child = arr.values.slice(first, last - first)
    null_elements = None
    if child.null_count:
        null_elements = to_numpy(child.is_null())
        child = child.fill_null(False if pa.types.is_boolean(child.type) else 0)
    values = to_numpy(child)
    null_rows = to_numpy(arr.is_null()) if arr.null_count else None
    return ListColumn(values, offsets - first, null_rows, null_elements)


def _list_column(chunked: pa.ChunkedArray) -> ListColumn:
    """A shard's list column; a shard spanning Arrow files is joined with one numpy copy.

    (``combine_chunks`` first would copy the values twice: Arrow, then numpy.)
    """
    if not (pa.types.is_list(chunked.type) or pa.types.is_large_list(chunked.type)):
        raise TypeError(f"expected a list column, got {chunked.type}")
    return join_columns([_chunk_column(c) for c in chunked.chunks] or [_chunk_column(pa.array([], chunked.type))])


def join_columns(parts: list[ListColumn]) -> ListColumn:
    """Consecutive row ranges of one column as one (a shard spanning Arrow files): one numpy copy."""
    if len(parts) == 1:
        return parts[0]
    shifts = np.cumsum([0] + [len(p.values) for p in parts[:-1]])
    offsets = np.concatenate([parts[0].offsets[:1]] + [p.offsets[1:] + s for p, s in zip(parts, shifts)])
    return ListColumn(np.concatenate([p.values for p in parts]), offsets,
                      _join_flags([p.null_rows for p in parts], [len(p.offsets) - 1 for p in parts]),
                      _join_flags([p.null_elements for p in parts], [len(p.values) for p in parts]))


def _join_flags(flags: list[np.ndarray | None], sizes: list[int]) -> np.ndarray | None:
    """Concatenate optional per-chunk flags; None (all False) when no chunk has any."""
    if all(f is None for f in flags):
        return None
    return np.concatenate([f if f is not None else np.zeros(n, dtype=bool) for f, n in zip(flags, sizes)])



def read_seq_len(part: pa.Table, name: str | None = "seq_len") -> tuple[np.ndarray | None, np.ndarray | None]:
    """The rows' ``seq_len`` as int64 (nulls read as 0) and its null flags (None: no nulls); (None, None)
    without an integer column of that name."""
    if name is None or name not in part.column_names:
        return None, None
    col = part.column(name)
    if not pa.types.is_integer(col.type):
        return None, None
    arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    nulls = None
    if arr.null_count:
        nulls = to_numpy(arr.is_null())
        arr = arr.fill_null(0)
    return to_numpy(arr).astype(np.int64, copy=False), nulls
