"""The one list of contracts, in report order: the modules that declare them (:data:`CORE_MODULES`, and
each contract family's ``contract_modules``) and the lookups the rest of the suite reads.

Each contract is declared once, beside its check function, with a :func:`declare.register` call
(``checks/declare.py``: the :class:`declare.Spec` and what it says). Engine dispatch, the contract
suite's tests, explanations, ``merge-reports`` and the reports all read :func:`specs` and :func:`spec`,
so a new contract is one ``register`` call next to its function. :func:`specs` imports the modules
that declare contracts, in report order.
"""

from __future__ import annotations

from importlib import import_module

from ..contract_families import families
from . import declare
from .declare import Scope, Spec


#: The core's modules that declare contracts, in report order (the order of summary.json and the
#: terminal); within a module, the order of its ``register`` calls.
CORE_MODULES = ("drafter_contracts.checks.integrity", "drafter_contracts.checks.dataset_level",
                "drafter_contracts.checks.rows", "drafter_contracts.checks.layout", "drafter_contracts.checks.spans",
                "drafter_contracts.checks.token_freq", "drafter_contracts.checks.drift",
                "drafter_contracts.checks.completeness", "drafter_contracts.checks.content",
                "drafter_contracts.checks.convention_losses", "drafter_contracts.checks.baseline")


def _modules() -> tuple[str, ...]:
    """The core's modules with each contract family's placed after the one its ``after`` names."""
    out = list(CORE_MODULES)
    for fam in families():
        at = out.index(fam.after) + 1 if fam.after is not None else len(out)
        out[at:at] = fam.contract_modules
    return tuple(out)


#: Every module that declares contracts, in report order: a module of new core contracts is one entry of
#: CORE_MODULES, a family's are its ``ContractFamily.contract_modules``.
MODULES = _modules()
declare.allow(MODULES)
#: (:func:`declare.changes` when it was ordered, every contract in report order); ordered again after a
#: declaration.
_ordered: tuple[int, dict[str, Spec]] | None = None


def specs() -> dict[str, Spec]:
    """Every contract, in report order."""
    global _ordered
    if _ordered is None or _ordered[0] != declare.changes():
        for module in MODULES:
            import_module(module)
        _ordered = (declare.changes(), declare.in_order(MODULES))
    return _ordered[1]


def spec(name: str) -> Spec | None:
    return specs().get(name)


def names(*scopes: Scope, shard_test: bool | None = None) -> tuple[str, ...]:
    """Contract names of the given scopes (all without), in report order.

    ``shard_test=True``: the contracts a shard's test runs (row contracts, and whole-dataset ones
    that send a per-shard partial).
    """
    out = []
    for s in specs().values():
        if scopes and s.scope not in scopes:
            continue
        if shard_test is not None and shard_test != (s.scope is Scope.ROW or s.partial is not None):
            continue
        out.append(s.name)
    return tuple(out)

