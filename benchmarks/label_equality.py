"""One-off check: the compiled labeller gives the labels of its numpy reference on real datasets.

    python benchmarks/label_equality.py [--tokenizer DIR] DATASET_DIR [DATASET_DIR ...]

Labels every shard of each dataset both ways (``SpanOracle.label``, the compiled labeller the
suite runs, and ``spans.generic.label``, the numpy statement of its rules) under the default
contract, with the tokenizer given (default: the project's Qwen3.6 tokenizer) and the profile
the suite resolves for it; asserts identical roles, boundary flags and problem codes, and
prints both timings.
"""

from __future__ import annotations

import testkit_path  # noqa: F401  (drafter_testkit is imported from the checkout)
import argparse
import sys
import time

import numpy as np

from drafter_contracts.contract import load_contract, resolve_contract_path
from drafter_contracts.dataset.reader import open_dataset
from drafter_contracts.engine import Engine
from drafter_testkit.tokenizer import qwen36_tokenizer_dir
from drafter_contracts.spans import generic
from drafter_contracts.tokenizer.vocabulary import load_vocabulary


def main(paths: list[str], tokenizer: str) -> None:
    contract = load_contract(resolve_contract_path("qwen3.6-dflash"), {})
    vocab = load_vocabulary(tokenizer)
    for path in paths:
        engine = Engine(open_dataset(path, None), contract, vocab)
        oracle = engine.oracle
        fast = ref = 0.0
        tokens = rows = problems = 0
        for shard in engine.shards:
            view = engine.work(shard).view
            t0 = time.perf_counter()
            a = oracle.label(view.ids, view.offsets, contract.max_len)
            t1 = time.perf_counter()
            b = generic.label(view.ids, view.offsets, oracle.compiled, contract.max_len)
            t2 = time.perf_counter()
            fast, ref = fast + t1 - t0, ref + t2 - t1
            for field in ("role", "boundary", "problem"):
                x, y = getattr(a, field), getattr(b, field)
                if x.dtype != y.dtype or not np.array_equal(x, y):
                    sys.exit(f"{path} {shard.id}: {field} differs at {np.flatnonzero(x != y)[:10].tolist()}")
            tokens, rows, problems = tokens + len(view.ids), rows + len(view.rows), problems + int((a.problem > 0).sum())
        print(f"{path}: {rows:,} rows, {tokens:,} tokens, {problems:,} problem tokens ({oracle.how}): identical; "
              f"compiled {fast:.2f} s, numpy reference {ref:.2f} s ({ref / max(fast, 1e-9):.1f}x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", default=None, help="a tokenizer folder (default: the project's Qwen3.6 one)")
    parser.add_argument("datasets", nargs="+")
    args = parser.parse_args()
    main(args.datasets, args.tokenizer or str(qwen36_tokenizer_dir()))
