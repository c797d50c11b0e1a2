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


def parse_split(text: str) -> tuple[int, int]:
    """``--split K/N`` -> (K, N) with 1 <= K <= N; anything else is a usage error, naming the option that picks
    a DatasetDict split (the likelier intent of ``--split train``)."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise UsageProblem(f"--split {text}: expected K/N with 1 <= K <= N (run K of N machines, e.g. --split 2/3); "
                           "to pick a DatasetDict split use --dataset-split NAME")
    return int(m.group(1)), int(m.group(2))
