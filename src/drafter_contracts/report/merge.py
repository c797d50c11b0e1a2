"""Join the summary.json files of a ``--split K/N`` run into one verdict and one summary.

Each part writes, beside its own verdict, the state of the reducer it was built from
(``reducer.py``): every contract's entry (``reducer``), each shard's stats (``shards``)
and the part's supervised-id counts (``supervised_id_counts``, a sum of per-shard
counts, so the parts' sums add up exactly). Merging rebuilds each part's reducer, merges
them (``Reducer.merge``) and extracts the summary with the very ``build_summary`` a
single machine uses, so every figure merges the same way, and a merged summary equals
the summary of one machine checking everything (timings and paths aside). Summaries of
schema version 2 (test records to replay, no reducer state) are refused with a line
saying to rerun that part.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


from ..errors import UsageProblem
from .artifacts import write_reports
from .reducer import Reducer
from .summary import build_summary, terminal_lines
from . import violations

#: Top-level keys that are recomputed by the merge rather than copied from part 1.
_REBUILT = {"schema_version", "exit_status", "figures", "profile", "checks", "split", "reducer", "timing",
            "shards", "supervised_id_counts", "unchecked", "unreported", "violations"}


def split_section(engine: Any) -> dict[str, Any]:
    """The ``split`` block of summary.json (a run without --split is part 1 of 1)."""
    from ..dataset.reader import plan_identity

    k, n = engine.split or (1, 1)
    return {
        "split": {"k": k, "n": n, "shards_total": len(engine.all_shards),
                  "shards": [s.index for s in engine.shards],
                  "rows": [[s.start, s.stop] for s in engine.shards],
                  "plan": plan_identity(engine.all_shards, engine.dataset)},
    }


def _load(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(Path(path).read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageProblem(f"{path}: not a readable summary.json ({exc})") from None
    if not isinstance(doc, dict) or "split" not in doc or "reducer" not in doc or "shards" not in doc:
        raise UsageProblem(f"{path}: has no split/reducer section (schema version "
                           f"{doc.get('schema_version') if isinstance(doc, dict) else '?'}, "
                           f"written by an older drafter-contracts?); rerun that part with this version")
    return doc


def _contract_key(doc: dict[str, Any]) -> dict[str, Any]:
    """The contract as it judges data; where its file lived differs between machines."""
    return {k: v for k, v in doc.get("contract", {}).items() if k not in ("source", "path")}


def _validate(parts: list[tuple[Path, dict[str, Any]]]) -> int:
    """Refuse anything but the N disjoint parts of one run; returns N."""
    first_path, first = parts[0]
    n = first["split"]["n"]
    seen: dict[int, Path] = {}
    for path, doc in parts:
        sp = doc["split"]
        if sp["n"] != n:
            raise UsageProblem(f"{path}: is part {sp['k']}/{sp['n']} but {first_path} is part of {n}; "
                               "merge the parts of one --split run")
        if sp["k"] in seen:
            raise UsageProblem(f"{path} and {seen[sp['k']]}: both are part {sp['k']}/{n} (overlapping splits); "
                               "pass each part once")
        seen[sp["k"]] = path
        for what, mine, theirs in (
                ("dataset (files, sizes, rows, shard plan)", sp["plan"], first["split"]["plan"]),
                ("contract", _contract_key(doc), _contract_key(first)),
                ("tokenizer", doc.get("tokenizer", {}).get("fingerprint"),
                 first.get("tokenizer", {}).get("fingerprint"))):
            if mine != theirs:
                raise UsageProblem(f"{path}: its {what} differs from {first_path}'s; "
                                   "merge only parts run on the same dataset with the same contract and tokenizer")
        if doc.get("exit_status") not in (0, 1):
            raise UsageProblem(f"{path}: that part ended with exit status {doc.get('exit_status')} "
                               "(interrupted, internal or usage error), so its verdict is incomplete; rerun it")
    missing = sorted(set(range(1, n + 1)) - set(seen))
    if missing:
        raise UsageProblem(f"parts {', '.join(f'{k}/{n}' for k in missing)} missing: merge needs all {n} summaries")
    covered: dict[int, int] = {}
    for path, doc in parts:
        for idx in doc["split"]["shards"]:
            if idx in covered:
                raise UsageProblem(f"{path}: shard {idx} is also in part {covered[idx]}/{n}; the parts overlap")
            covered[idx] = doc["split"]["k"]
    if len(covered) != first["split"]["shards_total"]:
        raise UsageProblem(f"the parts cover {len(covered)} of {first['split']['shards_total']} shards; "
                           "a part was run with other options (--shard-size?)")
    return n


def merge_summaries(paths: list[Path]) -> dict[str, Any]:
    """The merged summary document; raises UsageProblem for parts that do not make one run."""
    return merge_parts(paths)[0]


def merge_parts(paths: list[Path]) -> tuple[dict[str, Any], Any]:
    """The merged summary document and the parts' violations.parquet as one table; raises UsageProblem
    for parts that do not make one run (a row two parts list included)."""
    if not paths:
        raise UsageProblem("merge-reports: no summary.json given")
    parts = sorted(((Path(p), _load(Path(p))) for p in paths), key=lambda pd: pd[1]["split"]["k"])
    n = _validate(parts)
    reducer = Reducer()
    once = _once_checks()
    for path, doc in parts:
        conflicts = reducer.merge(Reducer.from_summary(doc), once)
        if conflicts:
            raise UsageProblem(f"{path}: {', '.join(conflicts)} judged otherwise than in {parts[0][0]}; "
                               "the parts were not run with the same options")
    first = parts[0][1]
    order = tuple(dict.fromkeys(name for _, doc in parts for name in doc.get("checks", {})))
    meta = {k: v for k, v in first.items() if k not in _REBUILT}
    meta["timing"] = {"wall_seconds": max(d.get("timing", {}).get("wall_seconds", 0) for _, d in parts),
                      "parts": [{"k": d["split"]["k"], **d.get("timing", {})} for _, d in parts]}
    meta["merged_from"] = [{"k": d["split"]["k"], "n": n, "summary": str(p), "dataset_path": d["dataset"]["path"]}
                           for p, d in parts]
    total = first["split"]["shards_total"]
    unchecked = sorted((u for _, d in parts for u in d.get("unchecked", [])), key=lambda u: u["index"])
    unreported = [u for _, d in parts for u in d.get("unreported", [])]
    # Each part's top-level counts are the sum of its shards' own: their sum is the whole dataset's.
    from ..checks.registry import names, spec

    # what the parts' shard tests ran (a contract an option asks for, left out of the run, is not incomplete)
    ran = tuple(c for c in names(shard_test=True) if c in order or not spec(c).on_request)
    summary = build_summary(meta, reducer, total, 0, order, unchecked=unchecked, row_checks=ran,
                            unreported=unreported)
    summary["split"] = {"k": 1, "n": 1, "merged_parts": n, "shards_total": total,
                        "shards": sorted(i for _, d in parts for i in d["split"]["shards"]),
                        "rows": sorted(r for _, d in parts for r in d["split"]["rows"]),
                        "plan": first["split"]["plan"]}
    _note_global_checks(summary, n)
    _carry_excerpts(summary, parts)
    summary["exit_status"] = 1 if any(c["verdict"] in ("fail", "incomplete") for c in summary["checks"].values()) else 0
    table, missing = violations.merge_tables(parts)
    listed = summary["violations"]
    if missing:  # their rows are not in the merged file: say which parts and which contracts, never pass quietly
        listed["missing_parts"] = missing
        have = {u["contract"] for u in listed["unlisted"]}
        listed["unlisted"] += [u for u in violations.missing_unlisted(parts, missing) if u["contract"] not in have]
    listed["rows"] = table.num_rows
    return summary, table


def _once_checks() -> frozenset[str]:
    """Contracts every part judges alike (metadata, and token_freq.pt, which a part does not check):
    their verdicts count once. Per-shard contracts, per-part ones and those fed by per-shard partials add up."""
    from ..checks.declare import Scope
    from ..checks.registry import specs

    return frozenset(name for name, s in specs().items()
                     if s.scope is not Scope.ROW and not s.per_part and s.partial is None)


def _carry_excerpts(summary: dict[str, Any], parts: list[tuple[Path, dict[str, Any]]]) -> None:
    """Decoded excerpts come from the parts (the merge has no dataset to read).

    Each part decoded its first few violating rows per contract; the merged first few
    are among them, since rows sort the same way in a part as in the whole.
    """
    from ..decoded_rows import DEFAULT_EXAMPLES

    found = {(name, e["row"], e["position"]): e["excerpt"] for _, d in parts
             for name, c in d.get("checks", {}).items() for e in c.get("examples", []) if "excerpt" in e}
    for name, c in summary["checks"].items():
        for e in c["examples"][:DEFAULT_EXAMPLES]:
            excerpt = found.get((name, e["row"], e["position"]))
            if excerpt is not None:
                e["excerpt"] = excerpt


def _note_global_checks(summary: dict[str, Any], n: int) -> None:
    """Checks decided at each part's controller over that part (duplicate rows) add up as parts.

    A part compared only its own rows, so the merged verdict says so: rows duplicated
    across two machines' parts are not counted.
    """
    if n < 2:
        return
    note = f"compared within each of the {n} parts only: rows repeated across parts are not counted"
    for c in summary["checks"].values():
        if c.get("global"):
            c["messages"] = [*c["messages"], note]


def merge_reports(out_dir: Path, paths: list[Path], echo=print) -> int:
    """The ``merge-reports`` command: 0 all contracts hold, 1 a contract is violated, 4 the parts do not fit."""
    try:
        summary, table = merge_parts(paths)
    except UsageProblem as exc:
        echo(f"merge-reports: error: {exc}")
        return 4
    target, *reports, listed = write_reports(summary, Path(out_dir), table)
    for line in terminal_lines(summary):
        echo(line)
    for m in summary["violations"].get("missing_parts", []):
        echo(f"WARNING: part {m['k']}/{m['n']} ({m['summary']}): {m['why']}; "
             f"its violating rows are not in {violations.FILE_NAME} (summary.json's violations.missing_parts)")
    echo(f"merged {summary['split']['merged_parts']} parts -> {target}")
    for path in reports:
        echo(f"report: {path}")
    echo(f"report: {violations.listed_note(listed, summary['violations'])}")
    return summary["exit_status"]
