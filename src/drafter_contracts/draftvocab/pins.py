"""What ``drafter-contracts init`` pins of a draft vocabulary: its size, fingerprint and observed coverage.

The family's ``contract_families.InitHooks`` that read data: the mapping init locates, what it keeps of
each shard in init's one pass, the pins, and the ``[vocab]`` table written from them (its argument is
in ``family.py``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ..toml_text import key_line
from .contracts import covered_table, mapping_state, shard_coverage
from .files import fingerprint, locate
from .policy import VocabPolicy


def open_input(dataset: Any, mapping: str | None) -> Any:
    return locate(dataset.path, mapping, VocabPolicy())


def shard(engine: Any, shard: Any, stats: dict[str, Any]) -> dict[str, Any] | None:
    """The shard's supervised id counts and its ``contracts.shard_coverage`` (None: no supervised ids)."""
    if stats.get("supervised_id_counts") is None:
        return None
    return {"counts": stats["supervised_id_counts"], "coverage": shard_coverage(engine, shard)}


def pins(engine: Any, partials: list[dict[str, Any] | None], mapping: str | None) -> dict[str, Any] | None:
    """Coverage of the mapping the engine located, from the shards' partials (no extra read of the ids).

    None without a mapping or without supervised ids; ``{"problem": ...}`` when it cannot be pinned
    (unreadable, not well formed)."""
    parts = [p for p in partials if p is not None]
    if not parts:
        return None
    m, why, problems = mapping_state(engine)
    if m is None and not problems:
        return None
    if m is None or why is not None:
        return {"problem": "; ".join(problems) or why}
    table = covered_table(engine, m)
    total = covered = 0
    lowest = 1.0
    for part in parts:
        ids = np.asarray(part["counts"]["ids"], dtype=np.int64)
        counts = np.asarray(part["counts"]["counts"], dtype=np.int64)
        total += int(counts.sum())
        covered += int(counts[np.take(table, ids, mode="clip")].sum())
        got = part["coverage"]
        if got and got["lowest"]:
            lowest = min(lowest, min(share for _, share in got["lowest"]))
    share = covered / total if total else 1.0
    out = {"files": m.where, "draft_vocab_size": len(m.d2t), "target_vocab_size": len(m.t2d),
           "fingerprint": fingerprint(m), "coverage": share, "min_coverage": math.floor(share * 1e4) / 1e4,
           "lowest_row": lowest}
    if mapping:
        out["mapping"] = str(Path(mapping).expanduser().resolve())
    return out


def section(d: dict[str, Any] | None) -> list[str]:
    """``[vocab]``: the draft vocabulary found beside the dataset, pinned with the coverage observed."""
    if d is None:
        return ["[vocab]",
                "# No draft vocabulary (d2t-N.npy / t2d-N.npy) beside the dataset: its contracts skip until one",
                "# is there or passed with --vocab-mapping FILE."]
    if d.get("problem"):
        return ["[vocab]", f"# The draft vocabulary beside the dataset could not be pinned: {d['problem']}"]
    return ["[vocab]",
            f"# Found {d['files']}; observed coverage {d['coverage']:.4%} of the supervised tokens,",
            f"# lowest row {d['lowest_row']:.2%}.",
            *([key_line("mapping", d["mapping"], "the mapping file given to init")] if d.get("mapping") else []),
            key_line("draft_vocab_size", d["draft_vocab_size"], "N: the pair d2t-N.npy / t2d-N.npy checked"),
            key_line("target_vocab_size", d["target_vocab_size"], "len(t2d): the target model's vocabulary"),
            key_line("fingerprint", d["fingerprint"], "another selection fails vocab_mapping_consistent"),
            key_line("min_coverage", d["min_coverage"], "the observed coverage, rounded down"),
            ("# min_row_coverage = 0.5                  # uncomment to fail rows whose supervised tokens are "
             "mostly outside")]
