"""Read a ``save_to_disk`` directory read-only, plan row shards, and hand shards out as flat numpy.

Nothing here writes: Arrow files are memory-mapped, so pages are file-backed and a
worker's own memory is bounded by one shard, not by the dataset.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pyarrow as pa

from .errors import UsageProblem

_DATA_SUFFIXES = {".parquet", ".jsonl", ".json", ".csv", ".arrow", ".txt", ".pt"}


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


def plan_shards(num_rows: int, shard_size: int, row_lengths: np.ndarray | None = None,
                max_tokens: int | None = None) -> list[Shard]:
    """Contiguous shards of at most ``shard_size`` rows and, given row lengths, ``max_tokens`` tokens.

    The token cap keeps a worker's memory bounded by tokens, not rows: 20,000 rows
    at a 4,096 cap would otherwise be 82 M tokens in one shard. A single row longer
    than the cap still gets a shard of its own. The loop runs once per shard.
    """
    if row_lengths is None or max_tokens is None:
        return [Shard(i, start, min(start + shard_size, num_rows))
                for i, start in enumerate(range(0, num_rows, shard_size))]
    cum = np.concatenate(([0], np.cumsum(row_lengths, dtype=np.int64)))
    shards: list[Shard] = []
    start = 0
    while start < num_rows:
        by_tokens = int(np.searchsorted(cum, cum[start] + max_tokens, side="right")) - 1
        stop = max(start + 1, min(start + shard_size, by_tokens, num_rows))
        shards.append(Shard(len(shards), start, stop))
        start = stop
    return shards


def parse_split(text: str) -> tuple[int, int]:
    """``"K/N"`` -> (K, N) with 1 <= K <= N; anything else is a usage error."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise UsageProblem(f"--split {text}: expected K/N with 1 <= K <= N (run K of N machines, e.g. --split 2/3); "
                           "to pick a DatasetDict split use --dataset-split NAME")
    return int(m.group(1)), int(m.group(2))


def shard_groups(shards: list[Shard], row_lengths: np.ndarray | None, n: int) -> list[list[Shard]]:
    """``n`` disjoint runs of consecutive shards with about equal tokens (rows without lengths).

    Deterministic from the plan alone, so N machines that plan the same dataset with
    the same contract agree on who checks what without talking to each other; each
    shard, hence each row, lands in exactly one group. Consecutive shards keep a
    machine on one region of the Arrow files (sequential reads, warm page cache).
    """
    if not shards:
        return [[] for _ in range(n)]
    if row_lengths is not None and len(row_lengths):
        cum = np.concatenate(([0], np.cumsum(row_lengths, dtype=np.int64)))
        weight_end = cum[[s.stop for s in shards]].astype(np.float64)
    else:
        weight_end = np.array([s.stop for s in shards], dtype=np.float64)
    total = weight_end[-1] or 1.0
    # Group of a shard: which n-th of the total its midpoint falls in.
    weight_start = np.concatenate(([0.0], weight_end[:-1]))
    group = np.minimum(((weight_start + weight_end) / 2 * n // total).astype(np.int64), n - 1)
    return [[s for s, g in zip(shards, group) if g == k] for k in range(n)]


def plan_identity(shards: list[Shard], dataset: "SavedDataset") -> str:
    """What the parts of a split run must share: the save's fingerprint, file names and sizes, rows, shard plan.

    ``datasets`` writes a fresh ``_fingerprint`` into state.json on every save, and
    copies keep it; mtimes are left out on purpose, since copies on several machines
    differ there.
    """
    try:
        saved = json.loads((dataset.path / "state.json").read_text("utf-8")).get("_fingerprint", "")
    except (OSError, ValueError, AttributeError):
        saved = ""
    h = hashlib.sha256(f"{saved}|{dataset.num_rows}".encode())
    for f in dataset.files:
        h.update(f"|{f.name}:{f.stat().st_size}".encode())
    h.update(np.array([(s.start, s.stop) for s in shards], dtype=np.int64).tobytes())
    return h.hexdigest()[:16]


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


@dataclass
class ShardArrays:
    """The columns of one shard; a column the dataset lacks is None."""

    shard: Shard
    input_ids: ListColumn | None
    loss_mask: ListColumn | None
    seq_len: np.ndarray | None  # int64 per row (nulls read as 0)
    seq_len_nulls: np.ndarray | None  # bool per row, None when no nulls
    cache: dict = field(default_factory=dict)  # derived per-shard facts, computed once


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
    parts = [_chunk_column(c) for c in chunked.chunks] or [_chunk_column(pa.array([], chunked.type))]
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


class SavedDataset:
    """A dataset directory written by ``datasets.Dataset.save_to_disk``, opened read-only."""

    def __init__(self, path: Path, files: list[Path], split: str | None) -> None:
        self.path = path
        self.files = files
        self.split = split

    @cached_property
    def _maps(self) -> list[mmap.mmap | None]:
        """Our own read-only maps of the Arrow files, so their pages can be handed back (``release_pages``)."""
        maps: list[mmap.mmap | None] = []
        for f in self.files:
            try:
                with open(f, "rb") as fh:
                    maps.append(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if f.stat().st_size else None)
            except (OSError, ValueError) as exc:
                raise UsageProblem(f"{f}: cannot be read ({exc}); check the file's permissions") from None
        return maps

    @cached_property
    def _tables(self) -> list[pa.Table]:
        tables = []
        for f, mm in zip(self.files, self._maps):
            try:
                source = pa.py_buffer(mm if mm is not None else b"")
                try:
                    tables.append(pa.ipc.open_stream(source).read_all())
                except pa.ArrowInvalid:
                    tables.append(pa.ipc.open_file(source).read_all())
            except (pa.ArrowInvalid, OSError) as exc:
                raise UsageProblem(f"{f}: not a readable Arrow file ({exc}); re-save the dataset with "
                                   "datasets.save_to_disk") from None
            if mm is not None and hasattr(mmap, "MADV_DONTNEED"):
                # Reading a stream's batches touches every page of the file (pyarrow 26): hand them
                # back at once, or each worker's RSS peaks at the whole dataset before its first shard.
                mm.madvise(mmap.MADV_DONTNEED)
        return tables

    def release_pages(self) -> None:
        """Unmap the pages read so far from this process (they stay in the page cache).

        File pages a worker has touched count in its RSS until the kernel needs them
        back; without this a worker that checked every shard shows the whole dataset
        as resident. With it, RSS stays at one shard's pages plus the worker's own
        memory. Data already read stays valid: the next access re-faults the page.
        """
        if "_maps" not in self.__dict__ or not hasattr(mmap, "MADV_DONTNEED"):
            return
        for mm in self._maps:
            if mm is not None:
                mm.madvise(mmap.MADV_DONTNEED)

    @cached_property
    def table(self) -> pa.Table:
        """All files as one zero-copy table (chunks point into the memory maps)."""
        tables = self._tables
        if not tables:
            return self._empty_table()
        first = tables[0].schema
        for f, t in zip(self.files[1:], tables[1:]):
            if not t.schema.equals(first):
                raise UsageProblem(f"{f}: its schema differs from {self.files[0].name}; "
                                   "the directory mixes two datasets")
        return pa.concat_tables(tables)

    def _empty_table(self) -> pa.Table:
        """A saved dataset of 0 rows has no Arrow file; its schema is in dataset_info.json."""
        info = self.path / "dataset_info.json"
        try:
            from datasets import Features

            features = json.loads(info.read_text("utf-8"))["features"]
            return Features.from_dict(features).arrow_schema.empty_table()
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageProblem(f"{self.path}: no data files and no readable features in dataset_info.json ({exc}); "
                               "re-save the dataset with datasets.save_to_disk") from None

    @property
    def schema(self) -> pa.Schema:
        return self.table.schema

    @property
    def num_rows(self) -> int:
        return self.table.num_rows

    def row_lengths(self, column: str = "input_ids") -> np.ndarray | None:
        """Every row's list length, from the offsets buffers only (no values are read)."""
        if column not in self.schema.names:
            return None
        t = self.schema.field(column).type
        if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
            return None
        parts = [np.diff(_offsets(chunk)) for chunk in self.table.column(column).chunks]
        return np.concatenate(parts).astype(np.int64, copy=False) if parts else np.zeros(0, np.int64)

    def column_types(self) -> dict[str, str]:
        return {f.name: arrow_type_name(f.type) for f in self.schema}

    def fingerprint(self) -> str:
        """Cheap identity of the data: file names, sizes and mtimes (no data read)."""
        h = hashlib.sha256()
        for f in self.files:
            st = f.stat()
            h.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns}".encode())
        return h.hexdigest()[:16]

    def take_rows(self, rows: np.ndarray) -> pa.Table:
        """The given rows (sorted global indices) as a small table, reading only their record batches.

        ``Table.take`` concatenates each column's chunks first, i.e. copies the whole
        column into anonymous memory (~460 MB for 300 K rows): never use it on the dataset.
        """
        rows = np.asarray(rows, dtype=np.int64)
        parts, start = [], 0
        for batch in self.table.to_batches():
            stop = start + batch.num_rows
            lo, hi = np.searchsorted(rows, [start, stop])
            if hi > lo:
                parts.append(batch.take(pa.array(rows[lo:hi] - start)))
            start = stop
        return pa.Table.from_batches(parts, schema=self.table.schema)

    def read(self, shard: Shard) -> ShardArrays:
        """The shard's columns as flat numpy arrays (values + offsets)."""
        part = self.table.slice(shard.start, shard.rows)
        names = set(part.column_names)

        def list_col(name: str) -> ListColumn | None:
            if name not in names:
                return None
            try:
                return _list_column(part.column(name))
            except TypeError:
                return None

        seq_len = nulls = None
        if "seq_len" in names:
            col = part.column("seq_len")
            if pa.types.is_integer(col.type):
                arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
                if arr.null_count:
                    nulls = to_numpy(arr.is_null())
                    arr = arr.fill_null(0)
                seq_len = to_numpy(arr).astype(np.int64, copy=False)
        return ShardArrays(shard, list_col("input_ids"), list_col("loss_mask"), seq_len, nulls)


def _arrow_files(folder: Path) -> list[Path]:
    state = folder / "state.json"
    try:
        doc = json.loads(state.read_text("utf-8"))
        names = [entry["filename"] for entry in doc["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageProblem(f"{state}: unreadable ({exc}); the directory was not written by "
                           "datasets.save_to_disk") from None
    files = [folder / n for n in names]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise UsageProblem(f"{folder}: state.json lists {', '.join(missing)} but the file is missing; "
                           "copy the whole dataset directory")
    return files


def open_dataset(path: str | Path, split: str | None = None) -> SavedDataset:
    """Open a saved Dataset (or one split of a saved DatasetDict) with clear errors for anything else."""
    p = Path(path).expanduser()
    if not p.exists():
        raise UsageProblem(f"--dataset-path {path}: no such file or directory; "
                           "pass the folder written by datasets.save_to_disk")
    if p.is_file():
        kind = p.suffix.lower() if p.suffix.lower() in _DATA_SUFFIXES else "a file"
        raise UsageProblem(f"--dataset-path {path}: is {kind} file, not a folder written by datasets.save_to_disk; "
                           "load it with datasets and call .save_to_disk(DIR), then pass DIR")
    dict_file = p / "dataset_dict.json"
    if dict_file.is_file():
        try:
            splits = list(json.loads(dict_file.read_text("utf-8"))["splits"])
        except (OSError, ValueError, KeyError, TypeError):
            splits = sorted(d.name for d in p.iterdir() if (d / "state.json").is_file())
        if split is None:
            raise UsageProblem(f"--dataset-path {path}: is a DatasetDict with splits {', '.join(splits)}; "
                               "choose one with --dataset-split NAME")
        if split not in splits:
            raise UsageProblem(f"--dataset-split {split}: not in {path}; its splits are {', '.join(splits)}")
        return SavedDataset(p / split, _arrow_files(p / split), split)
    if split is not None:
        raise UsageProblem(f"--dataset-split {split}: {path} is a single Dataset, not a DatasetDict; "
                           "drop --dataset-split")
    if not (p / "state.json").is_file():
        hint = ""
        if any(f.suffix in (".parquet", ".jsonl", ".json") for f in p.iterdir() if f.is_file()):
            hint = " (it holds parquet/json files: load them with datasets and call .save_to_disk(DIR))"
        raise UsageProblem(f"--dataset-path {path}: not a saved dataset, no state.json{hint}; "
                           "pass the folder written by datasets.save_to_disk")
    return SavedDataset(p, _arrow_files(p), None)
