"""The compiled labeller (``kernels/_labeller.c``): a CompiledProfile as C tables, and the call.

The C loop reads the rules of ``spans.generic.label`` token by token; its tables are
built here once per profile and kept alive with it. The wrapper checks what C must
not be handed (offsets outside the id buffer above all): a row layout it rejects is
labelled by the numpy reference instead, which validates nothing because it
indexes safely.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from .labels import Labels
from .profile import CompiledProfile

#: kind bits per id, as kernels/_labeller.c reads them
K_OPENER, K_END, K_SUB, K_AFTER, K_EOS, K_MERGES = 1, 2, 4, 8, 16, 32

_P, _I64 = ctypes.c_void_p, ctypes.c_int64


class _Profile(ctypes.Structure):
    """Mirror of ``dc_profile`` in kernels/_labeller.c (field order matters)."""

    _fields_ = [("n_ids", _I64), ("lowest_stop", _I64), ("kind", _P), ("opener_index", _P), ("end_code", _P),
                ("n_end_codes", _I64), ("n_specs", _I64), ("core_start", _P), ("core_len", _P), ("core_ids", _P),
                ("until", _P), ("tail", _P), ("tail_merges", _P), ("role", _P), ("body", _P), ("needs_end", _P),
                ("closed_by_next", _P), ("is_bos", _P), ("inside", _P), ("inside_after", _P), ("free_role", _P),
                ("accepts", _P), ("opener_specs_start", _P), ("opener_specs", _P), ("unknown_len", _P),
                ("unknown_tail", _P), ("unknown_tail_merges", _P), ("unknown_until", _P), ("n_subs", _I64),
                ("sub_open", _P), ("sub_close", _P), ("sub_role", _P), ("sub_within", _P), ("sub_stops", _P),
                ("body_subs", _P), ("plain", _P), ("ends_row", _P)]


def _kind_bits(cp: CompiledProfile) -> np.ndarray:
    """The ``K_*`` bits of every id: what the C loop must notice when it meets that token."""
    size = cp.size
    kind = np.zeros(size, dtype=np.uint8)
    kind[cp.opener] |= K_OPENER
    kind[cp.is_end] |= K_END
    for s in cp.profile.subs:
        kind[s.open] |= K_SUB
        if s.close is not None:
            kind[s.close] |= K_SUB
    kind[cp.after_end] |= K_AFTER
    kind[cp.is_eos] |= K_EOS
    kind[cp.merges_tail[:size]] |= K_MERGES
    return kind


def _opener_index(cp: CompiledProfile) -> np.ndarray:
    """By id: the opener's position in ``cp.opener_ids`` (-1: the id opens no turn)."""
    opener_index = np.full(cp.size, -1, dtype=np.int32)
    opener_index[list(cp.opener_ids)] = np.arange(len(cp.opener_ids), dtype=np.int32)
    return opener_index


def _core_arrays(cp: CompiledProfile) -> dict[str, np.ndarray]:
    """Every spec's core ids in one flat buffer, with each spec's start and length (spec 0: a placeholder)."""
    specs = cp.headers  # matching order; spec index = position + 1
    core_len = np.array([1] + [len(h.core) for h in specs], dtype=np.int64)
    core_ids = np.array([0] + [i for h in specs for i in h.core], dtype=np.int64)
    core_start = np.concatenate(([0], np.cumsum(core_len)[:-1])).astype(np.int64)
    return {"core_start": core_start, "core_len": core_len, "core_ids": core_ids}


def _spec_arrays(cp: CompiledProfile) -> dict[str, np.ndarray]:
    """The per-spec tables (index spec + 1) in the dtypes C reads."""
    return {
        "until": np.ascontiguousarray(cp.spec_until, dtype=np.int64),
        "tail": np.ascontiguousarray(cp.spec_tail, dtype=np.int64),
        "tail_merges": cp.spec_tail_merges.astype(np.uint8),
        "role": np.ascontiguousarray(cp.spec_role, dtype=np.uint8),
        "body": np.ascontiguousarray(cp.spec_body, dtype=np.uint8),
        "needs_end": cp.spec_needs_end.astype(np.uint8),
        "closed_by_next": cp.spec_closed_by_next.astype(np.uint8),
        "is_bos": np.concatenate(([False], cp.is_bos_spec)).astype(np.uint8),
        "inside": np.ascontiguousarray(cp.spec_inside, dtype=np.uint8),
        "inside_after": np.ascontiguousarray(cp.spec_inside_after, dtype=np.int64),
        "free_role": np.ascontiguousarray(cp.spec_free, dtype=np.uint8),
        "accepts": np.ascontiguousarray(cp.accepts, dtype=np.uint8),
    }


def _opener_spec_arrays(cp: CompiledProfile) -> dict[str, np.ndarray]:
    """The specs each opener id may start, grouped by opener in matching order, with each group's start."""
    per_opener: list[list[int]] = [[] for _ in cp.opener_ids]
    for si, h in enumerate(cp.headers, 1):
        per_opener[cp.opener_ids.index(h.core[0])].append(si)
    starts = np.concatenate(([0], np.cumsum([len(x) for x in per_opener]))).astype(np.int64)
    return {"opener_specs_start": starts,
            "opener_specs": np.array([si for x in per_opener for si in x] or [0], dtype=np.int64)}


def _unknown_arrays(cp: CompiledProfile) -> dict[str, np.ndarray]:
    """Per opener: the shape of a header of an unknown role it starts, in the dtypes C reads."""
    return {
        "unknown_len": np.ascontiguousarray(cp.unknown_len, dtype=np.int64),
        "unknown_tail": np.ascontiguousarray(cp.unknown_tail, dtype=np.int64),
        "unknown_tail_merges": cp.unknown_tail_merges.astype(np.uint8),
        "unknown_until": np.ascontiguousarray(cp.unknown_until, dtype=np.int64),
    }


def _sub_arrays(cp: CompiledProfile) -> dict[str, np.ndarray]:
    """The sub-span tables (one row each, a placeholder row when there are none) and, by body role, a bit
    per sub-span that may open there."""
    subs = cp.profile.subs
    arrays = {
        "sub_open": np.array([s.open for s in subs] or [0], dtype=np.int64),
        "sub_close": np.array([s.close if s.close is not None else -1 for s in subs] or [0], dtype=np.int64),
        "sub_role": np.array([s.role for s in subs] or [0], dtype=np.uint8),
        "sub_within": np.zeros((max(1, len(subs)), 256), dtype=np.uint8),
        "sub_stops": np.array([s.stops for s in subs] or [False], dtype=np.uint8),
    }
    body_subs = np.zeros(256, dtype=np.uint32)  # by body role: a bit per sub-span that may open there
    for k, s in enumerate(subs):
        arrays["sub_within"][k, list(s.within)] = 1
        body_subs[list(s.within)] |= np.uint32(1 << k)
    arrays["body_subs"] = body_subs
    return arrays


def _struct(cp: CompiledProfile, a: dict[str, np.ndarray]) -> _Profile:
    """The ``dc_profile`` pointing into the arrays ``a``, which must outlive it."""
    size = cp.size
    stop = np.flatnonzero(a["kind"] & (K_OPENER | K_END | K_SUB | K_EOS))
    return _Profile(
        size, int(stop[0]) if len(stop) else size, a["kind"].ctypes.data, a["opener_index"].ctypes.data,
        a["end_code"].ctypes.data, cp.accepts.shape[1], len(cp.headers), a["core_start"].ctypes.data,
        a["core_len"].ctypes.data, a["core_ids"].ctypes.data, a["until"].ctypes.data, a["tail"].ctypes.data,
        a["tail_merges"].ctypes.data, a["role"].ctypes.data, a["body"].ctypes.data, a["needs_end"].ctypes.data,
        a["closed_by_next"].ctypes.data, a["is_bos"].ctypes.data, a["inside"].ctypes.data,
        a["inside_after"].ctypes.data, a["free_role"].ctypes.data, a["accepts"].ctypes.data,
        a["opener_specs_start"].ctypes.data, a["opener_specs"].ctypes.data, a["unknown_len"].ctypes.data,
        a["unknown_tail"].ctypes.data, a["unknown_tail_merges"].ctypes.data, a["unknown_until"].ctypes.data,
        len(cp.profile.subs), a["sub_open"].ctypes.data, a["sub_close"].ctypes.data, a["sub_role"].ctypes.data,
        a["sub_within"].ctypes.data, a["sub_stops"].ctypes.data, a["body_subs"].ctypes.data,
        a["plain"].ctypes.data, a["ends_row"].ctypes.data)


class KernelTables:
    """The C view of one CompiledProfile; holds the numpy arrays the struct points into."""

    MAX_SUBS = 16

    def __init__(self, cp: CompiledProfile) -> None:
        prof = cp.profile
        if len(prof.subs) > self.MAX_SUBS:
            raise ValueError(f"profile {prof.name}: {len(prof.subs)} sub-spans, "
                             f"the compiled labeller takes {self.MAX_SUBS}")
        self.arrays: dict[str, np.ndarray] = {
            "kind": _kind_bits(cp), "opener_index": _opener_index(cp),
            "end_code": np.ascontiguousarray(cp.end_code, dtype=np.uint8),
            **_core_arrays(cp), **_spec_arrays(cp), **_opener_spec_arrays(cp), **_unknown_arrays(cp),
            **_sub_arrays(cp),
            "plain": np.ascontiguousarray(cp.plain, dtype=np.uint8),
            "ends_row": cp.spec_ends_row.astype(np.uint8),
        }
        self.struct = _struct(cp, self.arrays)


def _functions() -> dict[str, Any] | None:
    """The two labeller variants from the kernels library, or None when the numpy references run."""
    from ..kernels import compiled as kernels

    lib = kernels.loaded_library()
    return None if lib is None else {"i32": lib["label_profile_i32"], "i64": lib["label_profile_i64"]}


def available() -> bool:
    return _functions() is not None


def _tables(cp: CompiledProfile) -> KernelTables:
    tables = cp.__dict__.get("_kernel_tables")
    if tables is None:
        tables = cp.__dict__["_kernel_tables"] = KernelTables(cp)
    return tables


def rows_ok(offsets: np.ndarray, n: int) -> bool:
    """What C needs of a row layout: offsets non-decreasing, from 0 to exactly ``n``."""
    return len(offsets) >= 1 and offsets[0] == 0 and offsets[-1] == n and bool((np.diff(offsets) >= 0).all())


def label(ids: np.ndarray, offsets: np.ndarray, cp: CompiledProfile, max_len: int) -> Labels:
    """Labels from the compiled loop; ``ids`` int32 or int64, ``offsets`` int64 (checked: see rows_ok)."""
    fns = _functions()
    if fns is None:
        raise RuntimeError("the compiled labeller is not available")
    if ids.dtype not in (np.int32, np.int64):
        raise TypeError(f"ids: expected int32 or int64, got {ids.dtype}")
    ids = np.ascontiguousarray(ids)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    n = len(ids)
    if not rows_ok(offsets, n):
        raise ValueError("offsets must be non-decreasing and inside the id buffer")
    tables = _tables(cp)
    role = np.empty(n, np.uint8)
    boundary = np.empty(n, np.bool_)
    problem = np.empty(n, np.uint8)
    starts, run_role, row_first = np.empty(n, np.int64), np.empty(n, np.uint8), np.empty(n, np.bool_)
    boundary_at, noted = np.empty(n + 1, np.int64), np.zeros(2, np.int64)
    k = fns["i32" if ids.dtype == np.int32 else "i64"](
        ids.ctypes.data, offsets.ctypes.data, len(offsets) - 1, ctypes.addressof(tables.struct), max_len,
        role.ctypes.data, boundary.ctypes.data, problem.ctypes.data, starts.ctypes.data, run_role.ctypes.data,
        row_first.ctypes.data, boundary_at.ctypes.data, noted.ctypes.data)
    return Labels(role, boundary, problem, starts[:k].copy(), run_role[:k].copy(), row_first[:k].copy(),
                  boundary_at[:noted[0]].copy(), int(noted[1]))
