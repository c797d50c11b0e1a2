"""drafter-contracts init: a contract pinned to a known-good dataset, and the gate it makes.

The pinned file must load as a contract, say what the dataset holds, pass that dataset, and fail a
dataset that moved (fewer rows, longer rows, another dtype).
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from drafter_contracts.cli.main import main
from drafter_contracts.contract import load_contract
from drafter_contracts.cli.init import Observed, render_contract


@pytest.fixture(scope="module")
def pinned(tmp_path_factory, clean_dataset, tokenizer_dir) -> Path:
    out = tmp_path_factory.mktemp("init") / "q36.toml"
    assert main(["init", str(clean_dataset), "--tokenizer", str(tokenizer_dir), "-o", str(out)]) == 0
    return out


def test_the_file_pins_what_the_dataset_holds(pinned, clean_dataset, tokenizer_dir):
    doc = tomllib.loads(pinned.read_text())
    assert doc["dataset"]["expected_count"] == 2000 and doc["dataset"]["count_tolerance"] == "1%"
    assert doc["schema"] == {"input_ids": "list<int32>", "loss_mask": "list<bool>", "seq_len": "int64"}
    assert doc["lengths"]["min_len"] == 21 and doc["lengths"]["max_len"] == 4096
    assert doc["lengths"]["min_supervised"] >= 1
    assert doc["tokenizer"]["path"] == str(tokenizer_dir) and doc["tokenizer"]["template_profile"] == "chatml"
    assert doc["tokenizer"]["vocab_size"] == 248_077
    text = pinned.read_text()
    assert "# Template profile chosen: {" in text and '"source": "builtin"' in text
    assert "#   assistant" in text and "(100.0%)" in text  # the observed per-role supervised totals
    for line in text.splitlines():  # every key carries its comment
        if "=" in line and not line.startswith("#") and not line.startswith("description"):
            assert "#" in line, line
    c = load_contract(pinned)
    assert c.expected_count == 2000 and c.max_len == 4096
    assert c.mask.convention == "speculators-regex" and c.mask.completeness == "all"  # inferred from the fixture's masks


def test_the_pinned_contract_passes_its_dataset(pytester, pinned, clean_dataset):
    result = pytester.runpytest_inprocess(f"--dataset-path={clean_dataset}", f"--contract={pinned}",
                                          "--report-dir=reports", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()[-3000:]
    summary = json.loads((pytester.path / "reports" / "summary.json").read_text())
    assert summary["checks"]["row_count"]["verdict"] == "pass"
    assert summary["checks"]["tokenizer_drift"]["verdict"] == "pass"  # the tokenizer came with the contract
    assert summary["contract"]["max_len_source"] == "contract"


def test_the_pinned_contract_fails_a_dataset_that_moved(pytester, pinned, clean_dataset, tmp_path):
    import datasets

    ds = datasets.load_from_disk(str(clean_dataset))
    fewer = tmp_path / "fewer"
    ds.select(range(1900)).save_to_disk(str(fewer))  # 5% fewer rows: beyond the 1% tolerance
    result = pytester.runpytest_inprocess(f"--dataset-path={fewer}", f"--contract={pinned}", "--report-dir=reports",
                                          "-p", "no:cacheprovider")
    assert result.ret == 1
    summary = json.loads((pytester.path / "reports" / "summary.json").read_text())
    assert {k for k, c in summary["checks"].items() if c["verdict"] == "fail"} == {"row_count"}
    wide = tmp_path / "int64"
    ds.cast_column("input_ids", datasets.List(datasets.Value("int64"))).save_to_disk(str(wide))
    result = pytester.runpytest_inprocess(f"--dataset-path={wide}", f"--contract={pinned}", "--report-dir=reports",
                                          "-p", "no:cacheprovider", "-k", "schema")
    assert result.ret == 1 and "input_ids is list<int64>, contract says list<int32>" in result.stdout.str()


def test_init_refuses_to_overwrite_and_to_write_into_the_dataset(pinned, clean_dataset, tokenizer_dir, capsys):
    assert main(["init", str(clean_dataset), "--tokenizer", str(tokenizer_dir), "-o", str(pinned)]) == 4
    assert "already exists; pass --force" in capsys.readouterr().err
    assert main(["init", str(clean_dataset), "-o", str(clean_dataset / "c.toml")]) == 4
    assert "inside the dataset folder" in capsys.readouterr().err
    assert not (clean_dataset / "c.toml").exists()


def test_init_usage_errors_come_before_reading(tmp_path, clean_dataset, capsys):
    (tmp_path / "tok").mkdir()
    assert main(["init", str(clean_dataset), "--tokenizer", str(tmp_path / "tok"), "-o", str(tmp_path / "c.toml")]) == 4
    err = capsys.readouterr().err
    assert err.count("ERROR:") == 1 and "tokenizer.json is missing" in err
    assert main(["init", str(tmp_path / "nope"), "-o", str(tmp_path / "c.toml")]) == 4
    assert "no such file or directory" in capsys.readouterr().err
    assert main(["init", str(clean_dataset), "--count-tolerance", "lots", "-o", str(tmp_path / "c.toml")]) == 4
    assert not (tmp_path / "c.toml").exists()


def test_init_refuses_a_dataset_with_defective_rows(tmp_path, capsys):
    import datasets

    folder = tmp_path / "bad"
    datasets.Dataset.from_dict({"input_ids": [[1, 2], [], [3]], "loss_mask": [[0, 1], [], [1]],
                                "seq_len": [2, 0, 1]}).save_to_disk(str(folder))
    assert main(["init", str(folder), "-o", str(tmp_path / "c.toml")]) == 1
    assert "not a known-good dataset" in capsys.readouterr().err and not (tmp_path / "c.toml").exists()


def test_init_without_a_tokenizer_pins_types_and_lengths(tmp_path):
    import datasets

    folder = tmp_path / "raw"
    datasets.Dataset.from_dict({"input_ids": [[1, 2, 3], [4, 5]], "loss_mask": [[0, 1, 1], [1, 1]],
                                "seq_len": [3, 2]}).save_to_disk(str(folder))
    out = tmp_path / "c.toml"
    assert main(["init", str(folder), "-o", str(out)]) == 0
    c = load_contract(out)
    from drafter_contracts.dataset.reader import open_dataset

    assert dict(c.columns) == open_dataset(folder).column_types()  # as found (datasets makes input_ids int32)
    assert c.columns["loss_mask"] == "list<int64>"
    assert c.tokenizer is None and (c.min_len, c.max_len) == (2, 3) and c.min_supervised == 2
    assert "No tokenizer was given, so the convention could not be inferred" in out.read_text()


def test_the_mask_section_comes_from_one_swappable_function(tmp_path):
    seen = Observed(tmp_path, 10, {"input_ids": "list<int32>", "loss_mask": "list<bool>"}, seq_len_min=5,
                    seq_len_max=50, min_supervised=1, tokens=200)
    text = render_contract(seen, "t", mask=lambda s: ["[mask]", 'completeness = "all"', "end_of_turn = true"])
    out = tmp_path / "c.toml"
    out.write_text(text)
    c = load_contract(out)
    assert c.mask.completeness == "all" and c.mask.end_of_turn


def test_a_per_turn_dataset_counts_turns_and_says_so(tmp_path, tokenizer_dir, capsys):
    """speculators 0.8+ writes a row per assistant turn: init's counts are turns, and its lines say so."""
    from drafter_testkit.producers import convention_dataset_dir

    per_turn = convention_dataset_dir("speculators-per-turn", 300, 0, 2048)
    out = tmp_path / "per-turn.toml"
    assert main(["init", str(per_turn), "--tokenizer", str(tokenizer_dir), "-o", str(out)]) == 0
    doc = tomllib.loads(out.read_text())
    rows = doc["dataset"]["expected_count"]
    assert rows > 300  # more rows than the 300 conversations it was made from: one per assistant turn
    says = "one per assistant turn: speculators-per-turn rows count turns, not conversations"
    assert says in doc["contract"]["description"] and f"{rows:,} rows ({says})" in capsys.readouterr().out
    line = next(x for x in out.read_text().splitlines() if x.startswith("expected_count"))
    assert says in line
    rejects = next(x for x in out.read_text().splitlines() if "rows each convention rejects" in x)
    counts = [int(n.replace(",", "")) for n in re.findall(r" (\d[\d,]*)(?:,|$)", rejects)]
    assert counts and max(counts) <= rows, rejects  # a row is counted once, whichever rule rejects it
