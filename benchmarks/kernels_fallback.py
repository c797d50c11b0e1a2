"""What an install without a C compiler costs: the suite with the numpy references against the compiled loops.

    python benchmarks/kernels_fallback.py [--rows 100000] [--repeats 3] [--report reports/kernels-fallback.json]

Two measures, each backend alternately, best and median of ``--repeats``:

* the per-shard work in one process (stats and every per-row contract of every shard, as a
  worker runs them; start-up excluded), the part the kernels speed up;
* whole runs, ``pytest --dataset-path -n 2`` in a subprocess (``run.suite_run``), start-up included.

The backend is chosen with ``DRAFTER_CONTRACTS_KERNELS=numpy``, exactly as an install without
the library runs (``kernels/compiled.py``). docs/reliability.md quotes the output.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fullscale  # noqa: E402
from run import suite_run  # noqa: E402


def shard_work_seconds(path: Path, backend: str) -> float:
    """Every shard's stats and per-row contracts in this process, on one backend."""
    from drafter_contracts.kernels import compiled as kernels
    from drafter_contracts.contract import load_contract, resolve_contract_path
    from drafter_contracts.dataset.reader import open_dataset
    from drafter_contracts.engine import SHARD_CHECKS, Engine
    from drafter_contracts.tokenizer.vocabulary import load_vocabulary

    os.environ[kernels.KERNELS_ENV] = backend
    kernels.loaded_library.cache_clear()
    assert kernels.backend()["backend"] == ("numpy" if backend == "numpy" else "c")
    engine = Engine(open_dataset(path), load_contract(resolve_contract_path(None), {}), load_vocabulary("builtin:qwen3.6"))
    engine.shard_check(engine.shards[0], "ids_known")  # warm: tables, page cache
    t0 = time.perf_counter()
    for shard in engine.shards:
        engine.stats(shard)
        for check in SHARD_CHECKS:
            engine.shard_check(shard, check)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-runs", action="store_true", help="only the in-process shard work")
    parser.add_argument("--report", type=Path, default=Path("reports/kernels-fallback.json"))
    args = parser.parse_args(argv)
    path = fullscale.dataset_dir(args.rows)
    work: dict[str, list[float]] = {"c": [], "numpy": []}
    runs: dict[str, list[dict]] = {"c": [], "numpy": []}
    for _ in range(args.repeats):
        for backend in ("c", "numpy"):
            work[backend].append(shard_work_seconds(path, "" if backend == "c" else "numpy"))
    os.environ.pop("DRAFTER_CONTRACTS_KERNELS", None)
    if not args.no_runs:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.repeats):
                for backend in ("c", "numpy"):
                    env = {**os.environ, "DRAFTER_CONTRACTS_KERNELS": "" if backend == "c" else "numpy"}
                    runs[backend].append(suite_run(path, args.rows, 2, Path(tmp) / f"{backend}-{i}", env=env))
    res: dict = {"rows": args.rows, "load_avg_1m": os.getloadavg()[0]}
    for backend in ("c", "numpy"):
        res[f"shard_work_s_{backend}"] = {"best": round(min(work[backend]), 2),
                                          "median": round(statistics.median(work[backend]), 2)}
        if runs[backend]:
            walls = [r["wall_s"] for r in runs[backend]]
            res[f"run_n2_wall_s_{backend}"] = {"best": min(walls), "median": statistics.median(walls),
                                               "exit_status": sorted({r["exit_status"] for r in runs[backend]})}
    res["shard_work_slowdown"] = round(res["shard_work_s_numpy"]["best"] / res["shard_work_s_c"]["best"], 2)
    if runs["c"]:
        res["run_n2_slowdown"] = round(res["run_n2_wall_s_numpy"]["best"] / res["run_n2_wall_s_c"]["best"], 2)
    text = json.dumps(res, indent=2)
    print(text)
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
