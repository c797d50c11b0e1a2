"""Baselines as a team uses them after an upgrade: save on known-good data, compare later.

A saved baseline compared with the same data passes; with 5% of the rows dropped,
with a changed tokenizer, or with the rows re-tokenized under the think-block mask
regression (which every per-row contract accepts), the baseline contract fails -
exit code 1, a readable diff in the terminal, summary.json, report.html and JUnit.
A bad baseline file is a one-line usage error (exit 4).
"""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from drafter_contracts.contract import load_contract, resolve_contract_path
from drafter_contracts.errors import UsageProblem
from drafter_testkit.mutants import MUTANTS
from drafter_testkit.upgrades import changed_tokenizer, reasoning_unmasked
from drafter_contracts.checks import baseline as bl
from drafter_contracts.report import baseline as baseline_file
from helpers import run_pytest

ROWS = 2000


def run(cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    return run_pytest(cwd, "--shard-size=400", "-n", "0", *args)


@pytest.fixture(scope="module")
def saved(tmp_path_factory, clean_dataset, tokenizer_dir) -> Path:
    cwd = tmp_path_factory.mktemp("baseline-save")
    target = cwd / "known-good" / "baseline.json"
    proc, summary = run(cwd, f"--dataset-path={clean_dataset}", "--contract=qwen3.6-dflash", f"--tokenizer={tokenizer_dir}",
                        f"--expected-count={ROWS}", f"--save-baseline={target}")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert f"{target} (baseline saved)" in proc.stdout
    doc = json.loads(target.read_text())
    assert doc["kind"] == baseline_file.KIND and doc["profile"] == summary["profile"]
    assert doc["profile"]["rows"] == ROWS and len(doc["profile"]["top_supervised_tokens"]) == 100
    return target


def verdicts(summary: dict) -> dict[str, str]:
    return {name: c["verdict"] for name, c in summary["checks"].items()}


def baseline_failure(proc: subprocess.CompletedProcess, summary: dict, also: frozenset[str] = frozenset()) -> list[str]:
    """Checks that the baseline contract (and only ``also`` besides) failed, with its diff in the terminal;
    returns its FAIL lines."""
    assert proc.returncode == 1, proc.stdout[-3000:]
    v = verdicts(summary)
    assert v.pop("baseline") == "fail" and {k for k, x in v.items() if x == "fail"} == set(also), v
    details = summary["checks"]["baseline"]["details"]
    fails = [line for line in details if line.startswith("FAIL")]
    assert fails and all(line in proc.stdout for line in fails)  # the diff is in the terminal
    assert "FAILED" in proc.stdout and "::test_baseline" in proc.stdout
    return fails


def junit_baseline(cwd: Path) -> ET.Element:
    root = ET.parse(cwd / "reports" / "junit.xml").getroot()
    return next(tc for tc in root.iter("testcase") if tc.get("name") == "test_baseline")


def test_same_data_passes(tmp_path, saved, clean_dataset, tokenizer_dir):
    proc, summary = run(tmp_path, f"--dataset-path={clean_dataset}", "--contract=qwen3.6-dflash", f"--tokenizer={tokenizer_dir}",
                        f"--expected-count={ROWS}", f"--baseline={saved}")
    assert proc.returncode == 0, proc.stdout[-3000:]
    check = summary["checks"]["baseline"]
    assert check["verdict"] == "pass" and summary["exit_status"] == 0
    assert len(check["details"]) == 9 and all(line.startswith("ok") for line in check["details"][1:])
    assert "PASS baseline" in proc.stdout
    assert junit_baseline(tmp_path).find("failure") is None


def test_five_percent_rows_dropped(tmp_path, saved, clean_dataset, tokenizer_dir):
    MUTANTS["row_count_drop_5pct"](clean_dataset, tmp_path / "data", 0)
    # The contract is told the new count, so only the baseline notices the loss.
    proc, summary = run(tmp_path, f"--dataset-path={tmp_path / 'data'}", "--contract=qwen3.6-dflash", f"--tokenizer={tokenizer_dir}",
                        "--expected-count=1900", f"--baseline={saved}")
    fails = baseline_failure(proc, summary)
    assert fails == ["FAIL rows: 2,000 -> 1,900 (-100, -5.00%; allowed ± 1%)"]
    failure = junit_baseline(tmp_path).find("failure")
    assert failure is not None and "rows: 2,000 -> 1,900" in failure.get("message", "") + (failure.text or "")
    page = (tmp_path / "reports" / "report.html").read_text()
    assert "FAIL rows: 2,000 -&gt; 1,900" in page


def test_tokenizer_changed(tmp_path, saved, clean_dataset, tokenizer_dir):
    other = changed_tokenizer(tokenizer_dir, tmp_path / "tokenizer")
    proc, summary = run(tmp_path, f"--dataset-path={clean_dataset}", "--contract=qwen3.6-dflash", f"--tokenizer={other}",
                        f"--expected-count={ROWS}", f"--baseline={saved}")
    fails = baseline_failure(proc, summary)
    assert len(fails) == 1
    assert fails[0].startswith("FAIL tokenizer (vocabulary, merges, special tokens): changed ")
    assert "248,077 -> 248,078 ids" in fails[0] and str(other) in fails[0]


def test_mask_bug_after_retokenizing(tmp_path, saved, clean_dataset, tokenizer_dir):
    """The think block left out of loss_mask: the baseline shows it as a role-share diff, and the default
    contract's completeness policy catches it row by row; without that policy only the baseline does."""
    cleared = reasoning_unmasked(clean_dataset, tmp_path / "data")
    assert cleared > 0
    proc, summary = run(tmp_path, f"--dataset-path={tmp_path / 'data'}", "--contract=qwen3.6-dflash", f"--tokenizer={tokenizer_dir}",
                        f"--expected-count={ROWS}", f"--baseline={saved}")
    fails = baseline_failure(proc, summary, also=frozenset({"mask_covers_assistant_spans"}))
    text = "\n".join(fails)
    assert "FAIL supervised tokens by role" in text and "reasoning 9.91% -> 0.00%" in text
    assert "FAIL supervised share per row" in text and "all tokens 71.33% -> " in text
    assert summary["figures"]["supervised_tokens"] == 470_636 - cleared


@pytest.mark.parametrize("content, says", [
    (None, "no such file"),
    ("{not json", "not valid JSON"),
    ('{"kind": "something-else"}', "not a drafter-contracts baseline"),
    ('{"kind": "drafter-contracts-baseline", "version": 99}', "baseline version 99"),
    ('{"kind": "drafter-contracts-baseline", "version": 1, "profile": {"rows": 3}}', "profile is missing"),
])
def test_bad_baseline_file_is_a_usage_error(tmp_path, usage_run, clean_dataset, tokenizer_dir, content, says):
    path = tmp_path / "baseline.json"
    if content is not None:
        path.write_text(content)
    run = usage_run(f"--dataset-path={clean_dataset}", "--contract=qwen3.6-dflash", f"--tokenizer={tokenizer_dir}",
                    f"--baseline={path}")
    assert run.ret == 4
    assert len(run.errors) == 1 and run.errors[0].startswith(f"ERROR: --baseline {path}: ") and says in run.errors[0], run.output
    assert "Traceback" not in run.output


def test_save_baseline_inside_dataset_is_refused(usage_run, clean_dataset, tokenizer_dir):
    run = usage_run(f"--dataset-path={clean_dataset}", "--contract=qwen3.6-dflash", f"--tokenizer={tokenizer_dir}",
                    f"--save-baseline={clean_dataset / 'baseline.json'}")
    assert run.ret == 4 and len(run.errors) == 1 and "read-only" in run.errors[0]
    assert not (clean_dataset / "baseline.json").exists()


def test_thresholds_come_from_the_contract(tmp_path):
    src = resolve_contract_path("qwen3.6-dflash").read_text()
    path = tmp_path / "c.toml"
    path.write_text(src + '\n[baseline]\ncount_tolerance = "10%"\nmax_seq_len_ks = 0.2\ntop_k = 5\nfail_on_fingerprint = false\n')
    policy = load_contract(path).baseline
    assert (str(policy.count_tolerance), policy.max_seq_len_ks, policy.top_k, policy.fail_on_fingerprint) == ("10%", 0.2, 5, False)
    path.write_text(src + "\n[baseline]\nmax_token_freq_tv = 3\n")
    with pytest.raises(UsageProblem, match=r"\[baseline\] max_token_freq_tv must be between 0 and 1"):
        load_contract(path)
    path.write_text(src + "\n[baseline]\nmax_drift = 1\n")
    with pytest.raises(UsageProblem, match="unknown key 'max_drift' in \\[baseline\\]"):
        load_contract(path)


def test_distances():
    assert bl.ks_distance([1, 1, 0], [1, 1, 0]) == 0.0
    assert bl.ks_distance([2, 0, 0], [0, 0, 2]) == 1.0
    assert bl.ks_distance([1, 1], [2, 0]) == 0.5
    top = [{"id": 5, "count": 50}, {"id": 7, "count": 30}]
    tv, movers = bl.token_shift(top, 100, np.array([5, 7, 9]), np.array([50, 30, 20]))
    assert tv == pytest.approx(0.0) and movers[0][1] == movers[0][2]
    tv, movers = bl.token_shift(top, 100, np.array([7, 9]), np.array([30, 70]))
    assert tv == pytest.approx(0.5) and movers[0][0] == 5  # id 5 vanished: half the mass moved to "other"


def test_compare_without_loss_mask_counts_only_what_exists():
    """Stats of a dataset without loss_mask: the mask-based aspects say "not compared", never fail on None."""
    from drafter_contracts.contract.file import BaselinePolicy
    from drafter_contracts.checks.stats import seq_len_histogram
    from drafter_contracts.report.reducer import dataset_profile

    lengths = np.array([30, 40, 50, 400])
    shard = {"shard": 0, "rows": 4, "rows_checked": 4, "rows_excluded": 0, "tokens": int(lengths.sum()),
             "supervised_tokens": None, "seq_len_hist": seq_len_histogram(lengths)}
    prof = dataset_profile([shard])
    tok = {"name": None, "vocab_fingerprint": None, "template_fingerprint": None}
    doc = {"profile": prof, "tokenizer": tok}
    same = bl.compare(doc, doc, None, BaselinePolicy())
    assert same.failures == [] and "not compared" in "\n".join(same.text())
    longer = dataset_profile([{**shard, "seq_len_hist": seq_len_histogram(lengths * 2)}])
    moved = bl.compare(doc, {"profile": longer, "tokenizer": tok}, None, BaselinePolicy())
    assert len(moved.failures) == 1 and moved.failures[0].startswith("seq_len distribution: KS distance 0.75 ")  # 3 of 4 rows below 60
