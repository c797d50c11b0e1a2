"""The report files one summary document becomes: summary.json, then each renderer's file.

A run (``controller.ContractRun``) and ``merge-reports`` both write through :func:`write_reports`,
so a new report format is a renderer (a pure function of summary.json's dict, like
``html.render``) and one entry of :data:`RENDERERS`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ..paths import atomic_write_text
from . import html
from .summary import write_summary

#: (file name in the report folder, renderer of the summary document), in the order they are written.
RENDERERS: tuple[tuple[str, Callable[[dict[str, Any]], str]], ...] = (("report.html", html.render),)


def write_reports(summary: dict[str, Any], report_dir: Path) -> list[Path]:
    """summary.json first, then every renderer's file; each written atomically (OSError passes up)."""
    written = [write_summary(summary, report_dir)]
    for name, render in RENDERERS:
        written.append(atomic_write_text(report_dir / name, render(summary)))
    return written
