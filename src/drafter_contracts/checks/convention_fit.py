"""Which built-in producer convention a dataset's rows fit: ``[mask] convention = "auto"`` and the
hint a failing mask rule gives.

Each candidate convention's policy (``conventions.resolve``) runs the two mask rules of
``checks/spans.py`` on the rows; the one that rejects none is the producer's. A checks-layer
module: the conventions themselves are policy, finding the one the data follows runs checks.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..config import Contract, MaskPolicy
from ..conventions import AUTO_ORDER, DESCRIPTION, Decision, resolve
from ..dataset import Shard, ShardArrays
from ..errors import UsageProblem
from .spans import check_mask_covers_assistant_spans, check_mask_on_assistant_spans


def decide(contract: Contract, oracle: Any, vocab: Any, explicit: frozenset[str] = frozenset(),
           sample: Any = None) -> Decision:
    """The contract's mask policy: its named convention's, or (``auto``) the one ``sample`` fits.

    ``sample`` (a callable returning (view, labels, facts) of the first rows) is what ``auto``
    infers from; without it ``auto`` is a usage error.
    """
    if contract.mask.convention == "auto" and sample is not None:
        return infer(contract, oracle, vocab, explicit, sample)
    return resolve(contract, oracle, vocab, explicit)


def _violations(view: Any, labels: Any, facts: Any, contract: Contract, policy: MaskPolicy) -> int:
    """Rows of the sample the policy's two mask rules reject (each rule's count, summed)."""
    c = dataclasses.replace(contract, mask=policy)
    arrays = ShardArrays(Shard(0, 0, len(view.rows)), None, None, None, None)
    total = 0
    for fn in (check_mask_on_assistant_spans, check_mask_covers_assistant_spans):
        r = fn(view, arrays, labels, c, facts)
        if not r.skipped:
            total += r.rows_violating
    return total


def candidates(contract: Contract, oracle: Any, vocab: Any, explicit: frozenset[str]) -> dict[str, Decision]:
    out = {}
    for name in AUTO_ORDER:
        c = dataclasses.replace(contract, mask=dataclasses.replace(contract.mask, convention=name))
        try:
            out[name] = resolve(c, oracle, vocab, explicit)
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
    """The built-in convention the first rows fit (their mask rules reject none of them)."""
    view, labels, facts = sample()
    rows = len(view.rows)
    if rows == 0 or view.mask is None:
        d = resolve(dataclasses.replace(contract,
                                        mask=dataclasses.replace(contract.mask, convention="speculators-regex")),
                    oracle, vocab, explicit)
        return Decision(d.policy, "convention = auto, but the first rows hold no mask to infer from; "
                        "speculators-regex applies", {"inferred": "speculators-regex", "rows": rows})
    decisions = candidates(contract, oracle, vocab, explicit)
    scored = []
    for name, decision in decisions.items():
        scored.append((_violations(view, labels, facts, contract, decision.policy), AUTO_ORDER.index(name), name))
    scored.sort()
    n, _, best = scored[0]
    table = ", ".join(f"{name} {k:,}" for k, _, name in scored)
    if n == 0:
        fits = [name for k, _, name in scored if k == 0]
        how = (f"convention = auto: {best} ({DESCRIPTION[best]}) fits the first {rows:,} rows"
               + (f" (so do {', '.join(fits[1:])}; {best} comes first)" if len(fits) > 1 else "")
               + f"; rows each convention rejects: {table}")
    else:
        how = (f"convention = auto: no built-in convention fits the first {rows:,} rows; the closest is {best} "
               f"({n:,} rows rejected); rows each convention rejects: {table}")
    d = decisions[best]
    return Decision(d.policy, how + ("; " + d.how if d.details else ""),
                    {"inferred": best, "rows": rows, "rejected": {name: k for k, _, name in scored}})
