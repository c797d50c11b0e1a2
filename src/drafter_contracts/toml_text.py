"""TOML text for the contract files ``drafter-contracts init`` writes: a literal, and a key with its comment.

Every section init writes (the core's and each contract family's ``init_section``) comments every key
the same way, so a reader of the file sees one style.
"""

from __future__ import annotations

import json
from typing import Any


def literal(value: Any) -> str:
    """A TOML literal for a str, bool, int, float or list of those (JSON's string escapes are TOML's)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def key_line(name: str, value: Any, comment: str) -> str:
    """``name = value`` with its comment aligned at column 41 (no comment: the bare assignment)."""
    line = f"{name} = {literal(value)}"
    return f"{line:<40} # {comment}" if comment else line
