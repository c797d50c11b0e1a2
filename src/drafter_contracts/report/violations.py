"""violations.parquet: every violating row of every per-row contract, beside summary.json.

summary.json keeps a contract's :data:`~drafter_contracts.results.MAX_EXAMPLES` lowest rows, enough
to read; a user who must drop or fix every violating row needs all of them, in a file a dataframe
reads. Each shard sends its rows as arrays (``results.RowViolations``, raw buffers on the wire), the
reducer keeps them, and :func:`build_table` turns them into one Arrow table with numpy and Arrow
kernels only: no Python object per row, so hundreds of thousands of rows cost well under a second
(200 K rows of 100 shards: 0.09 s to build, 0.07 s to write, 2.1 MB; ``docs/reports.md``).

Columns (:data:`SCHEMA`): contract, verdict (``FAIL``; ``WARN`` for report-only contracts), row
(global index), reason, position (first offending token in the row, -1: the whole row), token_id
(the id there, -1: none) and token_text (that id decoded; null without a tokenizer). Sorted by
contract, then row; one row per (contract, violating row). A clean run writes the file empty, with
the schema. Contracts whose rows cannot be listed (whole-dataset and dataset-level verdicts, a
sample) are named in summary.json's ``violations.unlisted`` instead (:func:`section`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import UsageProblem
from ..paths import atomic_write_bytes
from ..results import RowViolations

#: The file's name in the report folder.
FILE_NAME = "violations.parquet"

SCHEMA = pa.schema([
    ("contract", pa.string()),
    ("verdict", pa.string()),
    ("row", pa.int64()),
    ("reason", pa.string()),
    ("position", pa.int64()),
    ("token_id", pa.int64()),
    ("token_text", pa.string()),
])

#: Sort order of the file: what a reader groups by, then what it joins on.
ORDER = [("contract", "ascending"), ("row", "ascending")]


def verdict_of(entry: dict[str, Any]) -> str:
    """A listed contract's verdict as the file spells it: report-only contracts warn, the others fail."""
    return "WARN" if entry.get("verdict") == "warn" or entry.get("report_only") else "FAIL"


def build_table(listed: Iterable[RowViolations], checks: dict[str, dict[str, Any]],
                decode: Callable[[list[int]], str] | None = None) -> pa.Table:
    """One table of every row listed, sorted by contract then row.

    ``checks``: summary.json's entries (for each contract's verdict). ``decode``: one id's text
    (the run's tokenizer), called once per distinct offending id, never per row; None leaves
    token_text null.
    """
    by_check: dict[str, list[RowViolations]] = {}
    for v in listed:
        if len(v):
            by_check.setdefault(v.check, []).append(v)
    if not by_check:
        return SCHEMA.empty_table()
    names = sorted(by_check)
    reasons: list[str] = []
    reason_at: dict[str, int] = {}
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("check", "rows", "positions", "reasons", "tokens")}
    for index, name in enumerate(names):
        parts = by_check[name]
        rows = np.concatenate([p.rows for p in parts])
        order = np.argsort(rows, kind="stable")
        local = [np.array([reason_at.setdefault(r, len(reason_at)) for r in p.reasons], dtype=np.int32)
                 for p in parts]  # each part's codes into the run's one reason table
        cols["check"].append(np.full(len(rows), index, dtype=np.int32))
        cols["rows"].append(rows[order])
        cols["positions"].append(np.concatenate([p.positions for p in parts])[order])
        cols["reasons"].append(np.concatenate([m[p.codes] for m, p in zip(local, parts)])[order])
        cols["tokens"].append(np.concatenate([_tokens(p) for p in parts])[order])
    reasons = list(reason_at)
    tokens = np.concatenate(cols["tokens"])
    checks_idx = np.concatenate(cols["check"])
    verdicts = pa.array([verdict_of(checks.get(n, {})) for n in names], pa.string())
    return pa.Table.from_arrays([
        pc.take(pa.array(names, pa.string()), checks_idx),
        pc.take(verdicts, checks_idx),
        pa.array(np.concatenate(cols["rows"]), pa.int64()),
        pc.take(pa.array(reasons, pa.string()), np.concatenate(cols["reasons"])),
        pa.array(np.concatenate(cols["positions"]), pa.int64()),
        pa.array(tokens, pa.int64()),
        _token_text(tokens, decode),
    ], schema=SCHEMA)


def _tokens(v: RowViolations) -> np.ndarray:
    return v.token_ids if v.token_ids is not None else np.full(len(v), -1, np.int64)


def _token_text(tokens: np.ndarray, decode: Callable[[list[int]], str] | None) -> pa.Array:
    """Each token id's text, decoding each distinct id once; null for -1 or without a tokenizer."""
    if decode is None or not len(tokens):
        return pa.nulls(len(tokens), pa.string())
    distinct, index = np.unique(tokens, return_inverse=True)
    texts = pa.array([None if i < 0 else decode([int(i)]) for i in distinct.tolist()], pa.string())
    return pc.take(texts, index.reshape(-1))


def write_table(table: pa.Table, report_dir: Path) -> Path:
    """``violations.parquet`` in ``report_dir``, written atomically (a reader never sees half a file)."""
    sink = pa.BufferOutputStream()
    pq.write_table(table.cast(SCHEMA), sink)
    return atomic_write_bytes(Path(report_dir) / FILE_NAME, sink.getvalue().to_pybytes())


def section(checks: dict[str, dict[str, Any]], listed: dict[str, int],
            scope_of: Callable[[str], str | None]) -> dict[str, Any]:
    """summary.json's ``violations``: the file, its row count (and how many of them are failing contracts'
    rows, not warnings), and the failing or warning contracts whose violating rows it does not hold, each
    with why.

    ``listed``: rows listed per contract; ``scope_of``: a contract's scope (``row``, ``dataset``,
    ``whole``) when it is known.
    """
    unlisted = []
    for name, c in checks.items():
        if c.get("verdict") not in ("fail", "warn", "incomplete"):
            continue
        if not c["rows_violating"] and (c["verdict"] == "incomplete" or not c["messages"]):
            continue  # no row of it violates: the shards it did not see are summary.json's ``unchecked``
        have = listed.get(name, 0)
        if have >= c["rows_violating"] and c["rows_violating"]:
            continue
        why = _why_unlisted(scope_of(name), c["rows_violating"], have)
        if why:
            unlisted.append({"contract": name, "rows_violating": int(c["rows_violating"]), "why": why})
    failing = sum(k for name, k in listed.items() if name in checks and verdict_of(checks[name]) == "FAIL")
    return {"path": FILE_NAME, "rows": int(sum(listed.values())), "failing": int(failing), "unlisted": unlisted}


def listed_note(path: Path, summary_section: dict[str, Any]) -> str:
    """How the terminal's ``report:`` line names the file: its path and how many rows it lists."""
    n, failing = summary_section["rows"], summary_section.get("failing", 0)
    unlisted = len(summary_section.get("unlisted") or [])
    more = f"; {unlisted} contract(s) not listed, see summary.json's violations.unlisted" if unlisted else ""
    return f"{path} ({n:,} rows listed: {failing:,} failing, {n - failing:,} warned{more})"


def _why_unlisted(scope: str | None, violating: int, have: int) -> str | None:
    if not violating:
        return "judges the dataset as a whole, not rows (see its messages)"
    if scope == "whole":
        return ("a whole-dataset verdict, decided after the shards from what they sent (no row list): "
                "its rows are in summary.json's examples only")
    if scope == "dataset":
        return ("a dataset-level contract (metadata, files or a sample of rows): "
                "its rows are in summary.json's examples only")
    if have:
        return f"{violating - have:,} of its {violating:,} rows come from shards that sent no row list"
    return "its results list no rows (counted per shard only): its rows are in summary.json's examples only"


def read_part(path: Path) -> pa.Table:
    """A part's violations.parquet, refused (UsageProblem) when it is not one this tool wrote."""
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise UsageProblem(f"{path}: not a readable violations.parquet ({exc})") from None
    if not table.schema.equals(SCHEMA, check_metadata=False):
        raise UsageProblem(f"{path}: its columns are not violations.parquet's ({', '.join(table.schema.names)}); "
                           "rerun that part with this version")
    return table


def merge_tables(parts: list[tuple[Path, dict[str, Any]]]) -> tuple[pa.Table, list[dict[str, Any]]]:
    """The parts' violations.parquet (each beside its summary.json) as one table, re-sorted, and the parts
    that have none (``missing_parts``: their rows are not in the table, and summary.json says so).

    A (contract, row) that two parts list means the parts overlap: a UsageProblem naming it, like
    every other input ``merge-reports`` refuses.
    """
    tables, owners, missing = [], [], []
    for path, doc in parts:
        k, n = doc["split"]["k"], doc["split"]["n"]
        file = Path(path).parent / FILE_NAME
        if not file.exists():
            missing.append({"k": k, "n": n, "summary": str(path),
                            "why": f"no {FILE_NAME} beside it (written by an older drafter-contracts, or removed)"})
            continue
        table = read_part(file)
        expected = (doc.get("violations") or {}).get("rows")
        if expected is not None and expected != table.num_rows:
            raise UsageProblem(f"{file}: holds {table.num_rows:,} rows but its summary.json lists {expected:,}; "
                               "it is not that part's file (copy the part's whole report folder)")
        tables.append(table)
        owners.append(np.full(table.num_rows, len(owners), dtype=np.int32))
    if not tables:
        return SCHEMA.empty_table(), missing
    table = pa.concat_tables(tables).append_column("part", pa.array(np.concatenate(owners)))
    table = table.sort_by(ORDER)
    contract = pc.dictionary_encode(table["contract"]).combine_chunks()
    codes = contract.indices.to_numpy(zero_copy_only=False)
    rows = table["row"].to_numpy()
    twice = np.flatnonzero((codes[1:] == codes[:-1]) & (rows[1:] == rows[:-1]))
    if len(twice):
        i = int(twice[0])
        part_paths = [str(Path(p).parent / FILE_NAME) for p, _ in parts if (Path(p).parent / FILE_NAME).exists()]
        who = table["part"].to_numpy()
        raise UsageProblem(f"{table['contract'][i].as_py()} row {int(rows[i]):,} is listed by both "
                           f"{part_paths[int(who[i])]} and {part_paths[int(who[i + 1])]} "
                           f"({len(twice):,} rows listed twice): the parts overlap; pass each part once")
    return table.drop_columns(["part"]), missing


def missing_unlisted(parts: list[tuple[Path, dict[str, Any]]], missing: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``unlisted`` entries for the failing or warning contracts of the parts without a file."""
    gone = {m["summary"] for m in missing}
    out: dict[str, dict[str, Any]] = {}
    for path, doc in parts:
        if str(path) not in gone:
            continue
        k, n = doc["split"]["k"], doc["split"]["n"]
        for name, c in doc.get("checks", {}).items():
            if c.get("verdict") in ("fail", "warn") and c.get("rows_violating"):
                entry = out.setdefault(name, {"contract": name, "rows_violating": 0, "why": ""})
                entry["rows_violating"] += int(c["rows_violating"])
                entry["why"] = (entry["why"] + "; " if entry["why"] else "") + f"part {k}/{n} has no {FILE_NAME}"
    return list(out.values())
