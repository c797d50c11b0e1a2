"""Controller side of the whole-dataset content contract: exact duplicate rows across all shards.

Each ``test_duplicate_rows[shard]`` sends its rows' 64-bit hashes (16 bytes a row) as
a report payload; this plugin takes the payloads off every report before JUnit or
anything else sees them, and at session end compares all hashes at once. The verdict
joins the summary like any contract's (report-only unless ``[content] strict``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from .wire import unpack

HASHES_KEY = "drafter_contracts.row_hashes"


class PayloadCollector:
    """Takes bulky per-shard payloads off test reports (controller, or the single -n 0 process)."""

    def __init__(self) -> None:
        self.hashes: dict[int, tuple[bytes, bytes]] = {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        unpack(report)
        kept = []
        for key, value in report.user_properties:
            if key == HASHES_KEY:
                if report.when == "call" and value is not None:
                    self.hashes[int(value["shard"])] = (value["rows"], value["hashes"])
            else:
                kept.append((key, value))
        report.user_properties = kept

    def partials(self, name: str) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Every shard's (global rows, hashes) for a whole-dataset contract (duplicate_rows)."""
        if name != "duplicate_rows":
            return {}
        return {k: (np.frombuffer(r, dtype=np.int64), np.frombuffer(h, dtype=np.uint64)) for k, (r, h) in self.hashes.items()}


def hashes_payload(shard_index: int, rows: np.ndarray, hashes: np.ndarray) -> dict[str, Any]:
    return {"shard": shard_index, "rows": rows.astype(np.int64).tobytes(), "hashes": hashes.astype(np.uint64).tobytes()}


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
