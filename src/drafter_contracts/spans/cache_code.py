"""The code a cached template profile is keyed by: every module of ``spans/``, found on disk.

A derived or verified profile is stored across runs, so the key must change whenever code that shapes
it does. A hand-written list of modules drifts as modules are added or split, and an edit to a module
left off it serves stale profiles; so the key takes the whole folder: an edit anywhere in ``spans/``
costs one recomputation, never a stale answer.
"""

from __future__ import annotations

from pathlib import Path

#: The ``.py`` files of ``spans/``, sorted so the key does not depend on the file system's listing order.
SPANS_CODE: tuple[Path, ...] = tuple(sorted(Path(__file__).parent.glob("*.py")))
