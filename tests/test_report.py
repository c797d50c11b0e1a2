"""The artifacts a run leaves in --report-dir, read the way CI and people read them.

Real runs (`python -m pytest --dataset-path=...` in a subprocess) on the cached
fixture dataset and on a mutant; summary.json is validated against the shipped
JSON Schema and the per-shard invariants, junit.xml is parsed, report.html is
checked for its verdicts, plots and decoded rows.
"""

from __future__ import annotations

import collections
import html
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from drafter_contracts.contract import load_contract, resolve_contract_path
from drafter_contracts.dataset.reader import open_dataset
from drafter_contracts.engine import DATASET_CHECKS, GLOBAL_CHECKS, Engine
from drafter_testkit.mutants import MUTANTS
from drafter_contracts.report.html import render_segments
from drafter_contracts.checks.stats import SEQ_LEN_EDGES
from drafter_contracts.report.reducer import dataset_profile
from drafter_contracts.report.stats import quantiles
from drafter_testkit.schema import validate_summary
from helpers import section_lines

ROWS = 2000


def run(cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    report = cwd / "reports"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--report-dir={report}", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=600, env=os.environ.copy())
    return proc, report


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory, clean_dataset, tokenizer_dir):
    cwd = tmp_path_factory.mktemp("report-clean")
    return run(cwd, f"--dataset-path={clean_dataset}", "--contract=qwen3.6-dflash", f"--tokenizer={tokenizer_dir}", f"--expected-count={ROWS}",
               "--shard-size=400", "-n", "2")


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory, clean_dataset, tokenizer_dir):
    """A mutant with one user token supervised; --junitxml given by the user."""
    root = tmp_path_factory.mktemp("report-failing")
    mutation = MUTANTS["mask_user_text"](clean_dataset, root / "data", 0)
    proc, report = run(root, f"--dataset-path={root / 'data'}", "--contract=qwen3.6-dflash", f"--tokenizer={tokenizer_dir}", f"--expected-count={ROWS}",
                       "--shard-size=400", "-n", "0", f"--junitxml={root / 'ci' / 'results.xml'}")
    return proc, report, root, mutation


def test_clean_run_writes_its_artifacts(clean_run, clean_dataset):
    proc, report = clean_run
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert sorted(p.name for p in report.iterdir()) == ["junit.xml", "report.html", "summary.json",
                                                         "violations.parquet"]
    for name in ("summary.json", "report.html", "junit.xml", "violations.parquet"):
        assert f"report: {report / name}" in proc.stdout

    summary = json.loads((report / "summary.json").read_text())
    assert validate_summary(summary) == []
    assert summary["schema_version"] == 3
    # Dataset fingerprint: real files with their sizes, and the datasets' own fingerprint from state.json.
    files = {f["name"]: f["bytes"] for f in summary["dataset"]["files"]}
    assert files == {p.name: p.stat().st_size for p in clean_dataset.glob("data-*.arrow")}
    assert summary["dataset"]["state_fingerprint"] == json.loads((clean_dataset / "state.json").read_text())["_fingerprint"]
    tok = summary["tokenizer"]
    assert re.fullmatch(r"[0-9a-f]{16}", tok["vocab_fingerprint"]) and re.fullmatch(r"[0-9a-f]{16}", tok["template_fingerprint"])
    # Figures agree with the profile and the raw shard records they come from.
    prof = summary["profile"]
    assert sum(prof["seq_len"]["histogram"]) == ROWS == sum(prof["supervised_share_per_row"]["histogram"])
    assert len(summary["shards"]) == 5 and sum(s["rows"] for s in summary["shards"]) == ROWS
    assert prof["supervised_tokens"] == summary["figures"]["supervised_tokens"] == sum(summary["supervised_id_counts"]["counts"])
    assert all("supervised_id_counts" not in s for s in summary["shards"])
    assert abs(sum(prof["role_token_shares"].values()) - 1) < 1e-9
    assert summary["timing"]["wall_seconds"] > 0
    assert summary["timing"]["per_check_seconds"]["mask_on_assistant_spans"] > 0

    junit = ET.parse(report / "junit.xml").getroot()
    suite = junit if junit.tag == "testsuite" else junit.find("testsuite")
    # every collected test is a JUnit test case: dataset-level ones once, then one per shard running
    # every per-row contract (token_freq, decided at the controller, is a test case only when there is
    # a file to check; here it is skipped in the summary, with its reason; the whole-dataset duplicate
    # and convention_losses verdicts are one test case each too, as every controller-side verdict is)
    collected = len(DATASET_CHECKS) + len(GLOBAL_CHECKS) - 1 + 5 + 2
    assert summary["checks"]["token_freq"]["verdict"] == "skip" and summary["checks"]["token_freq"]["skip_reasons"]
    assert int(suite.get("tests")) == collected and int(suite.get("failures")) == 0
    assert "drafter_contracts.stats" not in (report / "junit.xml").read_text()  # raw stats stay in summary.json
    assert any(c.get("name") == "test_duplicate_rows" for c in suite.iter("testcase"))

    # The first line of the terminal summary and of the page: the convention in force and why, profile, tokenizer.
    first = section_lines(proc.stdout)[0]
    assert first.startswith("convention speculators-regex (declared in the contract) · template profile ")
    assert first.endswith(f" · tokenizer {summary['tokenizer']['name']} (given with --tokenizer)")
    page = (report / "report.html").read_text()
    assert page.index(f'<p class="headline" id="headline">{html.escape(first)}</p>') < page.index('class="meta"')
    assert all(page.count(f'<tr data-verdict="{v}">') == n for v, n in
               collections.Counter(c["verdict"] for c in summary["checks"].values()).items()) and 'data-verdict="fail"' not in page.split("<tbody>")[1]
    for plot in ("plot-seq-len", "plot-supervised-share", "plot-roles"):
        assert f'id="{plot}"' in page
    assert page.count('class="bound"') == 2  # min_len and max_len drawn on the seq_len plot
    assert "<link" not in page and not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)


def test_failing_run_shows_the_decoded_row(failing_run):
    proc, report, root, mutation = failing_run
    assert proc.returncode == 1, proc.stdout[-3000:]
    summary = json.loads((report / "summary.json").read_text())
    assert validate_summary(summary) == []
    check = summary["checks"]["mask_on_assistant_spans"]
    assert check["verdict"] == "fail" and check["rows_violating"] == 1
    example = check["examples"][0]
    assert example["row"] == mutation.rows[0]
    segs = example["excerpt"]["segments"]
    offending = [s for s in segs if s["offending"]]
    assert len(offending) == 1 and offending[0]["role"] == "user" and offending[0]["supervised"]
    assert any(s["role"] == "assistant" and s["supervised"] for s in segs)

    page = (report / "report.html").read_text()
    assert f"row {mutation.rows[0]:,}" in page and 'class="seg sup off"' in page and 'data-role="user"' in page
    assert page.count('<tr data-verdict="fail">') == 1

    # The user's --junitxml wins over the default location.
    assert not (report / "junit.xml").exists()
    junit = ET.parse(root / "ci" / "results.xml").getroot()
    failures = [tc for tc in junit.iter("testcase") if tc.find("failure") is not None]
    assert len(failures) == 1 and failures[0].get("name").startswith("test_row_contracts[shard-")
    assert "mask_on_assistant_spans" in failures[0].find("failure").get("message")
    assert "user token supervised" in failures[0].find("failure").text


def test_profile_does_not_depend_on_sharding(clean_dataset, tokenizer_dir, vocab):
    """Per-shard stats are mergeable: any shard plan gives the same profile, exact to the row."""
    def profile(shard_size: int) -> dict:
        contract = load_contract(resolve_contract_path("qwen3.6-dflash"), {"shard_size": shard_size})
        engine = Engine(open_dataset(clean_dataset), contract, vocab)
        return dataset_profile([engine.stats(s) for s in engine.shards])

    a, b = profile(400), profile(333)
    assert a == b
    ds = open_dataset(clean_dataset)
    lengths = ds.row_lengths()
    hist = np.asarray(a["seq_len"]["histogram"])
    assert hist.sum() == ROWS and a["tokens"] == int(lengths.sum())
    # The median read from the histogram is the lower edge of the bin holding the exact median.
    exact = int(np.sort(lengths)[int(np.ceil(0.5 * ROWS)) - 1])
    lo = a["seq_len"]["quantiles"]["p50"]
    hi = int(SEQ_LEN_EDGES[np.searchsorted(SEQ_LEN_EDGES, lo) + 1])
    assert lo <= exact < hi and (hi - lo) / lo <= 2 ** (1 / 16) - 1 + 1 / lo


def test_quantiles_from_histogram():
    edges = np.array([1, 2, 4, 8, 16])
    assert quantiles(np.array([0, 10, 0, 0]), edges, (0.5,)) == {"p50": 2}
    assert quantiles(np.array([1, 0, 0, 9]), edges, (0.05, 0.5)) == {"p05": 1, "p50": 8}
    assert quantiles(np.zeros(4, int), edges, (0.5,)) == {"p50": None}


def test_segments_are_escaped():
    out = render_segments([{"text": "<script>alert(1)</script>\n", "role": "user", "supervised": False, "offending": True}])
    assert "<script>" not in out and "&lt;script&gt;" in out and 'class="seg off"' in out and "⏎" in out


def test_profile_from_summaries_equals_profile_from_shards(clean_run):
    """What a merge does: shard records from summary.json plus the summed top-level id counts."""
    _, report = clean_run
    summary = json.loads((report / "summary.json").read_text())
    c = summary["supervised_id_counts"]
    again = dataset_profile(summary["shards"], 100, (np.asarray(c["ids"]), np.asarray(c["counts"])))
    assert again == summary["profile"]
    assert dataset_profile(summary["shards"])["top_supervised_tokens"] is None  # without counts: said, not guessed


def test_the_verdict_line_names_the_most_severe_reason_of_the_failing_contracts():
    from drafter_contracts.run.controller import worst_reason

    checks = {
        "mask_on_assistant_spans": {"verdict": "fail", "by_reason": {"assistant end-of-turn token supervised": 189,
                                                                     "tool token supervised": 189},
                                    "severity": {"assistant end-of-turn token supervised": 1, "tool token supervised": 0}},
        "turns_well_formed": {"verdict": "fail", "by_reason": {"header inside an open turn": 3}},  # unranked
        "duplicate_rows": {"verdict": "warn", "by_reason": {"exact duplicate": 4}, "severity": {"exact duplicate": 0}},
    }
    assert worst_reason(checks) == "; worst: 189 rows with tool token supervised (mask_on_assistant_spans)"
    checks["mask_on_assistant_spans"]["by_reason"]["tool token supervised"] = 1
    assert worst_reason(checks) == "; worst: 1 row with tool token supervised (mask_on_assistant_spans)"
    assert worst_reason({"turns_well_formed": checks["turns_well_formed"]}) == ""
