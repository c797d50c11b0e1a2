"""The conversation strategies: valid for the strict Qwen3.6 template, and every advertised shape is reachable."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings

from drafter_contracts import strategies as cs
from drafter_testkit.generate import load_tokenizer
from drafter_contracts.hypothesis_settings import examples

Conv = dict[str, Any]


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir):
    return load_tokenizer(tokenizer_dir)


def _render(tokenizer: Any, conv: Conv) -> str:
    return tokenizer.apply_chat_template(conv["messages"], tools=conv["tools"], tokenize=False)


@given(conv=cs.conversations())
def test_conversations_render_on_the_strict_template(tokenizer, conv: Conv) -> None:
    """Valid by construction: the strict template renders every one, as a chat ending with the assistant."""
    msgs = conv["messages"]
    assert any(m["role"] == "user" for m in msgs)
    assert msgs[-1]["role"] == "assistant"
    assert all(m["role"] != "system" for m in msgs[1:])
    assert _render(tokenizer, conv).startswith("<|im_start|>")
    for m in msgs:
        if m["role"] == "user":
            assert not m["content"].startswith("<")  # never mistaken for tool output by the template
        if m["role"] == "assistant":  # special-token strings would *be* control tokens in the supervised turn
            text = m["content"] or ""
            inline = text.startswith("<think>\n") and "\n</think>\n\n" in text
            body = text.split("\n</think>\n\n", 1)[1] if inline else text
            assert not any(s in body for s in ("<|im_start|>", "<|im_end|>", "<tool_call>", "<think>", "</think>"))


@given(conv=cs.invalid_conversations())
def test_invalid_conversations_are_refused_by_the_strict_template(tokenizer, conv: Conv) -> None:
    with pytest.raises(Exception, match="No user query|Unexpected message role|System message must be the first"):
        _render(tokenizer, conv)


def _has(pred: Callable[[dict[str, Any]], bool]) -> Callable[[Conv], bool]:
    return lambda conv: any(pred(m) for m in conv["messages"])


def _consecutive_tools(conv: Conv) -> bool:
    roles = [m["role"] for m in conv["messages"]]
    return any(a == b == "tool" for a, b in zip(roles, roles[1:]))


SHAPES: dict[str, Callable[[Conv], bool]] = {
    "system prompt": lambda c: c["messages"][0]["role"] == "system",
    "multi-turn": lambda c: sum(m["role"] == "user" for m in c["messages"]) >= 3,
    "consecutive tool responses": _consecutive_tools,
    "several calls in one message": _has(lambda m: len(m.get("tool_calls") or []) >= 2),
    "arguments as a JSON string": _has(lambda m: any(isinstance(t["function"]["arguments"], str)
                                                    for t in m.get("tool_calls") or [])),
    "nested JSON arguments": _has(lambda m: any(isinstance(t["function"]["arguments"], dict)
                                                and any(isinstance(v, (dict, list)) for v in t["function"]["arguments"].values())
                                                for t in m.get("tool_calls") or [])),
    "reasoning_content": _has(lambda m: "reasoning_content" in m),
    "inline think": _has(lambda m: m["role"] == "assistant" and (m["content"] or "").startswith("<think>")),
    "empty assistant content": _has(lambda m: m["role"] == "assistant" and not m["content"] and not m.get("tool_calls")),
    "None content with tool calls": _has(lambda m: m["role"] == "assistant" and m["content"] is None),
    "code": _has(lambda m: "def f(x)" in (m["content"] or "")),
    "CJK": _has(lambda m: any("\u4e00" <= ch <= "\u9fff" for ch in (m["content"] or ""))),
    "emoji": _has(lambda m: any(ord(ch) >= 0x1F300 for ch in (m["content"] or ""))),
    "newline at a span edge": _has(lambda m: m["role"] == "assistant" and (m["content"] or "").endswith("\n")),
    "role marker in user text": _has(lambda m: m["role"] == "user" and "<|im_start|>assistant\n" in m["content"]),
    "end marker in user text": _has(lambda m: m["role"] == "user" and "<|im_end|>" in m["content"]),
    "long turn": _has(lambda m: len(m["content"] or "") > 4000),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_shape_is_reachable(shape: str) -> None:
    """hypothesis finds each advertised shape, so the properties really exercise it."""
    found = find(cs.conversations(), SHAPES[shape],
                 settings=settings(max_examples=examples(2000), database=None, derandomize=True, phases=[Phase.generate],
                                   suppress_health_check=list(HealthCheck)))
    assert SHAPES[shape](found), json.dumps(found)[:500]


def test_long_turns_cross_small_caps(tokenizer) -> None:
    """A long turn renders to more tokens than the small max_len values the properties draw."""
    conv = find(cs.conversations(), SHAPES["long turn"],
                settings=settings(max_examples=examples(2000), database=None, derandomize=True, phases=[Phase.generate],
                                  suppress_health_check=list(HealthCheck)))
    ids = tokenizer.apply_chat_template(conv["messages"], tools=conv["tools"], tokenize=True, return_dict=True)["input_ids"]
    assert len(ids) > 1024


@given(max_len=cs.max_lengths())
def test_max_lengths_are_positive(max_len: int) -> None:
    assert 4 <= max_len <= 4096
