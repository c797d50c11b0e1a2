"""Hidden-state contracts at scale: value-pass throughput against the disk's own sequential read, header pass
files/s, and memory against the number of files.

    python benchmarks/hidden_states.py --gb 20 --work /big/scratch --json benchmarks/hidden-states-DATE.json

1. A folder of ``--gb`` GB of ``hs_{i}.safetensors`` files (bfloat16, 4 layers x 5,120, a 27B-class width;
   seq_len drawn around the 913,786-row Qwen3.6 dataset's mean of 335, random tokens so no two rows share a
   prefix) and the matching ``save_to_disk`` dataset.
2. The disk's sequential read bandwidth: a plain read of the same files in index order, 16 MiB reads into one
   buffer, one stream and two streams (the suite's two workers). Before every measured pass each file's
   cached pages are dropped with ``posix_fadvise(POSIX_FADV_DONTNEED)`` (no root needed; the folder is also
   larger than the memory the machine has available), so every pass reads from the disk.
3. The suite's value pass over the same files (``pytest --dataset-path --hidden-states -n 2``): its bytes over
   the shards' wall time (first shard's pass start to last shard's pass end), and the whole run's wall time.
4. The header pass (``--hs-headers-only``) and peak RSS (the pytest process, ``-n 0``; the token contracts of
   the same rows run in the same shard tests, so this is the whole run's) on small-file folders of N and 10 N
   files.
The generated files are deleted at the end (``--keep`` keeps them).
"""

from __future__ import annotations

import testkit_path  # noqa: F401  (drafter_testkit is imported from the checkout)
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
LAYERS, HIDDEN = 4, 5120


def drop_cache(folder: Path) -> None:
    for entry in os.scandir(folder):
        fd = os.open(entry.path, os.O_RDONLY)
        try:
            os.fsync(fd)  # DONTNEED drops clean pages only: a folder just written (smaller than RAM) is dirty
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def lengths(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(np.log(260), 0.7, size=n), 21, 4096).astype(np.int64)


def write_folder(folder: Path, seq: np.ndarray, hidden: int, seed: int = 0) -> list[np.ndarray]:
    """Files with random bfloat16 states (per-layer scales like a residual stream and a normed last layer)."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    scale = np.array([0.3, 0.6, 1.0, 8.0][:LAYERS], dtype=np.float32)[None, :, None] / np.sqrt(hidden)
    top = int(seq.max())
    base = (rng.standard_normal((top + 64, LAYERS, hidden), dtype=np.float32) * scale * np.sqrt(hidden))
    base = torch.from_numpy(base).to(torch.bfloat16)
    rows = []
    for i, s in enumerate(seq.tolist()):
        ids = rng.integers(0, 248_000, size=s).astype(np.int64)
        ids[0] = i % 248_000  # random files share no prefix (their states would have to agree there)
        ids[1] = i // 248_000
        off = int(rng.integers(0, 64))
        save_file({"token_ids": torch.from_numpy(ids), "hidden_states": base[off:off + s].clone()},
                  str(folder / f"hs_{i}.safetensors"))
        rows.append(ids)
    return rows


def write_dataset(path: Path, rows: list[np.ndarray]) -> None:
    sys.path.insert(0, str(REPO / "src"))
    from drafter_testkit.generate import write_dataset as write

    write(((r.astype(np.int32).tolist(), [False] * (len(r) - 8) + [True] * 8) for r in rows), path, num_shards=1)


def plain_read(files: list[Path], streams: int) -> tuple[int, float]:
    """Bytes and seconds of reading every file front to back, ``streams`` threads taking files in turn."""
    total = [0] * streams

    def worker(k: int) -> None:
        buf = bytearray(16 << 20)
        view = memoryview(buf)
        for path in files[k::streams]:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
                while True:
                    n = os.readv(fd, [view])
                    if n == 0:
                        break
                    total[k] += n
            finally:
                os.close(fd)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(total), time.perf_counter() - t0


def contract(path: Path, hidden: int) -> Path:
    sys.path.insert(0, str(REPO / "src"))
    from drafter_contracts.contract import builtin_contracts

    path.write_text(builtin_contracts()["generic"].read_text() + f"\n[hidden_states]\nnum_layers = {LAYERS}\n"
                    f"hidden_size = {hidden}\ndtype = \"bfloat16\"\n")
    return path


def run_suite(dataset: Path, folder: Path, contract_file: Path, report: Path, *extra: str) -> dict:
    """One pytest process (in a helper, so its peak RSS and its workers' are its own), its summary and its RSS."""
    code = ("import resource, subprocess, sys, json, time; t = time.perf_counter(); "
            "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
            "print(json.dumps({'rc': p.returncode, 'wall': time.perf_counter() - t, "
            "'max_rss_kb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, 'tail': p.stdout[-3000:]}))")
    cmd = [sys.executable, "-c", code, sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--dataset-path={dataset}",
           f"--hidden-states={folder}", f"--contract={contract_file}", f"--report-dir={report}", "-q", *extra]
    out = json.loads(subprocess.run(cmd, capture_output=True, text=True, cwd="/tmp").stdout.strip().splitlines()[-1])
    summary = json.loads((report / "summary.json").read_text())
    from drafter_contracts.hidden.report import section  # the figures as the terminal and report.html read them

    out["hidden_states"] = {k: v for k, v in section(summary).items() if k not in ("norms", "policy")}
    out["failing"] = sorted(k for k, c in summary["checks"].items() if c["verdict"] == "fail")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=20.0)
    ap.add_argument("--work", type=Path, required=True, help="scratch folder on the disk to measure")
    ap.add_argument("--small-files", type=int, default=10_000, help="N of the header-pass / RSS folders (N and 10 N)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--shard-rows", type=int, default=50, help="rows (files) per shard of the value pass (--shard-size)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    work = args.work / "hidden-states-benchmark"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    out: dict = {"machine": {"cpus": os.cpu_count(), "mem_available_kb": _meminfo("MemAvailable"),
                             "mem_total_kb": _meminfo("MemTotal")}}
    try:
        per_file = 0.335e3 * LAYERS * HIDDEN * 2
        n = int(args.gb * 1e9 / per_file) + 1
        seq = lengths(n)
        while int((seq * LAYERS * HIDDEN * 2).sum()) < args.gb * 1e9:
            n += 16
            seq = lengths(n)
        big = work / "big"
        t0 = time.perf_counter()
        rows = write_folder(big / "hidden_states", seq, HIDDEN)
        write_dataset(big / "data", rows)
        files = [big / "hidden_states" / f"hs_{i}.safetensors" for i in range(n)]
        size = sum(f.stat().st_size for f in files)
        out["big"] = {"files": n, "bytes": size, "generate_seconds": round(time.perf_counter() - t0, 1),
                      "seq_len_mean": float(seq.mean()), "layers": LAYERS, "hidden": HIDDEN}
        print(f"generated {n:,} files, {size / 1e9:.1f} GB", flush=True)
        reads = {}
        for streams in (1, args.workers):
            drop_cache(big / "hidden_states")
            b, s = plain_read(files, streams)
            reads[f"{streams}_stream"] = {"bytes": b, "seconds": round(s, 2), "bytes_per_second": round(b / s)}
            print(f"plain read, {streams} stream(s): {b / s / 1e6:.0f} MB/s", flush=True)
        out["plain_read"] = reads
        drop_cache(big / "hidden_states")
        c = contract(work / "big.toml", HIDDEN)  # default 50 rows (~0.7 GB of files) a shard, as the file shards were
        suite = run_suite(big / "data", big / "hidden_states", c, work / "rep-big", "-n", str(args.workers),
                          f"--shard-size={args.shard_rows}")
        h = suite["hidden_states"]
        suite["value_pass_bytes_per_second"] = round(h["value_bytes"] / h["shards_wall_seconds"])
        suite["run_bytes_per_second"] = round(h["value_bytes"] / suite["wall"])
        best = max(r["bytes_per_second"] for r in reads.values())
        suite["share_of_best_plain_read"] = round(suite["value_pass_bytes_per_second"] / best, 3)
        suite["run_share_of_best_plain_read"] = round(suite["run_bytes_per_second"] / best, 3)
        suite.pop("tail", None) if suite["rc"] == 0 else None
        out["value_pass"] = suite
        print(f"value pass: {suite['value_pass_bytes_per_second'] / 1e6:.0f} MB/s "
              f"({suite['share_of_best_plain_read']:.0%} of the plain read), rc {suite['rc']}", flush=True)
        shutil.rmtree(big)
        small = {}
        for k, count in (("n", args.small_files), ("10n", args.small_files * 10)):
            folder = work / f"small-{k}"
            seq_s = lengths(count, seed=1)
            rows = write_folder(folder / "hidden_states", seq_s, 8, seed=1)
            write_dataset(folder / "data", rows)
            c = contract(work / f"small-{k}.toml", 8)
            drop_cache(folder / "hidden_states")
            shards = ("--shard-size=1000",)
            heads = run_suite(folder / "data", folder / "hidden_states", c, work / f"rep-h-{k}", "-n", "0", "--hs-headers-only", *shards)
            full = run_suite(folder / "data", folder / "hidden_states", c, work / f"rep-v-{k}", "-n", "0", *shards)
            hh = heads["hidden_states"]
            small[k] = {"files": count, "header_files_per_second": hh["header_files_per_second"],
                        "header_bytes_per_file": round(hh["header_bytes"] / max(1, hh["files"])),
                        "header_run_wall_seconds": round(heads["wall"], 2), "header_run_max_rss_mb": round(heads["max_rss_kb"] / 1024, 1),
                        "full_run_wall_seconds": round(full["wall"], 2), "full_run_max_rss_mb": round(full["max_rss_kb"] / 1024, 1),
                        "failing": sorted(set(heads["failing"]) | set(full["failing"]))}
            print(f"{count:,} small files: header pass {hh['header_files_per_second']:,.0f} files/s, "
                  f"RSS {small[k]['header_run_max_rss_mb']} / {small[k]['full_run_max_rss_mb']} MB", flush=True)
            shutil.rmtree(folder)
        out["small_files"] = small
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


def _meminfo(key: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
