"""The rows of a shard that per-row semantic checks may look at.

Rows that are null, empty or whose ``input_ids`` and ``loss_mask`` lengths differ
are reported by their own contract and left out here, so that each corruption is
named by one contract and a skewed row never misaligns the masks after it. A wrong
``seq_len`` alone shifts nothing: such rows stay in (``lengths_agree`` names them).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .layout_rows import ShardArrays


@dataclass
class RowView:
    """Aligned flat arrays over usable rows: ``ids[offsets[i]:offsets[i+1]]`` is view row i."""

    ids: np.ndarray
    mask: np.ndarray | None  # bool, aligned with ids; None when loss_mask is missing
    offsets: np.ndarray
    rows: np.ndarray  # shard-local row number of each view row
    seq_len: np.ndarray | None

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    @cached_property
    def supervised_prefix(self) -> np.ndarray:
        """``cs[i]`` = supervised tokens among the first ``i`` (length n + 1), computed once per shard.

        Per-row supervision counts, DFlash anchor counts and each row's first supervised
        token are all read from it with a few lookups per row, instead of one more pass
        over every token each. int32 while it cannot overflow: half the memory traffic.
        """
        assert self.mask is not None
        return mask_prefix(self.mask)

    @cached_property
    def supervised_per_row(self) -> np.ndarray:
        """Supervised-token count of every row (int64)."""
        cs = self.supervised_prefix
        return cs[self.offsets[1:]].astype(np.int64) - cs[self.offsets[:-1]]


def mask_prefix_reference(mask: np.ndarray) -> np.ndarray:
    """The plain formulation of :func:`mask_prefix` (one scalar cumsum), kept for tests."""
    n = len(mask)
    cs = np.zeros(n + 1, dtype=np.int32 if n < 2**31 - 1 else np.int64)
    np.cumsum(mask.view(np.uint8), dtype=cs.dtype, out=cs[1:])
    return cs


def mask_prefix(mask: np.ndarray) -> np.ndarray:
    """``cs[i]`` = true values among ``mask[:i]`` (length n + 1; int32 while it fits).

    One compiled pass (:func:`drafter_contracts.kernels.compiled.prefix_count`), ~0.6 ns a token
    against ~4 for numpy's cumsum, which widens every element before adding it.
    """
    from ..kernels.compiled import prefix_count

    n = len(mask)
    cs = np.empty(n + 1, dtype=np.int32 if n < 2**31 - 1 else np.int64)
    prefix_count(np.ascontiguousarray(mask).view(np.uint8), cs)
    return cs


def problem_rows(a: ShardArrays) -> dict[str, np.ndarray]:
    """Boolean per shard row for each row-level defect: null, empty, ids/mask length skew (cached)."""
    if "problem_rows" not in a.cache:
        a.cache["problem_rows"] = _problem_rows(a)
    return a.cache["problem_rows"]


def _problem_rows(a: ShardArrays) -> dict[str, np.ndarray]:
    n = a.shard.rows
    null = np.zeros(n, dtype=bool)
    for col in (a.input_ids, a.loss_mask, *(c for _, c in a.extra)):  # extra: the layout's other columns
        if col is None:
            continue
        if col.null_rows is not None:
            null |= col.null_rows
        if col.null_elements is not None:
            bad = np.flatnonzero(col.null_elements)
            null[np.searchsorted(col.offsets, bad, side="right") - 1] = True
    if a.seq_len_nulls is not None:
        null |= a.seq_len_nulls
    ids_len = a.input_ids.lengths if a.input_ids is not None else None
    empty = np.zeros(n, dtype=bool) if ids_len is None else (ids_len == 0)
    if a.loss_mask is not None:
        empty &= a.loss_mask.lengths == 0
    disagree = np.zeros(n, dtype=bool)
    if ids_len is not None and a.loss_mask is not None:
        disagree |= ids_len != a.loss_mask.lengths
    if a.layout is not None:  # rows the layout cannot cut (layout_well_formed names them): left out like skewed ones
        disagree |= a.layout.malformed
    return {"null": null, "empty": empty & ~null, "disagree": disagree & ~null & ~empty}


def usable_view(a: ShardArrays) -> RowView | None:
    """The view over rows free of null/empty/length defects; None without an input_ids column."""
    if a.input_ids is None:
        return None
    p = problem_rows(a)
    keep = ~(p["null"] | p["empty"] | p["disagree"])
    ids_col = a.input_ids
    mask = None
    if a.loss_mask is not None:
        mask = a.loss_mask.values
        mask = mask if mask.dtype == np.bool_ else mask != 0
    seq_len = a.seq_len
    if keep.all():
        return RowView(ids_col.values, mask, ids_col.offsets, np.arange(a.shard.rows), seq_len)
    lengths = ids_col.lengths
    ids = ids_col.values[np.repeat(keep, lengths)]
    if mask is not None:
        mask = mask[np.repeat(keep, a.loss_mask.lengths)]
    offsets = np.concatenate(([0], np.cumsum(lengths[keep])))
    return RowView(ids, mask, offsets, np.flatnonzero(keep), None if seq_len is None else seq_len[keep])


def in_table(values: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``table[values]`` for small non-negative codes (role labels), without a gather.

    numpy's fancy indexing costs ~5 ns a token; a contiguous set of codes is one
    wrapping subtraction and one comparison, any other set a shift and a mask
    (2-5x faster on a shard). Codes beyond 15 fall back to the gather.
    """
    codes = np.flatnonzero(table)
    if len(values) == 0 or len(codes) == 0:
        return np.zeros(len(values), dtype=bool)
    lo, hi = int(codes[0]), int(codes[-1])
    if hi - lo + 1 == len(codes) and values.dtype == np.uint8:
        return np.subtract(values, np.uint8(lo), dtype=np.uint8) <= np.uint8(hi - lo)
    if hi < 16 and values.dtype == np.uint8 and not table[16:].any():
        bits = np.uint16(sum(1 << int(c) for c in codes))
        return (np.left_shift(np.uint16(1), values, dtype=np.uint16) & bits) != 0
    return table[values]
