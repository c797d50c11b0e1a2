"""Fail closed: a run whose required contracts cannot run is never green.

`pytest --dataset-path=DIR` with nothing else on a dataset with a leak must not pass: without a
tokenizer the mask contracts cannot run, so the run stops before any work (exit 4) with one line
that says what cannot be checked and how to point at the tokenizer. A tokenizer saved beside the
dataset is found; turning the contracts off is something the user asks for by name, and the
verdict line then says in words what was not checked.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from drafter_testkit.mutants import mask_user_text
from helpers import run_inprocess, section_lines

TOKEN_CONTRACTS = ("ids_known", "turns_well_formed", "mask_on_assistant_spans", "tokenizer_drift")


@pytest.fixture(scope="module")
def leaky(clean_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    """The fixture dataset with user text supervised in one row (the mutant every mask gate must catch)."""
    out = tmp_path_factory.mktemp("leaky") / "data"
    mutation = mask_user_text(clean_dataset, out, 0)
    return out, mutation.rows


def test_no_tokenizer_stops_before_any_work(pytester: pytest.Pytester, leaky: tuple[Path, list[int]]) -> None:
    folder, _ = leaky
    result, summary = run_inprocess(pytester, f"--dataset-path={folder}", "-n", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1, result.errlines
    for name in TOKEN_CONTRACTS:
        assert name in errors[0]
    assert "--tokenizer" in errors[0] and "--skip-contract tokenizer" in errors[0]
    assert summary is None  # no work, no reports


def test_turned_off_by_name_is_said_on_the_verdict_line(pytester: pytest.Pytester,
                                                         leaky: tuple[Path, list[int]]) -> None:
    folder, _ = leaky
    result, summary = run_inprocess(pytester, f"--dataset-path={folder}", "-n", "0", "--skip-contract", "tokenizer")
    assert result.ret == 0
    verdict = result.outlines[-1]
    assert "NOT CHECKED (turned off by name)" in verdict and "mask_on_assistant_spans" in verdict
    off = summary["not_checked"]["turned_off"]
    assert set(TOKEN_CONTRACTS) <= set(off)
    assert summary["checks"]["mask_on_assistant_spans"]["verdict"] == "skip"


def test_unknown_contract_name_is_a_usage_error(usage_run, clean_dataset: Path) -> None:
    run = usage_run(f"--dataset-path={clean_dataset}", "--skip-contract", "mask_on_assistent_spans")
    assert run.ret == 4
    assert "did you mean 'mask_on_assistant_spans'" in run.errors[0]


def test_tokenizer_beside_the_dataset_is_found_and_the_leak_fails(
        pytester: pytest.Pytester, leaky: tuple[Path, list[int]], tokenizer_dir: Path, tmp_path: Path) -> None:
    folder, rows = leaky
    data = tmp_path / "q36" / "tokenized"
    shutil.copytree(folder, data)
    shutil.copytree(tokenizer_dir, tmp_path / "q36" / "tokenizer")
    result, summary = run_inprocess(pytester, f"--dataset-path={data}", "-n", "0")
    assert result.ret == 1
    assert summary["tokenizer"]["name"].startswith(str(tmp_path / "q36" / "tokenizer"))
    assert "found beside the dataset" in summary["contract"]["tokenizer_how"]
    first = section_lines(result.outlines)[0]  # the reports' first line says where the tokenizer came from
    assert f"tokenizer {summary['tokenizer']['name']} (found beside the dataset" in first
    entry = summary["checks"]["mask_on_assistant_spans"]
    assert entry["verdict"] == "fail" and [e["row"] for e in entry["examples"]] == rows


def test_a_contract_file_requires_more(pytester: pytest.Pytester, clean_dataset: Path, tmp_path: Path) -> None:
    contract = tmp_path / "c.toml"
    generic = (Path(__file__).parents[1] / "src/drafter_contracts/contracts/generic.toml").read_text()
    contract.write_text(generic + '\n[contracts]\nrequired = ["token_freq"]\n')
    result, _ = run_inprocess(pytester, f"--dataset-path={clean_dataset}", f"--contract={contract}",
                              "--tokenizer=builtin:qwen3.6", "-n", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert any("token_freq cannot be checked (no token_freq.pt" in line for line in result.errlines)
    skipped = contract.read_text() + 'skip = ["token_freq"]\n'
    contract.write_text(skipped)
    result, summary = run_inprocess(pytester, f"--dataset-path={clean_dataset}", f"--contract={contract}",
                                    "--tokenizer=builtin:qwen3.6", "-n", "0")
    assert result.ret == 0, result.outlines[-5:]
    assert "NOT CHECKED (turned off by name): token_freq" in result.outlines[-1]


def test_a_required_contract_skipped_during_the_run_is_not_green() -> None:
    """The controller's last guard: a required contract whose verdict is skip turns exit 0 into 1."""
    from drafter_contracts.run.controller import not_checked_clause

    clause = not_checked_clause({"required": {"mask_on_assistant_spans": "no shard"}, "turned_off": {}})
    assert clause == "; REQUIRED BUT NOT CHECKED: mask_on_assistant_spans"


def test_the_gate_requires_every_contract_that_reads_tokens() -> None:
    from drafter_contracts.checks import gate
    from drafter_contracts.contract import load_contract, resolve_contract_path

    contract = load_contract(resolve_contract_path("speculators-regex"))
    assert set(gate.required(contract)) >= {*TOKEN_CONTRACTS, "mask_covers_assistant_spans"}
    off = load_contract(resolve_contract_path("speculators-regex"), {"mask": {"completeness": "off"}})
    assert "mask_covers_assistant_spans" not in gate.required(off)  # the contract turned it off itself
    assert "turned off by the contract" in gate.turned_off(off)["mask_covers_assistant_spans"]


def test_init_finds_the_tokenizer_beside_the_dataset(clean_dataset: Path, tokenizer_dir: Path, tmp_path: Path) -> None:
    from drafter_contracts.cli.init import run_init

    data = tmp_path / "q36" / "tokenized"
    shutil.copytree(clean_dataset, data)
    shutil.copytree(tokenizer_dir, tmp_path / "q36" / "tokenizer")
    _, path = run_init(str(data), str(tmp_path / "c.toml"), None, force=True)
    assert f'path = "{tmp_path / "q36" / "tokenizer"}"' in path.read_text()
