"""The ``[mask]`` table of a contract: which tokens of an assistant turn may, and which must, carry loss.

One frozen record, :class:`MaskPolicy`, read by the presets (``presets.py``), the mask rules
(``mask_rules.py``) and the contract file (``file.py``); standard library only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from ..errors import UsageProblem


@dataclass(frozen=True)
class MaskPolicy:
    """Which tokens of an assistant turn may, and which must, carry ``loss_mask = 1``.

    Producers disagree (see docs/conventions.md): speculators 0.4-0.7 supervises assistant
    content with reasoning and tool calls but not the end token; generation-tag masks
    supervise what the template's tags enclose; speculators 0.8+ writes one row per
    assistant turn and supervises that turn from the end of the generation prompt through
    its end token and newline; SpecForge supervises every assistant turn through its end
    token and newline. ``convention`` names the producer a contract describes; the built-in
    conventions (``presets.py``) fill in the keys and derive what depends on the
    template (where its tags sit, what its generation prompt holds). The defaults are the
    speculators 0.4-0.7 convention with completeness off, which is what contract files
    written before these keys existed meant.
    """

    content: bool = True  # assistant text outside reasoning and tool-call blocks
    reasoning_final: bool = True  # <think> block of the row's last assistant turn
    reasoning_earlier: bool = True  # <think> blocks of earlier assistant turns (templates often drop them)
    tool_calls: bool = True  # <tool_call> blocks
    end_of_turn: bool = False
    newline_after_end: bool = False
    header: bool = False  # header tokens of an assistant turn (a training template may tag them as generated)
    boundary_tokens: str = "allow"  # "allow" | "strict"
    turns: str = "all"  # "all" | "last": only the row's last assistant turn may be supervised
    #: "off" | "all" | "last": allowed tokens of every / the last assistant turn must be supervised
    completeness: str = "off"
    #: "context" when the generation prompt already holds the reasoning opener (``<think>`` and its
    #: newline), so a per-turn producer leaves them unsupervised. ``prompt_context`` covers the general
    #: case: the whole generation prompt as context.
    reasoning_opener: str = "supervised"  # "supervised" | "context"
    #: "last" / "all": the generation prompt, as the template renders it, is context at the start of
    #: the row's last / every assistant turn, and every token after it through the turn's end token
    #: and newline is the model's output. Where prompts differ (``enable_thinking``, after a tool
    #: message), tokens that one prompt holds and another does not may go either way.
    prompt_context: str = "off"  # "off" | "last" | "all"
    #: An empty reasoning block (``<think>\n\n</think>\n\n``, what a non-thinking prompt pre-fills):
    #: "supervised" like any reasoning, "context" (never supervised), or "optional".
    empty_reasoning: str = "supervised"
    #: The whitespace a template writes between a reasoning block's end and the reply (``</think>`` then
    #: ``\n\n``), which the span oracle labels assistant content: "content" (it is content: the ``content``
    #: key decides), "supervised" (may and must be, whatever ``content`` says), "context" (never
    #: supervised: a producer that masks the reply text alone, e.g. arctic-training's ``str.find``), or
    #: "optional" (may be, never required).
    reasoning_separator: str = "content"
    #: The same for the whitespace a template writes right before or after a tool-call block (the newline
    #: between the reply and ``<tool_call>``, between two tool calls), outside any reasoning separator.
    tool_call_separator: str = "content"
    #: Keys of the above that may be supervised but are never required (a template's tags enclose
    #: them in some turns only, e.g. an end-of-sequence token after the last turn).
    optional: tuple[str, ...] = ()
    #: The producer convention the keys come from: "custom" (the keys as written), "auto" (inferred
    #: from the data and the template), or a built-in (docs/conventions.md).
    convention: str = "custom"

    #: Keys that take one of a few words (every other key is a bool, except ``optional``: a list).
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {
        "boundary_tokens": ("allow", "strict"),
        "turns": ("all", "last"),
        "completeness": ("off", "all", "last"),
        "reasoning_opener": ("supervised", "context"),
        "prompt_context": ("off", "last", "all"),
        "empty_reasoning": ("supervised", "context", "optional"),
        "reasoning_separator": ("content", "supervised", "context", "optional"),
        "tool_call_separator": ("content", "supervised", "context", "optional"),
        "convention": ("custom", "auto", "speculators-regex", "generation-tags", "speculators-per-turn", "specforge",
                       "specforge-no-think"),
    }
    #: What ``optional`` may name: the keys that make a role or place supervisable.
    OPTIONAL_KEYS: ClassVar[tuple[str, ...]] = ("content", "reasoning", "tool_calls", "end_of_turn",
                                                "newline_after_end", "header")

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def kind(cls, key: str) -> type:
        if key == "optional":
            return list
        return bool if key not in cls.CHOICES else str

    def validate(self, where: str) -> None:
        for key, allowed in self.CHOICES.items():
            if getattr(self, key) not in allowed:
                raise UsageProblem(f"{where}: [mask] {key} must be one of {', '.join(repr(a) for a in allowed)}, "
                                   f"got {getattr(self, key)!r}")
        bad = [k for k in self.optional if k not in self.OPTIONAL_KEYS]
        if bad:
            raise UsageProblem(f"{where}: [mask] optional may list {', '.join(self.OPTIONAL_KEYS)}, got {bad[0]!r}")
