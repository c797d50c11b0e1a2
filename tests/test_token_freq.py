"""token_freq.pt: written by speculators' own function, checked exactly; stale, unsafe and absent files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from drafter_contracts.checks.token_freq import compare, load_token_freq, supervised_histogram
from drafter_contracts.dataset.reader import open_dataset
from drafter_testkit.content_mutants import token_freq_stale, write_token_freq


@pytest.fixture(scope="session")
def with_fresh_file(tmp_path_factory, clean_dataset) -> Path:
    """A copy of the clean dataset with the token_freq.pt speculators writes for it."""
    out = tmp_path_factory.mktemp("fresh") / "ds"
    shutil.copytree(clean_dataset, out)
    write_token_freq(out, out / "token_freq.pt")
    return out


@pytest.fixture(scope="session")
def stale(tmp_path_factory, clean_dataset):
    out = tmp_path_factory.mktemp("stale") / "token_freq_stale"
    return out, token_freq_stale(clean_dataset, out, 0)


def test_histogram_matches_a_per_row_count(with_fresh_file):
    import torch
    from datasets import load_from_disk

    ds = open_dataset(with_fresh_file)
    from drafter_contracts.dataset.reader import plan_shards

    hist = supervised_histogram(ds.read(s) for s in plan_shards(ds.num_rows, 300))
    rows = load_from_disk(str(with_fresh_file))
    want: dict[int, int] = {}
    for ids, mask in zip(rows["input_ids"], rows["loss_mask"]):
        for i, m in zip(ids, mask):
            if m:
                want[i] = want.get(i, 0) + 1
    assert {int(i): int(hist[i]) for i in np.flatnonzero(hist)} == want
    assert torch.load(with_fresh_file / "token_freq.pt", weights_only=True) == want  # what speculators wrote


def run(pytester, folder: Path, tokenizer_dir: Path, *extra: str):
    result = pytester.runpytest_inprocess(f"--dataset-path={folder}", "--contract=qwen3.6-dflash", f"--tokenizer={tokenizer_dir}", "--shard-size=400",
                                          "--report-dir=reports", "-p", "no:cacheprovider", "-k", "row_contracts", *extra)
    summary = json.loads((pytester.path / "reports" / "summary.json").read_text())
    return result, summary["checks"]["token_freq"]


def test_fresh_file_beside_the_dataset_passes(pytester, with_fresh_file, tokenizer_dir):
    result, check = run(pytester, with_fresh_file, tokenizer_dir)
    assert result.ret == 0 and check["verdict"] == "pass" and check["rows_checked"] == 2000


def test_stale_file_fails_with_the_size_of_the_difference(pytester, stale, tokenizer_dir):
    folder, mutation = stale
    result, check = run(pytester, folder, tokenizer_dir)
    assert result.ret == 1 and check["verdict"] == "fail"
    message = check["messages"][0]
    assert "token_freq.pt is stale:" in message and "token ids have other counts" in message
    assert "sum of |differences|" in message and "file total" in message and "data total" in message
    assert "FAILED test_dataset_contracts.py::test_token_freq" in result.stdout.str()
    assert mutation.expected_failures == frozenset({"test_token_freq"})


def test_token_freq_option_points_at_another_file(pytester, stale, with_fresh_file, tokenizer_dir):
    folder, _ = stale
    # The stale dataset checked against the fresh dataset's file: still a difference; its own data's file: none.
    result, check = run(pytester, folder, tokenizer_dir, f"--token-freq={with_fresh_file / 'token_freq.pt'}")
    assert result.ret == 1 and check["verdict"] == "fail"
    result, check = run(pytester, with_fresh_file, tokenizer_dir, f"--token-freq={with_fresh_file / 'token_freq.pt'}")
    assert result.ret == 0 and check["verdict"] == "pass"


def test_no_file_skips_with_a_reason(pytester, clean_dataset, tokenizer_dir):
    result, check = run(pytester, clean_dataset, tokenizer_dir)
    assert result.ret == 0 and check["verdict"] == "skip"
    assert "no token_freq.pt beside the dataset" in check["skip_reasons"][0]


def test_missing_option_file_is_a_usage_error(clean_dataset, tokenizer_dir, tmp_path, usage_run):
    run = usage_run(f"--dataset-path={clean_dataset}", "--contract=qwen3.6-dflash", f"--tokenizer={tokenizer_dir}",
                    f"--token-freq={tmp_path / 'nope.pt'}")
    assert run.ret == 4 and "Traceback" not in run.output
    assert len(run.errors) == 1 and "--token-freq" in run.errors[0] and "no such file" in run.errors[0]


class _Evil:
    def __reduce__(self):
        return (print, ("code ran while loading token_freq.pt",))


def test_file_that_would_run_code_is_refused(tmp_path, capsys):
    import torch

    path = tmp_path / "token_freq.pt"
    torch.save({1: 2, "x": _Evil()}, path)
    stored, why = load_token_freq(path)
    assert stored is None and "weights_only=True" in why
    assert "code ran" not in capsys.readouterr().out


def test_compare_names_top_differences():
    res = compare(np.array([0, 5, 7, 1]), np.array([0, 5, 9, 0, 3]), lambda i: f"t{i}", Path("token_freq.pt"))
    assert not res.ok
    assert "3 token ids" in res.message and "sum of |differences| 6" in res.message
    assert res.message.index("4 't4'") < res.message.index("2 't2'") < res.message.index("3 't3'")
    assert compare(np.array([1, 2]), np.array([1, 2, 0]), None, Path("t.pt")).ok
