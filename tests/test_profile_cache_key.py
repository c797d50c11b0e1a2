"""The cached template profiles are keyed by every module of ``spans/``: an edit to any of them (tags.py,
which the oracle's cached choice holds the output of, included) is a cache miss, never a stale profile."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from drafter_contracts.paths import JsonCache
from drafter_contracts.spans import derive, resolve
from drafter_contracts.spans.cache_code import SPANS_CODE

SPANS = Path(resolve.__file__).parent


@pytest.fixture(autouse=True)
def _cache_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAFTER_CONTRACTS_CACHE", str(tmp_path / "cache"))


def test_the_key_lists_every_spans_module() -> None:
    modules = sorted(SPANS.glob("*.py"))
    assert SPANS / "tags.py" in modules and len(modules) > 10
    assert list(SPANS_CODE) == modules


def test_the_oracle_and_the_derivation_caches_hash_every_spans_module() -> None:
    """The stored paths equal those keyed by the folder's files, so each file's bytes are in the key."""
    vocab = SimpleNamespace(fingerprint="fp", chat_template="{{ messages }}")
    files = tuple(sorted(SPANS.glob("*.py")))
    oracle = JsonCache.keyed("profiles", "oracle", ("fp", "{{ messages }}", "auto", str(resolve.RESOLVE_VERSION)),
                             code=files)
    derived = JsonCache.keyed("profiles", "derived", ("fp", "{{ messages }}", str(derive.DERIVE_VERSION)), code=files)
    assert resolve._cache(vocab, "auto").path == oracle.path
    assert derive._cache(vocab).path == derived.path
    without_tags = tuple(f for f in files if f.name != "tags.py")
    assert JsonCache.keyed("profiles", "oracle", ("fp", "{{ messages }}", "auto", str(resolve.RESOLVE_VERSION)),
                           code=without_tags).path != oracle.path
