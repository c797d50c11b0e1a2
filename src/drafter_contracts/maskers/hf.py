"""The ``hf`` masker: transformers' own assistant mask from ``{% generation %}`` tags.

``apply_chat_template(return_assistant_tokens_mask=True)`` marks the tokens rendered
inside ``{% generation %}…{% endgeneration %}``. Stock model templates have no tags (the
mask is then all zeros), so the masker needs a tagged template: the tokenizer's own if it
has tags, otherwise ``--chat-template FILE``, otherwise TRL's tagged ``_training`` copy when the
tokenizer's template is exactly one of TRL's vendor templates (``builtin:qwen3.6`` carries TRL's
``qwen3_6.jinja``), as TRL's SFT swaps it in for ``assistant_only_loss``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import UsageProblem
from . import Masker

_TAG = re.compile(r"\{%-?\s*generation\s*-?%\}")
_GENERATION_TAG = re.compile(r"\{%-?\s*(?:end)?generation\s*-?%\}")


def has_generation_tags(template: str | None) -> bool:
    return bool(template and _TAG.search(template))


def strip_generation_tags(template: str) -> str:
    """The template without its generation markers (whitespace-controlled tags render nothing)."""
    return _GENERATION_TAG.sub("", template)


def tagged_template_for(tokenizer: Any, chat_template: str | Path | None = None) -> str:
    """The generation-tagged template to mask with; UsageProblem when there is none."""
    if chat_template is not None:
        path = Path(chat_template).expanduser()
        if not path.is_file():
            raise UsageProblem(f"--chat-template {chat_template}: no such file; pass a Jinja chat template file")
        text = path.read_text("utf-8")
        if not has_generation_tags(text):
            raise UsageProblem(f"--chat-template {chat_template}: has no {{% generation %}} tags, so transformers "
                               "cannot derive an assistant mask from it; wrap assistant output in generation tags")
        return text
    own = getattr(tokenizer, "chat_template", None)
    if has_generation_tags(own):
        return own
    from ..tokenizer.trl_templates import training_variant

    tagged = training_variant(own)
    if tagged is not None:
        return tagged
    raise UsageProblem("--masker=hf: the tokenizer's chat template has no {% generation %} tags, so its assistant "
                       "mask is all zeros; pass --chat-template FILE with a tagged copy of the template")


def supports_assistant_mask(tokenizer: Any, chat_template: str | None = None) -> bool:
    """Does the template give a non-empty assistant mask? (probe with a user turn: strict templates need one)."""
    probe = [{"role": "user", "content": "ping"}, {"role": "assistant", "content": "pong"}]
    out = tokenizer.apply_chat_template(probe, chat_template=chat_template, tokenize=True, return_dict=True,
                                        return_assistant_tokens_mask=True)
    return any(int(m) == 1 for m in out.get("assistant_masks", []))


def render_with_mask(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, tokenizer: Any,
                     template: str) -> tuple[list[int], list[bool]]:
    """Full (untruncated) ids and transformers' assistant mask."""
    out = tokenizer.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=True,
                                        return_dict=True, return_assistant_tokens_mask=True)
    return list(out["input_ids"]), [bool(m) for m in out["assistant_masks"]]


def make_hf_masker(tokenizer: Any, chat_template: str | Path | None = None) -> Masker:
    template = tagged_template_for(tokenizer, chat_template)

    def hf(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, tok: Any,
           max_length: int) -> tuple[list[int], list[bool]]:
        ids, mask = render_with_mask(messages, tools, tok, template)
        return ids[:max_length], mask[:max_length]

    import transformers

    return Masker(name="hf", fn=hf, version=f"transformers {transformers.__version__}",
                  probe=supports_assistant_mask, convention="generation-tags", chat_template=template)
