"""Controller side: the verdicts that need every shard — norm bounds learnt over the dataset, prefix consistency.

Each row shard's test sends, as partials of its report (``contracts.py``): per-row mean
log-norms per layer and position bucket (``layers × 8`` float16 a row) and, at the
checkpoints where another row shares the first p+1 tokens, a fingerprint of the states
there (16 coordinates per layer). The fingerprints are folded in as reports arrive
(``fold_prefixes``): per shared prefix the controller keeps one reference and the rows
that disagree with it, not every fingerprint.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..results import CheckResult
from . import checks as C

#: Fewer rows than this cannot teach a median and a MAD per layer and bucket.
MIN_NORM_ROWS = 20


def fingerprint_distance(a: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Largest relative distance over layers: ||a - ref|| / ||ref|| per layer, for [m, layers, coords] arrays."""
    num = np.sqrt(((a - ref) ** 2).sum(axis=2))
    den = np.sqrt((ref ** 2).sum(axis=2)) + 1e-12
    return (num / den).max(axis=1)


@dataclass
class PrefixIndex:
    """Per shared prefix (key): a reference fingerprint, the rows that agree with it, the rows that do not."""

    rtol: float
    ref_of: dict[int, int] = field(default_factory=dict)
    refs: list[np.ndarray] = field(default_factory=list)
    ref_row: list[int] = field(default_factory=list)
    ref_pos: list[int] = field(default_factory=list)
    agree: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)  # (key index, row) chunks
    # key index, row, pos, fp, dist
    deviants: list[tuple[int, int, int, np.ndarray, float]] = field(default_factory=list)

    def add(self, rows: np.ndarray, pos: np.ndarray, keys: np.ndarray, fps: np.ndarray) -> None:
        if not len(rows):
            return
        idx = np.array([self.ref_of.get(k, -1) for k in keys.tolist()], dtype=np.int64)
        new = np.flatnonzero(idx < 0)
        if len(new):
            uniq, first = np.unique(keys[new], return_index=True)
            for k, j in zip(uniq.tolist(), new[first].tolist()):
                self.ref_of[k] = len(self.refs)
                self.refs.append(fps[j].copy())
                self.ref_row.append(int(rows[j]))
                self.ref_pos.append(int(pos[j]))
            idx = np.array([self.ref_of[k] for k in keys.tolist()], dtype=np.int64)
        ref = np.stack([self.refs[i] for i in idx.tolist()])
        dist = fingerprint_distance(fps, ref)
        ok = dist <= self.rtol
        self.agree.append((idx[ok], rows[ok]))
        for j in np.flatnonzero(~ok).tolist():
            self.deviants.append((int(idx[j]), int(rows[j]), int(pos[j]), fps[j].copy(), float(dist[j])))

    def verdict(self, excluded: set[int], rows_checked: int) -> CheckResult:
        f = C.Findings(C.PREFIX, "dataset")
        if not self.refs:
            return CheckResult(C.PREFIX, "dataset", skipped=(
                "no two rows share a prefix at the checked positions (or no value pass ran): nothing to compare"))
        kidx = np.concatenate([a for a, _ in self.agree]) if self.agree else np.zeros(0, np.int64)
        krow = np.concatenate([r for _, r in self.agree]) if self.agree else np.zeros(0, np.int64)
        by_key: dict[int, list[tuple[int, int, np.ndarray, float]]] = {}
        for k, row, pos, fp, dist in self.deviants:
            by_key.setdefault(k, []).append((row, pos, fp, dist))
        worst: dict[int, tuple[int, str, str]] = {}  # row -> (position, reason, detail), the earliest position
        # Shortest prefixes first: a row that a clear majority rejects at position p is left out at later
        # positions, where it may share a longer prefix with a single other row (a tie that names both).
        bad = set(excluded)
        for k in sorted(by_key, key=lambda k: self.ref_pos[k]):
            devs = by_key[k]
            members = krow[kidx == k]
            members = members[~np.isin(members, list(bad))] if bad else members
            devs = [d for d in devs if d[0] not in bad]
            if not devs:
                continue
            clusters: list[list[tuple[int, int, np.ndarray, float]]] = []
            for d in devs:
                for cl in clusters:
                    if fingerprint_distance(d[2][None], cl[0][2][None])[0] <= self.rtol:
                        cl.append(d)
                        break
                else:
                    clusters.append([d])
            p = self.ref_pos[k]
            groups = ([[(int(r), p, 0.0) for r in members.tolist()]]
                      + [[(d[0], d[1], d[3]) for d in cl] for cl in clusters])
            sizes = [len(g) for g in groups]
            top = int(np.argmax(sizes))
            if sizes.count(sizes[top]) == 1:  # one group is the clear majority: the others are named
                for g, group in enumerate(groups):
                    if g == top:
                        continue
                    for row, pos, _ in group:
                        bad.add(row)
                        self._note(worst, row, pos, "states over a shared prefix differ from the other rows' "
                                   "(computed over another context, or another request's states?)",
                                   f"position {pos:,}: {sizes[top]:,} rows share its first {pos + 1:,} tokens and "
                                   f"agree; this row is not within {self.rtol} of them")
            else:  # no majority: every row of every group is named
                for group in groups:
                    for row, pos, _ in group:
                        self._note(worst, row, pos, "states over a shared prefix disagree, no clear majority",
                                   f"position {pos:,}: {sum(sizes):,} rows share the prefix, in groups of {sizes}")
        for row in sorted(worst):
            pos, reason, detail = worst[row]
            f.add(row, reason, detail, pos)
        return f.result(rows_checked)

    @staticmethod
    def _note(worst: dict, row: int, pos: int, reason: str, detail: str) -> None:
        if row not in worst or pos < worst[row][0]:
            worst[row] = (pos, reason, detail)


#: Rows per block of the norm verdicts: the controller's temporaries stay ~10 MB whatever the row count.
NORM_BLOCK = 65536


def _column_stats(norms: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Median, MAD and quantiles (p05..p95) per (layer, bucket), one column at a time (a column's copy only)."""
    layers, buckets = norms.shape[1:]
    med = np.full((layers, buckets), np.nan, np.float32)
    mad = np.full((layers, buckets), np.nan, np.float32)
    q = np.full((5, layers, buckets), np.nan, np.float32)
    for l in range(layers):
        for b in range(buckets):
            col = norms[:, l, b].astype(np.float32)
            col = col[~np.isnan(col)]
            if len(col):
                med[l, b] = np.median(col)
                mad[l, b] = np.median(np.abs(col - med[l, b]))
                q[:, l, b] = np.percentile(col, [5, 25, 50, 75, 95])
    return med, mad, q


def norm_verdicts(rows: np.ndarray, norms: np.ndarray, fail_ratio: float, mads: float,
                  strict: bool) -> tuple[CheckResult, CheckResult, dict[str, Any], set[int]]:
    """hs_layer_norms (fails), hs_norm_outliers (report-only unless strict), the norm distribution, and the rows
    hs_layer_norms fails, from [rows, layers, buckets] mean log-norms (float16 or float32)."""
    if len(rows) < MIN_NORM_ROWS:
        why = f"{len(rows)} rows with values: too few to learn norm bounds (at least {MIN_NORM_ROWS})"
        return (CheckResult(C.LAYER_NORMS, "dataset", skipped=why),
                CheckResult(C.NORM_OUTLIERS, "dataset", skipped=why), {}, set())
    med, mad, q = _column_stats(norms)
    limit = np.log(fail_ratio)
    layers = norms.shape[1]
    scale = 1.4826 * mad + 1e-3
    hard = C.Findings(C.LAYER_NORMS, "dataset")
    soft = C.Findings(C.NORM_OUTLIERS, "dataset")
    failed_rows: set[int] = set()
    for lo in range(0, len(rows), NORM_BLOCK):
        x = norms[lo:lo + NORM_BLOCK].astype(np.float32)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN buckets (positions a row does not reach)
            dev = x - med
            per_layer = np.nanmedian(dev, axis=2)  # [rows, layers]: log of the ratio to the dataset
            failed = np.flatnonzero(np.nanmax(np.abs(per_layer), axis=1) > limit)
        for r in failed.tolist():
            row = int(rows[lo + r])
            failed_rows.add(row)
            d = per_layer[r]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                cost = np.nanmean(np.abs(x[r][:, None, :] - med[None, :, :]), axis=2)  # [its layer, dataset layer]
            mapping = np.nanargmin(cost, axis=1)
            if len(set(mapping.tolist())) == layers and (mapping != np.arange(layers)).any() and \
                    np.nanmax(cost[np.arange(layers), mapping]) < limit / 2:
                hard.add(row, "layers out of order", f"its layers look like the dataset's layers {mapping.tolist()}")
            elif np.all(np.abs(d) > limit) and np.ptp(d) < np.log(1.5):
                hard.add(row, "every layer's norm off by one factor (a wrong float8 scale or dtype?)",
                         f"×{float(np.exp(np.mean(d))):.3g} the dataset's median")
            else:
                k = int(np.nanargmax(np.abs(d)))
                hard.add(row, "a layer's norm off by more than norm_fail_ratio",
                         f"layer {k}: ×{float(np.exp(d[k])):.3g} the dataset's median (limit ×{fail_ratio:g})")
        z = np.abs(dev) / scale
        z[np.isnan(z)] = 0
        z[failed] = 0  # rows hs_layer_norms fails are left out here
        worst = z.reshape(len(x), -1).max(axis=1)
        for r in np.flatnonzero(worst > mads).tolist():
            l, b = np.unravel_index(int(np.argmax(z[r])), z[r].shape)
            b_lo = int(C.BUCKET_EDGES[b])
            b_hi = f"{int(C.BUCKET_EDGES[b + 1]) - 1}" if b + 1 < len(C.BUCKET_EDGES) else "end"
            soft.add(int(rows[lo + r]), "norm beyond norm_outlier_mads of the dataset's median",
                     f"layer {l}, positions {b_lo}..{b_hi}: ×{float(np.exp(dev[r, l, b])):.3g} "
                     f"the median, {float(z[r, l, b]):.1f} MADs", b_lo)
    n = len(rows)
    dist = {"bucket_edges": C.BUCKET_EDGES.tolist(), "rows": n,
            "quantiles": {name: np.where(np.isnan(q[i]), None, np.round(np.exp(q[i].astype(np.float64)), 6)).tolist()
                          for i, name in enumerate(("p05", "p25", "p50", "p75", "p95"))}}
    return hard.result(n), soft.result(n, report_only=not strict), dist, failed_rows


def fold_prefixes(index: "PrefixIndex | None", partial: dict[str, Any] | None) -> "PrefixIndex | None":
    """``Spec.fold`` of hs_prefix_consistency: one shard's fingerprints into the running index."""
    if partial is None:
        return index
    if index is None:
        index = PrefixIndex(float(partial["rtol"]))
    rows = np.asarray(partial["rows"], dtype=np.int64)
    if len(rows):
        fp = np.asarray(partial["fp"], dtype=np.float32).reshape(len(rows), int(partial["layers"]),
                                                                 int(partial["coords"]))
        index.add(rows, np.asarray(partial["pos"], dtype=np.int64), np.asarray(partial["keys"], dtype=np.uint64), fp)
    return index


def value_verdicts(norm_partials: list[dict[str, Any]], index: PrefixIndex | None, fail_ratio: float, mads: float,
                   strict: bool) -> tuple[CheckResult, CheckResult, CheckResult, dict[str, Any]]:
    """hs_layer_norms, hs_norm_outliers, hs_prefix_consistency and the norm distribution, from every shard's
    norms (in shard order) and the folded prefix index. Rows hs_layer_norms fails are left out of the others."""
    buckets = len(C.BUCKET_EDGES)
    parts = [p for p in norm_partials if p is not None and len(p["rows"])]
    layers = int(parts[0]["layers"]) if parts else 1
    rows = np.concatenate([np.asarray(p["rows"], dtype=np.int64) for p in parts]) if parts else np.zeros(0, np.int64)
    norms = (np.concatenate([np.asarray(p["norms"], dtype=np.float16).reshape(-1, layers, buckets) for p in parts])
             if parts else np.zeros((0, layers, buckets), np.float16))
    hard, soft, dist, failed = norm_verdicts(rows, norms, fail_ratio, mads, strict)
    prefix = (index or PrefixIndex(0.0)).verdict(failed, int(len(rows)))
    return hard, soft, prefix, dist
