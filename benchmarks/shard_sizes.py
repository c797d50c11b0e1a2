"""Sweep ``--shard-size`` on one dataset: wall time, shard count, peak memory per worker.

    python benchmarks/shard_sizes.py --rows 300000 --sizes 2500,5000,10000,20000,40000 -n 2

Small shards cost a fixed amount per test (one test per shard, its reports sent to
the controller); large shards cost memory (~30 bytes per token of one shard) and
balance badly over many workers. The default is chosen from such a sweep (README,
"Scale"). The token bound is lifted here, so the row count alone sizes the shards.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fullscale  # noqa: E402
from run import suite_run  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--sizes", default="2500,5000,10000,20000,40000")
    parser.add_argument("-n", type=int, default=2, help="xdist workers")
    parser.add_argument("--out", type=Path, help="parent folder of the cached datasets")
    parser.add_argument("--report", type=Path, default=Path("reports/shard_sizes.json"))
    args = parser.parse_args(argv)
    path = fullscale.dataset_dir(args.rows, 0, args.out)
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        # max_shard_tokens is lifted so that the row count alone sets the shard size here.
        r = suite_run(path, args.rows, args.n, args.report.parent / "shard-size-runs" / str(size),
                      [f"--shard-size={size}", "--max-shard-tokens=1000000000"])
        r["shard_size"] = size
        results.append(r)
        print(f"shard_size {size:>6}: {r['shards']:>4} shards  wall {r['wall_s']:>7} s  "
              f"peak RSS/worker {max(r['peak_rss_per_worker_mb'])} MB  anon {max(r['peak_anon_per_worker_mb'])} MB  "
              f"verdicts {r['verdicts']}", flush=True)
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
