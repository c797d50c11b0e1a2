"""Compiled per-token loops over a shard's flattened Arrow buffers (``kernels/_kernels.c``).

Most of the per-shard work is numpy over the flat ``values`` + ``offsets`` of a
shard. A few steps are a state machine or a scatter-add that numpy can only
express as dozens of passes over the data (the span labeller is ~100 numpy
calls over its events); here each is one compiled pass over the same buffers,
with no Python loop per row or per token. Every kernel has a numpy formulation
elsewhere in the package that the tests hold it to, bit for bit. The span
labeller (``kernels/_labeller.c``, built into the same library) is called through
``spans/kernel.py``, which builds its profile tables.

Why C compiled at install time rather than a JIT: a JIT makes every pytest-xdist
worker import the compiler and load its cached machine code before its first
shard (for numba ~0.5 s, more than any other fixed cost of a worker), while a
shared library opens in about a millisecond. It holds no Python object, so it is
opened with ctypes and its build needs a C compiler only.

Each wrapper below takes numpy arrays (outputs filled in place) and plain ints. The
wrappers check dtypes and contiguity, because C trusts its pointers, and pick
the int32 or int64 variant; ids of any other integer dtype are widened to int64,
which is exact (the loops read ids as int64 or, for hashing, as their uint64 bits).
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from . import numpy_loops as reference
from ..errors import UsageProblem
from ..errors import InvalidBuffers

#: ``numpy``: run the numpy references (as an install without a C compiler does); a path: load
#: that build of ``kernels/_kernels.c`` instead of the package's (the sanitizer build, ``.ci/sanitize``).
KERNELS_ENV = "DRAFTER_CONTRACTS_KERNELS"
#: What the numpy references cost against the compiled loops on the benchmark (docs/reliability.md).
NUMPY_SLOWDOWN = "about 12x slower per token (docs/reliability.md)"

#: What ``dc_abi_version`` must return: raised with every change of a kernel's signature or of ``dc_profile``.
ABI_VERSION = 9
_P, _I64, _I32, _U64 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_uint64

#: argument types per exported function family (the _i32/_i64, _p32/_p64, _c32/_c64 variants share them)
_SIGNATURES: dict[str, tuple[Any, tuple]] = {
    "drain_counts": (_I64, (_P, _I64, _P, _P)),
    "prefix_count": (None, (_P, _I64, _P)),
    "row_hash_sums": (None, (_P, _P, _I32, _P, _I64, _U64, _P)),
    "token_pass": (None, (_P, _P, _P, _I64, _U64, _I64, _P, _P, _P, _P)),
    "reply_lengths": (None, (_P, _P, _P, _P, _P, _I64, _P, _I64, _P, _P, _I64, _I64, _P)),
    "run_totals": (None, (_P, _P, _P, _I64, _P, _I32, _P, _P)),
    "assistant_turns": (_I64, (_P, _P, _P, _P, _I64, _P, _P, _P, _P)),
    # kernels/_labeller.c: the labeller for any template profile (spans/kernel.py builds its table struct)
    "label_profile": (_I64, (_P, _P, _I64, _P, _I64, _P, _P, _P, _P, _P, _P, _P, _P)),
}
_VARIANTS = {
    "drain_counts": ("c32", "c64"), "prefix_count": ("p32", "p64"),
    "row_hash_sums": ("i32", "i64"), "token_pass": ("i32_p32", "i64_p32", "i32_p64", "i64_p64"),
    "reply_lengths": ("i32", "i64"), "run_totals": ("p32", "p64"), "assistant_turns": ("",),
    "label_profile": ("i32", "i64"),
}


def library_path() -> Path | None:
    """The built ``_kernels`` shared library in the package folder, or None when it was never built."""
    here = Path(__file__).parent
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = here / f"_kernels{suffix}"
        if candidate.is_file():
            return candidate
    return None


@lru_cache(maxsize=1)
def loaded_library() -> dict[str, Any] | None:
    """Open the library once per process and type every function it exports; None: the numpy references.

    An install without a C compiler has no library (``setup.py`` builds it as an optional
    extension): the wrappers then run ``kernels/numpy_loops.py``, with the same checks and results.
    A library that is there but unusable (another ABI, a failed load) is a usage error:
    it means a stale or broken build, which a rebuild fixes.
    """
    choice = os.environ.get(KERNELS_ENV, "").strip()
    if choice.lower() == "numpy":
        return None
    path = Path(choice).expanduser() if choice else library_path()
    if path is None:
        return None
    if not path.is_file():
        raise UsageProblem(f"${KERNELS_ENV}={choice}: no such file; pass a built _kernels library, 'numpy', "
                           "or unset it")
    try:
        lib = ctypes.CDLL(str(path))
        version = lib.dc_abi_version()
    except (OSError, AttributeError) as exc:
        raise UsageProblem(f"{path}: cannot load the compiled kernels ({exc}); reinstall the package with "
                           "'pip install -e .' on this machine") from None
    if version != ABI_VERSION:
        raise UsageProblem(f"{path}: compiled kernels are version {version}, this code needs {ABI_VERSION}; "
                           "rebuild them with 'pip install -e .'")
    out: dict[str, Any] = {}
    for family, (restype, argtypes) in _SIGNATURES.items():
        for variant in _VARIANTS[family]:
            name = f"{family}_{variant}" if variant else family
            fn = getattr(lib, f"dc_{name}")
            fn.restype, fn.argtypes = restype, argtypes
            out[name] = fn
    return out


def load() -> Path | None:
    """Open the library now (a broken build is a usage error, not a test error); its path, or None
    when the numpy references run (no library built, or ``$DRAFTER_CONTRACTS_KERNELS=numpy``)."""
    if loaded_library() is None:
        return None
    choice = os.environ.get(KERNELS_ENV, "").strip()
    return Path(choice).expanduser() if choice else library_path()


def backend() -> dict[str, Any]:
    """Which loops run and why, for summary.json and the warning line."""
    path = load()
    if path is not None:
        return {"backend": "c", "library": str(path)}
    why = (f"${KERNELS_ENV}=numpy" if os.environ.get(KERNELS_ENV, "").strip().lower() == "numpy"
           else "the compiled kernels (kernels/_kernels.c) were not built: no C compiler at install time?")
    return {"backend": "numpy", "library": None, "why": why}


def fallback_warning() -> str | None:
    """One line when the numpy references run: that they do, why, what it costs, how to get C back."""
    info = backend()
    if info["backend"] == "c":
        return None
    return (f"WARNING drafter-contracts: {info['why']}; the numpy reference loops run instead, {NUMPY_SLOWDOWN} "
            "(same results); reinstall with a C compiler ('pip install -e .') for the compiled ones")


def _ptr(a: np.ndarray, dtypes: tuple[type, ...], name: str, writable: bool = False) -> int:
    """The data pointer of a C-contiguous array of one of ``dtypes`` (bool counts as uint8)."""
    if not isinstance(a, np.ndarray) or a.dtype.type not in dtypes or not a.flags.c_contiguous:
        got = (f"{a.dtype}{'' if a.flags.c_contiguous else ', not contiguous'}" if isinstance(a, np.ndarray)
               else type(a).__name__)
        raise TypeError(f"{name}: expected a contiguous {'/'.join(d.__name__ for d in dtypes)} array, got {got}")
    if writable and not a.flags.writeable:
        raise ValueError(f"{name}: the output array is read-only")
    return a.ctypes.data


def _ids(ids: np.ndarray) -> tuple[np.ndarray, str]:
    """ids as int32 or int64 (other integer dtypes widened to int64, wrapping as numpy's cast does)."""
    if ids.dtype == np.int32 or ids.dtype == np.int64:
        return np.ascontiguousarray(ids), "i32" if ids.dtype == np.int32 else "i64"
    if not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"ids: expected integers, got {ids.dtype}")
    return ids.astype(np.int64), "i64"


def _width(a: np.ndarray, name: str, kind: str) -> str:
    if a.dtype == np.int32:
        return f"{kind}32"
    if a.dtype == np.int64:
        return f"{kind}64"
    raise TypeError(f"{name}: expected int32 or int64, got {a.dtype}")


_FLAGS = (np.bool_, np.uint8)


def _check_offsets(offsets: np.ndarray, n: int) -> None:
    """Offsets the loops may trust: at least one, inside [0, n], never decreasing (else C reads or
    writes past its buffers). One pass over the rows, not the tokens; ``InvalidBuffers`` is a data
    defect the engine reports as such."""
    if not isinstance(offsets, np.ndarray) or offsets.ndim != 1 or len(offsets) == 0:
        raise InvalidBuffers("offsets: expected a non-empty 1-d array")
    if offsets[0] < 0 or offsets[-1] > n:
        raise InvalidBuffers(f"offsets: must start at or after 0 and end at or before {n} (got {int(offsets[0])}.."
                             f"{int(offsets[-1])})")
    if len(offsets) > 1 and np.any(offsets[1:] < offsets[:-1]):
        at = int(np.flatnonzero(offsets[1:] < offsets[:-1])[0])
        raise InvalidBuffers(f"offsets: decrease at row {at} ({int(offsets[at])} -> {int(offsets[at + 1])})")


def drain_counts(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The non-zero entries of ``counts`` as (int32 ids in order, int64 counts), zeroing them: the
    dense array is a per-process buffer, clean again for the next shard. The outputs are sized
    here, from one count of the non-zero entries, so C cannot write past them."""
    kind = _width(counts, "counts", "c")
    k = int(np.count_nonzero(counts))
    ids_out, counts_out = np.empty(k, dtype=np.int32), np.empty(k, dtype=np.int64)
    lib = loaded_library()
    if lib is None:
        reference.drain_counts(counts, ids_out, counts_out)
        return ids_out, counts_out
    lib[f"drain_counts_{kind}"](_ptr(counts, (np.int32, np.int64), "counts", True), len(counts),
                                   _ptr(ids_out, (np.int32,), "ids_out", True),
                                   _ptr(counts_out, (np.int64,), "counts_out", True))
    return ids_out, counts_out


def prefix_count(flags: np.ndarray, out: np.ndarray) -> None:
    """``out[i]`` = true values among ``flags[:i]`` (``out`` has one more element than ``flags``)."""
    if len(out) != len(flags) + 1:
        raise ValueError(f"prefix_count: out has {len(out)} elements for {len(flags)} flags")
    lib = loaded_library()
    if lib is None:
        _ptr(flags, _FLAGS, "flags"), _ptr(out, (np.int32, np.int64), "out", True)  # the same refusals
        return reference.prefix_count(flags, out)
    lib[f"prefix_count_{_width(out, 'out', 'p')}"](_ptr(flags, _FLAGS, "flags"), len(flags),
                                                      _ptr(out, (np.int32, np.int64), "out", True))


def row_hash_sums(ids: np.ndarray, mask: np.ndarray, has_mask: bool, offsets: np.ndarray, r: int,
                  out: np.ndarray) -> None:
    """``out[i] = sum_j (2 id_j + mask_j) r^j  (mod 2^64)`` over the positions j of row i
    (ids taken as their uint64 bits, as numpy's unsafe cast does)."""
    ids, kind = _ids(ids)
    _check_offsets(offsets, len(ids))
    if has_mask and len(mask) < len(ids):
        raise ValueError("row_hash_sums: the mask is shorter than the ids")
    if len(out) < len(offsets) - 1:
        raise ValueError("row_hash_sums: out is shorter than the rows")
    lib = loaded_library()
    if lib is None:
        _ptr(mask, _FLAGS, "mask"), _ptr(offsets, (np.int64,), "offsets"), _ptr(out, (np.uint64,), "out", True)
        return reference.row_hash_sums(ids, mask, has_mask, offsets, r, out)
    lib[f"row_hash_sums_{kind}"](_ptr(ids, (np.int32, np.int64), "ids"), _ptr(mask, _FLAGS, "mask"),
                                    int(bool(has_mask)), _ptr(offsets, (np.int64,), "offsets"), len(offsets) - 1,
                                    int(r), _ptr(out, (np.uint64,), "out", True))


def token_pass(ids: np.ndarray, mask: np.ndarray, offsets: np.ndarray, r: int, limit: int, prefix: np.ndarray,
               counts: np.ndarray, sums: np.ndarray, outside: np.ndarray) -> None:
    """:func:`prefix_count`, the supervised-id counts (``counts[t] += 1`` for each supervised ``t``
    in ``[0, limit)``: ``bincount(ids[mask])`` without materialising ``ids[mask]``; other ids are
    ids_known's), :func:`row_hash_sums` (with a mask) and the number of ids outside ``[0, limit)``
    (into ``outside[0]``, int64) in one pass. Apart, each read the shard's ids and mask again.
    ``offsets`` must run from 0 to ``len(ids)``; ``prefix`` and ``counts`` share one width, int32
    for shards under 2**31 tokens.
    """
    ids, kind = _ids(ids)
    n = len(ids)
    _check_offsets(offsets, n)
    if offsets[0] != 0 or offsets[-1] != n or len(mask) != n or len(prefix) != n + 1:
        raise ValueError("token_pass: offsets must run from 0 to len(ids), with a mask of len(ids) and a prefix of "
                         "one more")
    if len(sums) < len(offsets) - 1 or len(counts) < limit or prefix.dtype != counts.dtype or len(outside) != 1:
        raise ValueError("token_pass: sums shorter than the rows, counts shorter than limit, prefix and counts of two "
                         "widths, or not one element for the outside count")
    lib = loaded_library()
    if lib is None:
        for a, dtypes, name, writable in ((mask, _FLAGS, "mask", False), (offsets, (np.int64,), "offsets", False),
                                     (prefix, (np.int32, np.int64), "prefix", True),
                                     (counts, (np.int32, np.int64), "counts", True), (sums, (np.uint64,), "sums", True),
                                     (outside, (np.int64,), "outside", True)):
            _ptr(a, dtypes, name, writable)
        return reference.token_pass(ids, mask, offsets, r, limit, prefix, counts, sums, outside)
    lib[f"token_pass_{kind}_{_width(prefix, 'prefix', 'p')}"](
        _ptr(ids, (np.int32, np.int64), "ids"), _ptr(mask, _FLAGS, "mask"), _ptr(offsets, (np.int64,), "offsets"),
        len(offsets) - 1, int(r), int(limit), _ptr(prefix, (np.int32, np.int64), "prefix", True),
        _ptr(counts, (np.int32, np.int64), "counts", True), _ptr(sums, (np.uint64,), "sums", True),
        _ptr(outside, (np.int64,), "outside", True))


def reply_lengths(ids: np.ndarray, role: np.ndarray, boundary: np.ndarray, is_part: np.ndarray, blank: np.ndarray,
                  markers: np.ndarray, t_start: np.ndarray, t_end: np.ndarray, cap: int, out: np.ndarray) -> None:
    """``out[i]``: reply-text tokens in [t_start[i], t_end[i]), exact up to ``cap``, else ``cap + 1``.

    A text token has a role in ``is_part``, is no boundary token, no ``blank`` id (ids
    clipped into the table, as numpy's ``take(mode="clip")``) and no marker. Each turn is
    read only until its count passes ``cap``: a normal reply stops after a few tokens.
    """
    ids, kind = _ids(ids)
    n_turns = len(t_start)
    if len(t_end) != n_turns or len(out) < n_turns or len(is_part) < 256 or not len(blank):
        raise ValueError("reply_lengths: t_end/out shorter than t_start, is_part under 256 codes, or an empty "
                         "blank table")
    if n_turns and (t_start.min() < 0 or t_end.max() > min(len(ids), len(role), len(boundary))):
        raise ValueError("reply_lengths: a turn reaches past the ids")
    lib = loaded_library()
    if lib is None:
        for a, dtypes, name, writable in ((role, (np.uint8,), "role", False), (boundary, _FLAGS, "boundary", False),
                                     (is_part, _FLAGS, "is_part", False), (blank, _FLAGS, "blank", False),
                                     (markers, (np.int64,), "markers", False), (t_start, (np.int64,), "t_start", False),
                                     (t_end, (np.int64,), "t_end", False), (out, (np.int64,), "out", True)):
            _ptr(a, dtypes, name, writable)
        return reference.reply_lengths(ids, role, boundary, is_part, blank, markers, t_start, t_end, cap, out)
    lib[f"reply_lengths_{kind}"](
        _ptr(ids, (np.int32, np.int64), "ids"), _ptr(role, (np.uint8,), "role"), _ptr(boundary, _FLAGS, "boundary"),
        _ptr(is_part, _FLAGS, "is_part"), _ptr(blank, _FLAGS, "blank"), len(blank),
        _ptr(markers, (np.int64,), "markers"), len(markers), _ptr(t_start, (np.int64,), "t_start"),
        _ptr(t_end, (np.int64,), "t_end"), n_turns, int(cap), _ptr(out, (np.int64,), "out", True))


def run_totals(role: np.ndarray, start: np.ndarray, end: np.ndarray, prefix: np.ndarray, has_prefix: bool,
               counts: np.ndarray, sums: np.ndarray) -> None:
    """Per code: the length of its runs [start, end) and, with a prefix sum, the flags under them."""
    n = len(role)
    if len(start) != n or len(end) != n:
        raise ValueError("run_totals: role, start and end differ in length")
    if n and (int(role.max()) >= min(len(counts), len(sums))
              or (has_prefix and (min(start.min(), end.min()) < 0 or max(start.max(), end.max()) >= len(prefix)))):
        raise ValueError("run_totals: a code beyond counts/sums, or a run beyond the prefix")
    lib = loaded_library()
    if lib is None:
        for a, dtypes, name, writable in ((role, (np.uint8,), "role", False), (start, (np.int64,), "start", False),
                                     (end, (np.int64,), "end", False), (prefix, (np.int32, np.int64), "prefix", False),
                                     (counts, (np.int64,), "counts", True), (sums, (np.int64,), "sums", True)):
            _ptr(a, dtypes, name, writable)
        return reference.run_totals(role, start, end, prefix, has_prefix, counts, sums)
    lib[f"run_totals_{_width(prefix, 'prefix', 'p')}"](
        _ptr(role, (np.uint8,), "role"), _ptr(start, (np.int64,), "start"), _ptr(end, (np.int64,), "end"), n,
        _ptr(prefix, (np.int32, np.int64), "prefix"), int(bool(has_prefix)),
        _ptr(counts, (np.int64,), "counts", True), _ptr(sums, (np.int64,), "sums", True))


def assistant_turns(role: np.ndarray, start: np.ndarray, end: np.ndarray, row_first: np.ndarray,
                    is_turn: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The assistant turns of a shard from its role runs (``checks.content.RoleRuns``): each turn's
    first position, one past its last, and whether it holds an ASSISTANT_END run.

    A turn is a maximal sequence of runs whose role ``is_turn`` (a 256-entry table), never
    crossing a row start (``row_first``); ``checks.content.assistant_turns_reference`` says the
    same in numpy.
    """
    n = len(role)
    if len(start) != n or len(end) != n or len(row_first) != n or len(is_turn) < 256:
        raise ValueError("assistant_turns: role, start, end and row_first differ in length, or is_turn under 256 codes")
    turn_start, turn_end, closed = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.bool_)
    lib = loaded_library()
    if lib is None:
        for a, dtypes, name in ((role, (np.uint8,), "role"), (start, (np.int64,), "start"), (end, (np.int64,), "end"),
                                (row_first, _FLAGS, "row_first"), (is_turn, _FLAGS, "is_turn")):
            _ptr(a, dtypes, name)
        k = reference.assistant_turns(role, start, end, row_first, is_turn, turn_start, turn_end, closed)
        return turn_start[:k], turn_end[:k], closed[:k]
    k = int(lib["assistant_turns"](
        _ptr(role, (np.uint8,), "role"), _ptr(start, (np.int64,), "start"), _ptr(end, (np.int64,), "end"),
        _ptr(row_first, _FLAGS, "row_first"), n, _ptr(is_turn, _FLAGS, "is_turn"),
        _ptr(turn_start, (np.int64,), "turn_start", True), _ptr(turn_end, (np.int64,), "turn_end", True),
        _ptr(closed, _FLAGS, "closed", True)))
    return turn_start[:k], turn_end[:k], closed[:k]
