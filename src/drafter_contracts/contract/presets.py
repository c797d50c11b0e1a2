"""Producer conventions: which tokens a producer supervises, as mask policies, some learnt from the template.

A contract's ``[mask] convention`` names one of them; the keys it sets are the
convention's, and keys the contract writes out win. What a convention supervises can
depend on the template, and is then derived from it, never assumed:

- ``speculators-regex`` (speculators 0.4-0.7): assistant content, the reasoning blocks
  the template keeps and tool calls, in every assistant turn; not the header, not the
  end token, not what follows it.
- ``generation-tags`` (transformers' ``return_assistant_tokens_mask``, TRL's SFT
  ``assistant_only_loss``): what the template's ``{% generation %}`` tags enclose. Where
  the tags sit (around the header? the end token? the newline after it?) is read from
  the template's own masks of the probe conversations, per role.
- ``speculators-per-turn`` (speculators 0.8+): one row per assistant turn; the row's
  last turn is supervised from where the template's generation prompt stops matching it,
  through its end token and newline; earlier turns are context.
- ``specforge`` (SpecForge 0.2): every assistant turn from after its header through the
  end token and its newline; ``specforge-no-think`` (its qwen3-instruct configuration)
  also keeps the empty reasoning block of a non-thinking prompt as context.

``auto`` infers the convention from the data (``fit.py``): each candidate's
mask rules run on the first rows, and the one they fit is used; a producer no preset describes
(arctic-training's ``str.find`` of each reply) gets the policy learnt from the rows themselves
(``learn.py``), compared key by key with the nearest preset (:func:`nearest`).
The summary says which and why.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..errors import UsageProblem
from .mask_policy import MaskPolicy

#: Preset keys of each built-in convention (on top of MaskPolicy's defaults).
PRESETS: dict[str, dict[str, Any]] = {
    "speculators-regex": dict(content=True, reasoning_final=True, reasoning_earlier=True, tool_calls=True,
                              end_of_turn=False, newline_after_end=False, header=False, turns="all",
                              completeness="all"),
    "generation-tags": dict(content=True, reasoning_final=True, reasoning_earlier=True, tool_calls=True,
                            end_of_turn=True, newline_after_end=False, header=False, turns="all", completeness="all"),
    "speculators-per-turn": dict(content=True, reasoning_final=True, reasoning_earlier=True, tool_calls=True,
                                 end_of_turn=True, newline_after_end=True, header=False, turns="last",
                                 completeness="last", prompt_context="last"),
    "specforge": dict(content=True, reasoning_final=True, reasoning_earlier=True, tool_calls=True, end_of_turn=True,
                      newline_after_end=True, header=False, turns="all", completeness="all"),
    "specforge-no-think": dict(content=True, reasoning_final=True, reasoning_earlier=True, tool_calls=True,
                               end_of_turn=True, newline_after_end=True, header=False, turns="all",
                               completeness="all", empty_reasoning="context"),
}
#: The order ``auto`` tries them in (the first that fits the data wins).
AUTO_ORDER = ("speculators-regex", "generation-tags", "speculators-per-turn", "specforge", "specforge-no-think")
#: Conventions whose producer writes one row per assistant turn: a conversation of n replies is n rows, so a
#: row count counts turns, and reports that count rows say so.
ROW_PER_TURN = frozenset({"speculators-per-turn"})
#: What each convention is, for the summary and hints.
DESCRIPTION = {
    "speculators-regex": "speculators 0.4-0.7: assistant content, reasoning and tool calls; no header or end token",
    "generation-tags": "generation-tag masks: what the template's {% generation %} tags enclose",
    "speculators-per-turn": "speculators 0.8+: one row per assistant turn, from the end of the generation prompt "
                            "through the end token and newline",
    "specforge": "SpecForge: every assistant turn after its header, through the end token and newline",
    "specforge-no-think": "SpecForge (qwen3-instruct): as specforge, the empty reasoning block is context",
}


@dataclass
class Decision:
    """The policy a contract resolves to, and one line saying how."""

    policy: MaskPolicy
    how: str
    details: dict[str, Any] = dataclasses.field(default_factory=dict)


def with_preset(policy: MaskPolicy, explicit: frozenset[str], keys: dict[str, Any]) -> MaskPolicy:
    """The one place a convention's keys are applied: ``keys`` (a preset, or the keys learnt from rows) over
    MaskPolicy's defaults, under the keys the contract or the command line set explicitly (taken from
    ``policy``, whose convention the result keeps)."""
    fresh = dataclasses.replace(MaskPolicy(), **keys)
    return dataclasses.replace(fresh, **{k: getattr(policy, k) for k in explicit if k != "convention"},
                               convention=policy.convention)


def resolve(policy: MaskPolicy, oracle: Any, explicit: frozenset[str] = frozenset()) -> Decision:
    """A contract's mask policy with its named convention applied (``auto``, inferred from the data,
    is ``fit.py: decide``); ``generation-tags`` with what the template's tags enclose (``oracle``).

    ``explicit`` are the [mask] keys the contract file or the command line wrote (they win over a
    convention's presets).
    """
    name = policy.convention
    if name == "custom":
        return Decision(policy, "the contract's [mask] keys (convention = custom)")
    if name == "auto":  # inferred from the data: fit.py
        raise UsageProblem("[mask] convention = \"auto\" needs the dataset's first rows and a tokenizer; "
                           "pass --tokenizer or name the convention")
    keys = dict(PRESETS[name])
    how = DESCRIPTION[name]
    details: dict[str, Any] = {}
    if name == "generation-tags" and oracle is not None:
        learnt = oracle.verification.tags  # learnt with the profile, cached with it (spans/learn/resolve.py)
        if learnt and "error" in learnt:
            raise UsageProblem(learnt["error"])
        if learnt:
            keys.update({k: (tuple(v) if isinstance(v, list) else v) for k, v in learnt["keys"].items()})
            how += "; " + learnt["note"]
            details["tags"] = learnt["note"]
        else:
            how += "; the tokenizer's template has no generation tags, so the preset keys apply"
    return Decision(with_preset(policy, explicit, keys), how, details)


# --------------------------------------------------------------------------- comparing policies

#: The keys of a policy in the order they are printed and written (``convention`` aside).
KEY_ORDER = ("header", "content", "reasoning_separator", "reasoning_final", "reasoning_earlier", "empty_reasoning",
             "tool_calls", "tool_call_separator", "end_of_turn", "newline_after_end", "optional", "turns",
             "completeness", "prompt_context", "reasoning_opener", "boundary_tokens")


def _same(key: str, a: Any, b: Any) -> bool:
    return set(a) == set(b) if key == "optional" else a == b


def differing_keys(keys: dict[str, Any], policy: MaskPolicy) -> tuple[str, ...]:
    """The keys of ``keys`` (a subset of a policy's) whose value ``policy`` does not share, in print order."""
    return tuple(k for k in KEY_ORDER if k in keys and not _same(k, keys[k], getattr(policy, k)))


def nearest(keys: dict[str, Any], presets: dict[str, MaskPolicy]) -> tuple[str, tuple[str, ...]]:
    """The preset that differs from ``keys`` in the fewest of them (the first in ``presets``' order on a tie),
    and those keys; ("", ()) without presets."""
    best: tuple[int, int, str, tuple[str, ...]] | None = None
    for i, (name, policy) in enumerate(presets.items()):
        diff = differing_keys(keys, policy)
        if best is None or (len(diff), i) < best[:2]:
            best = (len(diff), i, name, diff)
    return (best[2], best[3]) if best else ("", ())


def _word(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(value) + "]"
    return str(value)


def keys_text(policy: MaskPolicy, keys: tuple[str, ...] = KEY_ORDER) -> str:
    """``key=value`` for each key, the way ``--mask-policy`` takes them."""
    return " ".join(f"{k}={_word(getattr(policy, k))}" for k in keys)


def flags(policy: MaskPolicy, base: MaskPolicy) -> str:
    """The ``--mask-policy KEY=VALUE`` flags that turn ``base`` into ``policy``."""
    keys = differing_keys({k: getattr(policy, k) for k in KEY_ORDER}, base)
    return " ".join(f"--mask-policy {k}={_word(getattr(policy, k)).strip('[]').replace(', ', ',')}" for k in keys)
