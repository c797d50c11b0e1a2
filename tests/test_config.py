"""Contract files: precedence, validation, one clear error per mistake."""

from __future__ import annotations

from pathlib import Path

import pytest

from drafter_contracts.contract import builtin_contracts, load_contract, resolve_contract_path

from drafter_contracts.contract.file import Tolerance
from drafter_contracts.errors import UsageProblem

MINIMAL = """
[contract]
name = "t"
[schema]
input_ids = "list<int32>"
loss_mask = "list<bool>"
[lengths]
max_len = 100
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "c.toml"
    p.write_text(text)
    return p


def test_default_contract_fits_any_dataset():
    """Without --contract nothing of one dataset is pinned: no count, no cap, int32 or int64 ids, any 0/1 mask."""
    c = load_contract(resolve_contract_path(None))
    assert c.name == "generic" and c.expected_count is None and c.count_bounds() is None
    assert c.max_len is None and c.tokenizer is None
    assert set(c.columns["input_ids"]) == {"list<int32>", "list<int64>"}
    assert {"list<bool>", "list<int64>", "list<uint8>"} <= set(c.columns["loss_mask"])


def test_example_contract_states_the_qwen36_dataset():
    c = load_contract(resolve_contract_path("qwen3.6-dflash"))
    assert c.name == "qwen3.6-dflash"
    assert c.expected_count == 913_786 and c.count_bounds() == (913_786 - 4_568, 913_786 + 4_568)
    assert dict(c.columns) == {"input_ids": "list<int32>", "loss_mask": "list<bool>", "seq_len": "int64"}
    assert c.max_len == 4096 and c.template_profile == "auto" and not c.mask.end_of_turn


def test_builtin_by_name_and_by_path():
    assert "qwen3.6-dflash" in builtin_contracts()
    assert resolve_contract_path("qwen3.6-dflash") == builtin_contracts()["qwen3.6-dflash"]


def test_command_line_beats_file_beats_default(tmp_path):
    c = load_contract(write(tmp_path, MINIMAL + "min_supervised = 3\n"), {"max_len": 50, "min_supervised": None})
    assert c.max_len == 50  # command line
    assert c.min_supervised == 3  # file
    assert c.min_len == 1  # default


@pytest.mark.parametrize("raw, expected, rows", [("0.5%", Tolerance(0.5, True), 4568), (10, Tolerance(10, False), 10),
                                                 ("25", Tolerance(25, False), 25)])
def test_tolerance(raw, expected, rows):
    t = Tolerance.parse(raw, "x")
    assert t == expected and t.rows(913_786) == rows


@pytest.mark.parametrize("text, fragment", [
    (MINIMAL + "colour = 1\n", "unknown key 'colour' in [lengths]"),
    (MINIMAL + "[extras]\na = 1\n", "unknown table [extras]"),
    (MINIMAL.replace("max_len = 100", 'max_len = "big"'), "max_len must be int, got str"),
    (MINIMAL.replace("max_len = 100", "max_len = true"), "max_len must be int, got bool"),
    (MINIMAL.replace('name = "t"', ""), "missing required value [contract] name"),
    (MINIMAL.replace('input_ids = "list<int32>"', 'input_ids = "list<float>"'), "'list<float>' is not an Arrow type"),
    (MINIMAL.replace('input_ids = "list<int32>"', 'input_ids = "list<int23>"'), "(did you mean 'list<int32>'?)"),
    (MINIMAL.replace('input_ids = "list<int32>"', 'input_ids = []'), "input_ids is an empty list"),
    (MINIMAL + "colur = 1\n", "unknown key 'colur' in [lengths]"),
    (MINIMAL + "max_lne = 1\n", "(did you mean 'max_len'?)"),
    (MINIMAL + "[lenghts]\nmin_len = 1\n", "unknown table [lenghts] (did you mean 'lengths'?)"),
    (MINIMAL + "expected_count = 5\n", "(it belongs in [dataset])"),
    (MINIMAL + '[mask]\nturns = "lats"\n', "(did you mean 'last'?)"),
    (MINIMAL + '[tokenizer]\ntemplate_profile = "lama3"\n', "(did you mean 'llama3'?)"),
    (MINIMAL.replace('input_ids = "list<int32>"\n', ""), "must declare column 'input_ids'"),
    (MINIMAL + "min_len = 200\n", "min_len 200 is larger than max_len 100"),
    (MINIMAL + '[dataset]\ncount_tolerance = "lots"\n', "count_tolerance must be"),
    (MINIMAL + '[tokenizer]\nfamily = "chatml"\n', "unknown key 'family' in [tokenizer]"),
    (MINIMAL + '[tokenizer]\ntemplate_profile = "chatmll"\n', "(did you mean 'chatml'?)"),
    ("[contract\nname=", "not valid TOML"),
])
def test_bad_contract_files_say_what_is_wrong(tmp_path, text, fragment):
    with pytest.raises(UsageProblem) as err:
        load_contract(write(tmp_path, text))
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_contract_file(tmp_path):
    with pytest.raises(UsageProblem, match="no such file"):
        resolve_contract_path(str(tmp_path / "nope.toml"))


def test_non_utf8_contract_is_a_usage_error(tmp_path):
    p = tmp_path / "c.toml"
    p.write_bytes(b'[contract]\nname = "\xff"\n')
    with pytest.raises(UsageProblem, match="not UTF-8"):
        load_contract(p)


@pytest.mark.parametrize("override, fragment", [
    ({"shard_size": 0}, "--shard-size"), ({"max_len": -1}, "--max-len"), ({"expected_count": -3}, "--expected-count"),
])
def test_bad_command_line_values_name_the_option(override, fragment):
    with pytest.raises(UsageProblem) as err:
        load_contract(resolve_contract_path("qwen3.6-dflash"), override)
    assert str(err.value).startswith("command line (") and fragment in str(err.value)


def test_count_tolerance_from_the_command_line():
    c = load_contract(resolve_contract_path(None), {"expected_count": 100, "count_tolerance": "5"})
    assert c.count_bounds() == (95, 105)
    with pytest.raises(UsageProblem, match="--count-tolerance"):
        load_contract(resolve_contract_path(None), {"count_tolerance": "lots"})


def test_content_and_drift_tables(tmp_path):
    import re

    from drafter_contracts.contract import builtin_contracts, load_contract

    from drafter_contracts.contract.file import ContentPolicy
    from drafter_contracts.errors import UsageProblem

    base = builtin_contracts()["qwen3.6-dflash"].read_text().split("\n[content]")[0]
    c = load_contract(builtin_contracts()["qwen3.6-dflash"])
    assert c.content == ContentPolicy() and c.drift.sample_rows == 1000
    path = tmp_path / "c.toml"
    path.write_text(base + '\n[content]\nstrict = true\nplaceholder_replies = ["OK.", "Sure."]\nblock_size = 8\n')
    c = load_contract(path)
    assert c.content.strict and c.content.placeholder_replies == ("OK.", "Sure.") and c.content.block_size == 8
    assert c.to_dict()["content"]["placeholder_replies"] == ("OK.", "Sure.")
    for bad, fragment in (('placeholder_replies = [""]', "list of non-empty strings"),
                          ("placeholder_replies = \"OK.\"", "must be list"),
                          ("block_size = 0", "block_size must be >= 1"),
                          ("colour = 1", "unknown key 'colour' in [content]")):
        path.write_text(base + "\n[content]\n" + bad + "\n")
        with pytest.raises(UsageProblem, match=re.escape(fragment)):
            load_contract(path)
    path.write_text(base + "\n[drift]\nsample_rows = -1\n")
    with pytest.raises(UsageProblem, match="sample_rows must be >= 0"):
        load_contract(path)
    path.write_text(base + "\n[drift]\nsample_tokens = 0\n")
    with pytest.raises(UsageProblem, match="sample_tokens must be >= 1"):
        load_contract(path)


def test_schema_lists_accepted_types(tmp_path):
    c = load_contract(write(tmp_path, MINIMAL.replace('input_ids = "list<int32>"', 'input_ids = ["list<int32>", "list<int64>"]')))
    assert c.columns["input_ids"] == ("list<int32>", "list<int64>")
    assert c.to_dict()["columns"]["input_ids"] == ["list<int32>", "list<int64>"]
    from drafter_contracts.checks.dataset_level import check_schema

    assert check_schema({"input_ids": "list<int64>", "loss_mask": "list<bool>"}, c).ok
    bad = check_schema({"input_ids": "list<int16>", "loss_mask": "list<bool>"}, c)
    assert "input_ids is list<int16>, contract says list<int32> or list<int64>" in bad.message


def test_a_contract_without_max_len_leaves_the_cap_open(tmp_path):
    c = load_contract(write(tmp_path, MINIMAL.replace("max_len = 100", "min_len = 2")))
    assert c.max_len is None and c.max_len_source == "contract"
    from drafter_contracts.engine import observed_cap
    import numpy as np

    seen = observed_cap(c, np.array([5, 17, 9]))
    assert seen.max_len == 17 and seen.max_len_source == "observed"
    assert load_contract(c_path := write(tmp_path, MINIMAL.replace("max_len = 100", "")), {"max_len": 64}).max_len == 64
    assert c_path.is_file()


def test_producer_contracts_accept_what_their_producer_writes():
    """speculators builds ids and mask as torch.long: its raw output is int64 lists."""
    from drafter_contracts.checks.dataset_level import check_schema

    raw = {"input_ids": "list<int64>", "loss_mask": "list<int64>", "seq_len": "int64"}
    for name in ("speculators-regex", "speculators-per-turn", "generation-tags"):
        assert check_schema(raw, load_contract(builtin_contracts()[name])).ok, name
    assert not check_schema(raw, load_contract(builtin_contracts()["qwen3.6-dflash"])).ok  # the example pins its casts


def test_unknown_option_values_suggest_the_closest():
    from drafter_contracts.contract import parse_mask_overrides

    with pytest.raises(UsageProblem, match=r"did you mean 'completeness'"):
        parse_mask_overrides(["completenes=all"])
    with pytest.raises(UsageProblem, match=r"did you mean 'last'"):
        parse_mask_overrides(["turns=lst"])
    with pytest.raises(UsageProblem, match=r"did you mean 'qwen3.6-dflash'"):
        resolve_contract_path("qwen3.6-dflsh")


def test_contract_auto_is_the_generic_contract_inferring_the_convention():
    from drafter_contracts.contract import builtin_contracts, load_contract, resolve_contract_path

    path = resolve_contract_path("auto")
    assert path == builtin_contracts()["generic"]
    assert load_contract(path).mask.convention == "auto"


def test_a_key_nothing_reads_is_refused_with_what_to_write_instead(tmp_path):
    path = write(tmp_path, MINIMAL + '\n[tokenizer]\nfamily = "chatml"\n')
    with pytest.raises(UsageProblem, match=r"unknown key 'family' in \[tokenizer\] \(the template profile comes from the "
                                           r"tokenizer's chat template; template_profile = NAME forces a built-in one\)"):
        load_contract(path)
    assert "family" not in load_contract(write(tmp_path, MINIMAL)).to_dict()  # summary.json keeps no such key
