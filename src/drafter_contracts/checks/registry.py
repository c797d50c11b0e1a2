"""The one list of contracts: each declared once, beside its check function, with everything the
rest of the suite needs to know about it.

A contract's :class:`Spec` says

* ``name`` and ``scope``: ``ROW`` (runs per shard, inside the shard's one test), ``DATASET`` (a test
  of its own, answered from metadata or a sample) or ``WHOLE`` (decided at the controller over
  every shard's partial result: duplicates, token_freq.pt, the baseline, what the run covered);
* ``needs``: the columns and inputs it cannot run without (a missing one skips it, saying why);
* ``run``: how the engine runs it (``run(engine, work)`` for a row contract, ``run(engine)`` for a
  dataset contract);
* ``partial`` / ``reduce``: for a whole-dataset contract, what each shard contributes (computed where
  the shard is in memory, carried by the shard's report) and how the controller turns the
  reduced run into one verdict (``reduce(run)``, ``run`` a :class:`WholeRun`);
* ``offending``: which tokens of one violating row an explanation marks (default: the one token
  at the violation's position);
* ``hints``: extra advice keyed by reason code (``CheckResult.by_code``), never by reason text;
* ``fold``: a partial folded into a running state as it arrives, where keeping every shard's
  partial until the end would not fit; ``shard_figures``: mergeable per-shard numbers (bytes read)
  the reducer sums into summary.json's ``figures``.

Engine dispatch, the contract suite's tests, explanations, ``merge-reports`` and the reports all
read this registry, so a new contract is one :func:`register` call next to its function. The
modules that declare contracts are imported by :func:`specs` in report order.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from enum import Enum
from importlib import import_module
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

import numpy as np

from ..contract_families import families

if TYPE_CHECKING:  # for annotations only
    from ..config import Contract
    from ..dataset import Shard
    from .protocols import ContractEngine, ShardData
    from ..results import CheckResult
    from ..spans.labels import Labels
    from ..spans.turns import MaskFacts


class Scope(str, Enum):
    ROW = "row"  # per shard, in the shard's test (test_row_contracts[shard-…])
    DATASET = "dataset"  # one test of its own (test_schema, …)
    WHOLE = "whole"  # decided at the controller from every shard's partial (test_duplicate_rows, …)


#: What a contract may need; a missing one skips the contract with the engine's reason.
IDS, MASK, TOKENIZER = "input_ids", "loss_mask", "tokenizer"
#: Reads the raw columns (every row, null and skewed ones too), not the view of usable rows.
RAW = "raw"
#: A contract family's name in ``needs`` is its input (``Engine.inputs``; contract_families.py).


@dataclass(frozen=True)
class Verdict:
    """A whole-dataset verdict with the lines that explain it (the baseline's diff), kept in summary.json."""

    result: "CheckResult"
    details: list[str] = field(default_factory=list)
    #: What the reports draw of it (hs_layer_norms: the norm quantiles per layer and position bucket),
    #: kept in its summary.json entry as ``figures``.
    figures: dict[str, Any] | None = None


class WholeRun(Protocol):
    """What a whole-dataset contract's ``reduce`` reads at the controller (``controller.ContractRun``)."""

    engine: "ContractEngine"
    coverage: Any  # completeness.Coverage: which shard and contract tests reported
    baseline: Any  # (path, document) of --baseline FILE, or None

    def partials(self, name: str) -> dict[int, Any]: ...  # shard index -> that shard's partial
    def folded(self, name: str) -> Any: ...  # a ``fold`` contract's state over every shard's partial (None: none)
    def recorded(self, name: str) -> dict[str, Any] | None: ...  # what the shards reported for it so far
    def lost_shards(self) -> int: ...  # shards whose test never reported (a dead worker)
    def supervised_counts(self) -> tuple[np.ndarray, np.ndarray] | None: ...
    def shard_stats(self) -> list[dict]: ...  # per-shard stats in shard order
    #: summary.json's ``profile`` of ``shard_stats()`` with these merged supervised id counts, as a run sums it
    def profile(self, top_k: int, counts: tuple[np.ndarray, np.ndarray] | None) -> dict[str, Any]: ...
    def tokenizer_fingerprint(self) -> dict[str, Any]: ...  # summary.json's ``tokenizer`` of this run's vocabulary


@dataclass(frozen=True)
class Spec:
    """One contract, as everything but its own check function sees it."""

    name: str
    scope: Scope
    doc: str  # one line: what holding it proves
    needs: frozenset[str] = frozenset({IDS})
    run: Callable[..., "CheckResult"] | None = None
    #: Whole-dataset contracts fed by every shard (duplicates): what a shard sends, ``partial(engine, shard)``.
    partial: Callable[["ContractEngine", "Shard"], Any] | None = None
    reduce: Callable[[WholeRun], "CheckResult | Verdict | None"] | None = None
    #: ``fold(state, partial) -> state`` (state None at first): each shard's partial is folded in as its
    #: report arrives instead of being kept (where the partials of a million rows take gigabytes);
    #: ``reduce`` reads ``run.folded(name)``.
    fold: Callable[[Any, Any], Any] | None = None
    #: ``shard_figures(engine, shard) -> {key: number}``: what the shard's pass counted (bytes read,
    #: seconds), kept in the shard's stats; the reducer sums them (``*_first`` keys: the least,
    #: ``*_last``: the greatest) into ``figures["contract_figures"][name]``.
    shard_figures: Callable[["ContractEngine", "Shard"], dict[str, float] | None] | None = None
    #: Bool per token of one row: every token that breaks the rule (explanations mark them all).
    offending: Callable[[np.ndarray, np.ndarray, "Labels", "Contract", "MaskFacts"], np.ndarray | None] | None = None
    #: Shown once per result when most of its rows break the rule: (engine, work, result) -> text.
    hint: Callable[["ContractEngine", "ShardData", "CheckResult"], str] | None = None
    #: Advice by reason code (the result's most frequent code picks one).
    hints: Mapping[int, str] = field(default_factory=dict)
    #: Where an excerpt of a whole-row violation (position -1) starts: -1 the row's start, -2 its end.
    whole_row_at: int = -1
    #: Judges only the part of a --split run it ran in (a sample per shard, the part's coverage):
    #: merge-reports adds every part's verdict instead of counting one.
    per_part: bool = False
    #: A skipped whole-dataset verdict is a test report (JUnit) too; False: the summary alone says why.
    report_skip: bool = True
    #: Decoded excerpts are cut for its failing rows (False: rows that cannot be read, arrow_integrity).
    decodable: bool = True
    #: Suspicious content: report-only (violations warn) unless ``[content] strict = true``.
    content: bool = False
    #: Runs only when an option asks for it (--baseline; a family's contracts that need its input, given
    #: by an option). Without it the contract is left out of the run, not skipped (``Engine.runs``).
    on_request: bool = False
    #: ``turned_off(contract) -> reason``: the contract file's own keys turn it off (``[mask] completeness =
    #: "off"``, ``[drift] sample_rows = 0``); the user wrote that down, so the gate does not require it.
    turned_off: Callable[["Contract"], str | None] | None = None
    #: ``missing(engine) -> reason``: an input of its own that this run lacks (a file beside the dataset);
    #: like a family's input or the tokenizer, a required contract lacking it stops the run (``checks/gate.py``).
    missing: Callable[["ContractEngine"], str | None] | None = None
    #: What its ``rows_checked`` counts, as the reports print it: rows for most contracts; the columns
    #: ``schema`` examined; the draft ids of a vocabulary mapping.
    unit: str = "rows"


#: The core's modules that declare contracts, in report order (the order of summary.json and the
#: terminal); within a module, the order of its ``register`` calls.
CORE_MODULES = ("drafter_contracts.integrity", "drafter_contracts.checks.dataset_level",
                "drafter_contracts.checks.rows", "drafter_contracts.checks.layout", "drafter_contracts.checks.spans",
                "drafter_contracts.checks.token_freq", "drafter_contracts.checks.drift",
                "drafter_contracts.completeness", "drafter_contracts.checks.content",
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
_SPECS: dict[str, tuple[tuple[int, int], Spec]] = {}
#: Which module object declared each name (the id of its globals): a module imported afresh (pytester's
#: in-process runs drop the modules a run imported, and the next run imports them again) declares its
#: contracts again, which replaces them; a second declaration from one module object is an error.
_DECLARED_BY: dict[str, tuple[str, int]] = {}
_ordered: dict[str, Spec] | None = None


def register(spec: Spec) -> Spec:
    """Declare a contract (at import of the module holding its check function, one of ``MODULES``)."""
    global _ordered
    caller = sys._getframe(1).f_globals
    module = caller.get("__name__", "")
    if module not in MODULES:
        raise ValueError(f"contract {spec.name!r} is declared in {module}, which neither registry.CORE_MODULES "
                         "nor a contract family lists")
    before = _DECLARED_BY.get(spec.name)
    if before is not None and (before[0] != module or before[1] == id(caller)) and _SPECS[spec.name][1] != spec:
        raise ValueError(f"contract {spec.name!r} is declared twice ({before[0]}, {module})")
    if spec.scope is Scope.WHOLE and spec.reduce is None:
        raise ValueError(f"whole-dataset contract {spec.name!r} needs a reduce")
    order = _SPECS[spec.name][0] if spec.name in _SPECS else (MODULES.index(module), len(_SPECS))
    _SPECS[spec.name] = (order, spec)
    _DECLARED_BY[spec.name] = (module, id(caller))
    _ordered = None
    return spec


def specs() -> dict[str, Spec]:
    """Every contract, in report order."""
    global _ordered
    if _ordered is None:
        for module in MODULES:
            import_module(module)
        _ordered = {name: s for name, (_, s) in sorted(_SPECS.items(), key=lambda kv: kv[1][0])}
    return _ordered


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

