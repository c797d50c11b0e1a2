"""Which producer convention a dataset's rows follow: ``[mask] convention = "auto"`` and the hint a
failing mask rule gives.

Each built-in convention's policy (``presets.resolve``) runs the two mask rules (``mask_rules.py``)
on the rows, and the policy the rows themselves follow is learnt from them (``learn.py``). A built-in
convention the rows fit, or one the learnt policy equals, is named; otherwise the learnt policy is
used, key by key, with the rows it rejects named as the defective minority.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..errors import UsageProblem
from .file import Contract
from .learn import describe, learn, rejected_rows
from .mask_policy import MaskPolicy
from .mask_shift import DIRECTION, LATE, mask_shift_of
from .presets import AUTO_ORDER, DESCRIPTION, Decision, keys_text, resolve


def decide(contract: Contract, oracle: Any, vocab: Any, explicit: frozenset[str] = frozenset(),
           sample: Any = None) -> Decision:
    """The contract's mask policy: its named convention's, or (``auto``) the one ``sample`` fits.

    ``sample`` (a callable returning (view, labels, facts) of the first rows) is what ``auto``
    infers from; without it ``auto`` is a usage error.
    """
    if contract.mask.convention == "auto" and sample is not None:
        return infer(contract, oracle, vocab, explicit, sample)
    return resolve(contract.mask, oracle, explicit)


def _violations(view: Any, labels: Any, facts: Any, contract: Contract, policy: MaskPolicy) -> int:
    """Rows of the sample the policy's two mask rules reject (a row either rule rejects, counted once)."""
    return len(rejected_rows(view, labels, facts, contract, policy))


def candidates(contract: Contract, oracle: Any, vocab: Any, explicit: frozenset[str]) -> dict[str, Decision]:
    out = {}
    for name in AUTO_ORDER:
        try:
            out[name] = resolve(dataclasses.replace(contract.mask, convention=name), oracle, explicit)
        except UsageProblem:
            continue
    return out


def fitting(view: Any, labels: Any, facts: Any, contract: Contract, oracle: Any, vocab: Any,
            explicit: frozenset[str] = frozenset()) -> list[tuple[str, int]]:
    """(convention, violating rows) of every built-in convention on these rows, fewest first."""
    scored = []
    for name, decision in candidates(contract, oracle, vocab, explicit).items():
        scored.append((name, _violations(view, labels, facts, contract, decision.policy)))
    return sorted(scored, key=lambda t: (t[1], AUTO_ORDER.index(t[0])))


def infer(contract: Contract, oracle: Any, vocab: Any, explicit: frozenset[str], sample: Any) -> Decision:
    """The producer's convention, learnt from the first rows (``learn.py``).

    A built-in convention the rows fit (its mask rules reject none of them) is theirs: a known
    producer's convention says more than a sample can (what it does with parts the sample lacks). So is
    the closest one when it rejects a minority of the rows: they are the defective ones. When it rejects
    most of them, the rows follow another convention: the learnt policy, when it explains more rows (the
    rows it rejects are the defective minority), else still the closest. A learnt policy equal to a
    built-in convention is that convention (they reject the same rows).
    """
    view, labels, facts = sample()
    rows = len(view.rows)
    if rows == 0 or view.mask is None:
        d = resolve(dataclasses.replace(contract.mask, convention="speculators-regex"), oracle, explicit)
        return Decision(d.policy, "convention = auto, but the first rows hold no mask to infer from; "
                        "speculators-regex applies", {"inferred": "speculators-regex", "rows": rows})
    decisions = candidates(contract, oracle, vocab, explicit)
    scored = sorted((_violations(view, labels, facts, contract, d.policy), AUTO_ORDER.index(name), name)
                    for name, d in decisions.items())
    learnt = learn(view, labels, facts, contract, {name: d.policy for name, d in decisions.items()}, explicit)
    table = ", ".join(f"{name} {k:,}" for k, _, name in scored)
    details = {"rows": rows, "rejected": {name: k for k, _, name in scored}, "learnt": learnt.to_dict()}
    n, _, best = scored[0]
    if 2 * n > rows:
        moved = _shifted_fit(view, labels, facts, contract, decisions, scored)
        if moved is not None:
            return moved
    if 2 * n > rows and explains_more(learnt, n):  # most rows follow another convention: the learnt one
        how = f"convention = auto: {describe(learnt)}; rows each built-in convention rejects: {table}"
        return Decision(learnt.policy, how, {**details, "inferred": "learnt"})
    return _preset_decision(decisions[best], best, n, scored, rows, learnt, details)


def _shifted_fit(view: Any, labels: Any, facts: Any, contract: Contract, decisions: dict[str, Decision],
                 scored: list[tuple[int, int, str]]) -> Decision | None:
    """The built-in convention most of the rows fit with their mask moved one token, if one does.

    Such rows are not another convention: their producer is off by one. Held to that convention, the mask
    contracts fail them and name the shift; learning a policy from them would fit the error instead.
    """
    rows = len(view.rows)
    for _, _, name in scored:
        shift = mask_shift_of(view, labels, dataclasses.replace(contract, mask=decisions[name].policy), facts)
        direction = shift.direction()
        if direction is None or 2 * shift.count <= rows:
            continue
        words = f"shifted one token {DIRECTION[direction]}"
        how = (f"convention = auto: the first {rows:,} rows fit no convention as they stand, but {shift.count:,} of "
               f"them fit {name} with their loss_mask moved one token "
               f"{'earlier' if direction == LATE else 'later'}: the mask is {words}; they are held to {name}")
        rejected = {k_name: k for k, _, k_name in scored}
        return Decision(decisions[name].policy, how,
                        {"inferred": name, "rows": rows, "rejected": rejected, "shifted": words,
                         "shifted_rows": shift.count})
    return None


def explains_more(learnt: Any, rejected: int) -> bool:
    """Whether the learnt policy is a convention that explains the rows better than a built-in one that rejects
    ``rejected`` of them: it trains the reply text (a policy that never does describes a broken producer, not
    a convention), it rejects a minority of the rows, and fewer than the built-in one."""
    return (learnt is not None and learnt.policy.content and 2 * len(learnt.rejected) < learnt.rows
            and len(learnt.rejected) < rejected)


def _preset_decision(d: Decision, best: str, n: int, scored: list[tuple[int, int, str]], rows: int, learnt: Any,
                     details: dict[str, Any]) -> Decision:
    """A built-in convention as the decision, with how the rows fit it and what was learnt from them."""
    table = ", ".join(f"{name} {k:,}" for k, _, name in scored)
    if n == 0:
        fits = [name for k, _, name in scored if k == 0]
        how = (f"convention = auto: {best} ({DESCRIPTION[best]}) fits the first {rows:,} rows"
               + (f" (so do {', '.join(f for f in fits if f != best)}; {best} comes first)" if len(fits) > 1 else "")
               + f"; rows each convention rejects: {table}")
    else:
        how = (f"convention = auto: the first {rows:,} rows follow no policy without exceptions; the closest is "
               f"{best} ({n:,} rows rejected); rows each convention rejects: {table}")
    how += "; " + (f"learnt from the rows: {keys_text(learnt.policy)} (equal to {learnt.equals})" if learnt.equals
                   else describe(learnt))
    return Decision(d.policy, how + ("; " + d.how if d.details else ""), {**details, "inferred": best})


def chosen(details: dict[str, Any]) -> dict[str, Any]:
    """What the reports' first line says of an inferred convention (``Decision.details`` of :func:`infer`, in
    short): which one (a built-in name, or "learnt"), from how many rows, how many of them it rejects (absent: the
    rows hold no mask), and for a learnt policy the nearest preset and the keys it differs in."""
    if "inferred" not in details:
        return {}
    out: dict[str, Any] = {"inferred": details["inferred"], "rows": details.get("rows", 0)}
    learnt = details.get("learnt") or {}
    if details["inferred"] == "learnt":
        out.update(rejected=learnt.get("rejected", 0), nearest=learnt.get("nearest_preset", ""),
                   differs=list(learnt.get("differs_in", [])))
    elif "rejected" in details:
        out["rejected"] = details["rejected"].get(details["inferred"], 0)
    if "shifted" in details:
        out.update(shifted=details["shifted"], shifted_rows=details["shifted_rows"])
    return out


def learnt_for(contract: Contract, oracle: Any, vocab: Any, sample: Any,
               explicit: frozenset[str] = frozenset()) -> Any:
    """What ``convention = auto`` learns from ``sample`` (a callable returning the first rows' view, labels and
    facts), or None when they hold no mask: ``init`` writes it into the contract's [mask] table."""
    view, labels, facts = sample()
    if labels is None or view.mask is None or not len(view.rows):
        return None
    decisions = candidates(contract, oracle, vocab, explicit)
    return learn(view, labels, facts, contract, {name: d.policy for name, d in decisions.items()}, explicit)
