"""Controller side of the whole-dataset content contract: exact duplicate rows across all shards.

Each ``test_duplicate_rows[shard]`` sends its rows' 64-bit hashes (16 bytes a row) as
a report payload; this plugin takes the payloads off every report before JUnit or
anything else sees them, and at session end compares all hashes at once. The verdict
joins the summary like any contract's (report-only unless ``[content] strict``).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

from .checks.content import exact_groups, repeated_hash_groups
from .results import CheckResult, Violation
from .wire import unpack

HASHES_KEY = "drafter_contracts.row_hashes"
MAX_PAIRS = 20


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

    def duplicates(self, num_shards: int, strict: bool, row_keys: Callable[[np.ndarray], list[bytes]]) -> CheckResult:
        """The global duplicate verdict; skipped when not every shard sent its hashes.

        ``row_keys(rows)``: the exact contents of the given global rows, read from the
        dataset for the few rows whose hash repeats.
        """
        if len(self.hashes) != num_shards:
            return CheckResult("duplicate_rows", "dataset", skipped=(
                f"row hashes arrived from {len(self.hashes)} of {num_shards} shards (tests deselected or skipped): "
                "duplicates are only counted over the whole dataset"))
        rows = np.concatenate([np.frombuffer(r, dtype=np.int64) for r, _ in self.hashes.values()] or [np.zeros(0, np.int64)])
        hashes = np.concatenate([np.frombuffer(h, dtype=np.uint64) for _, h in self.hashes.values()]
                                or [np.zeros(0, np.uint64)])
        extra, groups, pairs = exact_groups(repeated_hash_groups(rows, hashes), row_keys)
        examples = [Violation(dup, -1, f"same ids and mask as row {first}") for first, dup in pairs[:MAX_PAIRS]]
        by_reason = {"exact duplicate of an earlier row": extra} if extra else {}
        rate = extra / len(rows) if len(rows) else 0.0
        message = ""
        if extra and strict:
            message = (f"{extra:,} of {len(rows):,} rows ({rate:.3%}) repeat an earlier row exactly ({groups:,} distinct rows "
                       "repeated); e.g. " + ", ".join(f"row {d} = row {f}" for f, d in pairs[:5]))
        return CheckResult("duplicate_rows", "dataset", rows_checked=int(len(rows)), rows_violating=extra,
                           by_reason=by_reason, examples=examples, message=message, report_only=not strict)


def hashes_payload(shard_index: int, rows: np.ndarray, hashes: np.ndarray) -> dict[str, Any]:
    return {"shard": shard_index, "rows": rows.astype(np.int64).tobytes(), "hashes": hashes.astype(np.uint64).tobytes()}


def replace_in_recorder(recorder: Any, result: CheckResult) -> None:
    """Put a controller-side verdict in the recorder in place of the per-shard carriers' records."""
    failed = bool(result.message) and not result.report_only
    carried_seconds = recorder.checks.get(result.check, {}).get("seconds", 0.0)  # the carriers' hashing time
    recorder.checks[result.check] = {
        "tests": 1, "passed": int(result.skipped is None and not failed), "failed": int(failed),
        "skipped": int(result.skipped is not None), "rows_checked": result.rows_checked,
        "rows_violating": result.rows_violating, "by_reason": dict(result.by_reason),
        "examples": [e.__dict__ for e in result.examples], "messages": [result.message] if result.message else [],
        "skip_reasons": [result.skipped] if result.skipped else [], "report_only": result.report_only,
        "global": True, "seconds": carried_seconds,
    }


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
