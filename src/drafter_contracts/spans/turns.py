"""Assistant turns found from role labels alone, and the template facts the mask rules read with them.

A span layer concept: the verifier compares a profile's turns with a rendering's, the resolver
builds the facts of a resolved template, and the mask rules (``contract/mask_rules.py``), the content
checks and the maskers number turns the same way. An assistant turn is a run of assistant-turn
roles, broken by headers, other roles and row starts; turns are kept at the turn level (starts,
ends, row, last-in-row) and per-token arrays are built only when read.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from ..dataset.row_view import in_table
from .labels import Labels, Role


class MaskFacts:
    """What the mask rules read beyond the labels: the ids, the newline table, and what the
    template says (its generation prompts as token runs, whether its assistant blocks join).

    ``prompts`` are every token run the template's generation prompt can be (after a user
    message or a tool message, with ``enable_thinking`` on or off): ``prompt_context`` reads
    them. ``joins_blocks``: an assistant header right after an assistant end continues the same
    message (harmony's analysis block, then its final block) instead of opening a new turn.
    """

    def __init__(self, ids: np.ndarray, newline_lead: np.ndarray | None = None,
                 prompts: tuple[tuple[int, ...], ...] = (), joins_blocks: bool = False) -> None:
        self.ids, self.newline_lead, self.prompts, self.joins_blocks = ids, newline_lead, prompts, joins_blocks



#: Roles that belong to an assistant turn once its header is done.
TURN_ROLES = (Role.ASSISTANT, Role.REASONING, Role.TOOL_CALL, Role.ASSISTANT_END, Role.AFTER_ASSISTANT_END)
#: The same as a lookup table over role codes.
IS_TURN = np.zeros(256, dtype=bool)
IS_TURN[list(TURN_ROLES)] = True


class AssistantTurns:
    """The assistant turns of a shard: kept at the turn level, per-token views built on demand.

    ``starts``/``ends`` (flat, inclusive), ``row_of_turn`` and ``is_last_turn`` are small;
    ``in_turn`` is one bool per token. ``index`` (int64 per token) and ``last`` (bool per
    token) cost a shard-long ``np.repeat`` each, so they are computed only when read:
    the mask checks ask turn-level questions (:meth:`index_at`, :meth:`last_at`,
    :meth:`supervised`) and only read per-token ``last`` when the policy splits turns.
    """

    def __init__(self, in_turn: np.ndarray, starts: np.ndarray, ends: np.ndarray, row_of_turn: np.ndarray) -> None:
        self.in_turn = in_turn  # bool per token
        self.starts = starts  # flat position of each turn's first token
        self.ends = ends  # flat position of each turn's last token
        self.row_of_turn = row_of_turn  # view row of each turn
        self.is_last_turn = np.ones(len(starts), dtype=bool)
        self.is_last_turn[:-1] = row_of_turn[1:] != row_of_turn[:-1]

    def spread(self, inside: np.ndarray, outside, dtype) -> np.ndarray:
        """Per-token array: ``inside[t]`` on the tokens of turn t, ``outside`` elsewhere (one repeat)."""
        n, t = len(self.in_turn), len(self.starts)
        seg_len = np.empty(2 * t + 1, dtype=np.int64)
        seg_len[1::2] = self.ends - self.starts + 1
        seg_len[0:-1:2] = self.starts - np.concatenate(([0], self.ends + 1))[:t]
        seg_len[-1] = n - (self.ends[-1] + 1 if t else 0)
        seg = np.full(2 * t + 1, outside, dtype=dtype)
        seg[1::2] = inside
        return np.repeat(seg, seg_len)

    @cached_property
    def index(self) -> np.ndarray:
        """int64 per token: shard-global turn index, -1 outside assistant turns."""
        return self.spread(np.arange(len(self.starts)), -1, np.int64)

    @cached_property
    def last(self) -> np.ndarray:
        """bool per token: in the last assistant turn of its row."""
        return self.spread(self.is_last_turn, False, bool)

    def index_at(self, pos: np.ndarray) -> np.ndarray:
        """Turn index of a few flat positions (-1 outside assistant turns), without the per-token array."""
        t = np.searchsorted(self.starts, pos, side="right") - 1
        inside = (t >= 0) & (pos <= self.ends[np.maximum(t, 0)] if len(self.ends) else False)
        return np.where(inside, t, -1)

    def last_at(self, pos: np.ndarray) -> np.ndarray:
        """``last[pos]`` for a few flat positions."""
        t = self.index_at(pos)
        return (t >= 0) & self.is_last_turn[np.maximum(t, 0)] if len(self.starts) else np.zeros(len(pos), bool)

    def supervised(self, prefix: np.ndarray) -> np.ndarray:
        """Supervised tokens of each turn, from the shard's supervised prefix sum (``RowView.supervised_prefix``)."""
        return prefix[self.ends + 1].astype(np.int64) - prefix[self.starts]


def assistant_turns(role: np.ndarray, offsets: np.ndarray, joins_blocks: bool = False) -> AssistantTurns:
    """Number the assistant turns of a shard from its role labels.

    Turns are runs: their edges are where ``in_turn`` changes between neighbours (one
    comparison, few hits), plus the row starts that fall inside a run (a row start
    always opens a new run). Per-token index and last-turn flag are left to the lazy
    properties of :class:`AssistantTurns`.
    """
    n = len(role)
    in_turn = in_table(role, IS_TURN)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return AssistantTurns(in_turn, empty, empty, empty)
    change = np.flatnonzero(in_turn[1:] != in_turn[:-1]) + 1  # first token after each edge
    opens = in_turn[change]
    lengths = np.diff(offsets)
    firsts = offsets[:-1][lengths > 0]
    inner = firsts[firsts > 0]
    split = inner[in_turn[inner] & in_turn[inner - 1]]  # row start inside a run: ends one turn, opens the next
    starts = change[opens]
    after = change[~opens]  # one past each turn's last token
    if in_turn[0]:
        starts = np.concatenate(([0], starts))
    if in_turn[-1]:
        after = np.concatenate((after, [n]))
    if len(split):
        starts = np.sort(np.concatenate((starts, split)))
        after = np.sort(np.concatenate((after, split)))
    starts = starts.astype(np.int64, copy=False)
    ends = after.astype(np.int64, copy=False) - 1
    row_of_turn = np.searchsorted(offsets, starts, side="right") - 1
    if joins_blocks and len(starts) > 1:
        # Blocks of one message: the next block starts after only an assistant header, in the same row.
        ah = np.concatenate(([0], np.cumsum(role == Role.ASSISTANT_HEADER, dtype=np.int64)))
        gap = starts[1:] - ends[:-1] - 1
        join = (row_of_turn[1:] == row_of_turn[:-1]) & (gap > 0) & (ah[starts[1:]] - ah[ends[:-1] + 1] == gap)
        if join.any():
            keep_start = np.concatenate(([True], ~join))
            keep_end = np.concatenate((~join, [True]))
            starts, ends, row_of_turn = starts[keep_start], ends[keep_end], row_of_turn[keep_start]
            in_turn = in_turn.copy()
            spans = np.zeros(len(role) + 1, dtype=np.int64)
            np.add.at(spans, starts, 1)
            np.add.at(spans, ends + 1, -1)
            in_turn |= np.cumsum(spans[:-1]) > 0
    return AssistantTurns(in_turn, starts, ends, row_of_turn)


def turns_of(labels: Labels, offsets: np.ndarray, joins_blocks: bool = False) -> AssistantTurns:
    """:func:`assistant_turns` of a shard's labels, computed once and shared by every policy check.

    Kept on the Labels object, so it lives exactly as long as the shard's labels.
    """
    cached = labels.__dict__.get("_assistant_turns")
    if cached is None or cached[0] is not offsets or cached[1] != joins_blocks:
        cached = (offsets, joins_blocks, assistant_turns(labels.role, offsets, joins_blocks))
        labels.__dict__["_assistant_turns"] = cached
    return cached[2]
