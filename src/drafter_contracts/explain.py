"""Failure messages a person can act on: counts, row indices, and decoded excerpts
(``spans/excerpt.py``) of the first violating rows, every offending token marked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .checks import registry
from .contract import Contract
from .results import CheckResult, Violation, ordered_reasons, shown_examples
from .spans.excerpt import LEGEND, Window, render_segments, window
from .spans.labels import Labels
from .spans.turns import MaskFacts


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
