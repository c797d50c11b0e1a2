"""What a drafter never trains on under the dataset's mask convention: ``convention_losses``, a warning.

A convention can be legal and still cost the drafter something: speculators 0.4-0.7 never trains
the end-of-turn token (a drafter trained on it never learns where a reply stops), a producer that
masks the reply text alone never trains reasoning or tool calls. The mask contracts accept such a
dataset, since its rows follow the convention; this contract says what is lost. A part of the
assistant's output is lost when the dataset holds tokens of it and none is ever trained: the policy
forbids it in every turn, or allows it and no row supervises it. Each lost part is named with the
share of its tokens left untrained and its share of the assistant's tokens.

Report-only like the suspicious-content contracts (``[content] strict = true`` makes it fail). The
token counts are the shards' per-role stats (``checks/accumulators.py``: ``role_tokens``,
``role_supervised``); each shard adds how many of its rows hold each part (a partial folded into
one small state as reports arrive), so the verdict costs nothing per token.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..contract import MaskPolicy
from ..results import CheckResult, Violation
from ..spans.labels import ROLE_NAMES, Role
from .declare import IDS, MASK, TOKENIZER, Scope, Spec, Verdict, register

NAME = "convention_losses"
#: The parts a convention may leave untrained: (label, role, bit in a row's part mask).
PARTS = (("reasoning", Role.REASONING, 1), ("tool calls", Role.TOOL_CALL, 2),
         ("end-of-turn token", Role.ASSISTANT_END, 4))
#: The assistant's own output, of which a lost part's share is given.
_OUTPUT = (Role.ASSISTANT, Role.REASONING, Role.TOOL_CALL, Role.ASSISTANT_END)
_SHOWN = 5  # first rows kept per part (examples)


def forbidden(policy: MaskPolicy, role: Role) -> str | None:
    """The keys by which the policy never allows the part, or None when some turn may supervise it."""
    if role == Role.REASONING and not (policy.reasoning_final or policy.reasoning_earlier):
        return "reasoning_final = reasoning_earlier = false"
    if role == Role.TOOL_CALL and not policy.tool_calls:
        return "tool_calls = false"
    if role == Role.ASSISTANT_END and not policy.end_of_turn:
        return "end_of_turn = false"
    return None


def shard_parts(e: Any, shard: Any) -> dict[str, Any] | None:
    """A shard's partial: how many rows hold each combination of the parts (a bit mask per row), and per part
    the first few (global row, position of its first token there). None when the rows are not labelled."""
    if e.unreadable(shard):
        return None
    w = e.work(shard)
    runs, view = w.role_runs, w.view
    if runs is None or not len(view.rows):
        return None
    bits = np.zeros(len(view.rows), dtype=np.int64)
    first: dict[str, list[list[int]]] = {}
    for _, role, bit in PARTS:
        starts = runs.start[runs.role == role]
        rows = np.searchsorted(view.offsets, starts, side="right") - 1
        bits[rows] |= bit
        rows, at = np.unique(rows, return_index=True)  # each row once, at its first run of the part
        pos = starts[at[:_SHOWN]] - view.offsets[rows[:_SHOWN]]
        first[str(bit)] = [[int(shard.start + view.rows[r]), int(p)] for r, p in zip(rows[:_SHOWN], pos)]
    return {"combos": np.bincount(bits, minlength=8).tolist(), "first": first}


def fold(state: dict[str, Any] | None, part: dict[str, Any] | None) -> dict[str, Any]:
    """Add a shard's partial to the running state (counts add up; the first rows of each part kept)."""
    state = state or {"combos": [0] * 8, "first": {}}
    if part is None:
        return state
    combos = [a + b for a, b in zip(state["combos"], part["combos"])]
    first = dict(state["first"])
    for bit, rows in part["first"].items():
        first[bit] = sorted(first.get(bit, []) + rows)[:_SHOWN]
    return {"combos": combos, "first": first}


def _lost(role_tokens: dict[str, int], role_supervised: dict[str, int], policy: MaskPolicy) -> list[tuple[Any, ...]]:
    """(label, bit, tokens, untrained tokens, why) of each part the dataset holds and never trains."""
    out = []
    for label, role, bit in PARTS:
        tokens = int(role_tokens.get(ROLE_NAMES[role], 0))
        sup = int(role_supervised.get(ROLE_NAMES[role], 0))
        why = forbidden(policy, role)
        if tokens > sup and (why is not None or sup == 0):  # held, left untrained, and never trained by rule
            out.append((label, bit, tokens, tokens - sup, f"policy: {why}" if why else "no row supervises it"))
    return out


def losses_verdict(role_tokens: dict[str, int], role_supervised: dict[str, int], policy: MaskPolicy,
                   state: dict[str, Any], rows_checked: int, strict: bool) -> Verdict:
    """The verdict from the dataset's per-role token counts and the folded row counts (pure)."""
    output = sum(int(role_tokens.get(ROLE_NAMES[r], 0)) for r in _OUTPUT)
    combos = state["combos"]
    by_reason: dict[str, int] = {}
    details: list[str] = []
    figures: dict[str, Any] = {}
    lost_bits = 0
    for label, bit, tokens, untrained, why in _lost(role_tokens, role_supervised, policy):
        share, of_output = untrained / tokens, tokens / output if output else 0.0
        rows = sum(n for c, n in enumerate(combos) if c & bit)
        reason = (f"{label} never trained ({why}): {untrained:,} of {tokens:,} tokens untrained ({share:.1%}), "
                  f"{of_output:.1%} of the assistant's tokens")
        by_reason[reason] = rows
        details.append(f"{reason}; {rows:,} rows hold it")
        figures[label] = {"tokens": tokens, "untrained": untrained, "untrained_share": share,
                          "share_of_assistant_tokens": of_output, "rows": rows}
        lost_bits |= bit
    violating = sum(n for c, n in enumerate(combos) if c & lost_bits)
    names = {bit: label for label, _, bit in PARTS}
    shown: dict[int, tuple[int, str]] = {}
    for bit, rows in sorted(state["first"].items()):
        if int(bit) & lost_bits:
            for row, pos in rows:
                shown.setdefault(row, (pos, f"{names[int(bit)]} the convention never trains"))
    examples = [Violation(r, pos, why) for r, (pos, why) in sorted(shown.items())[:_SHOWN]]
    message = ("the drafter never trains on " + "; ".join(by_reason)) if by_reason and strict else ""
    result = CheckResult(NAME, "dataset", rows_checked=rows_checked, rows_violating=violating, by_reason=by_reason,
                         examples=examples, message=message, report_only=not strict)
    return Verdict(result, details, {"lost": figures} if figures else None)


def untrained_tokens(ids: np.ndarray, mask: np.ndarray, labels: Any, contract: Any, facts: Any) -> np.ndarray:
    """Every token of one row of a part the policy never allows (what an explanation marks)."""
    roles = [role for _, role, _ in PARTS if forbidden(contract.mask, role) is not None]
    return np.isin(labels.role, roles) & ~mask


def _carrier(e: Any, w: Any) -> CheckResult:
    return CheckResult(NAME, w.shard.id, rows_checked=len(w.view.rows), report_only=not e.contract.content.strict)


def _reduce(run: Any) -> Verdict | None:
    recorded = run.recorded(NAME)
    if recorded is None or recorded["skipped"] >= recorded["tests"]:
        return None  # no shard could label its rows: the shards' own skips say why
    tokens: dict[str, int] = {}
    supervised: dict[str, int] = {}
    rows = 0
    for st in run.shard_stats():
        rows += int(st.get("rows_checked") or 0)
        for into, key in ((tokens, "role_tokens"), (supervised, "role_supervised")):
            for role, n in (st.get(key) or {}).items():
                into[role] = into.get(role, 0) + int(n)
    state = run.folded(NAME) or fold(None, None)
    e = run.engine
    return losses_verdict(tokens, supervised, e.contract.mask, state, rows, e.contract.content.strict)


register(Spec(NAME, Scope.WHOLE, "every part of the assistant's output the dataset holds is trained somewhere",
              needs=frozenset({IDS, MASK, TOKENIZER}), content=True, per_part=True, run=_carrier,
              offending=untrained_tokens,
              partial=shard_parts, fold=fold, reduce=_reduce))
