"""Are the dataset's files what they claim to be? Checked before any kernel sees a buffer.

The compiled loops (``kernels/_kernels.c``) and most numpy steps trust a list column's offsets:
that they never decrease and never point past the values. A file whose bytes were
damaged on disk or in a copy breaks that trust, and without this module a bad offset
became a numpy error, a "tool bug", or a read past a buffer. Here every record batch
of every Arrow file goes through Arrow's own full validation (``ValidateFull``:
offsets monotonic and inside the values, buffers and validity bitmaps large enough,
lengths consistent), and a list column that fails is located to its first bad row by
one vectorized pass over its offsets, so the verdict names file, column and row.

The cost is that of reading the offsets, not the tokens: a 3.6 M-token shard of
10,000 rows validates in about 0.05 ms, against ~8 ms for the shard's token pass
(docs/reliability.md has the measurement). So every process (the controller plans
shards from the offsets, each worker gates its shards) scans the whole dataset once.

A defect is a data verdict (``arrow_integrity``, exit 1), never a usage error: the
rows of a damaged record batch are not read by any other contract (their shards
skip, saying why), and everything else is checked as usual. A file that cannot be
opened at all stays a usage error (``dataset/reader.py``). The metadata datasets itself
reads at ``load_from_disk`` (``dataset_info.json`` and the schema's feature
metadata) is checked the way datasets reads it, since a trainer would fail there.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pyarrow as pa

from .declare import Scope, Spec, register
from ..errors import InvalidBuffers
from ..results import CheckResult, Violation

CHECK = "arrow_integrity"


@dataclass(frozen=True)
class Defect:
    """One thing wrong with the files: where, the first row to blame, and the rows it makes unreadable."""

    file: str
    column: str | None
    row: int | None  # first bad row, global index (None: no single row to blame)
    what: str
    rows: tuple[int, int] | None = None  # global rows [start, stop) that no contract may read

    def line(self) -> str:
        where = self.file + (f", column {self.column}" if self.column else "") + (
            f", row {self.row:,}" if self.row is not None else "")
        unread = (f" (rows {self.rows[0]:,}..{self.rows[1] - 1:,} are not read by the other contracts)"
                  if self.rows is not None and self.rows[1] > self.rows[0] else "")
        return f"{where}: {self.what}{unread}"


def first_bad_offset(offsets: np.ndarray, n_values: int) -> tuple[int, str] | None:
    """The first row whose offsets are unusable and why, or None: one vectorized pass over ``offsets``.

    Row i spans ``values[offsets[i]:offsets[i+1]]``: it is bad when it starts before 0,
    ends past ``n_values`` or ends before it starts.
    """
    if len(offsets) == 0:
        return (0, "the list offsets buffer is empty")
    o = offsets.astype(np.int64, copy=False)
    if o[0] < 0 or o[0] > n_values:
        return (0, f"it starts at list offset {int(o[0]):,}, outside the {n_values:,} values of the column")
    past = np.flatnonzero(o[1:] > n_values)
    back = np.flatnonzero(o[1:] < o[:-1])
    first_past = int(past[0]) if len(past) else None
    first_back = int(back[0]) if len(back) else None
    if first_past is None and first_back is None:
        return None
    if first_back is None or (first_past is not None and first_past <= first_back):
        r = first_past
        return (r, f"it ends at list offset {int(o[r + 1]):,}, past the end of the {n_values:,} values "
                   "(an overwritten offset)")
    r = first_back
    return (r, f"it ends at list offset {int(o[r + 1]):,}, before it starts ({int(o[r]):,}): "
               "offsets decrease")


def list_offsets(arr: pa.Array) -> np.ndarray | None:
    """A list array's own n + 1 offsets straight from its buffer, or None when the buffer is too small."""
    width = 8 if pa.types.is_large_list(arr.type) else 4
    buf = arr.buffers()[1]
    need = (arr.offset + len(arr) + 1) * width
    if buf is None or buf.size < need:
        return None
    return np.frombuffer(buf, dtype=np.int64 if width == 8 else np.int32, count=len(arr) + 1,
                         offset=arr.offset * width)


def _locate(arr: pa.Array, arrow_message: str) -> tuple[int | None, str]:
    """First bad row (batch-local) and a sentence for a column that failed Arrow's validation."""
    if pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
        offsets = list_offsets(arr)
        if offsets is None:
            return None, f"the list offsets buffer is too small for {len(arr):,} rows (Arrow: {arrow_message})"
        found = first_bad_offset(offsets, len(arr.values))
        if found is not None:
            return found
    return None, f"Arrow's validation fails: {arrow_message}"


def check_batch(batch: pa.RecordBatch, file: str, first_row: int) -> list[Defect]:
    """Every column of one record batch through ``ValidateFull``; failures located to their first row."""
    out: list[Defect] = []
    rows = (first_row, first_row + batch.num_rows)
    for name, arr in zip(batch.schema.names, batch.columns):
        try:
            arr.validate(full=True)
            continue
        except (pa.ArrowInvalid, pa.ArrowException, ValueError) as exc:
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        try:
            row, what = _locate(arr, message)
        except (pa.ArrowException, ValueError, IndexError) as exc:  # locating must not fail where Arrow already did
            row, what = None, f"Arrow's validation fails: {message} ({type(exc).__name__} while locating it)"
        out.append(Defect(file, name, None if row is None else first_row + row, what, rows))
    if not out:
        try:
            batch.validate(full=True)  # lengths across columns, and anything a column alone cannot show
        except (pa.ArrowInvalid, pa.ArrowException, ValueError) as exc:
            out.append(Defect(file, None, None, f"Arrow's validation fails: {str(exc).splitlines()[0]}", rows))
    return out


@dataclass
class Integrity:
    """The scan of every record batch of a dataset: its defects and the row ranges no contract may read."""

    defects: list[Defect] = field(default_factory=list)
    rows: int = 0
    batches: int = 0

    @property
    def bad_ranges(self) -> np.ndarray:
        """Sorted, merged global row ranges [start, stop) of damaged record batches (int64, shape (k, 2))."""
        spans = sorted({d.rows for d in self.defects if d.rows is not None and d.rows[1] > d.rows[0]})
        merged: list[list[int]] = []
        for a, b in spans:
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        return np.array(merged, dtype=np.int64).reshape(-1, 2)

    def sound_window(self, rows: int, num_rows: int) -> tuple[int, int]:
        """The first run [start, stop) of up to ``rows`` rows outside every damaged batch (for samples)."""
        ranges = self.bad_ranges  # sorted and merged
        start = 0
        for a, b in ranges.tolist():
            if a > start:
                break
            start = b
        ahead = ranges[ranges[:, 0] >= start, 0]
        stop = min(start + rows, num_rows, int(ahead[0]) if len(ahead) else num_rows)
        return start, max(start, stop)

    def unreadable(self, start: int, stop: int) -> str | None:
        """Why rows [start, stop) must not be read, or None when their buffers are sound."""
        hits = [d for d in self.defects if d.rows is not None and d.rows[0] < stop and start < d.rows[1]]
        if not hits:
            return None
        spans = ", ".join(dict.fromkeys(f"{d.file} rows {d.rows[0]:,}..{d.rows[1] - 1:,}" for d in hits))
        return f"invalid Arrow buffers in {spans} (see test_arrow_integrity)"

    def usable_lengths(self, lengths: np.ndarray) -> np.ndarray:
        """Row lengths with the rows of damaged batches read as 0 (their offsets mean nothing): for planning."""
        ranges = self.bad_ranges
        if not len(ranges):
            return lengths
        out = lengths.copy()
        for a, b in ranges.tolist():  # one slice per damaged batch
            out[a:b] = 0
        return np.maximum(out, 0)

    def result(self, extra: Iterable[Defect] = ()) -> CheckResult:
        """The ``arrow_integrity`` verdict: every defect named (file, column, first bad row, what)."""
        defects = [*self.defects, *extra]
        bad = self.bad_ranges
        unread = int((bad[:, 1] - bad[:, 0]).sum()) if len(bad) else 0
        by_reason: dict[str, int] = {}
        for d in defects:
            kind = d.what.split(":")[0] if d.row is None else _kind(d.what)
            by_reason[kind] = by_reason.get(kind, 0) + 1
        examples = [Violation(d.row, -1, d.line()) for d in defects if d.row is not None]
        message = ""
        if defects:
            message = (f"{len(defects)} defect(s) in the dataset's files; "
                       + "; ".join(d.line() for d in defects[:10])
                       + (f"; … {len(defects) - 10} more" if len(defects) > 10 else "")
                       + (f". {unread:,} rows of damaged record batches are not read: re-write or re-copy those "
                          "files" if unread else ". Re-write the dataset's metadata with datasets.save_to_disk"))
        return CheckResult(CHECK, "dataset", rows_checked=self.rows, rows_violating=unread, by_reason=by_reason,
                           examples=examples[:20], message=message)


def _kind(what: str) -> str:
    if "past the end" in what:
        return "list offset past the end of the values"
    if "offsets decrease" in what:
        return "list offsets decrease"
    if "starts at list offset" in what:
        return "first list offset outside the values"
    return what.split(":")[0]


def scan_tables(tables: list[tuple[str, pa.Table]]) -> Integrity:
    """Validate every record batch of the dataset's files, in row order (global rows count across files)."""
    out = Integrity()
    start = 0
    for name, table in tables:
        for batch in table.to_batches():
            out.defects.extend(check_batch(batch, name, start))
            out.batches += 1
            start += batch.num_rows
    out.rows = start
    return out


_VALUE_TYPES = {"bool": "bool", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
                "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "float32": "float", "float64": "double",
                "string": "string", "large_string": "string"}


def _feature_type(feature: Any) -> str | None:
    """The Arrow type name (``dataset.reader.arrow_type_name``) of a datasets feature dict, for the plain
    kinds a tokenized dataset holds; None when this cannot tell (datasets then decides)."""
    if not isinstance(feature, dict):
        return None
    kind = feature.get("_type")
    if kind == "Value":
        return _VALUE_TYPES.get(feature.get("dtype"))
    if kind in ("List", "Sequence", "LargeList") and feature.get("length", -1) == -1:
        inner = _feature_type(feature.get("feature"))
        return None if inner is None else f"{'large_list' if kind == 'LargeList' else 'list'}<{inner}>"
    return None


def _plainly_agree(features: Any, schema: pa.Schema) -> bool:
    """Features (a dict of feature dicts) that name exactly the schema's columns with its types."""
    from ..dataset.columns import arrow_type_name

    return (isinstance(features, dict) and set(features) == set(schema.names)
            and all(_feature_type(features[f.name]) == arrow_type_name(f.type) for f in schema))


def check_metadata(folder: Path, schema: pa.Schema) -> list[Defect]:
    """What ``datasets.load_from_disk`` reads besides the Arrow buffers, read the way it reads it.

    ``dataset_info.json`` must parse and its features must be those of the Arrow files
    (datasets refuses the dataset otherwise: "External features info don't match");
    the schema's ``huggingface`` metadata must parse into features. No row is to blame.
    When both hold plain features that agree with the Arrow types (every dataset this
    suite is for), that is decided here from the JSON; anything else goes to datasets'
    own code, whose import (~3 s) only such a dataset pays.
    """
    info_file = folder / "dataset_info.json"
    if not info_file.is_file():
        return [Defect(info_file.name, None, None, "missing; datasets.load_from_disk refuses the folder without it")]
    try:
        info_doc = json.loads(info_file.read_text("utf-8"))
        raw = (schema.metadata or {}).get(b"huggingface")
        meta = json.loads(raw) if raw is not None else None
        declared = info_doc.get("features") if isinstance(info_doc, dict) else None
        inferred = (meta["info"].get("features") if isinstance(meta, dict) and isinstance(meta.get("info"), dict)
                    else None)
        if isinstance(info_doc, dict) and (declared is None or _plainly_agree(declared, schema)) and (
                raw is None or (inferred is not None and (declared is None or inferred == declared)
                                and _plainly_agree(inferred, schema))):
            return []
    except (ValueError, UnicodeDecodeError, AttributeError):
        pass  # datasets says what is wrong, below
    return _check_metadata_with_datasets(folder, schema)


def _check_metadata_with_datasets(folder: Path, schema: pa.Schema) -> list[Defect]:
    from datasets import DatasetInfo, Features

    out: list[Defect] = []
    try:
        inferred = Features.from_arrow_schema(schema)
    except Exception as exc:  # what datasets raises on damaged metadata varies (JSON, key, type errors)
        out.append(Defect("schema metadata", None, None, f"the Arrow schema's 'huggingface' features do not parse "
                          f"({type(exc).__name__}: {_short(exc)}); datasets.load_from_disk fails on it"))
        inferred = None
    info_file = folder / "dataset_info.json"
    try:
        json.loads(info_file.read_text("utf-8"))
        info = DatasetInfo.from_directory(str(folder))
    except Exception as exc:
        out.append(Defect(info_file.name, None, None, f"does not parse ({type(exc).__name__}: {_short(exc)}); "
                          "datasets.load_from_disk fails on it"))
        return out
    if info.features is None or inferred is None:
        return out
    try:
        declared = info.features.reorder_fields_as(inferred)
    except Exception as exc:
        out.append(Defect(info_file.name, None, None, f"its features name other columns than the Arrow files "
                          f"({_short(exc)}); datasets.load_from_disk refuses the dataset"))
        return out
    if declared.type != inferred.type:
        diff = [f"{name}: {declared[name]} declared, {inferred[name]} in the files"
                for name in inferred if name in declared and declared[name] != inferred[name]]
        out.append(Defect(info_file.name, None, None, "its features differ from the Arrow files' ("
                          + "; ".join(diff or [str(declared.type)]) + "); datasets.load_from_disk refuses the dataset"))
    return out


def _short(exc: BaseException, limit: int = 160) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "…"


def file_state(folder: Path, files: list[Path]) -> dict[str, Any]:
    """What identifies the files of a run: size, mtime and inode of each data file and of the metadata,
    and the ``_fingerprint`` datasets wrote into state.json (a re-save writes a new one)."""
    state: dict[str, Any] = {}
    for f in [*files, folder / "state.json", folder / "dataset_info.json"]:
        try:
            st = os.stat(f)
            state[f.name] = (st.st_size, st.st_mtime_ns, st.st_ino)
        except OSError:
            state[f.name] = None
    try:
        state["_fingerprint"] = json.loads((folder / "state.json").read_text("utf-8")).get("_fingerprint")
    except (OSError, ValueError, AttributeError):
        state["_fingerprint"] = None
    return state


def state_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two :func:`file_state` snapshots, one phrase per file."""
    out = []
    for name in dict.fromkeys([*before, *after]):
        a, b = before.get(name), after.get(name)
        if a == b:
            continue
        if name == "_fingerprint":
            out.append(f"state.json's _fingerprint {a} -> {b} (the dataset was saved again)")
        elif a is None:
            out.append(f"{name} appeared")
        elif b is None:
            out.append(f"{name} disappeared")
        elif a[2] != b[2]:
            out.append(f"{name} was replaced (a new file of {b[0]:,} bytes)")
        elif a[0] != b[0]:
            out.append(f"{name} changed size ({a[0]:,} -> {b[0]:,} bytes)")
        else:
            out.append(f"{name} was rewritten (modification time changed)")
    return out


def shard_buffers_problem(arrays: Any) -> str | None:
    """The flat columns of one shard as the checks will index them (``dataset.reader.ShardArrays``), re-checked:
    offsets from 0 to the number of values, never decreasing; flags as long as what they flag.

    One pass over the shard's offsets (rows, not tokens). The scan at open validated the same
    buffers; this catches a file changed under the memory map since.
    """
    n_rows = arrays.shard.rows
    for name in ("input_ids", "loss_mask"):
        col = getattr(arrays, name)
        if col is None:
            continue
        o = col.offsets
        if len(o) != n_rows + 1:
            return f"{name}: {len(o) - 1:,} rows of offsets for {n_rows:,} rows"
        if n_rows and (o[0] != 0 or o[-1] != len(col.values)):
            return (f"{name}: offsets run from {int(o[0]):,} to {int(o[-1]):,}, not from 0 to its "
                    f"{len(col.values):,} values")
        found = first_bad_offset(o, len(col.values))
        if found is not None:
            return f"{name}, row {found[0]:,} of the shard: {found[1]}"
        if col.null_rows is not None and len(col.null_rows) != n_rows:
            return f"{name}: a validity bitmap of {len(col.null_rows):,} rows for {n_rows:,}"
        if col.null_elements is not None and len(col.null_elements) != len(col.values):
            return f"{name}: a validity bitmap of {len(col.null_elements):,} values for {len(col.values):,}"
    if arrays.seq_len is not None and len(arrays.seq_len) != n_rows:
        return f"seq_len: {len(arrays.seq_len):,} values for {n_rows:,} rows"
    return None


def _metadata(dataset: Any) -> list[Defect]:
    """A save_to_disk folder's metadata; Parquet / JSON Lines files have none beyond their schema
    (dataset/source_files.py)."""
    return check_metadata(dataset.path, dataset.schema) if dataset.source == "save_to_disk" else []


register(Spec(CHECK, Scope.DATASET, "every record batch's buffers and the metadata datasets reads are sound",
              needs=frozenset(), decodable=False,  # a damaged row is not read back to be shown
              run=lambda e: e.integrity.result(_metadata(e.dataset))))
