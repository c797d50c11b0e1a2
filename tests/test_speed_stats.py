"""Fast forms of the per-shard stats pinned to the plain numpy they replace, on random inputs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from test_speed_labels import _soup  # marker soups with every structural problem

from drafter_contracts.checks.content import role_runs
from drafter_contracts.dataset.row_view import mask_prefix, mask_prefix_reference
from drafter_contracts.hypothesis_settings import examples
from drafter_contracts.checks.stats import run_counts
from drafter_contracts.spans.labels import Role

masks = hnp.arrays(bool, st.integers(0, 700))


@given(masks, st.integers(0, 9))
def test_mask_prefix_equals_cumsum(mask, start):
    """Compiled prefix sums equal numpy's cumsum, also on an unaligned, offset slice and a strided one."""
    for m in (mask, mask[min(start, len(mask)):], mask[::2]):
        want = np.concatenate(([0], np.cumsum(m, dtype=np.int32))).astype(np.int32)
        got = mask_prefix(m)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(mask_prefix_reference(m), want)


def test_mask_prefix_long_runs():
    """Shard-like masks: long runs, full 64-token blocks (block totals of 64) and a ragged tail."""
    rng = np.random.default_rng(1)
    mask = np.repeat(rng.random(2000) < 0.7, rng.integers(1, 200, 2000))
    np.testing.assert_array_equal(mask_prefix(mask), mask_prefix_reference(mask))
    for n in (0, 1, 127, 128, 129, 64 * 50 + 63):
        for m in (np.ones(n, bool), np.zeros(n, bool)):
            np.testing.assert_array_equal(mask_prefix(m), mask_prefix_reference(m))


def pair_counts_reference(role: np.ndarray, mask: np.ndarray, minlength: int) -> tuple[np.ndarray, np.ndarray]:
    """The per-token formulation run_counts replaced: one count of (role, supervised) pairs."""
    pairs = np.bincount((role << np.uint8(1)) | mask.view(np.uint8), minlength=2 * minlength).reshape(-1, 2)
    return pairs.sum(axis=1), pairs[:, 1]


@given(st.lists(st.tuples(st.integers(0, 12), st.integers(1, 30)), max_size=40), st.randoms(use_true_random=False))
def test_run_counts_equal_pair_count(runs, rnd):
    role = np.repeat(np.array([r for r, _ in runs], dtype=np.uint8), [k for _, k in runs])
    mask = np.array([rnd.random() < 0.6 for _ in range(len(role))], dtype=bool)
    runs = role_runs(role, np.array([0, len(role) // 3, len(role)], dtype=np.int64))  # two rows
    counts, sup = run_counts(runs, mask_prefix(mask), 13)
    want_counts, want_sup = pair_counts_reference(role, mask, 13)
    np.testing.assert_array_equal(counts, want_counts)
    np.testing.assert_array_equal(sup, want_sup)
    assert counts.dtype == sup.dtype == np.int64
    no_mask, none = run_counts(runs, None, 13)
    assert none is None
    np.testing.assert_array_equal(no_mask, np.bincount(role, minlength=13))


@given(hnp.arrays(np.int32, st.integers(0, 200), elements=st.integers(-3, 60)))
def test_sparse_counts_equal_plain_count(ids):
    """Exact sparse counts, negatives left out, dtypes fixed (int32 ids, int64 counts)."""
    from drafter_contracts.checks.stats import sparse_counts

    got = sparse_counts(ids)
    keep = ids[ids >= 0]
    want_ids, want_counts = np.unique(keep, return_counts=True)
    assert got["ids"].dtype == np.int32 and got["counts"].dtype == np.int64
    np.testing.assert_array_equal(got["ids"], want_ids)
    np.testing.assert_array_equal(got["counts"], want_counts)


# --------------------------------------------------------------------------- on real labels

@settings(max_examples=examples(300), deadline=None)
@given(st.data())
def test_run_counts_on_labeller_output(chatml, alphabet, data):
    """run_counts equals the per-token pair count on the labeller's roles (chatml built-in) over marker soups."""
    rows, ids, offsets, max_len = _soup(data, alphabet, chatml)
    role = chatml.label(ids, offsets, max_len).role
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=len(role), max_size=len(role))), dtype=bool)
    counts, sup = run_counts(role_runs(role, offsets), mask_prefix(mask), len(Role))
    want_counts, want_sup = pair_counts_reference(role, mask, len(Role))
    np.testing.assert_array_equal(counts, want_counts)
    np.testing.assert_array_equal(sup, want_sup)


def test_sparse_counts_leave_out_ids_beyond_the_vocabulary():
    """A corrupt id of 2**40 is ids_known's violation; counting it would ask bincount for 8 TB."""
    from drafter_contracts.checks.stats import sparse_counts

    out = sparse_counts(np.array([3, 2**40, 3, -1, 7], dtype=np.int64), limit=100)
    assert out["ids"].tolist() == [3, 7] and out["counts"].tolist() == [2, 1]
    assert sparse_counts(np.array([2**40], dtype=np.int64))["ids"].tolist() == []
