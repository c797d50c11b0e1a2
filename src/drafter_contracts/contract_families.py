"""Contract families: a package of contracts with the inputs, options, contract table and report
section they bring, plugged into the core through one small interface.

The token contracts are the core's own (``checks/registry.py`` lists their modules). A further
family - the hidden states an offline extraction wrote, the draft vocabulary of an EAGLE-3
drafter - is a subpackage of ``drafter_contracts`` holding a ``family.py`` whose ``FAMILY`` is a
:class:`ContractFamily`. The core finds those packages (:func:`families`) and talks to them only through
this interface, so adding one touches no core file:

* the command line: ``add_options`` (the entry point's group), ``parse_options`` (every
  process: typed values, nothing touched), ``check_options`` (the controller, before any work:
  one-line :class:`~drafter_contracts.errors.UsageProblem`);
* the contract file: the ``table`` it owns and ``parse_table``, which validates it (the core's
  loader refuses every other unknown table; ``table_fields.read_table`` checks keys and types as the
  core's tables are checked);
* the run: ``open_input`` gives what its contracts read (``Engine.inputs[name]``); a contract
  whose ``needs`` holds the family's ``name`` runs only when that input is there, and an
  ``on_request`` one is left out of the run otherwise (``missing`` says why);
* the reports: ``describe`` (summary.json's section ``name``), ``terminal_lines`` and
  ``html_section``, read from summary.json like every other report;
* ``drafter-contracts init``: :class:`InitHooks`, what the family pins of a known-good dataset in
  init's one pass (its arguments, its input, a partial per shard, the pins, its table's lines).

Its contracts are declared in ``contract_modules`` with ``declare.register`` like the core's, in
report order after the core module ``after`` (the end when None), and their statistics travel as
partials and ``shard_figures`` the reducer already merges.

A family module imports only the standard library at module level: the entry point reads every
family's options in every pytest run of every environment the package is installed in.
"""

from __future__ import annotations

import pkgutil
from dataclasses import dataclass
from functools import lru_cache
from importlib import import_module
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Callable


@dataclass(frozen=True)
class InitHooks:
    """What a family pins when ``drafter-contracts init`` reads a known-good dataset (``cli/init.py``).

    Init makes one pass of the engine over the shards; a family rides on it rather than reading the
    dataset again, and writes its own table of the contract file from what it saw.
    """

    #: ``section(pins) -> lines``: its table in the contract file, every key commented
    #: (``toml_text.key_line``); pins None: nothing was found to pin, and the lines say so.
    section: Callable[[Any], list[str]]
    #: ``add_arguments(parser)``: init's own arguments for it (argparse); ``option(args) -> option``
    #: reads them back from the namespace.
    add_arguments: Callable[[Any], None] | None = None
    option: Callable[[Any], Any] | None = None
    #: ``check(option)``: before any work (a file named exists); one-line UsageProblem otherwise.
    check: Callable[[Any], None] | None = None
    #: ``open_input(dataset, option) -> input``: ``Engine.inputs[name]`` during init's pass.
    open_input: Callable[[Any, Any], Any] | None = None
    #: ``shard(engine, shard, stats) -> partial``: what it keeps of a shard while the shard is in memory
    #: (``stats`` is ``Engine.stats(shard)``).
    shard: Callable[[Any, Any, dict[str, Any]], Any] | None = None
    #: ``pins(engine, partials, option) -> pins | None``: what ``section`` writes, from every shard's partial.
    pins: Callable[[Any, list[Any], Any], Any] | None = None


@dataclass(frozen=True)
class ContractFamily:
    """One contract family, as the core sees it (every callable optional but ``contract_modules``)."""

    #: Key of ``Engine.inputs``, ``RunOptions.families``, ``Contract.families``, summary.json's section, and
    #: the ``needs`` entry of the contracts that read the family's input.
    name: str
    #: Modules declaring its contracts (``declare.register`` calls), in report order.
    contract_modules: tuple[str, ...]
    #: The core contract module its contracts follow in report order (None: after every core one).
    after: str | None = None
    #: The contract-file table it owns (``[hidden_states]``), and ``parse_table(body or None, where,
    #: contract file) -> policy``: the family's policy, its defaults when the table is absent.
    table: str | None = None
    parse_table: Callable[[Any, str, Path | None], Any] | None = None
    #: ``add_options(group)``: its command-line options (``group.addoption``).
    add_options: Callable[[Any], None] | None = None
    #: ``parse_options(config) -> options``: typed values, in every process; UsageProblem on a malformed one.
    parse_options: Callable[[Any], Any] | None = None
    #: ``needs_dataset(config) -> message | None``: an option of it given without --dataset-path.
    needs_dataset: Callable[[Any], str | None] | None = None
    #: ``check_options(config, options, contract)``: on the controller, before any work (files and folders
    #: exist); the family's policy is ``contract.families[name]``.
    check_options: Callable[[Any, Any, Any], None] | None = None
    #: ``open_input(config, options, dataset, contract) -> input | None``: what its contracts read (None: not given).
    open_input: Callable[[Any, Any, Any, Any], Any] | None = None
    #: Why a contract that needs the input skips (or, ``on_request``, is left out) without it.
    missing: str = ""
    #: ``describe(input) -> dict``: summary.json's ``name`` section (what was read).
    describe: Callable[[Any], dict[str, Any]] | None = None
    #: ``terminal_lines(summary) -> lines`` after the verdict lines; ``html_section(summary) -> html``.
    terminal_lines: Callable[[dict[str, Any]], list[str]] | None = None
    html_section: Callable[[dict[str, Any]], str] | None = None
    #: Where report.html places the section: "dataset" (after the dataset's plots) or "end" (after the rows).
    html_place: str = "end"
    #: What ``drafter-contracts init`` pins of it (None: nothing; its table is left out of the file init writes).
    init: InitHooks | None = None


@lru_cache(maxsize=1)
def families() -> tuple[ContractFamily, ...]:
    """Every family the package holds, by package name (a subpackage with a ``family`` module)."""
    out = []
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda m: m.name):
        if not info.ispkg or find_spec(f"drafter_contracts.{info.name}.family") is None:
            continue
        family = getattr(import_module(f"drafter_contracts.{info.name}.family"), "FAMILY", None)
        if not isinstance(family, ContractFamily):
            raise TypeError(f"drafter_contracts.{info.name}.family: FAMILY must be a families.ContractFamily")
        out.append(family)
    return tuple(out)


def family(name: str) -> ContractFamily | None:
    return next((f for f in families() if f.name == name), None)


def names() -> frozenset[str]:
    """The families' names: the ``needs`` entries that are a family's input rather than a column."""
    return frozenset(f.name for f in families())


def tables() -> dict[str, ContractFamily]:
    """Contract-file table -> the family that owns it."""
    return {f.table: f for f in families() if f.table is not None}
