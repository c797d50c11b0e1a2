"""Conventions learnt from the rows: a producer no preset describes (arctic-training's ``str.find``, a
content-only mask) is learnt key by key by ``--contract auto`` and ``init``, its defective rows are named,
the presets are still what their datasets are learnt as, a lossy convention warns, and a hint on a wrong
contract names a policy that fits.

The datasets are real renderings through the Qwen3.6 template with masks from character offsets
(``drafter_testkit/producers.py``: ``LEARNED``); verdicts come from the engine (the code a shard's
test calls), and a few from pytest itself.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

from drafter_contracts.cli.main import main
from drafter_contracts.checks.convention_losses import losses_verdict
from drafter_contracts.contract.mask_rules import separator_tokens, tool_call_separator_tokens
from drafter_contracts.contract import MaskPolicy, builtin_contracts, load_contract, parse_mask_overrides
from drafter_contracts.contract.presets import KEY_ORDER, PRESETS
from drafter_contracts.dataset.reader import open_dataset
from drafter_contracts.engine import ROW_CHECKS, Engine
from drafter_contracts.errors import UsageProblem
from drafter_contracts.spans.labels import Labels, Role
from drafter_contracts.spans.turns import MaskFacts
from drafter_testkit.producers import CONVENTIONS, convention_dataset_dir, defective_rows, learned_dataset_dir
from helpers import run_inprocess, section_lines

MAX_LEN = 2048
ON, COVERS = "mask_on_assistant_spans", "mask_covers_assistant_spans"


@pytest.fixture(scope="session")
def arctic() -> Path:
    return learned_dataset_dir("arctic-training", 300, 0, MAX_LEN)


@pytest.fixture(scope="session")
def arctic_defective() -> Path:
    return learned_dataset_dir("arctic-training", 300, 0, MAX_LEN, defective=True)


@pytest.fixture(scope="session")
def content_only() -> Path:
    return learned_dataset_dir("content-only", 300, 0, MAX_LEN)


def failing_rows(path: Path, contract, vocab) -> tuple[Engine, dict[str, list[int]], dict[str, str]]:
    """The engine, each failing per-row contract's rows (every one), and its hint."""
    from drafter_contracts import results

    engine = Engine(open_dataset(str(path)), contract, vocab)
    rows: dict[str, list[int]] = {}
    hints: dict[str, str] = {}
    keep, results.MAX_EXAMPLES = results.MAX_EXAMPLES, 1 << 20
    try:
        for shard in engine.shards:
            for check in ROW_CHECKS:
                r = engine.shard_check(shard, check)
                if not r.ok and not r.skipped:
                    rows.setdefault(check, []).extend(e.row for e in r.examples)
                    hints[check] = r.hint
    finally:
        results.MAX_EXAMPLES = keep
    return engine, {k: sorted(v) for k, v in rows.items()}, hints


def auto() -> object:
    return load_contract(builtin_contracts()["generic"], {"max_len": MAX_LEN})


# --------------------------------------------------------------------------- the keys


def test_separator_keys_parse_and_refuse_other_words():
    assert parse_mask_overrides(["reasoning_separator=context", "tool-call-separator=optional"]) == {
        "reasoning_separator": "context", "tool_call_separator": "optional"}
    assert MaskPolicy().reasoning_separator == "content" == MaskPolicy().tool_call_separator  # the presets' meaning
    with pytest.raises(UsageProblem, match="reasoning_separator must be one of 'content', 'supervised', 'context'"):
        parse_mask_overrides(["reasoning_separator=false"])
    for preset in PRESETS:  # every preset keeps the oracle's label: a separator is content
        assert load_contract(builtin_contracts()[preset]).mask.reasoning_separator == "content"


def test_separators_are_the_whitespace_beside_reasoning_and_tool_call_blocks():
    R, A, T, E = Role.REASONING, Role.ASSISTANT, Role.TOOL_CALL, Role.ASSISTANT_END
    role = np.array([R, R, A, A, A, T, T, A, T, E, R, A], dtype=np.uint8)  # two rows: 0..9, 10..11
    ids = np.array([1, 1, 9, 9, 2, 1, 1, 9, 1, 1, 1, 9])  # 9: a newline token
    lead = np.zeros(10, dtype=bool)
    lead[9] = True
    labels = Labels(role, np.zeros(len(role), bool), np.zeros(len(role), np.uint8))
    facts, offsets = MaskFacts(ids, lead), np.array([0, 10, 12])
    assert np.flatnonzero(separator_tokens(facts, labels, offsets)).tolist() == [2, 3, 11]
    # the blank between two calls; the text before the first call is content, not whitespace
    assert np.flatnonzero(tool_call_separator_tokens(facts, labels, offsets)).tolist() == [7]


# --------------------------------------------------------------------------- auto


#: What arctic-training's rule supervises, as the keys learnt from its rows.
ARCTIC = dict(header=False, content=True, reasoning_final=True, tool_calls=False, end_of_turn=True,
              newline_after_end=False, turns="all", completeness="all", prompt_context="off",
              reasoning_separator="optional")


def test_auto_learns_the_arctic_policy_and_passes_its_clean_rows(arctic, vocab):
    engine, failing, _ = failing_rows(arctic, auto(), vocab)
    policy, how = engine.contract.mask, engine.contract.mask_how
    assert engine.dataset.num_rows == 231 and failing == {}, failing
    assert {k: getattr(policy, k) for k in ARCTIC} == ARCTIC, policy
    assert set(policy.optional) == {"reasoning", "end_of_turn"}  # inline <think> rows; tool-call turns end unsupervised
    assert how.startswith("convention = auto: learnt from the first 231 rows: header=false content=true")
    assert "nearest preset generation-tags, differing in" in how and "it rejects none of the 231 rows" in how
    assert policy.convention == "custom"


def test_auto_names_the_defective_rows(arctic_defective, vocab):
    bad = defective_rows(arctic_defective)
    assert len(bad) == 11
    engine, failing, _ = failing_rows(arctic_defective, auto(), vocab)
    assert failing[ON] == bad and failing[COVERS] == bad  # the user's copy supervised, the reply left out
    assert set(failing) <= {ON, COVERS, "min_supervised"}
    how = engine.contract.mask_how
    assert f"it rejects {len(bad)} of 231 rows (the defective minority): rows {bad[0]} (user token supervised" in how
    assert engine.contract.mask.tool_calls is False  # learnt from the clean majority, as on the clean rows


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_presets_are_still_what_their_datasets_are_learnt_as(convention, vocab):
    engine, failing, _ = failing_rows(convention_dataset_dir(convention, 300, 0, MAX_LEN), auto(), vocab)
    assert engine.contract.mask.convention == convention and failing == {}
    assert f"(equal to {convention})" in engine.contract.mask_how  # the learnt keys are the preset's, key by key


def test_content_only_is_learnt_tight(content_only, vocab):
    engine, failing, _ = failing_rows(content_only, auto(), vocab)
    p = engine.contract.mask
    assert failing == {} and p.optional == () and p.content and not p.end_of_turn and not p.tool_calls
    assert (p.reasoning_final, p.reasoning_earlier, p.reasoning_separator, p.tool_call_separator) == (
        False, False, "context", "context")
    assert "nearest preset speculators-regex" in engine.contract.mask_how


# --------------------------------------------------------------------------- init


@pytest.fixture(scope="module")
def pinned(tmp_path_factory, arctic, tokenizer_dir) -> Path:
    out = tmp_path_factory.mktemp("init-arctic") / "arctic.toml"
    assert main(["init", str(arctic), "--tokenizer", str(tokenizer_dir), "-o", str(out)]) == 0
    return out


def test_init_writes_the_learnt_policy_key_by_key(pinned):
    text = pinned.read_text()
    table = tomllib.loads(text)["mask"]
    assert table["convention"] == "custom" and set(table) == {"convention", *KEY_ORDER}
    section = text.split("[mask]")[1].split("\n[")[0]
    for key in KEY_ORDER:  # every key written, with what it means and what decided it
        line = next(x for x in section.splitlines() if x.startswith(f"{key} = "))
        assert "#" in line, line
    assert "(learnt: optional)" in text and "nearest preset generation-tags" in text
    assert re.search(r"#   reasoning +earlier 0/\d[\d,]* +last [\d,]+/[\d,]+", text)  # the measured shares


def test_init_contract_passes_its_rows_and_fails_the_defective_ones_row_for_row(pinned, arctic, arctic_defective,
                                                                                 vocab):
    contract = load_contract(pinned)
    _, clean, _ = failing_rows(arctic, contract, vocab)
    assert clean == {}
    _, failing, _ = failing_rows(arctic_defective, contract, vocab)
    bad = defective_rows(arctic_defective)
    assert failing[ON] == bad and failing[COVERS] == bad
    assert set().union(*failing.values()) == set(bad)  # min_supervised: a defective row's short user copy


def test_init_refuses_rows_that_break_the_convention(arctic_defective, tokenizer_dir, tmp_path, capsys):
    out = tmp_path / "c.toml"
    assert main(["init", str(arctic_defective), "--tokenizer", str(tokenizer_dir), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "rows break the mask convention the other rows follow (row 19: user token supervised" in err
    assert not out.exists()


# --------------------------------------------------------------------------- hints and losses


def test_a_hint_on_a_wrong_contract_names_a_fitting_policy(arctic, vocab):
    regex = load_contract(builtin_contracts()["speculators-regex"], {"max_len": MAX_LEN})
    _, failing, hints = failing_rows(arctic, regex, vocab)
    assert set(failing) == {ON, COVERS}
    for hint in hints.values():
        assert "no built-in convention fits" not in hint and "it rejects none of the 231 rows" in hint
    flags = re.findall(r"--mask-policy (\S+?);?(?= |$)", hints[COVERS])
    assert "reasoning_separator=optional" in flags and "tool_calls=false" in flags, hints[COVERS]
    fixed = load_contract(builtin_contracts()["speculators-regex"],
                          {"max_len": MAX_LEN, "mask": parse_mask_overrides(flags)})
    assert failing_rows(arctic, fixed, vocab)[1] == {}  # the named flags make the same rows pass


def test_a_hint_says_which_rows_no_policy_explains(arctic_defective, vocab):
    regex = load_contract(builtin_contracts()["speculators-regex"], {"max_len": MAX_LEN})
    hint = failing_rows(arctic_defective, regex, vocab)[2][ON]
    assert "no policy explains 11 of them: they supervise text no convention trains on (user text: 11 rows)" in hint


def test_losses_of_a_legal_convention_are_counted_per_part():
    tokens = {"assistant": 900, "reasoning": 400, "tool_call": 100, "assistant_end": 100}
    supervised = {"assistant": 900, "assistant_end": 100}
    content_only = MaskPolicy(reasoning_final=False, reasoning_earlier=False, tool_calls=False, end_of_turn=True)
    state = {"combos": [10, 20, 0, 5, 0, 0, 0, 0], "first": {"1": [[3, 40]], "2": [[7, 12]]}}
    v = losses_verdict(tokens, supervised, content_only, state, 35, strict=False)
    r = v.result
    assert r.report_only and r.rows_violating == 25 and [e.row for e in r.examples] == [3, 7]
    assert r.by_reason == {
        "reasoning never trained (policy: reasoning_final = reasoning_earlier = false): 400 of 400 tokens untrained "
        "(100.0%), 26.7% of the assistant's tokens": 25,
        "tool calls never trained (policy: tool_calls = false): 100 of 100 tokens untrained (100.0%), "
        "6.7% of the assistant's tokens": 5}
    assert v.figures["lost"]["reasoning"]["untrained_share"] == 1.0
    strict = losses_verdict(tokens, supervised, content_only, state, 35, strict=True).result
    assert not strict.report_only and "never trains on reasoning never trained" in strict.message
    assert losses_verdict(tokens, {**supervised, "reasoning": 1, "tool_call": 1}, MaskPolicy(end_of_turn=True), state,
                          35, strict=True).result.ok  # every part trained somewhere: nothing lost


def test_a_lossy_convention_warns_with_its_shares_and_fails_when_strict(pytester, content_only, tokenizer_dir, tmp_path):
    result, summary = run_inprocess(pytester, f"--dataset-path={content_only}", f"--tokenizer={tokenizer_dir}",
                                    "--contract=auto", f"--max-len={MAX_LEN}")
    assert result.ret == 0, result.stdout.str()[-3000:]
    c = summary["checks"]["convention_losses"]
    assert c["verdict"] == "warn" and c["report_only"]
    assert set(c["figures"]["lost"]) == {"reasoning", "tool calls", "end-of-turn token"}
    assert all(f["untrained_share"] == 1.0 for f in c["figures"]["lost"].values())
    out = result.stdout.str()
    assert "WARN convention_losses" in out and "end-of-turn token never trained (policy: end_of_turn = false)" in out
    assert "mask      convention = auto: learnt from the first 297 rows: header=false content=true" in out
    assert section_lines(out)[0].startswith("convention learnt from the first 297 rows (auto): nearest preset ")
    assert summary["contract"]["mask"]["reasoning_separator"] == "context"
    strict = tmp_path / "strict.toml"
    strict.write_text(builtin_contracts()["generic"].read_text().replace("strict = false", "strict = true"))
    result, summary = run_inprocess(pytester, f"--dataset-path={content_only}", f"--tokenizer={tokenizer_dir}",
                                    f"--contract={strict}", f"--max-len={MAX_LEN}")
    assert result.ret == 1 and summary["checks"]["convention_losses"]["verdict"] == "fail"
