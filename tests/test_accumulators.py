"""Per-shard statistics are declared once (``checks/accumulators.py``): the engine writes only declared
keys, summary.json's schema lists exactly them, and the declared merge rules make every split of the
shards (a --split run, merge-reports) give the figures and the profile of the whole."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from drafter_contracts.checks import accumulators as acc
from drafter_contracts.contract import load_contract, resolve_contract_path
from drafter_contracts.dataset.reader import open_dataset
from drafter_contracts.engine import Engine
from drafter_contracts.report.reducer import Reducer

SCHEMA = Path(__file__).resolve().parents[1] / "drafter_testkit" / "summary.schema.json"


@pytest.fixture(scope="module")
def records(clean_dataset, vocab) -> list[dict]:
    contract = load_contract(resolve_contract_path("qwen3.6-dflash"), {"shard_size": 150})
    engine = Engine(open_dataset(clean_dataset), contract, vocab)
    return [engine.stats(s) for s in engine.shards]


def test_the_schema_lists_exactly_the_declared_statistics() -> None:
    shard = json.loads(SCHEMA.read_text())["$defs"]["shard"]
    assert set(shard["properties"]) == acc.KEYS


def test_the_engine_writes_only_declared_statistics(records) -> None:
    written = set().union(*(r.keys() for r in records))
    assert written <= acc.KEYS, written - acc.KEYS
    # contract_figures come from a family's shard pass (the hidden states): none here
    assert acc.KEYS - written == {"contract_figures"}


def _reduced(records: list[dict]) -> Reducer:
    r = Reducer()
    for rec in records:
        rec = dict(rec)
        r.add_counts(rec.pop("supervised_id_counts", None))
        r.add_stats(rec)
        r.stats[rec["shard"]] = rec
    return r


def _same(a: dict, b: dict) -> None:
    assert json.dumps(a, sort_keys=True, default=int) == json.dumps(b, sort_keys=True, default=int)


@pytest.mark.parametrize("seed", range(4))
def test_any_split_of_the_shards_merges_to_the_whole(records, seed) -> None:
    whole = _reduced(records)
    rng = random.Random(seed)
    shuffled = rng.sample(records, len(records))
    cut = sorted(rng.sample(range(1, len(records)), 2))
    parts = [_reduced(p) for p in (shuffled[:cut[0]], shuffled[cut[0]:cut[1]], shuffled[cut[1]:])]
    merged = parts[0]
    for other in parts[1:]:
        merged.merge(other)
    _same(merged.figures(len(records)), whole.figures(len(records)))
    _same(merged.profile(), whole.profile())
    assert whole.figures(len(records))["tokens"] == sum(r["tokens"] for r in records)


def test_a_statistic_some_shards_lack_is_known_by_its_rule(records) -> None:
    """EVERY: one shard without a usable mask and there is no dataset total; ANY: known once any has it."""
    first, *rest = records
    blind = {**first, "supervised_tokens": None}
    blind.pop("anchor_positions")
    blind.pop("boundary_tokens")
    fig = _reduced([blind, *rest]).figures(len(records))
    assert fig["supervised_tokens"] is None and fig["supervised_share"] is None
    assert "anchor_positions" not in fig
    assert fig["boundary_tokens"] == sum(r["boundary_tokens"] for r in rest)
    assert fig["seq_len_min"] == min(r["seq_len_min"] for r in records)
    none = _reduced([{k: v for k, v in r.items() if k not in {"boundary_tokens", "boundary_supervised"}}
                     for r in records]).figures(len(records))
    assert "boundary_tokens" not in none and "role_tokens" not in none


def test_histograms_add_bin_by_bin(records) -> None:
    state: dict = {}
    for r in records:
        acc.add(state, r)
    expect = np.sum([np.asarray(r["seq_len_hist"]) for r in records], axis=0)
    assert (acc.total(state, "seq_len_hist") == expect).all()
    assert acc.total({}, "supervised_tokens") is None and acc.total({}, "tokens") == 0
