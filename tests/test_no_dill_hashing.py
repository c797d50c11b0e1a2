"""No table the project builds is hashed by ``datasets`` with dill.

A ``datasets.Dataset`` made without a fingerprint is fingerprinted by pickling its state with dill,
which cannot pickle pyarrow's types on some Pythons (``Can't pickle <class 'MonthDayNano'>``, seen on
Python 3.12). Every writer of the project's datasets gives a fingerprint (``demo.dataset.save_table``);
here dill hashing is made to fail, and each writer must still write its dataset.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest


@pytest.fixture
def no_dill_hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets.arrow_dataset

    def refuse(dataset):  # noqa: ANN001
        raise AssertionError("a Dataset was built without a fingerprint: datasets hashes it with dill")

    monkeypatch.setattr(datasets.arrow_dataset, "generate_fingerprint", refuse)


ROWS = [([248045, 846, 198, 248046], [False, True, True, False]), ([5, 6, 7], [True, True, False])]


def test_the_demo_writer(no_dill_hashing: None, tmp_path: Path) -> None:
    from datasets import load_from_disk

    from drafter_contracts.demo.dataset import write_dataset

    out = write_dataset(ROWS, tmp_path / "demo")
    assert load_from_disk(str(out))["input_ids"] == [r[0] for r in ROWS]


def test_the_test_kit_writers(no_dill_hashing: None, tmp_path: Path) -> None:
    from drafter_testkit.real_producers import write_dataset
    from drafter_testkit.speculators_producer import write_rows
    from drafter_testkit.usage_cases import tiny_dataset

    write_dataset(ROWS, tmp_path / "producer")
    write_rows(ROWS, tmp_path / "cast", cast=True)
    write_rows(ROWS, tmp_path / "long", cast=False)
    tiny_dataset(tmp_path / "tiny")
    from drafter_contracts.dataset.reader import open_dataset

    assert open_dataset(tmp_path / "cast").column_types()["input_ids"] == "list<int32>"
    assert open_dataset(tmp_path / "long").column_types()["loss_mask"] == "list<int64>"


def test_the_guard_would_catch_a_writer_without_a_fingerprint(no_dill_hashing: None) -> None:
    from datasets import Dataset

    with pytest.raises(AssertionError, match="without a fingerprint"):
        Dataset.from_dict({"input_ids": [[1, 2]]})


def test_same_table_same_fingerprint() -> None:
    from drafter_contracts.demo.dataset import table_fingerprint

    a = pa.table({"x": [[1, 2], [3]]})
    assert table_fingerprint(a) == table_fingerprint(pa.table({"x": [[1, 2], [3]]}))
    assert table_fingerprint(a) != table_fingerprint(pa.table({"x": [[1, 2], [4]]}))
