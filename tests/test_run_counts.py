"""What a run says about itself: its counts add up, a contract's count names its unit, workers never outnumber
shards, the help lists what exists, and a content warning points at the token it is about."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from drafter_testkit.usage_cases import tiny_dataset

from helpers import read_summary, run_inprocess


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory, clean_dataset, tokenizer_dir):
    """One real run of the clean fixture over three shards with two workers: its output and summary.json."""
    cwd = tmp_path_factory.mktemp("counts")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--dataset-path={clean_dataset}",
                           f"--tokenizer={tokenizer_dir}", "--shard-size=700", "-n", "2", "--report-dir=reports"],
                          cwd=cwd, capture_output=True, text=True, timeout=600)
    return proc, read_summary(cwd / "reports")


def test_the_counts_add_up_in_one_line(clean_run) -> None:
    proc, summary = clean_run
    assert proc.returncode == 0, proc.stdout[-3000:]
    n = summary["counts"]
    assert n["contracts"] == len(summary["checks"]) == n["per_row"] + n["dataset_level"] + n["whole_dataset"]
    assert n["shard_tests"] == 3
    outcome = re.search(r"=+ (.*) in [\d.]+s", proc.stdout).group(1)
    results = sum(int(k) for k in re.findall(r"(\d+) (?:passed|failed|skipped|xfailed|error)", outcome))
    assert results == n["pytest_results"] == n["tests_collected"] + n["verdicts_reported"]
    assert f"{n['tests_collected']} items" in proc.stdout  # xdist's "2 workers [N items]"
    line = next(x for x in proc.stdout.splitlines() if x.startswith("counts "))
    assert f"{n['contracts']} contracts = {n['per_row']} per-row" in line and f"= {results} results" in line
    assert f"of {n['contracts']} contracts violated" in proc.stdout  # the verdict line counts the same contracts
    kept = n["whole_dataset"] - n["verdicts_reported"]
    assert (f"({kept} whole-dataset skip" in line) == (kept > 0), line


def test_the_counts_line_names_whole_dataset_verdicts_that_are_no_test() -> None:
    from drafter_contracts.report.summary import count_line

    n = {"contracts": 27, "per_row": 14, "dataset_level": 6, "whole_dataset": 7, "shard_tests": 1,
         "tests_collected": 7, "verdicts_reported": 6, "pytest_results": 13}
    assert count_line(n).endswith("= 13 results (1 whole-dataset skip in the verdict line and summary.json alone: "
                                  "nothing to check, no test)")
    assert count_line({**n, "verdicts_reported": 7, "pytest_results": 14}).endswith("= 14 results")


def test_ids_and_columns_are_not_counted_as_rows(clean_run) -> None:
    proc, summary = clean_run
    checks = summary["checks"]
    assert checks["schema"]["unit"] == "columns" and checks["schema"]["rows_checked"] == 3
    assert re.search(r"PASS schema +3 columns$", proc.stdout, re.M)
    assert checks["ids_known"]["unit"] == "rows"
    if "vocab_mapping_consistent" in checks and checks["vocab_mapping_consistent"]["verdict"] == "pass":
        assert checks["vocab_mapping_consistent"]["unit"] == "draft ids"
        assert re.search(r"PASS vocab_mapping_consistent +[\d,]+ draft ids$", proc.stdout, re.M)


def test_placeholder_warning_points_at_the_reply_not_the_turn(clean_run, vocab) -> None:
    _, summary = clean_run
    c = summary["checks"]["placeholder_replies"]
    placeholder = [e for e in c["examples"] if e["reason"].startswith("placeholder") and "excerpt" in e]
    assert placeholder, c
    for e in placeholder:
        marked = [s for s in e["excerpt"]["segments"] if s["start"] <= e["position"] < s["end"]]
        assert marked and marked[0]["role"] == "assistant", marked  # the reply's text, not <think> or the header
        assert "OK" in marked[0]["text"], marked


def test_explicit_workers_are_capped_at_the_shards(pytester, tmp_path) -> None:
    data = tiny_dataset(tmp_path / "tiny")  # three rows
    one, _ = run_inprocess(pytester, f"--dataset-path={data}", "-n", "3", "--skip-contract=tokenizer")
    out = one.stdout.str()
    assert "-n 3 capped: 1 shard to check, checked in this process" in out, out[-2000:]
    assert "created:" not in out
    three, _ = run_inprocess(pytester, f"--dataset-path={data}", "--shard-size=1", "-n", "5",
                             "--skip-contract=tokenizer")
    out = three.stdout.str()
    assert "-n 5 capped: 3 shards to check, 3 workers started" in out, out[-2000:]
    assert "created: 3/3 workers" in out
    asked, _ = run_inprocess(pytester, f"--dataset-path={data}", "--shard-size=1", "-n", "2",
                             "--skip-contract=tokenizer")
    assert "-n 2 capped" not in asked.stdout.str() and "created: 2/2 workers" in asked.stdout.str()


def test_help_lists_every_builtin_from_its_registry(tmp_path: Path) -> None:
    from drafter_contracts.checks.registry import specs
    from drafter_contracts.contract import builtin_contracts
    from drafter_contracts.spans.learn.resolve import AUTO, profile_names

    proc = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, env={**__import__("os").environ,
                                                                             "COLUMNS": "2000"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = {m.group(1): m.group(2) for m in re.finditer(r"^\s+(--[\w-]+)\S*\s+(.*)$", proc.stdout, re.M)}
    listed = lambda option: {w.rstrip(".") for w in re.split(r"[\s,;:()]+", lines[option])}  # noqa: E731
    assert set(builtin_contracts()) <= listed("--contract")
    assert {n for n in profile_names() if n != AUTO} <= listed("--template-profile")
    assert set(specs()) | {"tokenizer", "mask"} <= listed("--skip-contract")


def test_the_entry_point_stays_light() -> None:
    """The listings are read when help is printed: importing the entry point imports no numpy."""
    code = "import sys, drafter_contracts.run.options; print('numpy' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
