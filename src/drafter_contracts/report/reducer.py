"""One reducer for everything a run reports: per-contract verdicts, per-shard stats, exact id counts.

The combiner pattern (create / add / merge / extract): a :class:`Reducer` starts empty, takes
each shard's :class:`~drafter_contracts.results.ShardReport` (``add``) and each dataset-level
or controller-side verdict (``add_result``) as they arrive, merges with another reducer
(``merge``: the parts of a ``--split`` run), and extracts the summary's figures, profile and
per-contract entries (``figures``, ``profile``, ``check_entries``). ``-n 0``, pytest-xdist
and ``merge-reports`` all go through it, so a figure is summed in one place only. Its state
(``to_state`` / ``from_state``) is what summary.json keeps for merging.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from ..results import RowViolations, ShardReport
from ..checks import accumulators
from ..checks.accumulators import total
from ..checks.stats import SEQ_LEN_BINS_PER_OCTAVE, SEQ_LEN_EDGES, SHARE_BINS
from .stats import QUANTILES, quantiles, shares, top_tokens

#: Examples a contract's entry keeps (the lowest rows: a merge keeps the lowest of the parts' lowest).
MAX_SUMMARY_EXAMPLES = 20
_ENTRY_COUNTS = ("tests", "passed", "failed", "skipped", "rows_checked", "rows_violating")


def _new_entry() -> dict[str, Any]:
    return {"tests": 0, "passed": 0, "failed": 0, "skipped": 0, "rows_checked": 0, "rows_violating": 0,
            "by_reason": defaultdict(int), "severity": {}, "examples": [], "messages": [], "skip_reasons": [],
            "seconds": 0.0}


def outcome_of(result: dict[str, Any]) -> str:
    """A contract's own outcome from its result (one shard test carries several contracts)."""
    if result["skipped"]:
        return "skipped"
    if (result["rows_violating"] or result["message"]) and not result.get("report_only"):
        return "failed"
    return "passed"


@dataclass
class Reducer:
    """Everything the reports are built from, summed as results arrive."""

    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Per-shard stats (without their sparse id counts, which are summed into ``_counts``): summary.json's
    #: ``shards`` section, the per-shard table pandera validates.
    stats: dict[int, dict] = field(default_factory=dict)
    #: Whole-dataset contracts' per-shard partials (duplicate_rows: (rows, hashes)), by name and shard.
    partials: dict[str, dict[int, Any]] = field(default_factory=dict)
    _counts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    _count_parts: int = 0
    _counts_missing: bool = False  # a shard had no counts (no usable loss_mask): there is no exact sum
    _sums: dict[str, Any] = field(default_factory=dict)
    #: ``Spec.fold`` contracts' running states over the partials added so far (not kept by merge-reports:
    #: those contracts judge each part, ``per_part``).
    folded: dict[str, Any] = field(default_factory=dict)
    _folded_shards: dict[str, set[int]] = field(default_factory=dict)
    #: Every violating row each shard listed, by (contract, shard): violations.parquet's rows (a re-run
    #: shard once). Arrays only: a few bytes a row however many rows violate.
    violations: dict[tuple[str, int], RowViolations] = field(default_factory=dict)
    #: Rows listed per contract: kept in summary.json's state, so a merge knows them without the arrays.
    listed: dict[str, int] = field(default_factory=dict)

    # --- add -------------------------------------------------------------------------------

    def add(self, report: ShardReport) -> None:
        """One shard's report: its contracts' results, its stats and its partials (a re-run shard once)."""
        if report.stats is not None and report.shard not in self.stats:
            stats = dict(report.stats)
            self.add_counts(stats.pop("supervised_id_counts", None))
            self.add_stats(stats)
            self.stats[report.shard] = stats
        for name, value in report.partials.items():
            self._add_partial(name, report.shard, value)
        for listed in report.violations:
            self.add_violations(report.shard, listed)
        for result in report.results:
            self.add_result(result, outcome_of(result), None, float(result.get("seconds", 0.0)))

    def add_violations(self, shard: int, listed: RowViolations) -> None:
        """One contract's violating rows in one shard (a shard listed again is not counted twice)."""
        key = (listed.check, shard)
        if key in self.violations or not len(listed):
            return
        self.violations[key] = listed
        self.listed[listed.check] = self.listed.get(listed.check, 0) + len(listed)

    def _add_partial(self, name: str, shard: int, value: Any) -> None:
        """Kept by shard, or folded into the contract's running state (``Spec.fold``; a re-run shard once)."""
        from ..checks.registry import spec

        declared = spec(name)
        if declared is None or declared.fold is None:
            self.partials.setdefault(name, {})[shard] = value
        elif shard not in self._folded_shards.setdefault(name, set()):
            self._folded_shards[name].add(shard)
            self.folded[name] = declared.fold(self.folded.get(name), value)

    def add_result(self, result: dict[str, Any], outcome: str, skip_reason: str | None = None,
                   duration: float = 0.0, details: list[str] | None = None) -> None:
        """One contract result (a shard's, a dataset-level test's or a controller-side verdict)."""
        one = _new_entry()
        one.update(tests=1, seconds=duration, rows_checked=result["rows_checked"],
                   rows_violating=result["rows_violating"], by_reason=dict(result["by_reason"]),
                   severity=dict(result.get("severity") or {}), examples=list(result["examples"]),
                   report_only=bool(result.get("report_only")),
                   messages=[result["message"]] if result["message"] else [])
        one[outcome] += 1
        if details:
            one["details"] = list(details)
        if result.get("figures"):  # what the reports draw of a controller-side verdict (declare.Verdict)
            one["figures"] = result["figures"]
        reason = result["skipped"] or skip_reason
        one["skip_reasons"] = [reason] if reason else []
        _merge_entry(self.checks.setdefault(result["check"], _new_entry()), one)

    def add_counts(self, counts: dict[str, Any] | None) -> None:
        """Exact per-id counts of one part (a shard, or a part of a split run), summed densely: ids are
        bounded by the vocabulary, so a dense sum replaces sorting every part's sparse counts."""
        self._count_parts += 1
        if counts is None:
            self._counts_missing = True
            return
        ids, n = np.asarray(counts["ids"]), np.asarray(counts["counts"])
        if not len(ids):
            return
        top = int(ids.max())
        if top >= len(self._counts):
            self._counts = np.concatenate((self._counts, np.zeros(top + 1 - len(self._counts), np.int64)))
        if len(ids) == 1 or bool((ids[1:] > ids[:-1]).all()):  # sparse counts: sorted, each id once
            self._counts[ids] += n  # a plain indexed add is exact without repeats, ~10x cheaper than add.at
        else:
            np.add.at(self._counts, ids, n.astype(np.int64, copy=False))

    def add_stats(self, s: dict[str, Any]) -> None:
        """The running state behind figures and profile: each statistic by its declared merge rule."""
        accumulators.add(self._sums, s)

    # --- merge -----------------------------------------------------------------------------

    def merge(self, other: "Reducer", once: frozenset[str] = frozenset()) -> list[str]:
        """Add another reducer (another part of a --split run, disjoint shards) into this one.

        Contracts named in ``once`` judge what every part sees alike (metadata): their entries
        are kept once, and a part that judged otherwise is returned as a conflict.
        """
        conflicts = []
        for index, stats in other.stats.items():
            if index not in self.stats:
                self.stats[index] = dict(stats)
                self.add_stats(stats)
        if other._count_parts:
            self._count_parts += other._count_parts
            self._counts_missing |= other._counts_missing
            self.add_counts({"ids": np.flatnonzero(other._counts),
                             "counts": other._counts[np.flatnonzero(other._counts)]})
            self._count_parts -= 1  # add_counts counted the merged block as one more part
        for name, by_shard in other.partials.items():
            self.partials.setdefault(name, {}).update(by_shard)
        for (_, shard), listed in other.violations.items():
            self.add_violations(shard, listed)
        if not other.violations:  # a part read back from its summary: its counts, without the arrays
            for name, n in other.listed.items():
                self.listed[name] = self.listed.get(name, 0) + n
        for name, theirs in other.checks.items():
            mine = self.checks.get(name)
            if mine is None:
                self.checks[name] = _copy_entry(theirs)
                continue
            if name in once:
                if ([mine[k] for k in ("passed", "failed", "skipped")]
                        != [theirs[k] for k in ("passed", "failed", "skipped")]):
                    conflicts.append(name)
                continue
            _merge_entry(mine, theirs)
        return conflicts

    # --- extract ---------------------------------------------------------------------------

    def supervised_counts(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The exact supervised-id counts of every part added, as sorted (ids, counts); None when a
        part had none (no usable loss_mask) or nothing was added."""
        if self._counts_missing or not self._count_parts:
            return None
        nz = np.flatnonzero(self._counts)
        return nz, self._counts[nz]

    def shard_stats(self) -> list[dict]:
        return [self.stats[k] for k in sorted(self.stats)]

    def _supervised_total(self) -> int | None:
        return total(self._sums, "supervised_tokens")

    def figures(self, num_shards: int) -> dict[str, Any]:
        """Exact dataset figures (never a sample): summary.json's ``figures``."""
        t = self._sums
        parts = t.get("parts", 0)
        rows_checked, tokens = total(t, "rows_checked"), total(t, "tokens")
        sup = self._supervised_total()
        out: dict[str, Any] = {
            "shards_covered": parts,
            "shards_total": num_shards,
            "complete": parts == num_shards,
            "rows": total(t, "rows"),
            "rows_checked": rows_checked,
            "rows_excluded": total(t, "rows_excluded"),
            "tokens": tokens,
            "seq_len_min": total(t, "seq_len_min"),
            "seq_len_mean": tokens / rows_checked if rows_checked else None,
            "seq_len_max": total(t, "seq_len_max"),
            "rows_at_max_len": total(t, "rows_at_max_len"),
            "supervised_tokens": sup,
        }
        out["supervised_share"] = (sup / tokens) if sup is not None and tokens else None
        if total(t, "boundary_tokens") is not None:
            out["boundary_tokens"] = total(t, "boundary_tokens")
            out["boundary_supervised"] = total(t, "boundary_supervised") or 0
            out["role_tokens"] = dict(sorted((total(t, "role_tokens") or {}).items()))
        if total(t, "role_supervised") is not None:  # mask policy: supervised tokens per role
            out["supervised_role_tokens"] = dict(sorted(total(t, "role_supervised").items()))
        if total(t, "anchor_positions") is not None:
            out["anchor_positions"] = total(t, "anchor_positions")  # DFlash anchor candidates, whole dataset
        if total(t, "contract_figures"):  # what contracts' shard passes counted (declare.Spec.shard_figures)
            out["contract_figures"] = {name: dict(f) for name, f in sorted(total(t, "contract_figures").items())}
        return out

    def profile(self, top_k: int = 100, counts: tuple[np.ndarray, np.ndarray] | None | Any = None) -> dict[str, Any]:
        """What a person compares between two versions of a dataset: summary.json's ``profile``
        (quantiles read from the merged histograms, never averaged over shards)."""
        t = self._sums
        seq, share = total(t, "seq_len_hist"), total(t, "supervised_share_hist")
        tokens = total(t, "tokens")
        sup = self._supervised_total()
        if counts is None:
            counts = self.supervised_counts()
        out: dict[str, Any] = {
            "rows": total(t, "rows"),
            "rows_checked": total(t, "rows_checked"),
            "tokens": tokens,
            "seq_len": {
                "bin_edges": SEQ_LEN_EDGES.tolist(),
                "bins_per_octave": SEQ_LEN_BINS_PER_OCTAVE,
                "histogram": seq.tolist() if seq is not None else None,
                "quantiles": quantiles(seq, SEQ_LEN_EDGES) if seq is not None else None,
            },
            "supervised_tokens": sup,
            "supervised_share": (sup / tokens) if sup is not None and tokens else None,
            "supervised_share_per_row": {
                "bins": SHARE_BINS,
                "histogram": share.tolist() if share is not None else None,
                "quantiles": quantiles(share, np.linspace(0, 1, SHARE_BINS + 1)) if share is not None else None,
            },
            "role_token_shares": shares(total(t, "role_tokens") or {}),
            "role_supervised_shares": shares(total(t, "role_supervised") or {}),
            "top_supervised_tokens": None,
        }
        if counts is not None:
            out["top_supervised_tokens"] = [{"id": i, "count": c} for i, c in top_tokens(*counts, top_k)]
        return out

    # --- state -----------------------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        """What summary.json keeps for ``merge-reports`` beside its ``shards`` and ``supervised_id_counts``:
        every contract's entry (counts, reasons, lowest examples, messages)."""
        return {"checks": {name: _plain_entry(c) for name, c in self.checks.items()},
                "listed": dict(sorted(self.listed.items()))}

    @classmethod
    def from_summary(cls, doc: dict[str, Any]) -> "Reducer":
        """A part's reducer, back from its summary.json (``reducer``, ``shards``, ``supervised_id_counts``)."""
        r = cls()
        for stats in doc["shards"]:
            r.stats[int(stats["shard"])] = dict(stats)
            r.add_stats(stats)
        counts = doc.get("supervised_id_counts")
        r.add_counts(None if counts is None else {"ids": np.asarray(counts["ids"], np.int64),
                                                  "counts": np.asarray(counts["counts"], np.int64)})
        for name, c in doc["reducer"]["checks"].items():
            r.checks[name] = _copy_entry(c)
        r.listed = {name: int(n) for name, n in (doc["reducer"].get("listed") or {}).items()}
        return r


def _merge_entry(mine: dict[str, Any], theirs: dict[str, Any]) -> None:
    """Add one contract entry into another: a result into its contract's entry, a part's into the whole's."""
    for key in (*_ENTRY_COUNTS, "seconds"):
        mine[key] += theirs[key]
    for reason, count in theirs["by_reason"].items():
        mine["by_reason"][reason] = mine["by_reason"].get(reason, 0) + count
    mine["severity"] = {**mine.get("severity", {}), **theirs.get("severity", {})}
    mine["examples"] = _lowest([*mine["examples"], *theirs["examples"]])
    mine["messages"] = [*mine["messages"], *theirs["messages"]]
    mine["skip_reasons"] = [*mine["skip_reasons"],
                            *(r for r in theirs["skip_reasons"] if r not in mine["skip_reasons"])]
    mine["report_only"] = mine.get("report_only", False) or theirs.get("report_only", False)
    if theirs.get("global"):
        mine["global"] = True
    if theirs.get("details"):
        mine["details"] = list(theirs["details"])
    if theirs.get("figures") and not mine.get("figures"):
        mine["figures"] = theirs["figures"]


def _lowest(examples: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(examples, key=lambda e: e["row"])[:MAX_SUMMARY_EXAMPLES]


def _plain_entry(c: dict[str, Any]) -> dict[str, Any]:
    return {**c, "by_reason": dict(c["by_reason"]),
            "examples": [{k: v for k, v in e.items() if k != "excerpt"} for e in c["examples"]]}


def _copy_entry(c: dict[str, Any]) -> dict[str, Any]:
    out = {**c, "by_reason": defaultdict(int, c["by_reason"]), "severity": dict(c.get("severity", {})),
           "examples": [dict(e) for e in c["examples"]],
           "messages": list(c["messages"]), "skip_reasons": list(c["skip_reasons"])}
    return out


def dataset_profile(stats: list[dict], top_k: int = 100,
                    counts: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, Any]:
    """The profile of these shard records (summary.json's ``profile``), summed as a run sums them.

    ``counts`` are already-merged supervised id counts (e.g. the summed top-level
    ``supervised_id_counts`` of several summaries), for shard records that no longer carry theirs.
    """
    r = Reducer()
    for s in stats:
        r.add_counts(s.get("supervised_id_counts"))
        r.add_stats(s)
    return r.profile(top_k, counts)


def merged_counts(parts: Iterable[dict], key: str = "supervised_id_counts") -> tuple[np.ndarray, np.ndarray] | None:
    """Exact per-id counts summed over shard (or part) records, as sorted (ids, counts)."""
    r = Reducer()
    for p in parts:
        r.add_counts(p.get(key))
    return r.supervised_counts()


__all__ = ["MAX_SUMMARY_EXAMPLES", "QUANTILES", "Reducer", "dataset_profile", "merged_counts", "outcome_of"]
