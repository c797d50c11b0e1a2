"""One process's view of a hidden-states run: the declared shape, and a row shard's two passes over its files.

The header pass opens each file once and reads its first 64 KiB (header and token_ids,
which safetensors writes first); the value pass then reads ``hidden_states`` in one
sequential read into a reused buffer and decodes it into a reused float32 buffer, so a
worker's memory is one file's tensor whatever the number of files. The files are those of
the rows of one row shard (file ``hs_{i}`` belongs to row i), checked in that shard's test;
what the controller needs (rows without a file, per-row norm summaries, fingerprints at
shared prefixes, bytes read) travels as partials and figures of the shard's report
(``contracts.py`` declares which).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..dataset.reader import SavedDataset
from ..dataset.columns import Shard
from ..errors import UsageProblem
from ..results import CheckResult
from . import checks as C
from .plan import file_name, list_folder
from .policy import DTYPES, HiddenPolicy, read_model_config
from .moments import moments
from .reader import (DTYPE_NAMES, ITEMSIZE, Decoder, Header, HeaderError, SequentialReader, int_tensor,
                     open_header)

#: Files whose headers decide the folder's shape and dtype when nothing declares them.
CONSENSUS_FILES = 64
_HASH_BASE = np.uint64(1099511628211)
_CP_MIX = np.uint64(0x9E3779B97F4A7C15)


def prefix_keys(values: np.ndarray, offsets: np.ndarray, first_row: int = 0,
                checkpoints: np.ndarray = C.CHECKPOINTS, chunk: int = 2048
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, checkpoint position, 64-bit key of the row's first p+1 tokens) for every checkpoint p inside a row.

    Vectorised over rows: each chunk gathers the first ``checkpoints[-1] + 1`` tokens of its
    rows into a dense block and takes a polynomial hash's running sum (uint64 arithmetic wraps).
    """
    width = int(checkpoints[-1]) + 1
    powers = np.cumprod(np.full(width, _HASH_BASE, dtype=np.uint64), dtype=np.uint64)
    n = len(offsets) - 1
    out_r, out_p, out_k = [], [], []
    cols = np.arange(width, dtype=np.int64)
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        starts, lens = offsets[lo:hi], np.diff(offsets[lo:hi + 1])
        valid = cols[None, :] < lens[:, None]
        idx = np.minimum(starts[:, None] + cols[None, :], max(len(values) - 1, 0))
        block = values[idx].astype(np.uint64) + np.uint64(1) if len(values) else np.zeros(idx.shape, np.uint64)
        block[~valid] = 0
        sums = np.cumsum(block * powers[None, :], axis=1, dtype=np.uint64)[:, checkpoints]
        inside = checkpoints[None, :] < lens[:, None]
        r, c = np.nonzero(inside)
        out_r.append(r.astype(np.int64) + lo + first_row)
        out_p.append(checkpoints[c])
        out_k.append(sums[r, c] ^ (np.uint64(c.astype(np.uint64) + np.uint64(1)) * _CP_MIX if len(c) else np.uint64(0)))
    if not out_r:
        empty = np.zeros(0, np.int64)
        return empty, empty, np.zeros(0, np.uint64)
    return np.concatenate(out_r), np.concatenate(out_p), np.concatenate(out_k).astype(np.uint64)


class PrefixFilter:
    """Two Bloom filters over 64-bit prefix keys: seen once, seen more than once (2**27 bits each, two bits a key).

    32 MB whatever the dataset's size; a key seen once is reported as shared with a probability
    of about 1% at ~8 M keys (a dataset of about a million rows) (its fingerprints then travel and
    meet no other row at the controller: no verdict, a little memory).
    """

    BITS = 1 << 27

    def __init__(self) -> None:
        self.once = np.zeros(self.BITS // 8, dtype=np.uint8)
        self.twice = np.zeros(self.BITS // 8, dtype=np.uint8)

    def _slots(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keys = keys.astype(np.uint64, copy=False)
        mask = np.uint64(self.BITS - 1)
        return (keys & mask).astype(np.int64), ((keys >> np.uint64(32)) & mask).astype(np.int64)

    @staticmethod
    def _test(bits: np.ndarray, slot: np.ndarray) -> np.ndarray:
        return ((bits[slot >> 3] >> (slot & 7).astype(np.uint8)) & 1).astype(bool)

    @staticmethod
    def _set(bits: np.ndarray, slot: np.ndarray) -> None:
        np.bitwise_or.at(bits, slot >> 3, np.left_shift(1, slot & 7).astype(np.uint8))

    def add(self, keys: np.ndarray) -> None:
        uniq, counts = np.unique(keys, return_counts=True)
        a, b = self._slots(uniq)
        again = (counts > 1) | (self._test(self.once, a) & self._test(self.once, b))
        for slot in (a[again], b[again]):
            self._set(self.twice, slot)
        for slot in (a, b):
            self._set(self.once, slot)

    def seen_twice(self, keys: np.ndarray) -> np.ndarray:
        a, b = self._slots(keys)
        return self._test(self.twice, a) & self._test(self.twice, b)


@dataclass
class ShardOutcome:
    """A shard's two passes: each per-file contract's result, and what the controller's contracts need."""

    results: list[CheckResult]
    missing: np.ndarray  # rows of the shard without a file (hs_coverage)
    figures: dict[str, float]  # files and bytes read, seconds, wall clock (summed over shards)
    norms: dict[str, Any] | None  # per-row mean log-norms per layer and bucket (hs_layer_norms, hs_norm_outliers)
    prefixes: dict[str, Any] | None  # fingerprints at shared prefixes (hs_prefix_consistency)

    def result(self, check: str) -> CheckResult:
        return next(r for r in self.results if r.check == check)


@dataclass
class HiddenRun:
    """Everything a process knows about the hidden-states folder it checks."""

    folder: Path
    dataset: SavedDataset
    policy: HiddenPolicy
    verify_model: Path | None = None
    verify_rows: int = 0
    headers_only: bool = False
    #: (shard key, outcome or the exception it raised): one shard at a time, like the engine's.
    _last: tuple[tuple[int, int, int], Any] | None = field(default=None, repr=False)
    #: The controller's value verdicts, computed once for the three contracts that report them.
    verdicts: Any = field(default=None, repr=False)

    @property
    def num_rows(self) -> int:
        return self.dataset.num_rows

    @property
    def values(self) -> bool:
        return self.policy.values and not self.headers_only

    def outcome(self, shard: Shard) -> ShardOutcome:
        """The shard's passes, run once for its contracts and partials (a failure re-raised to each)."""
        key = (shard.index, shard.start, shard.stop)
        if self._last is None or self._last[0] != key:
            try:
                found: Any = self.run_shard(shard)
            except Exception as exc:  # each contract that reads the outcome fails with it
                found = exc
            self._last = (key, found)
        if isinstance(self._last[1], Exception):
            raise self._last[1]
        return self._last[1]

    def done(self, shard: Shard) -> ShardOutcome | None:
        """The shard's outcome if its passes ran and succeeded (what its partials are taken from)."""
        if self._last is None or self._last[0] != (shard.index, shard.start, shard.stop):
            return None
        return None if isinstance(self._last[1], Exception) else self._last[1]

    def describe(self) -> dict[str, Any]:
        """summary.json's ``hidden_states``: what was checked against what (the counts are in ``figures``)."""
        return {"folder": str(self.folder), "declared": self.declared.text(), "policy": self.policy.to_dict(),
                "values": self.values}

    @cached_property
    def declared(self) -> C.Declared:
        """The contract's shape and dtype, else a config.json's, else the majority of the first files."""
        p = self.policy
        layers, hidden, sources = p.num_layers, p.hidden_size, []
        if p.num_layers or p.hidden_size:
            sources.append("the contract")
        if p.config and (layers is None or hidden is None):
            c_layers, c_hidden, said = read_model_config(Path(p.config))
            layers, hidden = layers or c_layers, hidden or c_hidden
            sources.append(said)
        dtype = DTYPE_NAMES[p.dtype] if p.dtype else None
        if p.dtype:
            sources.append("dtype from the contract")
        if layers is None or hidden is None or dtype is None:
            seen: dict[tuple, int] = {}
            for i in range(min(self.num_rows, CONSENSUS_FILES * 4)):
                try:
                    fd, h = open_header(str(self.folder / file_name(i)))
                    os.close(fd)
                except (OSError, HeaderError):
                    continue
                t = h.tensors.get("hidden_states")
                if t is not None and len(t.shape) == 3:
                    key = (t.shape[1], t.shape[2], t.dtype)
                    seen[key] = seen.get(key, 0) + 1
                if sum(seen.values()) >= CONSENSUS_FILES:
                    break
            if seen:
                (l_, h_, d_), n = max(seen.items(), key=lambda kv: kv[1])
                layers, hidden, dtype = layers or l_, hidden or h_, dtype or d_
                sources.append(f"not declared: the majority of the first {sum(seen.values())} files ({n} agree)")
        return C.Declared(layers, hidden, dtype, "; ".join(sources) or "nothing declared and no readable file")

    # --- coverage: the entries no row reads (one listing) -------------------------------------------

    def extras(self) -> tuple[list[tuple[str, str]], int]:
        """(name, why) of the first entries that are no row's file, and how many there are."""
        listing = list_folder(self.folder, self.num_rows)
        return listing.extras, listing.extra_count

    # --- prefixes shared by at least two rows ---------------------------------------------------

    @cached_property
    def shared_prefixes(self) -> PrefixFilter:
        """Which (checkpoint, prefix) keys more than one row has: a fixed-size filter built from the dataset's
        input_ids once per process (the first 256 tokens of each row, in chunks), so only those positions'
        fingerprints travel, whatever the number of rows."""
        f = PrefixFilter()
        for lo in range(0, self.num_rows, 8192):  # ~4 MB per temporary of prefix_keys' 2,048-row blocks
            col = self.dataset.ids(lo, min(lo + 8192, self.num_rows))  # as the engine reads them (dataset/layouts.py)
            f.add(prefix_keys(col.values, col.offsets, lo)[2])
            self.dataset.release_pages()
        return f

    def _shard_prefixes(self, shard: Shard) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        col = self.dataset.ids(shard.start, shard.stop)
        rows, pos, keys = prefix_keys(col.values, col.offsets, shard.start)
        keep = self.shared_prefixes.seen_twice(keys)
        return rows[keep], pos[keep], keys[keep]

    # --- one shard ------------------------------------------------------------------------------

    def run_shard(self, shard: Shard) -> ShardOutcome:
        """Each file opened once: header, token_ids and (value pass) the tensor read front to back, then closed."""
        scope = shard.id
        scan = _ShardScan(C.Findings(C.HEADER, scope), C.Findings(C.SHAPE, scope), C.Findings(C.VALUES, scope),
                          _ValueWork() if self.values else None)
        if scan.work is not None:
            scan.work.prefixes = self._shard_prefixes(shard)
        started = time.time()
        for i in range(shard.start, shard.stop):
            self._scan_file(scan, i)
        return self._shard_outcome(shard, scan, started)

    def _scan_file(self, scan: _ShardScan, i: int) -> None:
        """Row ``i``'s file: its header and token_ids, then (value pass) its values; a defect is its findings'."""
        t0 = time.perf_counter()
        path = str(self.folder / file_name(i))
        try:
            fd, h = open_header(path)
        except FileNotFoundError:
            scan.no_file.append(i)  # hs_coverage names it
            return
        except HeaderError as exc:
            scan.files += 1
            scan.header.add(i, _header_reason(str(exc)), f"{file_name(i)}: {exc}")
            return
        except OSError as exc:
            scan.files += 1
            scan.header.add(i, "file cannot be read", f"{file_name(i)}: {exc.strerror or exc}")
            return
        scan.files += 1
        scan.head_bytes += len(h.head)
        in_values = False
        try:
            missing = [k for k in ("token_ids", "hidden_states") if k not in h.tensors]
            if missing:
                scan.header.add(i, "a required tensor is missing", f"{file_name(i)} lacks {', '.join(missing)} "
                                f"(holds {', '.join(sorted(h.tensors)) or 'nothing'})")
                return
            problems = C.shape_problems(h.tensors, self.declared)
            tok = h.tensors["token_ids"]
            if tok.dtype in ("I64", "I32") and len(tok.shape) == 1:
                scan.read_rows.append(i)
                scan.read_ids.append(int_tensor(h.read(fd, "token_ids"), tok.dtype))
            if problems:
                reason, detail = problems[0]
                scan.shape.add(i, reason, f"{file_name(i)}: {detail}")
                return
            scan.head_seconds += time.perf_counter() - t0
            if scan.work is not None:
                in_values = True
                self._scan_values(scan, i, fd, h)
            t0 = time.perf_counter()
        except HeaderError as exc:
            (scan.values if in_values else scan.header).add(i, "file cannot be read", f"{file_name(i)}: {exc}")
        finally:
            os.close(fd)
            scan.head_seconds += time.perf_counter() - t0

    @staticmethod
    def _scan_values(scan: _ShardScan, i: int, fd: int, h: Header) -> None:
        """The value pass over one file whose header is sound: its problem, or its norms and fingerprints kept."""
        work = scan.work
        scan.valued += 1
        t1 = time.perf_counter()
        fv, at, keys = work.file(i, fd, h)
        work.seconds += time.perf_counter() - t1
        if fv.problems:
            reason, detail, pos = fv.problems[0]
            scan.values.add(i, reason, f"{file_name(i)}: {detail}", pos)
        else:
            scan.kept.append((i, fv, at, keys))

    def _shard_outcome(self, shard: Shard, scan: _ShardScan, started: float) -> ShardOutcome:
        """The shard's four results, its missing files, figures and the partials the controller merges."""
        alignment, misaligned = self._alignment(shard, scan.read_rows, scan.read_ids)
        self.dataset.release_pages()  # the rows' ids were read through the Arrow maps: hand the pages back
        work = scan.work
        norms, prefixes = _partials(scan.kept, misaligned, self.declared, work, self.policy.prefix_rtol)
        figures = {"files": scan.files, "header_bytes": scan.head_bytes, "header_seconds": scan.head_seconds,
                   "value_bytes": work.bytes if work else 0, "value_seconds": work.seconds if work else 0.0,
                   "started_first": started, "ended_last": time.time()}
        off = "value pass off ([hidden_states] values = false or --hs-headers-only)"
        results = [scan.header.result(scan.files), scan.shape.result(scan.files - len(set(scan.header.rows))),
                   alignment,
                   scan.values.result(scan.valued) if self.values else CheckResult(C.VALUES, shard.id, skipped=off)]
        return ShardOutcome(results, np.array(scan.no_file, dtype=np.int64), figures, norms, prefixes)

    def _alignment(self, shard: Shard, rows: list[int], ids: list[np.ndarray]) -> tuple[CheckResult, set[int]]:
        lo, hi = max(0, shard.start - 1), min(self.num_rows, shard.stop + 1)
        col = self.dataset.ids(lo, hi)
        neighbours = {col.values[col.offsets[k]:col.offsets[k + 1]].astype(np.int64).tobytes(): lo + k
                      for k in range(hi - lo)}
        return C.check_alignment(shard.id, np.array(rows, dtype=np.int64), ids, col.values, col.offsets, lo, neighbours)


@dataclass
class _ShardScan:
    """What one shard's pass over its files gathers, file by file."""

    header: C.Findings
    shape: C.Findings
    values: C.Findings
    work: _ValueWork | None
    read_rows: list[int] = field(default_factory=list)
    no_file: list[int] = field(default_factory=list)
    read_ids: list[np.ndarray] = field(default_factory=list)
    kept: list[tuple[int, C.FileValues, np.ndarray, np.ndarray]] = field(default_factory=list)  # row, values, at, keys
    head_seconds: float = 0.0
    head_bytes: int = 0
    files: int = 0
    valued: int = 0


class _ValueWork:
    """The value pass's reused buffers and its running totals over one shard."""

    def __init__(self) -> None:
        self.reader, self.decoder = SequentialReader(), Decoder()
        self.prefixes: tuple[np.ndarray, np.ndarray, np.ndarray] = (
            (np.zeros(0, np.int64),) * 2 + (np.zeros(0, np.uint64),))
        self.bytes = 0
        self.seconds = 0.0

    def file(self, row: int, fd: int, h: Any) -> tuple[C.FileValues, np.ndarray, np.ndarray]:
        t = h.tensors["hidden_states"]
        s, layers, hidden = t.shape
        try:
            os.posix_fadvise(fd, t.begin, t.nbytes, os.POSIX_FADV_SEQUENTIAL)
        except (AttributeError, OSError):
            pass
        raw = self.reader.read(fd, t.begin, t.nbytes)
        self.bytes += t.nbytes
        tot, sq = moments(raw, t.dtype, s * layers, hidden, self.decoder)
        scales = None
        if "hidden_states_scales" in h.tensors and t.dtype.startswith("F8"):
            scales = np.frombuffer(h.read(fd, "hidden_states_scales"), dtype=np.float32)
        p_rows, p_pos, p_keys = self.prefixes
        lo, hi = np.searchsorted(p_rows, [row, row + 1])
        fv = C.file_values(tot.reshape(s, layers), sq.reshape(s, layers), hidden, scales, p_pos[lo:hi],
                           _positions(raw, t.dtype, layers, hidden, self.decoder))
        return fv, p_pos[lo:hi], p_keys[lo:hi]


def _partials(kept: list, misaligned: set[int], declared: C.Declared, work: _ValueWork | None,
             rtol: float) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """What the controller needs of the value pass (None without one); misaligned rows' states are another
    row's: left out. Log-norms as float16 (within a few units of zero, kept to ~1e-3: 64 bytes a row at
    4 layers x 8 buckets)."""
    if work is None:
        return None, None
    kept = [k for k in kept if k[0] not in misaligned]
    layers = declared.num_layers or (kept[0][1].log_norms.shape[0] if kept else 0)
    kept = [k for k in kept if k[1].log_norms is not None and k[1].log_norms.shape[0] == layers]
    fps = [k for k in kept if k[1].fingerprints is not None and len(k[2])]
    coords = len(C.coords(declared.hidden_size)) if declared.hidden_size else 0
    norms = {
        "layers": int(layers),
        "rows": np.array([k[0] for k in kept], dtype=np.int64),
        "norms": (np.stack([k[1].log_norms for k in kept]).astype(np.float16).ravel() if kept
                  else np.zeros(0, np.float16)),
    }
    prefixes = {
        "layers": int(layers), "coords": coords, "rtol": rtol,
        "rows": np.concatenate([np.full(len(k[2]), k[0], np.int64) for k in fps]) if fps else np.zeros(0, np.int64),
        "pos": np.concatenate([k[2] for k in fps]) if fps else np.zeros(0, np.int64),
        "keys": np.concatenate([k[3] for k in fps]) if fps else np.zeros(0, np.uint64),
        "fp": (np.concatenate([k[1].fingerprints for k in fps]).astype(np.float32).ravel() if fps
               else np.zeros(0, np.float32)),
    }
    return norms, prefixes


def _positions(raw: Any, dtype: str, layers: int, hidden: int, decoder: Decoder):
    """Decode only the given positions of a stored tensor (fingerprints, naming a bad value)."""
    width = layers * hidden
    size = ITEMSIZE[dtype]

    def get(pos: np.ndarray) -> np.ndarray:
        mv = memoryview(raw)
        parts = [decoder.decode(mv[int(p) * width * size:(int(p) + 1) * width * size], dtype, width).copy()
                 for p in pos]
        return np.stack(parts).reshape(len(pos), layers, hidden) if parts else np.zeros((0, layers, hidden), np.float32)

    return get


def _header_reason(message: str) -> str:
    """The category of a header problem (the message itself goes into the example)."""
    if "truncated" in message:
        return "truncated: a tensor's bytes run past the end of the file"
    if "no header" in message:
        return "empty or cut before the header"
    if "not JSON" in message or "not a JSON object" in message or "not plausible" in message:
        return "header is not a safetensors header"
    if "after the last tensor" in message:
        return "bytes after the last tensor"
    return "header inconsistent (offsets, dtypes or shapes)"


def open_run(folder: Path, dataset: SavedDataset, policy: HiddenPolicy, **kw: Any) -> HiddenRun:
    """A HiddenRun after the checks a bad input deserves (exit 4): a folder, a declared dtype it knows."""
    if not folder.is_dir():
        raise UsageProblem(f"--hidden-states {folder}: no such folder; pass the folder holding hs_{{i}}.safetensors")
    if policy.dtype is not None and policy.dtype not in DTYPES:
        raise UsageProblem(f"[hidden_states] dtype {policy.dtype!r} unknown")
    run = HiddenRun(folder, dataset, policy, **kw)
    _ = run.declared  # a config.json that cannot be read is a usage error now, not in every shard's test
    return run
