"""Declared mask policies: the three producer conventions pass their own contract, fail the others, and every
policy mutant is caught by the contract test it corrupts, on real rendered rows saved with ``save_to_disk``.

Verdicts come from the engine (the same code the pytest suite calls per shard), so the 9 x convention and
20 mutant runs take seconds; ``test_policy_cli.py`` runs the suite itself through pytest.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from drafter_contracts.contract.mask_rules import follows_tool_output, prompt_windows
from drafter_contracts.spans.turns import MaskFacts, assistant_turns
from drafter_contracts.contract import MaskPolicy, builtin_contracts, load_contract, parse_mask_overrides
from drafter_contracts.dataset.reader import open_dataset
from drafter_contracts.engine import ROW_CHECKS, Engine
from drafter_contracts.errors import UsageProblem
from drafter_testkit import policy_mutants as pm
from drafter_testkit.mutants import role_ids, turns
from drafter_testkit.producers import CONVENTIONS, convention_dataset_dir, convention_rows, template_for
from drafter_contracts.spans.labels import Role
from drafter_contracts.tokenizer.vocabulary import Vocabulary

MAX_LEN = 2048  # below the fixture's longest conversations, so every convention has rows cut at max_len
N_CONVERSATIONS = 300


@pytest.fixture(scope="session")
def datasets() -> dict[str, Path]:
    return {c: convention_dataset_dir(c, N_CONVERSATIONS, 0, MAX_LEN) for c in CONVENTIONS}


def contract_of(name: str, **mask: object):
    return load_contract(builtin_contracts()[name], {"max_len": MAX_LEN, "mask": mask})


def failures(path: Path, contract, vocab: Vocabulary) -> dict[str, list]:
    """Per-row contract test -> its failing shard results."""
    engine = Engine(open_dataset(str(path)), contract, vocab)
    out: dict[str, list] = {}
    for shard in engine.shards:
        for check in ROW_CHECKS:
            r = engine.shard_check(shard, check)
            if not r.ok and not r.skipped:
                out.setdefault(f"test_{check}", []).append(r)
    return out


# --------------------------------------------------------------------------- configuration

def test_defaults_keep_the_old_meaning():
    p = MaskPolicy()
    assert (p.content, p.reasoning_final, p.reasoning_earlier, p.tool_calls) == (True, True, True, True)
    assert (p.end_of_turn, p.newline_after_end, p.turns, p.completeness) == (False, False, "all", "off")


def test_shipped_convention_contracts():
    regex, tags, per_turn = (load_contract(builtin_contracts()[c]).mask for c in CONVENTIONS)
    assert not regex.end_of_turn and regex.completeness == "all" and regex.turns == "all"
    assert tags.end_of_turn and not tags.newline_after_end and tags.completeness == "all"
    assert per_turn.end_of_turn and per_turn.newline_after_end and per_turn.turns == "last"
    assert per_turn.completeness == "last" and per_turn.prompt_context == "last"
    assert load_contract(builtin_contracts()["qwen3.6-dflash"]).mask == regex


@pytest.mark.parametrize("line, message", [
    ('completeness = "some"', "[mask] completeness must be one of 'off', 'all', 'last', got 'some'"),
    ('turns = "first"', "[mask] turns must be one of 'all', 'last'"),
    ("turns = 1", "[mask] turns must be str, got int"),
    ('end_of_turn = "yes"', "[mask] end_of_turn must be bool"),
    ("reasoning = true", "unknown key 'reasoning' in [mask]"),
])
def test_bad_mask_table_is_one_clear_error(tmp_path, line, message):
    src = (builtin_contracts()["speculators-regex"]).read_text().replace("[mask]\n", f"[mask]\n{line}\n", 1)
    src = src.replace('completeness = "all"', "") if line.startswith("completeness") else src
    src = src.replace('turns = "all"', "") if line.startswith("turns") else src
    src = src.replace("end_of_turn = false", "") if line.startswith("end_of_turn") else src
    f = tmp_path / "c.toml"
    f.write_text(src)
    with pytest.raises(UsageProblem) as e:
        load_contract(f)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_mask_policy_overrides():
    assert parse_mask_overrides(["completeness=last", "end-of-turn=TRUE", "tool_calls=0"]) == {
        "completeness": "last", "end_of_turn": True, "tool_calls": False}
    c = load_contract(builtin_contracts()["qwen3.6-dflash"], {"mask": parse_mask_overrides(["turns=last"])})
    assert c.mask.turns == "last" and c.mask.completeness == "all"  # the rest comes from the file


@pytest.mark.parametrize("items, message", [
    (["completeness"], "expected KEY=VALUE"),
    (["colour=red"], "unknown key 'colour'"),
    (["end_of_turn=maybe"], "end_of_turn must be true or false"),
])
def test_bad_mask_policy_option(items, message):
    with pytest.raises(UsageProblem, match=message):
        parse_mask_overrides(items)


def test_bad_mask_policy_value_names_the_option():
    with pytest.raises(UsageProblem, match="--mask-policy: \\[mask\\] turns must be one of"):
        load_contract(builtin_contracts()["qwen3.6-dflash"], {"mask": {"turns": "some"}})


# --------------------------------------------------------------------------- turn structure

def test_assistant_turns_from_roles_alone():
    H, U, A, R, E, N, O = (Role.HEADER, Role.USER, Role.ASSISTANT, Role.REASONING, Role.ASSISTANT_END,
                           Role.AFTER_ASSISTANT_END, Role.OUTSIDE)
    row0 = [H, H, H, U, O, H, H, H, R, R, A, E, N, H, H, H, U, O, H, H, H, A, A, E, N]
    row1 = [H, H, H, A, A]  # cut at max_len inside its only assistant turn
    row2 = [H, H, H, U, U]  # no assistant turn at all
    role = np.array(row0 + row1 + row2, dtype=np.uint8)
    offsets = np.array([0, 25, 30, 35])
    t = assistant_turns(role, offsets)
    assert t.starts.tolist() == [8, 21, 28] and t.row_of_turn.tolist() == [0, 0, 1]
    assert np.flatnonzero(t.last).tolist() == [21, 22, 23, 24, 28, 29]
    assert t.index[[8, 12, 21, 28, 0, 33]].tolist() == [0, 0, 1, 2, -1, -1]


def test_empty_generation_prompt_fits_only_a_turn_after_tool_output():
    """A template that keeps the model turn open over a tool response renders an empty generation prompt there:
    a per-turn producer then supervises the re-opened header, and only after tool output."""
    H, U, T, AH, A, E = Role.HEADER, Role.USER, Role.TOOL, Role.ASSISTANT_HEADER, Role.ASSISTANT, Role.ASSISTANT_END
    row0 = [H, U, U, AH, AH, AH, A, A, E]  # user, then an assistant turn: header 3..5
    row1 = [H, U, AH, AH, AH, A, E, T, T, AH, AH, AH, A, E]  # tool output inside the turn, then a re-opened header
    role = np.array(row0 + row1, dtype=np.uint8)
    offsets = np.array([0, len(row0), len(row0) + len(row1)])
    ids = np.where(role == Role.ASSISTANT_HEADER, 7, 1).astype(np.int64)  # the header tokens are the prompt's
    labels = type("L", (), {"role": role})()
    turns = assistant_turns(role, offsets)
    header = (7, 7, 7)
    for prompts, want in (((header, ()), [3, 0]), ((header,), [3, 3])):
        sel, hs, lo, _ = prompt_windows(MaskFacts(ids, prompts=prompts), offsets, labels, turns, "last")
        assert (lo - hs).tolist() == want, prompts
    at = np.array([3, len(row0) + 2, len(row0) + 9])
    assert follows_tool_output(role, np.array([0, len(row0), len(row0)]), at).tolist() == [False, False, True]


def test_last_turn_matches_an_independent_scan(vocab: Vocabulary, datasets, chatml):
    """On real per-turn rows the supervised part is exactly inside the last assistant turn the roles give."""
    import datasets as hf

    ds = hf.load_from_disk(str(datasets["speculators-per-turn"]))
    assistant = role_ids()["assistant"]
    multi = 0
    for row in ds.select(range(120)):
        ids = np.asarray(row["input_ids"])
        labels = chatml.label(ids, np.array([0, len(ids)]), MAX_LEN)
        t = assistant_turns(labels.role, np.array([0, len(ids)]))
        last = [x for x in turns(row["input_ids"]) if x.role == assistant][-1]
        multi += len([x for x in turns(row["input_ids"]) if x.role == assistant]) > 1
        assert t.last[last.body] and not t.last[: last.start + 2].any()
        assert not (np.asarray(row["loss_mask"]) & ~t.last).any()
    assert multi > 10  # the check is not vacuous: many rows hold earlier (context) turns


# --------------------------------------------------------------------------- producers

def test_producers_render_the_same_text(tokenizer_dir):
    """The conventions differ in masks only: regex and tag rows are identical ids; per-turn rows are prefixes."""
    from drafter_contracts.demo.conversations import generate_conversations
    from drafter_testkit.generate import load_tokenizer

    tok = load_tokenizer()
    assert not re.search(r"\{%-?\s*generation", template_for("speculators-per-turn"))
    assert re.search(r"\{%-?\s*generation", template_for("generation-tags"))
    for conv in list(generate_conversations(40, 3)):
        (ids_r, mask_r), = convention_rows("speculators-regex", conv, tok, 4096)
        (ids_t, mask_t), = convention_rows("generation-tags", conv, tok, 4096)
        per_turn = convention_rows("speculators-per-turn", conv, tok, 4096)
        assert ids_r == ids_t
        extra = [k for k in range(len(ids_r)) if mask_t[k] and not mask_r[k]]
        assert extra and all(tok.convert_ids_to_tokens(ids_r[k]) == "<|im_end|>" for k in extra)
        assert len(per_turn) == sum(m["role"] == "assistant" for m in conv["messages"])
        ids_last, mask_last = per_turn[-1]
        assert ids_last == ids_r[:len(ids_last)] and mask_last[-2:] == [True, True]  # <|im_end|>\n supervised


def test_datasets_have_rows_cut_at_max_len(datasets):
    import datasets as hf

    for convention, path in datasets.items():
        seq = np.asarray(hf.load_from_disk(str(path))["seq_len"])
        assert (seq == MAX_LEN).sum() >= 2, convention


# --------------------------------------------------------------------------- conventions x contracts

MISMATCH = {  # (dataset convention, contract) -> the contract tests that must fail
    ("speculators-regex", "generation-tags"): {"test_mask_covers_assistant_spans"},  # <|im_end|> never supervised
    ("speculators-regex", "speculators-per-turn"): {"test_mask_on_assistant_spans", "test_mask_covers_assistant_spans"},
    ("generation-tags", "speculators-regex"): {"test_mask_on_assistant_spans"},
    ("generation-tags", "speculators-per-turn"): {"test_mask_on_assistant_spans", "test_mask_covers_assistant_spans"},
    ("speculators-per-turn", "speculators-regex"): {"test_mask_on_assistant_spans", "test_mask_covers_assistant_spans"},
    ("speculators-per-turn", "generation-tags"): {"test_mask_on_assistant_spans", "test_mask_covers_assistant_spans"},
}


@pytest.mark.parametrize("convention", CONVENTIONS)
@pytest.mark.parametrize("contract", CONVENTIONS)
def test_convention_against_contract(datasets, vocab, convention, contract):
    got = failures(datasets[convention], contract_of(contract), vocab)
    assert set(got) == MISMATCH.get((convention, contract), set()), {k: v[0].by_reason for k, v in got.items()}


def test_per_turn_rows_against_the_regex_contract_say_why(datasets, vocab):
    got = failures(datasets["speculators-per-turn"], contract_of("speculators-regex"), vocab)
    reasons = set().union(*(r.by_reason for r in got["test_mask_on_assistant_spans"]))
    assert any("end-of-turn token supervised" in r for r in reasons)
    missing = set().union(*(r.by_reason for r in got["test_mask_covers_assistant_spans"]))
    assert any(r.startswith("assistant turn left entirely unsupervised") for r in missing)  # earlier turns: context
    assert any(r.startswith("reasoning opener (<think>) left unsupervised") for r in missing)  # prompt's <think>


def test_regex_rows_against_the_per_turn_contract_say_why(datasets, vocab):
    got = failures(datasets["speculators-regex"], contract_of("speculators-per-turn"), vocab)
    reasons = set().union(*(r.by_reason for r in got["test_mask_on_assistant_spans"]))
    assert any("policy: turns = last" in r for r in reasons)
    assert any("a token of the generation prompt supervised" in r for r in reasons)  # <think> of the last turn


def test_stripped_reasoning_policy(datasets, vocab):
    """A pipeline that must not train on reasoning: the regex rows (which do) fail, naming the final turn's block."""
    got = failures(datasets["speculators-regex"], contract_of("speculators-regex", reasoning_final=False,
                                                             reasoning_earlier=False), vocab)
    assert set(got) == {"test_mask_on_assistant_spans"}
    reasons = set().union(*(r.by_reason for r in got["test_mask_on_assistant_spans"]))
    assert any("reasoning of the row's last assistant turn supervised" in r for r in reasons)


def test_tool_calls_policy(datasets, vocab):
    got = failures(datasets["generation-tags"], contract_of("generation-tags", tool_calls=False), vocab)
    reasons = set().union(*(r.by_reason for r in got["test_mask_on_assistant_spans"]))
    assert reasons == {"tool-call block supervised (policy: tool_calls = false)"}


def test_completeness_off_skips_with_its_reason(datasets, vocab):
    engine = Engine(open_dataset(str(datasets["speculators-regex"])),
                    contract_of("speculators-regex", completeness="off"), vocab)
    r = engine.shard_check(engine.shards[0], "mask_covers_assistant_spans")
    assert r.skipped and "completeness" in r.skipped and "--mask-policy completeness=all" in r.skipped


def test_completeness_last_ignores_earlier_turns(datasets, vocab):
    """Per-turn rows leave earlier turns unsupervised: only a policy that makes them eligible demands them."""
    got = failures(datasets["speculators-per-turn"], contract_of("speculators-per-turn", completeness="all"), vocab)
    assert set(got) == set()  # turns = "last": earlier turns are not eligible, so "all" equals "last" here
    got = failures(datasets["speculators-per-turn"],
                   contract_of("speculators-per-turn", completeness="all", turns="all"), vocab)
    assert set(got) == {"test_mask_covers_assistant_spans"}


# --------------------------------------------------------------------------- mutants

CASES = [(name, c) for name, m in pm.POLICY_MUTANTS.items() for c in CONVENTIONS if c in m.fails]


@pytest.mark.parametrize("name, convention", CASES, ids=[f"{n}-{c}" for n, c in CASES])
def test_policy_mutant_is_caught(datasets, vocab, tmp_path, name, convention):
    mutation = pm.make_policy_mutant(name, convention, datasets[convention], tmp_path / "m")
    got = failures(tmp_path / "m", contract_of(convention), vocab)
    assert set(got) == set(mutation.expected_failures), {k: v[0].by_reason for k, v in got.items()}
    for results in got.values():
        assert {e.row for r in results for e in r.examples} == set(mutation.rows)


def test_every_required_mutant_exists_for_every_convention():
    required = {"policy_shift_right", "policy_shift_left", "policy_header", "policy_user_text",
                "policy_system_text", "policy_tool_text", "policy_no_reasoning"}
    for name in required:
        assert set(pm.POLICY_MUTANTS[name].fails) == set(CONVENTIONS)
    assert "speculators-per-turn" in pm.POLICY_MUTANTS["policy_earlier_turn"].fails


def test_historical_qwen3_bug_fails_the_default_contract(clean_dataset, vocab, tmp_path):
    """The <think> block left out of the mask on the Qwen3.6 fixture dataset: the shipped default contract catches it."""
    mutation = pm.make_policy_mutant("policy_no_reasoning", "speculators-regex", clean_dataset, tmp_path / "m")
    contract = load_contract(builtin_contracts()["qwen3.6-dflash"], {"expected_count": 2000})
    got = failures(tmp_path / "m", contract, vocab)
    assert set(got) == {"test_mask_covers_assistant_spans"}
    (result,) = got["test_mask_covers_assistant_spans"]
    assert result.examples[0].row == mutation.rows[0]
    assert result.examples[0].reason.startswith("reasoning (<think> block) left unsupervised")


# --------------------------------------------------------------------------- hints

@pytest.mark.parametrize("convention, contract, check, names", [
    ("speculators-per-turn", "speculators-regex", "test_mask_on_assistant_spans", "speculators-per-turn"),
    ("speculators-per-turn", "speculators-regex", "test_mask_covers_assistant_spans", "speculators-per-turn"),
    ("speculators-per-turn", "generation-tags", "test_mask_on_assistant_spans", "speculators-per-turn"),
    ("generation-tags", "speculators-regex", "test_mask_on_assistant_spans", "generation-tags"),
    ("speculators-regex", "generation-tags", "test_mask_covers_assistant_spans", "speculators-regex"),
    ("generation-tags", "speculators-per-turn", "test_mask_covers_assistant_spans", "generation-tags"),
])
def test_convention_mismatch_names_the_right_contract(datasets, vocab, convention, contract, check, names):
    (result,) = failures(datasets[convention], contract_of(contract), vocab)[check]
    assert result.hint and f"--contract {names}" in result.hint and "0 rows rejected" in result.hint


def test_reasoning_dropped_everywhere_is_called_the_qwen3_bug(datasets, vocab, tmp_path):
    import pyarrow as pa

    from drafter_testkit.generate import save_table
    from drafter_testkit.mutants import _read

    table = _read(datasets["speculators-regex"])
    masks = []
    for ids, mask in zip(table["input_ids"].to_pylist(), table["loss_mask"].to_pylist()):
        ids = np.asarray(ids)
        depth = np.cumsum(ids == pm.THINK_ID) - np.cumsum(ids == pm.THINK_END_ID)
        inside = (depth > 0) | (ids == pm.THINK_END_ID)
        masks.append((np.asarray(mask) & ~inside).tolist())
    table = table.set_column(1, "loss_mask", pa.array(masks, type=table.schema.field("loss_mask").type))
    save_table(table, tmp_path / "no-think")
    got = failures(tmp_path / "no-think", contract_of("speculators-regex"), vocab)
    assert set(got) == {"test_mask_covers_assistant_spans"}
    (result,) = got["test_mask_covers_assistant_spans"]
    assert result.rows_violating > 0.9 * result.rows_checked  # every row whose final turn made it past the cut
    assert set(result.by_reason) == {"reasoning (<think> block) left unsupervised (every assistant turn must be supervised)"}
    assert "Qwen3 regex bug" in result.hint
    # Declaring that reasoning is not trained on makes the same data pass.
    assert failures(tmp_path / "no-think", contract_of("speculators-regex", reasoning_final=False,
                                                       reasoning_earlier=False), vocab) == {}


def test_a_few_bad_rows_get_no_convention_hint(datasets, vocab, tmp_path):
    pm.make_policy_mutant("policy_shift_right", "speculators-regex", datasets["speculators-regex"], tmp_path / "m")
    for results in failures(tmp_path / "m", contract_of("speculators-regex"), vocab).values():
        assert all(not r.hint for r in results)
