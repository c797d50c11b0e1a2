"""The one labelling entry point: a compiled profile and a flattened shard -> :class:`Labels`.

Every caller (the engine, explanations, the properties' oracle) labels through
``SpanOracle.label``, which comes here. The backend is chosen here and nowhere else:
the compiled loop (``spans/kernel.py``) when the C library is built and the row
layout is one it accepts, else the numpy reference (``generic.label``), which the
compiled loop is held to bit for bit.
"""

from __future__ import annotations

import numpy as np

from . import generic, kernel
from .labels import Labels
from .profile import CompiledProfile


def label(ids: np.ndarray, offsets: np.ndarray, cp: CompiledProfile, max_len: int) -> Labels:
    """Labels of every token of ``ids`` (rows from ``offsets``) under the compiled profile."""
    ids = np.asarray(ids)
    if ids.dtype == np.uint64:  # huge ids read as int64 would turn negative; lookups clip them alike
        ids = np.minimum(ids, np.uint64(np.iinfo(np.int64).max)).astype(np.int64)
    elif ids.dtype not in (np.int32, np.int64):
        ids = ids.astype(np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    if kernel.available() and kernel.rows_ok(offsets, len(ids)):
        return kernel.label(ids, offsets, cp, max_len)
    return generic.label(ids, offsets, cp, max_len)
