"""The draft-vocabulary contracts against mappings the real producers built (speculators 0.9.0, SpecForge 0.2.0).

Each case of ``drafter_testkit/vocab_mappings.py`` is a per-turn fixture dataset with what a producer
left beside it; the clean pairs pass, and each mutant fails its contract with the figure that shows it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from drafter_contracts.draftvocab.files import read_mapping
from drafter_contracts.draftvocab.policy import check_mapping_path, parse_policy
from drafter_contracts.draftvocab.rule import expected_selection
from drafter_contracts.errors import UsageProblem
from drafter_testkit import vocab_mappings as vm
from helpers import run_inprocess

MINE = ("vocab_mapping_consistent", "vocab_mapping_matches_data", "draft_vocab_coverage", "token_freq")
#: The figure each mutant's failure must show.
FIGURES = {
    "other_data": r"draft ids differ .* overlap \d+\.\d% — the mapping looks built from other data; token_freq\.pt "
                  r"counts this dataset, so only the mapping is stale",
    "stale_token_freq": r"both are stale: the mapping is the one token_freq\.pt produces",
    "d2t_off_by_one": r"nonzero\(t2d\) != d2t \+ arange\(N\) at 512 of 512 draft ids \(every one off by \+1\)",
    "t2d_other_size": r"t2d has 262,144 entries, the target vocabulary has 248,320",
    "drops_end_of_turn": r"1 special token\(s\) the mask supervises are outside the draft vocabulary.*248046 '<\|im_end\|>' ×\d",
    "draft_too_large": r"draft size 2,048 is larger than the 1,\d{3} distinct supervised ids: \d{3} draft ids",
}


@pytest.fixture(scope="module")
def cases() -> Path:
    why = vm.unavailable()
    if why:
        pytest.skip(why)
    return vm.mappings_dir()


@pytest.fixture(scope="module")
def contract(tmp_path_factory) -> Path:
    """The per-turn convention's contract with the target vocabulary pinned."""
    from drafter_contracts.contract import builtin_contracts

    f = tmp_path_factory.mktemp("vocab-contract") / "c.toml"
    text = builtin_contracts()["speculators-per-turn"].read_text()
    f.write_text(text.replace('path = "builtin:qwen3.6"\n', "") + f"\n[vocab]\ntarget_vocab_size = {vm.TARGET_VOCAB}\n")
    return f


def run(pytester, folder: Path, contract: Path, tokenizer_dir: Path, *extra: str) -> tuple[int, dict]:
    """One in-process run; the drift sample (~1 s a run, and no reader of the mapping) is deselected."""
    result, summary = run_inprocess(pytester, f"--dataset-path={folder}", f"--contract={contract}",
                                    f"--tokenizer={tokenizer_dir}", "-k", "not tokenizer_drift", *extra)
    assert summary is not None, result.stdout.str()[-2000:]
    return result.ret, summary


def failing(summary: dict) -> set[str]:
    return {n for n in MINE if summary["checks"][n]["verdict"] == "fail"}


def message(summary: dict, name: str) -> str:
    return " ".join(summary["checks"][name]["messages"])


@pytest.mark.parametrize("name", ["speculators_clean", "specforge_clean"])
def test_the_producers_clean_mappings_pass(pytester, cases, contract, tokenizer_dir, name):
    folder = cases / name
    extra = [f"--vocab-mapping={vm.specforge_file(folder)}"] if name == "specforge_clean" else []
    ret, summary = run(pytester, folder, contract, tokenizer_dir, *extra)
    checks = summary["checks"]
    for n in MINE[:3]:
        assert checks[n]["verdict"] == "pass", (n, checks[n])
    figures = checks["draft_vocab_coverage"]["figures"]
    assert figures["draft_vocab_size"] == vm.DRAFT and 0.8 < figures["overall"] < 1.0
    assert set(figures["by_role"]) >= {"content", "reasoning", "end_of_turn"}
    assert figures["by_role"]["end_of_turn"]["share"] == 1.0
    assert sum(figures["row_hist"]) == figures["rows"] == summary["figures"]["rows_checked"]
    page = (pytester.path / "reports" / "report.html").read_text()
    assert 'id="plot-draft-coverage-rows"' in page and 'id="draft-coverage-roles"' in page


def test_both_producers_select_the_same_draft_vocabulary_up_to_ties(cases):
    """SpecForge breaks ties by first appearance, speculators by id: the ids the counts decide agree."""
    spec, _ = read_mapping(check_mapping_path(str(cases / "speculators_clean" / f"d2t-{vm.DRAFT}.npy"), "t"))
    forge, _ = read_mapping([vm.specforge_file(cases / "specforge_clean")])
    a, b = spec.selected(), forge.selected()
    assert len(a) == len(b) == vm.DRAFT and len(forge.t2d) == len(spec.t2d) == vm.TARGET_VOCAB
    differing = np.setdiff1d(a, b)
    assert len(differing) < 0.1 * vm.DRAFT  # only boundary ties may differ


@pytest.mark.parametrize("name", sorted(set(vm.CASES) - {"speculators_clean", "specforge_clean"}))
def test_each_mutant_fails_its_contract_with_its_figure(pytester, cases, contract, tokenizer_dir, name):
    ret, summary = run(pytester, cases / name, contract, tokenizer_dir)
    assert ret == 1
    assert failing(summary) == vm.CASES[name].fails
    text = " ".join(message(summary, n) for n in vm.CASES[name].fails)
    assert re.search(FIGURES[name], text), text


def test_without_a_mapping_each_contract_skips_with_its_reason(pytester, cases, contract, tokenizer_dir):
    ret, summary = run(pytester, cases / "specforge_clean", contract, tokenizer_dir)  # its .pt is not beside the data
    for n in MINE[:3]:
        c = summary["checks"][n]
        assert c["verdict"] == "skip" and any("no d2t-N.npy / t2d-N.npy pair beside the dataset" in r
                                              for r in c["skip_reasons"]), c


def test_init_pins_the_draft_vocabulary_and_its_coverage(cases, tokenizer_dir, tmp_path):
    from drafter_contracts.contract import load_contract
    from drafter_contracts.cli.init import run_init

    seen, path = run_init(str(cases / "speculators_clean"), str(tmp_path / "c.toml"), str(tokenizer_dir))
    pinned = load_contract(path).families["draft_vocab"]
    assert pinned.draft_vocab_size == vm.DRAFT and pinned.target_vocab_size == vm.TARGET_VOCAB
    assert pinned.fingerprint.startswith("sha256:")
    assert pinned.min_coverage <= seen.pinned["draft_vocab"]["coverage"] < pinned.min_coverage + 1e-4


@pytest.mark.parametrize("raw, says", [
    ("missing.pt", "no such file"),
    ("d2t-512.npy", "its partner t2d-512.npy is not beside it"),
    ("mapping.bin", "not a mapping file name"),
])
def test_a_bad_vocab_mapping_path_is_one_usage_line(tmp_path, raw, says):
    for name in ("d2t-512.npy", "mapping.bin"):
        (tmp_path / name).write_bytes(b"x")
    with pytest.raises(UsageProblem) as e:
        check_mapping_path(str(tmp_path / raw), "--vocab-mapping")
    assert says in str(e.value) and "\n" not in str(e.value)


def test_the_option_exits_4_before_any_work(usage_run, clean_dataset, tmp_path):
    got = usage_run(f"--dataset-path={clean_dataset}", f"--vocab-mapping={tmp_path / 'nope.pt'}")
    assert got.ret == 4 and "--vocab-mapping" in got.output and "no such file" in got.output


@pytest.mark.parametrize("table, says", [
    ({"min_coverage": 1.5}, "share between 0 and 1"),
    ({"draft_size": 3}, "unknown key 'draft_size' in [vocab] (did you mean 'draft_vocab_size'?)"),
    ({"producer": "eagle"}, "producer must be one of"),
    ({"draft_vocab_size": "32k"}, "[vocab] draft_vocab_size must be int"),
])
def test_bad_vocab_table_is_one_clear_error(table, says):
    with pytest.raises(UsageProblem) as e:
        parse_policy(table, "contract c.toml", None)
    assert says in str(e.value)


def test_a_pt_mapping_without_torch_says_how_to_install_it(cases, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # what an install without the torch extra sees
    m, why = read_mapping([vm.specforge_file(cases / "specforge_clean")])
    assert m is None and "pip install 'drafter-contracts[torch]'" in why


def test_rule_ties_and_padding():
    counts = np.zeros(20, np.int64)
    counts[[3, 5, 7, 9]] = [9, 4, 4, 4]  # 5, 7, 9 tie at the boundary of N = 3
    assert expected_selection(counts, 3, "speculators").ids.tolist() == [3, 5, 7]
    chosen = np.array([3, 7, 9])
    lenient = expected_selection(counts, 3, "specforge", chosen)
    assert lenient.ids.tolist() == [3, 7, 9] and lenient.open_choice == 3
    padded = expected_selection(counts, 6, "speculators")
    assert padded.ids.tolist() == [0, 1, 3, 5, 7, 9] and padded.padding == 2


@pytest.mark.slow
def test_the_rule_is_the_producers_on_drawn_counts(tmp_path):
    """speculators' and SpecForge's own functions on counts with heavy ties and padding, against rule.py."""
    if vm.unavailable():
        pytest.skip(vm.unavailable())
    rng = np.random.default_rng(0)
    draws = [(rng.integers(0, 6, 400) * (rng.random(400) < 0.5), n) for n in (50, 150, 300)]
    got = vm.producers_on_counts([(c.tolist(), n) for c, n in draws], tmp_path)
    for (counts, n), (spec_ids, forge_ids) in zip(draws, got):
        assert expected_selection(counts, n, "speculators").ids.tolist() == spec_ids
        assert expected_selection(counts, n, "specforge", np.array(forge_ids)).ids.tolist() == forge_ids
