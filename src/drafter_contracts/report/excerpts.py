"""Violating rows as structured segments, for summary.json and report.html.

A segment is a run of tokens with one role and one mask state, decoded together:
``{"text", "role", "supervised", "offending"}``. The HTML renderer draws any list
of such segments, so a richer excerpt builder can replace this one without
touching the page.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..spans import chatml
from ..spans.labels import ROLE_NAMES, Role

#: Tokens shown on each side of the first offending token.
BEFORE, AFTER = 32, 32
#: Decoded examples kept per failing contract.
MAX_DECODED = 3


def segments(ids: np.ndarray, mask: np.ndarray | None, roles: np.ndarray | None, position: int,
             decode: Any | None) -> dict[str, Any]:
    """A window of one row around ``position`` (-1: the whole row's start, -2: its end) as segments."""
    n = len(ids)
    focus = max(position, 0)
    lo, hi = max(0, focus - BEFORE), min(n, focus + AFTER + 1)
    if position == -1:
        hi = min(n, BEFORE + AFTER)
    elif position == -2:
        lo, hi = max(0, n - BEFORE - AFTER), n
    sup = mask[lo:hi] if mask is not None and len(mask) == n else np.zeros(hi - lo, dtype=bool)
    rol = roles[lo:hi] if roles is not None else None
    change = np.diff(sup.astype(np.int8)) != 0
    if rol is not None:
        change |= np.diff(rol.astype(np.int16)) != 0
    cuts = set((np.flatnonzero(change) + 1).tolist())
    if position >= 0:
        cuts |= {focus - lo, focus - lo + 1}
    cuts = sorted(c for c in cuts if 0 < c < hi - lo)
    out = []
    for a, b in zip([0, *cuts], [*cuts, hi - lo]):
        chunk = ids[lo + a:lo + b]
        text = decode(chunk) if decode is not None else " ".join(str(int(i)) for i in chunk)
        out.append({
            "text": text,
            "role": ROLE_NAMES[Role(int(rol[a]))] if rol is not None else None,
            "supervised": bool(sup[a]),
            "offending": position >= 0 and lo + a == focus,
        })
    return {"start": lo, "stop": hi, "length": n, "segments": out}


def decoded_example(engine: Any, row: int, position: int, check: str) -> dict[str, Any]:
    """Read one row (a one-row shard read), label it, and cut its excerpt."""
    ids, mask, _ = engine.row(row)
    roles = None
    if engine.profile is not None and len(ids):
        roles = chatml.label(ids, np.array([0, len(ids)], dtype=np.int64), engine.profile, engine.contract.max_len).role
    if position < 0 and check == "min_supervised":
        position = -2  # a row without enough supervision is best shown by its end, where the reply is
    decode = engine.vocab.decode if engine.vocab is not None else None
    return segments(ids, mask, roles, position, decode)
