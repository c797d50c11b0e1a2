"""Contracts that need each token's role: well-formed turns, and loss only on assistant spans."""

from __future__ import annotations

import numpy as np

from ..config import Contract, MaskPolicy
from ..dataset import ShardArrays
from ..results import CheckResult, first_per_row, row_result
from ..spans.labels import ASSISTANT_PARTS, ROLE_NAMES, TURN_PROBLEM_TEXT, Labels, Role
from .view import RowView


def check_turns_well_formed(view: RowView, a: ShardArrays, labels: Labels) -> CheckResult:
    """Each turn opens with a header, has one known role, and closes before the next opens."""
    rows, first = first_per_row(np.flatnonzero(labels.problem), view.offsets)
    codes = labels.problem[view.offsets[rows] + first] if len(rows) else np.zeros(0, np.uint8)
    return row_result("turns_well_formed", a.shard.id, len(view.rows), view.rows[rows], first, codes,
                      {int(k): v for k, v in TURN_PROBLEM_TEXT.items()}, a.shard.start)


def allowed_roles(policy: MaskPolicy) -> np.ndarray:
    """``allowed[role]``: may a token of this role carry loss under the policy?"""
    allowed = np.zeros(len(Role), dtype=bool)
    allowed[list(ASSISTANT_PARTS)] = True
    allowed[Role.ASSISTANT_END] = policy.end_of_turn
    allowed[Role.AFTER_ASSISTANT_END] = policy.newline_after_end
    return allowed


def disallowed_supervision(mask: np.ndarray, labels: Labels, policy: MaskPolicy) -> np.ndarray:
    """Bool per token: supervised where the policy forbids it."""
    bad = mask & ~allowed_roles(policy)[labels.role]
    if policy.boundary_tokens == "strict":
        bad |= mask & labels.boundary
    return bad


def check_mask_on_assistant_spans(view: RowView, a: ShardArrays, labels: Labels, contract: Contract) -> CheckResult:
    """``loss_mask`` true only on assistant spans, as the contract's mask policy defines them."""
    bad = disallowed_supervision(view.mask, labels, contract.mask)
    rows, first = first_per_row(np.flatnonzero(bad), view.offsets)
    roles = labels.role[view.offsets[rows] + first] if len(rows) else np.zeros(0, np.uint8)
    text = {int(r): f"{ROLE_NAMES[r]} token supervised" for r in Role}
    text[int(Role.HEADER)] = "turn header supervised"
    text[int(Role.ASSISTANT_END)] = "assistant end-of-turn token supervised (policy: end_of_turn = false)"
    text[int(Role.AFTER_ASSISTANT_END)] = "newline after assistant end supervised (policy: newline_after_end = false)"
    text[int(Role.INJECTED)] = "text after a header injected into an open turn supervised"
    return row_result("mask_on_assistant_spans", a.shard.id, len(view.rows), view.rows[rows], first, roles, text,
                      a.shard.start)
