"""What the integrity scan costs against the token pass it protects, on shards of the seed's shape.

    python benchmarks/integrity_cost.py [--rows 100000] [--shard-size 10000]

For one shard of ``--shard-size`` rows (~3.4 M tokens at the seed's mean length): Arrow's
ValidateFull over the shard's record batches (what ``checks.integrity.scan_tables`` runs), the
vectorized offsets pass that names the first bad row, and the shard's token pass (the one
compiled pass every shard makes; ``engine.token_pass``). Then the whole dataset's scan, which
every process makes once at open. Best of ``--repeats``; docs/reliability.md quotes the output.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fullscale  # noqa: E402


def best(fn, repeats: int) -> float:
    out = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t0)
    return out


def main(argv: list[str] | None = None) -> int:
    from drafter_contracts.dataset.row_view import usable_view
    from drafter_contracts.dataset.reader import open_dataset
    from drafter_contracts.dataset.columns import Shard
    from drafter_contracts.engine import token_pass
    from drafter_contracts.checks.integrity import first_bad_offset, list_offsets, scan_tables

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--shard-size", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    ds = open_dataset(fullscale.dataset_dir(args.rows))
    tables = [(f.name, t) for f, t in zip(ds.files, ds._tables)]
    part = ds.table.slice(0, args.shard_size)
    shard_tables = [("shard", part)]
    arrays = ds.read(Shard(0, 0, args.shard_size))
    view = usable_view(arrays)
    tokens = len(view.ids)

    def offsets_pass() -> None:
        for batch in part.to_batches():
            for name in ("input_ids", "loss_mask"):
                arr = batch.column(name)
                first_bad_offset(list_offsets(arr), len(arr.values))

    def fused() -> None:
        view.__dict__.pop("supervised_prefix", None)
        token_pass(view, 248_077)

    res = {
        "shard_rows": args.shard_size, "shard_tokens": tokens, "record_batches": len(part.to_batches()),
        "validate_full_ms": round(best(lambda: scan_tables(shard_tables), args.repeats) * 1e3, 3),
        "offsets_pass_ms": round(best(offsets_pass, args.repeats) * 1e3, 3),
        "token_pass_ms": round(best(fused, args.repeats) * 1e3, 3),
        "dataset_rows": ds.num_rows,
        "dataset_scan_ms": round(best(lambda: scan_tables(tables), max(3, args.repeats // 5)) * 1e3, 2),
    }
    res["scan_share_of_token_pass"] = round(res["validate_full_ms"] / res["token_pass_ms"], 4)
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
