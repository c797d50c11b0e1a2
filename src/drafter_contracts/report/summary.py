"""summary.json and the terminal summary, extracted from the run's reducer (``reducer.py``).

Results arrive the same way with or without pytest-xdist (a shard's test sends one
encoded ``ShardReport`` on its report), so ``-n 0`` and ``-n 2`` produce the same figures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable


from ..checks.registry import spec
from ..contract_families import families
from ..paths import atomic_write_text
from ..results import ordered_reasons
from .shared_reasons import reason_items, shared
from .headline import clauses, headline
from .reducer import MAX_SUMMARY_EXAMPLES, Reducer
from .violations import section as violations_section

#: 3: the reducer's state (``reducer``) replaces the replayable test records (``raw``); merge-reports
#: reads version 3 parts only.
SCHEMA_VERSION = 3
#: A dataset-level test's (or a controller-side verdict's) one result.
RESULT_KEY = "drafter_contracts.result"
#: A shard's test: its whole ``ShardReport``, encoded by ``run.wire.encode_report``.
REPORT_KEY = "drafter_contracts.shard_report"
#: Lines a global check explains itself with (e.g. the baseline diff), kept in summary.json.
DETAILS_KEY = "drafter_contracts.details"


_UNSET: Any = object()


def _check_entry(name: str, c: dict[str, Any]) -> dict[str, Any]:
    """One contract's summary entry from its merged reducer entry: the verdict and what backs it."""
    verdict = "fail" if c["failed"] else ("skip" if c["skipped"] == c["tests"] else "pass")
    if verdict == "pass" and c.get("report_only") and c["rows_violating"]:
        verdict = "warn"  # suspicious content: listed, not failed (strict = true in [content] fails it)
    examples = sorted(c["examples"], key=lambda e: e["row"])[:MAX_SUMMARY_EXAMPLES]
    return {
        "verdict": verdict,
        "unit": _unit(name),  # what rows_checked counts
        **{k: c[k] for k in ("tests", "passed", "failed", "skipped", "rows_checked", "rows_violating")},
        "by_reason": dict(ordered_reasons(c["by_reason"], c.get("severity"))),
        **({"severity": dict(c["severity"])} if c.get("severity") else {}),  # rank per reason, 0 most severe
        "examples": [{**e, "check": name} for e in examples],
        "messages": c["messages"],
        "skip_reasons": c["skip_reasons"],
        "details": c.get("details", []),
        "report_only": bool(c.get("report_only")),
        "global": bool(c.get("global")),  # decided at the controller over every shard it saw
        **({"figures": c["figures"]} if c.get("figures") else {}),  # what the reports draw (declare.Verdict)
    }


def _scope(name: str) -> str | None:
    declared = spec(name)
    return declared.scope.value if declared is not None else None


def _unit(name: str) -> str:
    declared = spec(name)
    return declared.unit if declared is not None else "rows"


def build_summary(meta: dict[str, Any], reducer: Reducer, num_shards: int, exit_status: int,
                  order: tuple[str, ...] = (), top_k: int = 100, counts: Any = _UNSET,
                  unchecked: list[dict[str, Any]] | None = None, row_checks: tuple[str, ...] = (),
                  unreported: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The summary.json document; ``order`` fixes the order of checks (reports arrive in any order).

    ``counts``: the shards' supervised-id counts already merged by the caller (the controller
    merges them once for token_freq too), else merged here. ``unchecked``: shards the run set
    out to check but did not (``checks.completeness.Coverage.unchecked``); each of ``row_checks`` is
    then ``incomplete`` unless it failed on the rows it saw. ``unreported``: dataset-level contract
    tests that sent no verdict (``Coverage.unreported``): each of those is ``incomplete`` too.
    """
    rank = {name: i for i, name in enumerate(order)}
    checks = {name: _check_entry(name, reducer.checks[name])
              for name in sorted(reducer.checks, key=lambda n: (rank.get(n, len(rank)), n))}
    if unchecked:
        mark_incomplete(checks, unchecked, row_checks)
    for u in unreported or []:
        note = f"{u['test'].rsplit('::', 1)[-1]} sent no verdict: {u['reason']} (see all_shards_checked)"
        c = checks.setdefault(u["check"], _incomplete_entry())
        if c["verdict"] != "fail":
            c["verdict"], c["messages"] = "incomplete", [*c["messages"], note]
    checks = dict(sorted(checks.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))
    shards = reducer.shard_stats()
    if counts is _UNSET:
        counts = reducer.supervised_counts()
    # Timings live apart from the verdicts, so verdicts are identical whatever -n was. Microseconds:
    # a mask check that a clean shard settles from its per-role totals takes ~50 µs a shard.
    meta = {**meta, "timing": {**meta.get("timing", {}),
                               "per_check_seconds": {n: round(reducer.checks.get(n, {}).get("seconds", 0.0), 6)
                                                     for n in checks}}}
    return {
        "schema_version": SCHEMA_VERSION,
        **meta,
        "exit_status": exit_status,
        "figures": reducer.figures(num_shards),
        "profile": reducer.profile(top_k, counts),
        "checks": checks,
        # Sparse id counts are summed here once instead of per shard: a sum of sums is all a merge needs.
        "supervised_id_counts": _counts_json(counts),
        "shards": shards,
        "unchecked": list(unchecked or []),
        "unreported": list(unreported or []),
        # Every violating row is in violations.parquet beside this file; examples keep the lowest few.
        "violations": violations_section(checks, reducer.listed, _scope),
        "reducer": reducer.to_state(),
    }


def _incomplete_entry() -> dict[str, Any]:
    return {"verdict": "incomplete", "tests": 0, "passed": 0, "failed": 0, "skipped": 0, "rows_checked": 0,
            "rows_violating": 0, "by_reason": {}, "examples": [], "messages": [], "skip_reasons": [], "details": [],
            "report_only": False, "global": False}


def mark_incomplete(checks: dict[str, dict[str, Any]], unchecked: list[dict[str, Any]],
                    row_checks: tuple[str, ...]) -> None:
    """Per-row contracts that could not see every shard: ``incomplete``, naming the shards, never ``pass``.

    A contract that failed on the rows it saw keeps ``fail``; one skipped everywhere for a
    reason of its own (no tokenizer, a missing column) keeps ``skip``; one that no shard
    reported at all (its only worker died) gets an entry saying so.
    """
    reasons = {u["reason"].removeprefix("not read: ") for u in unchecked}
    rows = sum(u["rows"][1] - u["rows"][0] for u in unchecked)
    note = (f"{len(unchecked)} shard(s), {rows:,} rows, not checked: "
            + ", ".join(u["shard"] for u in unchecked[:10]) + (" …" if len(unchecked) > 10 else "")
            + " (see all_shards_checked)")
    for name in row_checks:
        c = checks.get(name)
        if c is None:
            checks[name] = {**_incomplete_entry(), "messages": [note], "unchecked": [u["shard"] for u in unchecked]}
            continue
        own_skip = c["verdict"] == "skip" and any(r not in reasons for r in c["skip_reasons"])
        if c["verdict"] == "fail" or own_skip:
            continue
        c["verdict"] = "incomplete"
        c["messages"] = [*c["messages"], note]
        c["unchecked"] = [u["shard"] for u in unchecked]


def _counts_json(counts: tuple | None) -> dict[str, list[int]] | None:
    return None if counts is None else {"ids": counts[0].tolist(), "counts": counts[1].tolist()}


#: Machine-read sections (per-shard records, sparse id counts): written compact, because
#: ``json.dump(indent=...)`` falls back to the pure-Python encoder, which took 4 s of a
#: 17 s run on 100 K rows (7.7 MB of "raw"), growing with the number of shards.
_COMPACT_KEYS = {"reducer", "supervised_id_counts"}
#: Lists of records written one compact record per line: the per-shard figures hold two
#: histograms each (~300 numbers), which the indenting encoder wrote one per line, at
#: ~0.1 s of the controller's serial end of a full-size run.
_RECORD_LISTS = {"shards"}


def _dumps_summary(summary: dict[str, Any]) -> str:
    """summary.json text: human-read sections indented, machine-read ones on one line each."""
    parts = []
    for key, value in summary.items():
        if key in _COMPACT_KEYS:
            body = json.dumps(value, separators=(",", ":"))
        elif key in _RECORD_LISTS and isinstance(value, list) and value:
            body = "[\n" + ",\n".join("    " + json.dumps(v, separators=(", ", ": ")) for v in value) + "\n  ]"
        else:
            body = json.dumps(value, indent=2).replace("\n", "\n  ")
        parts.append(f"  {json.dumps(key)}: {body}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def write_summary(summary: dict[str, Any], report_dir: Path) -> Path:
    """Write atomically so a reader never sees half a file."""
    return atomic_write_text(report_dir / "summary.json", _dumps_summary(summary))


def _fmt(v: Any, spec: str = ",") -> str:
    return "n/a" if v is None else format(v, spec)


def _contract_detail(name: str, c: dict[str, Any], checks: dict[str, Any], together: dict[str, list[str]]) -> str:
    """What a contract's terminal line says after its verdict and name (a reason other contracts give too:
    once, naming them, ``shared_reasons.py``)."""
    if c["verdict"] == "fail":
        return "; ".join(c["messages"]) or f"{c['rows_violating']:,} rows violate" + "".join(
            f"; {item}" for item in reason_items(name, c, checks, together)[:3])
    if c["verdict"] == "skip":
        return "; ".join(c["skip_reasons"])
    if c["verdict"] == "incomplete":
        return f"{c['rows_checked']:,} rows checked, " + (c["messages"][-1] if c["messages"] else "shards missing")
    if c["verdict"] == "warn":
        share = c["rows_violating"] / c["rows_checked"] if c["rows_checked"] else 0.0
        reasons = "; ".join(reason_items(name, c, checks, together))
        rows = ", ".join(str(e["row"]) for e in c["examples"][:5])
        return f"{c['rows_violating']:,} of {c['rows_checked']:,} rows ({share:.2%}): {reasons}; e.g. rows {rows}"
    return f"{c['rows_checked']:,} {c.get('unit', 'rows')}" if c["rows_checked"] else ""


def terminal_lines(summary: dict[str, Any], only_failing: bool = False, quiet: bool = False) -> list[str]:
    """The terminal summary: the convention, template profile and tokenizer the verdicts hold to
    (``headline.py``), the global figures, then one line per contract.

    ``only_failing`` (``--only-failing``) lists only the contracts that keep the run from being green:
    failed, incomplete, required but not checked. ``quiet`` (``-q``) keeps only those and the shards that
    went unchecked, after the first line that says what they were held to: nothing when nothing failed,
    since the verdict line after pytest's summary says it all.
    """
    gaps = _gap_lines(summary)
    contracts = _contract_lines(summary, only_failing or quiet)
    if quiet:
        return [headline(summary), *gaps, *contracts] if gaps or contracts else []
    lines = [headline(summary), *_figure_lines(summary), *gaps, *_row_figure_lines(summary["figures"]), *contracts]
    if only_failing:
        left = len(summary["checks"]) - len(contracts)
        lines.append(f"  {left:,} passing, warning or skipped contract(s) not listed (--only-failing)")
    for family in families():
        if family.terminal_lines is not None:
            lines += family.terminal_lines(summary)
    return lines


def holds_back(name: str, c: dict[str, Any], required: Iterable[str]) -> bool:
    """Whether a contract keeps the run from being green: failed, incomplete, or ``required`` but not checked."""
    return c["verdict"] in ("fail", "incomplete") or (c["verdict"] == "skip" and name in required)


def _contract_lines(summary: dict[str, Any], only_failing: bool) -> list[str]:
    """One line per contract (``only_failing``: those that hold the run back)."""
    required = (summary.get("not_checked") or {}).get("required") or {}
    checks = summary["checks"]
    together = shared(checks)
    return [f"  {c['verdict'].upper():4} {name:<28} "
            + ("required but not checked: " if c["verdict"] == "skip" and name in required else "")
            + _contract_detail(name, c, checks, together)
            for name, c in summary["checks"].items() if not only_failing or holds_back(name, c, required)]


def _figure_lines(summary: dict[str, Any]) -> list[str]:
    """What was checked and the whole-dataset figures, then how the mask policy was resolved."""
    f = summary["figures"]
    lines = [
        f"dataset   {summary['dataset']['path']}"
        + (f" (split {summary['dataset']['split']})" if summary['dataset']['split'] else ""),
        *([f"layout    {summary['dataset']['layout']}"
           + (f" (read from {summary['dataset']['format']})" if summary["dataset"].get("format", "save_to_disk")
              != "save_to_disk" else "")] if summary["dataset"].get("layout") else []),
        f"contract  {summary['contract']['name']} ({summary['contract']['source']})",
        f"rows {_fmt(summary['dataset']['num_rows'])} · tokens {_fmt(f['tokens'])} · "
        f"seq_len min/mean/max {_fmt(f['seq_len_min'])}/{_fmt(f['seq_len_mean'], ',.1f')}/{_fmt(f['seq_len_max'])} · "
        f"at max_len {_fmt(f['rows_at_max_len'])}",
        f"supervised tokens {_fmt(f['supervised_tokens'])} ({_fmt(f['supervised_share'], '.2%')})"
        + (f" · header/content boundary tokens {_fmt(f['boundary_tokens'])} "
           f"({_fmt(f['boundary_supervised'])} supervised)" if "boundary_tokens" in f else ""),
    ]
    prof = summary.get("profile") or {}
    q = (prof.get("seq_len") or {}).get("quantiles")
    if q:
        share_q = (prof.get("supervised_share_per_row") or {}).get("quantiles") or {}
        lines.append(f"seq_len p05/p50/p95/p99 {_fmt(q['p05'])}/{_fmt(q['p50'])}/{_fmt(q['p95'])}/{_fmt(q['p99'])} "
                     f"(bin lower edges, <= 4.4% wide)"
                     + (f" · median per-row supervised share {_fmt(share_q.get('p50'), '.0%')}" if share_q else ""))
    how = summary["contract"].get("mask_how") or ""  # the policy in force; inferred: key by key, what it rejects
    lines += [f"{'mask' if i == 0 else '':<9} {part}" for i, part in enumerate(clauses(how) if how else [])]
    if summary["contract"].get("max_len_source") == "observed":
        lines.append(f"max_len not pinned: the longest row ({_fmt(summary['contract']['max_len'])} tokens) "
                     "is taken as the truncation cap; "
                     "pin it with --max-len N or a contract from 'drafter-contracts init'")
    if not f["complete"]:
        lines.append(f"figures cover {f['shards_covered']} of {f['shards_total']} shards "
                     "(tests were deselected or skipped)")
    return lines


def _gap_lines(summary: dict[str, Any]) -> list[str]:
    """The shards the run set out to check but did not, and the contract tests that sent no verdict."""
    return ([f"NOT CHECKED {u['shard']} (rows {u['rows'][0]:,}..{u['rows'][1] - 1:,}): {u['reason']}"
             for u in summary.get("unchecked") or []]
            + [f"NO VERDICT {u['test'].rsplit('::', 1)[-1]}: {u['reason']}" for u in summary.get("unreported") or []])


def _row_figure_lines(f: dict[str, Any]) -> list[str]:
    """The figures of the rows: DFlash anchor positions, rows left out of the per-row contracts."""
    lines = []
    if f.get("anchor_positions") is not None:
        lines.append(f"DFlash anchor positions (supervised, outside each row's last block_size tokens) "
                     f"{f['anchor_positions']:,}")
    if f["rows_excluded"]:
        lines.append(f"{f['rows_excluded']:,} rows with null/empty/length defects "
                     "left out of the other per-row contracts")
    return lines


def count_line(n: dict[str, int]) -> str:
    """One line that reconciles the run's counts: the contracts on the verdict line, the tests pytest collected
    and the results pytest reports (``ContractRun._counts``); docs/reports.md says the same in prose."""
    kept = n["whole_dataset"] - n["verdicts_reported"]  # whole-dataset contracts that had nothing to check
    return (f"counts    {n['contracts']} contracts = {n['per_row']} per-row (each run in every shard's test; "
            f"{n['shard_tests']} shard test{'' if n['shard_tests'] == 1 else 's'}) + {n['dataset_level']} "
            f"dataset-level (a test each) + {n['whole_dataset']} whole-dataset (decided after the shards); "
            f"pytest: {n['tests_collected']} tests selected + {n['verdicts_reported']} whole-dataset verdicts "
            f"reported as tests = {n['pytest_results']} results"
            + (f" ({kept} whole-dataset skip{'' if kept == 1 else 's'} in the verdict line and summary.json "
               f"alone: nothing to check, no test)" if kept > 0 else ""))
