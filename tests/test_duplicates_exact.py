"""Duplicate rows are reported only when their contents are identical, never on a hash match alone."""

from __future__ import annotations

import json

import numpy as np
from datasets import Dataset

from drafter_contracts.checks.content import exact_groups, repeated_hash_groups, row_hashes
from drafter_contracts.dataset.row_view import RowView


def thue_morse(n: int) -> np.ndarray:
    return np.array([bin(i).count("1") & 1 for i in range(n)], dtype=np.int32)


def colliding_rows(n: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """Two different rows that the polynomial row hash over 2**64 maps to the same value."""
    t = thue_morse(n)
    return np.where(t == 1, 13, 279).astype(np.int32), np.where(t == 1, 279, 13).astype(np.int32)


def _view(rows: list[np.ndarray], masks: list[np.ndarray]) -> RowView:
    ids = np.concatenate(rows)
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int64)
    return RowView(ids, np.concatenate(masks).astype(bool), offsets, np.arange(len(rows)), None)


def test_structured_rows_collide_in_the_hash_but_are_not_duplicates():
    a, b = colliding_rows()
    ones = np.ones(len(a), dtype=bool)
    rows = [a, b, a.copy()]  # row 2 repeats row 0 exactly
    hashes = row_hashes(_view(rows, [ones] * 3))
    assert hashes[0] == hashes[1] == hashes[2]  # the hash alone cannot tell rows 0 and 1 apart
    groups = repeated_hash_groups(np.arange(3), hashes)
    assert [g.tolist() for g in groups] == [[0, 1, 2]]
    contents = {i: r.tobytes() for i, r in enumerate(rows)}
    assert exact_groups(groups, lambda g: [contents[int(i)] for i in g]) == (1, 1, [(0, 2)])


def test_a_run_reports_only_the_identical_pair(pytester, tmp_path):
    a, b = colliding_rows()
    other = np.arange(100, 400, dtype=np.int32)
    rows = [a, b, other, a, other]
    masks = [np.ones(len(r), dtype=np.int8) for r in rows]
    folder = tmp_path / "ds"
    Dataset.from_dict({"input_ids": [r.tolist() for r in rows], "loss_mask": [m.tolist() for m in masks],
                       "seq_len": [len(r) for r in rows]}).save_to_disk(str(folder))
    result = pytester.runpytest_inprocess(f"--dataset-path={folder}", "--shard-size=2", "--report-dir=reports",
                                          "--skip-contract=tokenizer", "-p", "no:cacheprovider")
    assert result.ret in (0, 1)  # these rows are not ChatML: other contracts fail, which is beside the point
    dup = json.loads((pytester.path / "reports" / "summary.json").read_text())["checks"]["duplicate_rows"]
    assert dup["rows_violating"] == 2 and dup["by_reason"] == {"exact duplicate of an earlier row": 2}
    assert sorted(e["row"] for e in dup["examples"]) == [3, 4]
