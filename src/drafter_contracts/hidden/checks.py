"""Pure checks of hidden-state files: (what a shard's files hold, the dataset's rows, the policy) -> results.

No pytest, no file access: ``run.py`` reads, these decide. Reasons are categorical (so
counts per reason add up over shards); each example names its row and says what exactly
is wrong with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..results import MAX_EXAMPLES, CheckResult, Violation
from .plan import file_name

COVERAGE = "hs_coverage"
HEADER = "hs_header"
SHAPE = "hs_shape_dtype"
ALIGNMENT = "hs_alignment"
VALUES = "hs_values"
LAYER_NORMS = "hs_layer_norms"
NORM_OUTLIERS = "hs_norm_outliers"
PREFIX = "hs_prefix_consistency"
RECOMPUTE = "hs_spot_recompute"
#: Per-row contracts: one row shard's files, in that shard's test.
SHARD_CHECKS = (HEADER, SHAPE, ALIGNMENT, VALUES)
#: Decided at the controller over every shard's partials (hs_coverage too).
GLOBAL_CHECKS = (LAYER_NORMS, NORM_OUTLIERS, PREFIX)
ALL_CHECKS = (COVERAGE, *SHARD_CHECKS, *GLOBAL_CHECKS, RECOMPUTE)

#: Position buckets of the norm bounds: the first positions (attention sinks) have norms of their own.
BUCKET_EDGES = np.array([0, 1, 4, 16, 64, 256, 1024, 4096], dtype=np.int64)
#: Positions at which rows sharing their first p+1 tokens are compared (prefix consistency).
CHECKPOINTS = np.array([0, 1, 3, 7, 15, 31, 63, 127, 255], dtype=np.int64)
#: Coordinates per layer kept as a position's fingerprint (evenly spaced over hidden_size).
FINGERPRINT_COORDS = 16


@dataclass
class Findings:
    """Violations of one contract over a shard, built up row by row (examples capped, counts exact)."""

    check: str
    scope: str
    rows: list[int] = field(default_factory=list)
    by_reason: dict[str, int] = field(default_factory=dict)
    examples: list[Violation] = field(default_factory=list)

    def add(self, row: int, reason: str, detail: str = "", position: int = -1) -> None:
        self.rows.append(row)
        self.by_reason[reason] = self.by_reason.get(reason, 0) + 1
        if len(self.examples) < MAX_EXAMPLES:
            text = f"{reason}: {detail}" if detail else reason
            self.examples.append(Violation(int(row), int(position), text))

    def result(self, rows_checked: int, report_only: bool = False, skipped: str | None = None) -> CheckResult:
        if skipped is not None:
            return CheckResult(self.check, self.scope, skipped=skipped)
        return CheckResult(self.check, self.scope, rows_checked, len(set(self.rows)), dict(self.by_reason),
                           sorted(self.examples, key=lambda v: v.row), report_only=report_only)


# --- coverage -------------------------------------------------------------------------------------


def check_coverage(missing: np.ndarray, rows_checked: int, extras: list[tuple[str, str]], extra_count: int,
                   folder: str) -> CheckResult:
    """One file per row index, none missing, none extra (beyond the dataset, a name no row reads).

    ``missing``: the rows without a file (sorted), of the ``rows_checked`` rows whose files were looked for;
    ``extras``: (name, why) of the first entries that are no row's file, ``extra_count`` of them in all.
    """
    missing = np.asarray(missing, dtype=np.int64)
    f = Findings(COVERAGE, "dataset")
    for i in missing[:MAX_EXAMPLES].tolist():
        f.add(i, "no file for this row", file_name(i))
    result = f.result(rows_checked)
    result.rows_violating = int(len(missing))
    result.by_reason = {"no file for this row": int(len(missing))} if len(missing) else {}
    parts = []
    if len(missing):
        shown = ", ".join(str(i) for i in missing[:10].tolist())
        parts.append(f"{len(missing):,} of {rows_checked:,} rows have no file in {folder} (rows {shown}"
                     f"{' …' if len(missing) > 10 else ''}): the trainer skips them or stops")
    if extra_count:
        reasons: dict[str, list[str]] = {}
        for name, why in extras:
            reasons.setdefault(why, []).append(name)
            result.by_reason[f"extra file: {why}"] = result.by_reason.get(f"extra file: {why}", 0) + 1
        shown = "; ".join(f"{', '.join(names[:5])}{' …' if len(names) > 5 else ''}: {why}"
                          for why, names in reasons.items())
        parts.append(f"{extra_count:,} extra entr{'y' if extra_count == 1 else 'ies'} ({shown})")
    result.message = "; ".join(parts)
    return result


# --- shape and dtype ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Declared:
    """Layers per position, hidden size and dtype (safetensors spelling) the folder must hold, and who said so."""

    num_layers: int | None
    hidden_size: int | None
    dtype: str | None
    source: str

    def text(self) -> str:
        layers, hidden = self.num_layers or "?", self.hidden_size or "?"
        dims = f"[seq_len, {layers}, {hidden}]"
        return f"{dims} {self.dtype or '?'} ({self.source})"


def shape_problems(tensors: dict, declared: Declared) -> list[tuple[str, str]]:
    """(reason, detail) for every way a file's tensors differ from what the folder must hold."""
    out: list[tuple[str, str]] = []
    tok, hs = tensors["token_ids"], tensors["hidden_states"]
    if len(tok.shape) != 1 or tok.dtype not in ("I64", "I32"):
        out.append(("token_ids is not a 1-D integer tensor", f"{tok.dtype} {list(tok.shape)}"))
    if len(hs.shape) != 3:
        out.append(("hidden_states is not [seq_len, layers, hidden_size]", f"shape {list(hs.shape)}"))
        return out
    s, layers, hidden = hs.shape
    if len(tok.shape) == 1 and s != tok.shape[0]:
        out.append(("hidden_states and token_ids differ in length", f"{s:,} positions, {tok.shape[0]:,} token ids"))
    if declared.num_layers is not None and layers != declared.num_layers:
        out.append(("layers per position differ from the declared", f"{layers}, declared {declared.num_layers}"))
    if declared.hidden_size is not None and hidden != declared.hidden_size:
        out.append(("hidden_size differs from the declared", f"{hidden}, declared {declared.hidden_size} "
                    "(a file from another model?)"))
    if declared.dtype is not None and hs.dtype != declared.dtype:
        out.append(("dtype differs from the declared", f"{hs.dtype}, declared {declared.dtype}"))
    if hs.dtype.startswith("F8"):
        sc = tensors.get("hidden_states_scales")
        if sc is None:
            out.append(("float8 hidden_states without hidden_states_scales", "FP8Transfer cannot dequantize it"))
        elif sc.dtype != "F32" or sc.shape not in ((s, 1, 1), (s,)):
            out.append(("hidden_states_scales is not float32 [seq_len, 1, 1]", f"{sc.dtype} {list(sc.shape)}"))
    elif hs.dtype not in ("BF16", "F16", "F32"):
        out.append(("hidden_states is not a float tensor", hs.dtype))
    return out


# --- alignment ------------------------------------------------------------------------------------


def check_alignment(scope: str, rows: np.ndarray, file_ids: list[np.ndarray], row_values: np.ndarray,
                    row_offsets: np.ndarray, first_row: int, neighbours: dict[bytes, int]
                    ) -> tuple[CheckResult, set[int]]:
    """``token_ids`` of file i equal row i's ``input_ids`` exactly.

    ``rows``: global rows whose file was read; ``file_ids``: their token_ids; ``row_values`` /
    ``row_offsets``: the dataset's input_ids of rows ``first_row`` .. (flat, as Arrow holds them);
    ``neighbours``: input_ids bytes (int64) -> row, for rows near the shard, to name whose tokens a
    misplaced file holds.
    """
    f = Findings(ALIGNMENT, scope)
    if not len(rows):
        return f.result(0), set()
    local = rows - first_row
    want_len = np.diff(row_offsets)[local]
    got_len = np.array([len(x) for x in file_ids], dtype=np.int64)
    same_len = want_len == got_len
    first_diff = np.full(len(rows), -1, dtype=np.int64)
    if same_len.any():
        sel = np.flatnonzero(same_len)
        flat_file = np.concatenate([file_ids[k] for k in sel]).astype(np.int64, copy=False)
        starts = row_offsets[local[sel]]
        lens = want_len[sel]
        idx = np.repeat(starts - np.concatenate(([0], np.cumsum(lens)[:-1])), lens) + np.arange(int(lens.sum()))
        diff = np.flatnonzero(flat_file != row_values[idx].astype(np.int64, copy=False))
        if len(diff):
            owner = np.searchsorted(np.cumsum(lens), diff, side="right")
            uniq, first = np.unique(owner, return_index=True)
            first_diff[sel[uniq]] = diff[first] - np.concatenate(([0], np.cumsum(lens)[:-1]))[uniq]
    bad = np.flatnonzero(~same_len | (first_diff >= 0))
    for k in bad.tolist():
        row = int(rows[k])
        other = neighbours.get(np.ascontiguousarray(file_ids[k], dtype=np.int64).tobytes())
        if other is not None and other != row:
            shift = other - row
            if abs(shift) == 1:
                f.add(row, "token_ids are a neighbouring row's input_ids (file indices shifted by one)",
                      f"{file_name(row)} holds row {other:,}'s tokens")
            else:
                f.add(row, "token_ids are another row's input_ids (files swapped or misattributed)",
                      f"{file_name(row)} holds row {other:,}'s tokens")
        elif not same_len[k]:
            f.add(row, "token_ids length differs from the row's (an earlier tokenization?)",
                  f"{got_len[k]:,} token ids in the file, {want_len[k]:,} in the row")
        else:
            p = int(first_diff[k])
            f.add(row, "token_ids differ from the row's input_ids (an earlier tokenization?)",
                  f"first at position {p:,}: file {int(file_ids[k][p])}, "
                  f"row {int(row_values[row_offsets[row - first_row] + p])}",
                  position=p)
    return f.result(len(rows)), set(f.rows)


# --- values ---------------------------------------------------------------------------------------


@dataclass
class FileValues:
    """What the value pass keeps of one file: its problems, per-(layer, bucket) mean log-norms, fingerprints."""

    problems: list[tuple[str, str, int]]  # (reason, detail, position)
    log_norms: np.ndarray | None  # float32 [layers, buckets], NaN where a bucket has no position
    fingerprints: np.ndarray | None  # float32 [checkpoints asked, layers, coords]


def coords(hidden: int) -> np.ndarray:
    return np.unique(np.linspace(0, hidden - 1, min(FINGERPRINT_COORDS, hidden)).astype(np.int64))


def _bad_scale(scales: np.ndarray) -> tuple[str, str, int] | None:
    """A float8 file's per-position scale that is not a positive finite number."""
    bad_scale = ~np.isfinite(scales) | (scales <= 0)
    if not bad_scale.any():
        return None
    p = int(np.flatnonzero(bad_scale)[0])
    return ("float8 scale not a positive finite number",
            f"{scales[p]!r} at position {p:,} ({int(bad_scale.sum()):,} positions)", p)


def _non_finite(tot: np.ndarray, sq: np.ndarray, positions: Callable[[np.ndarray], np.ndarray]
                ) -> tuple[str, str, int] | None:
    """The first vector holding NaN or an infinity (they propagate into both sums), named from its values."""
    finite = np.isfinite(sq) & np.isfinite(tot)
    if finite.all():
        return None
    p, l = (int(v[0]) for v in np.nonzero(~finite))
    block = positions(np.array([p]))[0, l]
    kind = "NaN" if np.isnan(block).any() else "infinite value"
    n = int((~np.isfinite(block)).sum())
    return ("non-finite values", f"{kind} at position {p:,}, layer {l} ({n:,} values in that vector; "
            f"{int((~finite).sum()):,} vector(s) affected)", p)


def _zero_vectors(sq: np.ndarray) -> tuple[str, str, int] | None:
    """Zero vectors, named at the widest scale they cover: everything, a layer, a position, or one vector."""
    zero = sq == 0
    if not zero.any():
        return None
    s, layers = sq.shape
    zl, zp = zero.all(axis=0), zero.all(axis=1)
    if zero.all():
        return ("all values zero", f"{s:,} positions × {layers} layers", -1)
    if zl.any():
        return ("a layer is all zero", f"layer {int(np.flatnonzero(zl)[0])} of {layers}, every position", -1)
    if zp.any():
        p = int(np.flatnonzero(zp)[0])
        return ("a position is all zero", f"position {p:,} ({int(zp.sum()):,} such positions), every layer", p)
    p, l = (int(v[0]) for v in np.nonzero(zero))
    return ("a zero vector", f"position {p:,}, layer {l} ({int(zero.sum()):,} such vectors)", p)


def _constant_vector(tot: np.ndarray, sq: np.ndarray, hidden: int) -> tuple[str, str, int] | None:
    """A vector whose values are all one number (variance nil against its mean square)."""
    mean = tot / hidden
    var = sq / hidden - mean * mean
    const = var <= 1e-6 * (sq / hidden)
    if not const.any():
        return None
    p, l = (int(v[0]) for v in np.nonzero(const))
    return ("a constant vector", f"position {p:,}, layer {l}: every value {float(mean[p, l]):.4g} "
            f"({int(const.sum()):,} such vectors)", p)


def _bucket_log_norms(sq: np.ndarray) -> np.ndarray:
    """Mean log-norm per layer and position bucket (float32 [layers, buckets], NaN past the file's end)."""
    s, layers = sq.shape
    logn = 0.5 * np.log(sq)  # [s, layers]
    starts = BUCKET_EDGES[BUCKET_EDGES < s]
    sums = np.add.reduceat(logn, starts, axis=0)
    counts = np.diff(np.append(starts, s))
    out = np.full((layers, len(BUCKET_EDGES)), np.nan, dtype=np.float32)
    out[:, :len(starts)] = (sums / counts[:, None]).T
    return out


def file_values(tot: np.ndarray, sq: np.ndarray, hidden: int, scales: np.ndarray | None, at: np.ndarray,
                positions: Callable[[np.ndarray], np.ndarray]) -> FileValues:
    """Finite, no zero or constant vectors, and the norms, from each (position, layer) vector's sum ``tot`` and
    sum of squares ``sq`` ([seq_len, layers], float64; hidden/moments.py); float8 files: of the stored values,
    ``scales`` the per-position scales. ``positions(p)`` decodes the given positions (float32 [len(p), layers,
    hidden], unscaled) for the fingerprints at ``at`` and for naming a non-finite value.

    It stops at the first defect: the later tests would read values an earlier one already condemned.
    """
    s = sq.shape[0]
    if scales is not None:
        scales = scales.reshape(-1)[:s].astype(np.float64)
        problem = _bad_scale(scales)
        if problem is not None:
            return FileValues([problem], None, None)
        sq = sq * (scales * scales)[:, None]
        tot = tot * scales[:, None]
    problem = _non_finite(tot, sq, positions) or _zero_vectors(sq) or _constant_vector(tot, sq, hidden)
    if problem is not None:
        return FileValues([problem], None, None)
    fp = None
    if len(at):
        fp = positions(at)[:, :, coords(hidden)].astype(np.float32)
        if scales is not None:
            fp *= scales[at][:, None, None].astype(np.float32)
    return FileValues([], _bucket_log_norms(sq), fp)
