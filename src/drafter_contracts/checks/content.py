"""Suspicious-content contracts: rows that are valid but probably useless or harmful to train on.

A mixture may hold such rows on purpose (dummy "OK." replies in a chat mixture), so these
contracts are report-only by default: the result carries ``report_only`` and the
test passes with a warning in the summary; ``[content] strict = true`` makes them fail.
Everything is vectorized over a shard, and the hot paths avoid per-token passes:
reply checks work per assistant turn from the run-length encoded roles, per-row
figures come from prefix sums, row hashes from one multiply per token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..contract import Contract
from ..dataset.layout_rows import ShardArrays
from ..results import CheckResult, Violation, row_result
from ..spans.labels import ASSISTANT_PARTS, Labels, Role
from ..spans.turns import IS_TURN as _IS_TURN
from .declare import IDS, MASK, TOKENIZER, Scope, Spec, register
from ..dataset.row_view import RowView, in_table



@dataclass(frozen=True)
class ReplyTables:
    """Token facts the reply checks need, resolved once per tokenizer."""

    blank: np.ndarray  # bool per id: whitespace tokens that do not count as reply text
    markers: np.ndarray  # ids that frame a reply without being text (<think>, </think>)
    placeholders: tuple[tuple[str, np.ndarray], ...]  # (text, token ids)


def _result(check: str, a: ShardArrays, view: RowView, flags: dict[int, tuple[np.ndarray, np.ndarray, str]],
            contract: Contract) -> CheckResult:
    """Combine per-row flags ``{code: (bool per view row, position per view row, text)}`` into a result."""
    n = len(view.rows)
    codes = np.zeros(n, dtype=np.int8)
    positions = np.full(n, -1, dtype=np.int64)
    for code in sorted(flags, reverse=True):  # the lowest code wins when a row has several
        hit, pos, _ = flags[code]
        codes[hit] = code
        positions[hit] = pos[hit]
    rows = np.flatnonzero(codes)
    res = row_result(check, a.shard.id, n, view.rows[rows], positions[rows], codes[rows],
                     {c: t for c, (_, _, t) in flags.items()}, a.shard.start)
    res.report_only = not contract.content.strict
    return res


# --------------------------------------------------------------------------- replies


def placeholder_ids(vocab, texts: tuple[str, ...]) -> dict[str, list[int]]:
    """Token ids of each placeholder text, cached per tokenizer fingerprint.

    Encoding needs the tokenizer itself (~4 s and ~300 MB to load); with the cache an
    xdist worker that only checks content never loads it.
    """
    from ..paths import JsonCache

    cache = JsonCache.keyed("vocab", "placeholders", (vocab.fingerprint,))
    cached = cache.read()
    cached = cached if isinstance(cached, dict) else {}
    missing = [t for t in texts if not isinstance(cached.get(t), list)]
    if missing:
        for t in missing:
            cached[t] = vocab.backend.encode(t, add_special_tokens=False).ids
        cache.write(cached)
    return {t: cached[t] for t in texts}


def _runs(flag: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Maximal runs of True: (first position, one past the last) of each."""
    edges = np.diff(flag.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)


def _run_sums(flag: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """True tokens of ``flag`` inside each run [start, end) (runs disjoint, separated by gaps), in one pass."""
    if not len(starts):
        return np.zeros(0, dtype=np.int64)
    bounds = np.empty(2 * len(starts), dtype=np.int64)
    bounds[0::2], bounds[1::2] = starts, ends
    if bounds[-1] == len(flag):
        bounds = bounds[:-1]
    return np.add.reduceat(flag.view(np.uint8), bounds, dtype=np.int64)[0::2]


def _role_lut(*roles: Role) -> np.ndarray:
    lut = np.zeros(len(Role), dtype=bool)
    lut[list(roles)] = True
    return lut


_IS_PART = np.zeros(256, dtype=bool)
_IS_PART[list(ASSISTANT_PARTS)] = True
_REPLY_WINDOW = 8  # tokens first read per reply (a multiple of 8): an empty think block, two newlines, 3 text tokens


@dataclass(frozen=True)
class RoleRuns:
    """Runs of one role that never cross a row start: the shard's role labels, run-length encoded."""

    start: np.ndarray  # flat position of each run's first token
    end: np.ndarray  # one past its last token
    role: np.ndarray  # uint8 role of the run
    row_first: np.ndarray  # bool: the run opens a row


def role_runs(role: np.ndarray, offsets: np.ndarray, starts: np.ndarray | None = None,
              run_roles: np.ndarray | None = None, row_first: np.ndarray | None = None) -> RoleRuns:
    """Run-length encode the roles, cutting at row starts (one byte compare per token, then change points only).

    ``starts``, ``run_roles`` and ``row_first``: the runs as the labeller noted them
    (``Labels.run_starts``, ...); given together, no token is read here.
    """
    n = len(role)
    if not n:
        z = np.zeros(0, dtype=np.int64)
        return RoleRuns(z, z, np.zeros(0, dtype=np.uint8), np.zeros(0, dtype=bool))
    if starts is not None and run_roles is not None and row_first is not None:
        end = np.empty_like(starts)
        end[:-1], end[-1] = starts[1:], n
        return RoleRuns(starts, end, run_roles, row_first)
    row_start = offsets[:-1][np.diff(offsets) > 0]  # strictly increasing, starts at 0
    cut = role[1:] != role[:-1]
    cut[row_start[1:] - 1] = True
    start = np.concatenate(([0], np.flatnonzero(cut) + 1))
    end = np.empty_like(start)
    end[:-1], end[-1] = start[1:], n
    row_first = np.zeros(len(start), dtype=bool)
    row_first[np.searchsorted(start, row_start)] = True
    return RoleRuns(start, end, role[start], row_first)


def _reply_lengths(view: RowView, labels: Labels, tables: ReplyTables, t_start: np.ndarray, t_end: np.ndarray,
                   cap: int) -> np.ndarray:
    """Reply-text tokens of each turn [t_start, t_end), exact up to ``cap``, else ``cap + 1``.

    The checks only ask whether a reply is a few tokens long, so each turn is read from
    its start until it has ``cap + 1`` text tokens or ends: one compiled loop over the
    turns (:func:`drafter_contracts.kernels.compiled.reply_lengths`), which
    :func:`reply_lengths_reference` states in numpy.
    """
    from ..kernels.compiled import reply_lengths

    out = np.empty(len(t_start), dtype=np.int64)
    if not len(t_start):
        return out
    ids = view.ids
    if ids.dtype == np.uint64:  # huge ids read as int64 would turn negative; clipped, exact for the lookups
        ids = np.minimum(ids, np.uint64(np.iinfo(np.int64).max)).astype(np.int64)
    reply_lengths(np.ascontiguousarray(ids), labels.role, labels.boundary, _IS_PART, tables.blank,
                  tables.markers.astype(np.int64), t_start.astype(np.int64), t_end.astype(np.int64), cap, out)
    return out


def reply_lengths_reference(view: RowView, labels: Labels, tables: ReplyTables, t_start: np.ndarray,
                            t_end: np.ndarray, cap: int) -> np.ndarray:
    """:func:`_reply_lengths` in numpy, kept for the tests: each turn is read from its start in
    windows (8 tokens, then doubling) until ``cap + 1`` text tokens or its end."""
    n = len(view.ids)
    count = np.zeros(len(t_start), dtype=np.int64)
    turn, begin, end = np.arange(len(t_start)), t_start.copy(), t_end
    width = _REPLY_WINDOW
    while len(turn) and n:
        pos = begin[:, None] + np.arange(width)
        text = _text_at(view, labels, tables, pos)
        text &= pos < end[:, None]
        got = text.view(np.uint64) * np.uint64(0x0101010101010101) >> np.uint64(56)  # true bytes of each 8
        count[turn] += got.sum(axis=1, dtype=np.int64) if got.shape[1] > 1 else got[:, 0].astype(np.int64)
        begin += width
        width *= 2
        keep = (count[turn] <= cap) & (begin < end)
        turn, begin, end = turn[keep], begin[keep], end[keep]
    return np.minimum(count, cap + 1)


def _text_at(view: RowView, labels: Labels, tables: ReplyTables, pos: np.ndarray) -> np.ndarray:
    """Bool per position: a reply-text token (content, reasoning or tool call, not a think marker or blank)."""
    ids = np.take(view.ids, pos, mode="clip")  # clip: a window may run past the shard's last token
    text = in_table(np.take(labels.role, pos, mode="clip"), _IS_PART)
    text &= ~np.take(labels.boundary, pos, mode="clip")
    text &= ~np.take(tables.blank, ids, mode="clip")
    for marker in tables.markers.tolist():
        text &= ids != marker
    return text


def assistant_turns_reference(runs: RoleRuns) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`drafter_contracts.kernels.compiled.assistant_turns` in numpy, kept for the tests: turns start at a
    turn-role run after a run of another role or at a row start, end before the next start or
    non-turn run, and are closed when an ASSISTANT_END run falls in them."""
    is_turn = _IS_TURN[runs.role]
    prev_turn = np.zeros(len(is_turn), dtype=bool)
    prev_turn[1:] = is_turn[:-1]
    first = is_turn & (~prev_turn | runs.row_first)
    last = np.zeros(len(is_turn), dtype=bool)
    last[:-1] = first[1:] | ~is_turn[1:]
    last[-1:] = True
    last &= is_turn
    a_starts, t_end = runs.start[first], runs.end[last]
    closed = np.zeros(len(a_starts), dtype=bool)
    closed[np.searchsorted(a_starts, runs.start[runs.role == Role.ASSISTANT_END], side="right") - 1] = True
    return a_starts, t_end, closed


def _placeholder_turns(view: RowView, labels: Labels, tables: ReplyTables, a_starts: np.ndarray,
                       t_end: np.ndarray, cand: np.ndarray, reply_len: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which turns' content ids are exactly a placeholder's, of the ``cand`` turns of a placeholder's length,
    and each turn's flat position to point at: the placeholder's first token (else the turn's start).

    Only the candidates' tokens are gathered (their whole reply was read to its length already); the
    comparison runs per placeholder string, a handful of them, never per row.
    """
    nt = len(a_starts)
    placeholder = np.zeros(nt, dtype=bool)
    reply_at = a_starts.copy()
    if not len(cand):
        return placeholder, reply_at
    span = t_end[cand] - a_starts[cand]
    pos = np.arange(int(span.sum()), dtype=np.int64)
    pos += np.repeat(a_starts[cand] - np.concatenate(([0], np.cumsum(span)[:-1])), span)
    tok_turn = np.repeat(cand, span)
    is_content = _text_at(view, labels, tables, pos) & (labels.role[pos] == Role.ASSISTANT)
    c_pos = pos[is_content]
    c_ids, c_turn_of = view.ids[c_pos], tok_turn[is_content]
    c_len = np.zeros(nt, dtype=np.int64)
    np.add.at(c_len, c_turn_of, 1)
    for _, p in tables.placeholders:
        hit = cand[(c_len[cand] == len(p)) & (reply_len[cand] == len(p))]
        if len(hit) and len(p):
            at = np.searchsorted(c_turn_of, hit, side="left")
            window = c_ids[at[:, None] + np.arange(len(p))]
            same = (window == p).all(axis=1)
            placeholder[hit[same]] = True
            reply_at[hit[same]] = c_pos[at[same]]
    return placeholder, reply_at


def _first_flagged_turns(view: RowView, a_starts: np.ndarray,
                         by_code: dict[int, tuple[np.ndarray, str, np.ndarray]]
                         ) -> dict[int, tuple[np.ndarray, np.ndarray, str]]:
    """Per reason code: the rows holding a flagged turn and the row position of each row's first one.

    ``by_code[code]``: (flag per turn, reason, the flat position per turn an excerpt points at: the
    token the finding is about, e.g. a placeholder's first token, not the turn's header or think block).
    """
    n = len(view.rows)
    flags: dict[int, tuple[np.ndarray, np.ndarray, str]] = {}
    for code, (hit_turns, text_, at_turn) in by_code.items():
        rows_hit = np.zeros(n, dtype=bool)
        pos = np.full(n, -1, dtype=np.int64)
        t = np.flatnonzero(hit_turns)[::-1]  # reversed: the first flagged turn of a row is written last
        row_of_turn = np.searchsorted(view.offsets, a_starts[t], side="right") - 1  # flagged turns only
        rows_hit[row_of_turn] = True
        pos[row_of_turn] = at_turn[t] - view.offsets[row_of_turn]
        flags[code] = (rows_hit, pos, text_)
    return flags


def check_placeholder_replies(view: RowView, a: ShardArrays, labels: Labels, tables: ReplyTables,
                              contract: Contract, runs: RoleRuns | None = None) -> CheckResult:
    """Assistant turns whose reply is a placeholder ("OK.") or shorter than ``min_reply_tokens``.

    Reply text is the turn's content, reasoning and tool-call tokens without the
    think markers and newline whitespace (so an empty think block is no text). A
    placeholder matches on token ids, against the content span alone. Turns cut at
    the row's end are left to ``cut_mid_reply``.

    Work is per turn, not per token: the turns (runs of assistant-turn roles, cut at
    row starts, as in :func:`spans.turns.assistant_turns`) and whether they hold an end
    marker come from the run-length encoded roles (one compiled loop over the runs,
    :func:`assistant_turns_reference` in numpy); only closed turns are read, each
    just far enough to tell a short reply from a long one; only replies of a
    placeholder's length have their content ids compared.
    """
    from ..kernels.compiled import assistant_turns

    runs = runs if runs is not None else role_runs(labels.role, view.offsets)
    # each assistant turn: [first token, one past its last), and whether it was closed
    a_starts, t_end, closed = assistant_turns(runs.role, runs.start, runs.end, runs.row_first, _IS_TURN)
    nt = len(a_starts)
    sizes = sorted({len(p) for _, p in tables.placeholders if len(p)})
    cap = max(contract.content.min_reply_tokens - 1, sizes[-1] if sizes else 0, 0)
    c_turn = np.flatnonzero(closed)
    reply = _reply_lengths(view, labels, tables, a_starts[c_turn], t_end[c_turn], cap)
    reply_len = np.full(nt, cap + 1, dtype=np.int64)
    reply_len[c_turn] = reply
    placeholder, reply_at = _placeholder_turns(view, labels, tables, a_starts, t_end,
                                               c_turn[np.isin(reply, sizes)] if sizes else c_turn[:0], reply_len)
    short = closed & ~placeholder & (reply_len < contract.content.min_reply_tokens)
    names = " / ".join(repr(t) for t, _ in tables.placeholders)
    flags = _first_flagged_turns(view, a_starts, {
        1: (placeholder, f"placeholder assistant reply ({names})", reply_at),
        2: (short, f"assistant reply shorter than {contract.content.min_reply_tokens} tokens", a_starts)})
    return _result("placeholder_replies", a, view, flags, contract)


def check_cut_mid_reply(view: RowView, a: ShardArrays, labels: Labels, contract: Contract) -> CheckResult:
    """Rows at exactly ``max_len`` whose last token is a supervised token inside an open assistant turn.

    The truncation cap cut the reply: the drafter learns to stop talking mid-sentence
    and never sees the end of that answer.
    """
    lengths = view.lengths
    last = np.maximum(view.offsets[1:] - 1, 0)
    at_cap = (lengths == contract.max_len) & (lengths > 0)
    in_reply = _role_lut(*ASSISTANT_PARTS)[labels.role[last]]
    hit = at_cap & in_reply & view.mask[last]
    flags = {1: (hit, lengths - 1, f"supervised reply cut at max_len {contract.max_len}")}
    return _result("cut_mid_reply", a, view, flags, contract)


def check_short_rows(view: RowView, a: ShardArrays, contract: Contract) -> CheckResult:
    """Rows shorter than the soft minimum ``soft_min_len`` (a warning level above the hard ``min_len``)."""
    hit = view.lengths < contract.content.soft_min_len
    flags = {1: (hit, np.full(len(hit), -1), f"row shorter than soft_min_len {contract.content.soft_min_len}")}
    return _result("short_rows", a, view, flags, contract)


# --------------------------------------------------------------------------- DFlash


def anchor_counts(view: RowView, block_size: int) -> np.ndarray:
    """Per row: supervised positions DFlash may pick as anchors (not in the row's last ``block_size``)."""
    cs = view.supervised_prefix
    starts, ends = view.offsets[:-1], view.offsets[1:]
    return cs[np.maximum(starts, ends - block_size)].astype(np.int64) - cs[starts]


def check_dflash_anchors(view: RowView, a: ShardArrays, contract: Contract, supervised: np.ndarray) -> CheckResult:
    """Rows with supervised tokens but none outside their last ``block_size`` positions teach DFlash nothing.

    speculators' ``select_anchors`` drops the last ``block_size`` positions before
    choosing anchors; a 21-token row ending in a 3-token "OK." keeps none.
    """
    anchors = anchor_counts(view, contract.content.block_size)
    hit = (supervised > 0) & (anchors == 0)
    # The example position (each flagged row's first supervised token) only for flagged rows:
    # a binary search per row over a shard's prefix sum cost ~2.5 ms a shard that almost always passes.
    first_sup = np.full(len(hit), -1, dtype=np.int64)
    first_sup[hit] = _first_supervised(view, np.flatnonzero(hit))
    return _result("dflash_anchors", a, view, {1: (hit, first_sup, f"all supervised tokens in the row's last "
                                                                    f"{contract.content.block_size} positions "
                                                                    "(no DFlash anchor)")}, contract)


def _first_supervised(view: RowView, rows: np.ndarray | None = None) -> np.ndarray:
    """Position of the first supervised token of each of ``rows`` (view rows; default all), -1 when none.

    The first supervised token of a row is where the prefix count first exceeds its
    value at the row start: one binary search per row, no pass over the tokens.
    """
    cs = view.supervised_prefix
    starts = view.offsets[:-1] if rows is None else view.offsets[:-1][rows]
    per_row = view.supervised_per_row if rows is None else view.supervised_per_row[rows]
    out = np.full(len(starts), -1, dtype=np.int64)
    has = per_row > 0
    at = np.searchsorted(cs, cs[starts[has]] + 1, side="left") - 1
    out[has] = at - starts[has]
    return out


# --------------------------------------------------------------------------- duplicates

_M1, _M2, _GOLD = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB), np.uint64(0x9E3779B97F4A7C15)


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer on uint64 arrays (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = x + _GOLD
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


HASH_BASE = 0x9E3779B97F4A7C15  # the weight base r: odd, so every power r^j is a unit mod 2^64 (r = 5 mod 8)


def row_hashes(view: RowView, sums: np.ndarray | None = None) -> np.ndarray:
    """A 64-bit hash of every row's ids, mask and length (order-sensitive).

    ``H = sum_j (2 id_j + mask_j) r^j  (mod 2^64)`` over the row's positions j, for
    a fixed odd ``r``; the hash is ``mix64(H ^ mix64(length + GOLD))``, a bijection
    of ``H`` for a given length. ``H`` is one compiled pass over the shard
    (:func:`drafter_contracts.kernels.compiled.row_hash_sums`, ~1.3 ns a token), or ``sums``
    when a shard's worker has it from its one token pass (``kernels.compiled.token_pass``).

    Why equal hashes mean equal rows: two rows of one length collide iff
    ``sum_j d_j r^j = 0 (mod 2^64)`` with ``d_j = 2 (a_j - b_j) + (m_j - m'_j)``.
    Rows that differ at one position never collide (an odd d for a mask bit, else
    ``2 (a - b)`` with at most 32 factors of 2 for int32 ids). Two swapped tokens at
    distance k give ``d r^i (1 - r^k)``, with at most 32 + 2 + log2(k) factors of 2
    (r = 5 mod 8, so ``r^k - 1`` has exactly 2 + v2(k)): never for rows under 2^29
    tokens. Rows of different lengths (a row and its prefix) differ in the length
    term; any other difference leaves a value that is uniform for practical purposes
    (a zero needs Thue-Morse-like sign patterns over thousands of positions), so
    collisions among a million rows (5e11 pairs) have probability ~3e-8, and a hash
    match only nominates rows for an exact comparison (:func:`exact_groups`). Linear
    position weights (sums of ``j * id_j``) would not do: a row and its mirror image
    often share them.
    """
    n_rows = len(view.rows)
    total = np.zeros(n_rows, dtype=np.uint64) if sums is None else sums
    if n_rows and sums is None:  # else ``H`` is given, from the shard's one token pass
        from ..kernels.compiled import row_hash_sums

        mask = view.mask
        row_hash_sums(np.ascontiguousarray(view.ids), mask if mask is not None else np.zeros(1, bool),
                      mask is not None, np.ascontiguousarray(view.offsets, dtype=np.int64), np.uint64(HASH_BASE), total)
    return mix64(total ^ mix64(view.lengths.astype(np.uint64) + _GOLD))


def find_duplicates(rows: np.ndarray, hashes: np.ndarray) -> tuple[int, int, list[tuple[int, int]]]:
    """Exact-duplicate figures over the whole dataset from (global row, hash) pairs.

    Returns (duplicate rows = rows beyond the first of their group, groups, example pairs
    (first row, duplicate row), sorted by the duplicate row).

    Runs once at the controller over every row (0.9 M at full size): one plain sort of
    the hashes finds the repeated values, a bit table on their low bits picks the few
    rows that may carry one, and only those rows are ordered by (hash, row). The same
    figures as ordering all rows, ~8x faster (a lexsort of all rows took ~250 ms).
    """
    if not len(hashes):
        return 0, 0, []
    ordered = np.sort(hashes)
    repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    del ordered
    if not len(repeated):
        return 0, 0, []
    keep = _rows_of(np.unique(repeated), hashes)
    return _duplicate_groups(rows[keep], hashes[keep])


def _rows_of(values: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """Indices of the hashes equal to one of the sorted ``values`` (a bit table on the low bits
    first, so only the few rows that may match are searched)."""
    low = np.uint64((1 << 20) - 1)
    table = np.zeros(1 << 20, dtype=bool)
    table[(values & low).astype(np.intp)] = True
    maybe = np.flatnonzero(table[(hashes & low).astype(np.intp)])
    at = np.minimum(np.searchsorted(values, hashes[maybe]), len(values) - 1)
    return maybe[values[at] == hashes[maybe]]  # every row of a repeated hash, and only those


def repeated_hash_groups(rows: np.ndarray, hashes: np.ndarray) -> list[np.ndarray]:
    """Rows sharing a hash with another row, one sorted array per hash: the candidates that the
    controller compares exactly (a hash match alone is never reported as a duplicate)."""
    if not len(hashes):
        return []
    ordered = np.sort(hashes)
    repeated = np.unique(ordered[1:][ordered[1:] == ordered[:-1]])
    del ordered
    if not len(repeated):
        return []
    keep = _rows_of(repeated, hashes)
    order = np.lexsort((rows[keep], hashes[keep]))
    r, h = rows[keep][order], hashes[keep][order]
    cuts = np.flatnonzero(h[1:] != h[:-1]) + 1
    return np.split(r, cuts)


def exact_groups(candidates: list[np.ndarray], keys: Callable[[np.ndarray], list[bytes]]
                 ) -> tuple[int, int, list[tuple[int, int]]]:
    """Duplicate figures from hash-candidate groups, comparing the rows' contents exactly.

    ``keys(rows)`` gives each row's exact content (ids and mask bytes). The row hash
    is a polynomial over 2**64, fast and collision-free for rows differing in one
    place, but structured rows can collide (two 1,024-token Thue-Morse rows do), so a
    hash match only nominates rows: each group is split by content and only identical
    rows count. Same return value as :func:`find_duplicates`.
    """
    extra, groups, pairs = 0, 0, []
    for group in candidates:
        first: dict[bytes, int] = {}
        repeated: set[bytes] = set()
        for row, key in zip(group.tolist(), keys(group)):
            if key in first:
                extra += 1
                repeated.add(key)
                pairs.append((first[key], row))
            else:
                first[key] = row
        groups += len(repeated)
    pairs.sort(key=lambda p: p[1])
    return extra, groups, pairs


def _duplicate_groups(rows: np.ndarray, hashes: np.ndarray) -> tuple[int, int, list[tuple[int, int]]]:
    """:func:`find_duplicates` by ordering every given row by (hash, row)."""
    if not len(hashes):
        return 0, 0, []
    order = np.lexsort((rows, hashes))
    h, r = hashes[order], rows[order]
    same = np.concatenate(([False], h[1:] == h[:-1]))
    group_start = np.flatnonzero(~same)
    first_of = r[group_start][np.cumsum(~same) - 1]
    dup = np.flatnonzero(same)
    groups = int(len(np.unique(h[dup]))) if len(dup) else 0
    pairs = sorted(zip(first_of[dup].tolist(), r[dup].tolist()), key=lambda p: p[1])
    return int(len(dup)), groups, pairs


# --------------------------------------------------------------------------- duplicates over the whole dataset

#: Duplicate pairs a whole-dataset verdict keeps as examples.
MAX_PAIRS = 20


def duplicate_verdict(hashes: dict[int, tuple[np.ndarray, np.ndarray]], num_shards: int, strict: bool,
                      row_keys: Callable[[np.ndarray], list[bytes]]) -> CheckResult:
    """The global duplicate verdict from every shard's (rows, hashes); skipped when a shard sent none.

    ``row_keys(rows)``: the exact contents of the given global rows, read from the dataset for
    the few rows whose hash repeats.
    """
    if len(hashes) != num_shards:
        return CheckResult("duplicate_rows", "dataset", skipped=(
            f"row hashes arrived from {len(hashes)} of {num_shards} shards (tests deselected or skipped): "
            "duplicates are only counted over the whole dataset"))
    rows = np.concatenate([r for r, _ in hashes.values()] or [np.zeros(0, np.int64)])
    sums = np.concatenate([h for _, h in hashes.values()] or [np.zeros(0, np.uint64)])
    extra, groups, pairs = exact_groups(repeated_hash_groups(rows, sums), row_keys)
    examples = [Violation(dup, -1, f"same ids and mask as row {first}") for first, dup in pairs[:MAX_PAIRS]]
    by_reason = {"exact duplicate of an earlier row": extra} if extra else {}
    rate = extra / len(rows) if len(rows) else 0.0
    message = ""
    if extra and strict:
        message = (f"{extra:,} of {len(rows):,} rows ({rate:.3%}) repeat an earlier row exactly "
                   f"({groups:,} distinct rows repeated); e.g. "
                   + ", ".join(f"row {d} = row {f}" for f, d in pairs[:5]))
    return CheckResult("duplicate_rows", "dataset", rows_checked=int(len(rows)), rows_violating=extra,
                       by_reason=by_reason, examples=examples, message=message, report_only=not strict)


def _shard_hashes(e, shard) -> tuple[np.ndarray, np.ndarray]:
    """A shard's (global row, hash) pairs; a shard whose rows are all left out (or not read) sends none,
    not nothing: the whole-dataset comparison needs to hear from every shard."""
    if e.unreadable(shard):
        return np.zeros(0, np.int64), np.zeros(0, np.uint64)
    return e.row_hashes(shard)


def _reduce_duplicates(run) -> CheckResult | None:
    recorded = run.recorded("duplicate_rows")
    if recorded is None or recorded["skipped"] >= recorded["tests"]:
        return None  # no shard could hash its rows: the shards' own skips say why
    lost = run.lost_shards()  # shards whose test never reported cannot have sent hashes
    e = run.engine
    return duplicate_verdict(run.partials("duplicate_rows"), len(e.shards) - lost, e.contract.content.strict,
                             e.row_keys)


# --------------------------------------------------------------------------- the registry

_CONTENT = dict(content=True)
register(Spec("duplicate_rows", Scope.WHOLE, "no row repeats an earlier row exactly (ids and mask)", **_CONTENT,
              # per shard: the carrier result (rows seen) and the rows' hashes; the verdict at the controller
              run=lambda e, w: CheckResult("duplicate_rows", w.shard.id, rows_checked=len(w.view.rows),
                                           report_only=not e.contract.content.strict),
              partial=_shard_hashes, reduce=_reduce_duplicates))
register(Spec("placeholder_replies", Scope.ROW, "no assistant reply is a placeholder", **_CONTENT,
              needs=frozenset({IDS, TOKENIZER}),
              run=lambda e, w: check_placeholder_replies(w.view, w.arrays, w.labels, e.reply_tables, e.contract,
                                                         w.role_runs)))
register(Spec("cut_mid_reply", Scope.ROW, "no supervised reply cut by the truncation cap", **_CONTENT,
              needs=frozenset({IDS, MASK, TOKENIZER}),
              run=lambda e, w: check_cut_mid_reply(w.view, w.arrays, w.labels, e.contract)))
register(Spec("short_rows", Scope.ROW, "no row shorter than soft_min_len", **_CONTENT,
              run=lambda e, w: check_short_rows(w.view, w.arrays, e.contract)))
register(Spec("dflash_anchors", Scope.ROW, "every supervised row leaves DFlash an anchor", **_CONTENT,
              needs=frozenset({IDS, MASK}),
              run=lambda e, w: check_dflash_anchors(w.view, w.arrays, e.contract, w.view.supervised_per_row)))
