"""Time each piece of one shard's work, outside pytest (best of 5): where the per-token cost goes.

    python benchmarks/shard_pieces.py [DATASET_DIR]   # default: the cached 100 K-row benchmark slice

Used to pick what to optimize; the suite's own figures come from ``run.py``. Each piece is
timed on its own with the pieces it reads already computed, so the lines add up to the shard.
"""
import sys
import time
from pathlib import Path

from drafter_contracts.run.allocator import keep_freed_memory
from drafter_contracts.checks import content
from drafter_contracts.dataset.row_view import mask_prefix
from drafter_contracts.contract import load_contract, resolve_contract_path
from drafter_contracts.dataset.reader import open_dataset
from drafter_contracts.engine import SHARD_CHECKS, Engine, ShardWork, profile_stats
from drafter_contracts.tokenizer.vocabulary import load_vocabulary

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fullscale  # noqa: E402

keep_freed_memory()  # as the suite does (run/allocator.py)
path = sys.argv[1] if len(sys.argv) > 1 else str(fullscale.dataset_dir(100_000))
contract = load_contract(resolve_contract_path("qwen3.6-dflash"), {})
ds = open_dataset(path)
vocab = load_vocabulary(contract.tokenizer)
eng = Engine(ds, contract, vocab)
shard = eng.shards[1]
_ = eng.reply_tables


def work() -> ShardWork:
    return ShardWork(ds, shard, contract, eng.profile, vocab.size)


def timed(name: str, fn, n: int = 5) -> float:
    fn()  # the first call loads compiled kernels
    best = 1e9
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    print(f"{name:32s} {best * 1e3:8.2f} ms")
    return best


w = work()
ntok = len(w.arrays.input_ids.values)
print(shard, f"{ntok:,} tokens")
w.view, w.labels, w.role_runs, w.view.supervised_prefix  # noqa: B018 (cached for the pieces that read them)
total = timed("read", lambda: work().arrays)
total += timed("labels", lambda: (w.__dict__.pop("labels", None), w.labels))
total += timed("role runs", lambda: content.role_runs(w.labels.role, w.view.offsets, w.labels.run_starts,
                                                      w.labels.run_roles, w.labels.run_row_first))
total += timed("mask prefix", lambda: mask_prefix(w.view.mask))
total += timed("profile stats (id counts)", lambda: profile_stats(w.view, vocab.size))
total += timed("row hashes", lambda: content.row_hashes(w.view))
for check in SHARD_CHECKS:
    def run(check: str = check) -> None:
        w.__dict__.pop("_turns", None)
        eng._run(w, check)
    total += timed(check, run)
print(f"total {total * 1e3:.0f} ms = {total / ntok * 1e9:.1f} ns/token; "
      f"one core over 310 M tokens: {total / ntok * 310e6:.1f} s")
