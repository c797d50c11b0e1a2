"""The bodies of the contract suite's tests: what runs where the shard is (a worker, or the
single ``-n 0`` process). Each returns its results on the test report (``RESULT_KEY`` for a
dataset-level contract, one encoded ``ShardReport`` for a shard) and fails or skips the test
with a message a person can act on; ``run/controller.py`` reads the reports.
"""

from __future__ import annotations

import time

import pytest

from ..checks import registry
from ..dataset.columns import Shard
from ..engine import Engine
from ..checks.integrity import CHECK as INTEGRITY_CHECK
from ..report.explain import decoded_example, format_failure
from ..report.summary import REPORT_KEY, RESULT_KEY
from ..results import CheckResult, ShardReport, shown_examples
from .wire import encode_report


def check_dataset(request: pytest.FixtureRequest, engine: Engine, name: str) -> None:
    """Body of a dataset-level contract test."""
    result = engine.dataset_check(name)
    request.node.user_properties.append((RESULT_KEY, result.to_dict()))
    if result.skipped:
        pytest.skip(result.skipped)
    if not result.ok:
        pytest.fail(format_failure(result, engine), pytrace=False)


def check_rows(request: pytest.FixtureRequest, engine: Engine, shard: Shard) -> None:
    """Body of a shard's test: every per-row and content contract, each keeping its own result.

    One test per shard, not one per contract and shard: pytest and xdist cost about
    2 ms a test, which for 15 contracts on 92 shards was more than the checks of the
    whole dataset at -n 2. ``seconds`` of a result is that contract's own time (the
    shard's read, labels and stats are shared, and counted in no contract's time).
    """
    try:
        stats = engine.stats(shard)
    except Exception:  # the contracts that need what failed fail below, each with the error
        stats = None
    report = ShardReport(shard.index, [], stats)
    results, failures = report.results, []
    try:
        for check in engine.shard_checks:
            t0 = time.perf_counter()
            try:
                result = engine.shard_check(shard, check)
                declared = registry.spec(check)
                if declared.partial is not None and engine.skip_reason(check) is None:
                    report.partials[check] = declared.partial(engine, shard)
                if declared.shard_figures is not None and stats is not None and engine.skip_reason(check) is None:
                    figures = declared.shard_figures(engine, shard)
                    if figures is not None:  # mergeable: summed by the reducer, kept in summary.json's shards
                        stats.setdefault("contract_figures", {})[check] = figures
            except Exception as exc:  # a bug of ours on odd data: that contract fails, the others still report
                result = CheckResult(check, shard.id, message=(
                    f"could not be evaluated ({type(exc).__name__}: {exc}); this is a drafter-contracts bug, "
                    "please report it with the shard id"))
            results.append({**_explained(engine, result), "seconds": time.perf_counter() - t0})
            if result.listed is not None and result.skipped is None:
                result.listed.token_ids = engine.first_tokens(shard, result.listed.rows, result.listed.positions)
                report.violations.append(result.listed)
            if result.skipped is None and not result.ok and not result.report_only:
                failures.append(result)
    finally:
        unread = engine.unreadable(shard)
        if shard.index in engine.buffer_problems:  # caught while reading: a data verdict, not a tool bug
            integrity = CheckResult(INTEGRITY_CHECK, shard.id, rows_checked=shard.rows, rows_violating=shard.rows,
                                    message=f"{shard.id}: {engine.buffer_problems[shard.index]}")
            results.append({**integrity.to_dict(), "seconds": 0.0})
            failures.append(integrity)
        report.unread = unread or None
        request.node.user_properties.append((REPORT_KEY, encode_report(report)))
    if failures:
        head = (f"{len(failures)} contract(s) broken in {shard.id}: "
                + ", ".join(f"{r.check} ({r.rows_violating:,} rows)" if r.rows_violating else r.check
                            for r in failures))
        pytest.fail("\n\n".join([head, *(format_failure(r, engine) for r in failures)]), pytrace=False)
    if all(r["skipped"] for r in results):
        pytest.skip("; ".join(dict.fromkeys(r["skipped"] for r in results)))




def _explained(engine: Engine, result: CheckResult) -> dict:
    """A result as it travels: its first violating rows decoded here, where the shard is in memory
    (``Engine.row`` reads them from the shard's arrays), so no report reads the dataset again; as many as
    ``--examples`` asks for (``Engine.examples``).
    The controller keeps the excerpts of the rows its reports show (the lowest rows of a contract
    that fails or warns: among every shard's lowest)."""
    out = result.to_dict()
    declared = registry.spec(result.check)
    if result.skipped or not result.examples or declared is None or not declared.decodable:
        return out
    for ex in shown_examples(out["examples"], engine.examples, out["by_reason"], out["severity"],
                             lambda e: e["reason"], lambda e: e["row"]):  # --examples N
        try:
            ex["excerpt"] = decoded_example(engine, ex["row"], ex["position"], result.check, ex.get("reason", ""))
        except Exception as exc:  # an explanation must never cost the shard's verdicts
            ex["excerpt"] = {"error": f"{type(exc).__name__}: {exc}"}
    return out
