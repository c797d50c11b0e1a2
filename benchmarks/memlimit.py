"""Run the contract suite under a cgroup memory limit smaller than the dataset's Arrow files.

A memory cgroup counts what the kernel must keep resident: anonymous memory, plus
page cache it can evict. A suite that materialized the dataset would be OOM-killed;
one that memory-maps it and holds a shard at a time passes, its file pages recycled
under pressure. (``prlimit --as`` would prove nothing: mapping needs address space,
not memory.)

    python benchmarks/memlimit.py --limit-mb 900 -- -n 2     # needs root and a writable memory cgroup

It evicts the dataset's pages from the page cache (``posix_fadvise DONTNEED``; pages
cached earlier are charged to whoever read them first), creates a child of this
process's own memory cgroup (v1 ``memory`` or v2 unified), runs ``pytest --dataset-path`` inside it, prints the verdict and the
cgroup's peak usage and limit hits, and removes the child again.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fullscale  # noqa: E402
from run import neutral_dir  # noqa: E402


def own_memory_cgroup() -> tuple[Path, str]:
    """(directory, version) of the memory cgroup this process is in."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hid, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return Path("/sys/fs/cgroup/memory") / path.lstrip("/"), "v1"
        if hid == "0" and Path("/sys/fs/cgroup/cgroup.controllers").is_file():
            return Path("/sys/fs/cgroup") / path.lstrip("/"), "v2"
    raise SystemExit("no memory cgroup found for this process")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=fullscale.FULL_ROWS)
    parser.add_argument("--limit-mb", type=int, default=900)
    parser.add_argument("--out", type=Path, help="parent folder of the cached datasets")
    parser.add_argument("--report", type=Path, default=Path("reports/memlimit.json"))
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)

    path = fullscale.dataset_dir(args.rows, 0, args.out)
    files = sorted(path.glob("data-*.arrow"))
    arrow_mb = sum(f.stat().st_size for f in files) / 2**20
    # Pages already cached were charged to whoever read them first, not to our cgroup:
    # evict this dataset's clean pages so that every page the suite reads is charged to it.
    for f in files:
        with open(f, "rb") as fh:
            os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    parent, version = own_memory_cgroup()
    child = parent / f"drafter-contracts-memlimit-{os.getpid()}"
    try:
        child.mkdir()
    except OSError as exc:
        raise SystemExit(f"cannot create a memory cgroup under {parent} ({exc}); run as root on a machine "
                         "with a writable cgroup hierarchy, or use: systemd-run --scope -p MemoryMax=900M pytest ...")
    limit = args.limit_mb * 2**20
    try:
        if version == "v1":
            (child / "memory.limit_in_bytes").write_text(str(limit))
        else:
            (child / "memory.max").write_text(str(limit))
            (child / "memory.swap.max").write_text("0")
        report_dir = (args.report.parent / "memlimit-run").resolve()
        cmd = [sys.executable, "-m", "pytest", f"--dataset-path={path}", f"--expected-count={args.rows}",
               "-p", "no:cacheprovider", "-q", f"--report-dir={report_dir}", *args.pytest_args]
        # The child joins the cgroup before exec, so pytest and its xdist workers all live in it.
        shell = f'echo $$ > {child / "cgroup.procs"} && exec "$@"'
        t0 = time.perf_counter()
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as run.py: a user's shell writes bytecode caches
        proc = subprocess.run(["sh", "-c", shell, "sh", *cmd], capture_output=True, text=True, env=env,
                              cwd=neutral_dir())  # not the repository: see run.neutral_dir
        wall = time.perf_counter() - t0
        if version == "v1":
            peak = int((child / "memory.max_usage_in_bytes").read_text())
            hits = int((child / "memory.failcnt").read_text())
            stat = dict(line.split() for line in (child / "memory.stat").read_text().splitlines())
            charged = {"total_cache_mb": round(int(stat.get("total_cache", 0)) / 2**20),
                       "total_rss_mb": round(int(stat.get("total_rss", 0)) / 2**20)}
        else:
            peak = int((child / "memory.peak").read_text()) if (child / "memory.peak").is_file() else -1
            hits = int(dict(line.split() for line in (child / "memory.events").read_text().splitlines())["max"])
            charged = {}
        summary_file = report_dir / "summary.json"
        summary = json.loads(summary_file.read_text()) if summary_file.is_file() else {}
        result = {
            "rows": args.rows, "arrow_files_mb": round(arrow_mb), "limit_mb": args.limit_mb, "cgroup": version,
            "pytest_args": args.pytest_args, "exit_status": proc.returncode, "wall_s": round(wall, 1),
            "peak_usage_mb": round(peak / 2**20), "limit_hits": hits, "at_end": charged,
            "verdicts": sorted({c["verdict"] for c in summary.get("checks", {}).values()}),
            "rows_checked": summary.get("figures", {}).get("rows_checked"),
            "tail": (proc.stdout.strip().splitlines() or [""])[-1],
        }
    finally:
        for _ in range(50):  # the cgroup is removable once its last process has exited
            try:
                child.rmdir()
                break
            except OSError:
                time.sleep(0.1)
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
