"""The package's layers, read from its import graph: no module imports a layer above its own.

Every import statement is read from the syntax tree, so imports inside functions and under
``TYPE_CHECKING`` count like module-level ones (a lazy import is still a dependency, and a
type-only one still ties the modules together when they change). docs/architecture.md draws
the same order. The upward imports the package still has are listed in :data:`KNOWN`, each
with what it reaches for; the list is exact, so a new one fails the test and a removed one
must leave the list too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from test_layers import MODULES, SRC, from_name, package_of

#: Bottom up. A module belongs to the layer of its longest matching prefix (relative to the package).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("errors", "results", "paths", "allocator", "hypothesis_settings", "wire", "contract_families", "option_values",
              "toml_text", "decoded_rows", "table_fields")),
    ("data", ("dataset", "columns", "layouts", "layout_rows", "source_files", "vocab", "kernels", "kernels_numpy",
              "kernel_codes", "tokenizer_source", "builtin_tokenizer", "trl_templates", "checks.view")),
    ("spans", ("spans",)),
    ("policy", ("contract",)),
    ("checks", ("checks", "integrity", "draftvocab", "hidden", "completeness", "maskers", "strategies")),
    ("engine", ("engine",)),
    ("report", ("report",)),
    # the two pytest suites the plugin runs: contracts/ (the dataset's) and properties/ (a masker's)
    ("entry", ("controller", "plugin", "suite", "options", "option_help", "workers", "__main__", "init_contract", "demo", "contracts",
               "properties", "__init__")),
)

#: (importing module, imported module) -> what the upward import reaches for.
KNOWN: dict[tuple[str, str], str] = {}


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"] or ["__init__"]
    return ".".join(parts)


def layer_of(module: str) -> int | None:
    """Index into :data:`LAYERS` of a module (relative dotted name), or None when no prefix matches."""
    parts = module.split(".")
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            pp = prefix.split(".")
            if parts[:len(pp)] == pp and (best is None or len(pp) > best[1]):
                best = (index, len(pp))
    return None if best is None else best[0]


def _is_module(dotted: str) -> bool:
    """Whether an absolute dotted name inside the package is one of its modules or subpackages."""
    if not dotted.startswith("drafter_contracts."):
        return False
    path = SRC.joinpath(*dotted.split(".")[1:])
    return path.with_suffix(".py").is_file() or path.is_dir()


def imported_modules(source: str, package: str) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in ``source``, a module of ``package``. ``from .. import X`` and
    ``from .pkg import X`` count as imports of the module ``X`` where X is one: the statement itself names only
    the package (the root has no layer), and the layer of the module it brings in would go unchecked."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            name = from_name(node, package)
            modules = [f"{name}.{alias.name}" for alias in node.names if _is_module(f"{name}.{alias.name}")]
            out += [(node.lineno, module) for module in modules]
            if len(modules) < len(node.names):  # names defined in the package's module itself
                out.append((node.lineno, name))
    return out


def upward(module: str, found: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """(line, imported module) of each import of ``module`` that reaches a layer above its own."""
    me = layer_of(module)
    out = []
    for line, name in found:
        if not name.startswith("drafter_contracts.") or me is None:
            continue
        other = layer_of(name.removeprefix("drafter_contracts."))
        if other is not None and other > me:
            out.append((line, name.removeprefix("drafter_contracts.")))
    return out


def known(module: str, name: str) -> tuple[str, str] | None:
    """The :data:`KNOWN` entry an upward import of ``name`` by ``module`` falls under, if any."""
    return next(((m, n) for m, n in KNOWN if module == m and (name == n or name.startswith(n + "."))), None)


def test_every_module_has_a_layer() -> None:
    unplaced = [module_name(p) for p in MODULES if layer_of(module_name(p)) is None]
    assert not unplaced, f"modules in no layer (add them to LAYERS and docs/architecture.md): {unplaced}"


def test_no_module_imports_a_layer_above_its_own() -> None:
    new, seen = [], set()
    for path in MODULES:
        module = module_name(path)
        for line, name in upward(module, imported_modules(path.read_text("utf-8"), package_of(path))):
            hit = known(module, name)
            if hit is None:
                new.append(f"{path.relative_to(SRC)}:{line} imports {name} "
                           f"({LAYERS[layer_of(module)][0]} -> {LAYERS[layer_of(name)][0]})")
            else:
                seen.add(hit)
    assert not new, "upward imports:\n" + "\n".join(new)
    gone = sorted(set(KNOWN) - seen)
    assert not gone, f"no longer imported upward, remove from KNOWN: {gone}"


def test_an_upward_import_inside_a_function_is_caught(tmp_path: Path) -> None:
    """The rule on a throwaway module: a lazy import of the engine from the span layer fails it."""
    source = "def f():\n    from ..engine import Engine\n    return Engine\n"
    found = [(node.lineno, "drafter_contracts.engine") for node in ast.walk(ast.parse(source))
             if isinstance(node, ast.ImportFrom)]
    assert upward("spans.throwaway", found) == [(2, "engine")]
    assert known("spans.throwaway", "engine") is None
    assert upward("report.throwaway", found) == []  # downward: allowed


def test_a_module_imported_from_its_package_is_checked_at_its_own_layer() -> None:
    """``from .. import engine`` names the root package, which has no layer; the module it brings in has one."""
    source = "from .. import engine, errors\nfrom . import labels\nfrom ..paths import JsonCache\n"
    found = imported_modules(source, "drafter_contracts.spans")
    assert found == [(1, "drafter_contracts.engine"), (1, "drafter_contracts.errors"),
                     (2, "drafter_contracts.spans.labels"), (3, "drafter_contracts.paths")]
    assert upward("spans.throwaway", found) == [(1, "engine")]


@pytest.mark.parametrize("module", ["errors", "spans.generic", "contract.mask_rules", "checks.view", "report.html",
                                    "plugin", "hidden.checks"])
def test_layer_map_places_modules_by_their_longest_prefix(module: str) -> None:
    expected = {"errors": "base", "spans.generic": "spans", "contract.mask_rules": "policy", "checks.view": "data",
                "report.html": "report", "plugin": "entry", "hidden.checks": "checks"}[module]
    assert LAYERS[layer_of(module)][0] == expected


def test_the_engine_satisfies_the_protocols_contracts_are_annotated_with(clean_dataset, tokenizer_dir) -> None:
    """The registry annotates with checks.protocols, not with the engine above it: a real engine and a
    real shard's work must hold every member the protocols declare."""
    from drafter_contracts.checks.protocols import ContractEngine, ShardData
    from drafter_contracts.contract import builtin_contracts, load_contract
    from drafter_contracts.dataset import open_dataset
    from drafter_contracts.engine import Engine
    from drafter_contracts.vocab import load_vocabulary

    engine = Engine(open_dataset(clean_dataset), load_contract(builtin_contracts()["generic"]),
                    load_vocabulary(str(tokenizer_dir)))
    assert isinstance(engine, ContractEngine)
    assert isinstance(engine.work(engine.shards[0]), ShardData)

    class Partial:  # what a class lacking one member looks like to the check
        dataset = contract = vocab = oracle = split = token_freq_path = None
        inputs: dict = {}
        shards = all_shards = []
        column_problems: dict = {}

        def work(self, shard): ...
        def unreadable(self, shard): ...

    assert not isinstance(Partial(), ContractEngine)  # no stats()
