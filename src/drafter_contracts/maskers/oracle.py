"""The one door from the properties to the span oracle and the mask policy.

Everything the properties ask of the oracle goes through here, so a richer oracle or
policy (other template families, completeness rules) is swapped in at this file only.
Per-row and vectorized: a row is one "shard" of one row for the labeller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..checks.spans import disallowed_supervision
from ..config import MaskPolicy
from ..explain import LEGEND, excerpt
from ..spans.labels import ASSISTANT_PARTS, ROLE_NAMES, Labels, Role
from ..spans.resolve import SpanOracle, make_oracle
from ..vocab import Vocabulary


def policy_from(values: dict[str, Any] | None, base: MaskPolicy | None = None) -> MaskPolicy:
    """A MaskPolicy with the masker's declared values over ``base`` (the contract's)."""
    base = base or MaskPolicy()
    fields = {k: v for k, v in (values or {}).items() if hasattr(base, k)}
    return type(base)(**{**base.__dict__, **fields})


@dataclass
class Oracle:
    vocab: Vocabulary
    policy: MaskPolicy
    spans: SpanOracle  # the tokenizer's verified template profile

    @classmethod
    def build(cls, vocab: Vocabulary, policy: MaskPolicy) -> "Oracle":
        """The tokenizer's template family, as a dataset run would choose it (--template-profile auto)."""
        return cls(vocab, policy, make_oracle(vocab))

    def labels_for(self, ids: list[int] | np.ndarray, max_len: int) -> Labels:
        arr = np.asarray(ids, dtype=np.int64)
        return self.spans.label_row(arr, max_len)

    def unsound_tokens(self, mask: list[bool] | np.ndarray, labels: Labels, turns: str = "all") -> np.ndarray:
        """Bool per token: supervised where the policy forbids it (``turns="last"``: any earlier assistant turn too)."""
        sup = np.asarray(mask, dtype=bool)
        bad = disallowed_supervision(sup, labels, self.policy)
        if turns == "last":
            bad |= sup & (_turn_index(labels) < _last_assistant_turn(labels))
        return bad

    def missing_tokens(self, mask: list[bool] | np.ndarray, labels: Labels, turns: str = "all",
                       context_until: int = 0) -> np.ndarray:
        """Bool per token: an assistant content/reasoning/tool-call token left unsupervised.

        ``turns="last"``: only the row's last assistant turn must be supervised (per-turn
        rows). Tokens before ``context_until`` are context by the producer's design (the
        generation prompt a 0.8+ producer renders, e.g. a pre-filled ``<think>``). Header
        boundary tokens may go either way; a cut at max_len needs nothing past the cut.
        """
        sup = np.asarray(mask, dtype=bool)
        need = np.isin(labels.role, list(ASSISTANT_PARTS)) & ~labels.boundary
        if turns == "last":
            need &= _turn_index(labels) == _last_assistant_turn(labels)
        need[:context_until] = False
        return need & ~sup

    def show(self, ids: list[int], mask: list[bool], position: int, max_len: int) -> str:
        """A decoded window of the row around ``position``: roles and supervised tokens marked."""
        labels = self.labels_for(ids, max_len)
        return excerpt(np.asarray(ids), np.asarray(mask, dtype=bool), labels.role, position, self.vocab)

    def role_name(self, labels: Labels, position: int) -> str:
        return ROLE_NAMES[Role(int(labels.role[position]))]


def _turn_index(labels: Labels) -> np.ndarray:
    """Turn number of each token: turns open at HEADER runs."""
    opens = (labels.role == Role.HEADER) & ~np.concatenate(([False], labels.role[:-1] == Role.HEADER))
    return np.cumsum(opens)


def _last_assistant_turn(labels: Labels) -> int:
    turn = _turn_index(labels)
    assistant = np.isin(labels.role, list(ASSISTANT_PARTS) + [Role.ASSISTANT_END])
    return int(turn[assistant].max()) if assistant.any() else -1


__all__ = ["LEGEND", "Oracle", "policy_from"]
