"""The mask policy applied to role labels: which tokens may be supervised, and which must be.

Turn structure comes from the role array alone, so any labeller that keeps the
shared conventions (a header is ``Role.HEADER``; an assistant body is ASSISTANT /
REASONING / TOOL_CALL; then ASSISTANT_END and AFTER_ASSISTANT_END) gets per-turn
policies for free. An assistant turn is a run of assistant-turn roles: runs are
broken by headers, other roles and row starts. Everything is vectorized over the
shard: one ``cumsum`` numbers the turns, one comparison of neighbours finds each
row's last turn.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import MaskPolicy
from ..spans.labels import Labels, Role
from .view import in_table

#: Roles that belong to an assistant turn once its header is done.
TURN_ROLES = (Role.ASSISTANT, Role.REASONING, Role.TOOL_CALL, Role.ASSISTANT_END, Role.AFTER_ASSISTANT_END)
_IS_TURN = np.zeros(256, dtype=bool)
_IS_TURN[list(TURN_ROLES)] = True


@dataclass
class AssistantTurns:
    """Per token: is it in an assistant turn, which one (shard-global index, -1 outside), is it its row's last."""

    in_turn: np.ndarray  # bool
    index: np.ndarray  # int64, -1 outside assistant turns
    last: np.ndarray  # bool: in the last assistant turn of its row
    starts: np.ndarray  # flat position of each turn's first token
    row_of_turn: np.ndarray  # view row of each turn


def assistant_turns(role: np.ndarray, offsets: np.ndarray) -> AssistantTurns:
    """Number the assistant turns of a shard from its role labels.

    Turns are runs: their first and last tokens are found with two neighbour
    comparisons, and the per-token turn index and last-turn flag are spread with one
    ``np.repeat`` each over the alternating gap/turn segments (no shard-long cumsum).
    """
    n = len(role)
    in_turn = in_table(role, _IS_TURN)
    prev = np.zeros(n, dtype=bool)
    nxt = np.zeros(n, dtype=bool)
    if n:
        prev[1:] = in_turn[:-1]
        nxt[:-1] = in_turn[1:]
        lengths = np.diff(offsets)
        firsts = offsets[:-1][lengths > 0]
        prev[firsts] = False  # a row start always opens a new run
        nxt[firsts[firsts > 0] - 1] = False  # and the token before it closes one
    starts = np.flatnonzero(in_turn & ~prev)
    ends = np.flatnonzero(in_turn & ~nxt)
    row_of_turn = np.searchsorted(offsets, starts, side="right") - 1
    is_last_turn = np.ones(len(starts), dtype=bool)
    is_last_turn[:-1] = row_of_turn[1:] != row_of_turn[:-1]
    t = len(starts)
    seg_len = np.empty(2 * t + 1, dtype=np.int64)
    seg_len[1::2] = ends - starts + 1
    seg_len[0:-1:2] = starts - np.concatenate(([0], ends + 1))[:t]
    seg_len[-1] = n - (ends[-1] + 1 if t else 0)
    seg_index = np.full(2 * t + 1, -1, dtype=np.int64)
    seg_index[1::2] = np.arange(t)
    seg_last = np.zeros(2 * t + 1, dtype=bool)
    seg_last[1::2] = is_last_turn
    index = np.repeat(seg_index, seg_len)
    last = np.repeat(seg_last, seg_len)
    return AssistantTurns(in_turn, index, last, starts, row_of_turn)


def turns_of(labels: Labels, offsets: np.ndarray) -> AssistantTurns:
    """:func:`assistant_turns` of a shard's labels, computed once and shared by every policy check.

    Kept on the Labels object, so it lives exactly as long as the shard's labels.
    """
    cached = labels.__dict__.get("_assistant_turns")
    if cached is None or cached[0] is not offsets:
        cached = (offsets, assistant_turns(labels.role, offsets))
        labels.__dict__["_assistant_turns"] = cached
    return cached[1]


def _role_table(policy: MaskPolicy) -> np.ndarray:
    """``allowed[role]`` for roles whose permission does not depend on the turn (reasoning does)."""
    allowed = np.zeros(256, dtype=bool)
    allowed[Role.ASSISTANT] = policy.content
    allowed[Role.TOOL_CALL] = policy.tool_calls
    allowed[Role.ASSISTANT_END] = policy.end_of_turn
    allowed[Role.AFTER_ASSISTANT_END] = policy.newline_after_end
    return allowed


def allowed_tokens(labels: Labels, turns: AssistantTurns, policy: MaskPolicy,
                   opener: np.ndarray | None = None) -> np.ndarray:
    """Bool per token: may carry loss under the policy (soundness).

    ``opener`` (from :func:`opener_tokens`) marks reasoning openers; with
    ``reasoning_opener = "context"`` they belong to the generation prompt and may not.
    """
    allowed = in_table(labels.role, _role_table(policy))
    reasoning = labels.role == Role.REASONING
    allowed |= reasoning & np.where(turns.last, policy.reasoning_final, policy.reasoning_earlier)
    allowed &= turns.in_turn  # roles outside assistant turns are never allowed (belt and braces)
    if policy.turns == "last":
        allowed &= turns.last
    if policy.reasoning_opener == "context" and opener is not None:
        allowed &= ~opener
    return allowed


def opener_tokens(ids: np.ndarray, labels: Labels, newline_lead: np.ndarray | None) -> np.ndarray:
    """The reasoning opener: the first REASONING token of each block and, if whitespace with a newline, the next."""
    role = labels.role
    reasoning = role == Role.REASONING
    prev = np.zeros(len(role), dtype=bool)
    prev[1:] = reasoning[:-1]
    first = reasoning & ~prev
    out = first.copy()
    if newline_lead is not None and len(ids):
        nxt = np.flatnonzero(first) + 1
        nxt = nxt[nxt < len(ids)]
        ok = reasoning[nxt] & newline_lead[np.clip(ids[nxt], 0, len(newline_lead) - 1)]
        out[nxt[ok]] = True
    return out


def required_tokens(ids: np.ndarray, offsets: np.ndarray, labels: Labels, turns: AssistantTurns,
                    policy: MaskPolicy, max_len: int, newline_lead: np.ndarray | None = None) -> np.ndarray:
    """Bool per token: must be supervised under the policy's completeness (all False when off).

    Eligible tokens are the allowed ones, minus boundary tokens (they belong to the header
    as much as to the content) and, with ``reasoning_opener = "context"``, the opener a
    generation prompt already holds. With ``completeness = "last"``, a row cut at max_len
    whose last token is outside an assistant turn lost its last turn to the cut: its
    visible turns are context, so nothing in it is required.
    """
    n = len(ids)
    if policy.completeness == "off" or n == 0:
        return np.zeros(n, dtype=bool)
    opener = opener_tokens(ids, labels, newline_lead) if policy.reasoning_opener == "context" else None
    need = allowed_tokens(labels, turns, policy, opener) & ~labels.boundary
    if policy.completeness == "last":
        need &= turns.last
        lengths = np.diff(offsets)
        nonempty = lengths > 0
        last_tok = offsets[1:][nonempty] - 1
        cut_elsewhere = np.zeros(len(lengths), dtype=bool)
        cut_elsewhere[nonempty] = (lengths[nonempty] >= max_len) & ~turns.in_turn[last_tok]
        need &= ~np.repeat(cut_elsewhere, lengths)
    return need
