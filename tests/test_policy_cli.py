"""Mask policies the way users meet them: `pytest --dataset-path=DIR --contract NAME --mask-policy KEY=VALUE`."""

from __future__ import annotations

from pathlib import Path

import pytest

from drafter_contracts.engine import CONTENT_CHECKS
from drafter_testkit.producers import convention_dataset_dir
from helpers import NEEDS_A_FILE, run_inprocess

MAX_LEN = 2048


@pytest.fixture(scope="session")
def per_turn() -> Path:
    return convention_dataset_dir("speculators-per-turn", 300, 0, MAX_LEN)


@pytest.fixture(scope="session")
def regex() -> Path:
    return convention_dataset_dir("speculators-regex", 300, 0, MAX_LEN)


def run(pytester, *args: str) -> tuple[object, dict]:
    return run_inprocess(pytester, *args, f"--max-len={MAX_LEN}")


def test_per_turn_rows_pass_their_contract(pytester, per_turn, tokenizer_dir):
    result, summary = run(pytester, f"--dataset-path={per_turn}", f"--tokenizer={tokenizer_dir}",
                          "--contract=speculators-per-turn")
    assert result.ret == 0, result.stdout.str()[-3000:]
    verdicts = {k: c["verdict"] for k, c in summary["checks"].items()}
    assert verdicts.pop("row_count") == "skip"  # the convention contracts declare no row count
    assert "fail" not in verdicts.values() and verdicts["mask_covers_assistant_spans"] == "pass"
    assert {k for k, v in verdicts.items() if v != "pass"} <= {*CONTENT_CHECKS, *NEEDS_A_FILE}, verdicts
    assert summary["contract"]["mask"]["turns"] == "last"
    by_role = summary["figures"]["supervised_role_tokens"]
    assert sum(by_role.values()) == summary["figures"]["supervised_tokens"]
    assert by_role["assistant_end"] == by_role["after_assistant_end"] > 400  # one <|im_end|>\n per row (a few cut)
    assert "header" not in by_role and "user" not in by_role


def test_per_turn_rows_fail_the_default_contract_with_a_decoded_row(pytester, per_turn, tokenizer_dir):
    result, summary = run(pytester, f"--dataset-path={per_turn}", "--contract=qwen3.6-dflash", f"--tokenizer={tokenizer_dir}",
                          f"--expected-count={summary_rows(per_turn)}")
    assert result.ret == 1
    failed = {k for k, c in summary["checks"].items() if c["verdict"] == "fail"}
    assert failed == {"mask_on_assistant_spans", "mask_covers_assistant_spans"}
    out = result.stdout.str()
    assert "assistant end-of-turn token supervised (policy: end_of_turn = false)" in out
    assert "‹assistant_end›▶⟦<|im_end|>⟧" in out  # the offending token, its role and its mask state


def test_mask_policy_option_overrides_the_contract(pytester, per_turn, tokenizer_dir):
    """The default contract plus the per-turn keys on the command line accepts per-turn rows."""
    keys = ("end_of_turn=true", "newline_after_end=true", "turns=last", "completeness=last", "prompt_context=last")
    args = [f"--mask-policy={k}" for k in keys]
    result, summary = run(pytester, f"--dataset-path={per_turn}", "--contract=qwen3.6-dflash", f"--tokenizer={tokenizer_dir}",
                          f"--expected-count={summary_rows(per_turn)}", *args)
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert summary["contract"]["mask"]["completeness"] == "last"


def summary_rows(path: Path) -> int:
    import datasets

    return datasets.load_from_disk(str(path)).num_rows


def test_completeness_off_is_a_visible_skip(pytester, regex, tokenizer_dir):
    result, summary = run(pytester, f"--dataset-path={regex}", f"--tokenizer={tokenizer_dir}",
                          "--contract=speculators-regex", "--mask-policy=completeness=off")
    assert result.ret == 0
    check = summary["checks"]["mask_covers_assistant_spans"]
    assert check["verdict"] == "skip" and "completeness" in check["skip_reasons"][0]
    assert "SKIP mask_covers_assistant_spans" in result.stdout.str()


@pytest.mark.parametrize("arg, fragment", [
    ("--mask-policy=completeness", "expected KEY=VALUE"),
    ("--mask-policy=colour=red", "unknown key 'colour'"),
    ("--mask-policy=turns=first", "turns must be one of 'all', 'last'"),
])
def test_bad_mask_policy_is_one_line_and_exit_4(usage_run, regex, arg, fragment):
    run = usage_run(f"--dataset-path={regex}", "--contract=qwen3.6-dflash", arg, "-n", "0")
    assert run.ret == 4, run.output
    assert "Traceback" not in run.output and len(run.errors) == 1 and fragment in run.errors[0], run.output
