"""Deliberately broken maskers: each re-creates one historical speculators mask bug.

They exist to prove the properties catch those bugs (``tests/test_properties_broken.py``
runs the suite with ``--masker drafter_testkit.broken_maskers:NAME`` and expects a
failure with a readable example). Each starts from the correct ``hf`` masker on the
built-in generation-tagged Qwen3.6 template and breaks one thing, the way the bug did.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from drafter_contracts.maskers.hf import render_with_mask

from .generate import tagged_template
from .tokenizer import FIRST_SPECIAL_ID, SPECIAL_TOKENS

THINK = FIRST_SPECIAL_ID + SPECIAL_TOKENS.index("<think>")
END_THINK = FIRST_SPECIAL_ID + SPECIAL_TOKENS.index("</think>")
KNOWN_ROLES = ("system", "user", "assistant", "tool")


@lru_cache(maxsize=4)
def _newline_ids(tokenizer: Any) -> frozenset[int]:
    return frozenset(tokenizer.convert_tokens_to_ids(["Ċ", "ĊĊ"]))


def reasoning_unmasked(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, tokenizer: Any,
                       max_length: int) -> tuple[list[int], list[bool]]:
    """Pre-0.7 Qwen3 bug: the ``<think>…</think>\\n\\n`` block is left out of the mask.

    The regex had the empty think block baked into the role marker, so any reasoning
    (and the block itself) became unsupervised.
    """
    ids, mask = render_with_mask(messages, tools, tokenizer, tagged_template())
    arr, sup = np.asarray(ids), np.asarray(mask, dtype=bool)
    for start in np.flatnonzero(arr == THINK):
        ends = np.flatnonzero((arr == END_THINK) & (np.arange(len(arr)) > start))
        stop = int(ends[0]) + 1 if len(ends) else len(arr)
        if stop < len(arr) and int(arr[stop]) in _newline_ids(tokenizer):
            stop += 1
        sup[start:stop] = False
    return ids[:max_length], sup[:max_length].tolist()


def unbounded(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, tokenizer: Any,
              max_length: int) -> tuple[list[int], list[bool]]:
    """``input_ids``/``loss_mask`` not bounded to ``max_length``."""
    return render_with_mask(messages, tools, tokenizer, tagged_template())


def length_skew(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, tokenizer: Any,
                max_length: int) -> tuple[list[int], list[bool]]:
    """Only ``input_ids`` is cut at ``max_length``: rows past the cap get a longer mask."""
    ids, mask = render_with_mask(messages, tools, tokenizer, tagged_template())
    return ids[:max_length], mask


def unknown_roles_dropped(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, tokenizer: Any,
                          max_length: int) -> tuple[list[int], list[bool]]:
    """Messages with a role the template does not know are dropped instead of rejected."""
    kept = [m for m in messages if m.get("role") in KNOWN_ROLES]
    ids, mask = render_with_mask(kept, tools, tokenizer, tagged_template())
    return ids[:max_length], mask[:max_length]


def _probe_without_user(tokenizer: Any) -> bool:
    """speculators' original probe: an assistant-only conversation, which strict templates refuse."""
    out = tokenizer.apply_chat_template([{"role": "assistant", "content": "test"}], tokenize=True,
                                        return_dict=True, return_assistant_tokens_mask=True)
    return any(int(m) == 1 for m in out["assistant_masks"])


def probe_crashes(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, tokenizer: Any,
                  max_length: int) -> tuple[list[int], list[bool]]:
    """Correct rows, but the support probe is the pre-patch one that crashes on strict templates."""
    ids, mask = render_with_mask(messages, tools, tokenizer, tagged_template())
    return ids[:max_length], mask[:max_length]


probe_crashes.supports_assistant_mask = _probe_without_user  # type: ignore[attr-defined]


def reply_found_by_search(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, tokenizer: Any,
                          max_length: int) -> tuple[list[int], list[bool]]:
    """Each reply located by searching the rendering for its text (the first copy wins), plus the token after.

    The rule a producer follows when it finds assistant text with ``str.find``: a user, system or tool
    message that repeats a reply, or an earlier identical reply, takes the reply's labels, and the
    reply itself is left unsupervised.
    """
    text = tokenizer.apply_chat_template(messages, tools=tools, chat_template=tagged_template(), tokenize=False)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, spans = list(enc["input_ids"]), enc["offset_mapping"]
    mask = [False] * len(ids)
    for m in messages:
        reply = m.get("content") if m.get("role") == "assistant" else None
        at = text.find(reply) if reply else -1
        if at < 0:
            continue
        inside = [t for t, (a, b) in enumerate(spans) if a < at + len(reply) and b > at]
        for t in inside + ([inside[-1] + 1] if inside and inside[-1] + 1 < len(ids) else []):
            mask[t] = True
    return ids[:max_length], mask[:max_length]


reply_found_by_search.convention = "speculators-regex"  # type: ignore[attr-defined]
#: Over that convention: the token after each reply (the end of turn) is trained, reasoning and tool calls are not.
reply_found_by_search.mask_policy = {"end_of_turn": True, "reasoning_final": False,  # type: ignore[attr-defined]
                                     "reasoning_earlier": False, "tool_calls": False}
