"""glibc malloc settings for a process that checks shards.

Each shard allocates the same few arrays of megabytes (labels, prefix sums, masks of
candidates). glibc serves blocks that large with a fresh ``mmap`` and returns them on
free, and trims the heap's top as soon as it is freed, so every shard paid the page
faults of its arrays again: ~380,000 minor faults and ~1 s of system time over the
full-scale benchmark (docs/benchmarks.md), 15 % of the shard work. Raising the mmap threshold to glibc's
maximum (32 MB) and the trim threshold to 1 GB lets the next shard reuse the same
pages. Peak memory is unchanged (it is one shard's arrays either way); what changes
is that it stays mapped between shards instead of being returned and faulted back.
"""

from __future__ import annotations

import ctypes
import ctypes.util

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_done = False


def keep_freed_memory() -> bool:
    """Apply the settings once per process; False where there is no glibc ``mallopt`` (musl, macOS)."""
    global _done
    if _done:
        return True
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt if name else None
    except (OSError, AttributeError):
        mallopt = None
    if mallopt is None:
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    _done = bool(mallopt(_M_MMAP_THRESHOLD, 32 << 20)) & bool(mallopt(_M_TRIM_THRESHOLD, 1 << 30))
    return _done
