"""Every trainer's layout read in place (docs/layouts.md): the same rows, the same verdicts.

One base dataset in the speculators layout (the first rows of the clean fixture with the
``mask_user_text`` mutant's row among them) is written in each layout the tool reads
(``drafter_testkit/layouts.py``: labels unshifted and shifted by one with assistant_masks beside them,
assistant_masks, completion_mask, right and left padding by attention_mask, SpecForge's [1, L]
nesting, a folder of Parquet files with Hub-style names, a folder of JSON Lines files, one Parquet
file). The contract suite must reach the same verdicts,
naming the same rows, on each, and name the layout in summary.json and the terminal. Defects of a
layout itself are named by row by its own contracts; a layout the tool cannot read is one line, exit 4.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from drafter_contracts.dataset.columns import ListColumn
from drafter_contracts.demo.dataset import save_table
from drafter_contracts.dataset.layout_rows import token_mask
from drafter_contracts.paths import cache_root
from drafter_testkit.layouts import BAD_LABEL, HOLE, LAYOUTS, PADDING_LOSS, TWO_LISTS, layouts_dir
from drafter_testkit.schema import validate_summary
from helpers import run_inprocess

ROWS = 300
#: The layouts' own contracts (checks/layout.py): in a run only where the layout has what they check.
LAYOUT_CONTRACTS = ("layout_well_formed", "labels_match_ids")


@pytest.fixture(scope="module")
def layouts(clean_dataset: Path) -> Path:
    return layouts_dir(clean_dataset, ROWS)


#: name -> (summary.json, terminal output, seconds) of each contract run, run once per module.
_RUNS: dict[str, tuple[dict[str, Any], str, float]] = {}


def _run(pytester: pytest.Pytester, layouts: Path, tokenizer_dir: Path, name: str) -> tuple[dict[str, Any], str, float]:
    """The contract suite on one layout's folder (in-process, -n 0), once per module."""
    if name not in _RUNS:
        sub = LAYOUTS[name][2] if name in LAYOUTS else ""
        t0 = time.perf_counter()
        result, summary = run_inprocess(pytester, f"--dataset-path={layouts / name / sub}",
                                        f"--tokenizer={tokenizer_dir}", "-n", "0")
        assert summary is not None, result.stdout.str()[-3000:]
        _RUNS[name] = (summary, result.stdout.str(), time.perf_counter() - t0)
    return _RUNS[name]


def _verdicts(summary: dict[str, Any]) -> dict[str, str]:
    return {name: c["verdict"] for name, c in summary["checks"].items()}


def _rows(summary: dict[str, Any], name: str) -> list[tuple[int, int]]:
    return [(e["row"], e["position"]) for e in summary["checks"][name]["examples"]]


#: The layout's own contracts each layout runs (the others leave them out, like the speculators layout).
OWN = {"labels": {"labels_match_ids"}, "modelopt": {"labels_match_ids"}, "parquet_folder": {"labels_match_ids"},
       "right_padded": {"labels_match_ids", "layout_well_formed"},
       "parquet_file": {"labels_match_ids", "layout_well_formed"},
       "left_padded": {"layout_well_formed"}, "specforge": {"layout_well_formed"}}


# --------------------------------------------------------------------------- the data layer

@pytest.mark.parametrize("name", list(LAYOUTS))
def test_each_layout_reads_as_the_speculators_rows(layouts: Path, name: str) -> None:
    """The engine's arrays of every layout equal the base's: ids, the token-level mask, row by row."""
    from drafter_contracts.dataset.reader import open_dataset
    from drafter_contracts.dataset.columns import Shard

    base = open_dataset(layouts / "speculators")
    got = open_dataset(layouts / name / LAYOUTS[name][2])
    assert got.num_rows == base.num_rows == ROWS
    a, b = got.read(Shard(0, 0, ROWS)), base.read(Shard(0, 0, ROWS))
    np.testing.assert_array_equal(a.input_ids.offsets, b.input_ids.offsets)
    np.testing.assert_array_equal(a.input_ids.values, b.input_ids.values)
    np.testing.assert_array_equal(a.loss_mask.values != 0, b.loss_mask.values)
    assert not a.layout.malformed.any() and not a.layout.null.any()
    rows = np.array([3, 77, ROWS - 1])  # the duplicate search and the drift sample read rows like this
    picked, whole = got.read_rows(rows), base.read_rows(rows)
    np.testing.assert_array_equal(picked.input_ids.values, whole.input_ids.values)
    np.testing.assert_array_equal(picked.loss_mask.values != 0, whole.loss_mask.values)


def test_shifted_labels_train_the_next_token() -> None:
    """labels[t] = ids[t + 1]: token t + 1 is the target, token 0 of a row never is."""
    labels = ListColumn(np.array([7, -100, 9, 4, -100]), np.array([0, 3, 5]), None, None)
    assert token_mask(labels, 0).values.tolist() == [True, False, True, True, False]
    assert token_mask(labels, 1).values.tolist() == [False, True, False, False, True]


def test_parquet_folders_are_never_written_and_name_their_files(layouts: Path) -> None:
    from drafter_contracts.dataset.reader import open_dataset

    folder = layouts / "parquet_folder"
    before = sorted((p.relative_to(folder).as_posix(), p.stat().st_mtime_ns) for p in folder.rglob("*"))
    ds = open_dataset(folder)
    assert [f.name for f in ds.files] == ["train-00000-of-00002.parquet", "train-00001-of-00002.parquet"]
    assert ds.source == "Parquet" and all(cache_root() in f.parents for f in ds.arrow_files)
    assert sorted((p.relative_to(folder).as_posix(), p.stat().st_mtime_ns) for p in folder.rglob("*")) == before


# --------------------------------------------------------------------------- the suite

@pytest.mark.parametrize("name", list(LAYOUTS))
def test_each_layout_gets_the_speculators_verdicts(pytester: pytest.Pytester, layouts: Path, tokenizer_dir: Path,
                                                   name: str) -> None:
    base, base_out, _ = _run(pytester, layouts, tokenizer_dir, "speculators")
    got, out, _ = _run(pytester, layouts, tokenizer_dir, name)
    leak = int((layouts / "leak.txt").read_text())
    assert [r for r, _ in _rows(base, "mask_on_assistant_spans")] == [leak]
    want, seen = _verdicts(base), _verdicts(got)
    own = {c: seen.pop(c) for c in LAYOUT_CONTRACTS if c in seen}
    assert seen == want
    assert own == {c: "pass" for c in OWN.get(name, ())}
    for check, entry in base["checks"].items():
        assert got["checks"][check]["rows_violating"] == entry["rows_violating"], check
        assert _rows(got, check) == _rows(base, check), check
    assert got["figures"]["tokens"] == base["figures"]["tokens"]
    assert got["figures"]["supervised_tokens"] == base["figures"]["supervised_tokens"]
    assert LAYOUTS[name][3] in got["dataset"]["layout"]
    assert f"layout    {got['dataset']['layout']}" in out
    assert validate_summary(got) == []
    for check in own:  # the terminal lists what summary.json lists, and the speculators run neither
        assert f" {check} " in out and f" {check} " not in base_out and check not in base["checks"]


def test_the_speculators_layout_is_named_too(pytester: pytest.Pytester, layouts: Path, tokenizer_dir: Path) -> None:
    base, out, _ = _run(pytester, layouts, tokenizer_dir, "speculators")
    assert base["dataset"]["layout"] == "speculators (input_ids, loss_mask, seq_len)"
    assert base["dataset"]["format"] == "save_to_disk"
    assert "layout    speculators (input_ids, loss_mask, seq_len)\n" in out


def test_layout_defects_are_named_by_row(pytester: pytest.Pytester, layouts: Path, tokenizer_dir: Path) -> None:
    """A label that is not its id, a hole in attention_mask, loss on padding, a row nested [2, L]."""
    leak = int((layouts / "leak.txt").read_text())
    padding, _, _ = _run(pytester, layouts, tokenizer_dir, "broken_padding")
    checks = padding["checks"]
    form = {e["row"]: e["reason"] for e in checks["layout_well_formed"]["examples"]}
    assert checks["layout_well_formed"]["verdict"] == "fail" and set(form) == {HOLE, PADDING_LOSS}
    assert "not one run of 1s" in form[HOLE] and "padding position takes loss" in form[PADDING_LOSS]
    (bad,) = checks["labels_match_ids"]["examples"]
    assert bad["row"] == BAD_LABEL and "differs from the input_id at its position" in bad["reason"]
    assert bad["position"] == _first_supervised(layouts, BAD_LABEL)
    assert [r for r, _ in _rows(padding, "mask_on_assistant_spans")] == [leak]
    assert padding["figures"]["rows_excluded"] == 1  # the row with a hole: its tokens are not known
    nesting, _, _ = _run(pytester, layouts, tokenizer_dir, "broken_nesting")
    (two,) = nesting["checks"]["layout_well_formed"]["examples"]
    assert two["row"] == TWO_LISTS and "several inner lists" in two["reason"]
    assert nesting["figures"]["rows_excluded"] == 1
    assert [r for r, _ in _rows(nesting, "mask_on_assistant_spans")] == [leak]


def _first_supervised(layouts: Path, row: int) -> int:
    from datasets import load_from_disk

    return load_from_disk(str(layouts / "speculators"))[row]["loss_mask"].index(True)


# --------------------------------------------------------------------------- what cannot be read

def _unreadable(tmp: Path, case: str) -> Path:
    ids = [[5, 6, 7, 8], [9, 10, 11]]
    tables = {
        "no input_ids": pa.table({"tokens": ids, "loss_mask": [[0, 0, 1, 1], [0, 1, 1]]}),
        "no mask source": pa.table({"input_ids": ids, "seq_len": [4, 3]}),
        "labels not integers": pa.table({"input_ids": ids, "labels": [[0.5, 1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]}),
        "nested deeper than [1, L]": pa.table({"input_ids": [[[x]] for x in ids], "loss_mask": [[[[1] * 4]], [[[1] * 3]]]}),
        "neither shifted nor not": pa.table({"input_ids": ids, "labels": [[1, 2, 3, 4], [1, 2, 3]]}),
    }
    if case == "unreadable parquet":
        (tmp / "rows.parquet").write_bytes(b"PAR1 not really")
        return tmp / "rows.parquet"
    if case == "unreadable json lines":
        (tmp / "rows").mkdir()
        (tmp / "rows" / "part-0.jsonl").write_text('{"input_ids": [1, 2], "loss_mask": [0, 1]}\n{"input_ids": [3,\n')
        return tmp / "rows"
    save_table(tables[case], tmp / "data")
    return tmp / "data"


@pytest.mark.parametrize("case, says", [
    ("no input_ids", "no input_ids column (columns seen: tokens (list<int64>), loss_mask (list<int64>))"),
    ("no mask source", "no mask source: none of loss_mask, labels, assistant_masks, completion_mask"),
    ("labels not integers", "labels is list<double>, not lists of signed integers"),
    ("nested deeper than [1, L]", "input_ids, loss_mask nested deeper than [1, L]"),
    ("neither shifted nor not", "0.0% equal the input_id at their position and 0.0% the next one"),
    ("unreadable parquet", "rows.parquet: not a readable Parquet file"),
    ("unreadable json lines", "part-0.jsonl: not a readable JSON Lines file"),
])
def test_an_unreadable_layout_is_one_line_exit_4(usage_run: Any, tmp_path: Path, tokenizer_dir: Path, case: str,
                                                 says: str) -> None:
    run = usage_run(f"--dataset-path={_unreadable(tmp_path, case)}", f"--tokenizer={tokenizer_dir}", "-n", "0")
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    assert len(run.errors) == 1 and says in run.errors[0], run.errors
    if not case.startswith("unreadable"):
        assert "the layouts read:" in run.errors[0]


def test_init_pins_the_layouts_columns(pytester: pytest.Pytester, layouts: Path, tokenizer_dir: Path,
                                       tmp_path: Path) -> None:
    """init pins the raw columns the layout has, as found ([1, L] types included); the pinned contract passes
    its own layout and fails another's schema."""
    from datasets import load_from_disk

    from drafter_contracts.cli.init import run_init

    leak = int((layouts / "leak.txt").read_text())
    for name, pinned in (("modelopt", 'labels = "list<int64>"'), ("specforge", 'input_ids = "list<list<int64>>"')):
        clean = tmp_path / name  # init wants a known-good dataset: the rows without the leak
        save_table(load_from_disk(str(layouts / name)).data.table.slice(0, leak), clean)
        seen, contract = run_init(str(clean), str(tmp_path / f"{name}.toml"), str(tokenizer_dir))
        assert pinned in contract.read_text() and seen.rows_at_max == 3  # rows as long as the longest row
        result, own = run_inprocess(pytester, f"--dataset-path={clean}", f"--contract={contract}", "-n", "0")
        assert result.ret == 0 and own["checks"]["schema"]["verdict"] == "pass", result.stdout.str()[-2000:]
    result, other = run_inprocess(pytester, f"--dataset-path={layouts / 'speculators'}",
                                  f"--contract={tmp_path / 'modelopt.toml'}", "-n", "0")
    assert other["checks"]["schema"]["verdict"] == "fail"
    assert "missing column labels" in other["checks"]["schema"]["messages"][0]


def test_hub_style_splits_are_chosen_like_a_dataset_dict(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from drafter_contracts.dataset.reader import open_dataset
    from drafter_contracts.errors import UsageProblem

    (tmp_path / "data").mkdir()
    for split, rows in (("train", 3), ("test", 2)):
        table = pa.table({"input_ids": [[1, 2, 3]] * rows, "loss_mask": [[0, 1, 1]] * rows})
        pq.write_table(table, tmp_path / "data" / f"{split}-00000-of-00001.parquet")
    with pytest.raises(UsageProblem, match="holds the splits test, train .* choose one with --dataset-split"):
        open_dataset(tmp_path)
    test = open_dataset(tmp_path, "test")
    assert test.num_rows == 2 and [f.name for f in test.files] == ["test-00000-of-00001.parquet"]
    with pytest.raises(UsageProblem, match="its splits are test, train"):
        open_dataset(tmp_path, "valid")
    (tmp_path / "rows.json").write_text('{"input_ids": [5, 6], "completion_mask": [0, 1]}\n')
    one = open_dataset(tmp_path / "rows.json")  # a JSON Lines file passed alone
    assert one.path == tmp_path and one.given == tmp_path / "rows.json" and one.source == "JSON Lines"
    assert one.layout.describe() == "completion_mask (0/1 per token), seq_len derived from the list length"


def test_odd_rows_of_a_padded_layout_are_verdicts(pytester: pytest.Pytester, layouts: Path, tokenizer_dir: Path,
                                                  tmp_path: Path) -> None:
    """Nulls, skewed lengths, a row of padding only, padding on both sides: each named by one contract, by row,
    and left out of the others; never a tool error."""
    from datasets import load_from_disk

    table = load_from_disk(str(layouts / "right_padded")).data.table.slice(0, 40)
    rows = table.to_pylist()
    rows[1]["labels"] = None
    rows[2]["attention_mask"] = None
    rows[3]["attention_mask"][5] = None
    rows[4]["labels"] = rows[4]["labels"][:-3]
    rows[5]["attention_mask"] = rows[5]["attention_mask"][:-1]
    rows[6]["attention_mask"] = [0] * len(rows[6]["attention_mask"])
    rows[7] = {"input_ids": [], "labels": [], "attention_mask": []}
    rows[8]["attention_mask"][:2] = [0, 0]  # padding at both ends
    save_table(pa.Table.from_pylist(rows, schema=table.schema), tmp_path / "odd")
    result, summary = run_inprocess(pytester, f"--dataset-path={tmp_path / 'odd'}", f"--tokenizer={tokenizer_dir}",
                                    "-n", "0")
    assert "drafter-contracts bug" not in result.stdout.str()
    named = {name: {e["row"]: e["reason"] for e in c["examples"]} for name, c in summary["checks"].items()}
    assert named["no_nulls"] == {1: "labels is null", 2: "attention_mask is null",
                                 3: "attention_mask has null elements"}
    assert named["no_empty_rows"] == {6: "row has no tokens", 7: "row has no tokens"}
    assert named["lengths_agree"] == {4: "len(input_ids) != len(labels)"}
    assert set(named["layout_well_formed"]) == {5, 6, 8}
    assert "length differs" in named["layout_well_formed"][5] and "not one run" in named["layout_well_formed"][8]
    assert summary["figures"]["rows_excluded"] == 8
    assert summary["checks"]["labels_match_ids"]["verdict"] == "pass"
