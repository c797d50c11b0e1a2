"""Failure messages a person can act on: counts, row indices, and decoded excerpts.

An excerpt decodes a window of one row around its first problem. Runs of tokens
with the same role and mask state are decoded together (so multi-byte characters
survive), supervised runs are wrapped in ⟦ ⟧, a role change is shown as ‹role›,
and ▶ points at the first offending token.
"""

from __future__ import annotations

import numpy as np

from .results import CheckResult
from .spans import chatml
from .spans.labels import ROLE_NAMES, Role
from .vocab import Vocabulary

LEGEND = "legend: ⟦…⟧ loss_mask=1 · ‹role› role from the span oracle · ▶ first offending token · ⏎ newline"
MAX_EXCERPTS = 3
BEFORE, AFTER = 24, 24
_MAX_RUN_CHARS = 120


def _escape(text: str) -> str:
    return text.replace("\r", "␍").replace("\n", "⏎").replace("\t", "⇥")


def _clip(text: str) -> str:
    if len(text) <= _MAX_RUN_CHARS:
        return text
    half = _MAX_RUN_CHARS // 2
    return f"{text[:half]}…{text[-half:]}"


def excerpt(ids: np.ndarray, mask: np.ndarray | None, roles: np.ndarray | None, position: int,
            vocab: Vocabulary | None) -> str:
    """One line: the decoded window of a row around ``position`` (-1: the row's start, -2: its end)."""
    n = len(ids)
    focus = position if position >= 0 else 0
    lo, hi = max(0, focus - BEFORE), min(n, focus + AFTER + 1)
    if position == -1:
        hi = min(n, BEFORE + AFTER)
    elif position == -2:
        lo, hi = max(0, n - BEFORE - AFTER), n
    sup = mask[lo:hi] if mask is not None and len(mask) == n else np.zeros(hi - lo, dtype=bool)
    rol = roles[lo:hi] if roles is not None else np.zeros(hi - lo, dtype=np.uint8)
    # Split into runs at every change of (mask, role) and right before the focus token.
    cuts = np.flatnonzero((np.diff(sup.astype(np.int8)) != 0) | (np.diff(rol.astype(np.int16)) != 0)) + 1
    cuts = sorted(set(cuts.tolist()) | ({focus - lo} if position >= 0 and focus > lo else set()))
    parts = ["…" if lo > 0 else ""]
    last_role = None
    for a, b in zip([0, *cuts], [*cuts, hi - lo]):
        if a == b:
            continue
        chunk = ids[lo + a:lo + b]
        text = vocab.decode(chunk) if vocab is not None else " ".join(str(int(i)) for i in chunk)
        text = _clip(_escape(text))
        piece = ""
        if roles is not None and rol[a] != last_role:
            piece += f"‹{ROLE_NAMES[Role(int(rol[a]))]}›"
            last_role = rol[a]
        if position >= 0 and lo + a == focus:
            piece += "▶"
        piece += f"⟦{text}⟧" if sup[a] else text
        parts.append(piece)
    parts.append("…" if hi < n else "")
    return "".join(parts)


def _roles(ids: np.ndarray, profile: chatml.ChatMLProfile | None, max_len: int) -> np.ndarray | None:
    if profile is None or len(ids) == 0:
        return None
    return chatml.label(ids, np.array([0, len(ids)], dtype=np.int64), profile, max_len).role


def format_failure(result: CheckResult, engine) -> str:
    """The message of a failed contract test: what, how many, where, and what it looks like."""
    if result.message:
        return f"{result.check}: {result.message}"
    lines = [f"{result.check}: {result.rows_violating:,} of {result.rows_checked:,} rows violate ({result.scope})"]
    for reason, count in sorted(result.by_reason.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {count:,} × {reason}")
    shown = ", ".join(str(v.row) for v in result.examples[:10])
    more = " …" if result.rows_violating > 10 else ""
    lines.append(f"  first rows: {shown}{more}")
    for v in result.examples[:MAX_EXCERPTS]:
        ids, mask, seq_len = engine.row(v.row)
        where = f"token {v.position}" if v.position >= 0 else "whole row"
        if mask is not None and len(mask) == len(ids) and seq_len == len(ids):
            sizes = f"seq_len {len(ids)}"
        else:
            sizes = f"len(input_ids) {len(ids)}, len(loss_mask) {'n/a' if mask is None else len(mask)}, seq_len {seq_len}"
        lines.append(f"  row {v.row} ({sizes}, {where}): {v.reason}")
        roles = _roles(ids, engine.profile, engine.contract.max_len)
        # A row without enough supervision is best shown by its end, where the reply is.
        position = -2 if v.position < 0 and result.check == "min_supervised" else v.position
        lines.append("    " + excerpt(ids, mask, roles, position, engine.vocab))
    lines.append("  " + LEGEND)
    return "\n".join(lines)
