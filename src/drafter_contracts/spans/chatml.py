"""ChatML (Qwen 2.5/3/3.5/3.6) span oracle, from token ids alone.

A turn is ``<|im_start|>ROLE\\n ... <|im_end|>\\n``. Everything is found from
marker ids, never by a regex over decoded text, so role markers typed as plain
characters in user text never open a span, while special-token strings that the
tokenizer turned into real control tokens are seen for what they are. The rules
are written once in numpy (:func:`label_reference`, running maxima of "last marker
seen" reset at row starts) and once as a compiled pass over the shard's buffers
(:func:`label`), which the tests hold to the former.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UsageProblem
from ..vocab import Vocabulary
from . import generic
from .labels import Labels, Role, TurnProblem
from .profile import CompiledProfile

ROLE_WORDS = {"system": Role.SYSTEM, "developer": Role.SYSTEM, "user": Role.USER,
              "assistant": Role.ASSISTANT, "tool": Role.TOOL}


@dataclass(frozen=True)
class ChatMLProfile:
    """Marker ids of one ChatML tokenizer."""

    start: int
    end: int
    newline: int
    role_of_id: np.ndarray  # uint8 per id: the Role a header's role token opens (UNKNOWN_ROLE otherwise)
    newline_lead: np.ndarray  # bool per id
    think: tuple[int, int] | None
    tool_call: tuple[int, int] | None

    @classmethod
    def from_vocabulary(cls, vocab: Vocabulary) -> "ChatMLProfile":
        start, end = vocab.id_of("<|im_start|>"), vocab.id_of("<|im_end|>")
        newline = vocab.single_id("\n")
        if start is None or end is None or newline is None:
            raise UsageProblem(f"--tokenizer {vocab.name}: has no <|im_start|>/<|im_end|> tokens, so it cannot be the ChatML "
                               "tokenizer this contract declares; pass the tokenizer that produced the dataset")
        role_of_id = np.full(vocab.size, Role.UNKNOWN_ROLE, dtype=np.uint8)
        for word, role in ROLE_WORDS.items():
            rid = vocab.single_id(word)
            if rid is None:
                raise UsageProblem(f"--tokenizer {vocab.name}: role '{word}' is not a single token; "
                                   "this ChatML tokenizer is not supported yet")
            role_of_id[rid] = role

        def pair(a: str, b: str) -> tuple[int, int] | None:
            ia, ib = vocab.id_of(a), vocab.id_of(b)
            return (ia, ib) if ia is not None and ib is not None else None

        return cls(start, end, newline, role_of_id, vocab.newline_lead,
                   pair("<think>", "</think>"), pair("<tool_call>", "</tool_call>"))


def _last_at_or_before(flag: np.ndarray, pos: np.ndarray, row_start: np.ndarray) -> np.ndarray:
    """Position of the last flagged token at or before each token, in the same row; -1 if none."""
    last = np.maximum.accumulate(np.where(flag, pos, -1))
    return np.where(last >= row_start, last, -1)


def label(ids: np.ndarray, offsets: np.ndarray, profile: "ChatMLProfile | CompiledProfile", max_len: int) -> Labels:
    """Label every token of a flattened shard with its Role and any structural problem.

    One compiled pass (:func:`drafter_contracts.kernels.label_chatml`) applies the
    rules of :func:`label_reference` token by token, skipping through runs of
    ordinary tokens between markers; same labels, about ten times cheaper.

    Any other family's compiled profile goes to the generic labeller, so callers that
    hold "the engine's profile" (explanations) need not know which family it is.
    """
    if isinstance(profile, CompiledProfile):
        return generic.label(ids, offsets, profile, max_len)
    from ..kernels import label_chatml

    n = len(ids)
    role = np.empty(n, dtype=np.uint8)
    boundary = np.empty(n, dtype=bool)
    problem = np.empty(n, dtype=np.uint8)
    if n == 0:
        z = np.zeros(0, np.int64)
        return Labels(role, boundary, problem, z, np.zeros(0, np.uint8), np.zeros(0, np.bool_), z, 0)
    think = profile.think or (profile.start, profile.start)
    call = profile.tool_call or (profile.start, profile.start)
    lowest = min(profile.start, profile.end, *(profile.think or ()), *(profile.tool_call or ()))
    if ids.dtype == np.uint64:  # huge ids read as int64 would turn negative
        # Exact for the rules: markers are small ids, and lookups clip every huge id alike.
        ids = np.minimum(ids, np.uint64(np.iinfo(np.int64).max)).astype(np.int64)
    ids = np.ascontiguousarray(ids)
    # Per-run and per-boundary outputs sized for the worst case (a run per token; a boundary token
    # is two after its header's opener, so at most one in three); only what is written is touched.
    starts, run_role, row_first = np.empty(n, np.int64), np.empty(n, np.uint8), np.empty(n, np.bool_)
    boundary_at, noted = np.empty(n // 3 + 1, np.int64), np.zeros(2, np.int64)
    k = label_chatml(ids, np.ascontiguousarray(offsets, dtype=np.int64),
                     profile.start, profile.end, profile.newline, profile.role_of_id, profile.newline_lead,
                     think[0], think[1], profile.think is not None, call[0], call[1], profile.tool_call is not None,
                     max_len, lowest, role, boundary, problem, starts, run_role, row_first, boundary_at, noted)
    return Labels(role, boundary, problem, starts[:k].copy(), run_role[:k].copy(), row_first[:k].copy(),
                  boundary_at[:noted[0]].copy(), int(noted[1]))


def label_row(ids: np.ndarray, profile: "ChatMLProfile | CompiledProfile", max_len: int) -> Labels:
    """Labels of one row for a report or a failure message, in whatever process asks."""
    return label(ids, np.array([0, len(ids)], dtype=np.int64), profile, max_len)


def label_reference(ids: np.ndarray, offsets: np.ndarray, profile: "ChatMLProfile", max_len: int) -> Labels:
    """The numpy formulation of :func:`label` (six running maxima over every token).

    Kept as the specification the compiled labeller is tested against: it reads
    each rule directly, at about fifteen times the cost.
    """
    n = len(ids)
    lengths = np.diff(offsets)
    idx = np.int32 if n < 2**31 - 1 else np.int64
    pos = np.arange(n, dtype=idx)
    row_start = np.repeat(offsets[:-1].astype(idx), lengths)
    safe_ids = np.clip(ids, 0, len(profile.role_of_id) - 1)  # for table lookups only

    is_s = ids == profile.start
    is_e = ids == profile.end
    last_s = _last_at_or_before(is_s, pos, row_start)
    last_e = _last_at_or_before(is_e, pos, row_start)
    problem = np.zeros(n, dtype=np.uint8)

    # Markers in order: an opener right after an opener is nested; an end marker
    # right after an end marker (or first in its row) is stray.
    marks = np.flatnonzero(is_s | is_e)
    m_row_start = row_start[marks]
    prev = np.concatenate(([-1], marks[:-1]))
    prev = np.where(prev >= m_row_start, prev, -1)
    prev_is_s = np.where(prev >= 0, is_s[np.maximum(prev, 0)], False)
    nested = marks[is_s[marks] & prev_is_s]
    stray = marks[is_e[marks] & ~prev_is_s]
    problem[nested] = TurnProblem.HEADER_IN_OPEN_TURN
    problem[stray] = TurnProblem.STRAY_END

    # Role of each turn, stored at its opener's position and spread by last_s.
    s_pos = np.flatnonzero(is_s)
    nxt = s_pos + 1
    row_end = offsets[np.searchsorted(offsets, s_pos, side="right")]
    has_role_tok = nxt < row_end  # False only when a cut at max_len falls right after the opener
    nxt = np.minimum(nxt, max(n - 1, 0))
    nxt_is_marker = is_s[nxt] | is_e[nxt]
    s_role = np.where(has_role_tok & ~nxt_is_marker, profile.role_of_id[safe_ids[nxt]], Role.UNKNOWN_ROLE)
    unknown = has_role_tok & ~nxt_is_marker & (s_role == Role.UNKNOWN_ROLE)
    problem[nxt[unknown]] = TurnProblem.UNKNOWN_ROLE
    empty_header = has_role_tok & is_e[nxt]
    problem[nxt[empty_header]] = TurnProblem.MALFORMED_HEADER
    s_role[np.isin(s_pos, nested)] = Role.INJECTED
    role_at = np.zeros(n, dtype=np.uint8)
    role_at[s_pos] = s_role

    in_turn = last_s >= 0
    turn_role = np.where(in_turn, role_at[np.maximum(last_s, 0)], Role.OUTSIDE).astype(np.uint8)
    closed = in_turn & (last_e >= last_s)  # at or after this turn's end marker
    k = pos - last_s  # position within the turn

    role = np.where(in_turn & ~closed, turn_role, Role.OUTSIDE).astype(np.uint8)
    boundary = np.zeros(n, dtype=bool)
    open_tok = in_turn & ~closed
    role[open_tok & (k <= 1)] = Role.HEADER
    third = open_tok & (k == 2)
    newline_ok = profile.newline_lead[np.clip(safe_ids, 0, len(profile.newline_lead) - 1)]
    role[third & (ids == profile.newline)] = Role.HEADER
    boundary[third & newline_ok & (ids != profile.newline)] = True
    bad_header = third & ~newline_ok & (turn_role != Role.INJECTED)
    problem[bad_header & (problem == 0)] = TurnProblem.MALFORMED_HEADER

    # Sub-spans of assistant content: reasoning and tool-call blocks, markers included.
    assistant_body = (role == Role.ASSISTANT) & ~boundary
    for pair, sub in ((profile.think, Role.REASONING), (profile.tool_call, Role.TOOL_CALL)):
        if pair is None:
            continue
        last_open = _last_at_or_before(ids == pair[0], pos, row_start)
        last_close_before = _last_at_or_before(ids == pair[1], pos, row_start)
        closing = ids == pair[1]
        inside = (last_open > last_s) & ((last_open > last_close_before) | closing)
        role[assistant_body & inside] = sub

    # End markers and what follows them.
    at_end = is_e & in_turn
    at_end[stray] = False
    role[at_end] = np.where(turn_role[at_end] == Role.ASSISTANT, Role.ASSISTANT_END, Role.END)
    after = closed & ~is_e & (pos == last_e + 1) & (ids == profile.newline)
    role[after & (turn_role == Role.ASSISTANT)] = Role.AFTER_ASSISTANT_END
    outside_text = closed & ~is_e & ~after
    problem[outside_text & (problem == 0)] = TurnProblem.TEXT_OUTSIDE_TURN

    # Row-level: must open with a header; a short row must not end inside a turn.
    nonempty = lengths > 0
    firsts = offsets[:-1][nonempty]
    lead_bad = firsts[ids[firsts] != profile.start]
    problem[lead_bad] = TurnProblem.NO_LEADING_HEADER
    lasts = offsets[1:][nonempty] - 1
    unclosed = lasts[open_tok[lasts] & (lengths[nonempty] < max_len)]
    problem[unclosed[problem[unclosed] == 0]] = TurnProblem.UNCLOSED_TURN
    return Labels(role, boundary, problem)
