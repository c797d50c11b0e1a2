"""The mask policy a dataset's rows follow, learnt from them: ``[mask] convention = "auto"`` and ``init``.

A producer's convention is a handful of facts: which parts of an assistant turn carry the loss (its
header, the reply text, the separator between a reasoning block and the reply, reasoning in the row's
last and in earlier turns, tool calls, the end token, the newline after it), in every turn or only the
last. Each part is measured on the sample rows from the role labels the engine already computes: per
part and place (the row's last assistant turn, earlier ones), the tokens and supervised tokens, and
how many rows supervise all of the part's tokens, none, or some. A part that every row supervises
(but a tolerated few, :data:`TOLERANCE`) is required; one no row supervises (but a few) is never
supervised; one that goes either way is optional (may be, never required). Rows that supervise text
no policy can allow (a user's, a tool's, a turn header) are left out of the measurement: no
convention explains them.

The keys derived from the parts are verified by running the mask rules themselves on the same rows
(``mask_rules.py``, the rules the two mask contracts apply, their offences named as the contracts name
them: ``mask_reasons.py``); the rows they reject are the defective minority, named with their reason. A
part the sample never shows takes the value of the nearest producer preset on the keys the sample did
show (``presets.nearest``), and a learnt policy equal to a preset is that preset.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..dataset.row_view import in_table
from ..spans.labels import ROLE_NAMES, Labels, Role
from ..spans.turns import MaskFacts, turns_of
from . import mask_rules
from .file import Contract
from .mask_policy import MaskPolicy
from .mask_reasons import forbidden_at, forbidden_result, missing_at, missing_result
from .mask_rules import prompt_explains
from .mask_shift import mask_shift_of
from .presets import KEY_ORDER, keys_text, nearest, with_preset

#: The parts of an assistant turn a policy says something about, in the order they are printed.
PARTS = ("header", "content", "separator", "reasoning", "empty_reasoning", "empty_separator", "tool_calls",
         "tool_call_separator", "end_of_turn", "newline_after_end")
#: Rows (a share of those holding the part, at least one) that may disagree with a part's learnt value:
#: they are then the defective minority; more than that and the part is optional (may be, never required).
TOLERANCE = 0.01
_NONE = 255
_PLACES = ("earlier", "last")


def _slack(rows: int, tolerance: float) -> int:
    """Rows of ``rows`` that may disagree with the rest: the tolerated share, at least one, always a minority."""
    return min(max(1, int(tolerance * rows)), (rows - 1) // 2) if tolerance > 0 else 0


@dataclass(frozen=True)
class PartFigures:
    """One part in one place over the sample: tokens, supervised tokens, and rows supervising all / none of it."""

    tokens: int = 0
    supervised: int = 0
    rows: int = 0
    full: int = 0
    none: int = 0

    def value(self, tolerance: float = TOLERANCE) -> str:
        """"required", "never", "optional" or "unseen" (no row holds the part)."""
        if not self.rows:
            return "unseen"
        slack = _slack(self.rows, tolerance)
        if self.rows - self.full <= slack:
            return "required"
        if self.rows - self.none <= slack:
            return "never"
        return "optional"

    def __add__(self, other: "PartFigures") -> "PartFigures":
        return PartFigures(*(a + b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other))))


@dataclass
class Learnt:
    """A learnt policy, what it was learnt from, and the rows it rejects."""

    policy: MaskPolicy
    rows: int  # sample rows
    figures: dict[str, dict[str, PartFigures]]  # part -> place -> figures
    how: dict[str, str]  # key -> how it was decided (the part's value, or "not seen: from PRESET")
    unexplained: dict[int, str] = field(default_factory=dict)  # row -> role supervised that no policy allows
    rejected: list[int] = field(default_factory=list)  # rows the learnt policy's mask rules reject
    reasons: dict[str, int] = field(default_factory=dict)  # why (rows per reason)
    examples: list[tuple[int, str]] = field(default_factory=list)  # the first rejected rows with a reason
    nearest: str = ""  # the nearest producer preset (fewest differing keys)
    differs: tuple[str, ...] = ()  # the keys in which the policy differs from it
    equals: str | None = None  # the preset the policy equals, if any

    def shares(self) -> dict[str, dict[str, str]]:
        """Per part and place: supervised / tokens, as printed."""
        return {part: {place: f"{f.supervised:,}/{f.tokens:,}" for place, f in by.items() if f.tokens}
                for part, by in self.figures.items()}

    def minority(self, shown: int = 5) -> str:
        """The rejected rows in words: how many, the first few with their reason."""
        if not self.rejected:
            return f"it rejects none of the {self.rows:,} rows"
        first = ", ".join(f"{row} ({why})" for row, why in self.examples[:shown])
        listed = min(shown, len(self.examples))
        more = f" and {len(self.rejected) - listed:,} more" if len(self.rejected) > listed else ""
        return f"it rejects {len(self.rejected):,} of {self.rows:,} rows (the defective minority): rows {first}{more}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the keys, how each was decided, the shares, the preset comparison, the rejected rows."""
        return {"keys": {k: (list(v) if isinstance(v, tuple) else v) for k, v in keys_of(self.policy).items()},
                "how": dict(self.how), "shares": self.shares(), "rows": self.rows, "nearest_preset": self.nearest,
                "differs_in": list(self.differs), "equals_preset": self.equals, "rejected_rows": self.rejected[:100],
                "rejected": len(self.rejected), "reasons": dict(self.reasons),
                "unexplained": {str(k): v for k, v in list(self.unexplained.items())[:100]}}


def keys_of(policy: MaskPolicy) -> dict[str, Any]:
    """The policy's keys in print order (``presets.KEY_ORDER``), convention aside."""
    return {k: getattr(policy, k) for k in KEY_ORDER}


# --------------------------------------------------------------------------- measuring


def _place_last(labels: Labels, offsets: np.ndarray, turns: Any) -> np.ndarray:
    """Bool per token: in the row's last assistant turn (a header counts with the turn it opens)."""
    last = turns.last.copy()
    head = np.flatnonzero(labels.role == Role.ASSISTANT_HEADER)
    if not len(head):
        return last
    if not len(turns.starts):  # headers of turns the cut took: each is its row's last
        last[head] = True
        return last
    t = np.minimum(np.searchsorted(turns.starts, head), len(turns.starts) - 1)  # the turn the header opens
    row = np.searchsorted(offsets, head, side="right") - 1
    opens = (turns.starts[t] >= head) & (turns.row_of_turn[t] == row)
    last[head] = np.where(opens, turns.is_last_turn[t], True)
    return last


def part_codes(view: Any, labels: Labels, facts: MaskFacts) -> np.ndarray:
    """The part (index into :data:`PARTS`) of every token, ``255`` for tokens of no part (other roles,
    header/content boundary tokens, which no policy requires, and end-of-text tokens after an end)."""
    role = labels.role
    code = np.full(len(role), _NONE, dtype=np.uint8)
    for part, r in (("header", Role.ASSISTANT_HEADER), ("content", Role.ASSISTANT), ("reasoning", Role.REASONING),
                    ("tool_calls", Role.TOOL_CALL), ("end_of_turn", Role.ASSISTANT_END)):
        code[role == r] = PARTS.index(part)
    lead = facts.newline_lead
    after = np.flatnonzero(role == Role.AFTER_ASSISTANT_END)
    if lead is not None and len(after):
        tok = facts.ids[after]
        newline = (tok >= 0) & (tok < len(lead)) & lead[np.clip(tok, 0, len(lead) - 1)]
        code[after[newline]] = PARTS.index("newline_after_end")
    code[mask_rules.tool_call_separator_tokens(facts, labels, view.offsets)] = PARTS.index("tool_call_separator")
    code[mask_rules.separator_tokens(facts, labels, view.offsets)] = PARTS.index("separator")
    # an empty block's markers, and the separator after one (both are what empty_reasoning governs)
    empty = mask_rules.empty_reasoning_tokens(facts, labels)
    code[empty & (code == PARTS.index("separator"))] = PARTS.index("empty_separator")
    code[empty & (role == Role.REASONING)] = PARTS.index("empty_reasoning")
    code[labels.boundary] = _NONE
    return code


def unexplained_rows(view: Any, labels: Labels) -> dict[int, str]:
    """View row -> the first role it supervises that no policy may allow (user, system, tool, header text)."""
    if view.mask is None:
        return {}
    bad = np.flatnonzero(view.mask & ~in_table(labels.role, mask_rules.ALLOWABLE_ROLES))
    if not len(bad):
        return {}
    rows = np.searchsorted(view.offsets, bad, side="right") - 1
    first = np.unique(rows, return_index=True)[1]
    return {int(rows[i]): ROLE_NAMES[Role(int(labels.role[bad[i]]))] for i in first}


def measure(view: Any, labels: Labels, facts: MaskFacts, keep: np.ndarray,
            exclude: np.ndarray | None = None) -> dict[str, dict[str, PartFigures]]:
    """Per part and place, over the rows ``keep`` marks (bool per view row): tokens, supervised tokens,
    rows holding the part, rows supervising all of it, rows supervising none. ``exclude``: tokens left
    out (what a generation prompt holds, under the per-turn rule)."""
    turns = turns_of(labels, view.offsets, facts.joins_blocks)
    code = part_codes(view, labels, facts)
    if exclude is not None:
        code[exclude] = _NONE
    rows = len(view.rows)
    row_of = np.repeat(np.arange(rows), view.lengths)
    use = (code != _NONE) & keep[row_of]
    slot = len(PARTS) * 2
    key = row_of[use] * slot + code[use].astype(np.int64) * 2 + _place_last(labels, view.offsets, turns)[use]
    tokens = np.bincount(key, minlength=rows * slot).reshape(rows, slot)
    sup = np.bincount(key, weights=view.mask[use], minlength=rows * slot).reshape(rows, slot).astype(np.int64)
    out: dict[str, dict[str, PartFigures]] = {}
    for i, part in enumerate(PARTS):
        out[part] = {}
        for place_i, place in enumerate(_PLACES):
            t, s = tokens[:, 2 * i + place_i], sup[:, 2 * i + place_i]
            has = t > 0
            out[part][place] = PartFigures(int(t.sum()), int(s.sum()), int(has.sum()), int((has & (s == t)).sum()),
                                           int((has & (s == 0)).sum()))
    return out


# --------------------------------------------------------------------------- deciding the keys


def _turns_value(figures: dict[str, dict[str, PartFigures]], tolerance: float) -> str | None:
    """"last" when earlier turns are (nearly) never supervised while last turns are, "all" when they are,
    None when no sample row has an earlier assistant turn."""
    earlier = sum((by["earlier"] for by in figures.values()), PartFigures())
    last = sum((by["last"] for by in figures.values()), PartFigures())
    if not earlier.rows or not last.supervised:
        return None
    return "last" if earlier.rows - earlier.none <= _slack(earlier.rows, tolerance) else "all"


def _prompt_context(view: Any, labels: Labels, facts: MaskFacts, keep: np.ndarray, tolerance: float) -> bool:
    """Whether the rows' last turns are supervised from where a generation prompt the template renders
    stops matching them (speculators 0.8+'s per-turn rule), in all but a tolerated few."""
    found = prompt_explains(view, labels, facts)
    if found is None:
        return False
    turns, has, explains = found
    rows = turns.row_of_turn[np.flatnonzero(turns.is_last_turn)]
    counted = has & keep[rows]
    explained = counted & explains.any(axis=0)
    return bool(counted.any()) and int(counted.sum() - explained.sum()) <= _slack(int(counted.sum()), tolerance)


def _bool_key(value: str) -> tuple[bool, bool]:
    """(allowed, optional) of a part's value."""
    return value in ("required", "optional"), value == "optional"


def _reasoning_keys(figures: dict[str, dict[str, PartFigures]], turns: str | None, tolerance: float,
                    keys: dict[str, Any], how: dict[str, str], optional: set[str]) -> None:
    """reasoning_final / reasoning_earlier (one value under turns = last) and empty_reasoning."""
    r = figures["reasoning"]
    final = r["last"].value(tolerance)
    earlier = r["earlier"].value(tolerance) if turns != "last" else "unseen"  # under "last" earlier turns are context
    if final == "unseen":
        final = earlier
    if earlier == "unseen":
        earlier = final
    for key, value in (("reasoning_final", final), ("reasoning_earlier", earlier)):
        if value != "unseen":
            keys[key], opt = _bool_key(value)
            how[key] = value
            if opt:
                optional.add("reasoning")
    e = _both(figures, "empty_reasoning", turns).value(tolerance)
    after = _both(figures, "empty_separator", turns).value(tolerance)
    if e != "unseen":
        keys["empty_reasoning"] = ("context" if e == "never" and after in ("never", "unseen") and final != "never" else
                                   "supervised" if e == final else "optional")
        how["empty_reasoning"] = e


def _both(figures: dict[str, dict[str, PartFigures]], part: str, turns: str | None) -> PartFigures:
    """A part's figures in the places the policy judges (the last turn only under turns = last)."""
    by = figures[part]
    return by["last"] if turns == "last" else by["last"] + by["earlier"]


def _separator_key(value: str, content: str) -> str:
    if value == content:
        return "content"
    return {"never": "context", "optional": "optional", "required": "supervised"}[value]


def derive(figures: dict[str, dict[str, PartFigures]], turns: str | None, prompt: bool,
           tolerance: float = TOLERANCE) -> tuple[dict[str, Any], dict[str, str]]:
    """The keys the figures decide (a part no row holds decides none) and how each was decided."""
    keys: dict[str, Any] = {"boundary_tokens": "allow", "reasoning_opener": "supervised"}
    how: dict[str, str] = {}
    optional: set[str] = set()
    if turns is not None:
        keys["turns"], keys["completeness"] = turns, turns
        how["turns"] = how["completeness"] = ("earlier assistant turns never supervised" if turns == "last" else
                                              "every assistant turn supervised")
    keys["prompt_context"] = "last" if prompt else "off"
    how["prompt_context"] = ("the last turn is supervised from where the generation prompt ends" if prompt else
                             "not the per-turn rule")
    value = {p: _both(figures, p, turns).value(tolerance) for p in PARTS}
    for part in ("header", "content", "tool_calls", "end_of_turn", "newline_after_end"):
        if value[part] != "unseen":
            keys[part], opt = _bool_key(value[part])
            how[part] = value[part]
            if opt:
                optional.add(part)
    _reasoning_keys(figures, turns, tolerance, keys, how, optional)
    value["separator"] = sum((_both(figures, p, turns) for p in ("separator", "empty_separator")),
                             PartFigures()).value(tolerance)  # the key governs both
    for part, key in (("separator", "reasoning_separator"), ("tool_call_separator", "tool_call_separator")):
        if value[part] != "unseen" and value["content"] != "unseen":
            keys[key] = _separator_key(value[part], value["content"])
            how[key] = value[part]
    keys["optional"] = tuple(k for k in MaskPolicy.OPTIONAL_KEYS if k in optional)
    return keys, how


# --------------------------------------------------------------------------- verifying


def _offences(view: Any, labels: Labels, facts: MaskFacts, contract: Contract, policy: MaskPolicy
              ) -> tuple[np.ndarray, np.ndarray | None]:
    """Flat positions each mask rule rejects: supervised where the policy forbids it, and (completeness on)
    required but left out; the same two rules, applied once, that the two mask contracts apply."""
    forbidden = forbidden_at(view, labels, policy, facts)
    missing = missing_at(view, labels, policy, facts, contract.max_len) if policy.completeness != "off" else None
    return forbidden, missing


def _rows_at(view: Any, forbidden: np.ndarray, missing: np.ndarray | None) -> np.ndarray:
    """The view rows holding any of these positions."""
    hits = forbidden if missing is None else np.concatenate((forbidden, missing))
    return np.unique(np.searchsorted(view.offsets, hits, side="right") - 1)


def rejected_rows(view: Any, labels: Labels, facts: MaskFacts, contract: Contract, policy: MaskPolicy) -> np.ndarray:
    """View rows the policy's two mask rules reject (supervised where it forbids, or left out where it requires)."""
    if view.mask is None or not len(view.ids):
        return np.zeros(0, dtype=np.int64)
    return _rows_at(view, *_offences(view, labels, facts, contract, policy))


def verify(learnt: Learnt, view: Any, labels: Labels, facts: MaskFacts, contract: Contract) -> None:
    """Run the learnt policy's mask rules on the sample: every row they reject, and why (the first rows, their
    offences named as the two mask contracts name them)."""
    policy = learnt.policy
    forbidden, missing = _offences(view, labels, facts, contract, policy)
    learnt.rejected = [int(view.rows[r]) for r in _rows_at(view, forbidden, missing)]
    c = dataclasses.replace(contract, mask=policy)
    shift = lambda: mask_shift_of(view, labels, c, facts)  # noqa: E731
    found = [forbidden_result("mask_on_assistant_spans", "sample", view, labels, policy, facts, forbidden, shift, 0)]
    if missing is not None:
        found.append(missing_result("mask_covers_assistant_spans", "sample", view, labels, policy, facts,
                                    missing, shift, 0))
    first: dict[int, str] = {}
    for r in found:
        for reason, n in r.by_reason.items():
            learnt.reasons[reason] = learnt.reasons.get(reason, 0) + n
        for e in r.examples:
            first.setdefault(e.row, e.reason)
    learnt.examples = sorted(first.items())


# --------------------------------------------------------------------------- the learner


def learn(view: Any, labels: Labels, facts: MaskFacts, contract: Contract, presets: dict[str, MaskPolicy],
          explicit: frozenset[str] = frozenset(), tolerance: float = TOLERANCE) -> Learnt:
    """The tightest policy the sample's clean majority fits, verified on the sample.

    ``presets``: the producer conventions as resolved for this template (name -> policy), for the keys
    the sample cannot decide and for the comparison. ``explicit``: [mask] keys the contract or the
    command line wrote; they win over what is learnt, as over a preset.
    """
    unexplained = unexplained_rows(view, labels)
    keep = np.ones(len(view.rows), dtype=bool)
    keep[list(unexplained)] = False
    figures = measure(view, labels, facts, keep)
    turns = _turns_value(figures, tolerance)
    prompt = turns == "last" and _prompt_context(view, labels, facts, keep, tolerance)
    if prompt:  # the prompt's tokens are context: measure what follows them
        found = mask_rules.prompt_windows(facts, view.offsets, labels,
                                          turns_of(labels, view.offsets, facts.joins_blocks), "last")
        figures = measure(view, labels, facts, keep, mask_rules.in_ranges(len(view.ids), found[1], found[3]))
    keys, how = derive(figures, turns, prompt, tolerance)
    near, _ = nearest(keys, presets)
    unseen = [k for k in MaskPolicy.keys() if k not in keys and k not in ("optional", "convention")]
    if near:
        base = presets[near]
        for k in unseen:
            keys[k] = getattr(base, k)
            how[k] = f"not seen in the sample: {near}'s"
        keys["optional"] = tuple(k for k in MaskPolicy.OPTIONAL_KEYS
                                 if k in keys["optional"] or (k in base.optional and k in unseen))
    policy = with_preset(dataclasses.replace(contract.mask, convention="custom"), explicit, keys)
    learnt = Learnt(policy, len(view.rows), figures, how, {int(view.rows[r]): v for r, v in unexplained.items()})
    learnt.nearest, learnt.differs = nearest(keys_of(policy), presets)
    learnt.equals = learnt.nearest if learnt.nearest and not learnt.differs else None
    verify(learnt, view, labels, facts, contract)
    return learnt


def describe(learnt: Learnt) -> str:
    """One line: the keys, the nearest preset and how the policy differs from it, the rows it rejects."""
    near = (f"equal to {learnt.equals}" if learnt.equals else
            f"nearest preset {learnt.nearest}, differing in {', '.join(learnt.differs)}" if learnt.nearest else
            "no preset to compare")
    return f"learnt from the first {learnt.rows:,} rows: {keys_text(learnt.policy)} ({near}); {learnt.minority()}"

