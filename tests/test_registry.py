"""checks/registry.py and checks/declare.py: every contract declared once, in a module the registry lists,
and the engine's check lists read from it; a module imported afresh declares its contracts again without error."""

from __future__ import annotations

import sys
from importlib import import_module

import pytest

from drafter_contracts import engine
from drafter_contracts.checks import declare, registry
from drafter_contracts.checks.declare import Scope, Spec
from drafter_contracts.checks.registry import MODULES, names, spec, specs


def test_every_contract_is_declared_in_a_listed_module_once():
    every = specs()
    assert len(every) == len(set(every)) > 10
    for name, s in every.items():
        assert s.name == name
        assert declare._DECLARED_BY[name][0] in MODULES, name
        if s.scope is Scope.WHOLE:
            assert s.reduce is not None, name
        if s.scope is Scope.ROW:
            assert s.run is not None, name


def test_the_engine_lists_partition_the_registry():
    """Each contract is in exactly one of the engine's lists, or runs on request only (the baseline, the hidden-state
    contracts: an Engine adds them when the run has their input)."""
    lists = (engine.ROW_CHECKS, engine.DATASET_CHECKS, engine.GLOBAL_CHECKS, engine.CONTENT_CHECKS)
    flat = [n for group in lists for n in group]
    assert len(flat) == len(set(flat))
    on_request = {n for n, s in specs().items() if s.on_request}
    assert set(flat) | on_request == set(specs()) and not set(flat) & on_request
    assert set(engine.SHARD_CHECKS) == {n for n, s in specs().items()
                                        if (s.scope is Scope.ROW or s.partial) and not s.on_request}


def test_report_order_follows_modules():
    order = [MODULES.index(declare._DECLARED_BY[n][0]) for n in names()]
    assert order == sorted(order)


@pytest.fixture
def scratch_registry(monkeypatch):
    """The declarations' tables as copies and the registry's order, restored after the test."""
    monkeypatch.setattr(declare, "_SPECS", dict(declare._SPECS))
    monkeypatch.setattr(declare, "_DECLARED_BY", dict(declare._DECLARED_BY))
    monkeypatch.setattr(registry, "_ordered", None)


def test_a_module_imported_afresh_replaces_its_contracts(scratch_registry, monkeypatch):
    """pytester's in-process runs drop the modules a run imported; the next run imports them again."""
    before = names()
    old = import_module("drafter_contracts.checks.completeness")
    monkeypatch.delitem(sys.modules, "drafter_contracts.checks.completeness")
    fresh = import_module("drafter_contracts.checks.completeness")
    assert fresh is not old
    assert names() == before  # same contracts, same report order
    assert spec(old.SHARDS_CHECK) is not None and spec(old.SHARDS_CHECK).reduce is not None
    assert declare._DECLARED_BY[old.SHARDS_CHECK][1] == id(vars(fresh))


def _declare(module_globals: dict, s: Spec) -> None:
    exec("register(s)", module_globals, {"s": s})


def test_a_second_declaration_from_one_module_is_refused(scratch_registry):
    g = {"__name__": "drafter_contracts.checks.rows", "register": declare.register}
    _declare(g, Spec("made_up_contract", Scope.DATASET, "first", run=lambda e: None))
    with pytest.raises(ValueError, match="declared twice"):
        _declare(g, Spec("made_up_contract", Scope.DATASET, "second", run=lambda e: None))
    other = {"__name__": "drafter_contracts.checks.spans", "register": declare.register}
    with pytest.raises(ValueError, match="declared twice"):
        _declare(other, Spec("made_up_contract", Scope.DATASET, "third", run=lambda e: None))


def test_declarations_outside_the_listed_modules_or_without_reduce_are_refused(scratch_registry):
    with pytest.raises(ValueError, match="neither registry.CORE_MODULES nor a contract family lists"):
        _declare({"__name__": "somewhere_else", "register": declare.register},
                 Spec("made_up_contract", Scope.DATASET, "x"))
    with pytest.raises(ValueError, match="needs a reduce"):
        _declare({"__name__": "drafter_contracts.checks.rows", "register": declare.register},
                 Spec("made_up_whole", Scope.WHOLE, "x"))


def test_a_declaration_made_before_the_registry_is_imported_is_checked_then(scratch_registry, monkeypatch):
    """A contract module imported ahead of the registry declares before the registry's list is known:
    ``declare.allow`` (the registry's import) checks what was declared until then."""
    monkeypatch.setattr(declare, "_allowed", None)
    _declare({"__name__": "somewhere_else", "register": declare.register}, Spec("made_up_contract", Scope.DATASET, "x"))
    with pytest.raises(ValueError, match="neither registry.CORE_MODULES nor a contract family lists"):
        declare.allow(MODULES)
