"""Open a dataset read-only, plan row shards, and hand shards out as flat numpy.

A dataset is a ``save_to_disk`` folder (or one split of a DatasetDict), or Parquet / JSON Lines
files (a folder of them, Hub-style names included, or one file), which ``dataset/source_files.py`` converts
once into Arrow streams in the cache. Whatever trainer wrote the columns, a shard comes out as the
same arrays: the layout (``dataset/layouts.py``, ``dataset/layout_rows.py``) is decided once from the columns and
first rows. Nothing here writes: Arrow files are memory-mapped, so pages are file-backed and a
worker's own memory is bounded by one shard, not by the dataset.
"""

from __future__ import annotations

import hashlib
import json
import mmap
from dataclasses import replace
from functools import cached_property
from pathlib import Path

import numpy as np
import pyarrow as pa

from . import source_files
from ..errors import UsageProblem
from .columns import ListColumn, Shard, _list_column, _offsets, arrow_type_name, read_seq_len
from .layout_rows import ShardArrays, read_part, resolve
from .layouts import Layout, from_schema, unreadable

_DATA_SUFFIXES = {".parquet", ".jsonl", ".json", ".csv", ".arrow", ".txt", ".pt"}
#: Rows the layout's undecided parts (labels' shift, the padding side) are read off.
LAYOUT_SAMPLE_ROWS = 1000


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


class SavedDataset:
    """A dataset opened read-only: a ``save_to_disk`` folder, or Parquet / JSON Lines files.

    ``files`` are the user's files (what messages, fingerprints and the mid-run change check name);
    ``arrow_files`` what is memory-mapped: the same files, or each source's cached Arrow stream.
    ``path`` is the folder the dataset lives in (what is looked for beside it: the tokenizer, token_freq.pt,
    hidden states, the draft vocabulary); ``given`` what the user named (one file passed directly).
    """

    def __init__(self, path: Path, files: list[Path], split: str | None, arrow_files: list[Path] | None = None,
                 source: str = "save_to_disk", given: Path | None = None) -> None:
        self.path = path
        self.given = path if given is None else given
        self.files = files
        self.split = split
        self.arrow_files = files if arrow_files is None else arrow_files
        #: "save_to_disk", "Parquet" or "JSON Lines": a save_to_disk folder's metadata is checked too
        #: (checks/integrity.py).
        self.source = source

    @cached_property
    def _maps(self) -> list[mmap.mmap | None]:
        """Our own read-only maps of the Arrow files, so their pages can be handed back (``release_pages``)."""
        maps: list[mmap.mmap | None] = []
        for f in self.arrow_files:
            try:
                with open(f, "rb") as fh:
                    maps.append(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if f.stat().st_size else None)
            except (OSError, ValueError) as exc:
                raise UsageProblem(f"{f}: cannot be read ({exc}); check the file's permissions") from None
        return maps

    @cached_property
    def _tables(self) -> list[pa.Table]:
        tables = []
        for f, mm in zip(self.files, self._maps):  # one Arrow file per user's file, in order
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

    @cached_property
    def detected(self) -> Layout:
        """The layout the columns and first rows say (``problem`` set when no run can read it)."""
        layout = from_schema(self.schema)
        if layout.problem is None and (layout.labels or layout.padding):
            layout = resolve(layout, self._first_rows(LAYOUT_SAMPLE_ROWS))
            if layout.problem is not None:
                layout = replace(layout, problem=unreadable(layout.problem, self.schema))
        return layout

    @property
    def layout(self) -> Layout:
        """The layout a run reads; a layout the tool cannot read is a usage error (one line, before any work)."""
        problem = self.detected.problem
        if problem is not None:
            raise UsageProblem(f"{self.given}: cannot read its layout: {problem}")
        return self.detected

    def _first_rows(self, rows: int) -> pa.Table:
        """The first ``rows`` rows of record batches that pass Arrow's full validation (the integrity scan
        has not run yet: a damaged batch is skipped here, and arrow_integrity names it)."""
        batches, n = [], 0
        for batch in self.table.to_batches():
            try:
                batch.validate(full=True)
            except (pa.ArrowException, ValueError):
                continue
            batches.append(batch.slice(0, rows - n))
            n += batches[-1].num_rows
            if n >= rows:
                break
        return pa.Table.from_batches(batches, schema=self.table.schema)

    def row_lengths(self, column: str | None = None) -> np.ndarray | None:
        """Every row's stored list length (padding included: what a shard's read holds), from the offsets
        buffers only (no values are read); a ``[1, L]`` column's inner lists counted."""
        column = column or self.detected.ids
        if column not in self.schema.names:
            return None
        t = self.schema.field(column).type
        if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
            return None
        nested = column in self.detected.nested
        parts = [_nested_lengths(chunk) if nested else np.diff(_offsets(chunk))
                 for chunk in self.table.column(column).chunks]
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
        """The shard's columns as flat numpy arrays (values + offsets), whatever the layout."""
        return self._arrays(self.table.slice(shard.start, shard.rows), shard)

    def read_rows(self, rows: np.ndarray) -> ShardArrays:
        """The given rows (sorted global indices) as one shard's arrays (row i of it: ``rows[i]``)."""
        return self._arrays(self.take_rows(rows), Shard(0, 0, len(rows)))

    def ids(self, start: int, stop: int) -> ListColumn:
        """Rows [start, stop)'s input_ids as the engine reads them (padding cut, unnested)."""
        if self.detected.plain:
            return _list_column(self.table.slice(start, stop - start).column("input_ids"))
        return self.read(Shard(-1, start, stop)).input_ids

    def _arrays(self, part: pa.Table, shard: Shard) -> ShardArrays:
        if not self.detected.plain:
            return read_part(self.detected, part, shard)
        names = set(part.column_names)

        def list_col(name: str) -> ListColumn | None:
            if name not in names:
                return None
            try:
                return _list_column(part.column(name))
            except TypeError:
                return None

        seq_len, nulls = read_seq_len(part)
        return ShardArrays(shard, list_col("input_ids"), list_col("loss_mask"), seq_len, nulls)


def _nested_lengths(chunk: pa.Array) -> np.ndarray:
    """Rows' lengths of one chunk of a ``[1, L]`` column: the inner offsets taken at the outer ones."""
    inner = _offsets(chunk.values).astype(np.int64, copy=False)
    # Clipped: damaged offsets (arrow_integrity names them; their rows are planned as empty) must not index out.
    outer = np.clip(_offsets(chunk).astype(np.int64, copy=False), 0, len(inner) - 1)
    return inner[outer[1:]] - inner[outer[:-1]]


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
    """Open a saved Dataset (or one split of a saved DatasetDict), or Parquet / JSON Lines files (a folder of
    them, or one file), with clear errors for anything else."""
    p = Path(path).expanduser()
    if not p.exists():
        raise UsageProblem(f"--dataset-path {path}: no such file or directory; pass the folder written by "
                           "datasets.save_to_disk, or Parquet / JSON Lines files")
    if p.is_file():
        return _open_file(p, path, split)
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
    if not (p / "state.json").is_file():
        found = source_files.find(p)
        if found:
            return _open_sources(p, source_files.choose(p, found, split, str(path)), split)
        raise UsageProblem(f"--dataset-path {path}: not a saved dataset, no state.json, and no Parquet or JSON Lines "
                           "files; pass the folder written by datasets.save_to_disk, or Parquet / JSON Lines files")
    if split is not None:
        raise UsageProblem(f"--dataset-split {split}: {path} is a single Dataset, not a DatasetDict; "
                           "drop --dataset-split")
    return SavedDataset(p, _arrow_files(p), None)


def _open_file(p: Path, shown: str | Path, split: str | None) -> SavedDataset:
    """One Parquet or JSON Lines file passed directly; any other file is a usage error."""
    if source_files.kind_of(p, single=True) is None:
        kind = p.suffix.lower() if p.suffix.lower() in _DATA_SUFFIXES else "a file"
        raise UsageProblem(f"--dataset-path {shown}: is {kind} file, not a dataset this tool reads; pass the folder "
                           "written by datasets.save_to_disk, or Parquet / JSON Lines files")
    if split is not None:
        raise UsageProblem(f"--dataset-split {split}: {shown} is one file, not a dataset with splits; "
                           "drop --dataset-split")
    return _open_sources(p.parent, [p], None, given=p)


def _open_sources(path: Path, sources: list[Path], split: str | None, given: Path | None = None) -> SavedDataset:
    """Parquet / JSON Lines files, read through their cached Arrow streams (``dataset/source_files.py``)."""
    kind = source_files.kind_of(sources[0], single=True) or "Parquet"
    return SavedDataset(path, sources, split, source_files.cached_streams(sources), kind, given)
