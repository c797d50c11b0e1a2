"""Terminal excerpts of the report-only (content) contracts' warnings."""

from __future__ import annotations

from typing import Any


def warn_excerpts(summary: dict[str, Any], engine: Any, limit: int = 1) -> list[str]:
    """Terminal lines: the first example row of each warning, decoded with roles and supervised tokens marked.

    Warnings do not fail a test, so nothing else shows the rows; one excerpt each keeps the log short.
    """
    from .explain import LEGEND, excerpt

    lines: list[str] = []
    for name, c in summary["checks"].items():
        if c["verdict"] != "warn" or not c["examples"]:
            continue
        for e in c["examples"][:limit]:
            try:
                ids, mask, _ = engine.row(int(e["row"]))
                roles = None
                if engine.oracle is not None and len(ids):
                    roles = engine.oracle.label_row(ids, engine.contract.max_len).role
                text = excerpt(ids, mask, roles, int(e["position"]), engine.vocab)
            except Exception as exc:  # an explanation must never break the run's summary
                text = f"(cannot decode: {exc})"
            lines.append(f"  WARN {name}: row {e['row']}: {e['reason']}")
            lines.append(f"    {text}")
    if lines:
        lines.append("  " + LEGEND)
    return lines
