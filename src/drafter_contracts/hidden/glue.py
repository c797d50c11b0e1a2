"""pytest glue of the hidden-state contracts: the run as a fixture, file shards as parameters, the controller's part.

``plugin.py`` registers this module for every ``--dataset-path`` run; it does nothing
unless the run has a hidden-states folder (``--hidden-states DIR``, or ``DIR/hidden_states``
beside the dataset), and then the contract module ``test_hidden_contracts.py`` is
collected too. Shard results travel like the row shards' (``RESULTS_KEY``), so terminal,
summary.json, report.html and junit.xml treat them alike; the payload for the controller's
verdicts travels under its own key and is taken off before any report consumer sees it.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from ..errors import UsageProblem
from ..report.summary import RESULT_KEY, RESULTS_KEY, mark_incomplete
from ..results import CheckResult
from . import checks as C
from .plan import FileShard
from .run import HiddenRun, open_run
from .verdicts import PAYLOAD_KEY, HiddenCollector, pack_payload

HIDDEN_KEY = pytest.StashKey[HiddenRun]()
COLLECTOR = "drafter_contracts_hidden_collector"
MODULE = "test_hidden_contracts.py"
_SHARD_PARAM = re.compile(r"\[(hs-\d+\[\d+:\d+\])\]$")


def hidden_run(config: pytest.Config) -> HiddenRun | None:
    return config.stash.get(HIDDEN_KEY, None)


def pytest_configure(config: pytest.Config) -> None:
    from ..options import run_options
    from ..plugin import ENGINE_KEY

    opts = run_options(config)
    engine = config.stash.get(ENGINE_KEY, None)
    if opts.hidden is None or engine is None:
        return
    try:
        run = open_run(opts.hidden, engine.dataset, engine.contract.hidden_states, split=opts.split,
                       verify_model=opts.hidden_verify_model, verify_rows=opts.hidden_verify_rows,
                       headers_only=opts.hidden_headers_only)
        _ = run.declared  # a config.json that cannot be read is a usage error now
    except UsageProblem as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[HIDDEN_KEY] = run
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(ExpectedShards(run), COLLECTOR + "_expected")


def pytest_sessionstart(session: pytest.Session) -> None:
    """The payload collector, registered after plugin.py's ContractRun so that its tryfirst hook runs
    before ContractRun's (pluggy calls the last registered first): the payload never reaches the
    recorded results, summary.json's raw records or junit.xml."""
    run = hidden_run(session.config)
    if run is not None and not hasattr(session.config, "workerinput") \
            and not session.config.pluginmanager.has_plugin(COLLECTOR):
        session.config.pluginmanager.register(HiddenCollector(run.policy.prefix_rtol), COLLECTOR)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The hidden-state contract module only runs with a hidden-states folder."""
    if collection_path.name == MODULE and hidden_run(config) is None:
        return True
    return None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "hs_shard" not in metafunc.fixturenames:
        return
    run = hidden_run(metafunc.config)
    shards = run.shards if run is not None else []
    metafunc.parametrize("hs_shard", shards, ids=[s.id for s in shards])


@pytest.fixture(scope="session")
def hs_run(request: pytest.FixtureRequest) -> HiddenRun:
    run = hidden_run(request.config)
    if run is None:
        pytest.skip("no hidden-states folder: pass --hidden-states DIR")
    return run


class ExpectedShards:
    """Which file-shard tests were collected to run (controller side), to name the ones that never reported."""

    def __init__(self, run: HiddenRun) -> None:
        self.by_id = {s.id: s for s in run.shards}
        self.expected: set[int] = set()

    def _expect(self, nodeids: Any) -> None:
        for nodeid in nodeids:
            m = _SHARD_PARAM.search(nodeid)
            if m and m.group(1) in self.by_id:
                self.expected.add(self.by_id[m.group(1)].index)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._expect(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self._expect(ids)


def format_hidden(result: CheckResult, shown: int = 5) -> str:
    """A failed hidden-state contract: what, how many, and the first rows with what is wrong with each."""
    if result.message and not result.examples:
        return f"{result.check}: {result.message}"
    lines = [f"{result.check}: {result.rows_violating:,} of {result.rows_checked:,} rows violate ({result.scope})"]
    if result.message:
        lines.append("  " + result.message)
    for reason, count in sorted(result.by_reason.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {count:,} × {reason}")
    for v in result.examples[:shown]:
        lines.append(f"  row {v.row}{f' (position {v.position})' if v.position >= 0 else ''}: {v.reason}")
    if result.rows_violating > shown:
        lines.append(f"  first rows: {', '.join(str(v.row) for v in result.examples[:20])}"
                     f"{' …' if result.rows_violating > 20 else ''}")
    return "\n".join(lines)


# --- the tests' bodies ----------------------------------------------------------------------------


def check_hidden_dataset(request: pytest.FixtureRequest, run: HiddenRun, check: str) -> None:
    """Body of a whole-folder contract test (coverage, spot recompute)."""
    t0 = time.perf_counter()
    if check == C.COVERAGE:
        result = run.coverage()
    elif check == C.RECOMPUTE:
        if run.verify_model is None:
            result = CheckResult(C.RECOMPUTE, "dataset", skipped="not asked for: pass --hs-verify-model DIR "
                                 "(the target model) and --hs-verify-rows N")
        else:
            from .recompute import spot_recompute

            result = spot_recompute(run.folder, run.verify_model, run.verify_rows, run.num_rows, run.policy.config,
                                    run.policy.verify_rtol)
    else:
        raise KeyError(check)
    request.node.user_properties.append((RESULT_KEY, {**result.to_dict(), "seconds": time.perf_counter() - t0}))
    if result.skipped:
        pytest.skip(result.skipped)
    if not result.ok:
        pytest.fail(format_hidden(result), pytrace=False)


def check_hidden_shard(request: pytest.FixtureRequest, run: HiddenRun, shard: FileShard) -> None:
    """Body of a file shard's test: header, shape and dtype, alignment, values; each keeps its own verdict."""
    props = request.node.user_properties
    t0 = time.perf_counter()
    try:
        outcome = run.run_shard(shard)
    except Exception as exc:  # a bug of ours on odd data: every shard contract fails, saying so
        results = [CheckResult(c, shard.id, message=(f"could not be evaluated ({type(exc).__name__}: {exc}); this is a "
                                                      "drafter-contracts bug, please report it with the shard id"))
                   for c in C.SHARD_CHECKS]
        props.append((RESULTS_KEY, [r.to_dict() for r in results]))
        pytest.fail(f"{shard.id}: {results[0].message}", pytrace=False)
    seconds = (time.perf_counter() - t0) / len(outcome.results)
    props.append((RESULTS_KEY, [{**r.to_dict(), "seconds": seconds} for r in outcome.results]))
    props.append((PAYLOAD_KEY, pack_payload(outcome.payload)))
    failures = [r for r in outcome.results if r.skipped is None and not r.ok and not r.report_only]
    if failures:
        head = f"{len(failures)} hidden-state contract(s) broken in {shard.id}: " + ", ".join(
            f"{r.check} ({r.rows_violating:,} rows)" for r in failures)
        pytest.fail("\n\n".join([head, *(format_hidden(r) for r in failures)]), pytrace=False)


# --- controller: global verdicts, summary section ---------------------------------------------------


def finish(session: pytest.Session, contract_run: Any) -> None:
    """Before the summary is built: the verdicts that need every shard, through pytest's report hooks."""
    run = hidden_run(session.config)
    collector = session.config.pluginmanager.get_plugin(COLLECTOR)
    if run is None or collector is None or not collector.arrived:
        return
    if not run.values:
        why = "value pass off ([hidden_states] values = false or --hs-headers-only)"
        for check in C.GLOBAL_CHECKS:
            contract_run.report_global(session, CheckResult(check, "dataset", skipped=why), [])
        return
    p = run.policy
    t0 = time.perf_counter()
    results, dist = collector.verdicts(p.norm_fail_ratio, p.norm_outlier_mads, p.norm_strict, collector.excluded)
    collector.norm_distribution = dist
    collector.verdict_seconds = time.perf_counter() - t0
    for result in results:
        contract_run.report_global(session, result, format_hidden(result, 20).splitlines()[1:] if result.examples else [])


def annotate(summary: dict[str, Any], session: pytest.Session, wall_seconds: float) -> None:
    """The ``hidden_states`` section of summary.json; contracts of shards that never reported are incomplete."""
    run = hidden_run(session.config)
    collector = session.config.pluginmanager.get_plugin(COLLECTOR)
    expected = session.config.pluginmanager.get_plugin(COLLECTOR + "_expected")
    if run is None or collector is None:
        return
    t = collector.totals
    by_index = {s.index: s for s in run.shards}
    lost = sorted((expected.expected if expected is not None else set()) - collector.arrived)
    unchecked = [{"shard": by_index[i].id, "index": i, "rows": [by_index[i].start, by_index[i].stop],
                  "reason": "no result arrived (its test was deselected mid-run, errored or its worker died)"} for i in lost]
    if unchecked:
        mark_incomplete(summary["checks"], unchecked, C.SHARD_CHECKS + C.GLOBAL_CHECKS)
    summary["hidden_states"] = {
        "folder": str(run.folder),
        "declared": run.declared.text(),
        "policy": run.policy.to_dict(),
        "shards": len(run.shards), "shards_reported": len(collector.arrived), "unchecked": unchecked,
        "files": t["files"], "header_bytes": t["header_bytes"], "value_bytes": t["value_bytes"],
        "header_seconds": round(t["header_seconds"], 6), "value_seconds": round(t["value_seconds"], 6),
        "header_files_per_second": round(t["files"] / t["header_seconds"], 1) if t["header_seconds"] else None,
        "value_bytes_per_second": round(t["value_bytes"] / t["value_seconds"], 1) if t["value_seconds"] else None,
        "wall_seconds": round(wall_seconds, 3),
        # from the first file shard's start to the last one's end, over every worker: the passes' own wall time
        "shards_wall_seconds": round(max(0.0, collector.span[1] - collector.span[0]), 3) if collector.arrived else None,
        "values": run.values,
        "norms": getattr(collector, "norm_distribution", {}),
    }
