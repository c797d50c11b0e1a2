"""The controller of a contract run: every test report in, every verdict and report out.

Registered only where the run's reports arrive (the single ``-n 0`` process, or the
pytest-xdist controller; the pytest-xdist ``dsession.py`` / pytest-cov pattern). Each
shard's ``ShardReport`` and each dataset-level result goes into one ``Reducer``; at
session end the whole-dataset contracts of the registry reduce it to their verdicts,
each sent through pytest's report hooks so the terminal, JUnit, the exit code and
summary.json see them like any other contract test; then summary.json, report.html,
the terminal summary and the verdict line are written from the reducer.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ..kernels import compiled as kernels
from ..checks import declare, registry
from ..checks.completeness import Coverage
from ..engine import Engine
from ..contract_families import families
from ..report import baseline as baseline_mod
from ..decoded_rows import beyond_kept
from ..report.explain import decoded_example, warn_excerpts
from ..report.fingerprints import dataset_fingerprint, tokenizer_fingerprint
from ..report.artifacts import write_reports
from ..report.merge import split_section
from ..report.reducer import Reducer, dataset_profile
from ..report.shared_reasons import named
from ..report.summary import DETAILS_KEY, REPORT_KEY, RESULT_KEY, build_summary, count_line, terminal_lines
from ..report.violations import build_table, listed_note
from ..results import CheckResult, shown_examples
from .wire import decode_report, unpack


class ContractRun:
    """Controller-side plugin object (pytest-xdist/pytest-cov pattern): records reports, writes the reports.

    Registered only where the run's reports arrive: the single process with
    ``-n 0``, the controller with xdist. Workers just run tests. Global checks that
    need every shard's stats (the baseline comparison) run here at session end and
    are reported through pytest's own report hook, so the terminal, JUnit, the exit
    code and summary.json all see them like any other contract test.
    """

    def __init__(self, engine: Engine, baseline_path: Path | None = None, baseline: dict | None = None,
                 save_baseline: Path | None = None) -> None:
        self.engine = engine
        #: (path, document) of --baseline FILE, read for the baseline contract's reduce
        self.baseline = (baseline_path, baseline) if baseline is not None and baseline_path is not None else None
        self.save_baseline = save_baseline
        self.reducer = Reducer()  # every result, stat and partial of the run (report/reducer.py)
        self.started = time.time()
        self.summary: dict[str, Any] | None = None
        self.summary_path: Path | None = None
        self.artifacts: list[str] = []
        self._module_prefix: str | None = None
        self.session: pytest.Session | None = None
        self.nothing_checked = False
        self.decided = False  # the whole-dataset verdicts were reported
        self.report_error: str | None = None
        self.verdicts_reported = 0  # whole-dataset verdicts sent as tests of their own (report_global)
        self.collected = 0  # tests pytest collected (with xdist: one worker's list; every worker collects all)
        # which shard and contract tests ran, which reported, why not (checks/completeness.py)
        self.coverage = Coverage(engine.shards, engine.dataset_checks)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = len(session.items)
        self.coverage.expect(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.collected = len(ids)
        self.coverage.expect(ids)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Every test report: a shard's ShardReport or a contract's one result goes into the reducer."""
        unpack(report)
        own = dict(report.user_properties)
        shard_report = decode_report(own[REPORT_KEY]) if REPORT_KEY in own else None
        self.coverage.note(report.nodeid, report.when, report.outcome, shard_report is not None or RESULT_KEY in own,
                           shard_report.unread if shard_report is not None else None,
                           None if report.longrepr is None else str(report.longrepr))
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            reason = None
            if report.skipped and isinstance(report.longrepr, tuple):
                reason = str(report.longrepr[2]).removeprefix("Skipped: ")
            if shard_report is not None:
                self.reducer.add(shard_report)
            elif own.get(RESULT_KEY) is not None:
                self._record(own[RESULT_KEY], report.outcome, reason, float(getattr(report, "duration", 0.0) or 0.0),
                             own.get(DETAILS_KEY))
            if (self._module_prefix is None and "::" in report.nodeid
                    and (RESULT_KEY in own or shard_report is not None)):
                self._module_prefix = report.nodeid.split("::", 1)[0]  # the suite's module, not a user's test
        # Results and stats are for summary.json; keep them out of junit.xml properties.
        ours = (RESULT_KEY, REPORT_KEY, DETAILS_KEY)
        report.user_properties = [(k, v) for k, v in report.user_properties if k not in ours]

    def _record(self, result: dict[str, Any], outcome: str, reason: str | None, duration: float = 0.0,
                details: list[str] | None = None) -> None:
        self.reducer.add_result(result, outcome, reason, duration, details)

    def report_global(self, session: pytest.Session, result: CheckResult, details: list[str],
                      figures: dict[str, Any] | None = None) -> None:
        """Send a controller-side contract verdict through pytest's report hooks (setup, call, teardown)."""
        name = f"test_{result.check}"
        nodeid = f"{self._module_prefix or 'drafter-contracts'}::{name}"
        location = (self._module_prefix or "drafter-contracts", None, name)
        props = [(RESULT_KEY, {**result.to_dict(), **({"figures": figures} if figures else {})}),
                 (DETAILS_KEY, details)]
        if result.skipped:
            outcome, longrepr = "skipped", (location[0], 0, f"Skipped: {result.skipped}")
        elif result.ok or (result.report_only and not result.message):
            outcome, longrepr = "passed", None  # a report-only contract's rows warn; they fail nothing
        else:
            outcome, longrepr = "failed", "\n".join([f"{result.check}: {result.message}", *details])
        hook = session.config.hook
        self.verdicts_reported += 1
        session.testscollected += 1  # one more test reported than collected: the progress stays within 100%
        hook.pytest_runtest_logreport(report=pytest.TestReport(nodeid, location, {name: 1}, "passed", None, "setup"))
        hook.pytest_runtest_logreport(report=pytest.TestReport(nodeid, location, {name: 1}, outcome, longrepr, "call",
                                                               user_properties=props))
        hook.pytest_runtest_logreport(report=pytest.TestReport(nodeid, location, {name: 1}, "passed", None, "teardown"))
        if outcome == "failed":
            session.testsfailed += 1
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _meta(self) -> dict[str, Any]:
        engine = self.engine
        dataset = dataset_fingerprint(engine.dataset)
        dataset["columns"] = engine.dataset.column_types()
        return {
            "dataset": dataset,
            "contract": engine.contract.to_dict(),
            "tokenizer": tokenizer_fingerprint(engine.vocab),
            "kernels": kernels.backend(),
            "timing": {"wall_seconds": round(time.time() - self.started, 3)},
            **{f.name: f.describe(engine.inputs[f.name]) for f in families()
               if f.describe is not None and f.name in engine.inputs},
        }

    # --- whole-dataset verdicts (declare.WholeRun) -------------------------------------------

    def partials(self, name: str) -> dict[int, Any]:
        return self.reducer.partials.get(name, {})

    def folded(self, name: str) -> Any:
        return self.reducer.folded.get(name)

    def recorded(self, name: str) -> dict[str, Any] | None:
        return self.reducer.checks.get(name)

    def lost_shards(self) -> int:
        return sum(u["index"] not in self.coverage.arrived for u in self.coverage.unchecked())

    def supervised_counts(self) -> tuple[np.ndarray, np.ndarray] | None:
        return self.reducer.supervised_counts()

    def shard_stats(self) -> list[dict]:
        return self.reducer.shard_stats()

    def profile(self, top_k: int, counts: tuple[np.ndarray, np.ndarray] | None) -> dict[str, Any]:
        return dataset_profile(self.shard_stats(), top_k, counts)

    def tokenizer_fingerprint(self) -> dict[str, Any]:
        return tokenizer_fingerprint(self.engine.vocab)

    def _decide_whole(self, session: pytest.Session) -> None:
        """Every whole-dataset contract's verdict, each through pytest's report hooks like any test's
        (terminal, JUnit, exit code, summary.json). A verdict fed by per-shard partials replaces the
        shards' carrier records (their time is kept)."""
        for entry in registry.specs().values():
            if entry.scope is not declare.Scope.WHOLE:
                continue
            off = self.engine.turned_off.get(entry.name)
            verdict = entry.reduce(self) if off is None else CheckResult(entry.name, "dataset",
                                                                         skipped=f"not checked: {off}")
            if verdict is None:
                continue
            result, details, figures = ((verdict.result, verdict.details, verdict.figures)
                                        if isinstance(verdict, declare.Verdict) else (verdict, [], None))
            if result.skipped and not entry.report_skip:  # nothing to check: in the summary with its reason
                self._record(result.to_dict(), "skipped", result.skipped)
                continue
            carried = self.reducer.checks.pop(result.check, None) if entry.partial is not None else None
            self.report_global(session, result, details, figures)
            if carried is not None:
                own = self.reducer.checks[result.check]
                own["global"], own["seconds"] = True, own["seconds"] + carried.get("seconds", 0.0)

    def _decode_examples(self, summary: dict[str, Any]) -> None:
        """Decoded excerpts (segments with role and mask) of the first violating rows of failing contracts,
        as many as ``--examples`` asks for.

        A shard's rows come decoded with its results (``run.worker._explained``); only the rows of
        dataset-level and whole-dataset verdicts (the drift sample, duplicate pairs) are read here.
        """
        wanted = self.engine.examples
        for name, c in summary["checks"].items():
            declared = registry.spec(name)
            shown = c["verdict"] in ("fail", "warn") and (declared is None or declared.decodable)
            chosen = shown_examples(c["examples"], wanted if shown else 0,
                                    c.get("by_reason", {}), c.get("severity", {}),
                                    lambda e: e.get("reason", ""), lambda e: e["row"])
            for ex in c["examples"]:
                if not any(ex is x for x in chosen):
                    ex.pop("excerpt", None)
            for ex in chosen:
                if "excerpt" in ex:
                    continue
                try:
                    ex["excerpt"] = decoded_example(self.engine, ex["row"], ex["position"], name, ex.get("reason", ""))
                except Exception as exc:  # an unreadable row must not cost the whole report
                    ex["excerpt"] = {"error": f"{type(exc).__name__}: {exc}"}

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Any:
        """Decide the whole-dataset verdicts as soon as every shard has reported, inside the test loop:
        the terminal then prints them with the shards' tests and its final progress counts them."""
        result = yield
        if self.reducer.checks and not self.decided:
            self.decided = True
            self._decide_whole(session)
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.session = session
        if not self.reducer.checks:
            # No contract test ran (all deselected, or not collected): nothing is known about the
            # data, and an exit code of 0 would read as a green gate. The last summary stays.
            if not session.config.option.collectonly:
                self.nothing_checked = True
                if session.exitstatus == pytest.ExitCode.OK:
                    session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED
            return
        unchecked = self.coverage.unchecked()
        if not self.decided:  # the test loop ended early (interrupted): decide with what arrived
            self.decided = True
            self._decide_whole(session)
        engine = self.engine
        meta = self._meta()
        if engine.oracle is not None:
            meta["tokenizer"]["template_profile"] = engine.oracle.to_dict()
        counts = self.supervised_counts()
        meta["timing"]["wall_seconds"] = round(time.time() - self.started, 3)
        self.summary = build_summary(meta, self.reducer, len(engine.shards), int(session.exitstatus),
                                     tuple(registry.specs()), engine.contract.baseline.top_k,
                                     counts, unchecked, engine.shard_checks, self.coverage.unreported())
        self.summary.update(split_section(engine))
        self.summary["counts"] = self._counts()
        self._hold_required(session)
        self._decode_examples(self.summary)
        report_dir = Path(session.config.getoption("report_dir")).expanduser()
        vocab = engine.vocab
        table = build_table(self.reducer.violations.values(), self.summary["checks"],
                            vocab.decode if vocab is not None else None)
        try:
            written = write_reports(self.summary, report_dir, table)
            self.summary_path, self.artifacts = written[0], [str(p) for p in written[:-1]]
            self.artifacts.append(listed_note(written[-1], self.summary["violations"]))
        except OSError as exc:  # checked writable at the start; a full disk or a removed folder since
            self.report_error = (f"--report-dir {report_dir}: the reports cannot be written ({exc.strerror or exc}); "
                                 "the verdicts above stand, but summary.json and report.html are missing")
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        xml = getattr(session.config.option, "xmlpath", None)
        if xml:
            self.artifacts.append(str(Path(xml).expanduser()))
        if self.save_baseline is not None:
            if self.summary["figures"]["complete"]:
                baseline_mod.write_baseline(baseline_mod.make_baseline(self.summary), self.save_baseline)
                failing = sum(c["verdict"] == "fail" for c in self.summary["checks"].values())
                note = f"; note: {failing} contract(s) fail on this data" if failing else ""
                self.artifacts.append(f"{self.save_baseline} (baseline saved{note})")
            else:
                self.artifacts.append(f"{self.save_baseline} NOT saved: stats cover only part of the shards")

    def _counts(self) -> dict[str, int]:
        """How the run's three counts relate: pytest's collected tests, pytest's results, the contracts.

        A shard's test runs every per-row contract on its rows, a dataset-level contract has a test of its
        own, and a whole-dataset verdict is decided here after the shards and reported as one more test
        (``report_global``), or kept in the summary alone when it had nothing to check.
        """
        by_scope = {scope: 0 for scope in declare.Scope}
        for name in self.summary["checks"]:
            declared = registry.spec(name)
            by_scope[declared.scope if declared is not None else declare.Scope.DATASET] += 1
        return {"contracts": len(self.summary["checks"]), "per_row": by_scope[declare.Scope.ROW],
                "dataset_level": by_scope[declare.Scope.DATASET], "whole_dataset": by_scope[declare.Scope.WHOLE],
                "shard_tests": len(self.engine.shards), "tests_collected": self.collected,
                "verdicts_reported": self.verdicts_reported,
                "pytest_results": self.collected + self.verdicts_reported}

    def _hold_required(self, session: pytest.Session) -> None:
        """A required contract that was not checked (``checks/gate.py``) keeps the run from being green.

        The gate refuses to start when a required contract lacks an input; this catches what only shows
        once the run is under way (every shard of it skipped). What the user turned off is listed too.
        """
        from ..checks.gate import required

        checks = self.summary["checks"]
        missed = {n: "; ".join(checks[n]["skip_reasons"]) for n in required(self.engine.contract)
                  if n in checks and checks[n]["verdict"] == "skip"}
        off = {n: why for n, why in self.engine.turned_off.items() if n in checks}
        self.summary["not_checked"] = {"required": missed, "turned_off": off}
        if missed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            self.summary["exit_status"] = int(session.exitstatus)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """The run's last line: one verdict, after pytest's own summary and any warnings."""
        terminal = config.pluginmanager.get_plugin("terminalreporter")
        line = self.verdict_line()
        if terminal is not None and line:
            terminal.write_line(line, bold=True, red=not line.endswith("(exit 0)"), green=line.endswith("(exit 0)"))

    def verdict_line(self) -> str | None:
        """``drafter-contracts: 2 of 20 contracts violated on 2,000 rows (exit 1)``, or why nothing was checked."""
        if self.session is None:
            return None
        code = int(self.session.exitstatus)
        rows = self.engine.dataset.num_rows
        if self.nothing_checked:
            return (f"drafter-contracts: no contract was checked on {rows:,} rows: every contract test was deselected "
                    f"(-k, -m, --lf, --deselect) or not collected; nothing is known about the data (exit {code})")
        if self.report_error:
            return f"drafter-contracts: {self.report_error} (exit {code})"
        if self.summary is None:
            return None
        checks = self.summary["checks"]
        count = lambda v: sum(c["verdict"] == v for c in checks.values())  # noqa: E731
        gaps = self.summary.get("not_checked") or {"required": {}, "turned_off": {}}
        skipped = count("skip") - len(gaps["turned_off"]) - len(set(gaps["required"]) - set(gaps["turned_off"]))
        rest = ", ".join(f"{n} {w}" for n, w in ((count("warn"), "warn"), (skipped, "skipped")) if n)
        return (f"drafter-contracts: {count('fail')} of {len(checks)} contracts violated on "
                f"{self.summary['figures']['rows']:,} rows{worst_reason(checks)}{'; ' + rest if rest else ''}"
                f"{not_checked_clause(gaps)} (exit {code})")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """The drafter-contracts section. ``--only-failing`` lists only the contracts that hold the run back,
        without the warnings' rows; ``-q`` also drops the figures and the report paths (the failing tests'
        decoded rows and the verdict line stay): no section at all when nothing failed."""
        if self.summary is None:
            return
        quiet = terminalreporter.verbosity < 0
        only_failing = bool(terminalreporter.config.getoption("only_failing", False))
        lines = terminal_lines(self.summary, only_failing=only_failing, quiet=quiet)
        if not (quiet or only_failing):
            lines += warn_excerpts(self.summary, self.engine.examples)
        if not quiet:
            lines += [note for note in (beyond_kept(self.engine.examples),) if note]
            lines += [count_line(self.summary["counts"])] if self.summary.get("counts") else []
            lines += [f"report: {path}" for path in self.artifacts]
            split = self.summary.get("split", {})
            if split.get("n", 1) > 1:
                lines.append(f"part {split['k']}/{split['n']}: {len(split['shards'])} of {split['shards_total']} "
                             f"shards, {self.summary['figures']['rows']:,} rows; join all parts with "
                             "'drafter-contracts merge-reports OUT_DIR SUMMARY.json...'")
        if lines:
            terminalreporter.section("drafter-contracts")
            for line in lines:
                terminalreporter.line(line)


def not_checked_clause(gaps: dict[str, dict[str, str]]) -> str:
    """``; NOT CHECKED: mask_on_assistant_spans, ... (turned off by name)``: the verdict line's words for what the
    run did not check although a gate exists for it ('' when it checked everything it requires)."""
    parts = []
    if gaps["required"]:
        parts.append(f"REQUIRED BUT NOT CHECKED: {', '.join(gaps['required'])}")
    by_how: dict[str, list[str]] = {}
    for name, how in gaps["turned_off"].items():
        by_how.setdefault(how.split(" (")[0], []).append(name)
    parts += [f"NOT CHECKED ({how}): {', '.join(names)}" for how, names in by_how.items()]
    return "".join("; " + p for p in parts)


def worst_reason(checks: dict[str, Any]) -> str:
    """``: 189 rows with tool output supervised (mask_on_assistant_spans)``: the most severe ranked reason of the
    failing contracts, which the verdict line leads with ('' when no failing contract ranks its reasons)."""
    ranked = [(c["severity"][r], -n, r, name) for name, c in checks.items() if c["verdict"] == "fail"
              for r, n in c["by_reason"].items() if r in (c.get("severity") or {})]
    if not ranked:
        return ""
    _, n, reason, _ = min(ranked)
    givers = list(dict.fromkeys(g for _, _, r, g in ranked if r == reason))  # a reason several give: named once
    return f"; worst: {-n:,} row{'' if n == -1 else 's'} with {reason} ({named(givers)})"
