"""The property aimed at producers that find a reply by searching the rendering for its text.

Every drawn conversation repeats a reply in user, system or tool text or in a second reply
(``strategies.echoed_conversations``), so a masker that puts the labels on the first copy fails
in the first examples; a masker that supervises the reply where the template renders it passes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings

from drafter_contracts import strategies as cs
from drafter_contracts.contract import load_contract, resolve_contract_path
from drafter_contracts.properties.context import make_context
from drafter_testkit.inprocess import load_ci_profile, run_property

PROPERTY = "test_mask_follows_the_reply_not_its_copy"


@settings(max_examples=60, database=None)
@given(conv=cs.echoed_conversations())
def test_every_drawn_conversation_repeats_a_reply(conv: dict) -> None:
    msgs = conv["messages"]
    replies = [m["content"] for m in msgs if m["role"] == "assistant" and not m.get("tool_calls") and m["content"]]
    if conv["echo"] == "identical_reply":
        assert len(replies) != len(set(replies))
    else:
        role = conv["echo"]
        assert any(m["role"] == role and r in m["content"] for m in msgs for r in replies)


@pytest.fixture(scope="module")
def contract():
    return load_contract(resolve_contract_path("qwen3.6-dflash"))


@pytest.mark.slow  # hypothesis shrinks the failing example: ~13 s (the broken masker's subprocess run is slow too)
def test_a_search_for_the_reply_is_caught(tokenizer_dir: Path, contract) -> None:
    load_ci_profile()
    ctx = make_context("drafter_testkit.broken_maskers:reply_found_by_search", str(tokenizer_dir), contract)
    outcome = run_property(ctx, PROPERTY)
    assert outcome.outcome == "failed", outcome
    assert "a reply repeated in" in outcome.message and "conversation:" in outcome.message


def test_the_template_s_own_mask_passes(tokenizer_dir: Path, contract, tmp_path: Path) -> None:
    from drafter_testkit.generate import tagged_template

    load_ci_profile()
    tagged = tmp_path / "tagged.jinja"
    tagged.write_text(tagged_template())
    ctx = make_context("hf", str(tokenizer_dir), contract, chat_template=str(tagged))
    outcome = run_property(ctx, PROPERTY)
    assert outcome.outcome == "passed", outcome.message[:3000]
