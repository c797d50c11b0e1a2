"""The corruption campaign as a table: how each kind of damage ended, over many seeds.

    python benchmarks/corruption_campaign.py [--cases 420] [--first-seed 100] [--out FILE.json]

Runs the contract suite in this process (``pytest.main``, as ``tests/test_corruption.py``
does through pytester) on damaged copies of the campaign's 300-row dataset and tallies exit
codes per kind of damage, plus every bad outcome (``fixtures.corruption.bad_outcomes``: a
traceback, a self-blame, a changed folder, a damaged batch read, an exit code outside
0/1/4). docs/reliability.md quotes its output.
"""

from __future__ import annotations

import testkit_path  # noqa: F401  (drafter_testkit is imported from the checkout)
import argparse
import contextlib
import io
import json
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import tokenizers  # noqa: F401  (imported once, before the in-process runs: see tests/conftest.py)
import torch  # noqa: F401
import transformers  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    import pytest

    from drafter_contracts.engine import SHARD_CHECKS
    from drafter_testkit.corruption import (TRACEBACK, bad_outcomes, campaign, corrupt, small_dataset_dir,
                                                       tree_hashes)
    from drafter_testkit.tokenizer import qwen36_tokenizer_dir

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=420)
    parser.add_argument("--first-seed", type=int, default=100)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    victim, tokenizer = small_dataset_dir(), qwen36_tokenizer_dir()
    exits: dict[str, Counter] = defaultdict(Counter)
    bad: list[dict] = []
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="corruption-") as tmp:
        for i, (kind, seed) in enumerate(campaign(args.cases, args.first_seed)):
            work = Path(tmp) / f"case-{i}"
            folder = work / "ds"
            shutil.copytree(victim, folder)
            what = corrupt(folder, kind, seed)
            before = tree_hashes(folder)
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                ret = int(pytest.main([f"--dataset-path={folder}", f"--tokenizer={tokenizer}", "--shard-size=100",
                                       "--expected-count=300", f"--report-dir={work / 'reports'}",
                                       "-p", "no:cacheprovider", f"--rootdir={work}"]))
            problems = bad_outcomes(kind, ret, out.getvalue(), err.getvalue(), work / "reports", before,
                                    tree_hashes(folder), SHARD_CHECKS)
            exits[kind][ret] += 1
            if problems:
                text = out.getvalue() + err.getvalue()
                m = TRACEBACK.search(text)
                bad.append({"kind": kind, "seed": seed, "what": what, "exit": ret, "problems": problems,
                            "output": text[max(0, m.start() - 1500):m.start() + 1500] if m else text[-3000:]})
            shutil.rmtree(work, ignore_errors=True)
    doc = {"cases": args.cases, "first_seed": args.first_seed, "seconds": round(time.time() - t0, 1),
           "exit_codes": {k: dict(sorted(v.items())) for k, v in exits.items()},
           "totals": dict(sorted(sum(exits.values(), Counter()).items())), "bad_outcomes": bad}
    text = json.dumps(doc, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
