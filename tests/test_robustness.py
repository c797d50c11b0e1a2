"""A contract that crashes, or a shard with no usable row, must not hide the other verdicts."""

from __future__ import annotations

import json

import pytest
from datasets import load_from_disk

from helpers import NEEDS_A_FILE
from drafter_contracts.engine import SHARD_CHECKS, Engine


def _summary(pytester) -> dict:
    return json.loads((pytester.path / "reports" / "summary.json").read_text())


def test_a_crashing_contract_fails_alone_and_the_shard_still_reports(pytester, clean_dataset, tokenizer_dir, monkeypatch):
    real = Engine._run

    def crashing(self, w, check):
        if check == "short_rows" and w.shard.index == 1:
            raise ValueError("boom")
        return real(self, w, check)

    monkeypatch.setattr(Engine, "_run", crashing)
    result = pytester.runpytest_inprocess(f"--dataset-path={clean_dataset}", "--contract=qwen3.6-dflash", f"--tokenizer={tokenizer_dir}",
                                          "--shard-size=400", "--expected-count=2000", "--report-dir=reports",
                                          "-p", "no:cacheprovider")
    checks = _summary(pytester)["checks"]
    assert result.ret == 1
    assert checks["short_rows"]["verdict"] == "fail" and "ValueError: boom" in checks["short_rows"]["messages"][0]
    # every other contract still has all five shards' results
    whole = ("duplicate_rows", "convention_losses")  # their shards' carriers make one controller-side verdict
    assert all(checks[c]["tests"] == 5 for c in SHARD_CHECKS if c not in whole and c not in NEEDS_A_FILE)
    assert checks["mask_on_assistant_spans"]["verdict"] == "pass" and checks["mask_on_assistant_spans"]["rows_checked"] == 2000
    assert "could not be evaluated (ValueError: boom)" in result.stdout.str()


@pytest.fixture(scope="module")
def empty_shard_dataset(tmp_path_factory, clean_dataset):
    """600 rows of the clean fixture, rows 300-599 emptied: the second shard of 300 has no usable row."""
    ds = load_from_disk(str(clean_dataset)).select(range(600))

    def empty(row, i):
        return {"input_ids": [], "loss_mask": [], "seq_len": 0} if i >= 300 else row

    folder = tmp_path_factory.mktemp("empty-shard") / "ds"
    ds.map(empty, with_indices=True).save_to_disk(str(folder))
    return folder


def test_a_shard_without_usable_rows_keeps_the_duplicate_search(pytester, empty_shard_dataset, tokenizer_dir):
    pytester.runpytest_inprocess(f"--dataset-path={empty_shard_dataset}", "--contract=qwen3.6-dflash", f"--tokenizer={tokenizer_dir}",
                                 "--shard-size=300", "--report-dir=reports", "-p", "no:cacheprovider")
    checks = _summary(pytester)["checks"]
    assert checks["no_empty_rows"]["verdict"] == "fail" and checks["no_empty_rows"]["rows_violating"] == 300
    assert checks["duplicate_rows"]["verdict"] in ("pass", "warn"), checks["duplicate_rows"]
    assert checks["duplicate_rows"]["rows_checked"] == 300
