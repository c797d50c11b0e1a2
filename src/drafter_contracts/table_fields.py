"""A table of a contract file read key by key: the one loop the core's tables and every family's table share.

Each table declares its keys with the types a value may have (``{"min_len": (int,), ...}``, in the order
the error lists them); :func:`read_table` checks that the table is one, that every key is declared (an
unknown one is a one-line :class:`~drafter_contracts.errors.UsageProblem` with a suggestion) and that
every value has a declared type (a bool is no int or float unless bool is declared), and returns the
values as written. What a value means (bounds, choices, paths) is the table owner's to check.
Standard library only: the families parse their tables while options are checked, before any heavy import.
"""

from __future__ import annotations

import difflib
from typing import Any, Callable, Iterable, Mapping

from .errors import UsageProblem


def did_you_mean(word: str, choices: "Iterable[str]") -> str:
    """`` (did you mean 'x'?)`` for the closest choice, or nothing: a typo should cost one glance, not a manual."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def read_table(body: Any, table: str, fields: Mapping[str, tuple[type, ...]], where: str, *,
               hint: Callable[[str], str] | None = None, kind: type = dict) -> dict[str, Any]:
    """``[table]``'s values by key, each checked against ``fields`` (key -> accepted types).

    ``hint(key)``: what the error about an unknown key adds (default: the closest declared key);
    ``kind``: what counts as a table (a TOML table is a dict).
    """
    if not isinstance(body, kind):
        raise UsageProblem(f"{where}: '{table}' must be a table ([{table}]), got {type(body).__name__}")
    values: dict[str, Any] = {}
    for key, value in body.items():
        if key not in fields:
            said = hint(key) if hint is not None else did_you_mean(key, fields)
            raise UsageProblem(f"{where}: unknown key '{key}' in [{table}]{said}; allowed: {', '.join(fields)}")
        types = fields[key]
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            want = " or ".join(t.__name__ for t in types)
            raise UsageProblem(f"{where}: [{table}] {key} must be {want}, got {type(value).__name__} {value!r}")
        values[key] = value
    return values
