"""summary.json and the terminal summary, built from per-test records and per-shard stats.

Both arrive the same way with or without pytest-xdist (as ``user_properties`` on
test reports), so ``-n 0`` and ``-n 2`` produce the same figures.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .profile import CountSum, dataset_profile

SCHEMA_VERSION = 2
RESULT_KEY = "drafter_contracts.result"
#: Several contracts' results from one test (a shard's test runs every per-row contract).
RESULTS_KEY = "drafter_contracts.results"
STATS_KEY = "drafter_contracts.stats"
#: Lines a global check explains itself with (e.g. the baseline diff), kept in summary.json.
DETAILS_KEY = "drafter_contracts.details"
#: Why a shard's worker did not read it (damaged buffers, a row over max_shard_tokens, files changed).
UNREAD_KEY = "drafter_contracts.unread"
MAX_SUMMARY_EXAMPLES = 20


@dataclass
class Recorder:
    """Collects what finished tests reported, keyed so duplicates (re-runs, shared shards) collapse."""

    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    stats: dict[int, dict] = field(default_factory=dict)
    outcomes: dict[str, str] = field(default_factory=dict)
    #: Supervised-id counts summed as shards arrive, instead of keeping every shard's sparse
    #: counts: ~0.8 MB a shard, and merging them all at the end peaked at ~150 MB.
    _counts: CountSum = field(default_factory=CountSum)

    def add(self, nodeid: str, outcome: str, props: dict[str, Any], skip_reason: str | None,
            duration: float = 0.0) -> None:
        self.outcomes[nodeid] = outcome
        if STATS_KEY in props and props[STATS_KEY] is not None:
            stats = dict(props[STATS_KEY])
            counts = stats.pop("supervised_id_counts", None)
            if int(stats["shard"]) not in self.stats:  # a re-run shard is counted once
                self._counts.add(counts)
            self.stats[int(stats["shard"])] = stats
        if props.get(RESULT_KEY) is not None:
            self._add(props[RESULT_KEY], outcome, skip_reason, duration, props.get(DETAILS_KEY))
        for result in props.get(RESULTS_KEY) or ():
            # One test carried several contracts: each one's outcome is its own result's.
            own = ("skipped" if result["skipped"] else
                   "failed" if (result["rows_violating"] or result["message"]) and not result.get("report_only")
                   else "passed")
            self._add(result, own, None, float(result.get("seconds", 0.0)), None)

    def supervised_counts(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The exact supervised-id counts of every shard recorded, as sorted (ids, counts);
        None when a shard had none (no usable loss_mask) or no shard reported."""
        return self._counts.result()

    def _add(self, result: dict[str, Any], outcome: str, skip_reason: str | None, duration: float,
             details: list[str] | None) -> None:
        c = self.checks.setdefault(result["check"], {
            "tests": 0, "passed": 0, "failed": 0, "skipped": 0, "rows_checked": 0, "rows_violating": 0,
            "by_reason": defaultdict(int), "examples": [], "messages": [], "skip_reasons": [], "seconds": 0.0})
        c["tests"] += 1
        c["seconds"] += duration
        c[outcome] = c.get(outcome, 0) + 1
        c["rows_checked"] += result["rows_checked"]
        c["rows_violating"] += result["rows_violating"]
        for reason, count in result["by_reason"].items():
            c["by_reason"][reason] += count
        c["examples"].extend(result["examples"])
        c["report_only"] = c.get("report_only", False) or bool(result.get("report_only"))
        if result["message"]:
            c["messages"].append(result["message"])
        if details:
            c["details"] = list(details)
        reason = result["skipped"] or skip_reason
        if reason and reason not in c["skip_reasons"]:
            c["skip_reasons"].append(reason)


def global_figures(stats: dict[int, dict], num_shards: int) -> dict[str, Any]:
    """Exact dataset figures from per-shard sums (never a sample)."""
    parts = [stats[k] for k in sorted(stats)]
    rows_checked = sum(p["rows_checked"] for p in parts)
    tokens = sum(p["tokens"] for p in parts)
    sup = [p["supervised_tokens"] for p in parts if p.get("supervised_tokens") is not None]
    mins = [p["seq_len_min"] for p in parts if p["seq_len_min"] is not None]
    maxs = [p["seq_len_max"] for p in parts if p["seq_len_max"] is not None]
    roles: dict[str, int] = defaultdict(int)
    for p in parts:
        for k, v in p.get("role_tokens", {}).items():
            roles[k] += v
    out: dict[str, Any] = {
        "shards_covered": len(parts),
        "shards_total": num_shards,
        "complete": len(parts) == num_shards,
        "rows": sum(p["rows"] for p in parts),
        "rows_checked": rows_checked,
        "rows_excluded": sum(p["rows_excluded"] for p in parts),
        "tokens": tokens,
        "seq_len_min": min(mins) if mins else None,
        "seq_len_mean": tokens / rows_checked if rows_checked else None,
        "seq_len_max": max(maxs) if maxs else None,
        "rows_at_max_len": sum(p["rows_at_max_len"] for p in parts),
        "supervised_tokens": sum(sup) if len(sup) == len(parts) and parts else None,
    }
    out["supervised_share"] = (out["supervised_tokens"] / tokens) if out["supervised_tokens"] is not None and tokens else None
    if any("boundary_tokens" in p for p in parts):
        out["boundary_tokens"] = sum(p.get("boundary_tokens", 0) for p in parts)
        out["boundary_supervised"] = sum(p.get("boundary_supervised", 0) for p in parts)
        out["role_tokens"] = dict(sorted(roles.items()))
    if any("role_supervised" in p for p in parts):  # mask policy: supervised tokens per role
        sup_roles: dict[str, int] = defaultdict(int)
        for p in parts:
            for k, v in p.get("role_supervised", {}).items():
                sup_roles[k] += v
        out["supervised_role_tokens"] = dict(sorted(sup_roles.items()))
    if parts and all("anchor_positions" in p for p in parts):
        out["anchor_positions"] = sum(p["anchor_positions"] for p in parts)  # DFlash anchor candidates, whole dataset
    return out


_UNSET: Any = object()


def build_summary(meta: dict[str, Any], recorder: Recorder, num_shards: int, exit_status: int,
                  order: tuple[str, ...] = (), top_k: int = 100, counts: Any = _UNSET,
                  unchecked: list[dict[str, Any]] | None = None, row_checks: tuple[str, ...] = (),
                  unreported: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The summary.json document; ``order`` fixes the order of checks (reports arrive in any order).

    ``counts``: the shards' supervised-id counts already merged by the caller (the controller
    merges them once for token_freq too), else merged here. ``unchecked``: shards the run set
    out to check but did not (``completeness.Coverage.unchecked``); each of ``row_checks`` is
    then ``incomplete`` unless it failed on the rows it saw. ``unreported``: dataset-level contract
    tests that sent no verdict (``Coverage.unreported``): each of those is ``incomplete`` too.
    """
    rank = {name: i for i, name in enumerate(order)}
    checks = {}
    for name in sorted(recorder.checks, key=lambda n: (rank.get(n, len(rank)), n)):
        c = recorder.checks[name]
        verdict = "fail" if c["failed"] else ("skip" if c["skipped"] == c["tests"] else "pass")
        if verdict == "pass" and c.get("report_only") and c["rows_violating"]:
            verdict = "warn"  # suspicious content: listed, not failed (strict = true in [content] fails it)
        checks[name] = {
            "verdict": verdict,
            **{k: c[k] for k in ("tests", "passed", "failed", "skipped", "rows_checked", "rows_violating")},
            "by_reason": dict(c["by_reason"]),
            "examples": [{**e, "check": name} for e in sorted(c["examples"], key=lambda e: e["row"])[:MAX_SUMMARY_EXAMPLES]],
            "messages": c["messages"],
            "skip_reasons": c["skip_reasons"],
            "details": c.get("details", []),
            "report_only": bool(c.get("report_only")),
            "global": bool(c.get("global")),  # decided at the controller over every shard it saw
        }
    if unchecked:
        mark_incomplete(checks, unchecked, row_checks)
    for u in unreported or []:
        note = f"{u['test'].rsplit('::', 1)[-1]} sent no verdict: {u['reason']} (see all_shards_checked)"
        c = checks.setdefault(u["check"], _incomplete_entry())
        if c["verdict"] != "fail":
            c["verdict"], c["messages"] = "incomplete", [*c["messages"], note]
    checks = dict(sorted(checks.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))
    shards = [recorder.stats[k] for k in sorted(recorder.stats)]
    if counts is _UNSET:
        counts = recorder.supervised_counts()
    # Timings live apart from the verdicts, so verdicts are identical whatever -n was. Microseconds:
    # a mask check that a clean shard settles from its per-role totals takes ~50 µs a shard.
    meta = {**meta, "timing": {**meta.get("timing", {}),
                               "per_check_seconds": {n: round(recorder.checks.get(n, {}).get("seconds", 0.0), 6)
                                                     for n in checks}}}
    return {
        "schema_version": SCHEMA_VERSION,
        **meta,
        "exit_status": exit_status,
        "figures": global_figures(recorder.stats, num_shards),
        "profile": dataset_profile(shards, top_k, counts),
        "checks": checks,
        # Sparse id counts are summed here once instead of per shard: a sum of sums is all a merge needs.
        "supervised_id_counts": _counts_json(counts),
        "shards": shards,
        "unchecked": list(unchecked or []),
        "unreported": list(unreported or []),
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
_COMPACT_KEYS = {"raw", "supervised_id_counts"}
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
    report_dir.mkdir(parents=True, exist_ok=True)
    target = report_dir / "summary.json"
    fd, tmp = tempfile.mkstemp(prefix=".summary-", dir=report_dir)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(_dumps_summary(summary))
    os.chmod(tmp, 0o644)
    os.replace(tmp, target)
    return target


def _fmt(v: Any, spec: str = ",") -> str:
    return "n/a" if v is None else format(v, spec)


def terminal_lines(summary: dict[str, Any]) -> list[str]:
    """The terminal summary: global figures, then one line per contract."""
    f = summary["figures"]
    lines = [
        f"dataset   {summary['dataset']['path']}" + (f" (split {summary['dataset']['split']})" if summary['dataset']['split'] else ""),
        f"contract  {summary['contract']['name']} ({summary['contract']['source']})",
        f"tokenizer {summary['tokenizer']['name'] or 'none'}",
        f"rows {_fmt(summary['dataset']['num_rows'])} · tokens {_fmt(f['tokens'])} · "
        f"seq_len min/mean/max {_fmt(f['seq_len_min'])}/{_fmt(f['seq_len_mean'], ',.1f')}/{_fmt(f['seq_len_max'])} · "
        f"at max_len {_fmt(f['rows_at_max_len'])}",
        f"supervised tokens {_fmt(f['supervised_tokens'])} ({_fmt(f['supervised_share'], '.2%')})"
        + (f" · header/content boundary tokens {_fmt(f['boundary_tokens'])} ({_fmt(f['boundary_supervised'])} supervised)"
           if "boundary_tokens" in f else ""),
    ]
    prof = summary.get("profile") or {}
    q = (prof.get("seq_len") or {}).get("quantiles")
    if q:
        share_q = (prof.get("supervised_share_per_row") or {}).get("quantiles") or {}
        lines.append(f"seq_len p05/p50/p95/p99 {_fmt(q['p05'])}/{_fmt(q['p50'])}/{_fmt(q['p95'])}/{_fmt(q['p99'])} "
                     f"(bin lower edges, <= 4.4% wide)"
                     + (f" · median per-row supervised share {_fmt(share_q.get('p50'), '.0%')}" if share_q else ""))
    if summary["contract"].get("max_len_source") == "observed":
        lines.append(f"max_len not pinned: the longest row ({_fmt(summary['contract']['max_len'])} tokens) is taken as the "
                     "truncation cap; pin it with --max-len N or a contract from 'drafter-contracts init'")
    if not f["complete"]:
        lines.append(f"figures cover {f['shards_covered']} of {f['shards_total']} shards (tests were deselected or skipped)")
    for u in summary.get("unchecked") or []:
        lines.append(f"NOT CHECKED {u['shard']} (rows {u['rows'][0]:,}..{u['rows'][1] - 1:,}): {u['reason']}")
    for u in summary.get("unreported") or []:
        lines.append(f"NO VERDICT {u['test'].rsplit('::', 1)[-1]}: {u['reason']}")
    if f.get("anchor_positions") is not None:
        lines.append(f"DFlash anchor positions (supervised, outside each row's last block_size tokens) "
                     f"{f['anchor_positions']:,}")
    if f["rows_excluded"]:
        lines.append(f"{f['rows_excluded']:,} rows with null/empty/length defects left out of the other per-row contracts")
    for name, c in summary["checks"].items():
        detail = ""
        if c["verdict"] == "fail":
            detail = "; ".join(c["messages"]) or f"{c['rows_violating']:,} rows violate"
        elif c["verdict"] == "skip":
            detail = "; ".join(c["skip_reasons"])
        elif c["verdict"] == "incomplete":
            detail = f"{c['rows_checked']:,} rows checked, " + (c["messages"][-1] if c["messages"] else "shards missing")
        elif c["verdict"] == "warn":
            share = c["rows_violating"] / c["rows_checked"] if c["rows_checked"] else 0.0
            reasons = "; ".join(f"{n:,} × {r}" for r, n in sorted(c["by_reason"].items(), key=lambda kv: -kv[1]))
            rows = ", ".join(str(e["row"]) for e in c["examples"][:5])
            detail = f"{c['rows_violating']:,} of {c['rows_checked']:,} rows ({share:.2%}): {reasons}; e.g. rows {rows}"
        elif c["rows_checked"]:
            detail = f"{c['rows_checked']:,} rows"
        lines.append(f"  {c['verdict'].upper():4} {name:<28} {detail}")
    from ..hidden.report import terminal_lines as hidden_lines

    return lines + hidden_lines(summary)
