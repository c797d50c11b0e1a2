"""Suspicious-content contracts: pure functions against slow references, then the suite on mutants.

Each content mutant raises its contracts' counts by exactly the rows it changed; in a
default run the contracts warn and the run exits 0, under ``[content] strict = true``
they fail and the run exits 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from drafter_contracts.checks.content import anchor_counts, find_duplicates, row_hashes
from drafter_contracts.dataset.row_view import RowView
from drafter_contracts.contract import builtin_contracts
from drafter_testkit.content_mutants import CONTENT_MUTANTS
from helpers import run_inprocess

CONTENT = ("duplicate_rows", "placeholder_replies", "cut_mid_reply", "short_rows", "dflash_anchors",
           "convention_losses")


def _view(rows: list[list[int]], masks: list[list[bool]]) -> RowView:
    ids = np.concatenate([np.asarray(r, np.int32) for r in rows])
    mask = np.concatenate([np.asarray(m, bool) for m in masks])
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int64)
    return RowView(ids, mask, offsets, np.arange(len(rows)), None)


def test_anchor_counts_match_speculators_rule():
    """Reference: speculators' select_anchors drops the last block_size positions, then takes supervised ones."""
    rng = np.random.default_rng(0)
    rows = [list(rng.integers(0, 100, n)) for n in (1, 5, 16, 17, 21, 40, 300)]
    masks = [list(rng.random(len(r)) < 0.5) for r in rows]
    masks[4] = [False] * 18 + [True] * 3  # a 21-token row ending in a 3-token "OK."
    got = anchor_counts(_view(rows, masks), 16)
    want = [sum(m[: max(0, len(m) - 16)]) for m in masks]
    assert got.tolist() == want and got[4] == 0


def test_row_hashes_find_exact_duplicates_only():
    base = [[1, 2, 3], [1, 2, 3], [3, 2, 1], [1, 2], [1, 2, 3], [1, 2, 3, 0]]
    masks = [[0, 1, 1], [0, 1, 1], [0, 1, 1], [0, 1], [0, 1, 0], [0, 1, 1, 0]]
    view = _view(base, [[bool(x) for x in m] for m in masks])
    h = row_hashes(view)
    assert h[0] == h[1] and len(set(h.tolist())) == 5  # mask, order, length all matter
    extra, groups, pairs = find_duplicates(np.arange(6) + 100, h)
    assert (extra, groups, pairs) == (1, 1, [(100, 101)])


def test_row_hashes_do_not_collide_on_the_fixture(clean_dataset):
    from datasets import load_from_disk

    ds = load_from_disk(str(clean_dataset))
    rows, masks = ds["input_ids"], ds["loss_mask"]
    h = row_hashes(_view(rows, masks))
    keys = {}
    for i, (r, m) in enumerate(zip(rows, masks)):
        keys.setdefault((tuple(r), tuple(m)), []).append(i)
    exact_groups = sorted(g for g in keys.values() if len(g) > 1)
    extra, groups, pairs = find_duplicates(np.arange(len(rows)), h)
    assert groups == len(exact_groups) and extra == sum(len(g) - 1 for g in exact_groups)
    assert sorted([a, b] for a, b in pairs) == sorted([g[0], x] for g in exact_groups for x in g[1:])


# --- the suite ----------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def strict_contract(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("strict") / "strict.toml"
    text = builtin_contracts()["qwen3.6-dflash"].read_text()
    assert "strict = false" in text
    path.write_text(text.replace("strict = false", "strict = true"))
    return path


def run(pytester, folder: Path, tokenizer_dir: Path, *extra: str) -> tuple[int, dict, str]:
    result, summary = run_inprocess(pytester, f"--dataset-path={folder}", "--contract=qwen3.6-dflash",
                                    f"--tokenizer={tokenizer_dir}", "--shard-size=400", "--expected-count=2000", *extra)
    return result.ret, summary, result.stdout.str()


@pytest.fixture(scope="session")
def clean_content(tmp_path_factory, clean_dataset, tokenizer_dir):
    """The clean fixture's content figures (it holds "OK." rows and two genuine duplicate pairs, like the 913,786-row Qwen3.6 dataset)."""
    pytester_dir = tmp_path_factory.mktemp("clean-content")
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--dataset-path={clean_dataset}", "--contract=qwen3.6-dflash",
                    f"--tokenizer={tokenizer_dir}", "--shard-size=400", "--expected-count=2000",
                    f"--report-dir={pytester_dir}", "-k", "row_contracts"], check=True, capture_output=True,
                   cwd=pytester_dir)
    return json.loads((pytester_dir / "summary.json").read_text())


def test_clean_fixture_warns_but_passes(clean_content):
    checks = clean_content["checks"]
    assert clean_content["exit_status"] == 0
    assert all(checks[c]["verdict"] in ("pass", "warn") and checks[c]["report_only"] for c in CONTENT)
    assert checks["duplicate_rows"]["rows_violating"] == 2 and checks["short_rows"]["verdict"] == "pass"
    assert checks["placeholder_replies"]["rows_violating"] > 100  # the generator's 6 % "OK." mixture
    assert clean_content["figures"]["anchor_positions"] > 0


@pytest.fixture(scope="session")
def content_mutants(tmp_path_factory, clean_dataset):
    root = tmp_path_factory.mktemp("content-mutants")
    return {name: (root / name, make(clean_dataset, root / name, 0)) for name, make in CONTENT_MUTANTS.items()}


@pytest.mark.parametrize("name", sorted(CONTENT_MUTANTS))
def test_content_mutant_warns_by_default_and_fails_when_strict(pytester, content_mutants, clean_content, tokenizer_dir,
                                                                strict_contract, name):
    folder, mutation = content_mutants[name]
    flagged = {t.removeprefix("test_") for t in mutation.expected_failures}
    selection = ("-k", "row_contracts")  # the shards' tests: every per-row and content contract
    ret, summary, out = run(pytester, folder, tokenizer_dir, *selection)
    assert ret == 0, out[-3000:]
    for check in flagged:
        c, before = summary["checks"][check], clean_content["checks"][check]
        assert c["verdict"] == "warn", (check, c)
        assert c["rows_violating"] == before["rows_violating"] + len(mutation.rows), (check, c["by_reason"])
        if c["rows_violating"] <= 20:
            assert set(mutation.rows) <= {e["row"] for e in c["examples"]}
    assert "WARN " + sorted(flagged)[0] in out
    assert f"WARN {sorted(flagged)[0]}: row " in out and "legend: ⟦…⟧ loss_mask=1" in out  # a decoded example
    ret, summary, out = run(pytester, folder, tokenizer_dir, f"--contract={strict_contract}", *selection)
    assert ret == 1
    failed = {k for k, c in summary["checks"].items() if c["verdict"] == "fail"}
    assert flagged <= failed


def test_strict_passes_when_content_is_clean(pytester, clean_dataset, tokenizer_dir, strict_contract):
    ret, summary, _ = run(pytester, clean_dataset, tokenizer_dir, f"--contract={strict_contract}", "-k", "row_contracts")
    failing = {k for k, c in summary["checks"].items() if c["verdict"] == "fail"}
    # A shard's test runs every content contract: the fixture's "OK." replies fail theirs under strict.
    assert summary["checks"]["short_rows"]["verdict"] == "pass" and "short_rows" not in failing
    assert failing <= set(CONTENT) and ret == (1 if failing else 0)


def test_strict_duplicates_fail_at_the_controller_with_two_workers(pytester, content_mutants, tokenizer_dir,
                                                                   strict_contract):
    folder, mutation = content_mutants["duplicate_rows_copied"]
    result = pytester.runpytest_subprocess(f"--dataset-path={folder}", f"--tokenizer={tokenizer_dir}", "--shard-size=400",
                                           f"--contract={strict_contract}", "--report-dir=reports", "-n", "2",
                                           "-p", "no:cacheprovider", "-k", "row_contracts", "--junitxml=junit.xml")
    summary = json.loads((pytester.path / "reports" / "summary.json").read_text())
    dup = summary["checks"]["duplicate_rows"]
    assert result.ret == 1 and summary["exit_status"] == 1
    assert dup["verdict"] == "fail" and dup["rows_violating"] == 7
    assert set(mutation.rows) <= {e["row"] for e in dup["examples"]}
    assert "repeat an earlier row exactly" in result.stdout.str()
    assert "row_hashes" not in (pytester.path / "junit.xml").read_text()  # payloads never reach JUnit


def test_duplicates_skip_when_shards_are_deselected(pytester, clean_dataset, tokenizer_dir):
    ret, summary, _ = run(pytester, clean_dataset, tokenizer_dir, "-k", "row_contracts and shard-00000")
    assert ret == 0
    assert summary["checks"]["duplicate_rows"]["verdict"] == "skip"
    assert "1 of 5 shards" in summary["checks"]["duplicate_rows"]["skip_reasons"][0]
