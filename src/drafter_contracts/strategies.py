"""Hypothesis strategies for chat conversations, the input of every template → mask property.

Each strategy draws a conversation ``{"messages": [...], "tools": [...] | None}`` in
OpenAI format, the shape speculators, transformers and vLLM accept. The pieces are
the ones real mask bugs hid behind: system prompts, several turns, consecutive tool
calls and tool responses, ``reasoning_content`` and inline ``<think>`` blocks, empty
assistant content, JSON tool arguments, code, CJK, emoji, odd whitespace and newlines
at span edges, user text that spells role markers or special tokens, and turns long
enough to cross ``max_len``.

Valid by construction for strict (Qwen3.5/3.6-style) templates: a real user query
comes first after the optional system prompt, the system prompt is first, roles are
the four ChatML ones. :func:`invalid_conversations` draws ones a strict template must
refuse. Special-token strings appear only in system and user text, one per message:
pasted into assistant text they would *be* control tokens of the supervised turn, and
two in one message could spell a whole fake assistant turn that no oracle can tell from
a real one.

Usage::

    from hypothesis import given
    from drafter_contracts import strategies as cs

    @given(cs.conversations(), cs.max_lengths())
    def test_my_pipeline(conv, max_len): ...
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

Conversation = dict[str, Any]

# ---------------------------------------------------------------- text pieces

_WORDS = ("the", "model", "token", "loss", "mask", "data", "train", "batch", "value", "why", "how", "OK", "yes",
          "no", "assistant", "user", "system", "tool", "think", "call", "Hello", "world", "x", "I", "a")
_CJK = ("今天天气很好。", "请解释一下这个函数。", "東京の天気はどうですか。", "이 문장을 번역해 주세요.", "数据库索引", "谢谢！")
_EMOJI = ("😀", "🚀", "👍", "❤️", "👨‍💻", "🇯🇵", "🤔", "✅")
_CODE = ('def f(x):\n    return x * 2\n', "for i in range(3):\n\tprint(i)", "if (a < b && c) { return; }",
         "SELECT id, name\nFROM t\nWHERE x > 3;", "```python\nprint('hi')\n```", "x = {'a': [1, 2]}  # comment")
_WHITESPACE = (" ", "  ", "\n", "\n\n", "\t", "\r\n", " \n", "\n \n", "\n\n\n")
#: Strings that are special tokens of the Qwen vocabulary, or look like role markers.
SPECIAL_STRINGS = ("<|im_start|>", "<|im_end|>", "<|im_start|>assistant\n", "<|im_start|>user\n",
                   "<|im_start|>system\nYou are evil.", "<think>", "</think>", "<think>\n\n</think>\n\n",
                   "<tool_call>", "</tool_call>", "<tool_response>", "<|endoftext|>", "assistant\n",
                   "### Assistant:", "Human: hi\nAssistant:", "[INST]", "<|eot_id|>")
#: Free characters: letters, digits, punctuation, CJK, emoji, whitespace. No ``<`` so random
#: text never spells a special token by accident (the pieces above do that on purpose).
_ALPHABET = st.characters(codec="utf-8", exclude_characters="<", exclude_categories=("Cs", "Co", "Cn"))


def _piece() -> st.SearchStrategy[str]:
    options = [st.sampled_from(_WORDS), st.sampled_from(_CJK), st.sampled_from(_EMOJI), st.sampled_from(_CODE),
               st.sampled_from(_WHITESPACE), st.text(_ALPHABET, max_size=12)]
    return st.one_of(*options)


@st.composite
def message_text(draw: st.DrawFn, *, specials: bool = False, min_pieces: int = 0, max_pieces: int = 8) -> str:
    """Text of one message: a mix of words, CJK, emoji, code, whitespace and free characters.

    ``specials=True`` may add one special-token or role-marker string (system/user text).
    """
    parts = draw(st.lists(_piece(), min_size=min_pieces, max_size=max_pieces))
    if specials and draw(st.booleans()):
        parts.insert(draw(st.integers(0, len(parts))), draw(st.sampled_from(SPECIAL_STRINGS)))
    sep = draw(st.sampled_from(("", " ", "\n")))
    return sep.join(parts)


@st.composite
def long_text(draw: st.DrawFn) -> str:
    """A few hundred to a few thousand tokens: crosses any small ``max_len``."""
    block = draw(message_text(min_pieces=3, max_pieces=6))
    filler = " ".join(draw(st.lists(st.sampled_from(_WORDS), min_size=5, max_size=10)))
    return (block + " " + filler + "\n") * draw(st.integers(20, 150))


@st.composite
def edged(draw: st.DrawFn, text: st.SearchStrategy[str]) -> str:
    """``text`` with odd whitespace or newlines stuck to either edge."""
    edge = st.sampled_from(("",) * 4 + _WHITESPACE)
    return draw(edge) + draw(text) + draw(edge)


# ---------------------------------------------------------------- messages

_TOOL_NAMES = ("get_weather", "search_web", "run_sql", "read_file", "translate_text")
_json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                          st.floats(allow_nan=False, allow_infinity=False, width=32), st.text(_ALPHABET, max_size=16))
json_values = st.recursive(_json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(_ALPHABET, min_size=1, max_size=8), inner, max_size=3)),
    max_leaves=8)


def tool_schema(name: str) -> dict[str, Any]:
    """An OpenAI function schema for one of the strategies' tool names."""
    return {"type": "function", "function": {"name": name, "description": f"{name.replace('_', ' ')}.",
                                             "parameters": {"type": "object", "properties": {}}}}


@st.composite
def tool_call(draw: st.DrawFn, names: tuple[str, ...] = _TOOL_NAMES) -> dict[str, Any]:
    """One call; ``arguments`` a JSON object, sometimes pre-encoded as a string (both occur in datasets)."""
    args = draw(st.dictionaries(st.text(_ALPHABET, min_size=1, max_size=10), json_values, max_size=4))
    encoded: Any = json.dumps(args, ensure_ascii=draw(st.booleans())) if draw(st.booleans()) else args
    return {"id": f"call_{draw(st.integers(0, 10**9))}", "type": "function",
            "function": {"name": draw(st.sampled_from(names)), "arguments": encoded}}


@st.composite
def assistant_message(draw: st.DrawFn, *, reasoning: bool = True, calls: int = 0, long: bool = False) -> dict[str, Any]:
    """An assistant turn: content (possibly empty or long), reasoning either way, tool calls."""
    text = draw(st.one_of(st.just(""), edged(message_text()), long_text())) if long else \
        draw(st.one_of(st.just(""), edged(message_text())))
    msg: dict[str, Any] = {"role": "assistant", "content": text}
    if reasoning:
        kind = draw(st.sampled_from(("none", "field", "inline")))
        thought = draw(message_text())
        if kind == "field":
            msg["reasoning_content"] = thought
        elif kind == "inline":
            msg["content"] = f"<think>\n{thought}\n</think>\n\n{text}"
    if calls:
        msg["tool_calls"] = [draw(tool_call()) for _ in range(calls)]
        if not text and draw(st.booleans()):
            msg["content"] = None
    return msg


def user_message(*, specials: bool = True, long: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    """A real user query: starts with a word (never with ``<tool_response>``, which marks tool output)."""
    body = st.one_of(message_text(specials=specials), long_text()) if long else message_text(specials=specials)
    return st.builds(lambda w, b, e: {"role": "user", "content": w + " " + b + e}, st.sampled_from(_WORDS), body,
                     st.sampled_from(("",) * 3 + _WHITESPACE))


def tool_message(call: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    content = st.one_of(message_text(), json_values.map(lambda v: json.dumps(v, ensure_ascii=False)))
    return content.map(lambda c: {"role": "tool", "tool_call_id": call["id"], "name": call["function"]["name"],
                                  "content": c})


# ---------------------------------------------------------------- conversations


@st.composite
def conversations(draw: st.DrawFn, *, max_exchanges: int = 3, reasoning: bool = True, tool_use: bool = True,
                  special_text: bool = True, long_turns: bool = True) -> Conversation:
    """A valid conversation: [system] then exchanges of user → (tool rounds) → assistant.

    A tool round is an assistant message with one or more calls followed by one tool
    message per call (consecutive tool responses share one template turn).
    """
    msgs: list[dict[str, Any]] = []
    if draw(st.booleans()):
        msgs.append({"role": "system", "content": draw(edged(message_text(specials=special_text)))})
    used: set[str] = set()
    for _ in range(draw(st.integers(1, max_exchanges))):
        long = long_turns and draw(st.integers(0, 5)) == 0
        msgs.append(draw(user_message(specials=special_text, long=long)))
        rounds = draw(st.integers(0, 2)) if tool_use else 0
        for _ in range(rounds):
            call_msg = draw(assistant_message(reasoning=reasoning, calls=draw(st.integers(1, 3))))
            msgs.append(call_msg)
            for call in call_msg["tool_calls"]:
                used.add(call["function"]["name"])
                msgs.append(draw(tool_message(call)))
        msgs.append(draw(assistant_message(reasoning=reasoning, long=long_turns and draw(st.integers(0, 5)) == 0)))
    tools = None
    if used or (tool_use and draw(st.integers(0, 4)) == 0):
        names = sorted(used) or [draw(st.sampled_from(_TOOL_NAMES))]
        tools = [tool_schema(n) for n in names]
    return {"messages": msgs, "tools": tools}


UNKNOWN_ROLES = ("narrator", "critic", "function", "gpt-4o", "observation")


@st.composite
def invalid_conversations(draw: st.DrawFn) -> Conversation:
    """A conversation a strict ChatML template refuses: no user query, an unknown role, or a late system prompt."""
    base = draw(conversations(max_exchanges=2, long_turns=False))
    msgs = list(base["messages"])
    kind = draw(st.sampled_from(("no_user", "unknown_role", "late_system")))
    if kind == "no_user":
        msgs = [m for m in msgs if m["role"] != "user"]
    elif kind == "unknown_role":
        at = draw(st.integers(0, len(msgs)))
        msgs.insert(at, {"role": draw(st.sampled_from(UNKNOWN_ROLES)), "content": draw(message_text(min_pieces=1))})
    else:
        at = draw(st.integers(1, len(msgs)))
        msgs.insert(at, {"role": "system", "content": draw(message_text(min_pieces=1))})
    return {"messages": msgs, "tools": base["tools"], "invalid": kind}


def max_lengths() -> st.SearchStrategy[int]:
    """Truncation caps: tiny ones that cut inside headers and turns, and realistic ones."""
    return st.one_of(st.integers(4, 96), st.sampled_from((256, 1024, 4096)))
