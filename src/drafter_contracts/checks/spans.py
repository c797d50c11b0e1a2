"""Contracts that need each token's role: well-formed turns, loss only on assistant spans, and loss on all of them."""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from ..config import Contract, MaskPolicy
from ..dataset import ShardArrays
from ..results import CheckResult, first_per_row, multi_reason_result, row_result
from ..spans.labels import ROLE_NAMES, TURN_PROBLEM_TEXT, Labels, Role
from . import policy as policy_mod
from ..spans.turns import MaskFacts, assistant_turns, turns_of
from .declare import IDS, MASK, TOKENIZER, Scope, Spec, register
from .mask_shift import DIRECTION, EARLY, LATE, SHIFT_TEXT, MaskShift, shifted_rows
from .view import RowView


def _hits(flags: np.ndarray) -> np.ndarray:
    """``np.flatnonzero(flags)``, skipping the scan when nothing is set (the usual case: a passing shard)."""
    return np.flatnonzero(flags) if flags.any() else np.zeros(0, dtype=np.intp)


def check_turns_well_formed(view: RowView, a: ShardArrays, labels: Labels) -> CheckResult:
    """Each turn opens with a header, has one known role, and closes before the next opens."""
    problems = np.zeros(0, np.intp) if labels.problem_count == 0 else np.flatnonzero(labels.problem)
    rows, first = first_per_row(problems, view.offsets)
    codes = labels.problem[view.offsets[rows] + first] if len(rows) else np.zeros(0, np.uint8)
    return row_result("turns_well_formed", a.shard.id, len(view.rows), view.rows[rows], first, codes,
                      {int(k): v for k, v in TURN_PROBLEM_TEXT.items()}, a.shard.start)


def allowed_roles(policy: MaskPolicy) -> np.ndarray:
    """``allowed[role]`` ignoring which turn a token is in (reasoning counts as allowed if any turn's is)."""
    allowed = np.zeros(max(len(Role), max(Role) + 1), dtype=bool)
    allowed[Role.ASSISTANT_HEADER] = policy.header
    allowed[Role.ASSISTANT] = policy.content
    allowed[Role.REASONING] = policy.reasoning_final or policy.reasoning_earlier
    allowed[Role.TOOL_CALL] = policy.tool_calls
    allowed[Role.ASSISTANT_END] = policy.end_of_turn
    allowed[Role.AFTER_ASSISTANT_END] = policy.newline_after_end
    return allowed


def disallowed_supervision(mask: np.ndarray, labels: Labels, policy: MaskPolicy,
                           offsets: np.ndarray | None = None, ids: np.ndarray | None = None,
                           newline_lead: np.ndarray | None = None,
                           facts: MaskFacts | None = None) -> np.ndarray:
    """Bool per token: supervised where the policy forbids it (``offsets`` default: one row).

    ``facts`` (or ``ids`` and ``newline_lead``) let the rules that read ids find what they need:
    reasoning openers, generation prompts, empty reasoning blocks.
    """
    if offsets is None:
        offsets = np.array([0, len(mask)], dtype=np.int64)
    if facts is None and ids is not None:
        facts = MaskFacts(ids, newline_lead)
    joins = facts.joins_blocks if facts is not None else False
    turns = turns_of(labels, offsets, joins) if policy_mod.needs_turns(policy) else None
    opener = None
    if policy.reasoning_opener == "context" and facts is not None:
        opener = policy_mod.opener_tokens(facts.ids, labels, facts.newline_lead)
    allowed = policy_mod.allowed_tokens(labels, turns, policy, opener, facts, offsets)
    bad = np.greater(mask, allowed, out=allowed) if mask.dtype == np.bool_ else mask & ~allowed  # mask & ~allowed
    if policy.boundary_tokens == "strict":
        bad |= mask & labels.boundary
    return bad


def boundary_positions(labels: Labels) -> np.ndarray:
    """Flat positions of the header/content boundary tokens (~1 K a shard): noted by the compiled
    labeller, else found once per shard's labels."""
    if labels.boundary_at is not None:
        return labels.boundary_at
    cached = labels.__dict__.get("_boundary_at")
    if cached is None:
        cached = labels.__dict__["_boundary_at"] = np.flatnonzero(labels.boundary)
    return cached


def _run_level_policy(policy: MaskPolicy) -> np.ndarray | None:
    """``allowed[role]`` when role alone decides what may and must be supervised, else None.

    Split reasoning, ``turns``/``completeness = "last"`` (:func:`policy.needs_turns`) and
    context openers depend on where a token sits, not only on its role.
    """
    if (policy_mod.needs_turns(policy) or policy.reasoning_opener == "context" or policy.empty_reasoning != "supervised"
            or policy.optional or any(getattr(policy, key) != "content" for key, _ in policy_mod.SEPARATORS)):
        return None
    table = allowed_roles(policy)
    return np.concatenate((table, np.zeros(256 - len(table), dtype=bool)))


RoleTotals = tuple[np.ndarray, np.ndarray]  # per role code: tokens, supervised tokens (checks/stats.py: run_counts)


def clean_by_role_totals(view: RowView, labels: Labels, totals: RoleTotals | None, policy: MaskPolicy,
                         need: bool) -> bool:
    """True when the shard certainly has no violation of the mask policy: forbidden supervision
    (``need`` False) or missing supervision (``need`` True), from the shard's per-role totals.

    The stats already sum tokens and supervised tokens per role over the role runs
    (``ShardWork.role_totals``), so this costs a few additions and a read of the ~1 K
    boundary tokens. Forbidden: supervised tokens of the roles the policy forbids (plus
    supervised boundary tokens under ``boundary_tokens = "strict"``). Missing: tokens minus
    supervised tokens of the allowed roles, less their unsupervised boundary tokens (never
    required). A total of zero is exact; any other total, or a policy that depends on more
    than the role, leaves the verdict to the per-token pass, which names the rows. So this
    can only skip work, never change a result.
    """
    table = _run_level_policy(policy) if totals is not None and view.mask is not None else None
    if table is None:
        return False
    tokens, supervised = totals
    allowed = table[:len(tokens)]
    at = boundary_positions(labels)
    if not need:
        total = int(supervised[~allowed].sum())
        if policy.boundary_tokens == "strict":
            total += int(np.count_nonzero(view.mask[at]))
        return total == 0
    gap = int((tokens - supervised)[allowed].sum())
    gap -= int(np.count_nonzero(table[labels.role[at]] & ~view.mask[at]))
    return gap == 0


# Reason codes beyond the Role values: supervision that is wrong because of the turn it is in.
_EARLIER_TURN, _REASONING_FINAL, _REASONING_EARLIER, _BOUNDARY, _OPENER = 100, 101, 102, 103, 104
_PROMPT, _EMPTY_REASONING, _SEPARATOR, _TOOL_SEPARATOR = 105, 106, 107, 108
_SEPARATOR_MISSING, _TOOL_SEPARATOR_MISSING = 112, 113
#: Per separator key (``policy.SEPARATORS``): its reason codes when supervised against the policy / left out.
_SEPARATOR_CODES = {"reasoning_separator": (_SEPARATOR, _SEPARATOR_MISSING),
                    "tool_call_separator": (_TOOL_SEPARATOR, _TOOL_SEPARATOR_MISSING)}


#: How bad each supervised offence is (0 first): text the model reads but never writes (a user's, the
#: system's, a tool's, text pasted into a turn), then the template's own markers, then the assistant's
#: own text where the policy keeps it out of the loss, then the header/content boundary token.
SEVERITY: dict[int, int] = {
    **{int(r): 0 for r in (Role.SYSTEM, Role.USER, Role.TOOL, Role.INJECTED, Role.UNKNOWN_ROLE)},
    **{int(r): 1 for r in (Role.OUTSIDE, Role.HEADER, Role.END, Role.ASSISTANT_HEADER, Role.ASSISTANT_END,
                           Role.AFTER_ASSISTANT_END)},
    _PROMPT: 1, _OPENER: 1,
    **{int(r): 2 for r in (Role.ASSISTANT, Role.REASONING, Role.TOOL_CALL)},
    _EARLIER_TURN: 2, _REASONING_FINAL: 2, _REASONING_EARLIER: 2, _EMPTY_REASONING: 2,
    _SEPARATOR: 2, _TOOL_SEPARATOR: 2,
    _BOUNDARY: 3,
    LATE: 0, EARLY: 0,  # a shifted row: one finding that explains every other offence of the row
}


def _reason_text(policy: MaskPolicy) -> dict[int, str]:
    text = {int(r): f"{ROLE_NAMES[r]} token supervised" for r in Role}
    text[int(Role.HEADER)] = "turn header supervised"
    text[int(Role.ASSISTANT_HEADER)] = "assistant turn header supervised (policy: header = false)"
    text[int(Role.ASSISTANT)] = "assistant content supervised (policy: content = false)"
    text[int(Role.TOOL_CALL)] = "tool-call block supervised (policy: tool_calls = false)"
    text[int(Role.ASSISTANT_END)] = "assistant end-of-turn token supervised (policy: end_of_turn = false)"
    text[int(Role.AFTER_ASSISTANT_END)] = "newline after assistant end supervised (policy: newline_after_end = false)"
    text[int(Role.INJECTED)] = "text after a header injected into an open turn supervised"
    text[_EARLIER_TURN] = "assistant turn before the row's last supervised (policy: turns = last)"
    text[_REASONING_FINAL] = "reasoning of the row's last assistant turn supervised (policy: reasoning_final = false)"
    text[_REASONING_EARLIER] = "reasoning of an earlier assistant turn supervised (policy: reasoning_earlier = false)"
    text[_OPENER] = ("reasoning opener supervised, but the generation prompt holds it "
                     "(policy: reasoning_opener = context)")
    text[_BOUNDARY] = "header/content boundary token supervised (policy: boundary_tokens = strict)"
    text[_PROMPT] = ("a token of the generation prompt supervised: every prompt the template renders holds it "
                     f"(policy: prompt_context = {policy.prompt_context})")
    text[_EMPTY_REASONING] = "empty reasoning block supervised (policy: empty_reasoning = context)"
    text[_SEPARATOR] = ("whitespace between the reasoning block and the reply supervised "
                        "(policy: reasoning_separator = context)")
    text[_TOOL_SEPARATOR] = "whitespace beside a tool-call block supervised (policy: tool_call_separator = context)"
    return text | SHIFT_TEXT


def _facts(view: RowView, facts: MaskFacts | None) -> MaskFacts:
    return facts if facts is not None else MaskFacts(view.ids)


def _in_windows(at: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Whether each position is inside one of the disjoint, sorted ranges [lo, hi)."""
    k = np.searchsorted(lo, at, side="right") - 1
    return (k >= 0) & (at < hi[np.maximum(k, 0)]) if len(lo) else np.zeros(len(at), dtype=bool)


def mask_shift_of(view: RowView, labels: Labels | None, contract: Contract,
                  facts: MaskFacts | None = None) -> MaskShift:
    """The view rows whose mask is one token late or early (``checks/mask_shift.py``), judged by the two
    mask rules: what may carry loss is what :func:`disallowed_supervision` lets through, what must is
    ``required_tokens`` under the contract's completeness. Where completeness is off, a shift is named only
    when the moved mask is complete (``completeness = "all"``): the strongest evidence, so no false alarm.
    """
    if view.mask is None or labels is None or not len(view.ids):
        return MaskShift(np.zeros(len(view.rows), dtype=bool), np.zeros(len(view.rows), dtype=bool))
    facts = _facts(view, facts)
    policy = contract.mask
    allowed = ~disallowed_supervision(np.ones(len(view.ids), dtype=bool), labels, policy, view.offsets, facts=facts)
    judged = policy if policy.completeness != "off" else dataclasses.replace(policy, completeness="all")
    turns = turns_of(labels, view.offsets, facts.joins_blocks) if policy_mod.needs_turns(judged) else None
    required = policy_mod.required_tokens(view.ids, view.offsets, labels, turns, judged, contract.max_len,
                                          facts.newline_lead, facts)
    return shifted_rows(view.mask, view.offsets, allowed, required)


ShiftSource = Callable[[], MaskShift]


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


def check_mask_on_assistant_spans(view: RowView, a: ShardArrays, labels: Labels, contract: Contract,
                                  facts: MaskFacts | None = None,
                                  totals: RoleTotals | None = None, shift: ShiftSource | None = None) -> CheckResult:
    """``loss_mask`` true only on assistant spans, as the contract's mask policy defines them.

    ``totals`` (the shard's per-role totals) let a clean shard pass without a per-token pass
    (:func:`clean_by_role_totals`). ``shift`` gives the shard's shifted rows (computed once per shard,
    only when some row fails: ``ShardWork.mask_shift``); each of them is one reason, the shift.
    """
    policy = contract.mask
    facts = _facts(view, facts)
    if clean_by_role_totals(view, labels, totals, policy, need=False):
        hits = np.zeros(0, dtype=np.intp)
    else:
        hits = _hits(disallowed_supervision(view.mask, labels, policy, view.offsets, facts=facts))
    at = hits  # every offending token: a row is counted under each rule it breaks
    rows = np.searchsorted(view.offsets, at, side="right") - 1
    codes = labels.role[at].astype(np.int16) if len(at) else np.zeros(0, np.int16)
    if len(at):
        # Name the rule broken: a role the policy forbids, or an allowed role in the wrong place.
        # Only the failing positions are read: turn facts come from the turn level.
        turns = turns_of(labels, view.offsets, facts.joins_blocks)
        last_at = turns.last_at(at)
        role_ok = policy_mod.allowed_at(labels.role[at], last_at, policy)
        reasoning = codes == Role.REASONING
        codes[reasoning] = np.where(last_at[reasoning], _REASONING_FINAL, _REASONING_EARLIER)
        earlier = role_ok & ~last_at & (policy.turns == "last")
        opener = np.zeros(len(at), dtype=bool)
        if policy.reasoning_opener == "context":
            opener = role_ok & ~earlier & policy_mod.opener_at(view.ids, labels.role, facts.newline_lead, at)
        prompt = np.zeros(len(at), dtype=bool)
        if policy.prompt_context != "off":
            _, hs, lo, _ = policy_mod.prompt_windows(facts, view.offsets, labels, turns, policy.prompt_context)
            prompt = _in_windows(at, hs, lo)
            earlier &= ~prompt
        empty = np.zeros(len(at), dtype=bool)
        if policy.empty_reasoning == "context":
            empty = role_ok & policy_mod.empty_reasoning_tokens(facts, labels)[at]
        seps = [(role_ok & ~empty & tokens(facts, labels, view.offsets)[at], _SEPARATOR_CODES[key][0])
                for key, tokens in policy_mod.SEPARATORS if getattr(policy, key) == "context"]
        codes[role_ok] = _BOUNDARY  # what is left of an allowed role in an allowed place: strict boundaries
        codes[opener] = _OPENER
        codes[empty] = _EMPTY_REASONING
        for sep, code in seps:
            codes[sep] = code
        codes[earlier] = _EARLIER_TURN
        codes[prompt] = _PROMPT
    before: tuple[np.ndarray, np.ndarray] = (rows[:0], codes[:0])
    if len(at):
        found = shift() if shift is not None else mask_shift_of(view, labels, contract, facts)
        rows, at, codes, before = _fold_shifted(rows, at, codes, found)
    text = _reason_text(policy)
    result = multi_reason_result("mask_on_assistant_spans", a.shard.id, len(view.rows), view.rows[rows],
                                 at - view.offsets[rows], codes, text, SEVERITY, a.shard.start)
    return _as_it_stands(result, before, view, a.shard.start, text, SEVERITY)


_WHOLE_TURN, _OPENER_MISSING = 110, 111
_MISSING_TEXT = {
    _WHOLE_TURN: "assistant turn left entirely unsupervised",
    _OPENER_MISSING: "reasoning opener (<think>) left unsupervised while the reasoning after it is supervised",
    int(Role.ASSISTANT): "assistant content left unsupervised",
    int(Role.REASONING): "reasoning (<think> block) left unsupervised",
    int(Role.TOOL_CALL): "tool-call block left unsupervised",
    int(Role.ASSISTANT_END): "assistant end-of-turn token left unsupervised (policy: end_of_turn = true)",
    int(Role.AFTER_ASSISTANT_END): "newline after assistant end left unsupervised (policy: newline_after_end = true)",
    int(Role.ASSISTANT_HEADER): "assistant header token after the generation prompt left unsupervised",
    _SEPARATOR_MISSING: "whitespace between the reasoning block and the reply left unsupervised",
    _TOOL_SEPARATOR_MISSING: "whitespace beside a tool-call block left unsupervised",
}


def check_mask_covers_assistant_spans(view: RowView, a: ShardArrays, labels: Labels, contract: Contract,
                                      facts: MaskFacts | None = None,
                                      totals: RoleTotals | None = None,
                                      shift: ShiftSource | None = None) -> CheckResult:
    """Every token the policy makes eligible is supervised (``completeness`` = all | last).

    ``totals`` (the shard's per-role totals) let a clean shard pass without a per-token pass
    (:func:`clean_by_role_totals`). ``shift``: as for :func:`check_mask_on_assistant_spans`.
    """
    policy = contract.mask
    if policy.completeness == "off":
        return CheckResult("mask_covers_assistant_spans", a.shard.id, skipped=(
            "mask completeness not declared: set [mask] completeness = \"all\" or \"last\" in the contract, "
            "or --mask-policy completeness=all"))
    facts = _facts(view, facts)
    if clean_by_role_totals(view, labels, totals, policy, need=True):
        hits = np.zeros(0, dtype=np.intp)
    else:
        turns = turns_of(labels, view.offsets, facts.joins_blocks) if policy_mod.needs_turns(policy) else None
        need = policy_mod.required_tokens(view.ids, view.offsets, labels, turns, policy, contract.max_len,
                                          facts.newline_lead, facts)
        hits = _hits(np.greater(need, view.mask, out=need))  # need & ~mask, in place
    rows, first = first_per_row(hits, view.offsets)
    at = view.offsets[rows] + first
    codes = labels.role[at].astype(np.int16) if len(rows) else np.zeros(0, np.int16)
    if len(rows):
        # A turn with no supervision at all is a different story (per-turn rows?) from a part left out of one.
        # Per-turn supervision from the shard's prefix sum; openers read at and after the failing tokens.
        turns = turns_of(labels, view.offsets, facts.joins_blocks)
        sup = turns.supervised(view.supervised_prefix)
        last = len(view.ids) - 1
        nxt = np.minimum(at + 1, last)
        lead = facts.newline_lead
        op_at = policy_mod.opener_at(view.ids, labels.role, lead, at)
        after = np.minimum(at + 1 + policy_mod.opener_at(view.ids, labels.role, lead, nxt), last)
        codes[op_at & view.mask[after] & (labels.role[after] == Role.REASONING)] = _OPENER_MISSING
        content = codes == Role.ASSISTANT
        for key, tokens in policy_mod.SEPARATORS if content.any() else ():  # what the reply text alone leaves out
            codes[content & tokens(facts, labels, view.offsets)[at]] = _SEPARATOR_CODES[key][1]
        t = turns.index_at(at)
        codes[(t >= 0) & (sup[np.maximum(t, 0)] == 0) if len(sup) else np.zeros(len(at), bool)] = _WHOLE_TURN
    text = {int(r): f"{ROLE_NAMES[r]} token left unsupervised" for r in Role} | _MISSING_TEXT
    scope = "every assistant turn" if policy.completeness == "all" else "the row's last assistant turn"
    text = {k: f"{v} ({scope} must be supervised)" for k, v in text.items()} | SHIFT_TEXT
    before: tuple[np.ndarray, np.ndarray] = (rows[:0], codes[:0])
    if len(rows):
        found = shift() if shift is not None else mask_shift_of(view, labels, contract, facts)
        rows, first, codes, before = _fold_shifted(rows, first, codes, found)
    result = row_result("mask_covers_assistant_spans", a.shard.id, len(view.rows), view.rows[rows], first, codes,
                        text, a.shard.start)
    return _as_it_stands(result, before, view, a.shard.start, text, {LATE: 0, EARLY: 0})


# --------------------------------------------------------------------------- explanations and hints


def offending_supervised(ids: np.ndarray, mask: np.ndarray, labels: Labels, contract: Contract,
                         facts: MaskFacts) -> np.ndarray:
    """Every token of one row that mask_on_assistant_spans rejects (supervised where the policy forbids)."""
    offsets = np.array([0, len(ids)], dtype=np.int64)
    return disallowed_supervision(mask, labels, contract.mask, offsets, facts=facts)


def offending_unsupervised(ids: np.ndarray, mask: np.ndarray, labels: Labels, contract: Contract,
                           facts: MaskFacts) -> np.ndarray:
    """Every token of one row that mask_covers_assistant_spans misses (required and left out)."""
    offsets = np.array([0, len(ids)], dtype=np.int64)
    turns = assistant_turns(labels.role, offsets, facts.joins_blocks)
    return policy_mod.required_tokens(ids, offsets, labels, turns, contract.mask, contract.max_len,
                                      facts.newline_lead, facts) & ~mask


def convention_hint(engine, w, result: CheckResult) -> str:
    """Most rows break a mask rule: the built-in conventions these rows fit, found by running them, or else
    the policy learnt from them (``checks/convention_learn.py``) as ``--mask-policy`` flags, with the rows no
    policy the other rows follow explains."""
    if not result.rows_checked or result.rows_violating < 0.5 * result.rows_checked:
        return ""
    from .convention_fit import fitting, learnt_for
    from .declare import declared

    head = f"hint: {result.rows_violating:,} of {result.rows_checked:,} rows break this rule"
    moved = w.mask_shift.direction()
    if moved is not None and max(result.by_code, key=result.by_code.get) in SHIFT_TEXT:
        return (f"{head}; most of them are one token {DIRECTION[moved]}: the producer's mask is off by one "
                "(a label shift applied twice, or not at all), not a different convention")
    fits = fitting(w.view, w.labels, w.mask_facts, engine.contract, engine.oracle, engine.vocab)
    ok = [name for name, n in fits if n == 0]
    if ok:
        return (f"{head}; they fit " + " and ".join(f"--contract {name}" for name in ok)
                + " (checked on this shard: 0 rows rejected)")
    top = max(result.by_code.items(), key=lambda kv: kv[1], default=(None, 0))[0]
    why = declared(result.check).hints.get(top, "")
    learnt = learnt_for(engine.contract, engine.oracle, engine.vocab, lambda: (w.view, w.labels, w.mask_facts))
    return f"{head}.{why} {learnt_hint(learnt, engine.contract.mask, fits)} See docs/conventions.md."


def learnt_hint(learnt, current: MaskPolicy, fits: list[tuple[str, int]]) -> str:
    """The policy learnt from a shard's rows as the flags that turn ``current`` into it, and the rows it rejects
    (named with why, and which of them no policy at all explains); or the closest built-in convention
    when the learnt policy explains fewer rows."""
    from ..conventions import flags, keys_text
    from .convention_fit import explains_more

    best, n = fits[0] if fits else ("", 0)
    if learnt is None or (best and not explains_more(learnt, n)):
        closest = f"The closest built-in convention is --contract {best} ({n:,} rows rejected)" if best else ""
        if learnt is not None and not learnt.policy.content:
            return closest + "; the rows never train the reply text, which no convention leaves out."
        learnt_part = f"; {learnt.minority()} under the policy learnt from them" if learnt is not None else ""
        return closest + learnt_part + "."
    near = (f"nearest preset {learnt.nearest}, differing in {', '.join(learnt.differs)}" if learnt.nearest
            else "no preset to compare")
    change = flags(learnt.policy, current) or "(the contract's own keys)"
    text = (f"The rows follow a policy learnt from them ({near}): {change}; in [mask]: "
            f"{keys_text(learnt.policy)}; {learnt.minority()}")
    if learnt.unexplained:
        kinds: dict[str, int] = {}
        for role in learnt.unexplained.values():
            kinds[role] = kinds.get(role, 0) + 1
        text += (f"; no policy explains {len(learnt.unexplained):,} of them: they supervise text no convention "
                 "trains on (" + ", ".join(f"{role} text: {n:,} rows" for role, n in sorted(kinds.items())) + ")")
    return text + "."


# --------------------------------------------------------------------------- the registry

register(Spec("turns_well_formed", Scope.ROW, "turns open and close as the chat template writes them",
              needs=frozenset({IDS, TOKENIZER}),
              run=lambda e, w: check_turns_well_formed(w.view, w.arrays, w.labels)))
register(Spec("mask_on_assistant_spans", Scope.ROW, "loss_mask is 1 only where the mask policy allows",
              needs=frozenset({IDS, MASK, TOKENIZER}), offending=offending_supervised, hint=convention_hint,
              run=lambda e, w: check_mask_on_assistant_spans(w.view, w.arrays, w.labels, e.contract, w.mask_facts,
                                                             e.mask_totals(w), lambda: w.mask_shift)))
register(Spec("mask_covers_assistant_spans", Scope.ROW, "every token the mask policy requires is supervised",
              needs=frozenset({IDS, MASK, TOKENIZER}), offending=offending_unsupervised, hint=convention_hint,
              turned_off=lambda c: None if c.mask.completeness != "off" else (
                  "[mask] completeness = \"off\"; to check it set completeness = \"all\" or \"last\", or pass "
                  "--mask-policy completeness=all"),
              hints={int(Role.REASONING): (
                  " Reasoning is left out of the mask in most rows: the Qwen3 regex bug of speculators "
                  "(the empty think block baked into the role marker), or a convention that does not train it."),
                  _SEPARATOR_MISSING: (
                  " The blank line between </think> and the reply is left out of the mask in most rows: a producer "
                  "that locates the reply text alone (arctic-training's str.find).")},
              run=lambda e, w: check_mask_covers_assistant_spans(w.view, w.arrays, w.labels, e.contract, w.mask_facts,
                                                                 e.mask_totals(w), lambda: w.mask_shift)))
