"""The cached template profiles are keyed by the learning package (spans/learn/, every file of it) and every
spans module it imports: an edit to any of them (tags.py, which the oracle's cached choice holds the output of,
included) is a cache miss, never a stale profile; a spans module the learning never runs is not in the key."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from drafter_contracts.paths import JsonCache
from drafter_contracts.spans.cache_code import SPANS_CODE
from drafter_contracts.spans.learn import derive, resolve

LEARN = Path(resolve.__file__).parent
SPANS = LEARN.parent


@pytest.fixture(autouse=True)
def _cache_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAFTER_CONTRACTS_CACHE", str(tmp_path / "cache"))


def test_the_key_lists_every_learning_module() -> None:
    learn = sorted(LEARN.rglob("*.py"))
    assert LEARN / "tags.py" in learn and LEARN / "probes.py" in learn and len(learn) > 8
    assert set(learn) <= set(SPANS_CODE)
    assert list(SPANS_CODE) == sorted(SPANS_CODE)


def test_the_key_lists_the_spans_modules_the_learning_imports_and_no_other() -> None:
    outside = {p.relative_to(SPANS).as_posix() for p in SPANS_CODE if LEARN not in p.parents}
    assert {"labels.py", "profile.py", "prefix.py", "generic.py", "labeller.py", "turns.py", "oracle.py"} <= outside
    assert "excerpt.py" not in outside and "__init__.py" not in outside


def test_every_spans_module_the_learning_loads_is_in_the_key() -> None:
    """What running the learning imports, read from a fresh interpreter's ``sys.modules``: the import
    reading the key is derived from misses nothing (only the ``spans`` package's own ``__init__``, which
    the key leaves out as it defines nothing the learning runs)."""
    code = ("import importlib, json, sys, pathlib\n"
            "learn = pathlib.Path(importlib.import_module('drafter_contracts.spans.learn').__file__).parent\n"
            "for p in sorted(learn.glob('*.py')):\n"
            "    importlib.import_module('drafter_contracts.spans.learn.' + p.stem if p.stem != '__init__' "
            "else 'drafter_contracts.spans.learn')\n"
            "from drafter_contracts.spans.oracle import SpanOracle\n"  # what resolve's functions import lazily
            "import drafter_contracts.spans.labeller, drafter_contracts.spans.turns, drafter_contracts.spans.generic\n"
            "print(json.dumps(sorted(m.__file__ for n, m in sys.modules.items() "
            "if n.startswith('drafter_contracts.spans') and getattr(m, '__file__', None))))\n")
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                       text=True).stdout)
    missing = {Path(f) for f in loaded} - set(SPANS_CODE) - {SPANS / "__init__.py"}
    assert not missing, missing


def test_the_oracle_and_the_derivation_caches_hash_the_key_files() -> None:
    """The stored paths equal those keyed by the key's files, so each file's bytes are in the key."""
    vocab = SimpleNamespace(fingerprint="fp", chat_template="{{ messages }}")
    files = SPANS_CODE
    oracle = JsonCache.keyed("profiles", "oracle", ("fp", "{{ messages }}", "auto", str(resolve.RESOLVE_VERSION)),
                             code=files)
    derived = JsonCache.keyed("profiles", "derived", ("fp", "{{ messages }}", str(derive.DERIVE_VERSION)), code=files)
    assert resolve._cache(vocab, "auto").path == oracle.path
    assert derive._cache(vocab).path == derived.path
    without_tags = tuple(f for f in files if f.name != "tags.py")
    assert JsonCache.keyed("profiles", "oracle", ("fp", "{{ messages }}", "auto", str(resolve.RESOLVE_VERSION)),
                           code=without_tags).path != oracle.path
