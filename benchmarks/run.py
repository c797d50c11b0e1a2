"""Full-scale benchmark: the contract suite against the Arrow-scan floor and a per-row Python loop.

One command (from the repository root)::

    python benchmarks/run.py                  # builds the datasets once (~1 min), then measures (~10 min)

It writes ``reports/benchmark.json`` and prints the ratios the scale issue sets
targets for. Timings are wall clock on whatever else the machine is doing: the
load average before each run is recorded next to it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fullscale  # noqa: E402
from naive import naive_loop  # noqa: E402

TARGETS = {"marginal_over_floor": 6.0, "n1_over_n2": 1.8, "fixed_overhead_s": 10.0,
           "peak_rss_per_worker_gb": 1.5, "naive_over_suite": 50.0}


# --------------------------------------------------------------------------- the floor

def floor_seconds(path: Path, repeats: int = 3) -> dict[str, Any]:
    """One memory-mapped pyarrow pass touching every token: min/max ids, mask sum, list lengths (best of N)."""
    from drafter_contracts.dataset import open_dataset

    files = open_dataset(path).files
    best, result = float("inf"), {}
    for _ in range(repeats):
        t0 = time.perf_counter()
        lo, hi, sup, rows, tokens = None, None, 0, 0, 0
        for f in files:
            table = pa.ipc.open_stream(pa.memory_map(str(f), "r")).read_all()
            for ids, mask in zip(table.column("input_ids").chunks, table.column("loss_mask").chunks):
                mm = pc.min_max(ids.flatten())
                lo = mm["min"].as_py() if lo is None else min(lo, mm["min"].as_py())
                hi = mm["max"].as_py() if hi is None else max(hi, mm["max"].as_py())
                sup += pc.sum(mask.flatten()).as_py() or 0
                lengths = pc.list_value_length(ids)
                rows += len(lengths)
                tokens += pc.sum(lengths).as_py() or 0
        best = min(best, time.perf_counter() - t0)
        result = {"min_id": lo, "max_id": hi, "supervised": sup, "rows": rows, "tokens": tokens}
    return {"seconds": round(best, 3), "repeats": repeats, **result}


# --------------------------------------------------------------------------- memory sampling

def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _status(pid: int) -> dict[str, int]:
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
                    fields[key] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return fields


def _is_worker(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"-c\x00" in fh.read()  # execnet starts xdist workers as `python -c ...`
    except OSError:
        return False


class Sampler(threading.Thread):
    """Samples RssAnon / VmHWM of a process tree every 50 ms (peak RSS is the kernel's own VmHWM)."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root, self.stop, self.seen = root, threading.Event(), {}

    def run(self) -> None:
        while not self.stop.is_set():
            for pid in _descendants(self.root):
                s = _status(pid)
                if not s:
                    continue
                rec = self.seen.setdefault(pid, {"worker": _is_worker(pid), "peak_rss": 0, "peak_anon": 0})
                rec["peak_rss"] = max(rec["peak_rss"], s.get("VmHWM", 0))
                rec["peak_anon"] = max(rec["peak_anon"], s.get("RssAnon", 0))
            self.stop.wait(0.05)


# --------------------------------------------------------------------------- suite runs

def neutral_dir() -> str:
    """An empty working directory for suite runs: started in the repository, pytest would read its
    pyproject (testpaths = tests) and load tests/conftest.py, which imports torch and transformers
    for the project's own tests: ~5 s and ~400 MB per process that no user's run has."""
    global _NEUTRAL
    if _NEUTRAL is None:
        _NEUTRAL = tempfile.mkdtemp(prefix="drafter-contracts-bench-")
    return _NEUTRAL


_NEUTRAL: str | None = None


def suite_run(path: Path, rows: int, workers: int, report_dir: Path, extra: list[str] | None = None,
              env: dict[str, str] | None = None) -> dict[str, Any]:
    """``pytest --dataset-path`` in a subprocess: wall time, verdict, per-process peak memory."""
    report_dir = report_dir.resolve()  # pytest runs in neutral_dir()
    report_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pytest", f"--dataset-path={path}", f"--expected-count={rows}",
           "-n", str(workers), "-p", "no:cacheprovider", "-q", f"--report-dir={report_dir}", *(extra or [])]
    # As a user's shell runs it: with PYTHONDONTWRITEBYTECODE=1 (set in some sandboxes and
    # containers) every interpreter re-compiles and pytest re-rewrites every module at start-up,
    # ~1 s more in each of the three processes.
    env = dict(os.environ if env is None else env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=neutral_dir())
    sampler = Sampler(proc.pid)
    sampler.start()
    out, _ = proc.communicate()
    wall = time.perf_counter() - t0
    sampler.stop.set()
    sampler.join()
    summary = json.loads((report_dir / "summary.json").read_text()) if (report_dir / "summary.json").is_file() else {}
    procs = list(sampler.seen.values())
    workers_mem = [p for p in procs if p["worker"]] or procs
    tokens = summary.get("figures", {}).get("tokens") or 0
    return {
        "rows": rows, "workers": workers, "exit_status": proc.returncode, "wall_s": round(wall, 2),
        "tokens": tokens, "tokens_per_s": round(tokens / wall) if wall else None,
        "verdicts": sorted({c["verdict"] for c in summary.get("checks", {}).values()}),
        "shards": summary.get("figures", {}).get("shards_total"),
        "peak_rss_per_worker_mb": [round(p["peak_rss"] / 2**20) for p in workers_mem],
        "peak_anon_per_worker_mb": [round(p["peak_anon"] / 2**20) for p in workers_mem],
        "load_avg_before": round(load, 2), "tail": out.strip().splitlines()[-1:] if out else [],
    }


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Repeated runs of one configuration: the median wall time counts (``wall_s``), the fastest and
    every wall time are kept, and the largest per-worker memory any run reached (workers differ
    between runs: which one draws the drift sample is up to xdist, so per-worker lists are not merged).

    The median, not the fastest: this VM's speed drifts by +-30 % in both directions within
    minutes, and the rounds interleave the configurations, so a median compares like with like
    where a minimum rewards whichever configuration caught a fast minute.
    """
    ordered = sorted(runs, key=lambda r: r["wall_s"])
    best = dict(ordered[(len(ordered) - 1) // 2])
    best["wall_s"] = round(float(np.median([r["wall_s"] for r in runs])), 2)
    best["fastest_wall_s"] = ordered[0]["wall_s"]
    best["walls_s"] = [r["wall_s"] for r in runs]
    best["exit_statuses"] = sorted({r["exit_status"] for r in runs})
    for key in ("peak_rss_per_worker_mb", "peak_anon_per_worker_mb"):
        best[key.replace("_per_worker_", "_max_any_run_")] = max((v for r in runs for v in r[key]), default=0)
    return best


# --------------------------------------------------------------------------- main

def machine() -> dict[str, Any]:
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    mem = next((int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal")), 0)
    return {"cpu": model, "cores": os.cpu_count(), "ram_gb": round(mem / 2**20, 1), "python": platform.python_version(),
            "pyarrow": pa.__version__, "numpy": np.__version__, "load_avg_at_start": os.getloadavg()}


def ratios(r: dict[str, Any]) -> dict[str, Any]:
    full2, full1, small = r["suite"]["full_n2"], r["suite"].get("full_n1"), r["suite"][r["fixed_run"]]
    floor = r["floor"]["seconds"]
    anon = {k: max(v["peak_anon_per_worker_mb"] or [0]) for k, v in r["suite"].items() if k.endswith("_n2")}
    out = {
        "marginal_over_floor": round((full2["wall_s"] - small["wall_s"]) / floor, 1),
        "n1_over_n2": round(full1["wall_s"] / full2["wall_s"], 2) if full1 else None,
        # Not a target: how the per-token part alone scales once each run's fixed start-up is taken out.
        "marginal_n1_over_n2": (round((full1["wall_s"] - r["suite"][r["fixed_run"].replace("_n2", "_n1")]["wall_s"])
                                      / (full2["wall_s"] - small["wall_s"]), 2)
                                if full1 and r["fixed_run"].replace("_n2", "_n1") in r["suite"] else None),
        "fixed_overhead_s": small["wall_s"],
        "peak_rss_per_worker_gb": round(max(r.get("peak_rss_max_any_run_mb", max(r["peak_rss_per_worker_mb"] or [0]))
                                            for r in (full2, full1 or full2)) / 1024, 2),
        "naive_over_suite": round(r["naive"]["extrapolated_s"] / full2["wall_s"], 1),
        # Not a target: the loop's time is extrapolated from per-row time, so it holds no start-up;
        # this compares it with the suite's per-row part alone (full - 1K).
        "naive_over_marginal": round(r["naive"]["extrapolated_s"] / (full2["wall_s"] - small["wall_s"]), 1),
        "peak_anon_mb_by_size_n2": anon,
    }
    out["meets"] = {k: (out[k] is not None and (out[k] <= t if k in ("marginal_over_floor", "fixed_overhead_s",
                                                                        "peak_rss_per_worker_gb") else out[k] >= t))
                    for k, t in TARGETS.items()}
    return out


def table(res: dict[str, Any]) -> str:
    q = res["ratios"]
    rows = [
        ("(full - 1K) / floor, -n 2", q["marginal_over_floor"], f"<= {TARGETS['marginal_over_floor']}"),
        ("-n 1 / -n 2 (full)", q["n1_over_n2"], f">= {TARGETS['n1_over_n2']}"),
        (f"fixed overhead ({res['fixed_run']}), s", q["fixed_overhead_s"], f"<= {TARGETS['fixed_overhead_s']}"),
        ("peak RSS per worker, GB", q["peak_rss_per_worker_gb"], f"<= {TARGETS['peak_rss_per_worker_gb']}"),
        ("naive loop / suite (-n 2)", q["naive_over_suite"], f">= {TARGETS['naive_over_suite']}"),
    ]
    meets = list(q["meets"].values())
    lines = [f"{'ratio':<38} {'value':>8}  target   met"]
    lines += [f"{name:<38} {str(v):>8}  {t:<8} {'yes' if m else 'NO'}" for (name, v, t), m in zip(rows, meets)]
    lines.append(f"-n 1 / -n 2 of the marginal (full - 1K) alone: {q['marginal_n1_over_n2']}")
    lines.append(f"naive loop / marginal (full - 1K, -n 2): {q['naive_over_marginal']}")
    lines.append("peak anonymous MB per worker by size (-n 2): "
                 + ", ".join(f"{k.removesuffix('_n2')} {v}" for k, v in q["peak_anon_mb_by_size_n2"].items()))
    lines.append(f"floor {res['floor']['seconds']} s · full -n 2 {res['suite']['full_n2']['wall_s']} s · "
                 f"naive loop extrapolated {res['naive']['extrapolated_s']} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=fullscale.FULL_ROWS, help="full size (default: the seed's 913,786)")
    parser.add_argument("--slices", default="1000,100000,300000", help="smaller sizes; the first is the fixed-overhead run")
    parser.add_argument("--no-n1", action="store_true", help="skip the -n 1 run of the full size")
    parser.add_argument("--repeats", type=int, default=3,
                        help="rounds over all suite configurations; each one's median wall counts, memory is the "
                             "largest seen (default 3)")
    parser.add_argument("--naive-sample", type=int, default=20_000, help="rows the per-row loop times")
    parser.add_argument("--out", type=Path, help="parent folder of the cached datasets (default: the fixture cache)")
    parser.add_argument("--report", type=Path, default=Path("reports/benchmark.json"))
    args = parser.parse_args(argv)

    sizes = [int(s) for s in args.slices.split(",") if s]
    res: dict[str, Any] = {"machine": machine(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    paths = {n: fullscale.dataset_dir(n, 0, args.out) for n in sorted(set(sizes + [args.rows]))}
    res["dataset"] = fullscale.describe(paths[args.rows])
    print(f"dataset: {json.dumps(res['dataset'])}", flush=True)
    floor_seconds(paths[args.rows], 1)  # warm the page cache
    res["floor"] = floor_seconds(paths[args.rows])
    print(f"floor: {res['floor']['seconds']} s", flush=True)
    tmp = args.report.parent / "benchmark-runs"
    runs: list[tuple[str, int, int]] = [("full_n2", args.rows, 2)]
    if not args.no_n1:
        runs.append(("full_n1", args.rows, 1))
        runs.append((f"rows{sizes[0]}_n1", sizes[0], 1))  # for the marginal's own -n 1 / -n 2
    runs += [(f"rows{n}_n2", n, 2) for n in sizes]
    res["fixed_run"] = f"rows{sizes[0]}_n2"
    res["repeats"] = args.repeats
    res["suite"] = {}
    done: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in runs}
    for round_ in range(max(1, args.repeats)):  # interleaved: every configuration once per round
        for name, n, w in runs:
            done[name].append(suite_run(paths[n], n, w, tmp / name))
            print(f"round {round_ + 1} {name}: {done[name][-1]['wall_s']} s", flush=True)
    for name, _, _ in runs:
        res["suite"][name] = median_of(done[name])
        print(f"{name}: {json.dumps(res['suite'][name])}", flush=True)
    from drafter_contracts.vocab import load_vocabulary

    res["naive"] = naive_loop(paths[args.rows], args.naive_sample, load_vocabulary("builtin:qwen3.6"))
    print(f"naive: {json.dumps(res['naive'])}", flush=True)
    res["ratios"] = ratios(res)
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(res, indent=2) + "\n")
    print(table(res))
    print(f"wrote {args.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
