"""The first line of every report: the convention in force and why, the template profile, the tokenizer."""

from __future__ import annotations

from typing import Any

import pytest

from drafter_contracts.contract.fit import chosen
from drafter_contracts.contract import load_contract, resolve_contract_path
from drafter_contracts.report.headline import headline

TOKENIZER = "/models/q36"
CHATML = {"name": "chatml", "source": "builtin", "how": "built-in chatml (requested; labels 34 template renderings "
          "exactly)"}


def summary(convention: str, choice: dict[str, Any], tokenizer: str | None = TOKENIZER, how: str = "",
            columns: dict[str, str] | None = None, checks: dict[str, Any] | None = None) -> dict[str, Any]:
    """The parts of summary.json the line reads."""
    return {"contract": {"mask": {"convention": convention}, "convention_choice": choice, "tokenizer_how": how,
                         "template_profile": "chatml"},
            "tokenizer": {"name": tokenizer, "template_profile": CHATML if tokenizer else None},
            "dataset": {"columns": columns or {"input_ids": "list<int32>", "loss_mask": "list<bool>"}},
            "checks": checks or {}}


@pytest.mark.parametrize("convention, choice, expected", [
    ("speculators-regex", {"declared": "speculators-regex", "by": "contract"},
     "convention speculators-regex (declared in the contract)"),
    ("specforge", {"declared": "specforge", "by": "command line"},
     "convention specforge (set with --mask-policy convention=specforge)"),
    ("custom", {"declared": "custom", "by": "default"},
     "convention custom: the contract's [mask] keys as written (no convention declared)"),
    ("speculators-regex", {"declared": "auto", "by": "contract", "inferred": "speculators-regex", "rows": 2000,
                           "rejected": 0},
     "convention speculators-regex, inferred from the rows (auto): it fits the first 2,000 rows"),
    ("speculators-regex", {"declared": "auto", "by": "contract", "inferred": "speculators-regex", "rows": 2000,
                           "rejected": 200},
     "convention speculators-regex, inferred from the rows (auto): the closest built-in convention, rejecting 200 "
     "of the first 2,000 rows"),
    ("custom", {"declared": "auto", "by": "contract", "inferred": "learnt", "rows": 297, "rejected": 3,
                "nearest": "generation-tags", "differs": ["reasoning_separator", "optional"]},
     "convention learnt from the first 297 rows (auto): nearest preset generation-tags, differing in "
     "reasoning_separator, optional; it rejects 3 of them"),
    ("speculators-regex", {"declared": "auto", "by": "contract", "inferred": "speculators-regex", "rows": 0},
     "convention speculators-regex (auto, but the first rows hold no mask to infer from)"),
])
def test_the_line_says_the_convention_and_why(convention, choice, expected):
    line = headline(summary(convention, choice, how="named in the contract"))
    assert line == (f"{expected} · template profile chatml (built-in, requested; labels 34 template renderings "
                    f"exactly) · tokenizer {TOKENIZER} (named in the contract)")


def test_without_a_tokenizer_or_a_mask_column_it_says_what_applies():
    off = {"verdict": "skip", "skip_reasons": ["not checked: turned off by name (--skip-contract)"]}
    line = headline(summary("auto", {"declared": "auto", "by": "contract"}, tokenizer=None,
                            checks={"mask_on_assistant_spans": off, "mask_covers_assistant_spans": off}))
    assert line == ("convention auto, not resolved without a tokenizer; the mask contracts are not checked "
                    "(turned off by name (--skip-contract)) · tokenizer none (none named, none found beside the "
                    "dataset)")
    bare = headline(summary("speculators-regex", {}, columns={"input_ids": "list<int32>"}))
    assert bare.startswith("no mask column (none of loss_mask, labels, assistant_masks, completion_mask): "
                           "no convention applies · template profile chatml")


def test_the_contract_records_who_declared_the_convention():
    path = resolve_contract_path("speculators-regex")
    assert load_contract(path).convention_choice == {"declared": "speculators-regex", "by": "contract"}
    over = load_contract(path, {"mask": {"convention": "specforge"}})
    assert over.convention_choice == {"declared": "specforge", "by": "command line"}
    assert over.mask.convention == "specforge"


def test_an_inferred_convention_is_kept_in_short():
    assert chosen({}) == {}
    assert chosen({"inferred": "speculators-regex", "rows": 2000, "rejected": {"speculators-regex": 200,
                                                                                "specforge": 1989}}) == {
        "inferred": "speculators-regex", "rows": 2000, "rejected": 200}
    learnt = {"rejected": 1, "nearest_preset": "generation-tags", "differs_in": ["optional"]}
    assert chosen({"inferred": "learnt", "rows": 2000, "rejected": {}, "learnt": learnt}) == {
        "inferred": "learnt", "rows": 2000, "rejected": 1, "nearest": "generation-tags", "differs": ["optional"]}
