"""Shortcuts of the per-shard hot path pinned to their plain numpy meaning.

Each fast form (no gather, per-run sums, prefix-sum lookups) is compared with the
straightforward expression it replaces, on random inputs.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from drafter_contracts.checks import content
from drafter_contracts.checks.view import RowView, in_table

codes = hnp.arrays(np.uint8, st.integers(0, 200), elements=st.integers(0, 20))


@given(codes, st.sets(st.integers(0, 20)), st.integers(13, 256))
def test_in_table_equals_gather(values, members, size):
    table = np.zeros(max(size, 21), dtype=bool)
    table[list(members)] = True
    np.testing.assert_array_equal(in_table(values, table), table[values])


@given(hnp.arrays(bool, st.integers(0, 200)), hnp.arrays(bool, st.integers(0, 200)))
def test_run_sums_equal_per_run_loop(flag, other):
    other = np.resize(other, len(flag)) if len(other) else np.zeros(len(flag), bool)
    starts, ends = content._runs(flag)
    assert all(flag[s:e].all() for s, e in zip(starts, ends))
    assert flag.sum() == sum(e - s for s, e in zip(starts, ends))
    want = [int(other[s:e].sum()) for s, e in zip(starts, ends)]
    assert content._run_sums(other, starts, ends).tolist() == want


@given(st.lists(st.lists(st.booleans(), min_size=1, max_size=12), min_size=1, max_size=8), st.integers(1, 6))
def test_prefix_sum_figures_equal_per_row_loop(rows, block):
    mask = np.array([m for r in rows for m in r], dtype=bool)
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int64)
    view = RowView(np.zeros(len(mask), np.int32), mask, offsets, np.arange(len(rows)), None)
    assert view.supervised_per_row.tolist() == [sum(r) for r in rows]
    want_first = [r.index(True) if any(r) else -1 for r in rows]
    assert content._first_supervised(view).tolist() == want_first
    some = np.arange(len(rows))[::2]  # a subset of rows, as check_dflash_anchors asks for its flagged ones
    assert content._first_supervised(view, some).tolist() == [want_first[i] for i in some]
    assert content.anchor_counts(view, block).tolist() == [sum(r[:max(0, len(r) - block)]) for r in rows]
