"""One-off check: the compiled ChatML labeller gives the labels of its numpy reference.

    python benchmarks/label_equality.py DATASET_DIR [DATASET_DIR ...]

Labels every shard of each dataset both ways (``spans.chatml.label`` and
``label_reference``) with the default contract's tokenizer, asserts identical
roles, boundary flags and problem codes, and prints both timings.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from drafter_contracts.config import load_contract, resolve_contract_path
from drafter_contracts.dataset import open_dataset
from drafter_contracts.engine import Engine
from drafter_contracts.plugin import _tokenizer_name
from drafter_contracts.spans import chatml
from drafter_contracts.vocab import load_vocabulary


def main(paths: list[str]) -> None:
    contract_file = resolve_contract_path("qwen3.6-dflash")
    contract = load_contract(contract_file, {})
    vocab = load_vocabulary(_tokenizer_name(contract.tokenizer, contract_file, False))
    for path in paths:
        engine = Engine(open_dataset(path, None), contract, vocab)
        fast = ref = 0.0
        tokens = rows = problems = 0
        for shard in engine.shards:
            view = engine.work(shard).view
            t0 = time.perf_counter()
            a = chatml.label(view.ids, view.offsets, engine.profile, contract.max_len)
            t1 = time.perf_counter()
            b = chatml.label_reference(view.ids, view.offsets, engine.profile, contract.max_len)
            t2 = time.perf_counter()
            fast, ref = fast + t1 - t0, ref + t2 - t1
            for field in ("role", "boundary", "problem"):
                x, y = getattr(a, field), getattr(b, field)
                if x.dtype != y.dtype or not np.array_equal(x, y):
                    sys.exit(f"{path} {shard.id}: {field} differs at {np.flatnonzero(x != y)[:10].tolist()}")
            tokens, rows, problems = tokens + len(view.ids), rows + len(view.rows), problems + int((a.problem > 0).sum())
        print(f"{path}: {rows:,} rows, {tokens:,} tokens, {problems:,} problem tokens: identical; "
              f"compiled {fast:.2f} s, numpy reference {ref:.2f} s ({ref / max(fast, 1e-9):.1f}x)")


if __name__ == "__main__":
    main(sys.argv[1:])
