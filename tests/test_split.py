"""--split K/N: N disjoint, deterministic shard groups that together cover every row once."""

from __future__ import annotations

import numpy as np
import pytest

from drafter_contracts.dataset.reader import open_dataset, plan_shards, shard_groups
from drafter_contracts.dataset.columns import Shard
from drafter_contracts.errors import UsageProblem
from drafter_contracts.option_values import parse_split


@pytest.mark.parametrize("text,expected", [("1/1", (1, 1)), ("2/3", (2, 3)), (" 3 / 3 ", (3, 3)), ("10/12", (10, 12))])
def test_parse_split(text, expected):
    assert parse_split(text) == expected


@pytest.mark.parametrize("text", ["0/3", "4/3", "3", "a/b", "train", "1/0", "-1/2", ""])
def test_parse_split_refuses_with_a_hint(text):
    with pytest.raises(UsageProblem, match=r"expected K/N .*--dataset-split NAME"):
        parse_split(text)


def _lengths(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.minimum(rng.lognormal(5.5, 0.9, n).astype(np.int64) + 21, 4096)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64])
def test_groups_partition_every_row_once(n):
    lengths = _lengths(50_000)
    shards = plan_shards(len(lengths), 1000, lengths, 400_000)
    groups = shard_groups(shards, lengths, n)
    assert len(groups) == n
    covered = np.zeros(len(lengths), dtype=np.int64)
    for g in groups:
        for s in g:
            covered[s.start:s.stop] += 1
        # consecutive shards: one region of the files per machine
        assert [s.index for s in g] == list(range(g[0].index, g[0].index + len(g))) if g else True
    assert (covered == 1).all()
    assert shard_groups(shards, lengths, n) == groups  # deterministic


def test_groups_balance_tokens_not_rows():
    # The first half of the rows is 10x longer: a row-balanced split would give part 1 ~10x the work.
    lengths = np.concatenate([np.full(20_000, 2000), np.full(20_000, 200)])
    shards = plan_shards(len(lengths), 500, lengths, 10**9)
    groups = shard_groups(shards, lengths, 2)
    tokens = [sum(int(lengths[s.start:s.stop].sum()) for s in g) for g in groups]
    assert max(tokens) / min(tokens) < 1.1, tokens
    rows = [sum(s.rows for s in g) for g in groups]
    assert rows[0] < rows[1]


def test_more_parts_than_shards_leaves_parts_empty():
    shards = [Shard(0, 0, 10), Shard(1, 10, 20)]
    groups = shard_groups(shards, np.full(20, 5), 4)
    assert sum(len(g) for g in groups) == 2 and sorted(s.index for g in groups for s in g) == [0, 1]
    assert shard_groups([], None, 3) == [[], [], []]


def test_groups_of_a_real_dataset(clean_dataset):
    ds = open_dataset(clean_dataset)
    lengths = ds.row_lengths()
    shards = plan_shards(ds.num_rows, 300, lengths, 8_000_000)
    groups = shard_groups(shards, lengths, 3)
    assert sorted((s.start, s.stop) for g in groups for s in g) == [(s.start, s.stop) for s in shards]
    assert all(groups)
