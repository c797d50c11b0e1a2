"""What many tests do: run the contract suite (a real process or in-process) and read its summary.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

#: Contracts whose input is a file beside the data: a plain dataset skips them, each with its reason.
NEEDS_A_FILE = frozenset({"token_freq", "vocab_mapping_consistent", "vocab_mapping_matches_data", "draft_vocab_coverage"})


def read_summary(report_dir: Path) -> dict[str, Any] | None:
    """``report_dir/summary.json`` parsed, or None when the run wrote none."""
    path = Path(report_dir) / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else None


def run_pytest(cwd: Path, *args: str, report_dir: Path | str = "reports",
               timeout: int = 600) -> tuple[subprocess.CompletedProcess, dict[str, Any] | None]:
    """A real ``python -m pytest`` process in ``cwd`` (reports under ``report_dir``, relative to ``cwd``):
    the process and its summary.json (None if it wrote none)."""
    cwd = Path(cwd)
    cwd.mkdir(parents=True, exist_ok=True)
    report = cwd / report_dir
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--report-dir={report}", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=timeout, env=os.environ.copy())
    return proc, read_summary(report)


def run_inprocess(pytester: Any, *args: str) -> tuple[Any, dict[str, Any] | None]:
    """``pytester.runpytest_inprocess`` with the reports in ``reports/``: the result and its summary.json."""
    result = pytester.runpytest_inprocess(*args, "--report-dir=reports", "-p", "no:cacheprovider")
    return result, read_summary(pytester.path / "reports")


def section_lines(out: str | list[str]) -> list[str]:
    """The lines of the terminal's drafter-contracts section (after its ``=== drafter-contracts ===`` rule, up to
    the next rule or the end); [] when the run printed none."""
    lines = out.splitlines() if isinstance(out, str) else list(out)
    start = next((i for i, line in enumerate(lines) if line.startswith("=") and " drafter-contracts " in line), None)
    if start is None:
        return []
    rest = lines[start + 1:]
    end = next((i for i, line in enumerate(rest) if line.startswith("=====")), len(rest))
    return rest[:end]
