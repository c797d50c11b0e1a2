"""Suspicious-content contracts: rows that are valid but probably useless or harmful to train on.

A mixture may hold such rows on purpose (the seed's dummy "OK." replies), so these
contracts are report-only by default: the result carries ``report_only`` and the
test passes with a warning in the summary; ``[content] strict = true`` makes them fail.
Everything is vectorized over a shard: per-turn figures come from ``np.bincount``
over token-to-turn indices, per-row figures from prefix sums.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass

import numpy as np

from ..config import Contract
from ..dataset import ShardArrays
from ..results import CheckResult, row_result
from ..spans.labels import ASSISTANT_PARTS, Labels, Role
from . import policy
from .view import RowView, in_table

CONTENT_CHECKS = ("duplicate_rows", "placeholder_replies", "cut_mid_reply", "short_rows", "dflash_anchors")


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
    from ..fixtures.cache import cache_root

    path = cache_root() / "vocab" / f"{vocab.fingerprint}-placeholders.json"
    try:
        cached = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        cached = {}
    missing = [t for t in texts if not isinstance(cached.get(t), list)]
    if missing:
        for t in missing:
            cached[t] = vocab.backend.encode(t, add_special_tokens=False).ids
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".placeholders-", dir=path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(cached, fh)
            os.replace(tmp, path)
        except OSError:
            pass  # the cache only saves time
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


def check_placeholder_replies(view: RowView, a: ShardArrays, labels: Labels, tables: ReplyTables,
                              contract: Contract) -> CheckResult:
    """Assistant turns whose reply is a placeholder ("OK.") or shorter than ``min_reply_tokens``.

    Reply text is the turn's content, reasoning and tool-call tokens without the
    think markers and newline whitespace (so an empty think block is no text). A
    placeholder matches on token ids, against the content span alone. Turns cut at
    the row's end are left to ``cut_mid_reply``.
    """
    # Reply tokens come in runs inside one assistant turn each (the last turn starting at or
    # before the run): per-turn figures are sums over runs, not over tokens.
    ids, role = view.ids, labels.role
    a_starts = policy.turns_of(labels, view.offsets).starts  # first token of each assistant turn
    nt = len(a_starts)
    r_start, r_end = _runs(in_table(role, _role_lut(*ASSISTANT_PARTS, Role.ASSISTANT_END)))
    r_turn = np.searchsorted(a_starts, r_start, side="right") - 1
    keep = r_turn >= 0
    r_start, r_end, r_turn = r_start[keep], r_end[keep], r_turn[keep]
    text = in_table(role, _role_lut(*ASSISTANT_PARTS)) & ~labels.boundary & ~np.take(tables.blank, ids, mode="clip")
    for marker in tables.markers.tolist():
        text &= ids != marker
    content = text & (role == Role.ASSISTANT)
    reply_len = np.bincount(r_turn, weights=_run_sums(text, r_start, r_end), minlength=nt).astype(np.int64)
    c_len = np.bincount(r_turn, weights=_run_sums(content, r_start, r_end), minlength=nt).astype(np.int64)
    ends = np.flatnonzero(role == Role.ASSISTANT_END)
    e_turn = np.searchsorted(a_starts, ends, side="right") - 1
    closed = np.bincount(e_turn[e_turn >= 0], minlength=nt) > 0
    # Content tokens of the candidate turns only (a placeholder is a few tokens long).
    placeholder = np.zeros(nt, dtype=bool)
    sizes = {len(p) for _, p in tables.placeholders if len(p)}
    cand_turn = closed & np.isin(c_len, list(sizes)) & (c_len == reply_len) if sizes else np.zeros(nt, dtype=bool)
    sel = cand_turn[r_turn]
    if sel.any():
        s_start, s_len, s_turn = r_start[sel], (r_end - r_start)[sel], r_turn[sel]
        pos = np.arange(int(s_len.sum())) + np.repeat(s_start - np.concatenate(([0], np.cumsum(s_len)[:-1])), s_len)
        tok_turn = np.repeat(s_turn, s_len)
        is_content = content[pos]
        c_ids, c_turn = ids[pos[is_content]], tok_turn[is_content]
        for _, p in tables.placeholders:  # a handful of strings, not rows
            cand = np.flatnonzero(cand_turn & (c_len == len(p)) & (reply_len == len(p)))
            if len(cand) and len(p):
                first = np.searchsorted(c_turn, cand, side="left")
                window = c_ids[first[:, None] + np.arange(len(p))]
                placeholder[cand[(window == p).all(axis=1)]] = True
    short = closed & ~placeholder & (reply_len < contract.content.min_reply_tokens)
    row_of_turn = np.searchsorted(view.offsets, a_starts, side="right") - 1
    n = len(view.rows)
    flags: dict[int, tuple[np.ndarray, np.ndarray, str]] = {}
    names = " / ".join(repr(t) for t, _ in tables.placeholders)
    for code, hit_turns, text_ in ((1, placeholder, f"placeholder assistant reply ({names})"),
                                   (2, short, f"assistant reply shorter than {contract.content.min_reply_tokens} tokens")):
        rows_hit = np.zeros(n, dtype=bool)
        pos = np.full(n, -1, dtype=np.int64)
        t = np.flatnonzero(hit_turns)[::-1]  # reversed: the first flagged turn of a row is written last
        rows_hit[row_of_turn[t]] = True
        pos[row_of_turn[t]] = a_starts[t] - view.offsets[row_of_turn[t]]
        flags[code] = (rows_hit, pos, text_)
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
    return _result("cut_mid_reply", a, view, {1: (hit, lengths - 1, f"supervised reply cut at max_len {contract.max_len}")},
                   contract)


def check_short_rows(view: RowView, a: ShardArrays, contract: Contract) -> CheckResult:
    """Rows shorter than the soft minimum ``soft_min_len`` (a warning level above the hard ``min_len``)."""
    hit = view.lengths < contract.content.soft_min_len
    return _result("short_rows", a, view, {1: (hit, np.full(len(hit), -1), f"row shorter than soft_min_len "
                                                                            f"{contract.content.soft_min_len}")}, contract)


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
    first_sup = _first_supervised(view)
    return _result("dflash_anchors", a, view, {1: (hit, first_sup, f"all supervised tokens in the row's last "
                                                                    f"{contract.content.block_size} positions "
                                                                    "(no DFlash anchor)")}, contract)


def _first_supervised(view: RowView) -> np.ndarray:
    """Position of each row's first supervised token (-1 when none).

    The first supervised token of a row is where the prefix count first exceeds its
    value at the row start: one binary search per row, no pass over the tokens.
    """
    cs = view.supervised_prefix
    starts = view.offsets[:-1]
    out = np.full(len(view.rows), -1, dtype=np.int64)
    has = view.supervised_per_row > 0
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


_HASH_CHUNK = 1 << 16


def _mix64_inplace(x: np.ndarray, tmp: np.ndarray) -> np.ndarray:
    """:func:`mix64` overwriting ``x`` (``tmp``: scratch of the same size): no temporaries per step."""
    with np.errstate(over="ignore"):
        np.add(x, _GOLD, out=x)
        for shift, mult in ((30, _M1), (27, _M2)):
            np.right_shift(x, np.uint64(shift), out=tmp)
            np.bitwise_xor(x, tmp, out=x)
            np.multiply(x, mult, out=x)
        np.right_shift(x, np.uint64(31), out=tmp)
        np.bitwise_xor(x, tmp, out=x)
    return x


def row_hashes(view: RowView) -> np.ndarray:
    """A 64-bit hash of every row's ids, mask and length (order-sensitive, vectorized).

    Each token contributes ``mix(id, mask, position)``; the wrapping sum per row is
    mixed with the row length. Collisions among a million rows: about 3e-8.
    ``mix(position)`` is looked up in a table of the shard's longest row, and the
    token mix runs in place on one buffer, so a token costs one 8-byte array, not six.
    """
    if not len(view.rows):
        return np.zeros(0, dtype=np.uint64)
    lengths = view.lengths
    n = len(view.ids)
    idx = np.int32 if n < 2**31 - 1 else np.int64
    pos_mix = mix64(np.arange(int(lengths.max()) if len(lengths) else 0, dtype=np.uint64))
    pos = np.arange(n, dtype=idx)
    pos -= np.repeat(view.offsets[:-1].astype(idx), lengths)
    token = np.empty(n, dtype=np.uint64)
    tmp = np.empty(min(n, _HASH_CHUNK), dtype=np.uint64)
    mask = view.mask.view(np.uint8) if view.mask is not None else None
    for lo in range(0, n, _HASH_CHUNK):  # cache-sized blocks of tokens (not rows): each step stays in L2
        hi = min(n, lo + _HASH_CHUNK)
        out, scratch = token[lo:hi], tmp[:hi - lo]
        np.left_shift(view.ids[lo:hi].astype(np.int64).view(np.uint64), np.uint64(1), out=out)
        if mask is not None:
            np.bitwise_or(out, mask[lo:hi], out=out)
        np.take(pos_mix, pos[lo:hi], out=scratch)
        np.bitwise_xor(out, scratch, out=out)
        _mix64_inplace(out, scratch)
    del pos, tmp
    with np.errstate(over="ignore"):
        sums = np.add.reduceat(token, view.offsets[:-1]) if len(token) else np.zeros(len(view.rows), np.uint64)
    sums = np.where(lengths > 0, sums, np.uint64(0))  # reduceat repeats a value for empty rows
    return mix64(sums ^ mix64(lengths.astype(np.uint64) + _GOLD))


def find_duplicates(rows: np.ndarray, hashes: np.ndarray) -> tuple[int, int, list[tuple[int, int]]]:
    """Exact-duplicate figures over the whole dataset from (global row, hash) pairs.

    Returns (duplicate rows = rows beyond the first of their group, groups, example pairs
    (first row, duplicate row), sorted by the duplicate row).
    """
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
