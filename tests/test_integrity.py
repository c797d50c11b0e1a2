"""checks/integrity.py as pure functions: offsets located to their first bad row, Arrow's validation per
column, the metadata datasets reads, and what a damaged batch keeps every other contract from."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow as pa
import pytest

from drafter_contracts.dataset.reader import open_dataset
from drafter_testkit.corruption import dataset_info_features, small_dataset_dir
from drafter_contracts.checks.integrity import (Defect, Integrity, _check_metadata_with_datasets, check_batch, check_metadata,
                                         first_bad_offset, scan_tables)


@pytest.mark.parametrize("offsets, n, row, words", [
    ([0, 3, 5, 9], 9, None, None),
    ([0, 3, 50, 9], 9, 1, "past the end of the 9 values"),
    ([0, 3, 2, 9], 9, 1, "before it starts (3): offsets decrease"),
    ([-1, 3, 5], 9, 0, "outside the 9 values"),
    ([0, 3, 5, 12], 9, 2, "past the end"),
    ([0, 5, -7, 9], 9, 1, "offsets decrease"),
    ([0], 0, None, None),
])
def test_the_first_bad_row_of_a_list_column(offsets, n, row, words):
    found = first_bad_offset(np.array(offsets, np.int32), n)
    if row is None:
        assert found is None
    else:
        assert found[0] == row and words in found[1]


def _batch(offsets: list[int], values: int) -> pa.RecordBatch:
    ids = pa.Array.from_buffers(pa.list_(pa.int32()), len(offsets) - 1,
                                [None, pa.py_buffer(np.array(offsets, np.int32).tobytes())],
                                children=[pa.array(np.arange(values, dtype=np.int32))])
    return pa.RecordBatch.from_arrays([ids, pa.array(np.arange(len(offsets) - 1, dtype=np.int64))], ["input_ids", "seq_len"])


def test_a_batch_is_checked_column_by_column_and_rows_count_globally():
    assert check_batch(_batch([0, 2, 4], 4), "f.arrow", 100) == []
    (d,) = check_batch(_batch([0, 2, 40, 4], 4), "f.arrow", 100)
    assert (d.file, d.column, d.row, d.rows) == ("f.arrow", "input_ids", 101, (100, 103))
    assert d.line() == ("f.arrow, column input_ids, row 101: it ends at list offset 40, past the end of the 4 values "
                        "(an overwritten offset) (rows 100..102 are not read by the other contracts)")


def test_damaged_batches_gate_the_rows_that_touch_them():
    table = pa.Table.from_batches([_batch([0, 1, 2], 2), _batch([0, 9, 2], 2), _batch([0, 1, 2], 2)])
    scan = scan_tables([("f.arrow", table)])
    assert scan.rows == 6 and scan.batches == 3 and scan.bad_ranges.tolist() == [[2, 4]]
    assert scan.unreadable(0, 2) is None and scan.unreadable(4, 6) is None
    assert scan.unreadable(3, 5) == "invalid Arrow buffers in f.arrow rows 2..3 (see test_arrow_integrity)"
    assert scan.usable_lengths(np.array([1, 1, 1, 8, 1, 1])).tolist() == [1, 1, 0, 0, 1, 1]
    result = scan.result()
    assert not result.ok and result.rows_checked == 6 and result.rows_violating == 2
    assert result.by_reason == {"list offset past the end of the values": 1}
    assert Integrity().result().ok


def test_metadata_that_datasets_would_accept_is_decided_without_importing_it(tmp_path):
    """The plain path (JSON features against Arrow types) and datasets' own code agree on the clean
    campaign dataset and on each way dataset_info.json can declare other features."""
    import random

    clean = small_dataset_dir()
    ds = open_dataset(clean)
    assert check_metadata(ds.path, ds.schema) == [] == _check_metadata_with_datasets(ds.path, ds.schema)
    for seed in range(12):
        folder = tmp_path / f"info-{seed}"
        shutil.copytree(clean, folder)
        what = dataset_info_features(folder, random.Random(seed))
        got = check_metadata(folder, ds.schema)
        assert len(got) == 1 and got[0].file == "dataset_info.json" and got[0].row is None, what
        assert "datasets.load_from_disk" in got[0].what


def test_dataset_info_without_features_is_what_datasets_infers(tmp_path):
    folder = tmp_path / "ds"
    shutil.copytree(small_dataset_dir(), folder)
    doc = json.loads((folder / "dataset_info.json").read_text())
    doc.pop("features")
    (folder / "dataset_info.json").write_text(json.dumps(doc))
    assert check_metadata(folder, open_dataset(folder).schema) == []
    (folder / "dataset_info.json").unlink()
    assert check_metadata(folder, open_dataset(folder).schema) == [
        Defect("dataset_info.json", None, None, "missing; datasets.load_from_disk refuses the folder without it")]


def test_the_inference_sample_avoids_damaged_batches():
    def damaged(*spans):
        return Integrity([Defect("f", "input_ids", a, "x", (a, b)) for a, b in spans], rows=100)

    assert damaged().sound_window(10, 100) == (0, 10)
    assert damaged((0, 20)).sound_window(10, 100) == (20, 30)  # a damaged first batch is stepped over
    assert damaged((0, 20), (25, 40)).sound_window(10, 100) == (20, 25)  # the sample stops before the next one
    assert damaged((0, 100)).sound_window(10, 100) == (100, 100)  # nothing sound: an empty sample
