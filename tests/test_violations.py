"""violations.parquet: every violating row of every per-row contract, beside summary.json.

A copy of the fixture dataset with the first user message supervised in more rows than a
contract keeps as examples: each of them is listed once, with its reason and first offending
token; -n 0 and -n 2 write the same file; the two halves of a --split run merge into the whole
run's file; a clean dataset (the fixture with its warned rows dropped through the file itself)
gets an empty file with the schema.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from drafter_contracts.report.merge import merge_reports
from drafter_contracts.report.violations import FILE_NAME, SCHEMA, build_table
from drafter_contracts.results import MAX_EXAMPLES, RowViolations
from drafter_testkit.generate import save_table
from drafter_testkit.mutants import _has_user_text, _num_shards, _read, _replace, _row, _set_mask, _turns_of
from drafter_testkit.schema import validate_summary
from helpers import run_pytest, section_lines

ROWS = 2000
MUTATED = 45  # more than MAX_EXAMPLES: the file lists what summary.json's examples cannot
REASON = "user token supervised"


@pytest.fixture(scope="module")
def user_text_supervised(tmp_path_factory, clean_dataset) -> tuple[Path, dict[int, tuple[int, int]]]:
    """The fixture with the first user message supervised in ``MUTATED`` rows spread over every shard:
    the dataset and, per mutated row, (first offending position, the id there)."""
    out = tmp_path_factory.mktemp("user-text") / "data"
    table, rng = _read(clean_dataset), random.Random("violations")
    order = list(range(table.num_rows))
    rng.shuffle(order)
    updates, expected = {}, {}
    for i in order:
        row = _row(table, i)
        if not _has_user_text(row):
            continue
        turn = _turns_of(row["input_ids"], "user")[0]
        updates[i] = _set_mask(row, range(turn.body, turn.end))
        expected[i] = (turn.body, row["input_ids"][turn.body])
        if len(updates) == MUTATED:
            break
    save_table(_replace(table, updates), out, _num_shards(clean_dataset))
    return out, expected


def _args(data: Path, tokenizer_dir: Path, *more: str) -> tuple[str, ...]:
    return (f"--dataset-path={data}", "--contract=qwen3.6-dflash", f"--tokenizer={tokenizer_dir}",
            "--shard-size=300", *more)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, user_text_supervised, tokenizer_dir):
    """The mutated dataset checked at -n 0, at -n 2, and as the two parts of --split */2."""
    data, _ = user_text_supervised
    root = tmp_path_factory.mktemp("violation-runs")
    common = _args(data, tokenizer_dir, f"--expected-count={ROWS}")
    return root, {"n0": run_pytest(root / "n0", *common, "-n", "0"),
                  "n2": run_pytest(root / "n2", *common, "-n", "2"),
                  **{k: run_pytest(root / f"part{k}", *common, f"--split={k}/2", "-n", "0") for k in (1, 2)}}


def _table(root: Path, name: str) -> pa.Table:
    return pq.read_table(root / name / "reports" / FILE_NAME)


def test_every_violating_row_is_listed_once_with_its_first_offending_token(runs, user_text_supervised, vocab):
    root, out = runs
    proc, summary = out["n0"]
    _, expected = user_text_supervised
    assert proc.returncode == 1, proc.stdout[-3000:]
    table = _table(root, "n0")
    assert table.schema.equals(SCHEMA, check_metadata=False)
    mask = table.filter(pc.equal(table["contract"], "mask_on_assistant_spans")).to_pylist()
    assert len(mask) == MUTATED > MAX_EXAMPLES
    assert len(summary["checks"]["mask_on_assistant_spans"]["examples"]) == MAX_EXAMPLES  # what the file adds to
    assert [r["row"] for r in mask] == sorted(expected)  # each mutated row once, in row order
    for r in mask:
        position, token = expected[r["row"]]
        assert (r["verdict"], r["reason"], r["position"], r["token_id"]) == ("FAIL", REASON, position, token), r
        assert r["token_text"] == vocab.decode([token]) != "", r
    # Every listed contract lists exactly its violating rows, each once; the file is sorted by contract, then row.
    frame = table.to_pandas()
    assert not frame.duplicated(["contract", "row"]).any()
    assert frame.equals(frame.sort_values(["contract", "row"], kind="stable").reset_index(drop=True))
    for name, n in frame.groupby("contract").size().items():
        c = summary["checks"][name]
        assert n == c["rows_violating"], name
        assert set(frame[frame.contract == name].verdict) == {"WARN" if c["verdict"] == "warn" else "FAIL"}, name
    section = summary["violations"]
    assert section["path"] == FILE_NAME and section["rows"] == table.num_rows
    assert {u["contract"] for u in section["unlisted"]} <= {n for n, c in summary["checks"].items()
                                                             if c["verdict"] in ("fail", "warn")} - set(frame.contract)
    assert "duplicate_rows" in {u["contract"] for u in section["unlisted"]}  # whole-dataset: its rows cannot be listed
    assert validate_summary(summary) == []
    lines = section_lines(proc.stdout)
    failing = int(pc.sum(pc.equal(table["verdict"], "FAIL")).as_py() or 0)
    assert section["failing"] == failing > 0
    assert (f"report: {root / 'n0' / 'reports' / FILE_NAME} ({table.num_rows:,} rows listed: {failing:,} failing, "
            f"{table.num_rows - failing:,} warned") in "\n".join(lines)


def test_workers_write_the_same_file(runs):
    root, out = runs
    assert out["n2"][0].returncode == 1, out["n2"][0].stdout[-3000:]
    assert _table(root, "n2").equals(_table(root, "n0"))
    assert out["n2"][1]["violations"] == out["n0"][1]["violations"]


def test_merge_of_two_halves_equals_the_whole_run(runs, tmp_path):
    root, out = runs
    parts = [root / f"part{k}" / "reports" / "summary.json" for k in (1, 2)]
    assert all(out[k][1]["violations"]["rows"] for k in (1, 2))  # each half lists rows of its own
    lines: list[str] = []
    assert merge_reports(tmp_path / "merged", parts, echo=lines.append) == 1, lines
    merged = pq.read_table(tmp_path / "merged" / FILE_NAME)
    assert merged.equals(_table(root, "n0"))
    summary = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert summary["violations"]["rows"] == merged.num_rows and "missing_parts" not in summary["violations"]
    assert validate_summary(summary) == []
    assert f"report: {tmp_path / 'merged' / FILE_NAME} ({merged.num_rows:,} rows listed: " in "\n".join(lines)
    assert summary["violations"]["failing"] == int(pc.sum(pc.equal(merged["verdict"], "FAIL")).as_py() or 0)


def test_merge_refuses_a_row_two_parts_list(runs, tmp_path):
    root, _ = runs
    part1, part2 = tmp_path / "part1", tmp_path / "part2"
    shutil.copytree(root / "part1" / "reports", part1)
    shutil.copytree(root / "part2" / "reports", part2)
    # part 2's file claims one of part 1's rows too (overlapping shards): the merged file would list it twice
    first = pq.read_table(part1 / FILE_NAME).slice(0, 1)
    pq.write_table(pa.concat_tables([pq.read_table(part2 / FILE_NAME), first]), part2 / FILE_NAME)
    doc = json.loads((part2 / "summary.json").read_text())
    doc["violations"]["rows"] += 1
    (part2 / "summary.json").write_text(json.dumps(doc))
    lines: list[str] = []
    status = merge_reports(tmp_path / "out", [part1 / "summary.json", part2 / "summary.json"], echo=lines.append)
    row = first.to_pylist()[0]
    assert status == 4 and len(lines) == 1, lines
    assert "error:" in lines[0] and f"{row['contract']} row {row['row']:,} is listed by both" in lines[0], lines
    assert not (tmp_path / "out" / "summary.json").exists()


def test_merge_names_a_part_without_the_file(runs, tmp_path):
    root, out = runs
    part1, part2 = tmp_path / "part1", tmp_path / "part2"
    shutil.copytree(root / "part1" / "reports", part1)
    shutil.copytree(root / "part2" / "reports", part2)
    (part2 / FILE_NAME).unlink()
    lines: list[str] = []
    assert merge_reports(tmp_path / "out", [part1 / "summary.json", part2 / "summary.json"], echo=lines.append) == 1
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    section = summary["violations"]
    assert [(m["k"], m["n"]) for m in section["missing_parts"]] == [(2, 2)]
    assert section["rows"] == pq.read_metadata(tmp_path / "out" / FILE_NAME).num_rows == out[1][1]["violations"]["rows"]
    why = {u["contract"]: u["why"] for u in section["unlisted"]}
    assert "part 2/2 has no violations.parquet" in why["mask_on_assistant_spans"]
    assert any(line.startswith("WARNING: part 2/2") for line in lines), lines
    assert validate_summary(summary) == []


def test_clean_rows_give_an_empty_file_with_the_schema(clean_dataset, tokenizer_dir, tmp_path):
    """The fixture's warned rows dropped the way docs/reports.md shows, then checked again: nothing to list."""
    from datasets import load_from_disk

    proc, summary = run_pytest(tmp_path / "fixture", *_args(clean_dataset, tokenizer_dir, f"--expected-count={ROWS}",
                                                             "-n", "0"))
    listed = pq.read_table(tmp_path / "fixture" / "reports" / FILE_NAME, columns=["row"])
    assert proc.returncode == 0 and listed.num_rows == summary["violations"]["rows"] > 0, proc.stdout[-3000:]
    keep = np.setdiff1d(np.arange(ROWS), listed["row"].to_numpy())
    kept = load_from_disk(str(clean_dataset)).select(keep)
    kept.save_to_disk(str(tmp_path / "kept"))
    proc, summary = run_pytest(tmp_path / "kept-run", *_args(tmp_path / "kept", tokenizer_dir,
                                                              f"--expected-count={len(keep)}", "-n", "0"))
    assert proc.returncode == 0, proc.stdout[-3000:]
    table = pq.read_table(tmp_path / "kept-run" / "reports" / FILE_NAME)
    assert table.num_rows == 0 and table.schema.equals(SCHEMA, check_metadata=False)
    assert summary["violations"]["rows"] == 0
    assert all(u["contract"] not in ("placeholder_replies", "dflash_anchors") for u in summary["violations"]["unlisted"])


def test_the_table_is_built_from_arrays_of_many_shards():
    """Shards arrive in any order with reason tables of their own; the table merges them sorted, row by row."""
    a = RowViolations("b_check", np.array([30, 10]), np.array([5, -1]), np.array([1, 0], np.int32),
                      ["first reason", "second reason"], np.array([7, -1]))
    b = RowViolations("b_check", np.array([20]), np.array([2]), np.array([0], np.int32), ["second reason"],
                      np.array([9]))
    c = RowViolations("a_check", np.array([40]), np.array([-1]), np.array([0], np.int32), ["whole row"])
    table = build_table([a, b, c], {"a_check": {"verdict": "warn"}, "b_check": {"verdict": "fail"}},
                        decode=lambda ids: f"<{ids[0]}>")
    assert table.to_pylist() == [
        {"contract": "a_check", "verdict": "WARN", "row": 40, "reason": "whole row", "position": -1, "token_id": -1,
         "token_text": None},
        {"contract": "b_check", "verdict": "FAIL", "row": 10, "reason": "first reason", "position": -1,
         "token_id": -1, "token_text": None},
        {"contract": "b_check", "verdict": "FAIL", "row": 20, "reason": "second reason", "position": 2, "token_id": 9,
         "token_text": "<9>"},
        {"contract": "b_check", "verdict": "FAIL", "row": 30, "reason": "second reason", "position": 5, "token_id": 7,
         "token_text": "<7>"},
    ]
    assert build_table([], {}).schema.equals(SCHEMA)
