"""The corruption campaign: damaged copies of a real dataset never crash the suite, print a traceback,
blame the tool or get written to.

A seeded fuzzer (``fixtures/corruption.py``) damages copies of a 300-row dataset that datasets
saved into two Arrow files of 50-row record batches: bit flips in the first 4 KB and in the body,
overwritten words, list offsets moved past the values / backwards / below zero, truncation,
zeroed blocks, appended garbage, broken state.json and dataset_info.json, missing files. For every
case: exit code 0, 1 or 4; no traceback; no "drafter-contracts bug"; the folder's bytes as they
were; summary.json valid whenever one is written; exit 4 is one ERROR line. Damage the reader
must see (offsets, metadata) must also be named: an arrow_integrity verdict, and no per-row
contract passing over rows it never read.

Most cases run in-process (pytester: the same plugin and engine, ~1 s a case); a few run as
real subprocesses (one under -n 2), where a crash of the kernels would show as a signal.
``-m slow`` runs a few hundred more seeds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from drafter_contracts.engine import SHARD_CHECKS
from drafter_testkit.corruption import (CORRUPTIONS, bad_outcomes, campaign, corrupt, small_dataset_dir,
                                                   tree_hashes)

DEFAULT = campaign(3 * len(CORRUPTIONS))
SLOW = campaign(30 * len(CORRUPTIONS), first_seed=100)


@pytest.fixture(scope="module")
def victim() -> Path:
    return small_dataset_dir()


def _damaged(victim: Path, where: Path, kind: str, seed: int) -> tuple[Path, str]:
    folder = where / f"{kind}-{seed}"
    shutil.copytree(victim, folder)
    return folder, corrupt(folder, kind, seed)


def assert_clean_ending(kind: str, what: str, ret: int, out: str, err: str, report: Path,
                        before: dict[str, str], after: dict[str, str]) -> None:
    problems = bad_outcomes(kind, ret, out, err, report, before, after, SHARD_CHECKS)
    assert not problems, f"{kind} ({what}): {'; '.join(problems)}\n{out[-4000:]}\n{err[-2000:]}"


def run_in_process(pytester, victim: Path, tokenizer_dir: Path, kind: str, seed: int) -> None:
    folder, what = _damaged(victim, pytester.path, kind, seed)
    before = tree_hashes(folder)
    result = pytester.runpytest_inprocess(f"--dataset-path={folder}", f"--tokenizer={tokenizer_dir}", "--shard-size=100",
                                          "--expected-count=300", "--report-dir=reports", "-p", "no:cacheprovider")
    assert_clean_ending(kind, what, int(result.ret), result.stdout.str(), result.stderr.str(),
                        pytester.path / "reports", before, tree_hashes(folder))


@pytest.mark.parametrize("kind, seed", DEFAULT, ids=[f"{k}-{s}" for k, s in DEFAULT])
def test_a_damaged_copy_ends_cleanly(pytester, victim, tokenizer_dir, kind, seed):
    run_in_process(pytester, victim, tokenizer_dir, kind, seed)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The many-seed campaign only when slow tests are asked for (``-m slow``): ~10 min on 2 cores."""
    if metafunc.function.__name__ != "test_a_damaged_copy_ends_cleanly_many_seeds":
        return
    if "slow" in (metafunc.config.getoption("markexpr") or "").replace("not slow", ""):
        metafunc.parametrize("kind, seed", SLOW, ids=[f"{k}-{s}" for k, s in SLOW])
    else:
        metafunc.parametrize("kind, seed", [pytest.param(None, None, marks=pytest.mark.skip(
            reason=f"the {len(SLOW)}-case campaign runs with -m slow (about 10 minutes on 2 cores)"))], ids=["not-selected"])


@pytest.mark.slow
def test_a_damaged_copy_ends_cleanly_many_seeds(pytester, victim, tokenizer_dir, kind, seed):
    run_in_process(pytester, victim, tokenizer_dir, kind, seed)


@pytest.mark.parametrize("kind, seed, workers", [("offset_past_end", 1, "2"), ("offset_negative", 2, "0"),
                                                 ("truncate", 0, "0")])
def test_a_damaged_copy_ends_cleanly_in_a_real_process(tmp_path, victim, tokenizer_dir, kind, seed, workers):
    """As a user runs it: a kernel reading past a buffer would end this process with a signal (exit < 0)."""
    folder, what = _damaged(victim, tmp_path, kind, seed)
    before = tree_hashes(folder)
    report = tmp_path / "reports"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--dataset-path={folder}",
                           f"--tokenizer={tokenizer_dir}", "--shard-size=100", "--expected-count=300",
                           f"--report-dir={report}", "-n", workers], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env=os.environ.copy())
    assert_clean_ending(kind, what, proc.returncode, proc.stdout, proc.stderr, report, before, tree_hashes(folder))


def test_an_overwritten_offset_is_named_by_file_column_and_row(pytester, victim, tokenizer_dir):
    """The case a user met: one input_ids offset past the values. The verdict names where, and the
    rows of that record batch are read by no contract (their shard skips, saying why)."""
    import numpy as np

    from drafter_testkit.corruption import buffer_spans

    folder = pytester.path / "ds"
    shutil.copytree(victim, folder)
    path = folder / "data-00001-of-00002.arrow"
    name, batch, at, rows, width = [s for s in buffer_spans(path) if s[0] == "input_ids"][1]  # rows 200..249
    data = bytearray(path.read_bytes())
    data[at + 7 * width:at + 8 * width] = np.int32(10_000_000).tobytes()  # row 206 ends past the values
    path.write_bytes(bytes(data))
    result = pytester.runpytest_inprocess(f"--dataset-path={folder}", f"--tokenizer={tokenizer_dir}", "--shard-size=100",
                                          "--expected-count=300", "--report-dir=reports", "-p", "no:cacheprovider")
    assert result.ret == 1
    summary = json.loads((pytester.path / "reports" / "summary.json").read_text())
    integrity = summary["checks"]["arrow_integrity"]
    assert integrity["verdict"] == "fail" and integrity["rows_violating"] == 50
    assert "data-00001-of-00002.arrow, column input_ids, row 206: it ends at list offset 10,000,000" \
        in integrity["messages"][0]
    assert [u["shard"] for u in summary["unchecked"]] == ["shard-00002[200:300]"]
    mask = summary["checks"]["mask_on_assistant_spans"]
    assert mask["verdict"] == "incomplete" and mask["rows_checked"] == 200 and mask["unchecked"] == ["shard-00002[200:300]"]
    out = result.stdout.str()
    assert "NOT CHECKED shard-00002[200:300]" in out and "FAIL arrow_integrity" in out
    junit = (pytester.path / "reports" / "junit.xml").read_text()
    assert 'name="test_arrow_integrity"' in junit and 'name="test_all_shards_checked"' in junit
    assert "incomplete" in (pytester.path / "reports" / "report.html").read_text()
