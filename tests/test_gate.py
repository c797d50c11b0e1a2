"""The gate cannot pass by accident: the contract suite always runs with --dataset-path, a run that
checked no contract fails with one line, every verdict reaches every report, and the last line says it.

All in-process (pytester): the plugin's hooks are the same as in a subprocess, and a run costs
a fraction of a second instead of a Python start-up with torch and transformers.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from drafter_contracts.contract import builtin_contracts
from helpers import read_summary

VERDICT = re.compile(r"^drafter-contracts: (\d+) of (\d+) contracts violated on ([\d,]+) rows.* \(exit (\d+)\)$")
NOTHING = "drafter-contracts: no contract was checked"


@pytest.fixture
def args(clean_dataset, tokenizer_dir) -> tuple[str, ...]:
    return (f"--dataset-path={clean_dataset}", "--contract=qwen3.6-dflash", f"--tokenizer={tokenizer_dir}",
            "--expected-count=2000", "--report-dir=reports")


def last_line(result) -> str:
    return [line for line in result.stdout.str().splitlines() if line.strip()][-1]


def summary(pytester) -> dict:
    return read_summary(pytester.path / "reports")


def test_a_test_path_of_ones_own_still_runs_the_contracts(pytester, args):
    pytester.makepyfile(test_mine="def test_mine():\n    pass\n")
    result = pytester.runpytest_inprocess("test_mine.py", *args, "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()[-3000:]
    out = result.stdout.str()
    assert "test_row_contracts" in out or summary(pytester)["figures"]["rows"] == 2000
    assert summary(pytester)["figures"]["complete"] and summary(pytester)["figures"]["rows"] == 2000
    # test_mine + arrow_integrity, schema, row_count, not_empty, drift, the shard, duplicates, convention_losses,
    # all_shards_checked, dataset_unchanged; the three draft-vocabulary contracts skip (no d2t/t2d here)
    result.assert_outcomes(passed=11, skipped=3)
    assert VERDICT.match(last_line(result)), last_line(result)


def test_a_folder_holding_only_ones_own_tests_still_runs_the_contracts(pytester, args):
    pytester.makepyfile(test_mine="def test_mine():\n    pass\n")
    result = pytester.runpytest_inprocess(".", *args, "-p", "no:cacheprovider")
    assert result.ret == 0
    assert summary(pytester)["figures"]["rows"] == 2000


def test_a_test_path_cannot_hide_a_broken_dataset(pytester, clean_dataset, tokenizer_dir):
    pytester.makepyfile(test_mine="def test_mine():\n    pass\n")
    result = pytester.runpytest_inprocess("test_mine.py", f"--dataset-path={clean_dataset}", "--contract=qwen3.6-dflash",
                                          f"--tokenizer={tokenizer_dir}", "--report-dir=reports", "-p", "no:cacheprovider")
    assert result.ret == 1  # the example contract pins 913,786 rows: row_count fails on 2,000
    m = VERDICT.match(last_line(result))
    assert m and m.group(1) == "1" and m.group(4) == "1", last_line(result)


def test_deselecting_every_contract_is_not_a_pass(pytester, args):
    pytester.makepyfile(test_mine="def test_mine():\n    pass\n")
    result = pytester.runpytest_inprocess("test_mine.py", *args, "-k", "mine", "-p", "no:cacheprovider")
    assert result.ret == 5, result.stdout.str()[-2000:]
    assert last_line(result).startswith(NOTHING) and last_line(result).endswith("(exit 5)")


def test_k_matching_nothing_at_all(pytester, args):
    result = pytester.runpytest_inprocess(*args, "-k", "no_such_contract", "-p", "no:cacheprovider")
    assert result.ret == 5
    assert last_line(result).startswith(NOTHING)


def test_last_failed_after_a_failing_test_of_ones_own(pytester, args):
    """--lf reruns only what failed last time: a user's test, not one contract. That is exit 5, not a pass."""
    pytester.makepyfile(test_mine="def test_mine():\n    assert False\n")
    assert pytester.runpytest_inprocess("test_mine.py", *args).ret == 1
    pytester.makepyfile(test_mine="def test_mine():\n    pass\n")  # fixed
    result = pytester.runpytest_inprocess("test_mine.py", *args, "--lf")
    assert result.ret == 5, result.stdout.str()[-2000:]
    assert last_line(result).startswith(NOTHING)
    assert "1 passed" in result.stdout.str()


def test_a_collection_error_is_said_too(pytester, args):
    pytester.makepyfile(test_mine="def test_mine(:\n")
    result = pytester.runpytest_inprocess("test_mine.py", *args, "-p", "no:cacheprovider")
    assert result.ret not in (0,)
    assert last_line(result).startswith(NOTHING), result.stdout.str()[-2000:]


def test_only_one_contract_selected_still_counts(pytester, args):
    result = pytester.runpytest_inprocess(*args, "-k", "schema", "-p", "no:cacheprovider")
    assert result.ret == 0
    assert VERDICT.match(last_line(result))


def test_strict_duplicates_reach_junit_terminal_and_summary(pytester, clean_dataset, tokenizer_dir, tmp_path):
    """The fixture holds 2 exact duplicate rows: under [content] strict they fail, in every report."""
    strict = tmp_path / "strict.toml"
    strict.write_text(builtin_contracts()["qwen3.6-dflash"].read_text().replace("strict = false", "strict = true"))
    result = pytester.runpytest_inprocess(f"--dataset-path={clean_dataset}", f"--contract={strict}",
                                          f"--tokenizer={tokenizer_dir}", "--expected-count=2000", "--report-dir=reports",
                                          "-p", "no:cacheprovider")
    assert result.ret == 1
    s = summary(pytester)
    failed = {k for k, c in s["checks"].items() if c["verdict"] == "fail"}
    assert "duplicate_rows" in failed
    cases = {c.get("name"): c for c in ET.parse(pytester.path / "reports" / "junit.xml").iter("testcase")}
    assert "test_duplicate_rows" in cases and cases["test_duplicate_rows"].find("failure") is not None
    # pytest's own count sees it, and so does the last line
    failed_tests = result.parseoutcomes().get("failed", 0)
    assert failed_tests >= 2  # the shard's test (placeholder replies, ...) and the whole-dataset duplicate verdict
    assert "FAILED" in result.stdout.str() and "test_duplicate_rows" in result.stdout.str()
    m = VERDICT.match(last_line(result))
    assert m and int(m.group(1)) == len(failed) and m.group(4) == "1"


def test_report_only_duplicates_pass_in_junit(pytester, args):
    result = pytester.runpytest_inprocess(*args, "-p", "no:cacheprovider")
    assert result.ret == 0
    cases = {c.get("name"): c for c in ET.parse(pytester.path / "reports" / "junit.xml").iter("testcase")}
    assert "test_duplicate_rows" in cases and cases["test_duplicate_rows"].find("failure") is None
    assert summary(pytester)["checks"]["duplicate_rows"]["verdict"] == "warn"
    assert summary(pytester)["checks"]["duplicate_rows"]["global"]
    page = (pytester.path / "reports" / "report.html").read_text()
    assert 'class="bar cap"' in page and "21 at cap" in page  # the fixture's 21 rows at max_len
    cells = re.findall(r'<td class="num" title="[\d.]+ s">([^<]+)</td>', page)
    assert len(cells) == len(summary(pytester)["checks"]) and "0.00" not in cells
    assert any(c.endswith("µs") for c in cells)  # clean shards settle most checks in microseconds


def test_the_verdict_line_comes_after_the_warnings(pytester, args):
    pytester.makepyfile(test_mine="import warnings\ndef test_mine():\n    warnings.warn(UserWarning('look'))\n")
    result = pytester.runpytest_inprocess("test_mine.py", *args, "-p", "no:cacheprovider")
    out = result.stdout.str()
    assert "warnings summary" in out and out.index("warnings summary") < out.index("drafter-contracts: 0 of")
    assert VERDICT.match(last_line(result))


def test_the_generic_default_fits_a_dataset_it_has_never_seen(pytester, tmp_path):
    """No contract and no tokenizer (the contracts that read tokens turned off by name): a small int64 dataset
    with an extra column; the verdicts say what they did."""
    import datasets

    folder = tmp_path / "other"
    datasets.Dataset.from_dict({"input_ids": [[5, 6, 7, 8], [9, 10, 11]], "loss_mask": [[0, 0, 1, 1], [0, 1, 1]],
                                "seq_len": [4, 3], "source": ["a", "b"]}).save_to_disk(str(folder))
    off = ("--skip-contract", "tokenizer")
    result = pytester.runpytest_inprocess(f"--dataset-path={folder}", *off, "--report-dir=reports",
                                          "-p", "no:cacheprovider")
    assert result.ret == 1  # the extra column
    s = summary(pytester)
    assert s["checks"]["schema"]["messages"] == ["extra column source (set allow_extra_columns to accept)"]
    assert s["checks"]["row_count"]["skip_reasons"][0].startswith("not pinned: pass --expected-count or a contract from init")
    assert s["contract"]["max_len"] == 4 and s["contract"]["max_len_source"] == "observed"
    assert "max_len not pinned: the longest row (4 tokens)" in result.stdout.str()
    result = pytester.runpytest_inprocess(f"--dataset-path={folder}", *off, "--allow-extra-columns",
                                          "--report-dir=reports", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert summary(pytester)["checks"]["schema"]["verdict"] == "pass"
    assert {c["verdict"] for c in summary(pytester)["checks"].values()} <= {"pass", "skip", "warn"}
