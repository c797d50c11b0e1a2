"""Span oracle for any :class:`TemplateProfile`, vectorized over a whole shard.

Headers are found by comparing shifted id arrays at the (few) positions of opener
ids; everything else comes from running maxima of "last opener / last end seen"
(``np.maximum.accumulate``) reset at row starts. Python loops run only over the
profile's headers and their few tokens, never over rows or tokens.
"""

from __future__ import annotations

import numpy as np

from .labels import Labels, Role, TurnProblem
from .profile import CompiledProfile


def _last_at_or_before(flag: np.ndarray, pos: np.ndarray, row_start: np.ndarray) -> np.ndarray:
    """Position of the last flagged token at or before each token, in the same row; -1 if none."""
    last = np.maximum.accumulate(np.where(flag, pos, -1))
    return np.where(last >= row_start, last, -1)


def _member(ids: np.ndarray, safe_ids: np.ndarray, members: tuple[int, ...], lut: np.ndarray) -> np.ndarray:
    """``ids in members`` as a bool array: equality for a few ids (faster than a table gather)."""
    if len(members) > 3:
        return lut[safe_ids]
    out = np.zeros(len(ids), dtype=bool)
    for m in members:
        out |= ids == m
    return out


def _match_headers(ids: np.ndarray, s_pos: np.ndarray, s_row_end: np.ndarray, cp: CompiledProfile
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Header spec index per opener (-1: none matched) and whether a match was cut by the row end."""
    n = len(ids)
    spec = np.full(len(s_pos), -1, dtype=np.int16)
    cut = np.zeros(len(s_pos), dtype=bool)
    first = ids[s_pos]
    for si, h in enumerate(cp.headers):
        alive = first == h.core[0]
        for j, tok in enumerate(h.core[1:], 1):
            q = s_pos + j
            inside = q < s_row_end
            cut |= alive & ~inside  # every token the row still has matched this header
            alive &= inside & (ids[np.minimum(q, n - 1)] == tok)
        take = alive & (spec < 0)
        spec[take] = si
    return spec, cut & (spec < 0)


def label(ids: np.ndarray, offsets: np.ndarray, cp: CompiledProfile, max_len: int) -> Labels:
    """Label every token of a flattened shard with its Role and any structural problem."""
    prof = cp.profile
    n = len(ids)
    lengths = np.diff(offsets)
    idx = np.int32 if n < 2**31 - 1 else np.int64
    pos = np.arange(n, dtype=idx)
    row_start = np.repeat(offsets[:-1].astype(idx), lengths)
    safe_ids = np.clip(ids, 0, cp.size - 1)  # for table lookups only
    is_s = _member(ids, safe_ids, cp.opener_ids, cp.opener)
    is_e = _member(ids, safe_ids, cp.end_ids, cp.is_end)
    problem = np.zeros(n, dtype=np.uint8)
    boundary = np.zeros(n, dtype=bool)

    # --- headers: which spec opens each turn, and how many tokens it spans
    s_pos = np.flatnonzero(is_s)
    s_row_end = offsets[np.searchsorted(offsets, s_pos, side="right")] if len(s_pos) else s_pos
    spec, cut = _match_headers(ids, s_pos, s_row_end, cp)
    known = spec >= 0
    s_spec1 = (spec + 1).astype(np.intp)  # 0 = unknown role
    hlen = cp.spec_len[s_spec1]
    which = np.searchsorted(np.asarray(cp.opener_ids), ids[s_pos]) if len(s_pos) else s_pos
    hlen[~known] = np.minimum(cp.unknown_len[which[~known]], (s_row_end - s_pos)[~known])
    nxt = s_pos + 1
    has_nxt = nxt < s_row_end
    nxt_c = np.minimum(nxt, max(n - 1, 0))
    nxt_marker = is_s[nxt_c] | is_e[nxt_c]
    unknown = ~known & has_nxt & ~cut
    problem[nxt_c[unknown & ~nxt_marker]] = TurnProblem.UNKNOWN_ROLE
    problem[nxt_c[unknown & nxt_marker & is_e[nxt_c]]] = TurnProblem.MALFORMED_HEADER
    hlen[cut] = (s_row_end - s_pos)[cut]  # a header cut at max_len is header to the end

    # --- markers in order: nested openers and stray ends
    marks = np.flatnonzero(is_s | is_e)
    prev = np.concatenate(([-1], marks[:-1]))
    prev = np.where(prev >= row_start[marks], prev, -1)
    prev_c = np.maximum(prev, 0)
    prev_is_s = (prev >= 0) & is_s[prev_c]
    # spec of the opener before each marker (look it up among openers)
    prev_k = np.clip(np.searchsorted(s_pos, prev_c), 0, max(len(s_pos) - 1, 0))
    prev_spec1 = s_spec1[prev_k] if len(s_pos) else np.zeros(len(marks), dtype=np.intp)
    m_is_s = is_s[marks]
    nested = marks[m_is_s & prev_is_s & cp.spec_needs_end[prev_spec1]]
    m_end = ~m_is_s
    accepted = prev_is_s & cp.accepts[prev_spec1, cp.end_code[safe_ids[marks]]]
    stray = marks[m_end & ~accepted]
    problem[nested] = TurnProblem.HEADER_IN_OPEN_TURN
    problem[stray] = TurnProblem.STRAY_END
    is_e[stray] = False  # a stray end closes nothing

    # --- header tail: the newline closing a header, possibly merged with content whitespace
    s_nested = np.isin(s_pos, nested)
    tail = np.where(known, cp.spec_tail[s_spec1], cp.unknown_tail[which] if len(s_pos) else -1)
    q = s_pos + hlen
    # the next marker (opener or end) cuts a header short: no tail to check after it
    after_k = np.searchsorted(marks, s_pos, side="right")
    next_m = np.where(after_k < len(marks), marks[np.minimum(after_k, max(len(marks) - 1, 0))], n)
    q_in = (tail >= 0) & (q <= next_m) & (q < s_row_end)
    q_c = np.minimum(q, max(n - 1, 0))
    t = ids[q_c]
    is_tail = q_in & (t == tail)
    tail_merges = np.where(known, cp.spec_tail_merges[s_spec1], cp.unknown_tail_merges[which] if len(s_pos) else False)
    merged = q_in & ~is_tail & tail_merges & cp.merges_tail[np.clip(t, 0, cp.size - 1)]
    hlen[is_tail] += 1
    boundary[q_c[merged]] = True
    bad = q_in & ~is_tail & ~merged & ~s_nested & ~is_s[q_c] & ~is_e[q_c]  # a marker there speaks for itself
    problem[q_c[bad & (problem[q_c] == 0)]] = TurnProblem.MALFORMED_HEADER

    # --- spread each turn's role and header length over its tokens
    s_role = cp.spec_role[s_spec1].copy()
    s_role[s_nested] = Role.INJECTED
    role_at = np.zeros(n, dtype=np.uint8)
    role_at[s_pos] = s_role
    hlen_at = np.zeros(n, dtype=np.int32)
    hlen_at[s_pos] = hlen
    del s_role, tail, t
    last_s = _last_at_or_before(is_s, pos, row_start)
    last_e = _last_at_or_before(is_e, pos, row_start)
    in_turn = last_s >= 0
    ls = np.maximum(last_s, 0)
    turn_role = np.where(in_turn, role_at[ls], Role.OUTSIDE).astype(np.uint8)
    del role_at
    closed = in_turn & (last_e >= last_s)
    open_tok = in_turn & ~closed
    role = np.where(open_tok, turn_role, Role.OUTSIDE).astype(np.uint8)
    k = pos - last_s
    in_header = open_tok & (k < hlen_at[ls])
    del hlen_at, k
    role[in_header] = Role.HEADER

    # --- sub-spans of turn bodies: reasoning and tool calls (assistant), tool output (user)
    # Bodies are fixed before any sub-span is marked: where blocks overlap, the later kind wins.
    subs = [(pair, owner, sub) for pair, owner, sub in ((prof.reasoning, Role.ASSISTANT, Role.REASONING),
                                                        (prof.tool_call, Role.ASSISTANT, Role.TOOL_CALL),
                                                        (prof.tool_response, Role.USER, Role.TOOL)) if pair]
    bodies = {owner: (role == owner) & ~boundary for owner in {owner for _, owner, _ in subs}}
    for pair, owner, sub in subs:
        body = bodies[owner]
        last_open = _last_at_or_before(ids == pair[0], pos, row_start)
        inside = last_open > last_s
        if pair[1] is not None:
            closing = ids == pair[1]
            inside &= (last_open > _last_at_or_before(closing, pos, row_start)) | closing
        role[body & inside] = sub

    # --- end markers and what follows them
    at_end = is_e & in_turn
    role[at_end] = np.where(turn_role[at_end] == Role.ASSISTANT, Role.ASSISTANT_END, Role.END)
    role[stray] = Role.OUTSIDE
    after = np.zeros(n, dtype=bool)
    if prof.after_end is not None:  # right after an end marker (a stray one too), in a closed turn
        cand = marks[m_end] + 1
        cand = cand[cand < n]
        cand = cand[(row_start[cand] == row_start[cand - 1]) & (ids[cand] == prof.after_end)]
        after[cand] = True
        after &= closed & ~is_e
        role[after & (turn_role == Role.ASSISTANT)] = Role.AFTER_ASSISTANT_END
    outside_text = (closed & ~is_e & ~after) | (open_tok & ~in_header & (turn_role == Role.OUTSIDE))
    outside_text[stray] = False
    problem[outside_text & (problem == 0)] = TurnProblem.TEXT_OUTSIDE_TURN
    role[outside_text] = Role.OUTSIDE

    # --- row level: opens with a header (or BOS), BOS only there, short rows end closed
    nonempty = lengths > 0
    firsts = offsets[:-1][nonempty]
    problem[firsts[~is_s[firsts]]] = TurnProblem.NO_LEADING_HEADER
    if prof.bos is not None:
        bos_pos = np.flatnonzero(ids == prof.bos)
        misplaced = bos_pos[bos_pos != row_start[bos_pos]]
        problem[misplaced] = TurnProblem.MISPLACED_BOS
    lasts = offsets[1:][nonempty] - 1
    opener_of_last = np.clip(np.searchsorted(s_pos, last_s[lasts]), 0, max(len(s_pos) - 1, 0))
    needs_end = cp.spec_needs_end[s_spec1[opener_of_last]] if len(s_pos) else np.zeros(len(lasts), dtype=bool)
    unclosed = lasts[open_tok[lasts] & needs_end & (lengths[nonempty] < max_len)]
    problem[unclosed[problem[unclosed] == 0]] = TurnProblem.UNCLOSED_TURN
    return Labels(role, boundary, problem)
