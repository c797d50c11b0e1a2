"""The longest common prefix of two renderings, as text or as token ids: where a template's output diverges.

Deriving a profile, reading the truth oracle's spans and cutting a generation prompt off a rendering all
ask the same question of two sequences; it lives here, below every module of ``spans/``, so each imports
it without importing another.
"""

from __future__ import annotations

from typing import Sequence


def common_prefix_length(a: Sequence, b: Sequence) -> int:
    """Length of the longest common prefix of two strs, tuples or lists (binary search over slice
    comparisons, done in C: no Python step per item)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo
