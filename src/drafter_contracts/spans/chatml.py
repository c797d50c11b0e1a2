"""ChatML (Qwen 2.5/3/3.5/3.6) span oracle, from token ids alone.

A turn is ``<|im_start|>ROLE\\n ... <|im_end|>\\n``. Everything is found from
the positions of marker ids plus running maxima (``np.maximum.accumulate``) of
"last marker seen", reset at row starts: no Python loop over rows or tokens,
and no regex over decoded text, so role markers typed as plain characters in
user text never open a span, while special-token strings that the tokenizer
turned into real control tokens are seen for what they are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UsageProblem
from ..vocab import Vocabulary
from . import generic
from .labels import Labels, Role, TurnProblem
from .profile import CompiledProfile

ROLE_WORDS = {"system": Role.SYSTEM, "developer": Role.SYSTEM, "user": Role.USER,
              "assistant": Role.ASSISTANT, "tool": Role.TOOL}


@dataclass(frozen=True)
class ChatMLProfile:
    """Marker ids of one ChatML tokenizer."""

    start: int
    end: int
    newline: int
    role_of_id: np.ndarray  # uint8 per id: the Role a header's role token opens (UNKNOWN_ROLE otherwise)
    newline_lead: np.ndarray  # bool per id
    think: tuple[int, int] | None
    tool_call: tuple[int, int] | None

    @classmethod
    def from_vocabulary(cls, vocab: Vocabulary) -> "ChatMLProfile":
        start, end = vocab.id_of("<|im_start|>"), vocab.id_of("<|im_end|>")
        newline = vocab.single_id("\n")
        if start is None or end is None or newline is None:
            raise UsageProblem(f"--tokenizer {vocab.name}: has no <|im_start|>/<|im_end|> tokens, so it cannot be the ChatML "
                               "tokenizer this contract declares; pass the tokenizer that produced the dataset")
        role_of_id = np.full(vocab.size, Role.UNKNOWN_ROLE, dtype=np.uint8)
        for word, role in ROLE_WORDS.items():
            rid = vocab.single_id(word)
            if rid is None:
                raise UsageProblem(f"--tokenizer {vocab.name}: role '{word}' is not a single token; "
                                   "this ChatML tokenizer is not supported yet")
            role_of_id[rid] = role

        def pair(a: str, b: str) -> tuple[int, int] | None:
            ia, ib = vocab.id_of(a), vocab.id_of(b)
            return (ia, ib) if ia is not None and ib is not None else None

        return cls(start, end, newline, role_of_id, vocab.newline_lead,
                   pair("<think>", "</think>"), pair("<tool_call>", "</tool_call>"))


def _last_at_or_before(flag: np.ndarray, pos: np.ndarray, row_start: np.ndarray) -> np.ndarray:
    """Position of the last flagged token at or before each token, in the same row; -1 if none."""
    last = np.maximum.accumulate(np.where(flag, pos, -1))
    return np.where(last >= row_start, last, -1)


# Marker kinds of the marker-level labeller (0: not a marker).
_S, _E, _THINK_OPEN, _THINK_CLOSE, _CALL_OPEN, _CALL_CLOSE = 1, 2, 3, 4, 5, 6


def _marker_kinds(profile: "ChatMLProfile") -> tuple[dict[int, int], int]:
    kinds = {profile.start: _S, profile.end: _E}
    for pair, (o, c) in ((profile.think, (_THINK_OPEN, _THINK_CLOSE)), (profile.tool_call, (_CALL_OPEN, _CALL_CLOSE))):
        if pair is not None:
            kinds.setdefault(pair[0], o)
            kinds.setdefault(pair[1], c)
    return kinds, min(kinds)


def _running_last(flag: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Index of the last flagged event at or before each event, in the same row (-1 if none)."""
    idx = np.arange(len(flag))
    last = np.maximum.accumulate(np.where(flag, idx, -1)) if len(flag) else idx
    return np.where(last >= first, last, -1)


def label(ids: np.ndarray, offsets: np.ndarray, profile: "ChatMLProfile | CompiledProfile", max_len: int) -> Labels:
    """Label every token of a flattened shard with its Role and any structural problem.

    Works at the marker level: turn markers, reasoning/tool-call tags and row starts
    (a few percent of the tokens) are "events"; between two events every token has
    the same role, computed once per event and spread with one ``np.repeat``. Only
    the tokens whose role depends on where they sit (the markers themselves, the
    two tokens after an opener, the one after an end marker) are relabelled one by
    one. Same labels as :func:`label_reference`, several times cheaper.

    Any other family's compiled profile goes to the generic labeller, so callers that
    hold "the engine's profile" (explanations) need not know which family it is.
    """
    if isinstance(profile, CompiledProfile):
        return generic.label(ids, offsets, profile, max_len)
    n = len(ids)
    lengths = np.diff(offsets)
    nonempty = lengths > 0
    role = np.zeros(n, dtype=np.uint8)
    boundary = np.zeros(n, dtype=bool)
    problem = np.zeros(n, dtype=np.uint8)
    if n == 0:
        return Labels(role, boundary, problem)

    # --- events: markers (found among the few ids >= the smallest marker id) and row starts
    kinds, lowest = _marker_kinds(profile)
    cand = np.flatnonzero(ids >= lowest)
    kind_of = np.zeros(max(kinds) + 1, dtype=np.uint8)
    kind_of[list(kinds)] = list(kinds.values())
    cid = ids[cand]
    ckind = np.where(cid < len(kind_of), kind_of[np.minimum(cid, len(kind_of) - 1)], 0).astype(np.uint8)
    mpos = cand[ckind > 0]
    mkind = ckind[ckind > 0]
    firsts = offsets[:-1][nonempty]
    plain_first = firsts[~np.isin(firsts, mpos, assume_unique=True)]
    ev_pos = np.concatenate((mpos, plain_first)).astype(np.int64)
    ev_kind = np.concatenate((mkind, np.zeros(len(plain_first), np.uint8)))
    order = np.argsort(ev_pos, kind="stable")
    ev_pos, ev_kind = ev_pos[order], ev_kind[order]
    m = len(ev_pos)
    ev_row = np.searchsorted(offsets, ev_pos, side="right") - 1
    ev_row_end = offsets[ev_row + 1]
    is_first = ev_pos == offsets[ev_row]
    first = np.maximum.accumulate(np.where(is_first, np.arange(m), 0))

    # --- running state per event (indices into the event arrays, reset at row starts)
    is_s, is_e = ev_kind == _S, ev_kind == _E
    ls, le = _running_last(is_s, first), _running_last(is_e, first)
    lto, ltc = _running_last(ev_kind == _THINK_OPEN, first), _running_last(ev_kind == _THINK_CLOSE, first)
    lco, lcc = _running_last(ev_kind == _CALL_OPEN, first), _running_last(ev_kind == _CALL_CLOSE, first)
    # Was a turn open just before this event? (previous S/E marker of the row is an opener)
    ls_before = np.where(is_first, -1, np.concatenate(([-1], ls[:-1])))
    le_before = np.where(is_first, -1, np.concatenate(([-1], le[:-1])))
    open_before = ls_before > le_before
    nested = is_s & open_before
    stray = is_e & ~open_before

    # Role each opener gives its turn.
    s_idx = np.flatnonzero(is_s)
    s_pos = ev_pos[s_idx]
    has_role_tok = s_pos + 1 < ev_row_end[s_idx]
    nxt = np.minimum(s_pos + 1, n - 1)
    nxt_id = ids[nxt]
    nxt_is_marker = (nxt_id == profile.start) | (nxt_id == profile.end)
    named = has_role_tok & ~nxt_is_marker
    s_role = np.where(named, profile.role_of_id[np.clip(nxt_id, 0, len(profile.role_of_id) - 1)],
                      Role.UNKNOWN_ROLE).astype(np.uint8)
    unknown_at = nxt[named & (s_role == Role.UNKNOWN_ROLE)]
    empty_at = nxt[has_role_tok & (nxt_id == profile.end)]
    s_role[nested[s_idx]] = Role.INJECTED
    turn_role_of_ev = np.full(m, Role.OUTSIDE, dtype=np.uint8)
    turn_role_of_ev[s_idx] = s_role

    def turn_role(j: np.ndarray) -> np.ndarray:
        s = ls[j]
        return np.where(s >= 0, turn_role_of_ev[np.maximum(s, 0)], Role.OUTSIDE).astype(np.uint8)

    # --- role of the ordinary tokens of each segment [event, next event)
    tr = turn_role(np.arange(m))
    in_turn = ls >= 0
    closed = in_turn & (le >= ls)
    seg_role = np.where(in_turn & ~closed, tr, Role.OUTSIDE).astype(np.uint8)
    body = seg_role == Role.ASSISTANT
    seg_role[body & (lto > ls) & (lto > ltc)] = Role.REASONING
    seg_role[body & (lco > ls) & (lco > lcc)] = Role.TOOL_CALL
    seg_len = np.diff(np.append(ev_pos, n))
    role = np.repeat(seg_role, seg_len)
    # Text between turns: ordinary tokens of closed segments. An end marker's segment
    # normally holds only the marker and its newline (both relabelled below), so on
    # clean data no token is touched here.
    spill = np.flatnonzero(closed & (seg_len > np.where(is_e, 2, 1)))
    if len(spill):
        lens = seg_len[spill]
        at = np.arange(int(lens.sum())) + np.repeat(ev_pos[spill] - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
        problem[at] = TurnProblem.TEXT_OUTSIDE_TURN

    # --- tokens whose role depends on their place: markers, opener + 1 and + 2, end + 1
    e_pos = ev_pos[is_e]
    e_end = ev_row_end[is_e]
    s_end = ev_row_end[s_idx]
    e_idx = np.flatnonzero(is_e)
    s1, s2, e1 = s_pos + 1 < s_end, s_pos + 2 < s_end, e_pos + 1 < e_end
    special = np.concatenate((ev_pos[ev_kind > 0], s_pos[s1] + 1, s_pos[s2] + 2, e_pos[e1] + 1))
    # Event of each special token: its own, or the marker's moved on by the events (at
    # most d, all distinct positions) that lie between the marker and marker + d.
    padded = np.append(ev_pos, [n, n])
    base = np.concatenate((np.flatnonzero(ev_kind > 0), s_idx[s1], s_idx[s2], e_idx[e1]))
    j = base.copy()
    n1, n2 = len(ev_pos[ev_kind > 0]), len(ev_pos[ev_kind > 0]) + int(s1.sum()) + int(s2.sum())
    j[n1:] += padded[base[n1:] + 1] <= special[n1:]
    j[n1 + int(s1.sum()):n2] += padded[base[n1 + int(s1.sum()):n2] + 2] <= special[n1 + int(s1.sum()):n2]
    tid = ids[special]
    sj, ej = ls[j], le[j]
    t_in = sj >= 0
    t_tr = turn_role(j)
    t_closed = t_in & (ej >= sj)
    t_open = t_in & ~t_closed
    k = special - np.where(t_in, ev_pos[np.maximum(sj, 0)], 0)
    t_role = np.where(t_open, t_tr, Role.OUTSIDE).astype(np.uint8)
    t_role[t_open & (k <= 1)] = Role.HEADER
    third = t_open & (k == 2)
    safe = np.clip(tid, 0, len(profile.role_of_id) - 1)
    newline_ok = profile.newline_lead[np.clip(safe, 0, len(profile.newline_lead) - 1)]
    is_nl = tid == profile.newline
    t_role[third & is_nl] = Role.HEADER
    t_boundary = third & newline_ok & ~is_nl
    t_problem = np.zeros(len(special), dtype=np.uint8)
    t_problem[third & ~newline_ok & (t_tr != Role.INJECTED)] = TurnProblem.MALFORMED_HEADER
    t_body = (t_role == Role.ASSISTANT) & ~t_boundary
    for pair, lo, lc, sub in ((profile.think, lto, ltc, Role.REASONING), (profile.tool_call, lco, lcc, Role.TOOL_CALL)):
        if pair is None:
            continue
        o, c = lo[j], lc[j]
        t_role[t_body & (o > sj) & ((o > c) | (tid == pair[1]))] = sub
    t_is_e = tid == profile.end
    t_kind_e = t_is_e & (ev_pos[j] == special)  # an end marker event (not a stray one is labelled below)
    at_end = t_kind_e & t_in & ~stray[j]
    t_role[at_end] = np.where(t_tr[at_end] == Role.ASSISTANT, Role.ASSISTANT_END, Role.END)
    after = t_closed & ~t_is_e & (special == np.where(ej >= 0, ev_pos[np.maximum(ej, 0)], -2) + 1) & is_nl
    t_role[after & (t_tr == Role.ASSISTANT)] = Role.AFTER_ASSISTANT_END
    t_problem[t_closed & ~t_is_e & ~after] = TurnProblem.TEXT_OUTSIDE_TURN
    role[special] = t_role
    boundary[special] = t_boundary
    problem[special] = t_problem

    # Problems found on markers and headers.
    problem[ev_pos[nested]] = TurnProblem.HEADER_IN_OPEN_TURN
    problem[ev_pos[stray]] = TurnProblem.STRAY_END
    problem[unknown_at] = TurnProblem.UNKNOWN_ROLE
    problem[empty_at] = TurnProblem.MALFORMED_HEADER

    # Row-level: must open with a header; a short row must not end inside a turn.
    lead_bad = firsts[ids[firsts] != profile.start]
    problem[lead_bad] = TurnProblem.NO_LEADING_HEADER
    lasts = offsets[1:][nonempty] - 1
    jl = np.searchsorted(ev_pos, lasts, side="right") - 1
    still_open = (ls[jl] >= 0) & (le[jl] < ls[jl])
    unclosed = lasts[still_open & (lengths[nonempty] < max_len)]
    problem[unclosed[problem[unclosed] == 0]] = TurnProblem.UNCLOSED_TURN
    return Labels(role, boundary, problem)


def label_reference(ids: np.ndarray, offsets: np.ndarray, profile: "ChatMLProfile", max_len: int) -> Labels:
    """The per-token formulation of :func:`label` (six running maxima over every token).

    Kept as the specification the marker-level labeller is tested against: it reads
    each rule directly, at about four times the cost.
    """
    n = len(ids)
    lengths = np.diff(offsets)
    idx = np.int32 if n < 2**31 - 1 else np.int64
    pos = np.arange(n, dtype=idx)
    row_start = np.repeat(offsets[:-1].astype(idx), lengths)
    safe_ids = np.clip(ids, 0, len(profile.role_of_id) - 1)  # for table lookups only

    is_s = ids == profile.start
    is_e = ids == profile.end
    last_s = _last_at_or_before(is_s, pos, row_start)
    last_e = _last_at_or_before(is_e, pos, row_start)
    problem = np.zeros(n, dtype=np.uint8)

    # Markers in order: an opener right after an opener is nested; an end marker
    # right after an end marker (or first in its row) is stray.
    marks = np.flatnonzero(is_s | is_e)
    m_row_start = row_start[marks]
    prev = np.concatenate(([-1], marks[:-1]))
    prev = np.where(prev >= m_row_start, prev, -1)
    prev_is_s = np.where(prev >= 0, is_s[np.maximum(prev, 0)], False)
    nested = marks[is_s[marks] & prev_is_s]
    stray = marks[is_e[marks] & ~prev_is_s]
    problem[nested] = TurnProblem.HEADER_IN_OPEN_TURN
    problem[stray] = TurnProblem.STRAY_END

    # Role of each turn, stored at its opener's position and spread by last_s.
    s_pos = np.flatnonzero(is_s)
    nxt = s_pos + 1
    row_end = offsets[np.searchsorted(offsets, s_pos, side="right")]
    has_role_tok = nxt < row_end  # False only when a cut at max_len falls right after the opener
    nxt = np.minimum(nxt, max(n - 1, 0))
    nxt_is_marker = is_s[nxt] | is_e[nxt]
    s_role = np.where(has_role_tok & ~nxt_is_marker, profile.role_of_id[safe_ids[nxt]], Role.UNKNOWN_ROLE)
    unknown = has_role_tok & ~nxt_is_marker & (s_role == Role.UNKNOWN_ROLE)
    problem[nxt[unknown]] = TurnProblem.UNKNOWN_ROLE
    empty_header = has_role_tok & is_e[nxt]
    problem[nxt[empty_header]] = TurnProblem.MALFORMED_HEADER
    s_role[np.isin(s_pos, nested)] = Role.INJECTED
    role_at = np.zeros(n, dtype=np.uint8)
    role_at[s_pos] = s_role

    in_turn = last_s >= 0
    turn_role = np.where(in_turn, role_at[np.maximum(last_s, 0)], Role.OUTSIDE).astype(np.uint8)
    closed = in_turn & (last_e >= last_s)  # at or after this turn's end marker
    k = pos - last_s  # position within the turn

    role = np.where(in_turn & ~closed, turn_role, Role.OUTSIDE).astype(np.uint8)
    boundary = np.zeros(n, dtype=bool)
    open_tok = in_turn & ~closed
    role[open_tok & (k <= 1)] = Role.HEADER
    third = open_tok & (k == 2)
    newline_ok = profile.newline_lead[np.clip(safe_ids, 0, len(profile.newline_lead) - 1)]
    role[third & (ids == profile.newline)] = Role.HEADER
    boundary[third & newline_ok & (ids != profile.newline)] = True
    bad_header = third & ~newline_ok & (turn_role != Role.INJECTED)
    problem[bad_header & (problem == 0)] = TurnProblem.MALFORMED_HEADER

    # Sub-spans of assistant content: reasoning and tool-call blocks, markers included.
    assistant_body = (role == Role.ASSISTANT) & ~boundary
    for pair, sub in ((profile.think, Role.REASONING), (profile.tool_call, Role.TOOL_CALL)):
        if pair is None:
            continue
        last_open = _last_at_or_before(ids == pair[0], pos, row_start)
        last_close_before = _last_at_or_before(ids == pair[1], pos, row_start)
        closing = ids == pair[1]
        inside = (last_open > last_s) & ((last_open > last_close_before) | closing)
        role[assistant_body & inside] = sub

    # End markers and what follows them.
    at_end = is_e & in_turn
    at_end[stray] = False
    role[at_end] = np.where(turn_role[at_end] == Role.ASSISTANT, Role.ASSISTANT_END, Role.END)
    after = closed & ~is_e & (pos == last_e + 1) & (ids == profile.newline)
    role[after & (turn_role == Role.ASSISTANT)] = Role.AFTER_ASSISTANT_END
    outside_text = closed & ~is_e & ~after
    problem[outside_text & (problem == 0)] = TurnProblem.TEXT_OUTSIDE_TURN

    # Row-level: must open with a header; a short row must not end inside a turn.
    nonempty = lengths > 0
    firsts = offsets[:-1][nonempty]
    lead_bad = firsts[ids[firsts] != profile.start]
    problem[lead_bad] = TurnProblem.NO_LEADING_HEADER
    lasts = offsets[1:][nonempty] - 1
    unclosed = lasts[open_tok[lasts] & (lengths[nonempty] < max_len)]
    problem[unclosed[problem[unclosed] == 0]] = TurnProblem.UNCLOSED_TURN
    return Labels(role, boundary, problem)
