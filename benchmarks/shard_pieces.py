"""Time each piece of one shard's work, outside pytest (best of 3): where the per-token cost goes.

    python benchmarks/shard_pieces.py [DATASET_DIR]   # default: the cached 100 K-row benchmark slice

Used to pick what to optimize; the suite's own figures come from ``run.py``.
"""
import sys, time
import numpy as np
from drafter_contracts.config import load_contract, resolve_contract_path
from drafter_contracts.dataset import open_dataset
from drafter_contracts.engine import Engine, ShardWork, profile_stats, ROW_CHECKS, CONTENT_CHECKS
from drafter_contracts.vocab import load_vocabulary
from drafter_contracts.checks import content, rows

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
import fullscale  # noqa: E402

D = sys.argv[1] if len(sys.argv) > 1 else str(fullscale.dataset_dir(100_000))
contract = load_contract(resolve_contract_path(None), {})
ds = open_dataset(D)
vocab = load_vocabulary(contract.tokenizer)
eng = Engine(ds, contract, vocab)
shard = eng.shards[1]
_ = eng.reply_tables
def t(name, fn, n=3):
    best = 1e9
    for _ in range(n):
        t0 = time.perf_counter(); fn(); best = min(best, time.perf_counter() - t0)
    print(f"{name:32s} {best*1e3:8.1f} ms")
    return best
w = ShardWork(ds, shard, contract, eng.profile)
ntok = len(w.arrays.input_ids.values)
print(shard, ntok, "tokens")
tot = 0
tot += t("read", lambda: ShardWork(ds, shard, contract, eng.profile).arrays)
def view():
    x = ShardWork(ds, shard, contract, eng.profile); x.arrays; t0=time.perf_counter(); x.view; return x
tot += t("view", lambda: __import__('drafter_contracts.checks.view', fromlist=['x']).usable_view(w.arrays))
def labels():
    w.__dict__.pop("labels", None); w.labels
tot += t("labels", labels)
def stats():
    w.view.__dict__.pop("supervised_prefix", None); w.stats()
tot += t("stats (incl prefix)", stats)
tot += t("profile_stats", lambda: profile_stats(w.view))
tot += t("row_hashes", lambda: content.row_hashes(w.view))
for c in ROW_CHECKS + tuple(c for c in CONTENT_CHECKS):
    def run(c=c):
        w.__dict__.pop("_turns", None)
        return eng._run(w, c)
    tot += t(c, run)
print(f"total {tot*1e3:.0f} ms = {tot/ntok*1e9:.1f} ns/token; full-scale single core est {tot/ntok*310e6:.1f} s")
