"""pytest glue: options, the contract engine as a fixture, shard parametrization, results, reports.

Kept thin on purpose: every decision about data lives in ``checks``/``spans``,
every decision about configuration in ``config``. Usage errors surface here
once, as ``pytest.UsageError`` (one line, exit code 4).
"""

from __future__ import annotations

import os
import time
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from . import kernels
from .allocator import keep_freed_memory
from .completeness import Coverage, unchanged_result
from .dataset import Shard, open_dataset
from .content_run import HASHES_KEY, PayloadCollector, hashes_payload, warn_excerpts
from .engine import CONTENT_CHECKS, DATASET_CHECKS, GLOBAL_CHECKS, ROW_CHECKS, SHARD_CHECKS, Engine
from .hidden import glue as hidden_glue
from .hidden.checks import ALL_CHECKS as HIDDEN_CHECKS
from .errors import UsageProblem
from .explain import format_failure
from .integrity import CHECK as INTEGRITY_CHECK, file_state
from .report import baseline as baseline_mod
from .report.excerpts import MAX_DECODED, decoded_example
from .report.fingerprints import dataset_fingerprint, tokenizer_fingerprint
from .report.html import write_html
from .report.merge import raw_record, split_section
from .report.summary import (DETAILS_KEY, RESULT_KEY, RESULTS_KEY, STATS_KEY, UNREAD_KEY, Recorder, build_summary,
                             terminal_lines, write_summary)
from .results import CheckResult
from .options import load_contract_options, run_options
from .vocab import load_vocabulary
from .wire import WirePacker, unpack

ENGINE_KEY = pytest.StashKey[Engine]()
SUITE_DIR = Path(str(resources.files("drafter_contracts").joinpath("contracts")))


def build_engine(config: pytest.Config) -> Engine:
    """Contract, dataset and tokenizer from the command line (checked by ``options``); UsageProblem on bad input."""
    opts = run_options(config)
    if not opts.checked:  # a worker: the controller checked the inputs, this process only opens them
        load_contract_options(config, opts, masker=False)
        opts.dataset = open_dataset(config.getoption("dataset_path"), config.getoption("dataset_split"))
    contract, dataset, split, name = opts.contract, opts.dataset, opts.split, opts.tokenizer
    vocab = load_vocabulary(name) if name else None
    if vocab is not None and contract.vocab_size is not None and vocab.size != contract.vocab_size:
        raise UsageProblem(f"--tokenizer {name}: has {vocab.size:,} ids but the contract declares vocab_size "
                           f"{contract.vocab_size:,}; pass the tokenizer that produced the dataset")
    engine = Engine(dataset, contract, vocab, split=split)
    keep_freed_memory()  # shard after shard reuses the same pages (allocator.py)
    kernels.load()  # an unbuilt package is a usage error now, not an error in every shard's test
    token_freq = config.getoption("token_freq")
    if token_freq:
        engine.token_freq_path = Path(token_freq).expanduser()  # options checked that it is a file
    if vocab is not None:
        vocab.save_tables()  # the profile has made its lookups: workers start from the cache
    problem = engine.coverage_problem()
    if problem:
        raise UsageProblem(problem)
    return engine


def _baseline_options(config: pytest.Config) -> tuple[Path | None, dict | None, Path | None]:
    """--baseline (read and checked now: a bad file is a usage error) and --save-baseline."""
    dataset = config.stash[ENGINE_KEY].dataset.path.resolve()
    compare = config.getoption("baseline")
    save = config.getoption("save_baseline")
    doc = baseline_mod.load_baseline(Path(compare).expanduser()) if compare else None
    save_path = Path(save).expanduser().resolve() if save else None
    if save_path is not None and (save_path.is_dir() or dataset in save_path.parents):
        raise UsageProblem(f"--save-baseline {save}: " + ("is a directory; pass a file name" if save_path.is_dir()
                           else "is inside the dataset folder; the dataset is read-only, choose another place"))
    return (Path(compare).expanduser() if compare else None), doc, save_path


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Registered by ``options`` (the entry point) only for --dataset-path / --masker runs."""
    if config.getoption("masker"):
        _configure_properties(config)
        return
    if not config.getoption("dataset_path"):
        return
    try:
        config.stash[ENGINE_KEY] = build_engine(config)
    except UsageProblem as exc:
        raise pytest.UsageError(str(exc)) from None
    config.pluginmanager.register(hidden_glue, "drafter_contracts_hidden")  # idle without a hidden-states folder
    if hasattr(config, "workerinput"):
        packer = WirePacker(frozenset((RESULT_KEY, RESULTS_KEY, STATS_KEY, DETAILS_KEY, UNREAD_KEY)), frozenset((HASHES_KEY,)))
        config.pluginmanager.register(packer, "drafter_contracts_wire")
    else:
        try:
            run = ContractRun(config.stash[ENGINE_KEY], *_baseline_options(config))
        except UsageProblem as exc:
            raise pytest.UsageError(str(exc)) from None
        config.pluginmanager.register(run, "drafter_contracts_run")
        config.pluginmanager.register(PayloadCollector(), "drafter_contracts_payloads")
        if getattr(config.option, "xmlpath", "") is None and not config.option.collectonly:
            # JUnit XML by default, next to summary.json (--junitxml overrides; -p no:junitxml turns it off).
            config.option.xmlpath = str(Path(config.getoption("report_dir")).expanduser() / "junit.xml")
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args = [str(SUITE_DIR)]  # no test paths given: run the contract suite
        # Hypothesis's plugin imports hypothesis in its terminal summary (1-3 s when pytest cannot cache
        # its rewritten modules, e.g. under PYTHONDONTWRITEBYTECODE); the contract suite has no hypothesis test.
        if config.pluginmanager.has_plugin("hypothesispytest"):
            config.pluginmanager.unregister(name="hypothesispytest")
    elif not any(covers_suite(arg, config.invocation_params.dir) for arg in config.args):
        # Test paths of the user's own: the contract suite runs too. A run with --dataset-path that
        # never looked at the data would otherwise pass ("1 passed") and read as a green gate.
        config.args = [*config.args, str(SUITE_DIR)]


def covers_suite(arg: str, cwd: Path) -> bool:
    """Whether a test-path argument already names the contract suite, a part of it or a folder holding it."""
    path = Path(arg.split("::", 1)[0])
    path = (path if path.is_absolute() else cwd / path).resolve()
    suite = SUITE_DIR.resolve()
    return path == suite or suite in path.parents or path in suite.parents


def pytest_report_header(config: pytest.Config) -> str | None:
    """One line when the numpy references stand in for the compiled kernels (kernels.fallback_warning)."""
    if _engine(config) is None or hasattr(config, "workerinput"):
        return None
    return kernels.fallback_warning()


def _configure_properties(config: pytest.Config) -> None:
    """``--masker``: build the masker context once (bad input: exit 4) and run the properties suite."""
    from hypothesis import settings

    from .properties.context import CONTEXT_KEY, SUITE_DIR as PROPERTIES_DIR, build_context

    if config.getoption("dataset_path"):
        raise pytest.UsageError("--masker and --dataset-path run different suites; run them one at a time")
    try:
        config.stash[CONTEXT_KEY] = build_context(config)
    except UsageProblem as exc:
        raise pytest.UsageError(str(exc)) from None
    if not config.getoption("hypothesis_profile", None):
        settings.load_profile("ci")
    if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):  # users run this from anywhere: no .hypothesis/ there
        from hypothesis.configuration import set_hypothesis_home_dir

        from .fixtures.cache import cache_root

        set_hypothesis_home_dir(cache_root() / "hypothesis")
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args = [str(PROPERTIES_DIR)]  # no test paths given: run the properties suite


def _engine(config: pytest.Config) -> Engine | None:
    return config.stash.get(ENGINE_KEY, None)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "shard" not in metafunc.fixturenames:
        return
    engine = _engine(metafunc.config)
    if engine is None:
        metafunc.parametrize("shard", [None], ids=["no-dataset"])
        return
    metafunc.parametrize("shard", engine.shards, ids=[s.id for s in engine.shards])


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if _engine(config) is None:
        return
    # Dataset-level tests first (drift loads the tokenizer: start it early), then shards in order.
    def key(item: pytest.Item) -> int:
        spec = getattr(item, "callspec", None)
        shard = spec.params.get("shard") if spec is not None else None
        return shard.index if isinstance(shard, Shard) else -1

    items.sort(key=key)


@pytest.fixture(scope="session")
def contract_engine(request: pytest.FixtureRequest) -> Engine:
    """The run's Engine; tests of the contract suite skip (visibly) without --dataset-path."""
    engine = _engine(request.config)
    if engine is None:
        pytest.skip("no --dataset-path given: the contract suite needs a dataset")
    return engine


def check_dataset(request: pytest.FixtureRequest, engine: Engine, check: str) -> None:
    """Body of a dataset-level contract test."""
    result = engine.dataset_check(check)
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
    props = request.node.user_properties
    try:
        stats = engine.stats(shard)
    except Exception:  # the contracts that need what failed fail below, each with the error
        stats = None
    props.append((STATS_KEY, stats))
    results, failures = [], []
    try:
        for check in SHARD_CHECKS:
            t0 = time.perf_counter()
            try:
                result = engine.shard_check(shard, check)
                if check == "duplicate_rows" and "input_ids" not in engine.column_problems:
                    # A shard whose rows are all left out (or not read) sends no rows, not no message:
                    # the whole-dataset comparison needs to hear from every shard.
                    hashes = ((np.zeros(0, np.int64), np.zeros(0, np.uint64)) if engine.unreadable(shard)
                              else engine.row_hashes(shard))
                    props.append((HASHES_KEY, hashes_payload(shard.index, *hashes)))
            except Exception as exc:  # a bug of ours on odd data: that contract fails, the others still report
                result = CheckResult(check, shard.id, message=(
                    f"could not be evaluated ({type(exc).__name__}: {exc}); this is a drafter-contracts bug, "
                    "please report it with the shard id"))
            results.append({**result.to_dict(), "seconds": time.perf_counter() - t0})
            if result.skipped is None and not result.ok and not result.report_only:
                failures.append(result)
    finally:
        unread = engine.unreadable(shard)
        if shard.index in engine.buffer_problems:  # caught while reading: a data verdict, not a tool bug
            integrity = CheckResult(INTEGRITY_CHECK, shard.id, rows_checked=shard.rows, rows_violating=shard.rows,
                                    message=f"{shard.id}: {engine.buffer_problems[shard.index]}")
            results.append({**integrity.to_dict(), "seconds": 0.0})
            failures.append(integrity)
        if unread:
            props.append((UNREAD_KEY, unread))
        props.append((RESULTS_KEY, results))
    if failures:
        head = (f"{len(failures)} contract(s) broken in {shard.id}: "
                + ", ".join(f"{r.check} ({r.rows_violating:,} rows)" if r.rows_violating else r.check for r in failures))
        pytest.fail("\n\n".join([head, *(format_failure(r, engine) for r in failures)]), pytrace=False)
    if all(r["skipped"] for r in results):
        pytest.skip("; ".join(dict.fromkeys(r["skipped"] for r in results)))


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
        self.baseline_path, self.baseline, self.save_baseline = baseline_path, baseline, save_baseline
        self.recorder = Recorder()
        self.started = time.time()
        self.summary: dict[str, Any] | None = None
        self.summary_path: Path | None = None
        self.artifacts: list[str] = []
        self._module_prefix: str | None = None
        self.raw: list[dict[str, Any]] = []  # what merge-reports replays (see report/merge.py)
        self.session: pytest.Session | None = None
        self.nothing_checked = False
        self.report_error: str | None = None
        # which shard and contract tests ran, which reported, why not (completeness.py)
        self.coverage = Coverage(engine.shards, DATASET_CHECKS + ("tokenizer_drift",))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.coverage.expect(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.coverage.expect(ids)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        unpack(report)
        own = dict(report.user_properties)
        self.coverage.note(report.nodeid, report.when, report.outcome, RESULTS_KEY in own or RESULT_KEY in own,
                           own.get(UNREAD_KEY),
                           None if report.longrepr is None else str(report.longrepr))
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            reason = None
            if report.skipped and isinstance(report.longrepr, tuple):
                reason = str(report.longrepr[2]).removeprefix("Skipped: ")
            props = dict(report.user_properties)
            self._record(report.nodeid, report.outcome, props, reason, float(getattr(report, "duration", 0.0) or 0.0))
            if self._module_prefix is None and "::" in report.nodeid and (RESULT_KEY in props or RESULTS_KEY in props):
                self._module_prefix = report.nodeid.split("::", 1)[0]  # the suite's module, not a user's test
        # Per-shard stats are for summary.json; keep them out of junit.xml properties.
        ours = (RESULT_KEY, RESULTS_KEY, STATS_KEY, DETAILS_KEY, UNREAD_KEY)
        report.user_properties = [(k, v) for k, v in report.user_properties if k not in ours]

    def _record(self, nodeid: str, outcome: str, props: dict[str, Any], reason: str | None,
                duration: float = 0.0) -> None:
        self.recorder.add(nodeid, outcome, props, reason, duration)
        self.raw.append(raw_record(nodeid, outcome, props, reason))

    def report_global(self, session: pytest.Session, result: CheckResult, details: list[str]) -> None:
        """Send a controller-side contract verdict through pytest's report hooks (setup, call, teardown)."""
        name = f"test_{result.check}"
        nodeid = f"{self._module_prefix or 'drafter-contracts'}::{name}"
        location = (self._module_prefix or "drafter-contracts", None, name)
        props = [(RESULT_KEY, result.to_dict()), (DETAILS_KEY, details)]
        if result.skipped:
            outcome, longrepr = "skipped", (location[0], 0, f"Skipped: {result.skipped}")
        elif result.ok or (result.report_only and not result.message):
            outcome, longrepr = "passed", None  # a report-only contract's rows warn; they fail nothing
        else:
            outcome, longrepr = "failed", "\n".join([f"{result.check}: {result.message}", *details])
        hook = session.config.hook
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
        }

    def _baseline_check(self, session: pytest.Session, meta: dict[str, Any], counts: Any) -> None:
        engine, base = self.engine, self.baseline
        assert base is not None and self.baseline_path is not None
        stats = [self.recorder.stats[k] for k in sorted(self.recorder.stats)]
        head = baseline_mod.header(self.baseline_path, base)
        if len(stats) != len(engine.shards):
            result = CheckResult(baseline_mod.CHECK, "dataset", skipped=(
                f"stats cover {len(stats)} of {len(engine.shards)} shards (tests deselected or skipped); "
                "a baseline compares whole datasets"))
            self.report_global(session, result, [head])
            return
        from .report.profile import dataset_profile

        current = {"profile": dataset_profile(stats, engine.contract.baseline.top_k, counts), "tokenizer": meta["tokenizer"]}
        vocab = engine.vocab
        decode = (lambda i: vocab.decode([i])) if vocab is not None else None
        comparison = baseline_mod.compare(base, current, counts, engine.contract.baseline, decode)
        self.report_global(session, baseline_mod.result(comparison, current["profile"]["rows"]),
                            [head, *comparison.text()])

    def _decode_examples(self, summary: dict[str, Any]) -> None:
        """Decoded excerpts (segments with role and mask) of the first violating rows of failing contracts."""
        for name, c in summary["checks"].items():
            if c["verdict"] not in ("fail", "warn") or name == INTEGRITY_CHECK or name in HIDDEN_CHECKS:
                # damaged rows are not read; hidden-state rows are named, their tokens are fine
                continue
            for ex in c["examples"][:MAX_DECODED]:
                try:
                    ex["excerpt"] = decoded_example(self.engine, ex["row"], ex["position"], name, ex.get("reason", ""))
                except Exception as exc:  # an unreadable row must not cost the whole report
                    ex["excerpt"] = {"error": f"{type(exc).__name__}: {exc}"}

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.session = session
        if not self.recorder.checks:
            # No contract test ran (all deselected, or not collected): nothing is known about the
            # data, and an exit code of 0 would read as a green gate. The last summary stays.
            if not session.config.option.collectonly:
                self.nothing_checked = True
                if session.exitstatus == pytest.ExitCode.OK:
                    session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED
            return
        collector = session.config.pluginmanager.get_plugin("drafter_contracts_payloads")
        carriers = self.recorder.checks.get("duplicate_rows")
        unchecked = self.coverage.unchecked()
        lost = sum(u["index"] not in self.coverage.arrived for u in unchecked)  # no hashes can come from those
        if collector is not None and carriers is not None and carriers["skipped"] < carriers["tests"]:
            # The whole-dataset verdict replaces the shards' carriers and takes the path every
            # controller-side verdict takes (terminal, JUnit, exit code, summary.json).
            dup = collector.duplicates(len(self.engine.shards) - lost, self.engine.contract.content.strict,
                                       self.engine.row_keys)
            carried = self.recorder.checks.pop("duplicate_rows")
            self.report_global(session, dup, [])
            entry = self.recorder.checks["duplicate_rows"]
            entry["global"], entry["seconds"] = True, entry["seconds"] + carried.get("seconds", 0.0)
        engine = self.engine
        meta = self._meta()
        if engine.oracle is not None:
            meta["tokenizer"]["template_profile"] = engine.oracle.to_dict()
        stats = [self.recorder.stats[k] for k in sorted(self.recorder.stats)]
        counts = self.recorder.supervised_counts()  # token_freq, the baseline, the profile and summary.json
        token_freq = engine.token_freq(counts, len(stats))
        if token_freq.skipped:  # no file to check: in the summary with its reason, not an extra pytest test
            self._record(f"{self._module_prefix or 'drafter-contracts'}::test_token_freq", "skipped",
                         {RESULT_KEY: token_freq.to_dict()}, token_freq.skipped)
        else:
            self.report_global(session, token_freq, [])
        if self.baseline is not None:
            self._baseline_check(session, meta, counts)
        # What the run covered (completeness.py): every collected shard reported, on files that did not change.
        self.report_global(session, self.coverage.result(), [])
        self.report_global(session, unchanged_result(engine.files_at_start, file_state(engine.dataset.path,
                                                                                        engine.dataset.files),
                                                     sum(s.rows for s in engine.shards)), [])
        hidden_glue.finish(session, self)  # hidden-state verdicts that need every shard
        meta["timing"]["wall_seconds"] = round(time.time() - self.started, 3)
        self.summary = build_summary(meta, self.recorder, len(engine.shards), int(session.exitstatus),
                                     DATASET_CHECKS + ROW_CHECKS + GLOBAL_CHECKS + CONTENT_CHECKS + (baseline_mod.CHECK,)
                                     + HIDDEN_CHECKS, engine.contract.baseline.top_k,
                                     counts, unchecked, SHARD_CHECKS, self.coverage.unreported())
        hidden_glue.annotate(self.summary, session, time.time() - self.started)
        self.summary.update(split_section(engine, self.raw))
        self._decode_examples(self.summary)
        report_dir = Path(session.config.getoption("report_dir")).expanduser()
        try:
            self.summary_path = write_summary(self.summary, report_dir)
            self.artifacts = [str(self.summary_path), str(write_html(self.summary, report_dir / "report.html"))]
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

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """The run's last line: one verdict, after pytest's own summary and any warnings."""
        terminal = config.pluginmanager.get_plugin("terminalreporter")
        line = self.verdict_line()
        if terminal is not None and line:
            terminal.write_line(line, bold=True, red=not line.endswith("(exit 0)"), green=line.endswith("(exit 0)"))

    def verdict_line(self) -> str | None:
        """``drafter-contracts: 2 of 20 contracts violated on 913,786 rows (exit 1)``, or why nothing was checked."""
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
        rest = ", ".join(f"{n} {w}" for n, w in ((count("warn"), "warn"), (count("skip"), "skipped")) if n)
        return (f"drafter-contracts: {count('fail')} of {len(checks)} contracts violated on {self.summary['figures']['rows']:,} "
                f"rows{'; ' + rest if rest else ''} (exit {code})")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.summary is None:
            return
        terminalreporter.section("drafter-contracts")
        for line in terminal_lines(self.summary):
            terminalreporter.line(line)
        for line in warn_excerpts(self.summary, self.engine):
            terminalreporter.line(line)
        for path in self.artifacts:
            terminalreporter.line(f"report: {path}")
        split = self.summary.get("split", {})
        if split.get("n", 1) > 1:
            terminalreporter.line(f"part {split['k']}/{split['n']}: {len(split['shards'])} of {split['shards_total']} shards, "
                                  f"{self.summary['figures']['rows']:,} rows; join all parts with "
                                  "'drafter-contracts merge-reports OUT_DIR SUMMARY.json...'")
