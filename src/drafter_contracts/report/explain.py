"""Violating rows read back and decoded, for every report: the failure message a person can act on (counts,
row indices, the first violating rows' excerpts), each example's excerpt in summary.json and report.html,
and the warnings' excerpts in the terminal, drawn back from summary.json.

The excerpt itself (a row's windows cut into segments, every offending token marked, and its one-line form)
is ``spans/excerpt.py``'s, below the contracts that decode rows too (the maskers' disagreements). The
segments kept in summary.json are the records the terminal draws, so a row looks the same in both
places: ``{"text", "role", "supervised", "offending", "start", "end"}`` runs of tokens (a segment whose
start is not the previous one's end begins a later window), and the row's offending runs as
``[start, end]`` pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..checks import registry
from ..contract import Contract
from ..decoded_rows import DEFAULT_EXAMPLES
from ..results import CheckResult, Violation, ordered_reasons, shown_examples
from ..spans.excerpt import LEGEND, Segment, Window, render_segments, window
from ..spans.labels import Labels
from ..spans.turns import MaskFacts


def _labels(ids: np.ndarray, oracle: Any, max_len: int) -> Labels | None:
    if oracle is None or len(ids) == 0:
        return None
    return oracle.label_row(ids, max_len)


def offending_tokens(name: str, ids: np.ndarray, mask: np.ndarray | None, labels: Labels | None,
                     contract: Contract, newline_lead: np.ndarray | None = None,
                     facts: "MaskFacts | None" = None) -> np.ndarray | None:
    """Every token of one row that breaks a contract, by its Spec's ``offending``
    (None: the contract names one token only, the violation's position)."""
    declared = registry.spec(name)
    if declared is None or declared.offending is None or labels is None or mask is None or len(mask) != len(ids):
        return None
    facts = facts if facts is not None else MaskFacts(ids, newline_lead)
    return declared.offending(ids, mask, labels, contract, facts)


@dataclass(frozen=True)
class RowExplanation:
    """One violating row, ready for any renderer: where, why, sizes, and the decoded window."""

    check: str
    row: int
    position: int
    reason: str
    sizes: str
    window: Window
    length: int = 0  # tokens in the row

    def text(self) -> str:
        return render_segments(self.window)

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "row": self.row, "position": self.position, "reason": self.reason,
                "sizes": self.sizes, **self.window.to_dict()}


def explain_violation(result: CheckResult, violation: Violation, engine) -> RowExplanation:
    """Read the violating row back (one-row read) and build its explanation."""
    return explain_row(result.check, violation.row, violation.position, violation.reason, engine)


def explain_row(name: str, row: int, position: int, reason: str, engine) -> RowExplanation:
    """The explanation of one row for one contract; the terminal and report.html both draw it."""
    ids, mask, seq_len = engine.row(row)
    if mask is not None and len(mask) == len(ids) and seq_len == len(ids):
        sizes = f"seq_len {len(ids)}"
    else:
        sizes = f"len(input_ids) {len(ids)}, len(loss_mask) {'n/a' if mask is None else len(mask)}, seq_len {seq_len}"
    labels = _labels(ids, engine.oracle, engine.contract.max_len)
    newline_lead = engine.vocab.newline_lead if engine.vocab is not None else None
    facts = engine.oracle.mask_facts(ids) if engine.oracle is not None else None
    off = offending_tokens(name, ids, mask, labels, engine.contract, newline_lead, facts)
    declared = registry.spec(name)
    shown_at = declared.whole_row_at if position < 0 and declared is not None else position
    roles = labels.role if labels is not None else None
    return RowExplanation(name, row, position, reason, sizes,
                          window(ids, mask, roles, shown_at, engine.vocab, off), len(ids))


def decoded_example(engine: Any, row: int, position: int, name: str, reason: str = "") -> dict[str, Any]:
    """Read one row (a one-row shard read), label it, and cut its excerpt: what summary.json keeps of it."""
    ex = explain_row(name, row, position, reason, engine)
    segs = ex.window.segments
    start, stop = (segs[0].start, segs[-1].end) if segs else (0, 0)
    return {"start": start, "stop": stop, "length": ex.length, "segments": [s.to_dict() for s in segs],
            "offending_spans": [list(span) for span in ex.window.spans],
            "offending_span_count": ex.window.span_count}


def format_failure(result: CheckResult, engine) -> str:
    """The message of a failed contract test: what, how many, where, and what it looks like (the first
    ``engine.examples`` rows, ``--examples N``, decoded)."""
    if result.message:
        return f"{result.check}: {result.message}"
    lines = [f"{result.check}: {result.rows_violating:,} of {result.rows_checked:,} rows violate ({result.scope})"]
    for reason, count in ordered_reasons(result.by_reason, result.severity):
        lines.append(f"  {count:,} × {reason}")
    listed = ", ".join(str(v.row) for v in result.examples[:10])
    more = " …" if result.rows_violating > 10 else ""
    lines.append(f"  first rows: {listed}{more}")
    if result.hint:
        lines.append("  " + result.hint)
    declared = registry.spec(result.check)
    if declared is not None and not declared.decodable:  # the row's tokens are fine (hidden states): say what is wrong
        lines.extend(f"  row {v.row}{f' (position {v.position:,})' if v.position >= 0 else ''}: {v.reason}"
                     for v in result.examples[:engine.examples])
        return "\n".join(lines)
    shown = shown_examples(result.examples, engine.examples, result.by_reason, result.severity,
                           lambda v: v.reason, lambda v: v.row)
    for v in shown:
        e = explain_violation(result, v, engine)
        where = f"token {v.position}" if v.position >= 0 else "whole row"
        runs = e.window.span_count
        spans = f", {runs:,} offending spans" if runs > 1 else ""
        lines.append(f"  row {v.row} ({e.sizes}, {where}{spans}): {v.reason}")
        lines.append("    " + e.text())
    if shown:
        lines.append("  " + LEGEND)
    return "\n".join(lines)


def warn_excerpts(summary: dict[str, Any], limit: int = DEFAULT_EXAMPLES) -> list[str]:
    """Terminal lines: the first ``limit`` example rows of each warning (``--examples N``), as their decoded
    excerpts in summary.json (roles and supervised tokens marked).

    Warnings do not fail a test, so nothing else in the terminal shows their rows.
    """
    lines: list[str] = []
    for name, c in summary["checks"].items():
        if c["verdict"] != "warn" or not c["examples"]:
            continue
        for e in c["examples"][:limit]:
            found = e.get("excerpt") or {"error": "not decoded"}
            if "error" in found:
                text = f"(cannot decode: {found['error']})"
            else:
                segments = [Segment(**seg) for seg in found["segments"]]
                spans = tuple(tuple(span) for span in found.get("offending_spans", ()))
                text = render_segments(Window(segments, found["start"] > 0, found["stop"] < found["length"],
                                              spans, found.get("offending_span_count", len(spans))))
            lines.append(f"  WARN {name}: row {e['row']}: {e['reason']}")
            lines.append(f"    {text}")
    if lines:
        lines.append("  " + LEGEND)
    return lines
