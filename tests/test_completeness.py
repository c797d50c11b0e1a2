"""A run that did not see every shard, or saw files change, must say so everywhere and exit 1.

A worker killed mid-shard (SIGKILL, as the OOM killer sends it) is the real thing here: a
plugin module given with ``-p`` patches the engine in the workers so that one shard's
check kills its own process; pytest-xdist then reports the crash and restarts the worker.
The dataset rewritten during a run is a copy of the 300-row campaign dataset, changed by
the check of one shard.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import NEEDS_A_FILE
from drafter_contracts.checks.completeness import Coverage, unchanged_result
from drafter_contracts.dataset.columns import Shard
from drafter_contracts.engine import SHARD_CHECKS, Engine
from drafter_testkit.corruption import small_dataset_dir, tree_hashes
from drafter_contracts.checks.integrity import file_state
from drafter_testkit.schema import validate_summary

KILLER = textwrap.dedent('''
    """Test-only plugin: SIGKILL this process from inside one check of one shard, or one dataset-level
    check (xdist workers only)."""
    import os
    import signal


    def pytest_configure(config):
        if not hasattr(config, "workerinput"):
            return
        from drafter_contracts.engine import Engine

        real, real_dataset = Engine._run, Engine.dataset_check

        def run(self, w, check):
            if check == "turns_well_formed" and w.shard.id.startswith(os.environ.get("KILL_SHARD", "-")):
                os.kill(os.getpid(), signal.SIGKILL)
            return real(self, w, check)

        def dataset_check(self, check):
            if check == os.environ.get("KILL_CHECK"):
                os.kill(os.getpid(), signal.SIGKILL)
            return real_dataset(self, check)

        Engine._run, Engine.dataset_check = run, dataset_check
''')


def _shards(n: int = 4, size: int = 100) -> list[Shard]:
    return [Shard(i, i * size, (i + 1) * size) for i in range(n)]


def test_coverage_names_lost_refused_and_errored_shards():
    cov = Coverage(_shards())
    node = "suite.py::test_row_contracts[{}]"
    cov.expect(node.format(s.id) for s in _shards())
    cov.note(node.format("shard-00000[0:100]"), "call", "passed", True, None, None)
    cov.note(node.format("shard-00001[100:200]"), "???", "failed", False, None,
             "worker 'gw1' crashed while running 'suite.py::test_row_contracts[shard-00001[100:200]]'")
    cov.note(node.format("shard-00002[200:300]"), "call", "skipped", True, "invalid Arrow buffers in x rows 200..249", None)
    cov.note(node.format("shard-00003[300:400]"), "setup", "failed", False, None, "fixture 'x' not found\nmore")
    got = {u["shard"]: u["reason"] for u in cov.unchecked()}
    assert list(got) == ["shard-00001[100:200]", "shard-00002[200:300]", "shard-00003[300:400]"]
    assert got["shard-00001[100:200]"].startswith("its worker died while checking it (worker 'gw1' crashed")
    assert got["shard-00002[200:300]"] == "not read: invalid Arrow buffers in x rows 200..249"
    assert got["shard-00003[300:400]"] == "its test errored before reporting (fixture 'x' not found)"
    result = cov.result()
    assert not result.ok and result.rows_checked == 100 and result.rows_violating == 300
    assert "3 of 4 shards (300 of 400 rows) were not checked" in result.message and "-k shard-00001" in result.message


def test_shards_not_collected_are_not_counted():
    """-k shard-00000 or --split K/N collect some shards only: the others are not 'lost'."""
    cov = Coverage(_shards())
    cov.expect(["suite.py::test_row_contracts[shard-00000[0:100]]", "suite.py::test_schema"])
    cov.note("suite.py::test_row_contracts[shard-00000[0:100]]", "call", "passed", True, None, None)
    assert cov.unchecked() == [] and cov.result().ok


def test_a_changed_file_is_named(tmp_path):
    (tmp_path / "state.json").write_text(json.dumps({"_fingerprint": "a"}))
    data = tmp_path / "data-00000-of-00001.arrow"
    data.write_bytes(b"x" * 10)
    before = file_state(tmp_path, [data])
    assert unchanged_result(before, file_state(tmp_path, [data]), 10).ok
    data.write_bytes(b"x" * 11)
    (tmp_path / "state.json").write_text(json.dumps({"_fingerprint": "b"}))
    msg = unchanged_result(before, file_state(tmp_path, [data]), 10).message
    assert "data-00000-of-00001.arrow changed size (10 -> 11 bytes)" in msg
    assert "state.json's _fingerprint a -> b (the dataset was saved again)" in msg


def test_a_worker_killed_mid_shard_leaves_every_row_contract_incomplete(tmp_path, clean_dataset, tokenizer_dir):
    (tmp_path / "killer.py").write_text(KILLER)
    report = tmp_path / "reports"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
           "KILL_SHARD": "shard-00002"}
    before = tree_hashes(clean_dataset)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "killer", "-p", "no:cacheprovider",
                           f"--dataset-path={clean_dataset}", f"--tokenizer={tokenizer_dir}", "--shard-size=400",
                           "--contract=qwen3.6-dflash", "--expected-count=2000", f"--report-dir={report}", "-n", "2"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "crashed while running" in proc.stdout  # pytest-xdist saw the SIGKILL
    summary = json.loads((report / "summary.json").read_text())
    assert validate_summary(summary) == []
    assert [u["shard"] for u in summary["unchecked"]] == ["shard-00002[800:1200]"]
    assert summary["unchecked"][0]["reason"].startswith("its worker died while checking it")
    checks = summary["checks"]
    assert checks["all_shards_checked"]["verdict"] == "fail" and checks["all_shards_checked"]["rows_violating"] == 400
    for name in SHARD_CHECKS:  # held on 1,600 rows, but never "pass": 400 rows were not checked
        if name in NEEDS_A_FILE:  # nothing to check it against, on any shard: skipped, not incomplete
            assert checks[name]["verdict"] == "skip" and checks[name]["skip_reasons"], name
            continue
        assert checks[name]["verdict"] == "incomplete", (name, checks[name]["verdict"])
        assert checks[name]["unchecked"] == ["shard-00002[800:1200]"]
    assert checks["mask_on_assistant_spans"]["rows_checked"] == 1600
    assert "NOT CHECKED shard-00002[800:1200] (rows 800..1,199): its worker died" in proc.stdout
    assert "INCOMPLETE mask_on_assistant_spans" in proc.stdout and "PASS mask_on_assistant_spans" not in proc.stdout
    junit = (report / "junit.xml").read_text()
    assert 'name="test_all_shards_checked"' in junit and "shard-00002[800:1200]" in junit
    page = (report / "report.html").read_text()
    assert 'data-verdict="incomplete"' in page and 'id="unchecked"' in page and "shard-00002[800:1200]" in page
    assert tree_hashes(clean_dataset) == before


def test_a_worker_killed_in_a_dataset_level_test_leaves_that_contract_incomplete(tmp_path, clean_dataset, tokenizer_dir):
    """The tokenizer drift test loads the tokenizer (~0.7 GB): the likeliest victim of an OOM kill. Its
    contract must not vanish from the reports while everything else passes."""
    (tmp_path / "killer.py").write_text(KILLER)
    report = tmp_path / "reports"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
           "KILL_CHECK": "tokenizer_drift"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "killer", "-p", "no:cacheprovider",
                           f"--dataset-path={clean_dataset}", f"--tokenizer={tokenizer_dir}", "--shard-size=1000",
                           "--expected-count=2000", f"--report-dir={report}", "-n", "2"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    summary = json.loads((report / "summary.json").read_text())
    assert validate_summary(summary) == []
    drift = summary["checks"]["tokenizer_drift"]
    assert drift["verdict"] == "incomplete" and "its worker died while running it" in drift["messages"][-1]
    assert [u["check"] for u in summary["unreported"]] == ["tokenizer_drift"] and summary["unchecked"] == []
    assert summary["checks"]["all_shards_checked"]["verdict"] == "fail"
    assert "NO VERDICT test_tokenizer_drift: its worker died" in proc.stdout
    assert "test_tokenizer_drift" in (report / "report.html").read_text()


@pytest.fixture
def copy_of_small(tmp_path) -> Path:
    folder = tmp_path / "ds"
    shutil.copytree(small_dataset_dir(), folder)
    return folder


def _rewrite_during(monkeypatch, at_shard: int, change) -> None:
    real = Engine._run
    done = []

    def run(self, w, check):
        if w.shard.index == at_shard and not done:
            done.append(change(self.dataset.path))
        return real(self, w, check)

    monkeypatch.setattr(Engine, "_run", run)


def test_a_dataset_saved_again_during_the_run_fails(pytester, copy_of_small, tokenizer_dir, monkeypatch):
    """state.json gets a new _fingerprint while shard 0 is checked (as a second save_to_disk writes it)."""
    def resave(folder: Path) -> None:
        doc = json.loads((folder / "state.json").read_text())
        doc["_fingerprint"] = "0123456789abcdef"
        (folder / "state.json").write_text(json.dumps(doc))

    _rewrite_during(monkeypatch, 0, resave)
    result = pytester.runpytest_inprocess(f"--dataset-path={copy_of_small}", f"--tokenizer={tokenizer_dir}",
                                          "--shard-size=100", "--report-dir=reports", "-p", "no:cacheprovider")
    assert result.ret == 1
    summary = json.loads((pytester.path / "reports" / "summary.json").read_text())
    changed = summary["checks"]["dataset_unchanged"]
    assert changed["verdict"] == "fail" and "state.json's _fingerprint" in changed["messages"][0]
    # the shards opened after the change are not read: their verdicts would mix two datasets
    assert [u["shard"] for u in summary["unchecked"]] == ["shard-00001[100:200]", "shard-00002[200:300]"]
    assert all("the dataset's files changed during the run" in u["reason"] for u in summary["unchecked"])
    assert summary["checks"]["min_supervised"]["verdict"] == "incomplete"
    assert "FAIL dataset_unchanged" in result.stdout.str()


def test_a_data_file_replaced_during_the_run_fails(pytester, copy_of_small, tokenizer_dir, monkeypatch):
    """A new file renamed over an Arrow file (same bytes, new inode): the run cannot vouch for it."""
    def replace(folder: Path) -> None:
        target = folder / "data-00001-of-00002.arrow"
        tmp = folder.parent / "new.arrow"
        shutil.copyfile(target, tmp)
        os.replace(tmp, target)

    _rewrite_during(monkeypatch, 1, replace)
    result = pytester.runpytest_inprocess(f"--dataset-path={copy_of_small}", f"--tokenizer={tokenizer_dir}",
                                          "--shard-size=100", "--report-dir=reports", "-p", "no:cacheprovider")
    assert result.ret == 1
    summary = json.loads((pytester.path / "reports" / "summary.json").read_text())
    assert "data-00001-of-00002.arrow was replaced" in summary["checks"]["dataset_unchanged"]["messages"][0]
    assert [u["shard"] for u in summary["unchecked"]] == ["shard-00002[200:300]"]


def test_a_row_over_max_shard_tokens_is_refused_with_a_clear_line(pytester, clean_dataset, tokenizer_dir):
    """One enormous row (30 rows glued together) cannot be split without changing what it means: its
    shard is not read (a worker's memory stays bounded by --max-shard-tokens), and the run says so."""
    from datasets import load_from_disk

    from drafter_testkit.generate import rows_table, save_table

    ds = load_from_disk(str(clean_dataset)).select(range(60))
    rows = [(list(r["input_ids"]), list(r["loss_mask"])) for r in ds]
    giant = (sum((ids for ids, _ in rows[:30]), []), sum((m for _, m in rows[:30]), []))
    folder = pytester.path / "ds"
    save_table(rows_table([*rows[30:45], giant, *rows[45:]]), folder, 1)
    tokens = len(giant[0])
    assert tokens > 5000
    result = pytester.runpytest_inprocess(f"--dataset-path={folder}", f"--tokenizer={tokenizer_dir}",
                                          "--max-shard-tokens=5000", "--report-dir=reports", "-p", "no:cacheprovider")
    assert result.ret == 1
    summary = json.loads((pytester.path / "reports" / "summary.json").read_text())
    refused = [u for u in summary["unchecked"] if u["rows"] == [15, 16]]
    assert len(refused) == 1 and len(summary["unchecked"]) == 1
    assert refused[0]["reason"] == (f"not read: row 15 holds {tokens:,} tokens, more than max_shard_tokens (5,000) allows "
                                    f"in a shard (the bound on a worker's memory); pass --max-shard-tokens {tokens} to "
                                    "check it anyway")
    assert summary["checks"]["seq_len_bounds"]["verdict"] == "incomplete"
    assert summary["figures"]["rows_checked"] == 30
    assert summary["figures"]["shards_covered"] == summary["figures"]["shards_total"] - 1
    assert "NOT CHECKED" in result.stdout.str() and f"row 15 holds {tokens:,} tokens" in result.stdout.str()
