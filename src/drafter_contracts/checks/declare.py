"""A contract's declaration: each declared once, beside its check function, with everything the
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

A module that declares contracts imports this module only, and calls :func:`register` once per
contract at its import; the declarations are kept here. The registry (``checks/registry.py``) lists
those modules, imports them and reads the declarations in report order (``registry.specs()``), so
no contract module imports the registry that imports it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

import numpy as np

if TYPE_CHECKING:  # for annotations only
    from ..contract import Contract
    from ..dataset.columns import Shard
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
    """What a whole-dataset contract's ``reduce`` reads at the controller (``run.controller.ContractRun``)."""

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


#: name -> ((the module that first declared it, the declaration's number), its Spec): the registry orders
#: the contracts by their module's place in its ``MODULES``, then by that number (the module's ``register`` calls).
_SPECS: dict[str, tuple[tuple[str, int], Spec]] = {}
#: Which module object declared each name (the id of its globals): a module imported afresh (pytester's
#: in-process runs drop the modules a run imported, and the next run imports them again) declares its
#: contracts again, which replaces them; a second declaration from one module object is an error.
_DECLARED_BY: dict[str, tuple[str, int]] = {}
#: The modules that may declare contracts (``registry.MODULES``), set by the registry at its import
#: (:func:`allow`); None until then.
_allowed: tuple[str, ...] | None = None
#: How many declarations were made so far: the registry orders them again when it changed.
_changes = 0


def _check_listed(name: str, module: str) -> None:
    if _allowed is not None and module not in _allowed:
        raise ValueError(f"contract {name!r} is declared in {module}, which neither registry.CORE_MODULES "
                         "nor a contract family lists")


def allow(modules: tuple[str, ...]) -> None:
    """The modules that may declare contracts (the registry's ``MODULES``, given at its import); a declaration
    made before, by a module imported ahead of the registry, is checked now."""
    global _allowed
    _allowed = tuple(modules)
    for name, (module, _) in list(_DECLARED_BY.items()):
        _check_listed(name, module)


def register(spec: Spec) -> Spec:
    """Declare a contract (at import of the module holding its check function, one of ``registry.MODULES``)."""
    global _changes
    caller = sys._getframe(1).f_globals
    module = caller.get("__name__", "")
    _check_listed(spec.name, module)
    before = _DECLARED_BY.get(spec.name)
    if before is not None and (before[0] != module or before[1] == id(caller)) and _SPECS[spec.name][1] != spec:
        raise ValueError(f"contract {spec.name!r} is declared twice ({before[0]}, {module})")
    if spec.scope is Scope.WHOLE and spec.reduce is None:
        raise ValueError(f"whole-dataset contract {spec.name!r} needs a reduce")
    place = _SPECS[spec.name][0] if spec.name in _SPECS else (module, len(_SPECS))
    _SPECS[spec.name] = (place, spec)
    _DECLARED_BY[spec.name] = (module, id(caller))
    _changes += 1
    return spec


def changes() -> int:
    """How many declarations were made so far (one more with every :func:`register` call)."""
    return _changes


def in_order(modules: tuple[str, ...]) -> dict[str, Spec]:
    """Every contract declared so far, by the place of its module in ``modules``, then in the order of the
    module's ``register`` calls."""
    def place(item: tuple[str, tuple[tuple[str, int], Spec]]) -> tuple[int, int]:
        module, number = item[1][0]
        return modules.index(module), number

    return {name: s for name, (_, s) in sorted(_SPECS.items(), key=place)}


def declared(name: str) -> Spec | None:
    """The contract declared as ``name`` so far, without importing the modules that declare the others: a
    contract module's own code reads its declarations here (``registry.spec`` imports every one)."""
    entry = _SPECS.get(name)
    return None if entry is None else entry[1]
