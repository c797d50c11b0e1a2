"""The fast content checks pinned to the formulations they replaced.

``placeholder_replies`` now works per turn (run-length encoded roles, short windows
per closed turn); the per-token version it replaced is kept here as the reference
and compared on random labelled shards. ``row_hashes`` is a linear hash: it is
compared with its per-row definition and checked on the near-duplicates that a
linear hash could plausibly confuse.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from drafter_contracts.checks import content
from drafter_contracts.checks.content import ReplyTables, find_duplicates, row_hashes
from drafter_contracts.dataset.row_view import RowView, in_table
from drafter_contracts.contract import load_contract, resolve_contract_path
from drafter_contracts.dataset.columns import Shard
from drafter_contracts.dataset.layout_rows import ShardArrays
from drafter_contracts.hypothesis_settings import examples
from drafter_contracts.spans.labels import ASSISTANT_PARTS, Labels, Role
from drafter_contracts.spans.turns import turns_of

# --------------------------------------------------------------------------- placeholder_replies


def _reference_placeholder_replies(view, a, labels, tables, contract):
    """The per-token formulation before the per-turn rewrite (runs over all tokens, gathers over all tokens)."""
    ids, role = view.ids, labels.role
    a_starts = turns_of(labels, view.offsets).starts
    nt = len(a_starts)
    r_start, r_end = content._runs(in_table(role, content._role_lut(*ASSISTANT_PARTS, Role.ASSISTANT_END)))
    r_turn = np.searchsorted(a_starts, r_start, side="right") - 1
    keep = r_turn >= 0
    r_start, r_end, r_turn = r_start[keep], r_end[keep], r_turn[keep]
    text = in_table(role, content._role_lut(*ASSISTANT_PARTS)) & ~labels.boundary & ~np.take(tables.blank, ids,
                                                                                               mode="clip")
    for marker in tables.markers.tolist():
        text &= ids != marker
    c_text = text & (role == Role.ASSISTANT)
    reply_len = np.bincount(r_turn, weights=content._run_sums(text, r_start, r_end), minlength=nt).astype(np.int64)
    c_len = np.bincount(r_turn, weights=content._run_sums(c_text, r_start, r_end), minlength=nt).astype(np.int64)
    ends = np.flatnonzero(role == Role.ASSISTANT_END)
    e_turn = np.searchsorted(a_starts, ends, side="right") - 1
    closed = np.bincount(e_turn[e_turn >= 0], minlength=nt) > 0
    placeholder = np.zeros(nt, dtype=bool)
    reply_at = a_starts.copy()
    sizes = {len(p) for _, p in tables.placeholders if len(p)}
    cand_turn = closed & np.isin(c_len, list(sizes)) & (c_len == reply_len) if sizes else np.zeros(nt, dtype=bool)
    sel = cand_turn[r_turn]
    if sel.any():
        s_start, s_len, s_turn = r_start[sel], (r_end - r_start)[sel], r_turn[sel]
        pos = np.arange(int(s_len.sum())) + np.repeat(s_start - np.concatenate(([0], np.cumsum(s_len)[:-1])), s_len)
        tok_turn = np.repeat(s_turn, s_len)
        is_content = c_text[pos]
        c_pos = pos[is_content]
        c_ids, c_turn = ids[c_pos], tok_turn[is_content]
        for _, p in tables.placeholders:
            cand = np.flatnonzero(cand_turn & (c_len == len(p)) & (reply_len == len(p)))
            if len(cand) and len(p):
                first = np.searchsorted(c_turn, cand, side="left")
                window = c_ids[first[:, None] + np.arange(len(p))]
                same = (window == p).all(axis=1)
                placeholder[cand[same]] = True
                reply_at[cand[same]] = c_pos[first[same]]  # the finding points at the placeholder itself
    short = closed & ~placeholder & (reply_len < contract.content.min_reply_tokens)
    row_of_turn = np.searchsorted(view.offsets, a_starts, side="right") - 1
    n = len(view.rows)
    flags = {}
    names = " / ".join(repr(t) for t, _ in tables.placeholders)
    short_text = f"assistant reply shorter than {contract.content.min_reply_tokens} tokens"
    for code, hit_turns, text_, at in ((1, placeholder, f"placeholder assistant reply ({names})", reply_at),
                                       (2, short, short_text, a_starts)):
        rows_hit = np.zeros(n, dtype=bool)
        pos = np.full(n, -1, dtype=np.int64)
        t = np.flatnonzero(hit_turns)[::-1]
        rows_hit[row_of_turn[t]] = True
        pos[row_of_turn[t]] = at[t] - view.offsets[row_of_turn[t]]
        flags[code] = (rows_hit, pos, text_)
    return content._result("placeholder_replies", a, view, flags, contract)


_CONTRACT = load_contract(resolve_contract_path("qwen3.6-dflash"), {})
_ASSISTANT_RUN = (Role.ASSISTANT, Role.REASONING, Role.TOOL_CALL, Role.ASSISTANT_END)
# Token ids: 0..7; 1 is blank whitespace, 6 and 7 are think markers; placeholders of 1, 2 and 3 tokens.
_TABLES = ReplyTables(np.isin(np.arange(8), [1]), np.array([6, 7], dtype=np.int64),
                      (("OK.", np.array([2, 3], dtype=np.int64)), ("k", np.array([4], dtype=np.int64)),
                       ("Sure.", np.array([3, 3, 5], dtype=np.int64))))

# One row: runs of (role, length, token ids drawn from 0..8 -- 8 is past the blank table, read with clip), either
# anything at all or whole assistant turns whose short replies often spell a placeholder.
_tok = st.lists(st.sampled_from([0, 1, 2, 3, 3, 4, 5, 6, 7, 8]), min_size=5, max_size=5)
_run = st.tuples(st.sampled_from(list(Role)), st.integers(1, 5), _tok)
_reply = st.tuples(st.sampled_from([Role.ASSISTANT, Role.ASSISTANT, Role.REASONING, Role.TOOL_CALL]), st.integers(1, 4),
                   st.lists(st.sampled_from([1, 2, 3, 4, 5, 6]), min_size=5, max_size=5))
_turn = st.builds(lambda head, body, end: [(Role.HEADER, 1, [0] * 5)] + body + end, st.just(None),
                  st.lists(_reply, max_size=3),
                  st.sampled_from([[(Role.ASSISTANT_END, 1, [0] * 5), (Role.AFTER_ASSISTANT_END, 1, [1] * 5)],
                                   [(Role.ASSISTANT_END, 1, [0] * 5)], []]))
_row = st.tuples(st.sampled_from([Role.OUTSIDE, Role.HEADER, Role.USER, Role.END, Role.AFTER_ASSISTANT_END]),
                 st.lists(st.one_of(_run.map(lambda r: [r]), _turn), max_size=8).map(lambda parts: sum(parts, [])))


def _shard(rows, boundary_every: int) -> tuple[RowView, ShardArrays, Labels]:
    """A labelled shard; a row never opens with an assistant part (labellers open rows with a header or outside)."""
    ids, roles, lengths = [], [], []
    for lead, runs in rows:
        row_ids, row_roles = [0], [lead]
        for role, k, tok in runs:
            row_ids += tok[:k]
            row_roles += [role] * k
        ids += row_ids
        roles += row_roles
        lengths.append(len(row_ids))
    ids_a = np.array(ids, dtype=np.int32)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    view = RowView(ids_a, np.ones(len(ids_a), bool), offsets, np.arange(len(lengths)), None)
    boundary = np.zeros(len(ids_a), dtype=bool)
    boundary[::boundary_every] = True
    labels = Labels(np.array(roles, dtype=np.uint8), boundary, np.zeros(len(ids_a), dtype=np.uint8))
    return view, ShardArrays(Shard(0, 0, len(lengths)), None, None, None, None), labels


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(_row, min_size=1, max_size=8), st.integers(0, 5), st.integers(2, 40))
def test_placeholder_replies_equal_per_token_reference(rows, min_reply, boundary_every):
    contract = dataclasses.replace(_CONTRACT, content=dataclasses.replace(_CONTRACT.content,
                                                                         min_reply_tokens=min_reply))
    view, a, labels = _shard(rows, boundary_every)
    got = content.check_placeholder_replies(view, a, labels, _TABLES, contract)
    want = _reference_placeholder_replies(view, a, labels, _TABLES, contract)
    assert got == want


def test_placeholder_replies_long_blank_reply_reads_past_the_first_windows():
    """A reply of 300 newlines and one "OK." content pair: found only after several doubling windows."""
    rows = [(Role.HEADER, [(Role.ASSISTANT, 5, [1] * 5)] * 60 + [(Role.ASSISTANT, 2, [2, 3, 0, 0, 0]),
                                                                  (Role.ASSISTANT_END, 1, [0] * 5)]),
            (Role.HEADER, [(Role.REASONING, 5, [6, 1, 7, 1, 1]), (Role.ASSISTANT, 1, [4] * 5),
                           (Role.ASSISTANT_END, 1, [0] * 5), (Role.AFTER_ASSISTANT_END, 1, [1] * 5)])]
    view, a, labels = _shard(rows, 10**6)
    got = content.check_placeholder_replies(view, a, labels, _TABLES, _CONTRACT)
    assert got == _reference_placeholder_replies(view, a, labels, _TABLES, _CONTRACT)
    assert got.rows_violating == 2 and sum(got.by_reason.values()) == 2


@given(st.lists(st.lists(st.integers(0, 12), min_size=1, max_size=20), min_size=1, max_size=10))
def test_role_runs_are_the_runs_cut_at_row_starts(rows):
    role = np.array([r for row in rows for r in row], dtype=np.uint8)
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int64)
    runs = content.role_runs(role, offsets)
    want = []
    for i, row in enumerate(rows):
        s = int(offsets[i])
        for j, r in enumerate(row):
            if j == 0 or row[j - 1] != r:
                want.append((s + j, r, j == 0))
    assert list(zip(runs.start.tolist(), runs.role.tolist(), runs.row_first.tolist())) == want
    assert runs.end.tolist() == runs.start[1:].tolist() + [len(role)]


# --------------------------------------------------------------------------- row_hashes

def _view(rows, masks) -> RowView:
    ids = np.concatenate([np.asarray(r, np.int32) for r in rows] + [np.zeros(0, np.int32)])
    mask = np.concatenate([np.asarray(m, bool) for m in masks] + [np.zeros(0, bool)])
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int64)
    return RowView(ids, mask, offsets, np.arange(len(rows)), None)


def _defined_hash(rows, masks) -> np.ndarray:
    """The docstring's definition, per row in Python integers."""
    out = []
    for r, m in zip(rows, masks):
        h = sum((2 * int(x) + int(b)) * pow(content.HASH_BASE, j, 1 << 64) for j, (x, b) in enumerate(zip(r, m)))
        out.append(h % (1 << 64))
    lengths = np.array([len(r) for r in rows], dtype=np.uint64)
    return content.mix64(np.array(out, dtype=np.uint64) ^ content.mix64(lengths + content._GOLD))


def test_row_hashes_equal_their_definition_across_blocks():
    rng = np.random.default_rng(5)
    lengths = rng.integers(0, 9000, 30)  # ~135 K tokens: rows cross several 32 K-token blocks
    lengths[[3, 4]] = 0  # empty rows between others
    lengths[7] = 70_000  # one row longer than two blocks
    rows = [rng.integers(-3, 300_000, k).tolist() for k in lengths]
    masks = [(rng.random(k) < 0.4).tolist() for k in lengths]
    np.testing.assert_array_equal(row_hashes(_view(rows, masks)), _defined_hash(rows, masks))


def test_row_hashes_separate_near_duplicates():
    rng = np.random.default_rng(7)
    base = rng.integers(0, 150_000, 4000)
    mask = rng.random(4000) < 0.5
    rows, masks = [base, base.copy()], [mask, mask.copy()]  # one exact duplicate pair: rows 0 and 1

    def variant(ids=None, m=None):
        rows.append(base.copy() if ids is None else ids)
        masks.append(mask.copy() if m is None else m)

    for j in (0, 1, 1000, 3999):
        x = base.copy(); x[j] += 1; variant(ids=x)  # noqa: E702  one id changed
        x = base.copy(); x[j] ^= 1 << 30; variant(ids=x)  # noqa: E702  one id changed by a high bit
        m = mask.copy(); m[j] = ~m[j]; variant(m=m)  # noqa: E702  one mask bit flipped
    for i, d in ((0, 1), (10, 2), (100, 1024), (0, 2048), (5, 3994)):
        x = base.copy(); x[i], x[i + d] = base[i + d], base[i]  # noqa: E702  two tokens swapped
        variant(ids=x)
        m = mask.copy(); m[i], m[i + d] = not mask[i], not mask[i + d]  # noqa: E702  two mask bits flipped
        variant(m=m)
    variant(ids=base[:-1], m=mask[:-1])  # a prefix of another row
    variant(ids=np.concatenate((base, [0])), m=np.concatenate((mask, [False])))  # plus an unsupervised token 0
    variant(ids=base[::-1].copy(), m=mask[::-1].copy())  # same multiset of ids and mask bits, reversed
    variant(ids=np.sort(base), m=mask)  # same multiset of ids, sorted
    variant(ids=np.roll(base, 1), m=np.roll(mask, 1))  # rotated
    variant(ids=base * 2, m=mask)  # every id doubled
    variant(ids=base, m=np.zeros(4000, bool))
    variant(ids=base, m=~mask)
    pal = np.array([5, 9, 7, 9, 5] * 10)
    rows += [pal, np.array([9, 5, 7, 5, 9] * 10)]  # equal sums and equal position-weighted sums
    masks += [np.zeros(50, bool), np.zeros(50, bool)]
    h = row_hashes(_view(rows, masks))
    extra, groups, pairs = find_duplicates(np.arange(len(rows)), h)
    assert (extra, groups, pairs) == (1, 1, [(0, 1)])


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 3), max_size=12), st.integers(0, 2**12 - 1)), min_size=1,
                max_size=60))
def test_row_hashes_group_exactly_equal_rows(spec):
    """Tiny alphabets make many equal and almost-equal rows; hashes group exactly the equal ones."""
    rows = [ids for ids, _ in spec]
    masks = [[bool(bits >> j & 1) for j in range(len(ids))] for ids, bits in spec]
    h = row_hashes(_view(rows, masks)).tolist()
    keys = [(tuple(r), tuple(m)) for r, m in zip(rows, masks)]
    for i in range(len(rows)):
        for j in range(i):
            assert (h[i] == h[j]) == (keys[i] == keys[j])


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 3)), max_size=80), st.randoms(use_true_random=False))
def test_find_duplicates_equals_ordering_every_row(spec, rnd):
    """Hashes that share their low 20 bits but differ must not be grouped (the bit table only preselects)."""
    hashes = np.array([low + (high << 20) + ((high & 1) << 63) for low, high in spec], dtype=np.uint64)
    rows = np.arange(len(spec), dtype=np.int64) * 3 + 100
    perm = list(range(len(spec)))
    rnd.shuffle(perm)
    rows, hashes = rows[perm], hashes[perm]  # shards arrive in any order
    assert find_duplicates(rows, hashes) == content._duplicate_groups(rows, hashes)
