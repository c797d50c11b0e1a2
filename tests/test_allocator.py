"""keep_freed_memory: a shard's arrays reuse the previous shard's pages instead of faulting fresh ones."""

from __future__ import annotations

import subprocess
import sys

_SCRIPT = """
import resource, sys
import numpy as np
from drafter_contracts.run.allocator import keep_freed_memory
if sys.argv[1] == "on":
    assert keep_freed_memory()
def shard():  # a shard's working arrays: prefix sums, labels, candidates (12 MB each), then all freed
    arrays = [np.ones(3 << 20, dtype=np.int32) for _ in range(4)]
    return sum(int(a[::1024].sum()) for a in arrays)
shard()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    shard()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _SCRIPT, mode], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


def test_freed_shard_arrays_are_reused_without_page_faults():
    off, on = _faults("off"), _faults("on")
    assert off >= 5 * 1000  # glibc default: the freed heap top is trimmed, and faulted back in by the next shard
    assert on < off / 20
