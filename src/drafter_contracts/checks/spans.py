"""Contracts that need each token's role: well-formed turns, loss only on assistant spans, and loss on all of them."""

from __future__ import annotations

import numpy as np

from ..contract import Contract, MaskPolicy
from ..contract.mask_reasons import (SEPARATOR_MISSING, ShiftSource, forbidden_at, forbidden_result, missing_at,
                                     missing_result)
from ..contract.mask_rules import SEPARATORS, disallowed_supervision, needs_turns, required_tokens
from ..contract.fit import explains_more, fitting, learnt_for
from ..contract.mask_shift import DIRECTION, SHIFT_TEXT, mask_shift_of
from ..contract.presets import flags, keys_text
from ..dataset.layout_rows import ShardArrays
from ..results import CheckResult, first_per_row, row_result
from ..spans.labels import TURN_PROBLEM_TEXT, Labels, Role
from ..spans.turns import MaskFacts, assistant_turns
from .declare import IDS, MASK, TOKENIZER, Scope, Spec, declared, register
from ..dataset.row_view import RowView


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

    Split reasoning, ``turns``/``completeness = "last"`` (``mask_rules.needs_turns``) and
    context openers depend on where a token sits, not only on its role.
    """
    if (needs_turns(policy) or policy.reasoning_opener == "context" or policy.empty_reasoning != "supervised"
            or policy.optional or any(getattr(policy, key) != "content" for key, _ in SEPARATORS)):
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


def _facts(view: RowView, facts: MaskFacts | None) -> MaskFacts:
    return facts if facts is not None else MaskFacts(view.ids)


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
        at = np.zeros(0, dtype=np.intp)
    else:
        at = forbidden_at(view, labels, policy, facts)  # every offending token: a row counts under each rule
    found = shift if shift is not None else (lambda: mask_shift_of(view, labels, contract, facts))
    return forbidden_result("mask_on_assistant_spans", a.shard.id, view, labels, policy, facts, at, found,
                            a.shard.start)


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
        hits = missing_at(view, labels, policy, facts, contract.max_len)
    found = shift if shift is not None else (lambda: mask_shift_of(view, labels, contract, facts))
    return missing_result("mask_covers_assistant_spans", a.shard.id, view, labels, policy, facts, hits, found,
                          a.shard.start)


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
    return required_tokens(ids, offsets, labels, turns, contract.mask, contract.max_len,
                           facts.newline_lead, facts) & ~mask


def convention_hint(engine, w, result: CheckResult) -> str:
    """Most rows break a mask rule: the built-in conventions these rows fit, found by running them, or else
    the policy learnt from them (``contract/learn.py``) as ``--mask-policy`` flags, with the rows no
    policy the other rows follow explains."""
    if not result.rows_checked or result.rows_violating < 0.5 * result.rows_checked:
        return ""
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
                  SEPARATOR_MISSING: (
                  " The blank line between </think> and the reply is left out of the mask in most rows: a producer "
                  "that locates the reply text alone (arctic-training's str.find).")},
              run=lambda e, w: check_mask_covers_assistant_spans(w.view, w.arrays, w.labels, e.contract, w.mask_facts,
                                                                 e.mask_totals(w), lambda: w.mask_shift)))
