"""What is read off the merged per-shard statistics (``checks/stats.py``): quantiles, top tokens, shares.

Quantiles are read from the merged histogram, never averaged over shards; the one place the
shard records are summed is ``reducer.py``.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

QUANTILES = (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99)


def quantiles(hist: np.ndarray, edges: np.ndarray, qs: Iterable[float] = QUANTILES) -> dict[str, int | float | None]:
    """Lower edge of the bin holding each quantile (exact to the bin's resolution)."""
    total = int(hist.sum())
    out: dict[str, int | float | None] = {}
    cum = np.cumsum(hist)
    for q in qs:
        key = f"p{round(q * 100):02d}"
        if total == 0:
            out[key] = None
            continue
        i = int(np.searchsorted(cum, q * total, side="left"))
        v = edges[min(i, len(edges) - 1)].item()
        out[key] = round(v, 6) if isinstance(v, float) else v
    return out


def top_tokens(ids: np.ndarray, counts: np.ndarray, k: int) -> list[tuple[int, int]]:
    """The k most frequent ids, ties broken by id (deterministic)."""
    order = np.lexsort((ids, -counts))[:k]
    return [(int(ids[i]), int(counts[i])) for i in order]


def shares(counts: dict[str, int]) -> dict[str, float]:
    total = sum(counts.values())
    return {k: v / total for k, v in sorted(counts.items())} if total else {}
