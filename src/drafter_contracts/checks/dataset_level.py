"""Contracts over the whole dataset, answered from metadata alone (no token is read)."""

from __future__ import annotations

from ..config import Contract, accepted_types
from ..results import CheckResult
from .registry import Scope, Spec, register


def check_schema(column_types: dict[str, str], contract: Contract) -> CheckResult:
    """Exactly the declared columns with the declared Arrow types (extra ones only if allowed)."""
    problems = []
    for col, declared in contract.columns.items():
        want = accepted_types(declared)
        said = " or ".join(want)
        got = column_types.get(col)
        if got is None:
            problems.append(f"missing column {col} ({said})")
        elif got not in want:
            problems.append(f"{col} is {got}, contract says {said}")
    extra = [c for c in column_types if c not in contract.columns]
    if extra and not contract.allow_extra_columns:
        problems.append(f"extra column{'s' if len(extra) > 1 else ''} {', '.join(extra)} "
                        "(set allow_extra_columns to accept)")
    return CheckResult("schema", "dataset", message="; ".join(problems))


def check_row_count(num_rows: int, contract: Contract) -> CheckResult:
    """Row count within the declared tolerance of the expected count."""
    bounds = contract.count_bounds()
    if bounds is None:
        return CheckResult("row_count", "dataset", skipped=(
            "not pinned: pass --expected-count or a contract from init (drafter-contracts init DATASET)"))
    low, high = bounds
    message = ""
    if not low <= num_rows <= high:
        diff = num_rows - contract.expected_count
        share = f"{100.0 * diff / contract.expected_count:+.2f}%" if contract.expected_count else "n/a"
        message = (f"{num_rows:,} rows, expected {contract.expected_count:,} ± {contract.count_tolerance} "
                   f"(allowed {low:,}..{high:,}; off by {diff:+,} rows, {share})")
    return CheckResult("row_count", "dataset", rows_checked=num_rows, message=message)


def check_not_empty(num_rows: int) -> CheckResult:
    """A dataset with no rows trains nothing (speculators once accepted an empty output silently)."""
    return CheckResult("not_empty", "dataset", rows_checked=num_rows,
                       message="" if num_rows > 0 else "the dataset has 0 rows")


register(Spec("schema", Scope.DATASET, "exactly the declared columns with an accepted Arrow type", needs=frozenset(),
              run=lambda e: check_schema(e.dataset.column_types(), e.contract)))
register(Spec("row_count", Scope.DATASET, "the row count is within the tolerance of the pinned count",
              needs=frozenset(), run=lambda e: check_row_count(e.dataset.num_rows, e.contract)))
register(Spec("not_empty", Scope.DATASET, "at least one row", needs=frozenset(),
              run=lambda e: check_not_empty(e.dataset.num_rows)))
