"""The runtime's caches: keyed by what the document depends on, a damaged entry a miss, never an error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from drafter_contracts.paths import ArrayCache, JsonCache


@pytest.fixture(autouse=True)
def _cache_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAFTER_CONTRACTS_CACHE", str(tmp_path / "cache"))


def test_a_json_document_is_computed_once_and_read_back(tmp_path: Path) -> None:
    calls = []
    cache = JsonCache.keyed("profiles", "derived", ("tok-a", "template"))
    assert cache.path.suffix == ".json" and cache.path.parent == tmp_path / "cache" / "profiles"
    assert cache.get(lambda: calls.append(1) or {"x": [1, 2]}) == {"x": [1, 2]}
    assert cache.get(lambda: calls.append(1) or {"x": "other"}) == {"x": [1, 2]}
    assert calls == [1]


def test_the_key_holds_the_request_and_the_code(tmp_path: Path) -> None:
    code = tmp_path / "module.py"
    code.write_text("A = 1\n")
    first = JsonCache.keyed("profiles", "derived", ("tok-a",), code=(code,))
    assert JsonCache.keyed("profiles", "derived", ("tok-b",), code=(code,)).path != first.path
    assert JsonCache.keyed("profiles", "derived", ("tok-a",)).path != first.path
    assert JsonCache.keyed("profiles", "derived", ("tok-a",), code=(code,)).path == first.path


@pytest.mark.parametrize("damage", [b"", b"{not json", b"PK\x03\x04 truncated"])
def test_a_damaged_entry_is_a_miss(damage: bytes) -> None:
    for cache in (JsonCache.keyed("t", "k", ("a",)), ArrayCache.keyed("t", "k", ("a",))):
        cache.path.parent.mkdir(parents=True, exist_ok=True)
        cache.path.write_bytes(damage)
        assert cache.read() is None


def test_arrays_round_trip_without_pickles() -> None:
    cache = ArrayCache.keyed("vocab", "tables", ("fp",))
    assert cache.path.suffix == ".npz"
    cache.write({"known": np.array([True, False]), "lookups": np.array('{"a": 1}')})
    back = cache.read()
    assert back["known"].tolist() == [True, False] and str(back["lookups"]) == '{"a": 1}'
    cache.write({"objects": np.array([{"a": 1}], dtype=object)})  # needs a pickle to read: refused, a miss
    assert cache.read() is None


def test_an_unwritable_cache_costs_time_not_correctness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("DRAFTER_CONTRACTS_CACHE", str(blocker / "under-a-file"))
    cache = JsonCache.keyed("p", "k", ("a",))
    assert cache.get(lambda: {"v": 1}) == {"v": 1}
    assert cache.read() is None
