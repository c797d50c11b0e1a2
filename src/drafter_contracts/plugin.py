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

import pytest

from .config import load_contract, resolve_contract_path
from .dataset import Shard, open_dataset
from .engine import DATASET_CHECKS, ROW_CHECKS, Engine
from .errors import UsageProblem
from .explain import format_failure
from .profiles import register_profiles
from .report.summary import RESULT_KEY, STATS_KEY, Recorder, build_summary, terminal_lines, write_summary
from .vocab import BUILTIN_PREFIX, load_vocabulary

ENGINE_KEY = pytest.StashKey[Engine]()
register_profiles()  # ci / thorough, for --hypothesis-profile wherever the suite runs
SUITE_DIR = Path(str(resources.files("drafter_contracts").joinpath("contracts")))


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("drafter-contracts", "data contracts for tokenized drafter datasets")
    g.addoption("--dataset-path", metavar="DIR", help="folder written by datasets.save_to_disk; runs the contract suite on it")
    g.addoption("--contract", metavar="FILE.toml", help="contract file or built-in name (default: qwen3.6-dflash)")
    g.addoption("--tokenizer", metavar="DIR_OR_NAME", help=f"tokenizer directory, name, or {BUILTIN_PREFIX}qwen3.6 (overrides the contract)")
    g.addoption("--expected-count", metavar="N", type=int, help="expected number of rows")
    g.addoption("--count-tolerance", metavar="N|P%", help="allowed distance from --expected-count: rows or a percentage")
    g.addoption("--min-len", metavar="N", type=int, help="smallest allowed seq_len")
    g.addoption("--max-len", metavar="N", type=int, help="largest allowed seq_len (the truncation cap)")
    g.addoption("--min-supervised", metavar="N", type=int, help="fewest supervised tokens a row may have")
    g.addoption("--shard-size", metavar="ROWS", type=int, help="rows per shard (the unit xdist spreads)")
    g.addoption("--report-dir", metavar="DIR", default="reports", help="where summary.json goes (default: reports/)")
    g.addoption("--split", metavar="NAME", help="split to check when the dataset is a saved DatasetDict")
    # Template -> mask properties (issue 4): --masker runs the packaged hypothesis suite.
    g.addoption("--masker", metavar="hf|speculators|MODULE:FUNCTION",
                help="run the template -> mask properties against this masker (profile: --hypothesis-profile ci|thorough)")
    g.addoption("--chat-template", metavar="FILE", help="generation-tagged chat template for --masker=hf and the probe property")
    g.addoption("--speculators-path", metavar="DIR",
                help="pip --target folder holding the speculators to test (default: $DRAFTER_SPECULATORS_PATH)")


def _overrides(config: pytest.Config) -> dict[str, Any]:
    opt = config.getoption
    return {
        "expected_count": opt("expected_count"),
        "count_tolerance": opt("count_tolerance"),
        "min_len": opt("min_len"),
        "max_len": opt("max_len"),
        "min_supervised": opt("min_supervised"),
        "shard_size": opt("shard_size"),
        "tokenizer": opt("tokenizer"),
    }


def _tokenizer_name(raw: str | None, contract_file: Path, from_cli: bool) -> str | None:
    """A relative tokenizer path in a contract file is relative to that file."""
    if raw is None or from_cli or raw.startswith(BUILTIN_PREFIX) or Path(raw).is_absolute():
        return raw
    candidate = (contract_file.parent / raw).resolve()
    return str(candidate) if candidate.exists() else raw


def build_engine(config: pytest.Config) -> Engine:
    """Contract, dataset and tokenizer from the command line; raises UsageProblem on bad input."""
    contract_file = resolve_contract_path(config.getoption("contract"))
    contract = load_contract(contract_file, _overrides(config))
    dataset = open_dataset(config.getoption("dataset_path"), config.getoption("split"))
    _ = dataset.table  # open the Arrow files now: unreadable ones are usage errors, not test errors
    name = _tokenizer_name(contract.tokenizer, contract_file, config.getoption("tokenizer") is not None)
    vocab = load_vocabulary(name) if name else None
    if vocab is not None and contract.vocab_size is not None and vocab.size != contract.vocab_size:
        raise UsageProblem(f"--tokenizer {name}: has {vocab.size:,} ids but the contract declares vocab_size "
                           f"{contract.vocab_size:,}; pass the tokenizer that produced the dataset")
    report_dir = Path(config.getoption("report_dir")).expanduser().resolve()
    if report_dir == dataset.path.resolve() or dataset.path.resolve() in report_dir.parents:
        raise UsageProblem(f"--report-dir {report_dir}: is inside the dataset folder; the dataset is read-only, choose another folder")
    engine = Engine(dataset, contract, vocab)
    if vocab is not None:
        vocab.save_tables()  # the profile has made its lookups: workers start from the cache
    problem = engine.coverage_problem()
    if problem:
        raise UsageProblem(problem)
    return engine


def _explicit_dist(config: pytest.Config) -> bool:
    return any(a == "--dist" or a.startswith("--dist=") or a == "-d" for a in config.invocation_params.args)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # Registered here too so --strict-markers accepts it when xdist is disabled (-p no:xdist).
    config.addinivalue_line("markers", "xdist_group(name): run tests of one shard on one xdist worker")
    if config.getoption("masker"):
        _configure_properties(config)
        return
    if not config.getoption("dataset_path"):
        return
    try:
        config.stash[ENGINE_KEY] = build_engine(config)
    except UsageProblem as exc:
        raise pytest.UsageError(str(exc)) from None
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(ContractRun(config.stash[ENGINE_KEY]), "drafter_contracts_run")
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args = [str(SUITE_DIR)]  # no test paths given: run the contract suite
    # Keep all tests of a shard on one worker so the shard is read and labelled once.
    if getattr(config.option, "dist", "no") == "load" and not _explicit_dist(config):
        config.option.dist = "loadgroup"


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
    # Shard-major order: a shard's contracts run back to back, then its arrays are dropped.
    def key(item: pytest.Item) -> tuple[int, int]:
        spec = getattr(item, "callspec", None)
        shard = spec.params.get("shard") if spec is not None else None
        return (shard.index if isinstance(shard, Shard) else -1, 0)

    items.sort(key=key)
    for item in items:
        spec = getattr(item, "callspec", None)
        shard = spec.params.get("shard") if spec is not None else None
        if isinstance(shard, Shard):
            item.add_marker(pytest.mark.xdist_group(f"shard-{shard.index:05d}"))


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


def check_shard(request: pytest.FixtureRequest, engine: Engine, shard: Shard, check: str) -> None:
    """Body of a per-shard contract test."""
    request.node.user_properties.append((STATS_KEY, engine.stats(shard)))
    result = engine.shard_check(shard, check)
    request.node.user_properties.append((RESULT_KEY, result.to_dict()))
    if result.skipped:
        pytest.skip(result.skipped)
    if not result.ok:
        pytest.fail(format_failure(result, engine), pytrace=False)


class ContractRun:
    """Controller-side plugin object (pytest-xdist/pytest-cov pattern): records reports, writes the summary.

    Registered only where the run's reports arrive: the single process with
    ``-n 0``, the controller with xdist. Workers just run tests.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.recorder = Recorder()
        self.started = time.time()
        self.summary: dict[str, Any] | None = None
        self.summary_path: Path | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            reason = None
            if report.skipped and isinstance(report.longrepr, tuple):
                reason = str(report.longrepr[2]).removeprefix("Skipped: ")
            self.recorder.add(report.nodeid, report.outcome, dict(report.user_properties), reason)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.recorder.checks:
            return  # no contract test ran (--collect-only, other test paths): keep the last summary
        engine, vocab = self.engine, self.engine.vocab
        meta = {
            "dataset": {"path": str(engine.dataset.path), "split": engine.dataset.split,
                        "num_rows": engine.dataset.num_rows, "files": [f.name for f in engine.dataset.files],
                        "fingerprint": engine.dataset.fingerprint(), "columns": engine.dataset.column_types()},
            "contract": engine.contract.to_dict(),
            "tokenizer": {"name": vocab.name if vocab else None, "fingerprint": vocab.fingerprint if vocab else None,
                          "size": vocab.size if vocab else None},
            "timing": {"wall_seconds": round(time.time() - self.started, 3)},
        }
        self.summary = build_summary(meta, self.recorder, len(engine.shards), int(exitstatus),
                                     DATASET_CHECKS + ROW_CHECKS)
        self.summary_path = write_summary(self.summary, Path(session.config.getoption("report_dir")).expanduser())

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.summary is None:
            return
        terminalreporter.section("drafter-contracts")
        for line in terminal_lines(self.summary):
            terminalreporter.line(line)
        terminalreporter.line(f"summary: {self.summary_path}")
