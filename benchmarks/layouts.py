"""A contract run over each layout the tool reads (docs/layouts.md) against the speculators original.

    python benchmarks/layouts.py [--rows 2000] [--rounds 3] [--out benchmarks/layouts-DATE.json]

The rows: the clean 2,000-row fixture with the ``mask_user_text`` mutant's row, written in every
layout of ``drafter_testkit/layouts.py`` (cached). Per layout and round, two figures, each taken
back to back with the original's in the same round (the machine is shared: ratios of neighbours,
medians over rounds, never walls taken minutes apart):

- ``read``: every shard of the dataset read through the layout (``SavedDataset.read``: unnesting,
  cutting padding, labels to the token-level mask), in this process, caches warm;
- ``run``: ``python -m pytest --dataset-path=... --tokenizer=... -n 0`` as a real process (start-up,
  tokenizer tables, every contract); the first open of a Parquet / JSON Lines folder also converts it
  into the cache, so a round 0 with a fresh cache entry is reported apart (``first_run``).
"""

from __future__ import annotations

import testkit_path  # noqa: F401  (drafter_testkit is imported from the checkout)
import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any


def read_seconds(folder: Path) -> float:
    """Every shard of the dataset read as the engine reads it (the default shard plan)."""
    from drafter_contracts.dataset.reader import open_dataset, plan_shards

    ds = open_dataset(folder)
    shards = plan_shards(ds.num_rows, 10_000, ds.row_lengths(), 4_000_000)
    _ = ds.detected
    t0 = time.perf_counter()
    for shard in shards:
        ds.read(shard)
    return time.perf_counter() - t0


def run_seconds(folder: Path, tokenizer: Path, report: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--dataset-path={folder}",
                           f"--tokenizer={tokenizer}", "-n", "0", "-q", f"--report-dir={report}"],
                          capture_output=True, text=True, cwd=report.parent, env=os.environ.copy())
    return time.perf_counter() - t0, proc.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    from drafter_testkit.generate import fixture_dataset_dir
    from drafter_testkit.layouts import LAYOUTS, layouts_dir
    from drafter_testkit.tokenizer import qwen36_tokenizer_dir

    tokenizer = qwen36_tokenizer_dir()
    root = layouts_dir(fixture_dataset_dir(2000, 0), args.rows)
    folders = {"speculators": root / "speculators", **{n: root / n / LAYOUTS[n][2] for n in LAYOUTS}}
    scratch = Path(tempfile.mkdtemp(prefix="layouts-bench-"))
    first = {n: run_seconds(f, tokenizer, scratch / f"first-{n}")[0] for n, f in folders.items()}
    ratios: dict[str, dict[str, list[float]]] = {n: {"read": [], "run": []} for n in folders}
    walls: dict[str, dict[str, list[float]]] = {n: {"read": [], "run": []} for n in folders}
    codes: dict[str, int] = {}
    for r in range(args.rounds):
        for name, folder in folders.items():
            base_read, read = read_seconds(folders["speculators"]), read_seconds(folder)
            (base_run, _), (run, code) = (run_seconds(folders["speculators"], tokenizer, scratch / f"b{r}{name}"),
                                          run_seconds(folder, tokenizer, scratch / f"r{r}{name}"))
            codes[name] = code
            ratios[name]["read"].append(read / base_read)
            ratios[name]["run"].append(run / base_run)
            walls[name]["read"].append(read)
            walls[name]["run"].append(run)
    doc: dict[str, Any] = {"date": dt.date.today().isoformat(), "rows": args.rows, "rounds": args.rounds,
                           "layouts": {n: {"exit": codes[n], "first_run_s": round(first[n], 2),
                                           "read_s": round(median(walls[n]["read"]), 4),
                                           "read_vs_speculators": round(median(ratios[n]["read"]), 2),
                                           "run_s": round(median(walls[n]["run"]), 2),
                                           "run_vs_speculators": round(median(ratios[n]["run"]), 2)}
                                       for n in folders}}
    text = json.dumps(doc, indent=1)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
