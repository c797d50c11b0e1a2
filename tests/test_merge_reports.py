"""merge-reports: three --split parts of a dataset with violations merge into the one-machine verdict."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from drafter_testkit.mutants import MUTANTS
from drafter_contracts.report.merge import merge_reports
from helpers import run_pytest

ROWS = 2000
N = 3


def run(cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    return run_pytest(cwd, *args)


@pytest.fixture(scope="module")
def violating(tmp_path_factory, clean_dataset):
    """The clean fixture with three mutants applied on top of each other (rows in several shards)."""
    root = tmp_path_factory.mktemp("violating")
    src, rows = clean_dataset, []
    for name in ("mask_user_text", "lengths_seq_len_off", "unknown_id"):
        m = MUTANTS[name](src, root / name, 0)
        rows += m.rows
        src = root / name
    return src, sorted(set(rows))


@pytest.fixture(scope="module")
def runs(tmp_path_factory, violating, tokenizer_dir):
    data, _ = violating
    root = tmp_path_factory.mktemp("split-runs")
    common = (f"--dataset-path={data}", "--contract=qwen3.6-dflash", f"--tokenizer={tokenizer_dir}", f"--expected-count={ROWS}", "--shard-size=300")
    out = {"single": run(root / "single", *common, "-n", "0")}
    for k in range(1, N + 1):
        workers = ("-n", "2") if k == 2 else ("-n", "0")  # one part spread over xdist workers too
        out[k] = run(root / f"part{k}", *common, f"--split={k}/{N}", *workers)
    return root, out


def _parts(root: Path) -> list[Path]:
    return [root / f"part{k}" / "reports" / "summary.json" for k in range(1, N + 1)]


def test_parts_cover_every_row_exactly_once(runs):
    _, out = runs
    ranges = []
    for k in range(1, N + 1):
        proc, summary = out[k]
        assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-2000:]
        assert (summary["split"]["k"], summary["split"]["n"]) == (k, N)
        assert summary["split"]["shards"], f"part {k} checked no shard"
        ranges += [tuple(r) for r in summary["split"]["rows"]]
        assert summary["figures"]["rows"] == sum(b - a for a, b in summary["split"]["rows"])
    ranges.sort()
    assert ranges[0][0] == 0 and ranges[-1][1] == ROWS
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:])), ranges  # no gap, no overlap
    assert sum(out[k][1]["figures"]["rows"] for k in range(1, N + 1)) == ROWS


def test_merged_verdict_equals_single_machine_verdict(runs, violating, tmp_path):
    root, out = runs
    _, mutated_rows = violating
    single_proc, single = out["single"]
    assert single_proc.returncode == 1, single_proc.stdout[-3000:]
    proc = subprocess.run([sys.executable, "-m", "drafter_contracts", "merge-reports", str(tmp_path / "merged"),
                           *map(str, _parts(root))], capture_output=True, text=True, timeout=300)
    assert proc.returncode == single["exit_status"] == 1, proc.stdout + proc.stderr
    merged = json.loads((tmp_path / "merged" / "summary.json").read_text())
    # Checks decided per part at its controller (duplicate rows) compare rows within a part only.
    per_part = {name for name, c in merged["checks"].items() if c["global"]}
    # draft_vocab_coverage skipped alike (no d2t/t2d here); convention_losses counts each part's own tokens
    assert per_part == {"duplicate_rows", "draft_vocab_coverage", "convention_losses"}
    # The drift sample is drawn per shard, so the parts' samples add up to the single machine's.
    drift_m, drift_s = merged["checks"]["tokenizer_drift"], single["checks"]["tokenizer_drift"]
    assert (drift_m["verdict"], drift_m["rows_checked"], drift_m["tests"]) == (drift_s["verdict"], drift_s["rows_checked"], N)
    per_part.add("tokenizer_drift")
    # Each part says whether its own shards were all checked on unchanged files: one test per part.
    for name in ("all_shards_checked", "dataset_unchanged"):
        m, s1 = merged["checks"][name], single["checks"][name]
        assert (m["verdict"], m["rows_checked"], m["tests"]) == (s1["verdict"], s1["rows_checked"], N), name
        per_part.add(name)
    assert {k: v for k, v in merged["checks"].items() if k not in per_part} == \
        {k: v for k, v in single["checks"].items() if k not in per_part}
    assert "compared within each of the 3 parts only" in merged["checks"]["duplicate_rows"]["messages"][-1]
    assert merged["checks"]["duplicate_rows"]["rows_violating"] <= single["checks"]["duplicate_rows"]["rows_violating"]
    assert merged["figures"] == single["figures"]
    # Exact supervised-id counts (what token_freq.pt is checked against) and the whole profile survive the merge.
    assert merged["supervised_id_counts"] is not None
    assert merged["supervised_id_counts"] == single["supervised_id_counts"]
    assert merged["profile"] == single["profile"]
    failing = {name for name, c in merged["checks"].items() if c["verdict"] == "fail"}
    assert failing == {name for name, c in single["checks"].items() if c["verdict"] == "fail"}
    assert {"lengths_agree", "ids_known", "mask_on_assistant_spans"} <= failing, failing
    example_rows = {e["row"] for c in merged["checks"].values() for e in c["examples"]}
    assert set(mutated_rows) <= example_rows
    assert merged["split"]["merged_parts"] == N and merged["split"]["shards"] == list(range(merged["split"]["shards_total"]))
    assert "FAIL mask_on_assistant_spans" in proc.stdout and "merged 3 parts" in proc.stdout


def test_merge_refuses_parts_that_do_not_make_one_run(runs, clean_dataset, tokenizer_dir, tmp_path):
    root, _ = runs
    p1, p2, p3 = _parts(root)
    common = (f"--tokenizer={tokenizer_dir}", f"--expected-count={ROWS}", "--shard-size=300", "-n", "0")
    _, other_data = run(tmp_path / "clean3", f"--dataset-path={clean_dataset}", *common, f"--split=3/{N}")
    other_data_path = tmp_path / "clean3" / "reports" / "summary.json"
    data = json.loads(p1.read_text())["dataset"]["path"]
    _, other_contract = run(tmp_path / "minlen3", f"--dataset-path={data}", *common, "--min-len=11", f"--split=3/{N}")
    other_contract_path = tmp_path / "minlen3" / "reports" / "summary.json"
    assert other_data and other_contract
    cases = {
        "overlap": ([p1, p2, p3, p2], "both are part 2/3"),
        "incomplete": ([p1, p2], "parts 3/3 missing"),
        "other dataset": ([p1, p2, other_data_path], "dataset (files, sizes, rows, shard plan) differs"),
        "other contract": ([p1, p2, other_contract_path], "contract differs"),
    }
    for case, (paths, fragment) in cases.items():
        lines: list[str] = []
        status = merge_reports(tmp_path / f"out-{case.replace(' ', '-')}", paths, echo=lines.append)
        assert status == 4, (case, lines)
        assert len(lines) == 1 and fragment in lines[0], (case, lines)
        assert not (tmp_path / f"out-{case.replace(' ', '-')}" / "summary.json").exists()


def test_bad_split_option_is_a_usage_error(clean_dataset, usage_run):
    run = usage_run(f"--dataset-path={clean_dataset}", "--contract=qwen3.6-dflash", "--split=train", "-n", "0")
    assert run.ret == 4 and "Traceback" not in run.output
    assert len(run.errors) == 1 and "--dataset-split NAME" in run.errors[0], run.output
