"""pytest configuration and hooks of a contract run: the engine, its fixture, shard parametrization.

Like pytest-xdist's ``plugin.py``, it holds configuration only: the tests' bodies (what
a worker runs) are in ``run/worker.py``, the controller that collects every result, decides
the whole-dataset verdicts and writes the reports is ``run/controller.py``. Every decision
about data lives in ``checks``/``spans``, every decision about configuration in
``contract``/``run/option_checks.py``. Usage errors surface here once, as ``pytest.UsageError`` (one
line, exit code 4).
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import pytest

from ..kernels import compiled as kernels
from .allocator import keep_freed_memory
from ..checks import registry
from ..dataset.reader import open_dataset
from ..dataset.columns import Shard
from ..engine import Engine
from ..errors import UsageProblem
from ..contract_families import families
from .option_checks import load_contract_options, run_options
from ..report import baseline as baseline_mod
from ..report.summary import DETAILS_KEY, REPORT_KEY, RESULT_KEY
from ..tokenizer.vocabulary import load_vocabulary
from .wire import WirePacker

ENGINE_KEY = pytest.StashKey[Engine]()
SUITE_DIR = Path(str(resources.files("drafter_contracts").joinpath("contracts")))


def build_engine(config: pytest.Config) -> Engine:
    """Contract, dataset and tokenizer from the command line (checked by ``options``); UsageProblem on bad input."""
    opts = run_options(config)
    if not opts.checked:  # a worker: the controller checked the inputs, this process only opens them
        opts.dataset = open_dataset(config.getoption("dataset_path"), config.getoption("dataset_split"))
        load_contract_options(config, opts, masker=False)  # after the dataset: a tokenizer beside it is found
    contract, dataset, split, name = opts.contract, opts.dataset, opts.split, opts.tokenizer
    vocab = load_vocabulary(name) if name else None
    if vocab is not None and contract.vocab_size is not None and vocab.size != contract.vocab_size:
        raise UsageProblem(f"--tokenizer {name}: has {vocab.size:,} ids but the contract declares vocab_size "
                           f"{contract.vocab_size:,}; pass the tokenizer that produced the dataset")
    engine = Engine(dataset, contract, vocab, split=split, examples=opts.examples)
    for family in families():  # what each family's contracts read (Engine.inputs)
        if family.open_input is not None:
            found = family.open_input(config, opts.families.get(family.name), dataset, contract)
            if found is not None:
                engine.inputs[family.name] = found
    keep_freed_memory()  # shard after shard reuses the same pages (run/allocator.py)
    kernels.load()  # an unbuilt package is a usage error now, not an error in every shard's test
    token_freq = config.getoption("token_freq")
    if token_freq:
        engine.token_freq_path = Path(token_freq).expanduser()  # options checked that it is a file
    if vocab is not None:
        vocab.save_tables()  # the profile has made its lookups: workers start from the cache
    blocked = engine.blocked()
    if blocked:
        from ..checks.gate import blocked_message

        raise UsageProblem(blocked_message(blocked))
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
    if hasattr(config, "workerinput"):
        packer = WirePacker(frozenset((RESULT_KEY, DETAILS_KEY)), frozenset((REPORT_KEY,)))
        config.pluginmanager.register(packer, "drafter_contracts_wire")
    else:
        try:
            from .controller import ContractRun

            run = ContractRun(config.stash[ENGINE_KEY], *_baseline_options(config))
        except UsageProblem as exc:
            raise pytest.UsageError(str(exc)) from None
        config.pluginmanager.register(run, "drafter_contracts_run")
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


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    """One line when the numpy references stand in for the compiled kernels (kernels.fallback_warning), and one
    when an explicit ``-n N`` was capped at the shard count (``run.worker_count.cap_explicit``)."""
    from .worker_count import NOTE_KEY

    if _engine(config) is None or hasattr(config, "workerinput"):
        return None
    lines = [kernels.fallback_warning(), config.stash.get(NOTE_KEY, None)]
    return [line for line in lines if line] or None


def _configure_properties(config: pytest.Config) -> None:
    """``--masker``: build the masker context once (bad input: exit 4) and run the properties suite."""
    from hypothesis import settings

    from ..properties.context import CONTEXT_KEY, SUITE_DIR as PROPERTIES_DIR, build_context

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

        from ..paths import cache_root

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
    engine = _engine(config)
    if engine is None:
        return
    # A contract an option asks for that was not given (a family's whose input no option gave)
    # has no test in this run: left out, like its verdicts, not skipped (Engine.runs).
    suite = SUITE_DIR.resolve()
    def runs(item: pytest.Item) -> bool:
        declared = registry.spec(getattr(item, "originalname", item.name).removeprefix("test_"))
        return suite not in item.path.resolve().parents or declared is None or engine.runs(declared.name)

    left_out = [item for item in items if not runs(item)]
    if left_out:  # said as deselected, so pytest's "collected N items" line adds up with what ran
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if runs(item)]
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


