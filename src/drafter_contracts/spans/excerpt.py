"""A row's decoded excerpt with its supervised tokens, roles and offending tokens marked.

An excerpt decodes a window of one row starting a little before its first problem,
and a short window at the start of every later run of offending tokens the first
window does not reach (up to :data:`MAX_SPANS` windows; the rest are counted), so a
row that leaks tool output far from its first slip shows that leak too. Runs of
tokens with the same role, mask state and offending state are decoded together (so
multi-byte characters survive), supervised runs are wrapped in ⟦ ⟧, a role change is
shown once as ‹role›, ▶ starts each run of offending tokens (for the mask contracts:
every token the policy forbids or requires), and `` … `` joins windows apart.
The same runs are :class:`Segment` records for summary.json and the HTML report.
Pure: ids, mask, roles and a vocabulary in; the reports' violating rows (``report/explain.py``) and
the maskers' disagreements use it alike.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..tokenizer.vocabulary import Vocabulary
from .labels import ROLE_NAMES, Role

LEGEND = "legend: ⟦…⟧ loss_mask=1 · ‹role› role from the span oracle · ▶ offending tokens follow · ⏎ newline"
BEFORE, AFTER = 24, 24
#: Windows shown per row: the first problem's, then one per later offending run out of its reach.
MAX_SPANS = 4
#: Tokens shown before a later offending run, and of the run itself.
SPAN_BEFORE, SPAN_SHOWN = 8, 24
#: Offending runs listed per row in summary.json (all are counted).
MAX_LISTED_SPANS = 64
_MAX_RUN_CHARS = 120


def _escape(text: str) -> str:
    return text.replace("\r", "␍").replace("\n", "⏎").replace("\t", "⇥")


def _clip(text: str) -> str:
    if len(text) <= _MAX_RUN_CHARS:
        return text
    half = _MAX_RUN_CHARS // 2
    return f"{text[:half]}…{text[-half:]}"


@dataclass(frozen=True)
class Segment:
    """A run of consecutive tokens with one role, one mask state and one offending state.

    ``text`` is the decoded run as is (newlines and all); renderers escape it. The
    HTML report draws these; the terminal draws them through :func:`render_segments`.
    """

    text: str
    role: str | None  # role name from the span oracle; None without a tokenizer
    supervised: bool
    offending: bool
    start: int  # token index in the row, inclusive
    end: int  # exclusive

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Window:
    """The decoded parts of one row shown for a violation.

    ``segments`` may come from several windows of the row; a segment whose ``start`` is not
    the previous one's ``end`` begins a new window. ``spans`` lists the row's offending runs
    (start, end) — every one, up to :data:`MAX_LISTED_SPANS` — and ``span_count`` counts them.
    """

    segments: list[Segment]
    cut_before: bool
    cut_after: bool
    spans: tuple[tuple[int, int], ...] = ()
    span_count: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"segments": [seg.to_dict() for seg in self.segments],
                "cut_before": self.cut_before, "cut_after": self.cut_after}

    @property
    def spans_not_shown(self) -> int:
        """Offending runs of the row that no window of the excerpt reaches."""
        shown = [(seg.start, seg.end) for seg in self.segments if seg.offending]
        return sum(1 for a, b in self.spans if not any(s < b and a < e for s, e in shown)) + (
            self.span_count - len(self.spans))


def offending_runs(off: np.ndarray) -> np.ndarray:
    """(start, end) of every run of True in a per-token bool array, as an (n, 2) int array."""
    edges = np.diff(np.concatenate(([0], off.astype(np.int8), [0])))
    return np.stack([np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)], axis=1)


def _ranges(n: int, position: int, runs: np.ndarray) -> list[tuple[int, int]]:
    """The token ranges to decode: the first problem's window, then one per later run out of reach."""
    focus = position if position >= 0 else 0
    lo, hi = max(0, focus - BEFORE), min(n, focus + AFTER + 1)
    if position == -1:
        hi = min(n, BEFORE + AFTER)
    elif position == -2:
        lo, hi = max(0, n - BEFORE - AFTER), n
    ranges = [(lo, hi)]
    for start, end in runs.tolist():
        if len(ranges) >= MAX_SPANS:
            break
        if any(a <= start < b for a, b in ranges):
            continue
        ranges.append((max(0, start - SPAN_BEFORE), min(n, start + min(end - start, SPAN_SHOWN) + 1)))
    merged: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _segments(ids: np.ndarray, sup: np.ndarray, rol: np.ndarray | None, off: np.ndarray, lo: int, hi: int,
              vocab: Vocabulary | None) -> list[Segment]:
    """Runs of tokens ``lo..hi`` split at every change of (mask, role, offending), decoded."""
    s, o = sup[lo:hi], off[lo:hi]
    r = rol[lo:hi] if rol is not None else np.zeros(hi - lo, dtype=np.uint8)
    change = (np.diff(s.astype(np.int8)) != 0) | (np.diff(r.astype(np.int16)) != 0) | (np.diff(o.astype(np.int8)) != 0)
    cuts = (np.flatnonzero(change) + 1).tolist()
    out: list[Segment] = []
    for a, b in zip([0, *cuts], [*cuts, hi - lo]):
        if a == b:
            continue
        chunk = ids[lo + a:lo + b]
        text = vocab.decode(chunk) if vocab is not None else " ".join(str(int(i)) for i in chunk)
        role = ROLE_NAMES[Role(int(r[a]))] if rol is not None else None
        out.append(Segment(text, role, bool(s[a]), bool(o[a]), lo + a, lo + b))
    return out


def window(ids: np.ndarray, mask: np.ndarray | None, roles: np.ndarray | None, position: int,
           vocab: Vocabulary | None, offending: np.ndarray | None = None) -> Window:
    """Segments of a row around ``position`` (-1: the row's start, -2: its end), and around
    the start of each later offending run out of that window's reach.

    ``offending`` (bool per token of the row) marks every token that breaks the rule;
    without it only the token at ``position`` is marked.
    """
    n = len(ids)
    sup = mask.astype(bool) if mask is not None and len(mask) == n else np.zeros(n, dtype=bool)
    if offending is not None and len(offending) == n:
        off = offending.astype(bool)
    else:
        off = np.zeros(n, dtype=bool)
        if 0 <= position < n:
            off[position] = True
    runs = offending_runs(off)
    ranges = _ranges(n, position, runs)
    segments = [seg for lo, hi in ranges for seg in _segments(ids, sup, roles, off, lo, hi, vocab)]
    listed = tuple((int(a), int(b)) for a, b in runs[:MAX_LISTED_SPANS].tolist())
    return Window(segments, ranges[0][0] > 0, ranges[-1][1] < n, listed, len(runs))


def render_segments(w: Window) -> str:
    """The compact one-line form: ‹role› on role changes, ⟦supervised⟧, ▶ before offending runs."""
    parts = ["…" if w.cut_before else ""]
    last_role = None
    last_end = None
    for seg in w.segments:
        piece = " … " if last_end is not None and seg.start != last_end else ""
        last_end = seg.end
        if seg.role is not None and seg.role != last_role:
            piece += f"‹{seg.role}›"
            last_role = seg.role
        if seg.offending:
            piece += "▶"
        text = _clip(_escape(seg.text))
        piece += f"⟦{text}⟧" if seg.supervised else text
        parts.append(piece)
    parts.append("…" if w.cut_after else "")
    hidden = w.spans_not_shown
    if hidden:
        parts.append(f" (+{hidden:,} more offending span{'s' if hidden != 1 else ''})")
    return "".join(parts)


def excerpt(ids: np.ndarray, mask: np.ndarray | None, roles: np.ndarray | None, position: int,
            vocab: Vocabulary | None, offending: np.ndarray | None = None) -> str:
    """One line: the decoded window of a row around ``position`` (-1: the row's start, -2: its end)."""
    return render_segments(window(ids, mask, roles, position, vocab, offending))
