"""Shortcuts of the per-shard hot path pinned to their plain numpy meaning.

Each fast form (no gather, per-run sums, prefix-sum lookups) is compared with the
straightforward expression it replaces, on random inputs.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from drafter_contracts.checks import content, spans
from drafter_contracts.dataset.row_view import RowView, in_table
from drafter_contracts.contract import load_contract, resolve_contract_path
from drafter_contracts.dataset.columns import Shard
from drafter_contracts.dataset.layout_rows import ShardArrays
from drafter_contracts.hypothesis_settings import examples
from drafter_contracts.checks.stats import run_counts
from drafter_contracts.spans.labels import Labels, Role

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


_ROLES = [int(r) for r in Role]


@settings(max_examples=examples(300), deadline=None)
@given(st.data())
def test_mask_checks_by_runs_equal_the_per_token_pass(data):
    """The per-role acceptance of both mask-policy checks (clean_by_role_totals) agrees with the
    per-token pass: a shard it calls clean has no violation, a shard with one is never called clean, and the
    results are equal field by field, under every policy (run-level or not)."""
    n_rows = data.draw(st.integers(1, 5))
    lengths = data.draw(st.lists(st.integers(0, 30), min_size=n_rows, max_size=n_rows))
    n = sum(lengths)
    # Runs of one role, so masks aligned with roles (the clean case) come up as often as not.
    role = np.array(data.draw(st.lists(st.sampled_from(_ROLES), min_size=n, max_size=n)), np.uint8)
    for i in range(1, n):
        if data.draw(st.booleans()):
            role[i] = role[i - 1]
    boundary = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool) & (role == Role.ASSISTANT)
    policy = {"content": data.draw(st.booleans()), "reasoning_final": data.draw(st.booleans()),
              "reasoning_earlier": data.draw(st.booleans()), "tool_calls": data.draw(st.booleans()),
              "end_of_turn": data.draw(st.booleans()), "newline_after_end": data.draw(st.booleans()),
              "boundary_tokens": data.draw(st.sampled_from(["allow", "strict"])),
              "turns": data.draw(st.sampled_from(["all", "last"])),
              "completeness": data.draw(st.sampled_from(["all", "last"])),
              "reasoning_opener": data.draw(st.sampled_from(["supervised", "context"]))}
    contract = load_contract(resolve_contract_path("qwen3.6-dflash"), {"max_len": 4096, "mask": policy})
    allowed = spans.allowed_roles(contract.mask)[role]
    how = data.draw(st.sampled_from(["allowed", "allowed_no_boundary", "random"]))
    mask = {"allowed": allowed, "allowed_no_boundary": allowed & ~boundary,
            "random": np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)}[how].copy()
    if n and data.draw(st.booleans()):  # one flipped bit somewhere
        mask[data.draw(st.integers(0, n - 1))] ^= True
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    view = RowView(np.full(n, 7, np.int32), mask, offsets, np.arange(n_rows), None)
    labels = Labels(role, boundary, np.zeros(n, np.uint8))
    totals = run_counts(content.role_runs(role, offsets), view.supervised_prefix, len(Role))
    shard = ShardArrays(Shard(0, 0, n_rows), None, None, None, None)
    for check, need in ((spans.check_mask_on_assistant_spans, False), (spans.check_mask_covers_assistant_spans, True)):
        fast = check(view, shard, Labels(role, boundary, labels.problem), contract, None, totals)
        plain = check(view, shard, Labels(role, boundary, labels.problem), contract, None, None)
        assert fast.to_dict() == plain.to_dict()
        if spans.clean_by_role_totals(view, Labels(role, boundary, labels.problem), totals, contract.mask, need):
            assert plain.rows_violating == 0
        elif spans._run_level_policy(contract.mask) is not None:
            assert plain.rows_violating > 0  # exact: a non-zero count is a real violation
