"""What ``drafter-contracts init`` pins of a draft vocabulary: its size, fingerprint and observed coverage."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .contracts import _covered_table, mapping_state
from .files import fingerprint


def observe_mapping(engine, sparse: list[dict], parts: list[dict | None]) -> dict[str, Any] | None:
    """Coverage of the mapping the engine located, from the shards' supervised counts and their
    ``contracts.shard_coverage`` partials (computed in init's one pass: no extra read of the ids).

    None without a mapping; ``{"problem": ...}`` when it cannot be pinned (unreadable, not well formed)."""
    m, why, problems = mapping_state(engine)
    if m is None and not problems:
        return None
    if m is None or why is not None:
        return {"problem": "; ".join(problems) or why}
    table = _covered_table(engine, m)
    total = covered = 0
    lowest = 1.0
    for part in sparse:
        ids, counts = np.asarray(part["ids"], dtype=np.int64), np.asarray(part["counts"], dtype=np.int64)
        total += int(counts.sum())
        covered += int(counts[np.take(table, ids, mode="clip")].sum())
    for got in parts:
        if got and got["lowest"]:
            lowest = min(lowest, min(share for _, share in got["lowest"]))
    share = covered / total if total else 1.0
    return {"files": m.where, "draft_vocab_size": len(m.d2t), "target_vocab_size": len(m.t2d),
            "fingerprint": fingerprint(m), "coverage": share, "min_coverage": math.floor(share * 1e4) / 1e4,
            "lowest_row": lowest}
