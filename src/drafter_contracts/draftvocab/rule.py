"""Which draft vocabulary a dataset's supervised counts produce, under each producer's rule.

Both producers keep the N most frequent supervised ids. They differ where the counts do not decide:

* speculators 0.9 (``build_vocab_mappings_from_distribution``): ids sorted by (-count, id), the first N;
  with fewer than N distinct ids, the lowest unused ids of ``range(N)`` fill the rest;
* SpecForge 0.2 (``process_token_dict_to_mappings``): ``Counter.most_common(N)``, so ids of equal count
  at the boundary are taken in the order the dataset first shows them; with fewer than N distinct ids,
  ids of ``range(N)`` not supervised fill the rest in ``set`` iteration order.

The counts alone cannot reproduce SpecForge's order of first appearance, so for it any choice among
the ids the rule leaves open (the boundary's ties, the padding candidates) is accepted; everything the
counts decide must match exactly. All of it is numpy over the dense count array: no loop over ids.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Expected:
    """The rule's selection (ascending target ids), adapted to the mapping where the rule leaves a choice."""

    ids: np.ndarray
    distinct: int  # distinct supervised ids in the counts
    padding: int  # ids the rule adds that were never supervised (draft size above ``distinct``)
    open_choice: int  # ids the rule left to the producer's order (accepted whichever were chosen)


def _order(counts: np.ndarray) -> np.ndarray:
    """Supervised ids, most frequent first, ties by id."""
    ids = np.flatnonzero(counts)
    return ids[np.lexsort((ids, -counts[ids]))]


def expected_selection(counts: np.ndarray, n: int, producer: str, chosen: np.ndarray | None = None) -> Expected:
    """The N ids the rule selects from ``counts`` (dense, by id). ``chosen``: the mapping's own selection,
    which settles the choices SpecForge's rule leaves to the data's order."""
    order = _order(counts)
    distinct = len(order)
    lenient = producer == "specforge"
    if distinct >= n:
        top = order[:n]
        if not lenient or n == 0:
            return Expected(np.sort(top), distinct, 0, 0)
        t = counts[top[-1]]
        must = order[counts[order] > t]
        ties = order[counts[order] == t]  # ascending id within the tie (lexsort's second key)
        k = n - len(must)
        picked = _prefer(ties, chosen, k)
        return Expected(np.sort(np.concatenate((must, picked))), distinct, 0, len(ties) if len(ties) > k else 0)
    need = n - distinct
    supervised = np.zeros(n, dtype=bool)
    supervised[order[order < n]] = True
    candidates = np.flatnonzero(~supervised)  # range(N) without the supervised ids, ascending
    padding = _prefer(candidates, chosen, need) if lenient else candidates[:need]
    open_choice = len(candidates) if lenient and len(candidates) > need else 0
    return Expected(np.sort(np.concatenate((order, padding))), distinct, need, open_choice)


def _prefer(pool: np.ndarray, chosen: np.ndarray | None, k: int) -> np.ndarray:
    """k ids of ``pool``: those the mapping chose first, then the lowest others."""
    if chosen is None or not len(chosen):
        return pool[:k]
    inside = np.isin(pool, chosen, assume_unique=True)
    return np.concatenate((pool[inside], pool[~inside]))[:k]


def dense(ids: np.ndarray, counts: np.ndarray, size: int = 0) -> np.ndarray:
    """Sparse (ids, counts) as a dense count array of at least ``size`` entries."""
    out = np.zeros(max(size, int(ids.max()) + 1 if len(ids) else 0), dtype=np.int64)
    out[ids] = counts
    return out
