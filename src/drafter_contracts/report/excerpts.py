"""Violating rows as structured segments, for summary.json and report.html.

The segments come from :mod:`drafter_contracts.explain`, the same records the terminal
draws, so a row looks the same in both places: ``{"text", "role", "supervised",
"offending", "start", "end"}`` runs of tokens (a segment whose start is not the previous
one's end begins a later window), and the row's offending runs as ``[start, end]`` pairs.
"""

from __future__ import annotations

from typing import Any

from ..decoded_rows import DEFAULT_EXAMPLES
from ..explain import explain_row

#: Decoded examples kept per contract when ``--examples`` says nothing (a run keeps ``Engine.examples``).
MAX_DECODED = DEFAULT_EXAMPLES


def decoded_example(engine: Any, row: int, position: int, name: str, reason: str = "") -> dict[str, Any]:
    """Read one row (a one-row shard read), label it, and cut its excerpt."""
    ex = explain_row(name, row, position, reason, engine)
    segs = ex.window.segments
    start, stop = (segs[0].start, segs[-1].end) if segs else (0, 0)
    return {"start": start, "stop": stop, "length": ex.length, "segments": [s.to_dict() for s in segs],
            "offending_spans": [list(span) for span in ex.window.spans],
            "offending_span_count": ex.window.span_count}
