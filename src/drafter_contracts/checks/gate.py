"""What a gate requires: the contracts a run must check, and the ones the user turned off by name.

A run is green only when it checked what the gate exists for. Every contract that reads the
tokens through the tokenizer (the mask contracts, the turn structure, the known ids, the drift
sample) is required by default; a contract file adds more with ``[contracts] required``. A required
contract that cannot run here (no tokenizer, a family's input missing) stops the run before any
work (exit 4) with one line saying what cannot be checked and how to fix it. Turning one off is
something the user asks for by name (``--skip-contract NAME``, ``[contracts] skip``); the run then
reports it as not checked, and the verdict line names it in words.

Names may be contract names or a group: ``tokenizer`` (every contract that reads tokens through
the tokenizer) and ``mask`` (the two mask contracts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from ..errors import UsageProblem
from ..table_fields import did_you_mean
from .declare import TOKENIZER
from .registry import spec, specs

if TYPE_CHECKING:
    from ..contract import Contract

#: The mask contracts: what the gate exists for.
MASK_CONTRACTS = ("mask_on_assistant_spans", "mask_covers_assistant_spans")


def groups() -> dict[str, tuple[str, ...]]:
    """Group names a user may write instead of contract names."""
    reads_tokens = tuple(n for n, s in specs().items() if TOKENIZER in s.needs)
    return {"tokenizer": reads_tokens, "mask": MASK_CONTRACTS}


def expand(names: Iterable[str], where: str) -> tuple[str, ...]:
    """Contract names (groups expanded, order kept); an unknown name is a usage error with a suggestion."""
    known, grouped = specs(), groups()
    out: list[str] = []
    for name in names:
        if name in grouped:
            out.extend(grouped[name])
        elif name in known:
            out.append(name)
        else:
            choices = [*grouped, *known]
            raise UsageProblem(f"{where}: no contract named {name!r}{did_you_mean(name, choices)}; "
                               f"contracts: {', '.join(known)}; groups: {', '.join(grouped)}")
    return tuple(dict.fromkeys(out))


def by_default() -> tuple[str, ...]:
    """Required in every run: the contracts that read tokens through the tokenizer, content warnings aside."""
    return tuple(n for n, s in specs().items()
                 if TOKENIZER in s.needs and not s.content and not s.on_request)


def turned_off(contract: "Contract") -> dict[str, str]:
    """Contract name -> how it was turned off: by name, or by a key of the contract file that turns it off."""
    out = {name: "turned off by name (--skip-contract / [contracts] skip)"
           for name in expand(contract.skip, "--skip-contract / [contracts] skip")}
    for name, s in specs().items():
        reason = s.turned_off(contract) if s.turned_off is not None and name not in out else None
        if reason:
            out[name] = f"turned off by the contract ({reason})"
    return out


def required(contract: "Contract") -> tuple[str, ...]:
    """The contracts this run must check: the default gate and ``[contracts] required``, less those turned off."""
    off = turned_off(contract)
    wanted = (*by_default(), *expand(contract.required, "[contracts] required"))
    return tuple(n for n in dict.fromkeys(wanted) if n not in off and spec(n) is not None)


def blocked_message(blocked: dict[str, str]) -> str:
    """One line for the required contracts that cannot run here, grouped by why."""
    by_reason: dict[str, list[str]] = {}
    for name, reason in blocked.items():
        by_reason.setdefault(reason, []).append(name)
    parts = [f"{', '.join(names)} cannot be checked ({reason})" for reason, names in by_reason.items()]
    every = list(blocked)
    group = next((g for g, members in groups().items() if set(every) <= set(members) and len(every) > 1), None)
    off = group or ",".join(every)
    return (f"{'; '.join(parts)}; a gate that cannot check them is never green: give what they need, or turn "
            f"them off by name with --skip-contract {off}")
