"""The report files one summary document becomes: summary.json, each renderer's file, violations.parquet.

A run (``run.controller.ContractRun``) and ``merge-reports`` both write through :func:`write_reports`,
so a new report format is a renderer (a pure function of summary.json's dict, like
``html.render``) and one entry of :data:`RENDERERS`. violations.parquet is no renderer: its rows
are not in summary.json (``violations.py``), so the caller hands its table over.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pyarrow as pa

from ..paths import atomic_write_text
from . import html
from .summary import write_summary
from .violations import write_table

#: (file name in the report folder, renderer of the summary document), in the order they are written.
RENDERERS: tuple[tuple[str, Callable[[dict[str, Any]], str]], ...] = (("report.html", html.render),)


def write_reports(summary: dict[str, Any], report_dir: Path, violations: pa.Table) -> list[Path]:
    """summary.json first, then every renderer's file, then violations.parquet (``violations``: its
    table, empty when no row violates); each written atomically (OSError passes up)."""
    written = [write_summary(summary, report_dir)]
    for name, render in RENDERERS:
        written.append(atomic_write_text(report_dir / name, render(summary)))
    written.append(write_table(violations, report_dir))
    return written
