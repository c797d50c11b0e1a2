"""Why a row breaks a mask rule: each offending token's reason code and its words.

The two mask rules (``mask_rules.py``: what may carry loss, what must) give the offending tokens; this
names the rule each breaks (a role the policy forbids, an allowed role in the wrong turn or place, a
token of the generation prompt, ...), folds a shifted row's offences into the one shift
(``mask_shift.py``), and builds the result both read: the two mask contracts (``checks/spans.py``) and
the verification of a learnt policy (``learn.py``), so the rows a policy rejects are named alike.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from ..dataset.row_view import RowView
from ..results import CheckResult, first_per_row, multi_reason_result, row_result
from ..spans.labels import ROLE_NAMES, Labels, Role
from ..spans.turns import MaskFacts, turns_of
from .mask_policy import MaskPolicy
from .mask_rules import (SEPARATORS, allowed_at, disallowed_supervision, empty_reasoning_tokens, needs_turns,
                         opener_at, prompt_windows, required_tokens)
from .mask_shift import EARLY, LATE, SHIFT_TEXT, MaskShift

#: What gives a shard's shifted rows when some row fails a rule (computed once per shard: ``ShardWork.mask_shift``).
ShiftSource = Callable[[], MaskShift]


# Reason codes beyond the Role values: supervision that is wrong because of the turn it is in.
EARLIER_TURN, REASONING_FINAL, REASONING_EARLIER, BOUNDARY, OPENER = 100, 101, 102, 103, 104
PROMPT, EMPTY_REASONING, SEPARATOR, TOOL_SEPARATOR = 105, 106, 107, 108
SEPARATOR_MISSING, TOOL_SEPARATOR_MISSING = 112, 113
#: Per separator key (``mask_rules.SEPARATORS``): its reason codes when supervised against the policy / left out.
SEPARATOR_CODES = {"reasoning_separator": (SEPARATOR, SEPARATOR_MISSING),
                    "tool_call_separator": (TOOL_SEPARATOR, TOOL_SEPARATOR_MISSING)}


#: How bad each supervised offence is (0 first): text the model reads but never writes (a user's, the
#: system's, a tool's, text pasted into a turn), then the template's own markers, then the assistant's
#: own text where the policy keeps it out of the loss, then the header/content boundary token.
SEVERITY: dict[int, int] = {
    **{int(r): 0 for r in (Role.SYSTEM, Role.USER, Role.TOOL, Role.INJECTED, Role.UNKNOWN_ROLE)},
    **{int(r): 1 for r in (Role.OUTSIDE, Role.HEADER, Role.END, Role.ASSISTANT_HEADER, Role.ASSISTANT_END,
                           Role.AFTER_ASSISTANT_END)},
    PROMPT: 1, OPENER: 1,
    **{int(r): 2 for r in (Role.ASSISTANT, Role.REASONING, Role.TOOL_CALL)},
    EARLIER_TURN: 2, REASONING_FINAL: 2, REASONING_EARLIER: 2, EMPTY_REASONING: 2,
    SEPARATOR: 2, TOOL_SEPARATOR: 2,
    BOUNDARY: 3,
    LATE: 0, EARLY: 0,  # a shifted row: one finding that explains every other offence of the row
}


def forbidden_text(policy: MaskPolicy) -> dict[int, str]:
    text = {int(r): f"{ROLE_NAMES[r]} token supervised" for r in Role}
    text[int(Role.HEADER)] = "turn header supervised"
    text[int(Role.ASSISTANT_HEADER)] = "assistant turn header supervised (policy: header = false)"
    text[int(Role.ASSISTANT)] = "assistant content supervised (policy: content = false)"
    text[int(Role.TOOL_CALL)] = "tool-call block supervised (policy: tool_calls = false)"
    text[int(Role.ASSISTANT_END)] = "assistant end-of-turn token supervised (policy: end_of_turn = false)"
    text[int(Role.AFTER_ASSISTANT_END)] = "newline after assistant end supervised (policy: newline_after_end = false)"
    text[int(Role.INJECTED)] = "text after a header injected into an open turn supervised"
    text[EARLIER_TURN] = "assistant turn before the row's last supervised (policy: turns = last)"
    text[REASONING_FINAL] = "reasoning of the row's last assistant turn supervised (policy: reasoning_final = false)"
    text[REASONING_EARLIER] = "reasoning of an earlier assistant turn supervised (policy: reasoning_earlier = false)"
    text[OPENER] = ("reasoning opener supervised, but the generation prompt holds it "
                     "(policy: reasoning_opener = context)")
    text[BOUNDARY] = "header/content boundary token supervised (policy: boundary_tokens = strict)"
    text[PROMPT] = ("a token of the generation prompt supervised: every prompt the template renders holds it "
                     f"(policy: prompt_context = {policy.prompt_context})")
    text[EMPTY_REASONING] = "empty reasoning block supervised (policy: empty_reasoning = context)"
    text[SEPARATOR] = ("whitespace between the reasoning block and the reply supervised "
                        "(policy: reasoning_separator = context)")
    text[TOOL_SEPARATOR] = "whitespace beside a tool-call block supervised (policy: tool_call_separator = context)"
    return text | SHIFT_TEXT


WHOLE_TURN, OPENER_MISSING = 110, 111
MISSING_TEXT = {
    WHOLE_TURN: "assistant turn left entirely unsupervised",
    OPENER_MISSING: "reasoning opener (<think>) left unsupervised while the reasoning after it is supervised",
    int(Role.ASSISTANT): "assistant content left unsupervised",
    int(Role.REASONING): "reasoning (<think> block) left unsupervised",
    int(Role.TOOL_CALL): "tool-call block left unsupervised",
    int(Role.ASSISTANT_END): "assistant end-of-turn token left unsupervised (policy: end_of_turn = true)",
    int(Role.AFTER_ASSISTANT_END): "newline after assistant end left unsupervised (policy: newline_after_end = true)",
    int(Role.ASSISTANT_HEADER): "assistant header token after the generation prompt left unsupervised",
    SEPARATOR_MISSING: "whitespace between the reasoning block and the reply left unsupervised",
    TOOL_SEPARATOR_MISSING: "whitespace beside a tool-call block left unsupervised",
}


def _in_windows(at: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Whether each position is inside one of the disjoint, sorted ranges [lo, hi)."""
    k = np.searchsorted(lo, at, side="right") - 1
    return (k >= 0) & (at < hi[np.maximum(k, 0)]) if len(lo) else np.zeros(len(at), dtype=bool)


def _fold_shifted(rows: np.ndarray, at: np.ndarray, codes: np.ndarray, shift: MaskShift
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Each shifted row's offences become one: the shift's code at the row's first offending token.

    ``rows`` (view rows, non-decreasing), ``at`` and ``codes``: one entry per offending token. Returns them
    folded, and the shifted rows' (row, code) entries before folding (what the row breaks as it stands).
    """
    moved = shift.codes(rows)
    shifted = moved != 0
    if not shifted.any():
        return rows, at, codes, (rows[:0], codes[:0])
    first = np.ones(len(rows), dtype=bool)
    first[1:] = rows[1:] != rows[:-1]
    before = (rows[shifted], codes[shifted])
    codes = codes.copy()
    codes[shifted & first] = moved[shifted & first]
    keep = ~shifted | first
    return rows[keep], at[keep], codes[keep], before


def _as_it_stands(result: CheckResult, before: tuple[np.ndarray, np.ndarray], view: RowView, row_offset: int,
                  text: dict[int, str], rank: dict[int, int]) -> CheckResult:
    """The shifted rows' examples (a few) name what each row breaks as it stands, folded into the one reason."""
    rows, codes = before
    if not len(rows):
        return result
    shift_texts = set(SHIFT_TEXT.values())
    result.severity = {**result.severity, **{r: 0 for r in result.by_reason if r in shift_texts}}
    examples = []
    for e in result.examples:
        if e.reason in shift_texts:
            vr = int(np.searchsorted(view.rows, e.row - row_offset))
            mine = sorted({int(c) for c in codes[rows == vr]}, key=lambda c: (rank.get(c, 99), c))
            e = dataclasses.replace(e, reason=f"{e.reason}; as it stands: {'; '.join(text[c] for c in mine)}")
        examples.append(e)
    result.examples = examples
    return result


def forbidden_at(view: RowView, labels: Labels, policy: MaskPolicy, facts: MaskFacts) -> np.ndarray:
    """Flat positions of the tokens supervised where the policy forbids it (the first rule)."""
    return _hits(disallowed_supervision(view.mask, labels, policy, view.offsets, facts=facts))


def missing_at(view: RowView, labels: Labels, policy: MaskPolicy, facts: MaskFacts, max_len: int) -> np.ndarray:
    """Flat positions of the tokens the policy requires and the mask leaves out (the second rule)."""
    turns = turns_of(labels, view.offsets, facts.joins_blocks) if needs_turns(policy) else None
    need = required_tokens(view.ids, view.offsets, labels, turns, policy, max_len, facts.newline_lead, facts)
    return _hits(np.greater(need, view.mask, out=need))  # need & ~mask, in place


def _hits(flags: np.ndarray) -> np.ndarray:
    """``np.flatnonzero(flags)``, skipping the scan when nothing is set (the usual case: a passing shard)."""
    return np.flatnonzero(flags) if flags.any() else np.zeros(0, dtype=np.intp)


def _forbidden_codes(view: RowView, labels: Labels, policy: MaskPolicy, facts: MaskFacts,
                     at: np.ndarray) -> np.ndarray:
    """The reason code of each forbidden supervised token at ``at``: a role the policy forbids, or an allowed
    role in the wrong place. Only the failing positions are read: turn facts come from the turn level."""
    codes = labels.role[at].astype(np.int16) if len(at) else np.zeros(0, np.int16)
    if not len(at):
        return codes
    turns = turns_of(labels, view.offsets, facts.joins_blocks)
    last_at = turns.last_at(at)
    role_ok = allowed_at(labels.role[at], last_at, policy)
    reasoning = codes == Role.REASONING
    codes[reasoning] = np.where(last_at[reasoning], REASONING_FINAL, REASONING_EARLIER)
    earlier = role_ok & ~last_at & (policy.turns == "last")
    opener = np.zeros(len(at), dtype=bool)
    if policy.reasoning_opener == "context":
        opener = role_ok & ~earlier & opener_at(view.ids, labels.role, facts.newline_lead, at)
    prompt = np.zeros(len(at), dtype=bool)
    if policy.prompt_context != "off":
        _, hs, lo, _ = prompt_windows(facts, view.offsets, labels, turns, policy.prompt_context)
        prompt = _in_windows(at, hs, lo)
        earlier &= ~prompt
    empty = np.zeros(len(at), dtype=bool)
    if policy.empty_reasoning == "context":
        empty = role_ok & empty_reasoning_tokens(facts, labels)[at]
    seps = [(role_ok & ~empty & tokens(facts, labels, view.offsets)[at], SEPARATOR_CODES[key][0])
            for key, tokens in SEPARATORS if getattr(policy, key) == "context"]
    codes[role_ok] = BOUNDARY  # what is left of an allowed role in an allowed place: strict boundaries
    codes[opener] = OPENER
    codes[empty] = EMPTY_REASONING
    for sep, code in seps:
        codes[sep] = code
    codes[earlier] = EARLIER_TURN
    codes[prompt] = PROMPT
    return codes


def _missing_codes(view: RowView, labels: Labels, facts: MaskFacts, at: np.ndarray) -> np.ndarray:
    """The reason code of each row's first required token left out, at ``at``. A turn with no supervision at
    all is a different story (per-turn rows?) from a part left out of one."""
    codes = labels.role[at].astype(np.int16) if len(at) else np.zeros(0, np.int16)
    if not len(at):
        return codes
    # Per-turn supervision from the shard's prefix sum; openers read at and after the failing tokens.
    turns = turns_of(labels, view.offsets, facts.joins_blocks)
    sup = turns.supervised(view.supervised_prefix)
    last = len(view.ids) - 1
    nxt = np.minimum(at + 1, last)
    lead = facts.newline_lead
    op_at = opener_at(view.ids, labels.role, lead, at)
    after = np.minimum(at + 1 + opener_at(view.ids, labels.role, lead, nxt), last)
    codes[op_at & view.mask[after] & (labels.role[after] == Role.REASONING)] = OPENER_MISSING
    content = codes == Role.ASSISTANT
    for key, tokens in SEPARATORS if content.any() else ():  # what the reply text alone leaves out
        codes[content & tokens(facts, labels, view.offsets)[at]] = SEPARATOR_CODES[key][1]
    t = turns.index_at(at)
    codes[(t >= 0) & (sup[np.maximum(t, 0)] == 0) if len(sup) else np.zeros(len(at), bool)] = WHOLE_TURN
    return codes


def _missing_text(policy: MaskPolicy) -> dict[int, str]:
    """The words of each reason a required token is left out for, under the policy's completeness."""
    text = {int(r): f"{ROLE_NAMES[r]} token left unsupervised" for r in Role} | MISSING_TEXT
    scope = "every assistant turn" if policy.completeness == "all" else "the row's last assistant turn"
    return {k: f"{v} ({scope} must be supervised)" for k, v in text.items()} | SHIFT_TEXT


def forbidden_result(name: str, scope: str, view: RowView, labels: Labels, policy: MaskPolicy, facts: MaskFacts,
                      at: np.ndarray, shift: ShiftSource, row_offset: int) -> CheckResult:
    """The first rule's result from its offending tokens ``at``: every token counted under the rule it breaks
    (a row under each), a shifted row's offences folded into the shift (``shift`` is read only when some
    token offends)."""
    rows = np.searchsorted(view.offsets, at, side="right") - 1
    codes = _forbidden_codes(view, labels, policy, facts, at)
    before: tuple[np.ndarray, np.ndarray] = (rows[:0], codes[:0])
    if len(at):
        rows, at, codes, before = _fold_shifted(rows, at, codes, shift())
    text = forbidden_text(policy)
    result = multi_reason_result(name, scope, len(view.rows), view.rows[rows], at - view.offsets[rows], codes, text,
                                 SEVERITY, row_offset)
    return _as_it_stands(result, before, view, row_offset, text, SEVERITY)


def missing_result(name: str, scope: str, view: RowView, labels: Labels, policy: MaskPolicy, facts: MaskFacts,
                   hits: np.ndarray, shift: ShiftSource, row_offset: int) -> CheckResult:
    """The second rule's result from its offending tokens ``hits``: each row once, at its first token left
    out, a shifted row's offences folded into the shift."""
    rows, first = first_per_row(hits, view.offsets)
    codes = _missing_codes(view, labels, facts, view.offsets[rows] + first)
    text = _missing_text(policy)
    before: tuple[np.ndarray, np.ndarray] = (rows[:0], codes[:0])
    if len(rows):
        rows, first, codes, before = _fold_shifted(rows, first, codes, shift())
    result = row_result(name, scope, len(view.rows), view.rows[rows], first, codes, text, row_offset)
    return _as_it_stands(result, before, view, row_offset, text, {LATE: 0, EARLY: 0})
