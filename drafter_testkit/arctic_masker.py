"""arctic-training's SFT tokenization as a ``--masker``: its own ``tokenize_messages``, called as its factory calls it.

``trainer_producers.py`` runs arctic-training 0.8.0 on a fixed corpus; this module lets the template -> mask
properties draw the conversations instead (``docs/properties.md``), so that a defect is found by the code that
has it, on conversations nobody wrote down. Nothing of arctic-training is re-implemented:
:func:`arctic_sft` calls ``SFTDataFactory.tokenize_messages`` with the data config's defaults
(``mask_inputs=True``, ``ignore_empty_think=False``), takes the row as ``process`` leaves it, drops it as the
``filter_dataset_length`` callback does (``filter_samples`` is on by default), and reads the loss mask the way
the trainer's loss does (``labels != -100``; the labels are not shifted). What it must do that arctic-training
does not do for it: a message whose content is None is given ``""`` (``tokenize_messages`` calls ``str.find``
on every assistant content and raises TypeError on None), and ``tools`` are not passed (``process`` keeps the
``messages`` column alone, and ``tokenize_messages`` renders without them).

It runs only where arctic-training imports, i.e. in its own venv (``.ci/install-arctic-training``, which also
installs drafter-contracts there): ``.deps/arctic-venv/bin/python -m pytest
--masker=CHECKOUT/drafter_testkit/arctic_masker.py:arctic_sft --tokenizer=DIR`` from any folder, DIR a folder
transformers 4 loads (``tokenizer_class: Qwen2Tokenizer``; ``trainer_producers._arctic_tokenizer``). This
module imports only the standard library, drafter-contracts' masker types and arctic-training, so it loads by
path.

The attributes below say what arctic-training means to supervise (``convention`` / ``mask_policy``) and the
defects the properties found in 0.8.0 (``known_defects``), which the suite reads as XFAIL.
"""

from __future__ import annotations

import logging
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from drafter_contracts.errors import UsageProblem
from drafter_contracts.maskers import KnownDefect

#: ``get_masked_labels``' value for a token without loss (``arctic_training.data.utils.IGNORE_INDEX``).
IGNORE_INDEX = -100
#: The release whose defects :data:`KNOWN_DEFECTS` records.
MEASURED = "0.8.0"


def _installed() -> str:
    try:
        return version("arctic_training")
    except PackageNotFoundError:
        raise UsageProblem("--masker arctic_masker: arctic-training is not installed in this Python; run "
                           ".ci/install-arctic-training and pytest with .deps/arctic-venv/bin/python") from None


def _factory() -> Any:
    """``SFTDataFactory``, imported once (its import chain, deepspeed's, takes seconds), without deepspeed's
    warning that it fell back to the CPU accelerator."""
    before = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        from arctic_training.data.sft_factory import SFTDataFactory
    finally:
        logging.disable(before)
    return SFTDataFactory


FOUND = _installed()
SFT = _factory()

#: Defects the properties found in released arctic-training versions, each with the property that shows it.
#: The aimed property, ``test_mask_follows_the_reply_not_its_copy``, is left out on purpose: a reply quoted
#: before it is the defect the property exists to show, so it stays a failure with its whole decoded example.
KNOWN_DEFECTS: dict[str, dict[str, KnownDefect]] = {MEASURED: {
    "test_ids_equal_template_rendering": KnownDefect(
        "SFTDataFactory keeps the messages column alone and tokenize_messages renders without tools, so a "
        "conversation with tool definitions is trained without them; and filter_dataset_length drops a "
        "conversation longer than max_length instead of cutting it"),
    "test_mask_is_sound": KnownDefect(
        "each reply is located with str.find over the whole rendering: text found first elsewhere (a quote in "
        "user, system or tool text, the same text in an earlier turn) is trained there with the token after it, "
        "and a reply the template rewrites (edge whitespace stripped, an inline <think> block re-spaced) is not "
        "found: find returns -1 and the tokens of the conversation's first len(reply) - 1 characters are trained"),
    "test_mask_is_complete": KnownDefect(
        "a reply str.find finds first elsewhere (its words inside a user, system or tool message, an identical "
        "earlier reply) or not at all (rewritten by the template) is left untrained where the template renders it"),
}}


def arctic_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as arctic-training can take it: None content given as ``""`` (the rest untouched)."""
    return [{**m, "content": ""} if m.get("content") is None else m for m in messages]


def arctic_sft(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, tokenizer: Any,
               max_length: int) -> tuple[list[int], list[bool]] | None:
    """One conversation through ``SFTDataFactory.tokenize_messages``; None where ``filter_dataset_length`` drops
    it. ``tools`` is ignored, as arctic-training's SFT data path has no place for it."""
    row = SFT.tokenize_messages(arctic_messages(messages), tokenizer, mask_inputs=True, ignore_empty_think=False)
    ids = list(row["input_ids"])
    if len(ids) > max_length:
        return None
    return ids, [label != IGNORE_INDEX for label in row["labels"]]


arctic_sft.version = f"arctic-training {FOUND}"  # type: ignore[attr-defined]
#: What arctic-training means to train: the ``content`` string of each assistant message where the template
#: renders it, and the one token after it (the end of turn). So no tool calls, and reasoning only as far as the
#: content holds it inline (``<think>…</think>`` typed into the content, empty or not, is found with the reply and
#: trained: the ``ignore_empty_think`` option exists to stop that for empty blocks), never ``reasoning_content``:
#: reasoning, an empty block and the whitespace between ``</think>`` and the reply (``reasoning_separator``) may be
#: trained, never must. Nor must the end token: a turn without text (tool calls alone, an empty reply) has no
#: token before it to follow, and after a reply followed by a tool call the token after is the whitespace
#: before ``<tool_call>`` (``tool_call_separator``).
arctic_sft.convention = "speculators-regex"  # type: ignore[attr-defined]
arctic_sft.mask_policy = {  # type: ignore[attr-defined]
    "reasoning_final": True, "reasoning_earlier": True, "empty_reasoning": "optional",
    "reasoning_separator": "optional", "tool_calls": False, "tool_call_separator": "optional", "end_of_turn": True,
    "optional": ("reasoning", "end_of_turn")}
arctic_sft.known_defects = KNOWN_DEFECTS.get(FOUND, {})  # type: ignore[attr-defined]
