"""report.html opened in a real headless Chromium (Debian's ``chromium``): no console messages, verdicts and plots shown.

``--dump-dom`` gives the DOM after scripts ran; ``--enable-logging=stderr`` prints
every console message and uncaught error as a ``CONSOLE`` line. A screenshot is kept
in the git-ignored ``reports/screenshots/`` for a person to look at.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from drafter_testkit.mutants import MUTANTS

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; .ci/run does)")
SCREENSHOTS = Path(__file__).resolve().parents[1] / "reports" / "screenshots"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


def chromium(page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *extra,
                           page.resolve().as_uri()], capture_output=True, text=True, timeout=120)


def console_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]


@pytest.fixture(scope="module")
def report_page(tmp_path_factory, clean_dataset, tokenizer_dir) -> Path:
    """report.html of a real run on a mutant with one supervised user token."""
    root = tmp_path_factory.mktemp("chromium")
    MUTANTS["mask_user_text"](clean_dataset, root / "data", 0)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--report-dir={root / 'reports'}",
                           f"--dataset-path={root / 'data'}", "--contract=qwen3.6-dflash", f"--tokenizer={tokenizer_dir}", "--expected-count=2000",
                           "--shard-size=400", "-n", "0"], cwd=root, capture_output=True, text=True, timeout=600,
                          env=os.environ.copy())
    assert proc.returncode == 1, proc.stdout[-3000:]
    return root / "reports" / "report.html"


def test_page_renders_verdicts_and_plots(report_page, tmp_path):
    proc = chromium(report_page, tmp_path / "profile", "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console_lines(proc) == []
    dom = proc.stdout
    assert re.search(r'<html[^>]*data-rendered="yes"', dom)  # the page's script ran to its end
    rows = re.findall(r'<tr data-verdict="(\w+)"><td><span[^>]*>(\w+)</span></td><td><code>(\w+)</code>', dom)
    summary = json.loads((report_page.parent / "summary.json").read_text())
    expected = {name: c["verdict"] for name, c in summary["checks"].items()}
    assert {name: v for v, _, name in rows} == expected and expected["mask_on_assistant_spans"] == "fail"
    assert len(rows) == len(expected)
    for plot in ("plot-seq-len", "plot-supervised-share", "plot-roles"):
        svg = re.search(rf'<svg[^>]*id="{plot}".*?</svg>', dom, re.S)
        assert svg and svg.group(0).count('class="bar"') >= 3, plot
    assert 'class="seg sup off"' in dom


def test_console_errors_are_caught(report_page, tmp_path):
    """The check above can fail: the same page with a broken script logs a CONSOLE line."""
    broken = tmp_path / "broken.html"
    broken.write_text(report_page.read_text().replace("</body>", "<script>undefinedFunction();</script></body>"))
    proc = chromium(broken, tmp_path / "profile", "--dump-dom")
    assert any("undefinedFunction is not defined" in line for line in console_lines(proc))


def test_screenshot(report_page, tmp_path):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / "report.png"
    shot.unlink(missing_ok=True)
    proc = chromium(report_page, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,2600",
                    "--hide-scrollbars")
    assert proc.returncode == 0 and console_lines(proc) == []
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
