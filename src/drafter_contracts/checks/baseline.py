"""The ``baseline`` contract: a dataset compared with a saved known-good profile, with the contract's thresholds.

This is how a team sees that a tokenizer or speculators upgrade changed their data:
the per-row contracts may all still hold while the row count, the length mix, the
supervised share or the tokens the drafter learns from have moved. The baseline file
(what --save-baseline writes, --baseline reads) is ``report/baseline.py``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..contract.file import BaselinePolicy
from ..results import CheckResult
from .declare import Scope, Spec, Verdict, WholeRun, register

CHECK = "baseline"


# --- distances ---------------------------------------------------------------------------------


def ks_distance(a: list[int] | None, b: list[int] | None) -> float | None:
    """Kolmogorov-Smirnov distance of two histograms over the same bins (largest CDF gap)."""
    if a is None or b is None:
        return None
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.sum() == 0 or y.sum() == 0:
        return None if x.sum() == y.sum() else 1.0
    return float(np.abs(np.cumsum(x) / x.sum() - np.cumsum(y) / y.sum()).max())


def token_shift(base_top: list[dict], base_total: int, cur_ids: np.ndarray, cur_counts: np.ndarray,
                ) -> tuple[float, list[tuple[int, float, float]]]:
    """Total variation over the baseline's top-K ids plus "all other ids"; and the biggest movers.

    Exact on both sides: the current counts are complete, the baseline kept its top-K
    and its total, so the "other" bucket is known too.
    """
    cur_total = int(cur_counts.sum())
    ids = np.array([t["id"] for t in base_top], dtype=np.int64)
    f_base = np.array([t["count"] for t in base_top], dtype=np.float64) / max(base_total, 1)
    f_cur = np.zeros(len(ids))
    if len(cur_ids):
        pos = np.clip(np.searchsorted(cur_ids, ids), 0, len(cur_ids) - 1)
        hit = cur_ids[pos] == ids
        f_cur[hit] = cur_counts[pos[hit]] / max(cur_total, 1)
    other = abs((1 - f_base.sum()) - (1 - f_cur.sum()))
    tv = 0.5 * (float(np.abs(f_base - f_cur).sum()) + other)
    order = np.argsort(-np.abs(f_base - f_cur), kind="stable")[:5]
    return tv, [(int(ids[i]), float(f_base[i]), float(f_cur[i])) for i in order]


# --- the comparison ----------------------------------------------------------------------------


@dataclass
class Comparison:
    """One line per aspect, each marked ok or FAIL, in the order a person reads them."""

    lines: list[tuple[bool, str]] = field(default_factory=list)

    def add(self, ok: bool, text: str) -> None:
        self.lines.append((ok, text))

    @property
    def failures(self) -> list[str]:
        return [t for ok, t in self.lines if not ok]

    def text(self) -> list[str]:
        return [f"{'ok  ' if ok else 'FAIL'} {t}" for ok, t in self.lines]


def _n(v: int | None) -> str:
    return "n/a" if v is None else f"{v:,}"


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.2f}%"


def _role_changes(name: str, base: dict[str, float], cur: dict[str, float], limit: float, out: Comparison) -> None:
    roles = sorted(set(base) | set(cur))
    moved = sorted(((abs(cur.get(r, 0.0) - base.get(r, 0.0)), r) for r in roles), reverse=True)
    worst = moved[0][0] if moved else 0.0
    shown = ", ".join(f"{r} {_pct(base.get(r, 0.0))} -> {_pct(cur.get(r, 0.0))}"
                      for d, r in moved[:3] if d > 0) or "unchanged"
    out.add(worst <= limit, f"{name}: largest change {100 * worst:.2f} points (max {100 * limit:.2f}); {shown}")


def compare(baseline: dict[str, Any], current: dict[str, Any], cur_counts: tuple[np.ndarray, np.ndarray] | None,
            policy: BaselinePolicy, decode: Any = None) -> Comparison:
    """Compare the current summary (its profile, tokenizer) with a baseline document."""
    b, c = baseline["profile"], current["profile"]
    out = Comparison()
    # Row count.
    slack = policy.count_tolerance.rows(b["rows"])
    diff = c["rows"] - b["rows"]
    rel = f", {100 * diff / b['rows']:+.2f}%" if b["rows"] else ""
    out.add(abs(diff) <= slack,
            f"rows: {b['rows']:,} -> {c['rows']:,} ({diff:+,}{rel}; allowed ± {policy.count_tolerance})")
    # seq_len distribution.
    ks = ks_distance(b["seq_len"]["histogram"], c["seq_len"]["histogram"])
    bq, cq = b["seq_len"]["quantiles"] or {}, c["seq_len"]["quantiles"] or {}
    qs = ", ".join(f"{k} {bq.get(k)} -> {cq.get(k)}" for k in ("p05", "p50", "p95", "p99"))
    out.add(ks is not None and ks <= policy.max_seq_len_ks,
            f"seq_len distribution: KS distance {ks if ks is None else round(ks, 4)} (max {policy.max_seq_len_ks}); "
            f"{qs} (bins of <= 4.4%)")
    # Supervised share.
    bs, cs = b["supervised_share_per_row"], c["supervised_share_per_row"]
    ks = ks_distance(bs["histogram"], cs["histogram"])
    med = f"median row {(bs['quantiles'] or {}).get('p50')} -> {(cs['quantiles'] or {}).get('p50')}"
    if bs["histogram"] is None and cs["histogram"] is None:
        out.add(True, "supervised share per row: not compared (no usable loss_mask on either side)")
    else:
        out.add(ks is not None and ks <= policy.max_supervised_share_ks,
                f"supervised share per row: KS distance {ks if ks is None else round(ks, 4)} "
                f"(max {policy.max_supervised_share_ks}); {med}; all tokens {_pct(b['supervised_share'])} -> "
                f"{_pct(c['supervised_share'])}")
    # Roles.
    _role_changes("tokens by role", b["role_token_shares"], c["role_token_shares"], policy.max_role_share_change, out)
    _role_changes("supervised tokens by role", b["role_supervised_shares"], c["role_supervised_shares"],
                  policy.max_role_share_change, out)
    # Token frequencies.
    if b.get("top_supervised_tokens") and cur_counts is not None and b.get("supervised_tokens"):
        tv, movers = token_shift(b["top_supervised_tokens"], b["supervised_tokens"], *cur_counts)
        def name(i: int) -> str:
            return f"{i} {decode(i)!r}" if decode is not None else str(i)
        shown = ", ".join(f"{name(i)} {_pct(fb)} -> {_pct(fc)}" for i, fb, fc in movers[:3] if fb != fc) or "unchanged"
        out.add(tv <= policy.max_token_freq_tv,
                f"supervised token frequencies (top {len(b['top_supervised_tokens'])} + other): total variation "
                f"{tv:.4f} (max {policy.max_token_freq_tv}); most moved {shown}")
    else:
        out.add(True, "supervised token frequencies: not compared (no loss_mask counts on one side)")
    # Fingerprints.
    bt, ct = baseline["tokenizer"], current["tokenizer"]
    for key, what in (("vocab_fingerprint", "tokenizer (vocabulary, merges, special tokens)"),
                      ("template_fingerprint", "chat template")):
        same = bt.get(key) == ct.get(key)
        names = f"; was {bt.get('name')}, now {ct.get('name')}" if bt.get("name") != ct.get("name") else ""
        if key == "vocab_fingerprint" and bt.get("size") != ct.get("size"):
            names += f"; {_n(bt.get('size'))} -> {_n(ct.get('size'))} ids"
        text = (f"{what}: unchanged ({ct.get(key)})" if same
                else f"{what}: changed {bt.get(key)} -> {ct.get(key)}{names}")
        out.add(same or not policy.fail_on_fingerprint, text)
    return out


def result(comparison: Comparison, rows_checked: int) -> CheckResult:
    """The comparison as a global contract verdict (message: the failing lines, in one line)."""
    return CheckResult(CHECK, "dataset", rows_checked=rows_checked, message="; ".join(comparison.failures))


def header(baseline_path: Path, baseline: dict[str, Any]) -> str:
    d = baseline["dataset"]
    return (f"baseline {baseline_path} (saved {baseline.get('created')} from {d.get('path')}, "
            f"{baseline['profile']['rows']:,} rows)")


def _reduce(run: WholeRun) -> Verdict | None:
    """The dataset against --baseline FILE, from the run's merged shard stats (no second pass)."""
    if run.baseline is None:
        return None
    path, base = run.baseline
    e = run.engine
    stats = run.shard_stats()
    head = header(path, base)
    if len(stats) != len(e.shards):
        return Verdict(CheckResult(CHECK, "dataset", skipped=(
            f"stats cover {len(stats)} of {len(e.shards)} shards (tests deselected or skipped); "
            "a baseline compares whole datasets")), [head])
    counts = run.supervised_counts()
    current = {"profile": run.profile(e.contract.baseline.top_k, counts), "tokenizer": run.tokenizer_fingerprint()}
    decode = (lambda i: e.vocab.decode([i])) if e.vocab is not None else None
    comparison = compare(base, current, counts, e.contract.baseline, decode)
    return Verdict(result(comparison, current["profile"]["rows"]), [head, *comparison.text()])


register(Spec(CHECK, Scope.WHOLE, "the dataset has not drifted from a saved known-good profile", needs=frozenset(),
              on_request=True, reduce=_reduce))
