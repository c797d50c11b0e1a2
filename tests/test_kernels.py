"""The compiled kernels against the numpy they stand for, and their constants against the enums."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from drafter_contracts.kernels import compiled as kernels
from drafter_contracts.checks import content
from drafter_contracts.checks.content import ReplyTables, row_hashes
from drafter_contracts.checks.rows import check_ids_known
from drafter_contracts.dataset.columns import Shard
from drafter_contracts.dataset.layout_rows import ShardArrays
from drafter_contracts.dataset.row_view import RowView, mask_prefix_reference
from drafter_contracts.engine import profile_stats, token_pass
from drafter_contracts.checks import stats as profile
from drafter_contracts.checks.stats import DENSE_COUNT_LIMIT, sparse_counts
from drafter_contracts.spans.labels import Labels, Role, TurnProblem


def test_codes_mirror_the_enums():
    """The C files compile role and problem codes as plain ints: each must equal its enum member
    (kernels/codes.py's mirror of kernels/_kernels.c, and kernels/_labeller.c's own enums, read from its source)."""
    import re
    from pathlib import Path

    from drafter_contracts.kernels import codes as kernel_codes

    assert kernel_codes.ASSISTANT_END == Role.ASSISTANT_END
    source = (Path(__file__).resolve().parents[1] / "src" / "drafter_contracts" / "kernels/_labeller.c").read_text()
    found = re.findall(r"\b([LP])_([A-Z_]+) = (\d+)", source)
    assert {prefix for prefix, _, _ in found} == {"L", "P"} and len(found) >= 15, found
    for prefix, name, code in found:
        enum = Role if prefix == "L" else TurnProblem
        assert enum[name] == int(code), f"{prefix}_{name} = {code} in kernels/_labeller.c, {enum.__name__}.{name} = {int(enum[name])}"


@given(hnp.arrays(np.int64, st.integers(0, 400), elements=st.integers(-3, 70)), st.randoms(use_true_random=False),
       st.sampled_from([np.int32, np.int64, np.uint32]), st.integers(1, 80))
def test_supervised_counts_equal_bincount(ids, rnd, dtype, limit):
    """Counts of supervised ids in [0, limit) equal numpy's, whatever the id dtype; corrupt ids are not counted."""
    if dtype == np.uint32:
        ids = np.abs(ids)
    ids = ids.astype(dtype)
    mask = np.array([rnd.random() < 0.6 for _ in range(len(ids))], dtype=bool)
    def one_row() -> RowView:
        return RowView(ids, mask, np.array([0, len(ids)], np.int64), np.arange(1), None)

    got = token_pass(one_row(), limit).counts
    want = sparse_counts(ids[mask], limit)
    assert got["ids"].dtype == want["ids"].dtype and got["counts"].dtype == want["counts"].dtype
    np.testing.assert_array_equal(got["ids"], want["ids"])
    np.testing.assert_array_equal(got["counts"], want["counts"])
    if len(ids) and mask.any():  # beyond the dense range the numpy path answers, with the same result
        assert token_pass(one_row(), DENSE_COUNT_LIMIT + 1) is None
        big = profile_stats(one_row(), DENSE_COUNT_LIMIT + 1)["supervised_id_counts"]
        np.testing.assert_array_equal(big["counts"], sparse_counts(ids[mask], DENSE_COUNT_LIMIT + 1)["counts"])


@given(st.lists(st.tuples(st.lists(st.integers(-3, 70), max_size=40), st.integers(0, 2**40 - 1)), max_size=8),
       st.sampled_from([np.int32, np.int64, np.uint32]), st.integers(1, 80))
def test_token_pass_equals_the_three_passes(spec, dtype, limit):
    """One pass gives the prefix sum, the supervised-id counts, the row hashes and the out-of-range
    ids that their own passes give (empty rows and corrupt ids included), and ids_known its verdict from it."""
    rows = [np.abs(r) if dtype == np.uint32 else r for r, _ in spec]
    ids = np.concatenate([np.asarray(r, np.int64) for r in rows] + [np.zeros(0, np.int64)]).astype(dtype)
    mask = np.concatenate([np.array([bits >> j & 1 for j in range(len(r))], bool) for r, (_, bits) in zip(rows, spec)]
                          + [np.zeros(0, bool)])
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int64)

    def view() -> RowView:
        return RowView(ids, mask, offsets, np.arange(len(rows)), None)

    fused = view()
    counts, sums, outside = token_pass(fused, limit)
    assert outside == int(((ids.astype(np.int64) < 0) | (ids.astype(np.int64) >= limit)).sum())
    known = np.ones(limit, dtype=bool)
    shard = ShardArrays(Shard(0, 0, len(rows)), None, None, None, None)
    assert check_ids_known(fused, shard, known, outside).to_dict() == check_ids_known(view(), shard, known).to_dict()
    np.testing.assert_array_equal(fused.supervised_prefix, mask_prefix_reference(mask))
    want = sparse_counts(ids[mask], limit)
    np.testing.assert_array_equal(counts["ids"], want["ids"])
    np.testing.assert_array_equal(counts["counts"], want["counts"])
    np.testing.assert_array_equal(row_hashes(fused, sums), row_hashes(view()))
    assert not profile._COUNT_BUFFERS or not any(b.any() for b in profile._COUNT_BUFFERS.values())  # left zeroed


@given(st.data())
def test_reply_lengths_equal_the_windowed_numpy(data):
    """Reply-text counts per turn, capped, equal reply_lengths_reference's windows (odd ids, blanks,
    markers, boundary tokens, every role, turns of any length)."""
    n = data.draw(st.integers(0, 120))
    ids = np.array(data.draw(st.lists(st.integers(-2, 30), min_size=n, max_size=n)), dtype=np.int64)
    role = np.array(data.draw(st.lists(st.sampled_from([int(r) for r in Role]), min_size=n, max_size=n)), np.uint8)
    boundary = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    blank = np.array(data.draw(st.lists(st.booleans(), min_size=1, max_size=25)), dtype=bool)
    markers = np.array(data.draw(st.lists(st.integers(0, 30), max_size=2)), dtype=np.int64)
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=12)))
    t_start, t_end = np.array(cuts[0::2][:len(cuts) // 2], np.int64), np.array(cuts[1::2], np.int64)
    cap = data.draw(st.integers(0, 40))
    view = RowView(ids, None, np.array([0, n], np.int64), np.arange(1), None)
    labels = Labels(role, boundary, np.zeros(n, np.uint8))
    tables = ReplyTables(blank, markers, ())
    got = content._reply_lengths(view, labels, tables, t_start, t_end, cap)
    np.testing.assert_array_equal(got, content.reply_lengths_reference(view, labels, tables, t_start, t_end, cap))


@given(st.lists(st.lists(st.sampled_from([int(r) for r in Role]), max_size=30), min_size=1, max_size=6))
def test_assistant_turns_equal_the_numpy_over_runs(rows):
    """Turns from role runs (starts, ends, closed) equal assistant_turns_reference's, with turns cut at
    row starts, rows that open inside a turn role, and empty rows."""
    role = np.array([r for row in rows for r in row], dtype=np.uint8)
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int64)
    runs = content.role_runs(role, offsets)
    got = kernels.assistant_turns(runs.role, runs.start, runs.end, runs.row_first, content._IS_TURN)
    want = content.assistant_turns_reference(runs)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_kernels_refuse_arrays_c_would_misread():
    """C trusts its pointers: a wrong dtype, a strided array or a short output is a Python error, not
    memory read or written out of bounds."""
    ids = np.arange(10, dtype=np.int32)
    out = np.zeros(11, np.int32)
    with pytest.raises(TypeError, match="flags: expected a contiguous"):
        kernels.prefix_count(np.zeros(10, np.int16), out)
    with pytest.raises(TypeError, match="not contiguous"):
        kernels.prefix_count(np.zeros(20, bool)[::2], out)
    with pytest.raises(ValueError, match="out has 5 elements for 10 flags"):
        kernels.prefix_count(np.zeros(10, bool), np.zeros(5, np.int32))
    with pytest.raises(ValueError, match="offsets"):
        kernels.row_hash_sums(ids, np.zeros(10, bool), True, np.array([0, 11], np.int64), 3, np.zeros(1, np.uint64))
    with pytest.raises(TypeError, match="ids: expected integers"):
        kernels.row_hash_sums(ids.astype(float), np.zeros(10, bool), True, np.array([0, 10], np.int64), 3,
                              np.zeros(1, np.uint64))
    with pytest.raises(ValueError, match="run beyond the prefix"):
        kernels.run_totals(np.zeros(1, np.uint8), np.array([0], np.int64), np.array([12], np.int64), out, True,
                           np.zeros(13, np.int64), np.zeros(13, np.int64))


def test_ids_of_any_integer_dtype_hash_as_their_int64_bits():
    """uint32/uint16/int16 ids are widened to int64 before C reads them: the same sums as the
    same values given as int64 (uint64 ids as their bits, as numpy's cast)."""
    vals = np.array([0, 1, 7, 65535, 40000, 3, 2, 9, 11], dtype=np.int64)
    mask = np.array([1, 0, 1, 1, 0, 0, 1, 1, 0], bool)
    offsets = np.array([0, 2, 9], np.int64)
    want = np.zeros(2, np.uint64)
    kernels.row_hash_sums(vals, mask, True, offsets, 5, want)
    for dtype in (np.uint16, np.uint32, np.uint64, np.int32):
        got = np.zeros(2, np.uint64)
        kernels.row_hash_sums(vals.astype(dtype), mask, True, offsets, 5, got)
        np.testing.assert_array_equal(got, want)


def test_a_package_without_its_built_kernels_runs_the_numpy_references(monkeypatch):
    """A source tree nobody built (or an install without a C compiler) runs the references and says so."""
    kernels.loaded_library.cache_clear()
    monkeypatch.setattr(kernels, "library_path", lambda: None)
    monkeypatch.delenv(kernels.KERNELS_ENV, raising=False)
    try:
        assert kernels.load() is None and kernels.backend()["backend"] == "numpy"
        assert "were not built" in kernels.fallback_warning()
        out = np.zeros(4, np.int32)
        kernels.prefix_count(np.array([1, 0, 1], bool), out)
        assert out.tolist() == [0, 1, 1, 2]
    finally:
        kernels.loaded_library.cache_clear()
