"""A reason several contracts give, listed once with their names.

One defect can break more than one contract the same way: a mask shifted one token breaks both
mask rules, and both name it with the same words. Listed under each contract, it reads as two
findings; the reports list it once, under the first contract that gives it, naming every contract
that does, and the others point there. Read from summary.json's contract records alone.
"""

from __future__ import annotations

from typing import Any

from ..results import ordered_reasons

#: The verdicts whose reasons the reports list.
LISTED = ("fail", "warn")


def shared(checks: dict[str, Any]) -> dict[str, list[str]]:
    """Reason -> the contracts (in report order) that give it, for each reason more than one contract gives."""
    givers: dict[str, list[str]] = {}
    for name, c in checks.items():
        if c.get("verdict") in LISTED:
            for reason in c.get("by_reason") or {}:
                givers.setdefault(reason, []).append(name)
    return {r: names for r, names in givers.items() if len(names) > 1}


def named(names: list[str]) -> str:
    """``a and b`` / ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def reason_items(name: str, c: dict[str, Any], checks: dict[str, Any],
                 together: dict[str, list[str]] | None = None) -> list[str]:
    """``N × reason`` for each of a contract's reasons, most severe first: a reason other contracts give too
    is named once, under its first contract, with theirs (and their rows where the counts differ); under the
    others it points there."""
    together = shared(checks) if together is None else together
    out = []
    for reason, n in ordered_reasons(c["by_reason"], c.get("severity")):
        names = together.get(reason)
        if not names:
            out.append(f"{n:,} × {reason}")
        elif names[0] != name:
            out.append(f"{n:,} × the reason listed under {names[0]}")
        else:
            counts = [checks[g]["by_reason"][reason] for g in names]
            who = named(names) + ("" if len(set(counts)) == 1 else f"; {named([f'{k:,}' for k in counts])} rows")
            out.append(f"{n:,} × {reason} ({who})")
    return out
