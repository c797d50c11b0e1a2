"""Span oracle for any :class:`TemplateProfile`, vectorized over a whole shard (the numpy reference).

Headers are found by comparing shifted id arrays at the (few) positions of opener
ids; everything else comes from running maxima of "last opener / last end seen"
(``np.maximum.accumulate``) reset at row starts. Python loops run only over the
profile's headers, sub-spans and their few tokens, never over rows or tokens.

This is the specification of labelling: the compiled labeller (``kernels.label_profile``)
reads the same rules token by token and is held to this function bit for bit.
"""

from __future__ import annotations

import numpy as np

from .labels import Labels, Role, TurnProblem
from .profile import CompiledProfile


def _last_at_or_before(flag: np.ndarray, pos: np.ndarray, row_start: np.ndarray) -> np.ndarray:
    """Position of the last flagged token at or before each token, in the same row; -1 if none."""
    last = np.maximum.accumulate(np.where(flag, pos, -1))
    return np.where(last >= row_start, last, -1)


def _member(ids: np.ndarray, safe_ids: np.ndarray, valid: np.ndarray, members: tuple[int, ...],
            lut: np.ndarray) -> np.ndarray:
    """``ids in members`` as a bool array: equality for a few ids (faster than a table gather)."""
    if len(members) > 3:
        return lut[safe_ids] & valid
    out = np.zeros(len(ids), dtype=bool)
    for m in members:
        out |= ids == m
    return out


def _first_at_or_after(positions: np.ndarray, q: np.ndarray, n: int) -> np.ndarray:
    """The first of the sorted ``positions`` at or after each ``q`` (``n`` when there is none)."""
    k = np.searchsorted(positions, q)
    return np.where(k < len(positions), positions[np.minimum(k, max(len(positions) - 1, 0))], n) if len(positions) \
        else np.full(len(q), n, dtype=np.int64)


def _match_headers(ids: np.ndarray, s_pos: np.ndarray, s_row_end: np.ndarray, next_m: np.ndarray,
                   cp: CompiledProfile) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Header spec index per opener (-1: none matched), its length, and whether a match was cut by the row end.

    A spec with ``until`` spans its core and then every token up to the first ``until``
    id, which must come before the row's end and before the next opener or end marker.
    """
    n = len(ids)
    spec = np.full(len(s_pos), -1, dtype=np.int16)
    hlen = np.zeros(len(s_pos), dtype=np.int64)
    cut = np.zeros(len(s_pos), dtype=bool)
    first = ids[s_pos]
    until_at = {u: np.flatnonzero(ids == u) for u in cp.until_ids}
    for si, h in enumerate(cp.headers):
        alive = first == h.core[0]
        for j, tok in enumerate(h.core[1:], 1):
            q = s_pos + j
            inside = q < s_row_end
            cut |= alive & ~inside  # every token the row still has matched this header
            alive &= inside & (ids[np.minimum(q, n - 1)] == tok)
        length = np.full(len(s_pos), len(h.core), dtype=np.int64)
        if h.until is not None:
            u = _first_at_or_after(until_at[h.until], s_pos + len(h.core), n)
            ok = (u < s_row_end) & (u < next_m)
            cut |= alive & ~ok & (next_m >= s_row_end)  # the row ends before the header does
            alive &= ok
            length = u - s_pos + 1
        take = alive & (spec < 0)
        spec[take] = si
        hlen[take] = length[take]
    return spec, hlen, cut & (spec < 0)


def label(ids: np.ndarray, offsets: np.ndarray, cp: CompiledProfile, max_len: int) -> Labels:
    """Label every token of a flattened shard with its Role and any structural problem."""
    prof = cp.profile
    n = len(ids)
    lengths = np.diff(offsets)
    idx = np.int32 if n < 2**31 - 1 else np.int64
    pos = np.arange(n, dtype=idx)
    row_start = np.repeat(offsets[:-1].astype(idx), lengths)
    # Table lookups read clipped ids and count only for ids inside the table: an id outside the
    # vocabulary (a corrupt row) is an ordinary token to every rule.
    safe_ids = np.clip(ids, 0, cp.size - 1)
    valid = (ids >= 0) & (ids < cp.size)
    is_s = _member(ids, safe_ids, valid, cp.opener_ids, cp.opener)
    is_e = _member(ids, safe_ids, valid, cp.end_ids, cp.is_end)
    problem = np.zeros(n, dtype=np.uint8)
    boundary = np.zeros(n, dtype=bool)

    # --- markers in order, and the next one after each opener
    marks = np.flatnonzero(is_s | is_e)
    s_pos = np.flatnonzero(is_s)
    s_row_end = offsets[np.searchsorted(offsets, s_pos, side="right")] if len(s_pos) else s_pos
    after_k = np.searchsorted(marks, s_pos, side="right")
    next_m = np.where(after_k < len(marks), marks[np.minimum(after_k, max(len(marks) - 1, 0))], n)

    # --- headers: which spec opens each turn, and how many tokens it spans
    spec, hlen, cut = _match_headers(ids, s_pos, s_row_end, next_m, cp)
    known = spec >= 0
    s_spec1 = (spec + 1).astype(np.intp)  # 0 = unknown role
    which = np.searchsorted(np.asarray(cp.opener_ids), ids[s_pos]) if len(s_pos) else s_pos
    unk = ~known
    if unk.any():
        w = which[unk]
        ulen = np.minimum(cp.unknown_len[w], (s_row_end - s_pos)[unk])
        until = cp.unknown_until[w]
        if (until >= 0).any():  # openers whose headers all run to one id: an unknown role runs there too
            for u_id in np.unique(until[until >= 0]):
                sel = until == u_id
                u = _first_at_or_after(np.flatnonzero(ids == u_id), s_pos[unk][sel], n)
                reach = (u < (s_row_end[unk][sel])) & (u < next_m[unk][sel])
                ulen[sel] = np.where(reach, u - s_pos[unk][sel] + 1, ulen[sel])
        hlen[unk] = ulen
    nxt = s_pos + 1
    has_nxt = nxt < s_row_end
    nxt_c = np.minimum(nxt, max(n - 1, 0))
    nxt_marker = is_s[nxt_c] | is_e[nxt_c]
    unknown = unk & has_nxt & ~cut
    problem[nxt_c[unknown & ~nxt_marker]] = TurnProblem.UNKNOWN_ROLE
    problem[nxt_c[unknown & nxt_marker & is_e[nxt_c]]] = TurnProblem.MALFORMED_HEADER
    hlen[cut] = (s_row_end - s_pos)[cut]  # a header cut at max_len is header to the end
    is_e_kind = is_e.copy()  # end ids as the vocabulary has them (the header tail rule reads these)

    # --- end ids a turn's header makes ordinary text of (Command A's preamble spells <|END_RESPONSE|>): an
    # end id is plain when the last marker before it that is not plain is the opener of such a header
    if cp.has_plain and len(s_pos):
        e_marks = marks[~is_s[marks]]
        k_open = np.searchsorted(s_pos, e_marks) - 1  # the last opener before each end id
        kc = np.maximum(k_open, 0)
        cand = (k_open >= 0) & (s_pos[kc] >= row_start[e_marks])
        cand &= cp.plain[s_spec1[kc], cp.end_code[safe_ids[e_marks]]]
        # an end id since that opener that is not plain closed the turn (or was a stray): later ones are not plain
        last_break = np.maximum.accumulate(np.where(cand, -1, e_marks))
        plain = e_marks[cand & (last_break < s_pos[kc])]
        if len(plain):
            is_e[plain] = False
            marks = np.flatnonzero(is_s | is_e)

    # --- markers in order: nested openers and stray ends
    prev = np.concatenate(([-1], marks[:-1]))
    prev = np.where(prev >= row_start[marks], prev, -1)
    prev_c = np.maximum(prev, 0)
    prev_is_s = (prev >= 0) & is_s[prev_c]
    # spec of the opener before each marker (look it up among openers)
    prev_k = np.clip(np.searchsorted(s_pos, prev_c), 0, max(len(s_pos) - 1, 0))
    prev_spec1 = s_spec1[prev_k] if len(s_pos) else np.zeros(len(marks), dtype=np.intp)
    m_is_s = is_s[marks]
    cur_k = np.clip(np.searchsorted(s_pos, marks), 0, max(len(s_pos) - 1, 0))
    cur_spec1 = s_spec1[cur_k] if len(s_pos) else np.zeros(len(marks), dtype=np.intp)
    reopens = cp.spec_inside[cur_spec1, cp.spec_role[prev_spec1]]  # a header allowed to close the open turn
    after = cp.spec_inside_after[cur_spec1]  # ... only once this sub-span has closed in it, where one is named
    for k in np.unique(after[reopens & (after >= 0)]).tolist():
        s = cp.profile.subs[k]
        pos = np.arange(n, dtype=row_start.dtype)
        closed = _last_at_or_before(ids == s.close, pos, row_start)[marks]
        opened = _last_at_or_before(ids == s.open, pos, row_start)[marks]
        reopens &= (after != k) | ((closed > prev) & (closed > opened))
    nested = marks[m_is_s & prev_is_s & cp.spec_needs_end[prev_spec1] & ~reopens]
    closes_assistant = marks[m_is_s & prev_is_s & cp.spec_closed_by_next[prev_spec1]]
    m_end = ~m_is_s
    accepted = m_end & prev_is_s & cp.accepts[prev_spec1, cp.end_code[safe_ids[marks]]]
    # An end id the profile allows right after an end (Cohere 2: <|END_OF_TURN_TOKEN|> after <|END_RESPONSE|>)
    # follows the accepted end it trails; it closes nothing and is no stray.
    prev_accepted = np.concatenate(([False], accepted[:-1])) & (prev >= 0)
    follows = m_end & ~accepted & prev_accepted & (marks == prev + 1) & cp.after_end[safe_ids[marks]]
    stray = marks[m_end & ~accepted & ~follows]
    is_e[marks[follows]] = False
    problem[nested] = TurnProblem.HEADER_IN_OPEN_TURN
    problem[stray] = TurnProblem.STRAY_END
    is_e[stray] = False  # a stray end closes nothing

    # --- header tail: the newline closing a header, possibly merged with content whitespace
    s_nested = np.isin(s_pos, nested)
    tail = np.where(known, cp.spec_tail[s_spec1], cp.unknown_tail[which] if len(s_pos) else -1)
    q = s_pos + hlen
    q_in = (tail >= 0) & (q <= next_m) & (q < s_row_end)
    q_c = np.minimum(q, max(n - 1, 0))
    t = ids[q_c]
    is_tail = q_in & (t == tail)
    tail_merges = np.where(known, cp.spec_tail_merges[s_spec1], cp.unknown_tail_merges[which] if len(s_pos) else False)
    merged = q_in & ~is_tail & tail_merges & cp.merges_tail[np.clip(t, 0, cp.size - 1)] & (t >= 0) & (t < cp.size)
    hlen[is_tail] += 1
    boundary[q_c[merged]] = True
    bad = q_in & ~is_tail & ~merged & ~s_nested & ~is_s[q_c] & ~is_e_kind[q_c]  # a marker there speaks for itself
    problem[q_c[bad & (problem[q_c] == 0)]] = TurnProblem.MALFORMED_HEADER

    # --- spread each turn's role, body role and header length over its tokens
    s_role = cp.spec_role[s_spec1].copy()
    s_body = cp.spec_body[s_spec1].copy()
    s_role[s_nested] = Role.INJECTED
    s_body[s_nested] = Role.INJECTED
    role_at = np.zeros(n, dtype=np.uint8)
    role_at[s_pos] = s_role
    body_at = np.zeros(n, dtype=np.uint8)
    body_at[s_pos] = s_body
    hlen_at = np.zeros(n, dtype=np.int64)
    hlen_at[s_pos] = hlen
    if cp.has_free:  # tokens between a core and its until that are not header: [core, until) of the turn
        free_code = np.where(known & ~s_nested & ~cut, cp.spec_free[s_spec1], 0).astype(np.uint8)
        until_k = np.where(is_tail, hlen - 2, hlen - 1)  # the until token's offset in the header
        free_at = np.zeros(n, dtype=np.uint8)
        free_at[s_pos] = free_code
        flo_at = np.zeros(n, dtype=np.int64)
        flo_at[s_pos] = cp.spec_len[s_spec1]
        fhi_at = np.zeros(n, dtype=np.int64)
        fhi_at[s_pos] = until_k
    del s_role, s_body, tail, t
    last_s = _last_at_or_before(is_s, pos, row_start)
    last_e = _last_at_or_before(is_e, pos, row_start)
    in_turn = last_s >= 0
    ls = np.maximum(last_s, 0)
    turn_role = np.where(in_turn, role_at[ls], Role.OUTSIDE).astype(np.uint8)
    turn_body = np.where(in_turn, body_at[ls], Role.OUTSIDE).astype(np.uint8)
    del role_at, body_at
    closed = in_turn & (last_e >= last_s)
    open_tok = in_turn & ~closed
    role = np.where(open_tok, turn_body, Role.OUTSIDE).astype(np.uint8)
    k = pos - last_s
    in_header = open_tok & (k < hlen_at[ls])
    del hlen_at, k
    role[in_header] = np.where(turn_role[in_header] == Role.ASSISTANT, Role.ASSISTANT_HEADER, Role.HEADER)
    if cp.has_free:
        kk = pos - last_s
        free_here = in_header & (free_at[ls] > 0) & (kk >= flo_at[ls]) & (kk < fhi_at[ls])
        role[free_here] = free_at[ls][free_here]
        del kk, free_at, flo_at, fhi_at

    # --- sub-spans of turn bodies: reasoning and tool calls (assistant), tool output (user or assistant)
    # Bodies are fixed before any sub-span is marked: where blocks overlap, the later kind wins.
    if prof.subs:
        owners = {r for s in prof.subs for r in s.within}
        lut = np.zeros(256, dtype=bool)
        bodies = {}
        for r in owners:
            lut[:] = False
            lut[r] = True
            bodies[r] = lut[role] & ~boundary
        for sub in prof.subs:
            body = np.zeros(n, dtype=bool)
            for r in sub.within:
                body |= bodies[r]
            last_open = _last_at_or_before(ids == sub.open, pos, row_start)
            inside = last_open > last_s
            if sub.close is not None:
                closing = ids == sub.close
                inside &= (last_open > _last_at_or_before(closing, pos, row_start)) | closing
            role[body & inside] = sub.role
        for sub in prof.subs:  # a stop token: the block's opener right after the assistant's own output
            if not sub.stops:
                continue
            at = np.flatnonzero((ids == sub.open) & (role == sub.role))
            at = at[at > row_start[at]]
            role[at[cp.assistant_output[role[at - 1]]]] = Role.ASSISTANT_END

    # --- end markers and what follows them
    at_end = is_e & in_turn
    role[at_end] = np.where(turn_role[at_end] == Role.ASSISTANT, Role.ASSISTANT_END, Role.END)
    role[stray] = Role.OUTSIDE
    role[closes_assistant] = Role.ASSISTANT_END  # the next header's opener, generated by the assistant
    after = np.zeros(n, dtype=bool)
    if prof.after_end:  # right after an end marker (a stray one too), in a closed turn
        cand = marks[m_end] + 1
        cand = cand[cand < n]
        cand = cand[(row_start[cand] == row_start[cand - 1]) & cp.after_end[safe_ids[cand]] & valid[cand]]
        after[cand] = True
        after &= closed & ~is_e
    if prof.eos:  # end-of-sequence ids after the last turn closed
        after |= closed & ~is_e & cp.is_eos[safe_ids] & valid
    role[after & (turn_role == Role.ASSISTANT)] = Role.AFTER_ASSISTANT_END
    outside_text = (closed & ~is_e & ~after) | (open_tok & ~in_header & (turn_role == Role.OUTSIDE))
    outside_text[stray] = False
    problem[outside_text & (problem == 0)] = TurnProblem.TEXT_OUTSIDE_TURN
    role[outside_text] = Role.OUTSIDE
    role[after & (turn_role != Role.ASSISTANT)] = Role.OUTSIDE

    # --- row level: opens with a header (or BOS), BOS only there, short rows end closed
    nonempty = lengths > 0
    firsts = offsets[:-1][nonempty]
    problem[firsts[~is_s[firsts]]] = TurnProblem.NO_LEADING_HEADER
    if prof.bos and len(s_pos):
        bos_spec = np.zeros(len(s_pos), dtype=bool)
        bos_spec[known] = cp.is_bos_spec[spec[known]]
        misplaced = s_pos[bos_spec & (s_pos != row_start[s_pos])]
        problem[misplaced] = TurnProblem.MISPLACED_BOS
    lasts = offsets[1:][nonempty] - 1
    opener_of_last = np.clip(np.searchsorted(s_pos, last_s[lasts]), 0, max(len(s_pos) - 1, 0))
    needs_end = cp.spec_needs_end[s_spec1[opener_of_last]] if len(s_pos) else np.zeros(len(lasts), dtype=bool)
    # a row may stop at a stop token inside a turn (Gemma 4: at <|tool_response>, waiting for the tool)
    # ... or right after a header that a template writes at the end of every rendering (its turn empty)
    if len(s_pos):
        ends_row = (cp.spec_ends_row[s_spec1[opener_of_last]]
                    & (lasts == s_pos[opener_of_last] + hlen[opener_of_last] - 1))
    else:
        ends_row = np.zeros(len(lasts), dtype=bool)
    unclosed = lasts[open_tok[lasts] & needs_end & (lengths[nonempty] < max_len) & (role[lasts] != Role.ASSISTANT_END)
                     & ~ends_row]
    problem[unclosed[problem[unclosed] == 0]] = TurnProblem.UNCLOSED_TURN
    return Labels(role, boundary, problem)
