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


def label(ids: np.ndarray, offsets: np.ndarray, profile: "ChatMLProfile | CompiledProfile", max_len: int) -> Labels:
    """Label every token of a flattened shard with its Role and any structural problem.

    Works at the marker level: turn markers, reasoning/tool-call tags and row starts
    (a few percent of the tokens) are "events"; between two events every token has
    the same role, computed once per event and spread with one ``np.repeat``. Only
    the tokens whose role depends on where they sit are relabelled one by one: the
    markers themselves by the general rules, and the token after an opener, the one
    after that, and the one after an end marker by closed forms of the same rules
    (their event is their marker's unless another marker sits in between, a rare
    case sent through the general rules). Event arrays are int32 when they fit,
    the events are merged with row starts by ``searchsorted`` (no argsort), and
    ``boundary``/``problem`` are written only where non-zero. Same labels as
    :func:`label_reference`, several times cheaper.

    Any other family's compiled profile goes to the generic labeller, so callers that
    hold "the engine's profile" (explanations) need not know which family it is.
    """
    if isinstance(profile, CompiledProfile):
        return generic.label(ids, offsets, profile, max_len)
    n = len(ids)
    lengths = np.diff(offsets)
    nonempty = lengths > 0
    boundary = np.zeros(n, dtype=bool)
    problem = np.zeros(n, dtype=np.uint8)
    if n == 0:
        return Labels(np.zeros(0, dtype=np.uint8), boundary, problem)
    ix = np.int32 if n < 2**31 - 4 else np.int64  # positions and event indices

    # --- events: markers (found among the few ids >= the smallest marker id) and row starts
    kinds, lowest = _marker_kinds(profile)
    top = max(kinds)
    kind_of = np.zeros(top - lowest + 1, dtype=np.uint8)
    kind_of[[k - lowest for k in kinds]] = list(kinds.values())

    id_of_kind = np.zeros(max(kinds.values()) + 1, dtype=np.int64)
    id_of_kind[list(kinds.values())] = list(kinds)

    # Event-level selections below multiply by bool flags instead of calling np.where:
    # on ~100 K events with mixed flags np.where costs ~5 ns an element, a product ~0.5.
    def kind(tok: np.ndarray) -> np.ndarray:
        inside = (tok >= lowest) & (tok <= top)
        return kind_of[(tok - lowest) * inside] * inside

    cand = np.flatnonzero(ids >= lowest)
    ckind = kind(ids[cand])
    is_m = ckind > 0
    mpos = cand[is_m].astype(ix)
    mkind = ckind[is_m]
    firsts = offsets[:-1][nonempty]
    first_id = ids[firsts]  # read once: row starts are scattered, each read a cache miss
    plain = firsts[kind(first_id) == 0].astype(ix)
    # Merge the (sorted, disjoint) row starts into the markers: each lands after the markers before it.
    m = len(mpos) + len(plain)
    slot = np.searchsorted(mpos, plain) + np.arange(len(plain))
    at_marker = np.ones(m, dtype=bool)
    at_marker[slot] = False
    ev_pos = np.empty(m, dtype=ix)
    ev_pos[slot] = plain
    ev_pos[at_marker] = mpos
    ev_kind = np.zeros(m, dtype=np.uint8)
    ev_kind[at_marker] = mkind
    ev_idx = np.arange(m, dtype=ix)
    is_first = np.zeros(m, dtype=bool)
    first_ev = np.searchsorted(ev_pos, firsts)  # every row start is an event
    is_first[first_ev] = True
    first = np.maximum.accumulate(ev_idx * is_first)
    row_end_ne = offsets[1:][nonempty].astype(ix)  # end of each non-empty row
    ev_row = np.cumsum(is_first, dtype=ix) - 1  # index among non-empty rows

    ev_idx1 = ev_idx + 1

    def running_last(flag: np.ndarray, reset: bool = False) -> np.ndarray:
        """Index of the last flagged event at or before each event (-1 if none).

        With ``reset``, only events of the same row count. Without, a value from an
        earlier row may remain: it is below the row's first event, so any comparison
        with an in-row opener index (how every state but ``ls`` is used) reads it as
        "none", and the reset is two passes saved.
        """
        last1 = np.maximum.accumulate(ev_idx1 * flag)  # 1-based, 0: none yet
        if reset:
            last1 *= last1 > first  # one from an earlier row is none
        last1 -= 1
        return last1

    # --- running state per event (indices into the event arrays, reset at row starts)
    is_s, is_e = ev_kind == _S, ev_kind == _E
    ls, le = running_last(is_s, reset=True), running_last(is_e)  # le only ever compared with an in-row ls
    none = np.full(m, -1, dtype=ix)
    lto, ltc = ((running_last(ev_kind == _THINK_OPEN), running_last(ev_kind == _THINK_CLOSE))
                if profile.think is not None else (none, none))
    lco, lcc = ((running_last(ev_kind == _CALL_OPEN), running_last(ev_kind == _CALL_CLOSE))
                if profile.tool_call is not None else (none, none))
    # Was a turn open just before this event? (previous S/E marker of the row is an opener)
    open_before = np.zeros(m, dtype=bool)
    open_before[1:] = ls[:-1] > le[:-1]
    open_before[is_first] = False
    nested = is_s & open_before
    stray = is_e & ~open_before

    # Role each opener gives its turn.
    s_idx = np.flatnonzero(is_s)
    s_pos = ev_pos[s_idx]
    s_end = row_end_ne[ev_row[s_idx]]
    s1, s2 = s_pos + 1 < s_end, s_pos + 2 < s_end
    nxt = np.minimum(s_pos + 1, n - 1)
    nxt_id = ids[nxt]
    nxt_is_marker = (nxt_id == profile.start) | (nxt_id == profile.end)
    named = s1 & ~nxt_is_marker
    s_role = np.where(named, profile.role_of_id[np.clip(nxt_id, 0, len(profile.role_of_id) - 1)],
                      Role.UNKNOWN_ROLE).astype(np.uint8)
    unknown_at = nxt[named & (s_role == Role.UNKNOWN_ROLE)]
    empty_at = nxt[s1 & (nxt_id == profile.end)]
    s_role[nested[s_idx]] = Role.INJECTED
    turn_role_of_ev = np.full(m, Role.OUTSIDE, dtype=np.uint8)
    turn_role_of_ev[s_idx] = s_role
    in_turn = ls >= 0
    tr = turn_role_of_ev[np.maximum(ls, 0)] * in_turn  # turn role per event (OUTSIDE = 0 outside turns)

    # --- role of the ordinary tokens of each segment [event, next event)
    closed = in_turn & (le >= ls)
    seg_role = tr * (in_turn & ~closed)
    body = seg_role == Role.ASSISTANT
    if profile.think is not None:
        seg_role[body & (lto > ls) & (lto > ltc)] = Role.REASONING
    if profile.tool_call is not None:
        seg_role[body & (lco > ls) & (lco > lcc)] = Role.TOOL_CALL
    seg_len = np.empty(m, dtype=ix)
    seg_len[:-1] = ev_pos[1:] - ev_pos[:-1]
    seg_len[-1] = n - ev_pos[-1]
    role = np.repeat(seg_role, seg_len)
    # Text between turns: ordinary tokens of closed segments. An end marker's segment
    # normally holds only the marker and its newline (both relabelled below), so on
    # clean data no token is touched here.
    spill = np.flatnonzero(closed & (seg_len > is_e + 1))
    if len(spill):
        lens = seg_len[spill].astype(np.int64)
        at = np.arange(int(lens.sum())) + np.repeat(ev_pos[spill] - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
        problem[at] = TurnProblem.TEXT_OUTSIDE_TURN

    def newline_ok(tok: np.ndarray) -> np.ndarray:
        safe = np.clip(tok, 0, len(profile.role_of_id) - 1)
        return profile.newline_lead[np.clip(safe, 0, len(profile.newline_lead) - 1)]

    def put_problem(pos: np.ndarray, codes: np.ndarray) -> None:
        # Relabelled tokens overwrite any spill code (also with 0); without spill only non-zero codes matter.
        if len(spill):
            problem[pos] = codes
        else:
            hit = codes > 0
            problem[pos[hit]] = codes[hit]

    # --- the token after an opener (s + 1), the next (s + 2) and the one after an end marker (e + 1)
    # Their event is their marker's unless an event sits at or between marker + 1 and them.
    # A token that is itself a marker is labelled with the markers; the rest of the moved
    # ones go through the general rules below.
    nxt_ev = np.append(ev_pos[1:], n)  # position of the next event, per event
    p1 = s_pos[s1] + 1
    p1 = p1[nxt_ev[s_idx[s1]] > p1]
    role[p1] = Role.HEADER  # k = 1 in an open turn
    keep2 = s2 & (nxt_ev[s_idx] > s_pos + 2)
    p2 = s_pos[keep2] + 2
    moved2 = s2 & (nxt_ev[s_idx] == s_pos + 1)
    moved2[moved2] = nxt_ev[np.minimum(s_idx[moved2] + 1, m - 1)] > s_pos[moved2] + 2  # s + 2 itself no event
    tid2 = ids[p2]
    tr2 = tr[s_idx[keep2]]
    is_nl2 = tid2 == profile.newline
    nl_ok2 = newline_ok(tid2)
    role[p2] = np.where(is_nl2, np.uint8(Role.HEADER), tr2)
    boundary[p2[nl_ok2 & ~is_nl2]] = True
    put_problem(p2, np.where(~nl_ok2 & (tr2 != Role.INJECTED), np.uint8(TurnProblem.MALFORMED_HEADER), np.uint8(0)))
    e_idx = np.flatnonzero(is_e)
    e_pos = ev_pos[e_idx]
    e1 = e_pos + 1 < row_end_ne[ev_row[e_idx]]
    keep_e = e1 & (nxt_ev[e_idx] > e_pos + 1)
    pe = e_pos[keep_e] + 1
    ke = e_idx[keep_e]
    in_e = ls[ke] >= 0  # closed by this end marker; otherwise outside any turn
    after_e = in_e & (ids[pe] == profile.newline)
    role[pe] = np.where(after_e & (tr[ke] == Role.ASSISTANT), np.uint8(Role.AFTER_ASSISTANT_END), np.uint8(Role.OUTSIDE))
    put_problem(pe, np.where(in_e & ~after_e, np.uint8(TurnProblem.TEXT_OUTSIDE_TURN), np.uint8(0)))

    # --- general rules: every marker, and the s + 2 tokens whose s + 1 is a marker
    mk = ev_idx[at_marker]
    p2m = s_pos[moved2] + 2
    special = np.concatenate((mpos, p2m))
    j = np.concatenate((mk, s_idx[moved2] + 1))
    tid = np.concatenate((id_of_kind[mkind], ids[p2m]))  # a marker's id is its kind's: no gather from ids
    sj, ej = ls[j], le[j]
    t_in = sj >= 0
    t_tr = tr[j]
    t_closed = t_in & (ej >= sj)
    t_open = t_in & ~t_closed
    t_role = t_tr * t_open
    t_boundary = np.zeros(len(special), dtype=bool)
    t_problem = np.zeros(len(special), dtype=np.uint8)
    op = np.flatnonzero(t_open)
    k = special[op] - ev_pos[sj[op]]
    t_role[op[k <= 1]] = Role.HEADER
    third = op[k == 2]
    tid3 = tid[third]
    is_nl3 = tid3 == profile.newline
    nl_ok3 = newline_ok(tid3)
    t_role[third[is_nl3]] = Role.HEADER
    t_boundary[third] = nl_ok3 & ~is_nl3
    t_problem[third[~nl_ok3 & (t_tr[third] != Role.INJECTED)]] = TurnProblem.MALFORMED_HEADER
    bd = np.flatnonzero((t_role == Role.ASSISTANT) & ~t_boundary)
    for pair, lo, lc, sub in ((profile.think, lto, ltc, Role.REASONING), (profile.tool_call, lco, lcc, Role.TOOL_CALL)):
        if pair is None:
            continue
        jb = j[bd]
        o, c = lo[jb], lc[jb]
        t_role[bd[(o > sj[bd]) & ((o > c) | (tid[bd] == pair[1]))]] = sub
    t_is_e = tid == profile.end
    at_end = np.flatnonzero(t_is_e & (ev_pos[j] == special) & t_in & ~stray[j])  # end marker events, not stray
    t_role[at_end] = np.where(t_tr[at_end] == Role.ASSISTANT, Role.ASSISTANT_END, Role.END)
    cl = np.flatnonzero(t_closed & ~t_is_e)
    after = (special[cl] == ev_pos[ej[cl]] + 1) & (tid[cl] == profile.newline)
    t_role[cl[after & (t_tr[cl] == Role.ASSISTANT)]] = Role.AFTER_ASSISTANT_END
    t_problem[cl[~after]] = TurnProblem.TEXT_OUTSIDE_TURN
    role[special] = t_role
    boundary[special[t_boundary]] = True
    put_problem(special, t_problem)

    # Problems found on markers and headers.
    problem[ev_pos[nested]] = TurnProblem.HEADER_IN_OPEN_TURN
    problem[ev_pos[stray]] = TurnProblem.STRAY_END
    problem[unknown_at] = TurnProblem.UNKNOWN_ROLE
    problem[empty_at] = TurnProblem.MALFORMED_HEADER

    # Row-level: must open with a header; a short row must not end inside a turn.
    lead_bad = firsts[first_id != profile.start]
    problem[lead_bad] = TurnProblem.NO_LEADING_HEADER
    lasts = offsets[1:][nonempty] - 1
    jl = np.append(first_ev[1:], m) - 1  # last event of each row: the one before the next row's first
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
