"""Opening saved datasets read-only, planning shards, and reading them as flat numpy."""

from __future__ import annotations

import json

import datasets
import numpy as np
import pytest

from drafter_contracts.dataset.reader import open_dataset, plan_shards
from drafter_contracts.dataset.columns import Shard
from drafter_contracts.errors import UsageProblem


def test_plan_covers_every_row_once():
    shards = plan_shards(10_001, 1_000)
    assert [s.id for s in shards[:2]] == ["shard-00000[0:1000]", "shard-00001[1000:2000]"]
    covered = np.concatenate([np.arange(s.start, s.stop) for s in shards])
    np.testing.assert_array_equal(covered, np.arange(10_001))
    assert plan_shards(0, 10) == []


def test_plan_caps_tokens_per_shard():
    lengths = np.array([5, 5, 5, 100, 5, 5, 5, 5], dtype=np.int64)
    shards = plan_shards(len(lengths), 3, lengths, max_tokens=12)
    assert [(s.start, s.stop) for s in shards] == [(0, 2), (2, 3), (3, 4), (4, 6), (6, 8)]
    assert plan_shards(len(lengths), 3, lengths, max_tokens=10**9) == plan_shards(len(lengths), 3)


def test_row_lengths_come_from_offsets(clean_dataset):
    ds = open_dataset(clean_dataset)
    ref = datasets.load_from_disk(str(clean_dataset))
    np.testing.assert_array_equal(ds.row_lengths(), np.array(ref["seq_len"]))


def test_shards_read_what_datasets_reads(clean_dataset):
    ds = open_dataset(clean_dataset)
    ref = datasets.load_from_disk(str(clean_dataset))
    assert ds.num_rows == len(ref) and len(ds.files) >= 2
    # A shard that straddles the two Arrow files.
    first_file_rows = ds._tables[0].num_rows
    shard = Shard(0, first_file_rows - 3, first_file_rows + 2)
    a = ds.read(shard)
    for local, row in enumerate(range(shard.start, shard.stop)):
        ids = a.input_ids.values[a.input_ids.offsets[local]:a.input_ids.offsets[local + 1]]
        mask = a.loss_mask.values[a.loss_mask.offsets[local]:a.loss_mask.offsets[local + 1]]
        assert ids.tolist() == ref[row]["input_ids"]
        assert mask.tolist() == ref[row]["loss_mask"]
        assert a.seq_len[local] == ref[row]["seq_len"]


def test_missing_path(tmp_path):
    with pytest.raises(UsageProblem, match="no such file or directory"):
        open_dataset(tmp_path / "nope")


def test_not_a_dataset_folder(tmp_path):
    with pytest.raises(UsageProblem, match="not a saved dataset, no state.json"):
        open_dataset(tmp_path)


def test_data_files_that_are_not_datasets(tmp_path):
    """Parquet / JSON Lines files are read (tests/test_layouts.py); one pyarrow cannot read, or without
    input_ids, is a usage error naming the file."""
    bad = tmp_path / "data.parquet"
    bad.write_text("{}")
    with pytest.raises(UsageProblem, match="data.parquet: not a readable Parquet file .*save_to_disk"):
        open_dataset(bad)
    rows = tmp_path / "data.jsonl"
    rows.write_text("{}")
    with pytest.raises(UsageProblem, match="no input_ids column"):
        _ = open_dataset(rows).layout
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(UsageProblem, match="is .txt file, not a dataset this tool reads"):
        open_dataset(tmp_path / "notes.txt")


def test_dataset_dict_needs_a_split(tmp_path):
    dd = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"input_ids": [[1]]}),
                               "test": datasets.Dataset.from_dict({"input_ids": [[2]]})})
    dd.save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(UsageProblem, match="choose one with --dataset-split"):
        open_dataset(tmp_path / "dd")
    with pytest.raises(UsageProblem, match="its splits are"):
        open_dataset(tmp_path / "dd", "valid")
    assert open_dataset(tmp_path / "dd", "test").num_rows == 1


def test_missing_arrow_file(tmp_path):
    datasets.Dataset.from_dict({"input_ids": [[1]]}).save_to_disk(str(tmp_path / "d"))
    state = json.loads((tmp_path / "d" / "state.json").read_text())
    for entry in state["_data_files"]:
        (tmp_path / "d" / entry["filename"]).unlink()
    with pytest.raises(UsageProblem, match="is missing"):
        open_dataset(tmp_path / "d")


def test_shards_spanning_files_keep_nulls_aligned(tmp_path):
    import pyarrow as pa

    rows = [[1, 2, 3], None, [4], [], [5, None, 6], [7, 8]] * 5
    t = pa.table({"input_ids": pa.array(rows, pa.list_(pa.int32()))})
    datasets.Dataset(t).save_to_disk(str(tmp_path / "d"), num_shards=4)
    ds = open_dataset(tmp_path / "d")
    assert len(ds.files) == 4
    for start, stop in [(0, 30), (3, 17), (7, 8), (29, 30)]:
        col = ds.read(Shard(0, start, stop)).input_ids
        for i, row in enumerate(rows[start:stop]):
            got = col.values[col.offsets[i]:col.offsets[i + 1]].tolist()
            assert got == [0 if x is None else x for x in (row or [])]
            assert bool(col.null_rows is not None and col.null_rows[i]) == (row is None)
            if col.null_elements is not None:
                assert col.null_elements[col.offsets[i]:col.offsets[i + 1]].tolist() == [x is None for x in (row or [])]


def test_take_rows_reads_only_the_rows_asked_for(tmp_path):
    """Rows across several files and record batches come back in order, equal to the saved rows."""
    rows = [{"input_ids": list(range(i % 7 + 1)), "loss_mask": [i % 2 == 0] * (i % 7 + 1), "seq_len": i % 7 + 1}
            for i in range(300)]
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "d"), num_shards=3)
    d = open_dataset(tmp_path / "d")
    assert d.table.column("input_ids").num_chunks >= 3
    picked = np.array([0, 1, 99, 100, 101, 250, 299])
    got = d.take_rows(picked).to_pylist()
    assert got == [rows[i] for i in picked]
    assert d.take_rows(np.zeros(0, dtype=np.int64)).num_rows == 0
