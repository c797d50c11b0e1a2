"""Command-line values parsed by hand: pytest declares these options as strings, so a malformed
one is one ``UsageProblem`` line (exit 4), never argparse's usage block."""

from __future__ import annotations

import re

from .errors import UsageProblem


def parse_int(raw: str | None, option: str, lowest: int = 0, example: int = 4096) -> int | None:
    """An integer option's value; ``4k`` and friends are one clear line, not argparse's usage block."""
    if raw is None:
        return None
    text = str(raw).strip().replace("_", "").replace(",", "")
    if not re.fullmatch(r"[+-]?\d+", text):
        raise UsageProblem(f"{option} {raw}: not a whole number; write it in digits, e.g. {option}={example}")
    value = int(text)
    if value < lowest:
        raise UsageProblem(f"{option} {raw}: must be >= {lowest}")
    return value
