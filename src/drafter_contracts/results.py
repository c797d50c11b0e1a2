"""What checks return: small, picklable, JSON-ready records. Reports read these, never the data."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

#: How many violating rows a result keeps by index (the count stays exact).
MAX_EXAMPLES = 20


@dataclass(frozen=True)
class Violation:
    """One violating row: global row index, token position of its first problem (-1: whole row), why."""

    row: int
    position: int
    reason: str


@dataclass
class CheckResult:
    """The verdict of one contract on one shard (or on the whole dataset for global contracts)."""

    check: str
    scope: str  # shard id, or "dataset"
    rows_checked: int = 0
    rows_violating: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)
    examples: list[Violation] = field(default_factory=list)
    message: str = ""  # for global checks: the whole story in one line
    skipped: str | None = None  # reason, when the contract could not be evaluated
    report_only: bool = False  # suspicious-content contracts: violations warn, the test passes
    hint: str = ""  # when most rows break a mask rule: the convention they fit, found by running it
    #: Violating rows per reason code (what hints are keyed by); not part of the reported record.
    by_code: dict[int, int] = field(default_factory=dict, compare=False)

    @property
    def ok(self) -> bool:
        return self.skipped is None and self.rows_violating == 0 and not self.message

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["by_code"]
        return out


@dataclass
class ShardReport:
    """What one shard's test returns, whole: its contracts' results, its mergeable stats and the
    partials of whole-dataset contracts (row hashes). ``wire.py`` encodes exactly this record;
    ``report.reducer.Reducer.add`` takes it, with or without xdist."""

    shard: int
    results: list[dict[str, Any]]  # CheckResult.to_dict() each, plus its "seconds"
    stats: dict[str, Any] | None = None  # sums, extremes, fixed-bin histograms, sparse id counts (arrays)
    partials: dict[str, Any] = field(default_factory=dict)  # contract name -> what the shard sends it
    unread: str | None = None  # why the worker did not read the shard (damaged buffers, files changed)


def row_result(check: str, scope: str, rows_checked: int, rows: np.ndarray, positions: np.ndarray,
               reasons: np.ndarray, reason_text: dict[int, str], row_offset: int) -> CheckResult:
    """Build a CheckResult from per-row arrays (shard-local rows, one entry per violating row)."""
    order = np.argsort(rows, kind="stable")
    rows, positions, reasons = rows[order], positions[order], reasons[order]
    codes, counts = np.unique(reasons, return_counts=True)
    by_reason = {reason_text[int(c)]: int(k) for c, k in zip(codes, counts)}
    examples = [Violation(int(r) + row_offset, int(p), reason_text[int(c)])
                for r, p, c in zip(rows[:MAX_EXAMPLES], positions[:MAX_EXAMPLES], reasons[:MAX_EXAMPLES])]
    return CheckResult(check, scope, rows_checked, int(len(rows)), by_reason, examples,
                       by_code={int(c): int(k) for c, k in zip(codes, counts)})


def first_per_row(token_positions: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For sorted flat token positions: the rows they fall in and the first position within each row."""
    if len(token_positions) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    rows = np.searchsorted(offsets, token_positions, side="right") - 1
    uniq, first = np.unique(rows, return_index=True)
    return uniq, token_positions[first] - offsets[uniq]
