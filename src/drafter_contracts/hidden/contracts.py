"""The hidden-state contracts, declared (``checks/declare.py``) like every other one.

All need a hidden-states folder (the family's input, ``Engine.inputs["hidden_states"]``, opened by
``family.open_input`` from ``--hidden-states`` or ``DATASET/hidden_states``) and are ``on_request``:
without a folder they are left out of the run and its reports, and the token contracts run as before.

* per row (in each row shard's test, one pass over the shard's files, ``HiddenRun.outcome``):
  hs_header, hs_shape_dtype, hs_alignment, hs_values;
* whole dataset, decided at the controller from what every shard's report carries:
  hs_coverage (partial: the shard's rows without a file; the folder's extra entries from one
  listing), hs_layer_norms and hs_norm_outliers (partial: per-row log-norms; bounds learnt over
  every row), hs_prefix_consistency (partial: fingerprints at shared prefixes, folded in as
  reports arrive);
* a test of its own: hs_spot_recompute (--hs-verify-model).

hs_header's ``shard_figures`` (files and bytes each pass read, their seconds) go into the shard's
stats, so the reducer sums them the same way with ``-n 0``, xdist and ``merge-reports``.
Examples name rows whose tokens are fine (``decodable=False``): no excerpt is decoded for them.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..checks.declare import IDS, Scope, Spec, Verdict, WholeRun, register
from ..results import CheckResult
from . import checks as C
from .policy import NAME
from .verdicts import fold_prefixes

if TYPE_CHECKING:
    from ..checks.protocols import ContractEngine, ShardData
    from ..dataset.columns import Shard
    from .run import HiddenRun

_NEEDS = frozenset({IDS, NAME})
_OFF = "value pass off ([hidden_states] values = false or --hs-headers-only)"
_HIDDEN = dict(needs=_NEEDS, on_request=True, decodable=False)


def _run(e: "ContractEngine") -> "HiddenRun":
    """The run's hidden-states folder (there whenever these contracts run: they need it)."""
    return e.inputs[NAME]


def _per_file(name: str):
    """A per-row contract's ``run``: its result from the shard's one pass over its files."""
    return lambda e, w: _run(e).outcome(w.shard).result(name)


def _details(result: CheckResult, shown: int = 20) -> list[str]:
    """A controller-side verdict's lines in summary.json and the failing test's text: counts, then rows."""
    lines = [f"{count:,} × {reason}" for reason, count in sorted(result.by_reason.items(), key=lambda kv: -kv[1])]
    lines += [f"row {v.row}{f' (position {v.position:,})' if v.position >= 0 else ''}: {v.reason}"
              for v in result.examples[:shown]]
    return lines


# --- hs_coverage ------------------------------------------------------------------------------------


def _coverage_carrier(e: "ContractEngine", w: "ShardData") -> CheckResult:
    """The shard's carrier record (rows looked for); the verdict is the controller's, test_hs_coverage."""
    _run(e).outcome(w.shard)
    return CheckResult(C.COVERAGE, w.shard.id, rows_checked=w.shard.rows)


def _missing(e: "ContractEngine", shard: "Shard") -> Any:
    out = _run(e).done(shard)
    return None if out is None else {"rows": shard.rows, "missing": out.missing}


def _reduce_coverage(run: WholeRun) -> Verdict | None:
    hidden: HiddenRun | None = run.engine.inputs.get(NAME)
    if hidden is None:
        return None
    import numpy as np

    parts = [p for _, p in sorted(run.partials(C.COVERAGE).items()) if p is not None]
    missing = np.concatenate([np.asarray(p["missing"], np.int64) for p in parts] or [np.zeros(0, np.int64)])
    split = run.engine.split
    # The folder's extra entries are the same for every part of a --split run: part 1 lists them, once.
    extras, count = hidden.extras() if split is None or split[0] == 1 else ([], 0)
    result = C.check_coverage(np.sort(missing), sum(int(p["rows"]) for p in parts), extras, count, str(hidden.folder))
    return Verdict(result, _details(result) if result.examples else [])


# --- the value verdicts -------------------------------------------------------------------------------


def _norms(e: "ContractEngine", shard: "Shard") -> Any:
    out = _run(e).done(shard)
    return None if out is None else out.norms


def _prefixes(e: "ContractEngine", shard: "Shard") -> Any:
    out = _run(e).done(shard)
    return None if out is None else out.prefixes


def _none(e: "ContractEngine", shard: "Shard") -> None:
    """hs_norm_outliers reads hs_layer_norms' partials; sending none of its own still makes it one of the
    shard tests' contracts, so a shard that never reports leaves it incomplete, not pass."""
    return None


def _value_carrier(name: str):
    def run(e: "ContractEngine", w: "ShardData") -> CheckResult:
        out = _run(e).outcome(w.shard)
        if out.norms is None:
            return CheckResult(name, w.shard.id, skipped=_OFF)
        return CheckResult(name, w.shard.id, rows_checked=int(len(out.norms["rows"])))
    return run


def _value_verdict(name: str):
    """reduce of hs_layer_norms / hs_norm_outliers / hs_prefix_consistency: the three are decided together, once."""
    def reduce(run: WholeRun) -> Verdict | None:
        hidden: HiddenRun | None = run.engine.inputs.get(NAME)
        if hidden is None:
            return None
        if not hidden.values:
            return Verdict(CheckResult(name, "dataset", skipped=_OFF))
        if hidden.verdicts is None:
            from .verdicts import value_verdicts

            p = hidden.policy
            t0 = time.perf_counter()
            norms = [v for _, v in sorted(run.partials(C.LAYER_NORMS).items())]
            hard, soft, prefix, dist = value_verdicts(norms, run.folded(C.PREFIX), p.norm_fail_ratio,
                                                      p.norm_outlier_mads, p.norm_strict)
            hidden.verdicts = ({r.check: r for r in (hard, soft, prefix)}, dist, time.perf_counter() - t0)
        results, dist, _ = hidden.verdicts
        result = results[name]
        return Verdict(result, _details(result) if result.examples else [],
                       figures={"norms": dist} if name == C.LAYER_NORMS and dist else None)
    return reduce


def _figures(e: "ContractEngine", shard: "Shard") -> dict[str, float] | None:
    out = _run(e).done(shard)
    return None if out is None else out.figures


# --- spot recompute ---------------------------------------------------------------------------------


def _spot_recompute(e: "ContractEngine") -> CheckResult:
    hidden: HiddenRun = _run(e)
    if hidden.verify_model is None:
        return CheckResult(C.RECOMPUTE, "dataset", skipped="not asked for: pass --hs-verify-model DIR (the target "
                           "model) and --hs-verify-rows N")
    from .recompute import spot_recompute

    return spot_recompute(hidden.folder, hidden.verify_model, hidden.verify_rows, hidden.num_rows, hidden.policy.config,
                          hidden.policy.verify_rtol)


# Report order: coverage, the per-file contracts, the controller's value verdicts, the recompute.
register(Spec(C.COVERAGE, Scope.WHOLE, "one file hs_{i}.safetensors per row: none missing, none extra", **_HIDDEN,
              per_part=True, run=_coverage_carrier, partial=_missing, reduce=_reduce_coverage))
register(Spec(C.HEADER, Scope.ROW, "every file's safetensors header is valid, its byte ranges inside the file",
              **_HIDDEN, run=_per_file(C.HEADER), shard_figures=_figures))
register(Spec(C.SHAPE, Scope.ROW, "hidden_states is [seq_len, layers, hidden_size] with the declared layers, size "
              "and dtype", **_HIDDEN, run=_per_file(C.SHAPE)))
register(Spec(C.ALIGNMENT, Scope.ROW, "every file's token_ids are its row's input_ids exactly", **_HIDDEN,
              run=_per_file(C.ALIGNMENT)))
register(Spec(C.VALUES, Scope.ROW, "finite values; no all-zero or constant layer, position or vector", **_HIDDEN,
              run=_per_file(C.VALUES)))
register(Spec(C.LAYER_NORMS, Scope.WHOLE, "no row's layer norms off the dataset's by more than norm_fail_ratio",
              **_HIDDEN, per_part=True, run=_value_carrier(C.LAYER_NORMS), partial=_norms,
              reduce=_value_verdict(C.LAYER_NORMS)))
register(Spec(C.NORM_OUTLIERS, Scope.WHOLE, "rows beyond norm_outlier_mads of the dataset's median norms (report-only)",
              **_HIDDEN, per_part=True, run=_value_carrier(C.NORM_OUTLIERS), partial=_none,
              reduce=_value_verdict(C.NORM_OUTLIERS)))
register(Spec(C.PREFIX, Scope.WHOLE, "rows sharing a token prefix have the same states over it", **_HIDDEN,
              per_part=True, run=_value_carrier(C.PREFIX), partial=_prefixes, fold=fold_prefixes,
              reduce=_value_verdict(C.PREFIX)))
register(Spec(C.RECOMPUTE, Scope.DATASET, "sampled rows recomputed with the target model (CPU) agree",
              **_HIDDEN, run=_spot_recompute))
