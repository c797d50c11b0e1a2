"""Session fixtures for the project's own tests: the real Qwen3.6 tokenizer and a generated dataset."""

from __future__ import annotations

from pathlib import Path

import pytest
# Imported here, before any in-process pytester run: pytester restores sys.modules after each inner
# run, dropping what the inner run imported first (a dataset run derives a template profile with
# transformers on a cold cache; token_freq.pt loads torch), and importing torch or a Rust extension a
# second time in one process corrupts memory ("bad call flags", then a segfault in the GC).
import tokenizers  # noqa: F401
import torch  # noqa: F401
import transformers  # noqa: F401

from drafter_contracts.fixtures.tokenizer import qwen36_tokenizer_dir
from drafter_contracts.spans.chatml import ChatMLProfile
from drafter_contracts.vocab import Vocabulary, load_vocabulary

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


@pytest.fixture(scope="session")
def tokenizer_dir() -> Path:
    return qwen36_tokenizer_dir()


@pytest.fixture(scope="session")
def vocab(tokenizer_dir: Path) -> Vocabulary:
    return load_vocabulary(str(tokenizer_dir))


@pytest.fixture(scope="session")
def clean_dataset() -> Path:
    """A 2,000-row dataset rendered through the real chat template (cached across runs)."""
    from drafter_contracts.fixtures.generate import fixture_dataset_dir

    return fixture_dataset_dir(FIXTURE_ROWS, 0)


@pytest.fixture(scope="session")
def profile(vocab: Vocabulary) -> ChatMLProfile:
    return ChatMLProfile.from_vocabulary(vocab)


@pytest.fixture(scope="session")
def alphabet(profile: ChatMLProfile, vocab: Vocabulary) -> list[int]:
    """Markers, role names, content and out-of-range ids: the tokens of the labellers' marker-soup properties."""
    enc = lambda text: vocab.backend.encode(text, add_special_tokens=False).ids[0]  # noqa: E731
    return [profile.start, profile.end, profile.newline, enc("\n\n"), enc("user"), enc("assistant"), enc("assistant"),
            enc("system"), enc("tool"), enc("Hello"), enc(" "), enc(" world"), profile.think[0], profile.think[1],
            profile.tool_call[0], profile.tool_call[1], enc("narrator"), -1, len(profile.role_of_id) + 7]
