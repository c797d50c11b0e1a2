"""Contracts over the whole dataset, answered from metadata alone (no token is read)."""

from __future__ import annotations

from ..contract import Contract

from ..contract.file import accepted_types
from ..dataset.layouts import DEFAULT_TYPES, Layout
from ..results import CheckResult
from .declare import Scope, Spec, register


def check_schema(column_types: dict[str, str], contract: Contract, layout: Layout | None = None) -> CheckResult:
    """Exactly the declared columns with the declared Arrow types (extra ones only if allowed), read through
    the dataset's layout (docs/layouts.md).

    In the speculators layout (or without a layout) that is the contract's [schema] as written. In
    another layout the speculators columns a contract declares are satisfied by the columns playing
    their part: ``loss_mask`` by the layout's mask source, ``seq_len`` by its derivation, and each
    column the layout reads but the contract does not name is held to the declaration of its part
    (the types ``dataset.layouts.DEFAULT_TYPES`` accepts for labels and attention_mask); a ``[1, L]`` column
    is accepted when its rows' type is. The trainer's source columns a layout keeps (``dataset.layouts.SOURCE_COLUMNS``,
    TRL's ``messages``) are not extra; any other column the layout does not read is.
    """
    parts = layout.parts() if layout is not None and not layout.plain else {}
    nested = layout.nested if layout is not None else frozenset()
    problems = []
    for col, declared in contract.columns.items():
        got = column_types.get(col)
        if got is None and parts and _stands_in(col, parts):
            continue
        problems += _type_problem(col, got, accepted_types(declared), col in nested)
    for col, part in parts.items():
        if col in contract.columns or col not in column_types:
            continue
        want = _part_types(part, contract)
        if want is not None:
            problems += _type_problem(col, column_types[col], want, col in nested)
    source = layout.source if layout is not None else ()
    extra = [c for c in column_types if c not in contract.columns and c not in source
             and (c not in parts or _part_types(parts[c], contract) is None)]
    if extra and not contract.allow_extra_columns:
        problems.append(f"extra column{'s' if len(extra) > 1 else ''} {', '.join(extra)} "
                        "(set allow_extra_columns to accept)")
    examined = set(contract.columns) | set(column_types)  # counted as the reports' "columns" (Spec.unit)
    return CheckResult("schema", "dataset", rows_checked=len(examined), message="; ".join(problems))


def _stands_in(col: str, parts: dict[str, str]) -> bool:
    """A declared speculators column another column plays (``loss_mask``), or one derived (``seq_len``)."""
    return col == "seq_len" or (col == "loss_mask" and any(p in ("loss_mask", "labels") for p in parts.values()))


def _part_types(part: str, contract: Contract) -> tuple[str, ...] | None:
    """The types a column playing ``part`` may have: its part's declaration, else the layout's defaults."""
    if part in contract.columns:
        return accepted_types(contract.columns[part])
    return DEFAULT_TYPES.get(part)


def _type_problem(col: str, got: str | None, want: tuple[str, ...], nested: bool) -> list[str]:
    said = " or ".join(want)
    if got is None:
        return [f"missing column {col} ({said})"]
    if got in want or (nested and got.startswith("list<") and got[5:-1] in want):
        return []
    return [f"{col} is {got}, contract says {said}"]


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
              unit="columns", run=lambda e: check_schema(e.dataset.column_types(), e.contract, e.dataset.layout)))
register(Spec("row_count", Scope.DATASET, "the row count is within the tolerance of the pinned count",
              needs=frozenset(), run=lambda e: check_row_count(e.dataset.num_rows, e.contract)))
register(Spec("not_empty", Scope.DATASET, "at least one row", needs=frozenset(),
              run=lambda e: check_not_empty(e.dataset.num_rows)))
