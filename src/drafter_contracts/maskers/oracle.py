"""The one door from the properties to the span oracle and the mask policy.

The properties judge a masker's rows with the same two pieces a dataset run uses: the
span oracle (``spans.make_oracle``: a template profile verified against the
template's own renderings) labels every token with its role, and the mask rules of
``contract.mask_rules`` (``allowed_tokens`` / ``required_tokens`` over ``MaskFacts``) say which
tokens may and which must be supervised under the convention's policy
(``contract/presets.py``). Nothing here numbers turns or decides completeness on its own, so a
property and a dataset run can never disagree about what a row should look like. A row
is one "shard" of one row for the labeller.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..contract import Contract, MaskPolicy
from ..contract import mask_rules as pol
from ..contract.mask_rules import disallowed_supervision
from ..contract.presets import resolve
from ..spans.turns import MaskFacts, turns_of
from ..spans.excerpt import LEGEND, excerpt
from ..spans.labels import ROLE_NAMES, Labels, Role
from ..spans import SpanOracle, make_oracle
from ..tokenizer.vocabulary import Vocabulary


def policy_from(values: dict[str, Any] | None, base: MaskPolicy | None = None) -> MaskPolicy:
    """A MaskPolicy with the masker's declared values over ``base`` (the contract's)."""
    base = base or MaskPolicy()
    fields = {k: v for k, v in (values or {}).items() if hasattr(base, k)}
    return dataclasses.replace(base, **fields)


def with_template(vocab: Vocabulary, template: str | None) -> Vocabulary:
    """``vocab`` whose chat template is ``template`` (same tables and backend): the oracle must be the one
    for the template that renders the rows, which for ``--masker=hf --chat-template FILE`` is FILE."""
    if template is None or template == vocab.chat_template:
        return vocab
    twin = object.__new__(Vocabulary)
    twin.__dict__.update(vocab.__dict__)
    # a loaded hf_tokenizer is shared: the oracle's renderings pass chat_template= explicitly
    twin.chat_template = template
    return twin


def resolve_policy(contract: Contract, spans: SpanOracle, vocab: Vocabulary, convention: str | None,
                   declared: dict[str, Any] | None, explicit_contract: bool) -> tuple[MaskPolicy, str]:
    """The mask policy the properties hold the masker to, and one line saying where it comes from.

    ``--contract`` given: its ``[mask]`` (a convention it names is resolved against this template;
    ``auto``, which needs data, takes the masker's convention). Otherwise the masker's convention
    (hf: generation-tags, learnt from the template's tags; speculators 0.4-0.7: speculators-regex;
    0.8+: speculators-per-turn), with the keys it declares on top; a masker that declares no
    convention gets the default contract's policy with its declared keys.
    """
    explicit = frozenset(contract.mask_keys)
    name = contract.mask.convention
    if explicit_contract and name != "auto":
        decision = resolve(contract.mask, spans, explicit)
        return decision.policy, f"the contract {contract.name} ({decision.how})"
    if convention is None:
        if name == "auto":
            name = "speculators-regex"
        convention = name
        source = f"{contract.name}'s convention {name}"
    else:
        source = f"the masker's convention {convention}"
    mask = dataclasses.replace(contract.mask, convention=convention)
    decision = resolve(mask, spans, explicit if explicit_contract else frozenset())
    policy = policy_from(declared, decision.policy)
    if declared:
        source += " with its declared keys " + ", ".join(f"{k}={v}" for k, v in sorted(declared.items()))
    return policy, f"{source} ({decision.how})"


@dataclass
class Oracle:
    vocab: Vocabulary
    policy: MaskPolicy
    spans: SpanOracle  # the template's verified profile, prompts and whitespace table

    @classmethod
    def build(cls, vocab: Vocabulary, policy: MaskPolicy) -> "Oracle":
        """The template's profile, as a dataset run would choose it (--template-profile auto)."""
        return cls(vocab, policy, make_oracle(vocab))

    def labels_for(self, ids: list[int] | np.ndarray, max_len: int) -> Labels:
        return self.spans.label_row(np.asarray(ids, dtype=np.int64), max_len)

    def _row(self, ids: list[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray, MaskFacts]:
        arr = np.asarray(ids, dtype=np.int64)
        return arr, np.array([0, len(arr)], dtype=np.int64), self.spans.mask_facts(arr)

    def unsound_tokens(self, mask: list[bool] | np.ndarray, ids: list[int] | np.ndarray, labels: Labels) -> np.ndarray:
        """Bool per token: supervised where the policy forbids it (``contract.mask_rules.disallowed_supervision``)."""
        arr, offsets, facts = self._row(ids)
        return disallowed_supervision(np.asarray(mask, dtype=bool), labels, self.policy, offsets, facts=facts)

    def missing_tokens(self, mask: list[bool] | np.ndarray, ids: list[int] | np.ndarray, labels: Labels,
                       max_len: int) -> np.ndarray:
        """Bool per token: required by the policy's completeness (``mask_rules.required_tokens``) yet unsupervised.

        The rules a dataset run applies: per-turn rows need only their last turn, from where the
        template's generation prompt stops; a row cut at ``max_len`` needs nothing past the cut.
        """
        arr, offsets, facts = self._row(ids)
        turns = turns_of(labels, offsets, facts.joins_blocks) if pol.needs_turns(self.policy) else None
        need = pol.required_tokens(arr, offsets, labels, turns, self.policy, max_len, facts.newline_lead, facts)
        return need & ~np.asarray(mask, dtype=bool)

    def show(self, ids: list[int], mask: list[bool], position: int, max_len: int) -> str:
        """A decoded window of the row around ``position``: roles and supervised tokens marked."""
        labels = self.labels_for(ids, max_len)
        return excerpt(np.asarray(ids), np.asarray(mask, dtype=bool), labels.role, position, self.vocab)

    def role_name(self, labels: Labels, position: int) -> str:
        return ROLE_NAMES[Role(int(labels.role[position]))]

    def describe_policy(self) -> str:
        p = self.policy
        keys = ("content", "reasoning_final", "reasoning_earlier", "tool_calls", "end_of_turn", "newline_after_end",
                "header", "turns", "completeness", "prompt_context", "empty_reasoning")
        shown = ", ".join(f"{k}={getattr(p, k)}" for k in keys)
        return shown + (f", optional={','.join(p.optional)}" if p.optional else "")


__all__ = ["LEGEND", "Oracle", "policy_from", "resolve_policy", "with_template"]
