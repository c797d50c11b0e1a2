"""Session fixtures for the project's own tests: the real Qwen3.6 tokenizer and a generated dataset.

pytest loads this file as an initial conftest of ``testpaths`` in every run started from the
checkout, a user's ``pytest --dataset-path=DIR`` and each of its xdist workers included. So at
module level it imports only the standard library and pytest; what the project's own tests need is
imported in ``pytest_configure`` (when the run is theirs) and in the fixtures.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import numpy as np

    from drafter_contracts.spans.labels import Labels
    from drafter_contracts.spans.profile import CompiledProfile
    from drafter_contracts.spans.oracle import SpanOracle
    from drafter_contracts.tokenizer.vocabulary import Vocabulary


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("dataset_path", None) or config.getoption("masker", None):
        return  # a check run from the checkout: none of the project's own tests run, nothing to import
    from drafter_contracts.paths import cache_root

    # pytester points HOME at each test's temporary folder: a cache found through HOME would then be
    # empty in every test that runs pytest in-process, and each such test would rebuild every fixture
    # and re-derive every template profile. The cache is pinned for the whole session (and its workers).
    os.environ.setdefault("DRAFTER_CONTRACTS_CACHE", str(cache_root()))
    # pytester restores sys.modules after each in-process run, dropping what the inner run imported
    # first while the modules loaded before it keep the dropped copies: the next import makes a second
    # copy (two `kernels` packages: "'Mode' and 'Mode'"; a second torch or Rust extension corrupts
    # memory). Its snapshots keep installed modules from now on (drafter_testkit/module_snapshots.py),
    # and the heavy ones are imported once here, before any inner run, in every worker.
    from drafter_testkit.module_snapshots import keep_installed_modules

    keep_installed_modules()
    import tokenizers  # noqa: F401
    import torch  # noqa: F401
    import transformers  # noqa: F401
    # Likewise pandera (summary.json's validation, drafter_testkit/schema.py): imported a second time it
    # registers its pandas accessors again, and every run after the first warns that they were overridden.
    import pandera.pandas  # noqa: F401


FIXTURE_ROWS = 2000


class UsageRun:
    """A pytest run that must stop on a usage error, run in-process (no Python start-up, no re-import)."""

    def __init__(self, ret: int, output: str) -> None:
        self.ret, self.output = ret, output
        self.errors = [line for line in output.splitlines() if line.startswith("ERROR:")]

    @property
    def stderr_lines(self) -> list[str]:
        return [line for line in self.output.splitlines() if line.strip()]


@pytest.fixture
def usage_run(pytester):
    """``usage_run(*args)``: the run's exit code, output and ``ERROR:`` lines (tests/test_usage_errors.py
    keeps two real subprocesses to hold the same promise end to end)."""
    def run(*args: str) -> UsageRun:
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)
        return UsageRun(result.ret, result.stdout.str() + "\n" + result.stderr.str())
    return run


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Items of a module that defines ``collection_order(item)`` run in that order, in their own slots."""
    slots = [i for i, item in enumerate(items) if hasattr(getattr(item, "module", None), "collection_order")]
    ordered = sorted((items[i] for i in slots), key=lambda item: item.module.collection_order(item))
    for i, item in zip(slots, ordered):
        items[i] = item


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``-n N`` on the project's tests: the tests of one vendor tokenizer share a worker
    (drafter_testkit/scheduling.py); an explicit ``--dist`` other than load is left as asked."""
    if config.getoption("dist") != "load" or config.getoption("dataset_path", None):
        return None
    from drafter_testkit.scheduling import make_scheduler

    return make_scheduler(config, log)


@pytest.fixture(scope="session")
def tokenizer_dir() -> Path:
    from drafter_testkit.tokenizer import qwen36_tokenizer_dir

    return qwen36_tokenizer_dir()


@pytest.fixture(scope="session")
def vocab(tokenizer_dir: Path) -> Vocabulary:
    from drafter_contracts.tokenizer.vocabulary import load_vocabulary

    return load_vocabulary(str(tokenizer_dir))


@pytest.fixture(scope="session")
def clean_dataset() -> Path:
    """A 2,000-row dataset rendered through the real chat template (cached across runs)."""
    from drafter_testkit.generate import fixture_dataset_dir

    return fixture_dataset_dir(FIXTURE_ROWS, 0)


@dataclass(frozen=True)
class ChatML:
    """The Qwen3.6 tokenizer's ChatML markers and the chatml built-in profile the tests label with.

    Labelling goes through ``SpanOracle.label``, the runtime's one door (the compiled labeller,
    or the numpy reference where the library is not built).
    """

    start: int
    end: int
    newline: int
    think: tuple[int, int]
    tool_call: tuple[int, int]
    oracle: SpanOracle

    @property
    def compiled(self) -> CompiledProfile:
        return self.oracle.compiled

    @property
    def size(self) -> int:
        """Entries of the profile's id tables: ids at or past it are outside the vocabulary."""
        return self.oracle.compiled.size

    def label(self, ids: np.ndarray, offsets: np.ndarray, max_len: int) -> Labels:
        return self.oracle.label(ids, offsets, max_len)


@pytest.fixture(scope="session")
def chatml(vocab: Vocabulary) -> ChatML:
    from drafter_contracts.spans.learn.builtin import builtin_profile
    from drafter_contracts.spans.profile import CompiledProfile
    from drafter_contracts.spans.oracle import SpanOracle

    prof = builtin_profile("chatml", vocab)
    oracle = SpanOracle(prof, "built-in chatml", CompiledProfile(prof, vocab.newline_lead))
    return ChatML(prof.headers[0].core[0], prof.headers[0].ends[0], vocab.single_id("\n"), prof.reasoning,
                  prof.tool_call, oracle)


@pytest.fixture(scope="session")
def alphabet(chatml: ChatML, vocab: Vocabulary) -> list[int]:
    """Markers, role names, content and out-of-range ids: the tokens of the labellers' marker-soup properties."""
    enc = lambda text: vocab.backend.encode(text, add_special_tokens=False).ids[0]  # noqa: E731
    return [chatml.start, chatml.end, chatml.newline, enc("\n\n"), enc("user"), enc("assistant"), enc("assistant"),
            enc("system"), enc("tool"), enc("Hello"), enc(" "), enc(" world"), chatml.think[0], chatml.think[1],
            chatml.tool_call[0], chatml.tool_call[1], enc("narrator"), -1, chatml.size + 7]
