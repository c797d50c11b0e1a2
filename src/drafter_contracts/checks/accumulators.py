"""Every per-shard statistic, declared once with how shards combine (create / add / merge / extract).

A shard's record (``engine.ShardWork.stats``) is a dict of the keys :data:`SHARD_STATS` declares;
the reducer folds each record into one running state with :func:`add` (in ``-n 0``, under
pytest-xdist, for each part of ``merge-reports`` alike; ``drafter-contracts init`` too) and reads
the dataset's figures off it with :func:`total`. The merge rule is the statistic's, not the caller's: a count adds up, a
length takes the extreme, a figure only some shards have is either "known once any shard has it"
or "known only when every shard has it". summary.json's schema lists exactly these keys
(``tests/test_accumulators.py`` holds the engine, the declaration and the schema together).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

#: Merge rules. KEY: identifies the record, not merged. SUM: counts (absent: 0). MIN / MAX: extremes of
#: the shards that have one. EVERY: a count known only when every shard has it (no usable loss_mask in
#: one shard: no dataset total). ANY: a count known once a shard has it. HISTOGRAM: fixed bins, added.
#: COUNTER: {name: count}, added. FIGURES: {contract: {key: number}} (``*_first`` least, ``*_last``
#: greatest, else added). ID_COUNTS: sparse id counts, summed densely by ``Reducer.add_counts``.
KEY, SUM, MIN, MAX, EVERY, ANY, HISTOGRAM, COUNTER, FIGURES, ID_COUNTS = (
    "key", "sum", "min", "max", "every", "any", "histogram", "counter", "figures", "id_counts")


@dataclass(frozen=True)
class ShardStat:
    key: str
    merge: str
    doc: str


SHARD_STATS: tuple[ShardStat, ...] = (
    ShardStat("shard", KEY, "the shard's index"),
    ShardStat("rows", SUM, "rows in the shard"),
    ShardStat("rows_excluded", SUM, "null, empty or length-disagreeing rows (checked by integrity only)"),
    ShardStat("rows_checked", SUM, "rows the per-row contracts read"),
    ShardStat("tokens", SUM, "tokens of the checked rows"),
    ShardStat("seq_len_min", MIN, "shortest checked row"),
    ShardStat("seq_len_max", MAX, "longest checked row"),
    ShardStat("rows_at_max_len", SUM, "rows exactly at the contract's max_len"),
    ShardStat("supervised_tokens", EVERY, "tokens with loss_mask true (None without a usable mask)"),
    ShardStat("seq_len_hist", HISTOGRAM, "row lengths in checks.stats.SEQ_LEN_EDGES bins"),
    ShardStat("supervised_share_hist", HISTOGRAM, "per-row supervised share in checks.stats.SHARE_BINS bins"),
    ShardStat("supervised_id_counts", ID_COUNTS, "sparse counts of the supervised ids"),
    ShardStat("role_tokens", COUNTER, "tokens per span-oracle role"),
    ShardStat("role_supervised", COUNTER, "supervised tokens per span-oracle role"),
    ShardStat("boundary_tokens", ANY, "template marker tokens (turn headers and ends)"),
    ShardStat("boundary_supervised", ANY, "supervised marker tokens"),
    ShardStat("anchor_positions", EVERY, "DFlash anchor candidates (supervised block starts)"),
    ShardStat("contract_figures", FIGURES, "what contracts' shard passes counted (declare.Spec.shard_figures)"),
)
KEYS = frozenset(s.key for s in SHARD_STATS)


def _sum(acc: Any, value: Any) -> Any:
    return (acc or 0) + int(value or 0)


def _pick(pick: Callable[[int, int], int]) -> Callable[[Any, Any], Any]:
    return lambda acc, value: acc if value is None else value if acc is None else pick(acc, value)


def _every(acc: Any, value: Any) -> Any:
    total, complete = acc or (0, True)
    return (total + int(value), complete) if value is not None else (total, False)


def _any(acc: Any, value: Any) -> Any:
    return acc if value is None else (acc or 0) + int(value)


def _histogram(acc: Any, value: Any) -> Any:
    if value is None:
        return acc
    h = np.asarray(value, dtype=np.int64)
    return h if acc is None else acc + h


def _counter(acc: Any, value: Any) -> Any:
    if value is None:
        return acc
    out = dict(acc or {})
    for k, v in value.items():
        out[k] = out.get(k, 0) + int(v)
    return out


def _figures(acc: Any, value: Any) -> Any:
    out = {name: dict(f) for name, f in (acc or {}).items()}
    for name, figures in (value or {}).items():
        got = out.setdefault(name, {})
        for key, v in figures.items():
            pick = min if key.endswith("_first") else max if key.endswith("_last") else None
            got[key] = v if key not in got else (pick(got[key], v) if pick else got[key] + v)
    return out


_ADD: dict[str, Callable[[Any, Any], Any]] = {
    SUM: _sum, MIN: _pick(min), MAX: _pick(max), EVERY: _every, ANY: _any, HISTOGRAM: _histogram,
    COUNTER: _counter, FIGURES: _figures}


def add(state: dict[str, Any], record: dict[str, Any]) -> None:
    """Fold one shard's record into ``state`` (empty at first); ``state["parts"]`` counts the records."""
    state["parts"] = state.get("parts", 0) + 1
    for stat in SHARD_STATS:
        rule = _ADD.get(stat.merge)
        if rule is not None:
            state[stat.key] = rule(state.get(stat.key), record.get(stat.key))


def total(state: dict[str, Any], key: str) -> Any:
    """The dataset's value of ``key`` over the records added: None when it is not known (no record,
    an EVERY statistic a record lacked, an ANY / MIN / MAX / HISTOGRAM / COUNTER none had)."""
    merge = _MERGE[key]
    value = state.get(key)
    if merge == SUM:
        return value or 0
    if merge == EVERY:
        if not state.get("parts"):
            return None
        got, complete = value or (0, True)
        return got if complete else None
    return value


_MERGE = {s.key: s.merge for s in SHARD_STATS}
