"""Every compiled kernel of ``kernels/_kernels.c`` as numpy, behind the same wrappers, for installs without C.

``pip install`` builds ``kernels/_kernels.c`` as an optional extension: on a machine without a C
compiler the install still succeeds and ``kernels/compiled.py`` finds no library. Each wrapper then
calls the function of the same name here, with the same (already checked) arguments and
the same outputs filled in place, so every caller and every result is unchanged: only the
time differs (docs/reliability.md measures it). ``DRAFTER_CONTRACTS_KERNELS=numpy`` picks
this path on purpose (the tests run the suite on it).

These are whole-array formulations, no Python loop per row or token; tests/test_kernels.py holds
both backends to each other bit for bit. The span labeller's numpy statement is
``spans.generic.label``, which ``spans.labeller`` runs when the library is not there.
"""

from __future__ import annotations

import numpy as np

from .codes import ASSISTANT_END


def drain_counts(counts: np.ndarray, ids_out: np.ndarray, counts_out: np.ndarray) -> None:
    """Non-zero entries in id order, then zeroed."""
    nz = np.flatnonzero(counts)
    ids_out[:] = nz
    counts_out[:] = counts[nz]
    counts[nz] = 0


def prefix_count(flags: np.ndarray, out: np.ndarray) -> None:
    out[0] = 0
    np.cumsum(flags.view(np.uint8), dtype=out.dtype, out=out[1:])


def _powers(r: int, longest: int) -> np.ndarray:
    """r**j mod 2**64 for j < longest (uint64 products wrap, as C's do)."""
    pw = np.full(max(longest, 1), np.uint64(r), dtype=np.uint64)
    pw[0] = 1
    return np.multiply.accumulate(pw)


def row_hash_sums(ids: np.ndarray, mask: np.ndarray, has_mask: bool, offsets: np.ndarray, r: int,
                  out: np.ndarray) -> None:
    """``H = sum_j (2 id_j + mask_j) r^j (mod 2^64)`` per row: one product per token, a wrapping cumsum."""
    n_rows = len(offsets) - 1
    a, b = int(offsets[0]), int(offsets[-1])
    lengths = np.diff(offsets)
    if b <= a:
        out[:n_rows] = 0
        return
    pos = np.arange(a, b, dtype=np.int64) - np.repeat(offsets[:-1], lengths)  # position within the row
    term = ids[a:b].astype(np.int64).view(np.uint64) * np.uint64(2)
    if has_mask:
        term += mask[a:b].view(np.uint8)
    term *= _powers(r, int(lengths.max()))[pos]
    cs = np.zeros(b - a + 1, dtype=np.uint64)
    np.cumsum(term, out=cs[1:])
    out[:n_rows] = cs[offsets[1:] - a] - cs[offsets[:-1] - a]


def token_pass(ids: np.ndarray, mask: np.ndarray, offsets: np.ndarray, r: int, limit: int, prefix: np.ndarray,
               counts: np.ndarray, sums: np.ndarray, outside: np.ndarray) -> None:
    """The prefix sum, supervised-id counts in [0, limit), row hash sums and the ids outside [0, limit)."""
    prefix_count(mask, prefix)
    wide = ids.astype(np.int64, copy=False)
    inside = (wide >= 0) & (wide < limit)
    supervised = wide[inside & (mask.view(np.uint8) != 0)]
    if len(supervised):
        found = np.bincount(supervised, minlength=0)
        counts[:len(found)] += found.astype(counts.dtype)
    row_hash_sums(ids, mask, True, offsets, r, sums)
    outside[0] = len(ids) - int(np.count_nonzero(inside))


def reply_lengths(ids: np.ndarray, role: np.ndarray, boundary: np.ndarray, is_part: np.ndarray, blank: np.ndarray,
                  markers: np.ndarray, t_start: np.ndarray, t_end: np.ndarray, cap: int, out: np.ndarray) -> None:
    """Text tokens per turn, from one flag per token and its prefix sum, capped at ``cap + 1``."""
    n_turns = len(t_start)
    if not n_turns:
        return
    hi = int(t_end.max())
    wide = ids[:hi].astype(np.int64, copy=False)
    text = ((is_part.view(np.uint8)[role[:hi]] != 0) & (boundary[:hi].view(np.uint8) == 0)
            & (blank.view(np.uint8)[np.clip(wide, 0, len(blank) - 1)] == 0))
    if len(markers):
        text &= ~np.isin(wide, markers)
    cs = np.zeros(hi + 1, dtype=np.int64)
    np.cumsum(text, out=cs[1:])
    got = np.where(t_end > t_start, cs[t_end] - cs[np.minimum(t_start, t_end)], 0)
    out[:n_turns] = np.minimum(got, cap + 1)


def run_totals(role: np.ndarray, start: np.ndarray, end: np.ndarray, prefix: np.ndarray, has_prefix: bool,
               counts: np.ndarray, sums: np.ndarray) -> None:
    np.add.at(counts, role, end - start)
    if has_prefix:
        np.add.at(sums, role, prefix[end].astype(np.int64) - prefix[start].astype(np.int64))


def assistant_turns(role: np.ndarray, start: np.ndarray, end: np.ndarray, row_first: np.ndarray,
                    is_turn: np.ndarray, turn_start: np.ndarray, turn_end: np.ndarray, closed: np.ndarray) -> int:
    """Turns: maximal sequences of ``is_turn`` runs, cut at row starts; closed when one holds an ASSISTANT_END run."""
    turn = is_turn.view(np.uint8)[role] != 0
    prev = np.zeros(len(turn), dtype=bool)
    prev[1:] = turn[:-1]
    first = turn & (~prev | (row_first.view(np.uint8) != 0))
    number = np.cumsum(first) - 1  # the turn each run belongs to (meaningful where turn)
    k = int(first.sum())
    turn_start[:k] = start[first]
    last = np.zeros(len(turn), dtype=bool)
    last[:-1] = first[1:] | ~turn[1:]
    last[-1:] = True
    last &= turn
    turn_end[:k] = end[last]
    closed[:k] = False
    ends = turn & (role == ASSISTANT_END)
    closed[number[ends]] = True
    return k
