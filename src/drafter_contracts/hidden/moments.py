"""Sum and sum of squares of every (position, layer) vector of a stored hidden-states tensor.

One compiled pass over the file's bytes (``_hs_kernels.c``, built by ``pip install`` like the token
kernels, opened with ctypes) or, without a compiler or with ``DRAFTER_CONTRACTS_KERNELS=numpy``, the
numpy formulation ``moments_reference`` (decode to float32, square-sum, sum: three passes). The two
agree to float32 rounding (tests/test_hidden_states.py), not bit for bit: the kernel sums in 16 lanes.
"""

from __future__ import annotations

import ctypes
import os
from functools import lru_cache
from pathlib import Path

import numpy as np

from .reader import FP8_E4M3, FP8_E5M2, Decoder

ABI_VERSION = 1
_TABLES = {"F8_E4M3": FP8_E4M3, "F8_E5M2": FP8_E5M2}


@lru_cache(maxsize=1)
def library() -> ctypes.CDLL | None:
    if os.environ.get("DRAFTER_CONTRACTS_KERNELS", "").strip().lower() == "numpy":
        return None
    here = Path(__file__).resolve().parent
    for path in sorted(here.glob("_hs_kernels*.so")):
        lib = ctypes.CDLL(str(path))
        lib.hs_abi_version.restype = ctypes.c_int64
        if lib.hs_abi_version() != ABI_VERSION:
            continue
        dbl = np.ctypeslib.ndpointer(np.float64, flags="C_CONTIGUOUS")
        lib.hs_bf16_moments.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, dbl, dbl]
        lib.hs_f8_moments.argtypes = [ctypes.c_void_p, np.ctypeslib.ndpointer(np.float32, flags="C_CONTIGUOUS"),
                                      ctypes.c_int64, ctypes.c_int64, dbl, dbl]
        return lib
    return None


def backend() -> str:
    return "c" if library() is not None else "numpy"


def moments_reference(raw, dtype: str, rows: int, hidden: int,
                      decoder: Decoder | None = None) -> tuple[np.ndarray, np.ndarray]:
    x = (decoder or Decoder()).decode(raw, dtype, rows * hidden).reshape(rows, hidden)
    return x.sum(axis=1, dtype=np.float64), np.einsum("ij,ij->i", x, x, dtype=np.float64)


def moments(raw, dtype: str, rows: int, hidden: int, decoder: Decoder | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(sum, sum of squares) as float64 arrays of ``rows`` (= positions x layers) vectors of ``hidden`` values."""
    lib = library()
    if lib is None or dtype not in ("BF16", "F8_E4M3", "F8_E5M2"):
        return moments_reference(raw, dtype, rows, hidden, decoder)
    buf = np.frombuffer(raw, dtype=np.uint8, count=rows * hidden * (2 if dtype == "BF16" else 1))
    s, q = np.empty(rows, np.float64), np.empty(rows, np.float64)
    if dtype == "BF16":
        lib.hs_bf16_moments(buf.ctypes.data, rows, hidden, s, q)
    else:
        lib.hs_f8_moments(buf.ctypes.data, _TABLES[dtype], rows, hidden, s, q)
    return s, q
