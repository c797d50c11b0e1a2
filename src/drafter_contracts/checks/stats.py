"""Per-shard statistics the engine fills: fixed-bin histograms and exact sparse token counts.

Every per-shard figure here is mergeable (sums of counts over fixed bins, sparse
id counts), so the figures of a whole dataset - or of several machines' runs put
together - are the same function of the same shard records, whatever the sharding.
The one place they are summed is ``report/reducer.py``; what is read off them
(quantiles from the merged histogram, never averaged over shards) is ``report/stats.py``.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

#: seq_len bins: 16 per octave from 1 to 2**20 tokens (edges rounded down to integers, so
#: lengths below 23 get exact bins). A bin spans at most 2**(1/16) - 1 = 4.4 % of its lower edge.
SEQ_LEN_BINS_PER_OCTAVE = 16
SEQ_LEN_EDGES: np.ndarray = np.unique(np.floor(2.0 ** (np.arange(0, 20 * SEQ_LEN_BINS_PER_OCTAVE + 1)
                                                        / SEQ_LEN_BINS_PER_OCTAVE)).astype(np.int64))
#: Per-row supervised share bins: 50 bins of 0.02 on [0, 1]; a share of exactly 1 goes in the last.
SHARE_BINS = 50


def seq_len_histogram(lengths: np.ndarray) -> list[int]:
    """Counts of row lengths in the fixed log bins; the last bin also holds anything longer."""
    idx = np.clip(np.searchsorted(SEQ_LEN_EDGES, lengths, side="right") - 1, 0, len(SEQ_LEN_EDGES) - 2)
    return np.bincount(idx, minlength=len(SEQ_LEN_EDGES) - 1).astype(np.int64).tolist()


def share_histogram(supervised: np.ndarray, lengths: np.ndarray) -> list[int]:
    """Counts of per-row supervised shares (rows of length 0 are left out)."""
    keep = lengths > 0
    share = supervised[keep] / lengths[keep]
    idx = np.minimum((share * SHARE_BINS).astype(np.int64), SHARE_BINS - 1)
    return np.bincount(idx, minlength=SHARE_BINS).astype(np.int64).tolist()


def run_counts(runs: Any, prefix: np.ndarray | None, minlength: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Per code: positions carrying it, and (with ``prefix``) the sum of the prefix-summed flag over them.

    ``runs`` holds maximal runs of one code (``start``, ``end``, ``role``: e.g. the shard's
    role labels run-length encoded, which the turn checks read too), so both totals are
    sums over runs, not tokens: each run adds its length and ``prefix[end] -
    prefix[start]`` (its supervised tokens, from the shard's shared ``supervised_prefix``).
    Both results are int64.
    """
    from ..kernels.compiled import run_totals

    size = max(minlength, int(runs.role.max()) + 1 if len(runs.role) else 0)
    counts = np.zeros(size, dtype=np.int64)
    sums = np.zeros(size, dtype=np.int64)
    run_totals(runs.role, runs.start, runs.end, prefix if prefix is not None else np.zeros(1, np.int32),
               prefix is not None, counts, sums)
    return counts, (sums if prefix is not None else None)


#: Largest id range counted in one dense array per shard (4 M ids, 16 MB of int32).
DENSE_COUNT_LIMIT = 1 << 22


#: Per-process dense count buffers by (size, dtype), all zero between calls (drain_counts resets them):
#: a fresh 1 MB array per shard costs its page faults and a slow nonzero scan every time.
_COUNT_BUFFERS: dict[tuple[int, str], np.ndarray] = {}


def count_buffer(limit: int, n: int) -> np.ndarray | None:
    """This process's zeroed dense count buffer for ids below ``limit`` (None above DENSE_COUNT_LIMIT:
    no tokenizer bounds the ids, and :func:`sparse_counts` counts them); int32 while ``n`` tokens
    cannot overflow it. A shard's token pass (``engine.token_pass``) counts into it, and
    :func:`drained` leaves it zeroed again."""
    if limit > DENSE_COUNT_LIMIT:
        return None
    dtype = np.dtype(np.int32 if n < 2**31 else np.int64)
    buf = _COUNT_BUFFERS.get((limit, dtype.str))
    if buf is None:
        buf = _COUNT_BUFFERS[(limit, dtype.str)] = np.zeros(limit, dtype=dtype)
    return buf


def drained(buf: np.ndarray) -> dict[str, np.ndarray]:
    """The non-zero entries of a count buffer as sparse counts, zeroing the buffer."""
    from ..kernels.compiled import drain_counts

    ids, counts = drain_counts(buf)
    return {"ids": ids, "counts": counts}


def sparse_counts(ids: np.ndarray, limit: int = 1 << 24) -> dict[str, np.ndarray]:
    """Exact counts of the ids in ``[0, limit)``, kept sparse as arrays: {"ids": int32, "counts": int64}.

    Arrays, not lists: they travel from xdist workers as raw buffers (see ``wire``),
    and only the dataset-wide sum is ever written as JSON. Ids outside ``[0, limit)``
    (the tokenizer's size) are corrupt, reported row by row by ids_known, and not
    counted here: one id of 2**40 would otherwise ask bincount for 8 TB.
    """
    empty = {"ids": np.zeros(0, np.int32), "counts": np.zeros(0, np.int64)}
    if not len(ids):
        return empty
    if int(ids.max()) >= limit:
        ids = ids[ids < limit]
        if not len(ids):
            return empty
    try:  # bincount scans min and max itself and refuses negatives: no separate min() pass
        counts = np.bincount(ids)
    except ValueError:  # a corrupt negative id
        ids = ids[ids >= 0]
        if not len(ids):
            return empty
        counts = np.bincount(ids)
    nz = np.flatnonzero(counts != 0)  # on a bool array: ~4x faster than on the int64 counts
    return {"ids": nz.astype(np.int32), "counts": counts[nz].astype(np.int64, copy=False)}
