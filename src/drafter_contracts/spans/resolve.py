"""``--template-profile NAME|auto`` -> the profile the labeller uses, and the labeller for it.

``auto`` derives from the tokenizer's chat template; when the derived profile is
covered by a built-in family (same markers, nothing the built-in lacks), the
built-in is used: it also knows the family's roles a probe cannot show (ChatML's
``developer``, Llama's ``<|eom_id|>``) and ChatML keeps its leaner dedicated
labeller. When derivation fails, the contract's declared ``family`` or the
tokenizer's special tokens pick a built-in; when nothing fits, one usage line
says what could not be derived.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import UsageProblem
from ..vocab import Vocabulary
from . import chatml, generic
from .builtin import ALIASES, BUILTINS, MissingToken, builtin_profile, sniff_family
from .derive import DerivationFailed, cached_derivation
from .labels import Labels
from .profile import CompiledProfile, TemplateProfile

AUTO = "auto"
DISPLAY = {"chatml": "ChatML", "llama3": "Llama 3", "gemma": "Gemma", "mistral": "Mistral", "deepseek": "DeepSeek",
           "phi4": "Phi-4"}


def profile_names() -> tuple[str, ...]:
    return (AUTO, *BUILTINS, *ALIASES)


def covered_by(derived: TemplateProfile, builtin: TemplateProfile) -> bool:
    """Every marker the derived profile uses means the same in the built-in one."""
    def match(h):  # the built-in header the derived one starts with (it may read a longer core)
        for b in builtin.headers:
            if b.role == h.role and h.core[:len(b.core)] == b.core and (
                    b.tail == h.tail if len(b.core) == len(h.core) else b.tail is None):
                return b
        return None

    for h in derived.headers:
        b = match(h)
        if b is None or not set(h.ends) <= set(b.ends):
            return False
    same = ("after_end", "bos", "bos_role")
    if any(getattr(derived, f) != getattr(builtin, f) for f in same):
        return False
    return all(getattr(derived, f) in (None, getattr(builtin, f)) for f in ("reasoning", "tool_call", "tool_response"))


@dataclass
class SpanOracle:
    """The chosen profile and the function that labels a shard with it."""

    profile: TemplateProfile
    how: str  # one line for the summary: what was chosen and why
    label: Callable[[np.ndarray, np.ndarray, int], Labels]
    labeller_profile: object  # what explain/legacy callers pass to chatml.label

    def to_dict(self) -> dict:
        return {"name": self.profile.name, "source": self.profile.source, "how": self.how,
                "notes": list(self.profile.notes)}


def _builtin(name: str, vocab: Vocabulary, where: str) -> TemplateProfile:
    try:
        return builtin_profile(name, vocab)
    except MissingToken as exc:
        raise UsageProblem(f"{where}: --tokenizer {vocab.name} has no {exc.args[0]} token, so it is not a "
                           f"{ALIASES.get(name, name)} tokenizer; pass the tokenizer that produced the dataset "
                           "or another --template-profile") from None


def choose_profile(vocab: Vocabulary, name: str = AUTO, family: str | None = None) -> tuple[TemplateProfile, str]:
    """The profile for ``--template-profile name`` and a line saying how it was chosen."""
    if name != AUTO:
        if ALIASES.get(name, name) not in BUILTINS:
            raise UsageProblem(f"--template-profile {name}: unknown; use auto or one of {', '.join(BUILTINS)}")
        return _builtin(name, vocab, f"--template-profile {name}"), f"built-in {ALIASES.get(name, name)} (requested)"
    try:
        derived = cached_derivation(vocab)
    except DerivationFailed as exc:
        reason = str(exc)
        fallback = family if family in BUILTINS or family in ALIASES else None
        declared_missing = None
        for candidate in (fallback, sniff_family(vocab)):
            if candidate is None:
                continue
            try:
                return builtin_profile(candidate, vocab), f"built-in {ALIASES.get(candidate, candidate)} (derivation failed: {reason})"
            except MissingToken as missing:
                if candidate == fallback:
                    declared_missing = missing.args[0]
        declared = ""
        if declared_missing is not None:
            shown = DISPLAY.get(fallback, fallback)
            declared = f", it cannot be the {shown} tokenizer the contract's family declares (no {declared_missing} token)"
        raise UsageProblem(f"--tokenizer {vocab.name}: cannot derive a template profile from its chat template ({reason})"
                           f"{declared}, and no built-in family matches its special tokens; pass the tokenizer that "
                           f"produced the dataset, or --template-profile with one of {', '.join(BUILTINS)}") from None
    family_name = sniff_family(vocab)
    if family_name is not None:
        try:
            builtin = builtin_profile(family_name, vocab)
        except MissingToken:
            builtin = None
        if builtin is not None and covered_by(derived, builtin):
            return builtin, f"built-in {family_name} (covers the profile derived from the chat template)"
    return derived, "derived from the chat template"


def make_oracle(vocab: Vocabulary, name: str = AUTO, family: str | None = None) -> SpanOracle:
    profile, how = choose_profile(vocab, name, family)
    if profile.name == "chatml" and profile.source == "builtin":
        fast = chatml.ChatMLProfile.from_vocabulary(vocab)
        return SpanOracle(profile, how, lambda ids, off, max_len: chatml.label(ids, off, fast, max_len), fast)
    compiled = CompiledProfile(profile, vocab.newline_lead)
    return SpanOracle(profile, how, lambda ids, off, max_len: generic.label(ids, off, compiled, max_len), compiled)
