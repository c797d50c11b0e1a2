"""Compiled per-token loops over a shard's flattened Arrow buffers (numba).

Most of the per-shard work is numpy over the flat ``values`` + ``offsets`` of a
shard. A few steps are a state machine or a scatter-add that numpy can only
express as dozens of passes over the data (the ChatML labeller was ~100 numpy
calls over its events); here each is one compiled pass over the same buffers,
with no Python loop per row or per token. Every kernel has a numpy formulation
elsewhere in the package that the tests hold it to, bit for bit.

This module is imported on first use, so a process that checks no shard (the
pytest-xdist controller) never loads numba. Compiled code is cached on disk next
to this file, or in numba's per-user cache when the package directory is read-only.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from numba import njit


def _jit(fn: Callable) -> Callable:
    """``njit`` with an on-disk cache where one can be written, without one otherwise."""
    try:
        return njit(cache=True, nogil=True, boundscheck=False)(fn)
    except RuntimeError:  # numba: "cannot cache function ...: no locator available"
        return njit(nogil=True, boundscheck=False)(fn)


# Role and TurnProblem codes as plain ints (numba compiles them as constants); spans/labels.py
# holds the enums and tests/test_kernels.py checks that these mirror them.
OUTSIDE, HEADER, ASSISTANT, REASONING, TOOL_CALL = 0, 1, 5, 6, 7
ASSISTANT_END, END, AFTER_ASSISTANT_END, INJECTED, UNKNOWN_ROLE = 8, 9, 10, 11, 12
NO_LEADING_HEADER, HEADER_IN_OPEN_TURN, STRAY_END, UNKNOWN_ROLE_PROBLEM = 1, 2, 3, 4
MALFORMED_HEADER, TEXT_OUTSIDE_TURN, UNCLOSED_TURN = 5, 6, 7


@_jit
def label_chatml(ids, offsets, start, end, newline, role_of_id, newline_lead, think_open, think_close, has_think,
                 call_open, call_close, has_call, max_len, lowest, role, boundary, problem,
                 run_start):  # pragma: no cover (compiled)
    """Fill ``role``/``boundary``/``problem`` for every token of ``ids`` split into rows by ``offsets``,
    and return k: ``run_start[:k]`` are the first positions of the role runs that
    ``checks.content.role_runs`` would find (a new run at each role change and row start),
    noted while the roles are written instead of in another pass over them.

    The rules are those of ``spans.chatml.label_reference`` read token by token, with
    one shortcut: a run of ordinary tokens (ids below ``lowest``, the smallest marker
    id, away from the positions a rule singles out) shares one role and problem and
    is filled as a slice, so the inner loop is a scan for the next marker.
    """
    n_roles = len(role_of_id)
    clip_hi = min(len(role_of_id), len(newline_lead)) - 1
    k_runs = 0
    for r in range(len(offsets) - 1):
        a = offsets[r]
        b = offsets[r + 1]
        last_s = -1  # last opener, end marker, <think>, </think>, <tool_call>, </tool_call> of the row
        last_e = -1
        lto = -1
        ltc = -1
        lco = -1
        lcc = -1
        turn_role = OUTSIDE
        current = -1  # the role of the run open at p (none at a row start)
        p = a
        while p < b:
            t = ids[p]
            if t < lowest and p != a and p != b - 1:
                in_turn = last_s >= 0
                closed = last_e >= last_s
                if not (in_turn and ((not closed and p - last_s <= 2) or (closed and p == last_e + 1))):
                    q = p + 1
                    while q < b - 1 and ids[q] < lowest:
                        q += 1
                    rl = OUTSIDE
                    pb = 0
                    if in_turn:
                        if closed:
                            pb = TEXT_OUTSIDE_TURN
                        else:
                            rl = turn_role
                            if rl == ASSISTANT:
                                if has_think and lto > last_s and lto > ltc:
                                    rl = REASONING
                                if has_call and lco > last_s and lco > lcc:
                                    rl = TOOL_CALL
                    if rl != current:
                        run_start[k_runs] = p
                        k_runs += 1
                        current = rl
                    role[p:q] = rl
                    boundary[p:q] = False
                    problem[p:q] = pb
                    p = q
                    continue
            is_s = t == start
            is_e = t == end
            open_before = last_s > last_e  # the row's previous opener/end marker is an opener
            prob = 0
            if is_s:
                if open_before:
                    prob = HEADER_IN_OPEN_TURN
                tr = UNKNOWN_ROLE
                if p + 1 < b:
                    nt = ids[p + 1]
                    if nt != start and nt != end:
                        tr = role_of_id[min(max(nt, 0), n_roles - 1)]
                turn_role = INJECTED if open_before else tr
                last_s = p
            elif is_e:
                if not open_before:
                    prob = STRAY_END
                last_e = p
            if has_think:
                if t == think_open:
                    lto = p
                elif t == think_close:
                    ltc = p
            if has_call:
                if t == call_open:
                    lco = p
                elif t == call_close:
                    lcc = p
            if p > a and ids[p - 1] == start:  # the role token of a header
                if is_e:
                    prob = MALFORMED_HEADER
                elif not is_s and role_of_id[min(max(t, 0), n_roles - 1)] == UNKNOWN_ROLE:
                    prob = UNKNOWN_ROLE_PROBLEM
            rl = OUTSIDE
            bd = False
            open_tok = False
            if last_s >= 0:
                if last_e >= last_s:  # the turn is closed
                    if is_e:
                        if open_before:
                            rl = ASSISTANT_END if turn_role == ASSISTANT else END
                    elif p == last_e + 1 and t == newline:
                        if turn_role == ASSISTANT:
                            rl = AFTER_ASSISTANT_END
                    elif prob == 0:
                        prob = TEXT_OUTSIDE_TURN
                else:
                    open_tok = True
                    k = p - last_s
                    if k <= 1:
                        rl = HEADER
                    elif k == 2:
                        nl_ok = newline_lead[min(max(t, 0), clip_hi)]
                        if t == newline:
                            rl = HEADER
                        else:
                            rl = turn_role
                            bd = nl_ok
                        if not nl_ok and turn_role != INJECTED and prob == 0:
                            prob = MALFORMED_HEADER
                    else:
                        rl = turn_role
                    if rl == ASSISTANT and not bd:
                        sub = ASSISTANT
                        if has_think and lto > last_s and (lto > ltc or t == think_close):
                            sub = REASONING
                        if has_call and lco > last_s and (lco > lcc or t == call_close):
                            sub = TOOL_CALL
                        rl = sub
            if p == a and not is_s:
                prob = NO_LEADING_HEADER
            if p == b - 1 and open_tok and b - a < max_len and prob == 0:
                prob = UNCLOSED_TURN
            if rl != current:
                run_start[k_runs] = p
                k_runs += 1
                current = rl
            role[p] = rl
            boundary[p] = bd
            problem[p] = prob
            p += 1
    return k_runs


@_jit
def drain_counts(counts, ids_out, counts_out):  # pragma: no cover (compiled)
    """Move the non-zero entries of ``counts`` (in id order) to the sparse outputs, zeroing them:
    the dense array is a per-process buffer, clean again for the next shard."""
    k = 0
    for i in range(len(counts)):
        c = counts[i]
        if c != 0:
            ids_out[k] = i
            counts_out[k] = c
            counts[i] = 0
            k += 1


@_jit
def prefix_count(flags, out):  # pragma: no cover (compiled)
    """``out[i]`` = true values among ``flags[:i]`` (``out`` has one more element than ``flags``)."""
    s = 0
    out[0] = 0
    for i in range(len(flags)):
        s += flags[i]
        out[i + 1] = s


@_jit
def row_hash_sums(ids, mask, has_mask, offsets, r, out):  # pragma: no cover (compiled)
    """``out[i] = sum_j (2 id_j + mask_j) r^j  (mod 2^64)`` over the positions j of row i.

    A running power of ``r`` per row. All arithmetic is uint64 (numba would take mixed
    int64/uint64 through float64); ids wrap as numpy's unsafe cast does. (Horner's rule
    in four or eight interleaved lanes measured no faster.)
    """
    two = np.uint64(2)
    one = np.uint64(1)
    for row in range(len(offsets) - 1):
        h = np.uint64(0)
        p = one
        if has_mask:
            for j in range(offsets[row], offsets[row + 1]):
                h += (two * np.uint64(ids[j]) + np.uint64(mask[j])) * p
                p *= r
        else:
            for j in range(offsets[row], offsets[row + 1]):
                h += two * np.uint64(ids[j]) * p
                p *= r
        out[row] = h


@_jit
def token_pass(ids, mask, offsets, r, limit, prefix, counts, sums):  # pragma: no cover (compiled)
    """:func:`prefix_count`, the supervised-id counts (``counts[t] += 1`` for each supervised
    ``t`` in ``[0, limit)``: ``bincount(ids[mask])`` without materialising ``ids[mask]``; other
    ids are ids_known's) and :func:`row_hash_sums` (with a mask) in one pass. Apart, each read
    the shard's ids and mask again; together they are the stats' and the duplicate search's
    share of every token. ``offsets`` must run from 0 to ``len(ids)``.
    """
    two = np.uint64(2)
    one = np.uint64(1)
    s = 0
    prefix[0] = 0
    for row in range(len(offsets) - 1):
        h = np.uint64(0)
        p = one
        for j in range(offsets[row], offsets[row + 1]):
            t = ids[j]
            m = mask[j]
            s += m
            prefix[j + 1] = s
            h += (two * np.uint64(t) + np.uint64(m)) * p
            p *= r
            if m:
                if t >= 0 and t < limit:
                    counts[t] += 1
        sums[row] = h


@_jit
def reply_lengths(ids, role, boundary, is_part, blank, markers, t_start, t_end, cap, out):  # pragma: no cover (compiled)
    """``out[i]``: reply-text tokens in [t_start[i], t_end[i]), exact up to ``cap``, else ``cap + 1``.

    A text token has a role in ``is_part``, is no boundary token, no ``blank`` id (ids
    clipped into the table, as numpy's ``take(mode="clip")``) and no marker. Each turn is
    read only until its count passes ``cap``: a normal reply stops after a few tokens.
    """
    hi = len(blank) - 1
    for i in range(len(t_start)):
        c = 0
        for p in range(t_start[i], t_end[i]):
            if not is_part[role[p]] or boundary[p]:
                continue
            t = ids[p]
            if blank[min(max(t, 0), hi)]:
                continue
            marker = False
            for k in range(len(markers)):
                if t == markers[k]:
                    marker = True
            if marker:
                continue
            c += 1
            if c > cap:
                break
        out[i] = c


@_jit
def run_totals(role, start, end, prefix, has_prefix, counts, sums):  # pragma: no cover (compiled)
    """Per code: the length of its runs [start, end) and, with a prefix sum, the flags under them."""
    for k in range(len(role)):
        c = role[k]
        counts[c] += end[k] - start[k]
        if has_prefix:
            sums[c] += prefix[end[k]] - prefix[start[k]]
