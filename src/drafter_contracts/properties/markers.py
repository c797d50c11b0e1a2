"""The assistant header of the template under test, as text a user could type.

A regex mask over decoded text (speculators 0.4-0.7) takes any copy of the assistant
header for a turn opener, so user text holding that header gets supervised. Which text
that is depends on the template: ``<|im_start|>assistant\\n`` for ChatML,
``<|start_header_id|>assistant<|end_header_id|>\\n\\n`` for Llama 3, ``<start_of_turn>model\\n``
for Gemma. The strategies must type the header of the template under test, so it is
read from the template's own renderings here, never taken from a list of families.

A header typed in user text must stay distinguishable from a real turn, or no oracle
could tell a leak from supervision of a real reply: each candidate is rendered inside a
user message and kept only if the span oracle labels the text after it as not assistant
(a template whose turns need no end token, such as GLM's, would make it a real turn).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..spans.labels import Role

_USER, _ANSWER, _AFTER = "Qzusertext", "Qzanswertext", "Qzaftertext"
_ASSISTANT_ROLES = (Role.ASSISTANT, Role.REASONING, Role.TOOL_CALL, Role.ASSISTANT_END, Role.ASSISTANT_HEADER)
_REASONING_BLOCK = re.compile(r"<think>.*?</think>\s*", re.DOTALL)


@dataclass(frozen=True)
class TemplateMarkers:
    """Header strings to type into user text, and the candidates left out with the reason."""

    headers: tuple[str, ...]
    refused: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        shown = ", ".join(repr(h) for h in self.headers) or "none"
        if self.refused:
            shown += "; left out: " + "; ".join(f"{m!r} ({why})" for m, why in self.refused.items())
        return shown


def _render(tokenizer: Any, template: str | None, messages: list[dict[str, Any]], prompt: bool = False) -> str:
    return tokenizer.apply_chat_template(messages, chat_template=template, tokenize=False, add_generation_prompt=prompt)


def header_candidates(tokenizer: Any, template: str | None = None) -> tuple[str, ...]:
    """The assistant header as the template renders it: its generation prompt, the text between a user turn
    and the assistant's content, and that text without an empty reasoning block the template pre-fills."""
    user = [{"role": "user", "content": _USER}]
    out: list[str] = []
    try:
        base = _render(tokenizer, template, user)
    except Exception:  # noqa: BLE001 (a template that needs more than a user turn: no candidates from it)
        return ()
    try:
        prompt = _render(tokenizer, template, user, prompt=True)
        if prompt.startswith(base):
            out.append(prompt[len(base):])
    except Exception:  # noqa: BLE001
        pass
    try:
        full = _render(tokenizer, template, user + [{"role": "assistant", "content": _ANSWER}])
        if full.startswith(base) and _ANSWER in full[len(base):]:
            head = full[len(base):full.index(_ANSWER, len(base))]
            out += [head, _REASONING_BLOCK.sub("", head)]
    except Exception:  # noqa: BLE001
        pass
    seen: dict[str, None] = {}
    for h in out:
        if h.strip() and _ANSWER not in h and _USER not in h:
            seen[h] = None
    return tuple(seen)


def template_markers(tokenizer: Any, oracle: Any, template: str | None = None) -> TemplateMarkers:
    """The candidates whose typed copy the oracle tells from a real turn (``oracle``: ``maskers.oracle.Oracle``)."""
    kept: list[str] = []
    refused: dict[str, str] = {}
    for header in header_candidates(tokenizer, template):
        msgs = [{"role": "user", "content": f"{_USER} {header}{_AFTER}"}, {"role": "assistant", "content": _ANSWER}]
        try:
            text = _render(tokenizer, template, msgs)
        except Exception as exc:  # noqa: BLE001
            refused[header] = f"the template rejects it in user text: {type(exc).__name__}"
            continue
        if text.count(_AFTER) != 1:
            refused[header] = "the template does not render it verbatim in user text"
            continue
        enc = oracle.vocab.backend.encode(text, add_special_tokens=False)
        ids = np.asarray(enc.ids, dtype=np.int64)
        start = text.index(_AFTER)
        at = [k for k, (a, b) in enumerate(enc.offsets) if a < start + len(_AFTER) and b > start]
        labels = oracle.labels_for(ids, 1 << 30)
        if np.isin(labels.role[at], list(_ASSISTANT_ROLES)).any():
            refused[header] = "typed in user text it opens a turn the oracle cannot tell from a real one"
            continue
        kept.append(header)
    return TemplateMarkers(tuple(kept), refused)
