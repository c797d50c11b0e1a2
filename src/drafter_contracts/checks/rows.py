"""Per-row contracts on lengths, nulls, ids and supervision counts, vectorized over a shard."""

from __future__ import annotations

import numpy as np

from ..contract import Contract
from ..dataset.layout_rows import ShardArrays
from ..results import CheckResult, first_per_row, row_result
from .declare import IDS, MASK, RAW, TOKENIZER, Scope, Spec, register
from ..dataset.row_view import RowView, problem_rows


def _whole_rows(name: str, a: ShardArrays, flags: dict[int, tuple[np.ndarray, str]]) -> CheckResult:
    """Result for row-level defects: ``flags`` maps a reason code to (bool per row, text)."""
    codes = np.zeros(a.shard.rows, dtype=np.int8)
    for code in sorted(flags, reverse=True):  # the lowest code wins when a row has several
        codes[flags[code][0]] = code
    rows = np.flatnonzero(codes)
    return row_result(name, a.shard.id, a.shard.rows, rows, np.full(len(rows), -1), codes[rows],
                      {c: t for c, (_, t) in flags.items()}, a.shard.start)


def check_no_nulls(a: ShardArrays) -> CheckResult:
    """No null row and no null element in any column (the layout's own columns too, by their names)."""
    flags: dict[int, tuple[np.ndarray, str]] = {}
    code = 1
    for name, col in ((a.names[0], a.input_ids), (a.names[1], a.loss_mask), *a.extra):
        if col is None:
            continue
        if col.null_rows is not None:
            flags[code] = (col.null_rows, f"{name} is null")
        code += 1
        if col.null_elements is not None:
            rows = np.zeros(a.shard.rows, dtype=bool)
            rows[np.searchsorted(col.offsets, np.flatnonzero(col.null_elements), side="right") - 1] = True
            flags[code] = (rows, f"{name} has null elements")
        code += 1
    if a.seq_len_nulls is not None:
        flags[code] = (a.seq_len_nulls, "seq_len is null")
    return _whole_rows("no_nulls", a, flags)


def check_no_empty_rows(a: ShardArrays) -> CheckResult:
    """No row with zero tokens (it would crash or silently skew a packed batch)."""
    return _whole_rows("no_empty_rows", a, {1: (problem_rows(a)["empty"], "row has no tokens")})


def check_lengths_agree(a: ShardArrays) -> CheckResult:
    """``len(input_ids) == len(loss_mask) == seq_len``: a skew shifts every later mask when rows are packed.

    In a padded layout the lengths are those of the rows without their padding, and the mask column is the
    layout's (labels, assistant_masks, ...), named as such."""
    p = problem_rows(a)
    ok_rows = ~(p["null"] | p["empty"])
    ids_name, mask_name = a.names
    flags: dict[int, tuple[np.ndarray, str]] = {}
    if a.input_ids is not None and a.loss_mask is not None:
        flags[1] = (ok_rows & (a.input_ids.lengths != a.loss_mask.lengths), f"len({ids_name}) != len({mask_name})")
    if a.input_ids is not None and a.seq_len is not None:
        flags[2] = (ok_rows & (a.input_ids.lengths != a.seq_len), f"seq_len != len({ids_name})")
    return _whole_rows("lengths_agree", a, flags)


def check_mask_values(a: ShardArrays) -> CheckResult:
    """An integer ``loss_mask`` holds only 0 and 1 (speculators writes torch.long masks).

    Label-style values (-100) or counts (2) would be read as "supervised" by a
    trainer that tests ``!= 0`` and as garbage by one that multiplies.
    """
    col = a.loss_mask
    if col is None or col.values.dtype == np.bool_:
        return CheckResult("mask_values", a.shard.id, rows_checked=a.shard.rows)
    bad = (col.values != 0) & (col.values != 1)
    if col.null_elements is not None:
        bad &= ~col.null_elements
    found, first = first_per_row(np.flatnonzero(bad), col.offsets)
    return row_result("mask_values", a.shard.id, a.shard.rows, found, first, np.ones(len(found), dtype=np.int8),
                      {1: f"{a.names[1]} value other than 0 or 1"}, a.shard.start)


def check_seq_len_bounds(view: RowView, a: ShardArrays, contract: Contract) -> CheckResult:
    """``min_len <= seq_len <= max_len`` (an unbounded row means truncation did not happen)."""
    lengths = view.lengths
    short = lengths < contract.min_len
    long = lengths > contract.max_len
    rows = np.flatnonzero(short | long)
    reasons = np.where(long[rows], 2, 1)
    return row_result("seq_len_bounds", a.shard.id, len(view.rows), view.rows[rows], np.full(len(rows), -1), reasons,
                      {1: f"seq_len below min_len {contract.min_len}", 2: f"seq_len above max_len {contract.max_len}"},
                      a.shard.start)


def check_ids_known(view: RowView, a: ShardArrays, known: np.ndarray, outside: int | None = None) -> CheckResult:
    """Every id is a token of the tokenizer, so every row decodes and embeds to a trained row.

    ``outside``: the ids outside ``[0, len(known))``, when the shard's token pass counted them
    on its way; zero, with a gap-free vocabulary, settles the check without reading an id.
    """
    ids = view.ids
    in_range = (outside == 0 if outside is not None
                else (not len(ids) or (int(ids.min()) >= 0 and int(ids.max()) < len(known))))
    if len(ids) and known.all() and in_range:
        bad = np.zeros(0, dtype=bool)  # every id in range of a gap-free vocabulary: two reductions, no gather
    else:
        bad = ~((ids >= 0) & (ids < len(known)) & known[np.clip(ids, 0, len(known) - 1)])
    rows, first = first_per_row(np.flatnonzero(bad), view.offsets)
    reasons = np.where(ids[view.offsets[rows] + first] >= len(known), 2, 1) if len(rows) else np.zeros(0, int)
    return row_result("ids_known", a.shard.id, len(view.rows), view.rows[rows], first, reasons,
                      {1: "id not in the tokenizer vocabulary",
                       2: f"id >= tokenizer size {len(known)} (a padded-embedding id or another tokenizer's?)"},
                      a.shard.start)


def supervised_per_row(view: RowView) -> np.ndarray:
    """Supervised-token count of every view row (prefix sums shared by the shard's checks: no per-row loop)."""
    return view.supervised_per_row


def check_min_supervised(view: RowView, a: ShardArrays, contract: Contract) -> CheckResult:
    """At least ``min_supervised`` tokens per row carry loss; fewer means the row teaches nothing."""
    counts = supervised_per_row(view)
    rows = np.flatnonzero(counts < contract.min_supervised)
    return row_result("min_supervised", a.shard.id, len(view.rows), view.rows[rows], np.full(len(rows), -1),
                      np.ones(len(rows), dtype=np.int8),
                      {1: f"fewer than {contract.min_supervised} supervised token(s)"}, a.shard.start)


# --------------------------------------------------------------------------- the registry

register(Spec("no_nulls", Scope.ROW, "no null row or element", needs=frozenset({RAW}),
              run=lambda e, w: check_no_nulls(w.arrays)))
register(Spec("no_empty_rows", Scope.ROW, "no row without tokens", needs=frozenset({RAW}),
              run=lambda e, w: check_no_empty_rows(w.arrays)))
register(Spec("lengths_agree", Scope.ROW, "len(input_ids) == len(loss_mask) == seq_len", needs=frozenset({RAW}),
              run=lambda e, w: check_lengths_agree(w.arrays)))
register(Spec("mask_values", Scope.ROW, "an integer loss_mask holds only 0 and 1", needs=frozenset({RAW, IDS, MASK}),
              run=lambda e, w: check_mask_values(w.arrays)))
register(Spec("seq_len_bounds", Scope.ROW, "min_len <= seq_len <= max_len",
              run=lambda e, w: check_seq_len_bounds(w.view, w.arrays, e.contract)))
register(Spec("ids_known", Scope.ROW, "every id is a token of the tokenizer", needs=frozenset({IDS, TOKENIZER}),
              run=lambda e, w: check_ids_known(w.view, w.arrays, e.vocab.known, e.outside_ids(w))))
register(Spec("min_supervised", Scope.ROW, "at least min_supervised supervised tokens in every row",
              needs=frozenset({IDS, MASK}), whole_row_at=-2,  # a row short of supervision is best shown by its end
              run=lambda e, w: check_min_supervised(w.view, w.arrays, e.contract)))
