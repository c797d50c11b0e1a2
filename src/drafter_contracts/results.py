"""What checks return: small, picklable, JSON-ready records. Reports read these, never the data."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable

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
class RowViolations:
    """Every violating row of one contract on one shard, as arrays: what ``violations.parquet`` lists.

    One entry per violating row, rows ascending. Arrays rather than one :class:`Violation` per row,
    since a shard may violate on every row and a run lists them all (``examples`` keep only
    :data:`MAX_EXAMPLES`). ``codes`` index ``reasons``; ``token_ids`` (the id at ``positions``, -1
    for a whole-row problem) are filled in by whoever holds the shard's ids (``Engine.first_tokens``).
    """

    check: str
    rows: np.ndarray  # int64: global row index
    positions: np.ndarray  # int64: first offending token position in the row, -1: the whole row
    codes: np.ndarray  # int32: index into ``reasons``
    reasons: list[str]
    token_ids: np.ndarray | None = None  # int64: the id at ``positions``, -1 where there is none

    @classmethod
    def of(cls, check: str, rows: np.ndarray, positions: np.ndarray, codes: np.ndarray,
           reason_text: dict[int, str]) -> "RowViolations":
        """From a check's own reason codes (any integers): renumbered 0..k-1 into a reason table."""
        used, index = np.unique(np.asarray(codes, dtype=np.int64), return_inverse=True)
        return cls(check, np.asarray(rows, dtype=np.int64), np.asarray(positions, dtype=np.int64),
                   index.astype(np.int32).reshape(-1), [reason_text[int(c)] for c in used])

    def __len__(self) -> int:
        return int(len(self.rows))

    def to_wire(self) -> dict[str, Any]:
        """A dict of arrays and one short list: ``run/wire.py`` sends the arrays as raw buffers."""
        return {"check": self.check, "rows": self.rows, "positions": self.positions, "codes": self.codes,
                "reasons": list(self.reasons),
                "token_ids": self.token_ids if self.token_ids is not None else np.full(len(self.rows), -1, np.int64)}

    @classmethod
    def from_wire(cls, doc: dict[str, Any]) -> "RowViolations":
        return cls(doc["check"], np.asarray(doc["rows"], np.int64), np.asarray(doc["positions"], np.int64),
                   np.asarray(doc["codes"], np.int32), list(doc["reasons"]), np.asarray(doc["token_ids"], np.int64))


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
    #: Severity rank per reason of ``by_reason`` (0 most severe): reports list reasons in this order.
    severity: dict[str, int] = field(default_factory=dict)
    #: Every violating row (``row_result`` / ``multi_reason_result`` fill it); travels beside the record,
    #: in ``ShardReport.violations``, never in it.
    listed: RowViolations | None = field(default=None, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.skipped is None and self.rows_violating == 0 and not self.message

    def to_dict(self) -> dict[str, Any]:
        """The reported record (no ``by_code``, no ``listed``: those arrays would be deep-copied for nothing)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("by_code", "listed")}
        out["by_reason"], out["severity"] = dict(self.by_reason), dict(self.severity)
        out["examples"] = [asdict(v) for v in self.examples]
        return out


@dataclass
class ShardReport:
    """What one shard's test returns, whole: its contracts' results, its mergeable stats and the
    partials of whole-dataset contracts (row hashes). ``run/wire.py`` encodes exactly this record;
    ``report.reducer.Reducer.add`` takes it, with or without xdist."""

    shard: int
    results: list[dict[str, Any]]  # CheckResult.to_dict() each, plus its "seconds"
    stats: dict[str, Any] | None = None  # sums, extremes, fixed-bin histograms, sparse id counts (arrays)
    partials: dict[str, Any] = field(default_factory=dict)  # contract name -> what the shard sends it
    unread: str | None = None  # why the worker did not read the shard (damaged buffers, files changed)
    #: Every violating row of each per-row contract that lists them (``CheckResult.listed``).
    violations: list[RowViolations] = field(default_factory=list)


def row_result(name: str, scope: str, rows_checked: int, rows: np.ndarray, positions: np.ndarray,
               reasons: np.ndarray, reason_text: dict[int, str], row_offset: int) -> CheckResult:
    """Build a CheckResult from per-row arrays (shard-local rows, one entry per violating row)."""
    order = np.argsort(rows, kind="stable")
    rows, positions, reasons = rows[order], positions[order], reasons[order]
    codes, counts = np.unique(reasons, return_counts=True)
    by_reason = {reason_text[int(c)]: int(k) for c, k in zip(codes, counts)}
    examples = [Violation(int(r) + row_offset, int(p), reason_text[int(c)])
                for r, p, c in zip(rows[:MAX_EXAMPLES], positions[:MAX_EXAMPLES], reasons[:MAX_EXAMPLES])]
    listed = (RowViolations.of(name, rows.astype(np.int64) + row_offset, positions, reasons, reason_text)
              if len(rows) else None)
    return CheckResult(name, scope, rows_checked, int(len(rows)), by_reason, examples,
                       by_code={int(c): int(k) for c, k in zip(codes, counts)}, listed=listed)


#: The rank of a reason no severity was given for: after every ranked one.
UNRANKED = 99


def ordered_reasons(by_reason: dict[str, int], severity: dict[str, int] | None = None) -> list[tuple[str, int]]:
    """``by_reason``'s items, most severe first (then most rows): what every report lists first."""
    rank = severity or {}
    return sorted(by_reason.items(), key=lambda kv: (rank.get(kv[0], UNRANKED), -kv[1], kv[0]))


def multi_reason_result(name: str, scope: str, rows_checked: int, hit_rows: np.ndarray, hit_positions: np.ndarray,
                        hit_codes: np.ndarray, reason_text: dict[int, str], rank: dict[int, int],
                        row_offset: int) -> CheckResult:
    """A CheckResult from every offending token (shard-local row, position in it, reason code each).

    A row that breaks the contract in several ways counts under each of its reasons (``by_reason``:
    rows per reason; ``rows_violating`` counts it once). Its example names its most severe reason (the
    lowest ``rank``) at that reason's first token, and the others after it; examples and reasons are
    listed most severe first.
    """
    if not len(hit_rows):
        return CheckResult(name, scope, rows_checked)
    codes = hit_codes.astype(np.int64)
    ranks = np.array([rank.get(int(c), UNRANKED) for c in range(int(codes.max()) + 1)], dtype=np.int64)[codes]
    order = np.lexsort((hit_positions, ranks, hit_rows))  # by row, most severe first, earliest first
    rows, positions, codes, ranks = hit_rows[order], hit_positions[order], codes[order], ranks[order]
    width = int(codes.max()) + 1
    pairs = np.unique(rows.astype(np.int64) * width + codes)  # (row, reason) once each
    pair_rows, pair_codes = pairs // width, pairs % width
    by_code_codes, counts = np.unique(pair_codes, return_counts=True)
    by_code = {int(c): int(k) for c, k in zip(by_code_codes, counts)}
    by_reason = dict(ordered_reasons({reason_text[c]: k for c, k in by_code.items()},
                                     {reason_text[c]: rank.get(c, UNRANKED) for c in by_code}))
    row_ids, first = np.unique(rows, return_index=True)  # each row's most severe, earliest offence
    shown = np.lexsort((row_ids, ranks[first]))[:MAX_EXAMPLES]
    examples = []
    starts = np.searchsorted(pair_rows, row_ids)  # pairs are sorted by row: each row's reasons are one slice
    stops = np.searchsorted(pair_rows, row_ids, side="right")
    for i in shown.tolist():
        r, c = int(row_ids[i]), int(codes[first[i]])
        mine = pair_codes[starts[i]:stops[i]].tolist()
        others = sorted((x for x in mine if x != c), key=lambda x: (rank.get(x, UNRANKED), x))
        also = f" (also: {'; '.join(reason_text[x] for x in others)})" if others else ""
        examples.append(Violation(r + row_offset, int(positions[first[i]]), reason_text[c] + also))
    listed = RowViolations.of(name, row_ids.astype(np.int64) + row_offset, positions[first], codes[first],
                              reason_text)  # each row once: its most severe reason, at its first token
    return CheckResult(name, scope, rows_checked, int(len(row_ids)), by_reason, examples, by_code=by_code,
                       severity={reason_text[c]: rank.get(c, UNRANKED) for c in by_code}, listed=listed)


def shown_examples(examples: list[Any], n: int, by_reason: dict[str, int], severity: dict[str, int] | None,
                   reason_of: Callable[[Any], str], row_of: Callable[[Any], int]) -> list[Any]:
    """The ``n`` violating rows to decode: the lowest row of each reason first (the most severe reasons
    first: :func:`ordered_reasons`), then the lowest rows; in row order.

    The lowest rows alone can all be one reason (eight shifted rows hide the user text a fourth row
    supervises); one of each shows every kind of fault the contract found. Which rows depends on the
    rows and reasons only, never on the sharding. An example's reason may carry more after its reason
    (``(also: ...)``, ``; as it stands: ...``): it counts under the longest reason it starts with.
    """
    if n <= 0:
        return []
    ordered = sorted(examples, key=row_of)
    reasons = [r for r, _ in ordered_reasons(by_reason, severity)]
    names = sorted(reasons, key=len, reverse=True)
    picked: list[Any] = []
    for reason in reasons:
        if len(picked) >= n:
            break
        own = next((e for e in ordered if next((r for r in names if reason_of(e).startswith(r)), None) == reason),
                   None)
        if own is not None and not any(own is x for x in picked):
            picked.append(own)
    picked += [e for e in ordered if not any(e is x for x in picked)][:n - len(picked)]
    return sorted(picked, key=row_of)


def first_per_row(token_positions: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For sorted flat token positions: the rows they fall in and the first position within each row."""
    if len(token_positions) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    rows = np.searchsorted(offsets, token_positions, side="right") - 1
    uniq, first = np.unique(rows, return_index=True)
    return uniq, token_positions[first] - offsets[uniq]
