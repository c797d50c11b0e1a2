"""The fast labeller, turn numbering and mask checks against the formulations they replaced.

The compiled labeller (``kernels/_labeller.c``, through ``SpanOracle.label``) applies the rules token by
token with shortcuts through runs of ordinary tokens, header tokens and the token after an end,
and the mask checks read turn facts at failing positions only; these property tests hold them to
the formulations they stand for (the numpy labeller ``generic.label``, and the per-token
``assistant_turns``/``allowed_tokens``/``required_tokens`` and check details that the checks used
before, kept here as the reference) on ChatML marker soups with every structural problem, damaged
well-formed turns, random masks and every mask policy.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from drafter_contracts.checks import content as content_mod
from drafter_contracts.contract import mask_rules
from drafter_contracts.checks import spans
from drafter_contracts.contract import mask_reasons as reasons
from drafter_contracts.contract.mask_shift import mask_shift_of, no_shift
from drafter_contracts.dataset.row_view import RowView
from drafter_contracts.contract import MaskPolicy
from drafter_contracts.hypothesis_settings import examples
from drafter_contracts.results import first_per_row, multi_reason_result, row_result
from drafter_contracts.spans import generic
from drafter_contracts.spans.labels import ROLE_NAMES, Role
from drafter_contracts.spans.turns import TURN_ROLES, MaskFacts, assistant_turns


def _soup(data, alphabet, profile):
    """Rows of marker soup; half the time built from well-formed turns with damage, so clean paths are hit too."""
    def turn(role_tok, body):
        return [profile.start, role_tok, profile.newline] + body + [profile.end, profile.newline]

    tokens = st.sampled_from(alphabet)
    # Bodies: a few tokens of anything, or a long run of words with now and then a marker (runs longer
    # than the labeller's 16-id blocks, ending anywhere inside one).
    words = st.sampled_from(alphabet[9:12] * 10 + alphabet)
    body = st.one_of(st.lists(tokens, max_size=6), st.lists(words, min_size=10, max_size=70))
    well = st.lists(st.tuples(st.sampled_from(alphabet[4:9]), body), max_size=4).map(
        lambda ts: [t for r, b in ts for t in turn(r, b)])
    row = st.one_of(st.lists(tokens, max_size=30), well)
    rows = data.draw(st.lists(row, min_size=1, max_size=7))
    max_len = data.draw(st.integers(1, 40))
    rows = [r[:max_len] if data.draw(st.booleans()) else r for r in rows]
    # Unsigned types turn the soup's -1 into a huge id (2**64 - 1 for uint64, which the kernel cannot take as is).
    dtype = data.draw(st.sampled_from([np.int32, np.int64, np.uint32, np.uint64]))
    ids = np.array([i for r in rows for i in r], dtype=np.int64).astype(dtype)
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int64)
    return rows, ids, offsets, max_len


@settings(max_examples=examples(600), deadline=None)
@given(st.data())
def test_fast_labels_equal_reference(chatml, alphabet, data):
    """Every role, boundary flag and problem code of the labeller (chatml built-in) equals the numpy
    reference's (marker soups with odd and out-of-range ids, signed and unsigned 32/64-bit; damaged
    well-formed turns; long runs of words, so the block scan of ordinary tokens is crossed too)."""
    rows, ids, offsets, max_len = _soup(data, alphabet, chatml)
    fast = chatml.label(ids, offsets, max_len)
    ref = generic.label(ids.astype(np.int64) if ids.dtype != np.uint64 else
                        np.minimum(ids, np.uint64(2**63 - 1)).astype(np.int64), offsets, chatml.compiled, max_len)
    for field in ("role", "boundary", "problem"):
        got, want = getattr(fast, field), getattr(ref, field)
        assert got.dtype == want.dtype, field
        np.testing.assert_array_equal(got, want, err_msg=f"{field} differs on {rows} (max_len {max_len})")
    # The runs the labeller notes as it writes (starts, roles, row starts) are the ones role_runs finds
    # in the roles; its boundary positions and problem count are those of the per-token arrays.
    want_runs = content_mod.role_runs(ref.role, offsets)
    got_runs = content_mod.role_runs(fast.role, offsets, fast.run_starts, fast.run_roles, fast.run_row_first)
    for field in ("start", "end", "role", "row_first"):
        got, want = getattr(got_runs, field), getattr(want_runs, field)
        assert got.dtype == want.dtype, field
        np.testing.assert_array_equal(got, want, err_msg=f"role runs' {field} differ on {rows} (max_len {max_len})")
    np.testing.assert_array_equal(fast.boundary_at, np.flatnonzero(ref.boundary))
    assert fast.problem_count == int(np.count_nonzero(ref.problem))


# --------------------------------------------------------------------------- reference formulations

def _ref_turns(role: np.ndarray, offsets: np.ndarray):
    """The per-token turn numbering the checks used before (index/last spread over every token)."""
    n = len(role)
    in_turn = np.isin(role, TURN_ROLES)
    prev, nxt = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    if n:
        prev[1:], nxt[:-1] = in_turn[:-1], in_turn[1:]
        firsts = offsets[:-1][np.diff(offsets) > 0]
        prev[firsts] = False
        nxt[firsts[firsts > 0] - 1] = False
    starts, ends = np.flatnonzero(in_turn & ~prev), np.flatnonzero(in_turn & ~nxt)
    row_of_turn = np.searchsorted(offsets, starts, side="right") - 1
    is_last = np.ones(len(starts), dtype=bool)
    is_last[:-1] = row_of_turn[1:] != row_of_turn[:-1]
    index = np.full(n, -1, dtype=np.int64)
    last = np.zeros(n, dtype=bool)
    for t, (s, e) in enumerate(zip(starts, ends)):
        index[s:e + 1] = t
        last[s:e + 1] = is_last[t]
    return SimpleNamespace(in_turn=in_turn, index=index, last=last, starts=starts, row_of_turn=row_of_turn)


def _ref_allowed(role, turns, policy: MaskPolicy, opener=None):
    table = np.zeros(256, dtype=bool)
    table[Role.ASSISTANT], table[Role.TOOL_CALL] = policy.content, policy.tool_calls
    table[Role.ASSISTANT_END], table[Role.AFTER_ASSISTANT_END] = policy.end_of_turn, policy.newline_after_end
    allowed = table[role] | ((role == Role.REASONING)
                             & np.where(turns.last, policy.reasoning_final, policy.reasoning_earlier))
    allowed &= turns.in_turn
    if policy.turns == "last":
        allowed &= turns.last
    if policy.reasoning_opener == "context" and opener is not None:
        allowed &= ~opener
    return allowed


def _ref_mask_on(ids, mask, offsets, labels, policy, nl):
    turns = _ref_turns(labels.role, offsets)
    opener = mask_rules.opener_tokens(ids, labels, nl) if policy.reasoning_opener == "context" else None
    bad = mask & ~_ref_allowed(labels.role, turns, policy, opener)
    if policy.boundary_tokens == "strict":
        bad |= mask & labels.boundary
    at = np.flatnonzero(bad)  # every offending token, each named by its own rule
    rows = np.searchsorted(offsets, at, side="right") - 1
    codes = labels.role[at].astype(np.int16)
    if len(at):
        role_ok = _ref_allowed(labels.role, turns, dataclasses.replace(policy, turns="all"))[at]
        reasoning = codes == Role.REASONING
        codes[reasoning] = np.where(turns.last[at[reasoning]], reasons.REASONING_FINAL, reasons.REASONING_EARLIER)
        earlier = role_ok & ~turns.last[at] & (policy.turns == "last")
        op = np.zeros(len(at), dtype=bool)
        if policy.reasoning_opener == "context":
            op = role_ok & ~earlier & mask_rules.opener_tokens(ids, labels, nl)[at]
        codes[role_ok] = reasons.BOUNDARY
        codes[op] = reasons.OPENER
        codes[earlier] = reasons.EARLIER_TURN
    return multi_reason_result("mask_on_assistant_spans", "s", len(offsets) - 1, rows, at - offsets[rows], codes,
                               reasons.forbidden_text(policy), reasons.SEVERITY, 0)


def _ref_mask_covers(ids, mask, offsets, labels, policy, nl, max_len):
    turns = _ref_turns(labels.role, offsets)
    opener = mask_rules.opener_tokens(ids, labels, nl) if policy.reasoning_opener == "context" else None
    need = _ref_allowed(labels.role, turns, policy, opener) & ~labels.boundary
    lengths = np.diff(offsets)
    if policy.completeness == "last":
        need &= turns.last
        nonempty = lengths > 0
        cut = np.zeros(len(lengths), dtype=bool)
        cut[nonempty] = (lengths[nonempty] >= max_len) & ~turns.in_turn[offsets[1:][nonempty] - 1]
        need &= ~np.repeat(cut, lengths)
    rows, first = first_per_row(np.flatnonzero(need & ~mask), offsets)
    at = offsets[rows] + first
    codes = labels.role[at].astype(np.int16)
    if len(rows):
        sup = np.bincount(turns.index[turns.in_turn], weights=mask[turns.in_turn], minlength=len(turns.starts))
        op = mask_rules.opener_tokens(ids, labels, nl)
        last = len(ids) - 1
        after = np.minimum(at + 1 + op[np.minimum(at + 1, last)], last)
        codes[op[at] & mask[after] & (labels.role[after] == Role.REASONING)] = reasons.OPENER_MISSING
        codes[sup[turns.index[at]] == 0] = reasons.WHOLE_TURN
    text = {int(r): f"{ROLE_NAMES[r]} token left unsupervised" for r in Role} | reasons.MISSING_TEXT
    scope = "every assistant turn" if policy.completeness == "all" else "the row's last assistant turn"
    text = {k: f"{v} ({scope} must be supervised)" for k, v in text.items()}
    return row_result("mask_covers_assistant_spans", "s", len(offsets) - 1, rows, first, codes, text, 0)


def _ref_shift(ids, mask, offsets, labels, policy, nl, max_len):
    """Per row, a loop: the row breaks a rule as it stands, and its mask moved one token earlier (late) or
    later (early) breaks neither, the bit that falls off the row's edge being 0 and the vacated token not
    judged; completeness off is judged as all."""
    turns = _ref_turns(labels.role, offsets)
    opener = mask_rules.opener_tokens(ids, labels, nl) if policy.reasoning_opener == "context" else None
    allowed = _ref_allowed(labels.role, turns, policy, opener)
    if policy.boundary_tokens == "strict":
        allowed = allowed & ~labels.boundary
    judged = policy if policy.completeness != "off" else dataclasses.replace(policy, completeness="all")
    need = _ref_allowed(labels.role, turns, judged, opener) & ~labels.boundary
    if judged.completeness == "last":
        need &= turns.last
        for r in range(len(offsets) - 1):
            lo, hi = offsets[r], offsets[r + 1]
            if hi > lo and hi - lo >= max_len and not turns.in_turn[hi - 1]:
                need[lo:hi] = False

    def breaks(m, a, q, vacated=None):
        q = q.copy()
        if vacated is not None:
            q[vacated] = False
        return bool((m & ~a).any() or (q & ~m).any())

    rows = len(offsets) - 1
    late, early = np.zeros(rows, dtype=bool), np.zeros(rows, dtype=bool)
    for r in range(rows):
        lo, hi = offsets[r], offsets[r + 1]
        m, a, q = mask[lo:hi], allowed[lo:hi], need[lo:hi]
        if hi == lo or not m.any() or not breaks(m, a, q):
            continue
        late[r] = not m[0] and not breaks(np.append(m[1:], False), a, q, hi - lo - 1)
        early[r] = not late[r] and not m[-1] and not breaks(np.insert(m[:-1], 0, False), a, q, 0)
    return late, early


policies = st.builds(
    MaskPolicy, content=st.booleans(), reasoning_final=st.booleans(), reasoning_earlier=st.booleans(),
    tool_calls=st.booleans(), end_of_turn=st.booleans(), newline_after_end=st.booleans(),
    boundary_tokens=st.sampled_from(["allow", "strict"]), turns=st.sampled_from(["all", "last"]),
    completeness=st.sampled_from(["all", "last"]), reasoning_opener=st.sampled_from(["supervised", "context"]))


@settings(max_examples=examples(500), deadline=None)
@given(st.data())
def test_turns_and_mask_checks_equal_per_token_formulation(chatml, alphabet, vocab, data):
    rows, ids, offsets, max_len = _soup(data, alphabet, chatml)
    labels = chatml.label(ids, offsets, max_len)
    policy = data.draw(policies)
    # Masks: random, or exactly the required tokens with a few flips (mostly-passing shards).
    ref_turns = _ref_turns(labels.role, offsets)
    turns = assistant_turns(labels.role, offsets)
    for f in ("in_turn", "index", "last", "starts", "row_of_turn"):
        np.testing.assert_array_equal(getattr(turns, f), getattr(ref_turns, f), err_msg=f)
    nl = vocab.newline_lead if data.draw(st.booleans()) else None
    kind = data.draw(st.sampled_from(["random", "flips", "late", "early"]))
    if kind == "random":
        mask = np.array(data.draw(st.lists(st.booleans(), min_size=len(ids), max_size=len(ids))), dtype=bool)
    else:
        mask = mask_rules.required_tokens(ids, offsets, labels, turns, policy, max_len, nl).copy()
        if kind != "flips" and len(ids):  # every row's mask moved one token within the row (a shifted producer)
            moved, edge = np.zeros_like(mask), offsets[:-1] if kind == "late" else offsets[1:] - 1
            if kind == "late":
                moved[1:] = mask[:-1]
            else:
                moved[:-1] = mask[1:]
            moved[edge[np.diff(offsets) > 0]] = False
            mask = moved
        for p in data.draw(st.lists(st.integers(0, max(len(ids) - 1, 0)), max_size=3)) if len(ids) else []:
            mask[p] = ~mask[p]
    view = RowView(ids, mask, offsets, np.arange(len(rows)), None)
    a = SimpleNamespace(shard=SimpleNamespace(id="s", start=0))
    contract = SimpleNamespace(mask=policy, max_len=max_len)
    facts = MaskFacts(ids, nl)  # what the checks read beyond the labels
    # The rules themselves, the shift held apart (its folding: tests/test_mask_shift.py) ...
    unshifted = lambda: no_shift(len(rows))  # noqa: E731
    got_on = spans.check_mask_on_assistant_spans(view, a, labels, contract, facts, shift=unshifted)
    assert got_on == _ref_mask_on(ids, mask, offsets, labels, policy, nl)
    got_cov = spans.check_mask_covers_assistant_spans(view, a, labels, contract, facts, shift=unshifted)
    assert got_cov == _ref_mask_covers(ids, mask, offsets, labels, policy, nl, max_len)
    # ... and the shifted rows against a loop over rows that moves each mask and applies both rules.
    shift = mask_shift_of(view, labels, contract, facts)
    ref_late, ref_early = _ref_shift(ids, mask, offsets, labels, policy, nl, max_len)
    np.testing.assert_array_equal(shift.late, ref_late)
    np.testing.assert_array_equal(shift.early, ref_early)
