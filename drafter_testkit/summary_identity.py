"""summary.json of every fixture dataset, normalised, so two versions of the code can be compared verdict for verdict.

A refactor that must not change a single verdict is shown not to by running this on the code before
and after it (``PYTHONPATH`` picks the code; the fixtures come from this test kit either way) and
comparing the two folders::

    PYTHONPATH=/tmp/before/src:. python -m drafter_testkit.summary_identity collect /tmp/sum-before
    python -m drafter_testkit.summary_identity collect /tmp/sum-after
    python -m drafter_testkit.summary_identity compare /tmp/sum-before /tmp/sum-after

The datasets: the demo fixture and every row, content, hidden-state and draft-vocabulary mutant,
and every dataset of the producer matrix (``real_producers.matrix()``). What differs between two runs
of the same code (timings, bytes read off the page cache, the report folder's path, the schema
version) is dropped, so any difference left is a difference the code made. Each record also holds the
report page's hash and the terminal summary, drawn from the normalised summary by the code under test,
so a change to the report code is compared too.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

#: Keys whose value differs between two runs of the same code: dropped wherever they appear.
VOLATILE = frozenset({"schema_version", "seconds", "duration", "duration_s", "elapsed", "elapsed_s", "started",
                      "finished", "created", "timestamp", "wall_s", "rows_per_second", "tokens_per_second",
                      "workers", "host", "hostname", "pid", "report_dir", "timings", "throughput",
                      "started_first", "ended_last"})


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]


def _demo_cases() -> Iterator[Case]:
    from .content_mutants import CONTENT_MUTANTS
    from .generate import fixture_dataset_dir
    from .mutants import MUTANTS
    from .tokenizer import qwen36_tokenizer_dir

    clean = fixture_dataset_dir(2000, 0)
    common = ("--contract=qwen3.6-dflash", f"--tokenizer={qwen36_tokenizer_dir()}", "--shard-size=400")
    yield Case("demo", (f"--dataset-path={clean}", *common, "--expected-count=2000"))
    root = _scratch() / "mutants"
    for name, make in {**MUTANTS, **CONTENT_MUTANTS}.items():
        folder, record = root / name, root / f"{name}.args.json"
        if not record.is_file():  # built once: the dataset's fingerprint (file times) is the same for both runs
            if folder.exists():
                shutil.rmtree(folder)
            record.write_text(json.dumps(list(make(clean, folder, 0).extra_args)))
        extra = tuple(json.loads(record.read_text()))
        count = () if any(a.startswith("--expected-count") for a in extra) else ("--expected-count=2000",)
        yield Case(f"mutant-{name}", (f"--dataset-path={folder}", *common, *count, *extra))


def _hidden_cases() -> Iterator[Case]:
    from . import hidden_mutants as M
    from . import hidden_states as H

    contracts = _scratch() / "hidden-contracts"
    contracts.mkdir(parents=True, exist_ok=True)
    for dtype in ("bfloat16", "float8_e4m3fn"):
        (contracts / f"{dtype}.toml").write_text(H.contract_text(H.model_dir() / "config.json", dtype))
    yield Case("hidden-clean", (f"--dataset-path={H.dataset_dir()}", f"--contract={contracts / 'bfloat16.toml'}",
                                f"--hidden-states={H.clean_folder()}"))
    yield Case("hidden-fp8", (f"--dataset-path={H.dataset_dir()}", f"--contract={contracts / 'float8_e4m3fn.toml'}",
                              f"--hidden-states={M.fp8_folder()}"))
    for name in sorted(M.MUTANTS):
        m = M.build_mutant(name)
        yield Case(f"hidden-{name}", (f"--dataset-path={m.dataset}", f"--contract={contracts / (m.dtype + '.toml')}",
                                      f"--hidden-states={m.folder}"))


def _vocab_cases() -> Iterator[Case]:
    from drafter_contracts.contract import builtin_contracts

    from . import vocab_mappings as vm
    from .tokenizer import qwen36_tokenizer_dir

    if vm.unavailable():
        return
    contract = _scratch() / "vocab-contract.toml"
    text = builtin_contracts()["speculators-per-turn"].read_text()
    contract.write_text(text.replace('path = "builtin:qwen3.6"\n', "") + f"\n[vocab]\ntarget_vocab_size = {vm.TARGET_VOCAB}\n")
    for name in vm.CASES:
        folder = vm.case_dir(name)
        extra = (f"--vocab-mapping={vm.specforge_file(folder)}",) if name.startswith("specforge") else ()
        yield Case(f"vocab-{name}", (f"--dataset-path={folder}", f"--contract={contract}",
                                     f"--tokenizer={qwen36_tokenizer_dir()}", *extra))


def _producer_cases() -> Iterator[Case]:
    from . import real_producers as rp

    jobs = rp.matrix()
    rp.ensure(jobs)
    for job in jobs:
        yield Case(f"producer-{job.key}".replace(":", "-").replace("@", "-").replace("/", "-"),
                   (f"--dataset-path={rp.dataset_path(job)}", f"--tokenizer={rp.template_tokenizer_dir(job.template)}"))


GROUPS = {"demo": _demo_cases, "hidden": _hidden_cases, "vocab": _vocab_cases, "producers": _producer_cases}


def _scratch() -> Path:
    path = Path(os.environ.get("SUMMARY_IDENTITY_SCRATCH", Path(tempfile.gettempdir()) / "summary-identity-scratch"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def normalised(doc: Any, report_dir: str, where: tuple[str, ...] = ()) -> Any:
    """``doc`` without :data:`VOLATILE` keys or :data:`FIXTURE_BUILD` fields, with the report folder's path
    written as ``REPORT``, the package's as ``PACKAGE`` and a cached fixture's key as ``KEY``."""
    if isinstance(doc, dict):
        return {k: normalised(v, report_dir, (*where, k)) for k, v in doc.items()
                if k not in VOLATILE and not k.endswith("_seconds") and not k.endswith("_s")
                and (*where, k) not in FIXTURE_BUILD}
    if isinstance(doc, list):
        return [normalised(v, report_dir, where) for v in doc]
    if isinstance(doc, str):
        text = _PACKAGE.sub("PACKAGE/", doc.replace(report_dir, "REPORT"))
        return _FIXTURE_KEY.sub(r"\1-KEY/", _LIBRARY.sub("PACKAGE/_kernels", text))
    return doc


#: Where the package under test is installed (the trees before and after a change differ only there).
_PACKAGE = re.compile(r"[^\s\"']*/drafter_contracts/")
#: The compiled library, wherever the package keeps it.
_LIBRARY = re.compile(r"PACKAGE/(?:[a-z_]+/)*_kernels")
#: A fixture cached under a key of the test kit's code: a test kit that changed builds it again, elsewhere.
_FIXTURE_KEY = re.compile(r"(/drafter-contracts/[^\s\"']*?)-[0-9a-f]{10}/")
#: What a dataset built again differs in, though its rows are the same: the fingerprint of file names, sizes
#: and times, the ``_fingerprint`` datasets draws at random, and the shard plan's identity that reads them.
FIXTURE_BUILD = frozenset({("summary", "dataset", "fingerprint"), ("summary", "dataset", "state_fingerprint"),
                           ("summary", "split", "plan")})


def _read(path: Path) -> Any:
    """A stored record, normalised again (a key made volatile after it was collected is dropped too)."""
    return normalised(json.loads(path.read_text()), "REPORT")


def rendered(summary: dict[str, Any]) -> dict[str, Any]:
    """The report page and the terminal summary drawn from the normalised summary, by the code under test.

    Drawn from the normalised document so run-to-run figures (timings) are already gone: a refactor
    of the report code shows up as a different page hash or a different terminal line. A summary the
    report code cannot draw stops the collection: that is a report bug, not a record.
    """
    from drafter_contracts.report.html import render
    from drafter_contracts.report.summary import terminal_lines

    return {"report_html_sha256": hashlib.sha256(render(summary).encode()).hexdigest(),
            "terminal": terminal_lines(summary)}


def run_case(case: Case, out: Path) -> str:
    with tempfile.TemporaryDirectory(prefix="summary-identity-") as tmp:
        report = Path(tmp) / "reports"
        proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-q",
                               f"--report-dir={report}", *case.args], cwd=tmp, capture_output=True, text=True,
                              timeout=900, env=os.environ.copy())
        summary = report / "summary.json"
        doc = json.loads(summary.read_text()) if summary.is_file() else None
        record = {"exit": proc.returncode,
                  "summary": normalised(doc, str(report), ("summary",)) if doc is not None else None}
        if doc is not None:
            record["rendered"] = rendered(record["summary"])
        else:
            record["output"] = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
        (out / f"{case.name}.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        return f"{case.name}: exit {proc.returncode}"


def collect(out: Path, groups: list[str], jobs: int) -> int:
    out.mkdir(parents=True, exist_ok=True)
    cases = [c for g in groups for c in GROUPS[g]()]
    with ThreadPoolExecutor(jobs) as pool:
        for line in pool.map(lambda c: run_case(c, out), cases):
            print(line, flush=True)
    print(f"{len(cases)} summaries in {out}")
    return 0


def _differences(a: Any, b: Any, where: str = "") -> Iterator[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                yield f"{where}.{k}: only in {'after' if k in b else 'before'}"
            else:
                yield from _differences(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from _differences(x, y, f"{where}[{i}]")
    elif a != b:
        yield f"{where}: {json.dumps(a)[:160]} -> {json.dumps(b)[:160]}"


def compare(before: Path, after: Path) -> int:
    names = sorted({p.name for p in before.glob("*.json")} | {p.name for p in after.glob("*.json")})
    differing = 0
    for name in names:
        a, b = before / name, after / name
        if not a.is_file() or not b.is_file():
            print(f"{name}: only in {'after' if b.is_file() else 'before'}")
            differing += 1
            continue
        diffs = list(_differences(_read(a), _read(b)))
        if diffs:
            differing += 1
            print(f"{name}: {len(diffs)} differences")
            for d in diffs[:12]:
                print(f"  {d}")
    print(f"{len(names)} summaries compared, {differing} differ")
    return 1 if differing else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m drafter_testkit.summary_identity", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("out", type=Path)
    c.add_argument("--groups", default=",".join(GROUPS), help=f"comma-separated, of {', '.join(GROUPS)}")
    c.add_argument("--jobs", type=int, default=2)
    d = sub.add_parser("compare")
    d.add_argument("before", type=Path)
    d.add_argument("after", type=Path)
    args = p.parse_args(argv)
    if args.cmd == "collect":
        return collect(args.out, args.groups.split(","), args.jobs)
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
