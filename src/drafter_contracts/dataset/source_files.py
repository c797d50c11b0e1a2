"""Parquet and JSON Lines files read in place: found, and converted once into Arrow IPC streams in the cache.

``Dataset.to_parquet`` / ``to_json`` and Hub repositories (``data/train-00000-of-00001.parquet``)
write a dataset as plain files. The contract run reads memory-mapped Arrow buffers (a worker holds
one shard, whatever the dataset's size), which Parquet's compressed pages and JSON text cannot give.
So each source file is converted once, batch by batch (memory bounded by one record batch), into
one Arrow IPC stream in the runtime cache (``paths.cache_root()/sources``), keyed by the source
files' names, sizes and modification times; ``paths.cached_build``'s lock makes xdist workers wait
for the one process that converts. The user's folder is never written. A later run over the same
unchanged files opens the cached streams; a changed file gets a fresh entry.

One stream per source file, in the same order: the dataset names the source file (never the
cached stream) in every message, and global row numbers count across the files in that order.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from ..errors import UsageProblem
from ..paths import cache_root, cached_build

#: Bump when what a converted stream holds changes (a stale cache entry is then never read).
CACHE_VERSION = 1
#: What a folder may hold, by suffix; a single file may also be ``.json`` (read as JSON Lines).
KINDS = {".parquet": "Parquet", ".jsonl": "JSON Lines"}
#: How deep below the folder files are looked for (``data/train-00000-of-00001.parquet`` is 2).
MAX_DEPTH = 3
#: Rows per record batch of a converted stream (datasets' writer uses the same): the unit a damaged batch loses.
BATCH_ROWS = 1000
_HUB_NAME = re.compile(r"(?P<split>[A-Za-z0-9_.]+?)-\d{5}-of-\d{5}")


def kind_of(path: Path, single: bool = False) -> str | None:
    """"Parquet" / "JSON Lines" for a file this module reads (``.json`` too when passed alone), else None."""
    suffix = path.suffix.lower()
    if single and suffix == ".json":
        return "JSON Lines"
    return KINDS.get(suffix)


def find(folder: Path) -> list[Path]:
    """The Parquet and JSON Lines files under ``folder`` (hidden folders skipped), sorted by relative path."""
    out: list[Path] = []
    for root, dirs, files in os.walk(folder):
        depth = len(Path(root).relative_to(folder).parts)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and depth < MAX_DEPTH - 1)
        out += [Path(root) / f for f in files if not f.startswith(".") and kind_of(Path(f)) is not None]
    return sorted(out, key=lambda p: p.relative_to(folder).as_posix())


def split_of(path: Path, folder: Path) -> str | None:
    """The split a Hub-style file name says (``train`` of ``train-00000-of-00002.parquet``), else the folder
    the file is in below ``folder`` (``train/part-0.jsonl``), else None."""
    m = _HUB_NAME.match(path.name)
    if m:
        return m.group("split")
    parts = path.relative_to(folder).parts
    return parts[-2] if len(parts) > 1 else None


def choose(folder: Path, files: list[Path], split: str | None, shown: str) -> list[Path]:
    """The files of one kind and, where Hub-style names hold several splits, of the split asked for."""
    kinds = sorted({kind_of(f) for f in files})
    if len(kinds) > 1:
        first = [next(f for f in files if kind_of(f) == k).relative_to(folder).as_posix() for k in kinds]
        raise UsageProblem(f"--dataset-path {shown}: not a saved dataset (no state.json) and it holds both "
                           f"{' and '.join(kinds)} files ({', '.join(first)}); pass a folder of one kind")
    splits = sorted({s for s in (split_of(f, folder) for f in files) if s is not None})
    if split is None:
        if len(splits) > 1:
            raise UsageProblem(f"--dataset-path {shown}: holds the splits {', '.join(splits)} (by file or folder "
                               "names); choose one with --dataset-split NAME")
        return files
    if not splits:
        raise UsageProblem(f"--dataset-split {split}: {shown} holds one dataset of {kinds[0]} files, not splits "
                           "named by their files or folders; drop --dataset-split")
    if split not in splits:
        raise UsageProblem(f"--dataset-split {split}: not in {shown}; its splits are {', '.join(splits)}")
    return [f for f in files if split_of(f, folder) == split]


def cached_streams(sources: list[Path]) -> list[Path]:
    """One Arrow IPC stream per source file, converted on first use (under a lock), in the cache."""
    h = hashlib.sha256(f"v{CACHE_VERSION}".encode())
    for f in sources:
        try:
            st = f.stat()
        except OSError as exc:
            raise UsageProblem(f"{f}: cannot be read ({exc.strerror or exc}); check the file's permissions") from None
        h.update(f"|{f.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode())
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", sources[0].parent.name or "data")[:40]
    target = cache_root() / "sources" / f"{stem}-{h.hexdigest()[:24]}"
    cached_build(target, "done.json", lambda out: _convert_all(sources, out))
    return [target / f"{i:05d}.arrow" for i in range(len(sources))]


def _convert_all(sources: list[Path], out: Path) -> None:
    out.mkdir(parents=True)
    for i, src in enumerate(sources):
        convert(src, out / f"{i:05d}.arrow")
    (out / "done.json").write_text(json.dumps({"sources": [str(s) for s in sources]}), "utf-8")


def convert(src: Path, dest: Path) -> None:
    """``src`` (Parquet or JSON Lines) as one Arrow IPC stream at ``dest``, a record batch at a time."""
    import pyarrow as pa

    kind = kind_of(src, single=True) or "Parquet"
    try:
        schema, batches = _parquet(src) if kind == "Parquet" else _json_lines(src)
        with pa.OSFile(str(dest), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
    except (pa.ArrowException, OSError, ValueError) as exc:
        text = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise UsageProblem(f"{src}: not a readable {kind} file ({text}); write it with Dataset.to_parquet / "
                           "Dataset.to_json, or pass a folder written by datasets.save_to_disk") from None


def _parquet(src: Path):
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(str(src))
    return pf.schema_arrow, pf.iter_batches(batch_size=BATCH_ROWS)


def _json_lines(src: Path):
    import pyarrow.json as pj

    opener = getattr(pj, "open_json", None)
    if opener is None:  # pyarrow without the streaming reader: the whole file, then its batches
        table = pj.read_json(str(src))
        return table.schema, iter(table.to_batches(max_chunksize=BATCH_ROWS))
    reader = opener(str(src), read_options=pj.ReadOptions(block_size=16 << 20))
    return reader.schema, _rebatch(reader)


def _rebatch(reader):
    """The reader's batches cut to at most ``BATCH_ROWS`` rows each."""
    for batch in reader:
        for start in range(0, batch.num_rows, BATCH_ROWS):
            yield batch.slice(start, BATCH_ROWS)
