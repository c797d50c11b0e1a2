"""The package's layers, read from its import graph: no module imports a layer above its own, and no circle.

Every import statement is read from the syntax tree, so imports inside functions and under
``TYPE_CHECKING`` count like module-level ones (a lazy import is still a dependency, and a
type-only one still ties the modules together when they change). docs/architecture.md draws
the same order, and its Layers table is read and compared with :data:`LAYERS`. The upward imports
the package still has are listed in :data:`KNOWN`, each with what it reaches for; the list is exact,
so a new one fails the test and a removed one must leave the list too.

**What counts as an import** of module ``m`` by the module holding it (:func:`edges`):

* ``import drafter_contracts.x.y`` and ``from ..x import y`` name ``x.y``; ``from .. import x`` names
  the module ``x`` where ``x`` is one, else the package's ``__init__`` (a name defined there).
* **String imports** (:func:`string_imports`), where the string is a whole literal naming an
  existing module of the package, absolute (``"drafter_contracts.x.y"``): the first argument of
  ``import_module`` / ``importlib.import_module`` / ``__import__`` (a literal, or a name the module
  binds to one, as ``run.options.PLUGIN``); every string of a list, tuple or set literal whose strings
  all name modules of the package (a module list the code imports: ``registry.CORE_MODULES``, a
  family's ``contract_modules``); the string after ``"-p"`` in such a literal, and
  ``pytest_plugins``. Nothing else: a docstring, an error message or a single string kept as a
  place (a family's ``after=``) only mentions a module, and an f-string is a discovery pattern, not
  a module (``contract_families.families()`` finds every ``*/family.py``: the families plug into the
  core by design, and each ``family.py`` imports only the standard library at module level).

**A package's ``__init__``.** Importing ``pkg.mod`` runs ``pkg/__init__.py`` first, but that is the
package's own affair, not a dependency of the importer: the edge ``m -> pkg`` (the ``__init__``,
named by its package) exists only where ``m`` imports the package itself or a name its
``__init__`` defines. So a package whose ``__init__`` re-exports its submodules does not put every
submodule that imports a sibling directly into a circle with it.

**Circles** (:func:`circles`): every elementary cycle of that graph among the package's modules,
each written as a path ``a -> b -> c -> a`` that starts at its least module. The ones the package
still has are listed in :data:`KNOWN_CIRCLES`, exactly: a new circle fails, and one removed must
leave the list.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from test_layers import MODULES, SRC, from_name, package_of

ARCHITECTURE = SRC.parents[1] / "docs" / "architecture.md"
PYPROJECT = SRC.parents[1] / "pyproject.toml"

#: Bottom up. A module belongs to the layer of its longest matching prefix (relative to the package).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("errors", "results", "paths", "hypothesis_settings", "contract_families", "option_values", "toml_text",
              "decoded_rows", "table_fields")),
    ("data", ("dataset", "tokenizer", "kernels")),
    ("spans", ("spans",)),
    ("policy", ("contract",)),
    ("checks", ("checks", "draftvocab", "hidden", "maskers", "strategies")),
    ("engine", ("engine",)),
    ("report", ("report",)),
    # the two pytest suites the plugin runs: contracts/ (the dataset's) and properties/ (a masker's)
    ("entry", ("run", "cli", "demo", "contracts", "properties", "__main__", "__init__")),
)

#: (importing module, imported module) -> what the upward import reaches for.
KNOWN: dict[tuple[str, str], str] = {}

#: Every import circle the package still has (:func:`circles`), exact: a new one fails, a removed one must leave.
KNOWN_CIRCLES: tuple[str, ...] = ()


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


#: The callables that import the module their first argument names.
IMPORTERS = frozenset({"import_module", "__import__"})


def _constants(tree: ast.Module) -> dict[str, str]:
    """The module-level names bound to one string literal (``PLUGIN = "drafter_contracts.run.plugin"``)."""
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out.update({t.id: node.value.value for t in targets
                        if isinstance(t, ast.Name) and isinstance(node.value.value, str)})
    return out


def _strings(node: ast.AST, constants: dict[str, str]) -> list[str]:
    """The string a node is (a literal, or a name bound to one), or the strings of a list/tuple/set literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name) and node.id in constants:
        return [constants[node.id]]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [s for elt in node.elts for s in _strings(elt, constants)]
    return []


def _named_modules(node: ast.AST, constants: dict[str, str]) -> list[str]:
    """What one node imports by string (the rules in the module docstring)."""
    if isinstance(node, ast.Call):
        func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if func in IMPORTERS and node.args:
            return [s for s in _strings(node.args[0], constants)[:1] if _is_module(s)]
    elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
        if items and all(isinstance(i, str) and _is_module(i) for i in items):  # a module list
            return items
        return [b for a, b in zip(items, items[1:]) if a == "-p" and isinstance(b, str) and _is_module(b)]
    elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytest_plugins" for t in node.targets):
        return [s for s in _strings(node.value, constants) if _is_module(s)]
    return []


def string_imports(source: str) -> list[tuple[int, str]]:
    """(line, absolute module) of every module of the package ``source`` imports by its name in a string."""
    tree = ast.parse(source)
    constants = _constants(tree)
    out = []
    for node in ast.walk(tree):
        out += [(node.lineno, name) for name in _named_modules(node, constants)]
    return sorted(set(out))


def all_imports(path: Path) -> list[tuple[int, str]]:
    """Every import of the module at ``path``: statements and string imports alike."""
    source = path.read_text("utf-8")
    return imported_modules(source, package_of(path)) + string_imports(source)


def node_of(name: str) -> str | None:
    """The module (relative dotted name, a package's ``__init__`` named by its package, the root's
    ``__init__``) that importing the absolute ``name`` runs for the importer; None outside the package."""
    if name == "drafter_contracts":
        return "__init__"
    if not name.startswith("drafter_contracts."):
        return None
    parts = name.split(".")[1:]
    while parts and not _is_module("drafter_contracts." + ".".join(parts)):
        parts.pop()
    return ".".join(parts) or "__init__"


def import_graph(paths: list[Path] = MODULES) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (every statement and string import; none of itself)."""
    graph = {}
    for path in paths:
        module = module_name(path)
        graph[module] = {n for _, name in all_imports(path) if (n := node_of(name)) is not None} - {module}
    return graph


def _cycles_from(start: str, graph: dict[str, set[str]], allowed: set[str]) -> list[list[str]]:
    """Every elementary cycle through ``start`` whose other modules are in ``allowed`` (all after it)."""
    out, stack = [], [(start, [start])]
    while stack:
        node, path = stack.pop()
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                out.append(path + [start])
            elif nxt in allowed and nxt not in path:
                stack.append((nxt, path + [nxt]))
    return out


def circles(graph: dict[str, set[str]]) -> list[str]:
    """Every elementary cycle of the graph, as ``a -> b -> a`` from its least module, sorted.

    Only the modules of a strongly connected set can share a cycle; within one, each cycle is found
    once, from its least module, walking modules greater than it (the sets today are a few modules).
    """
    out = []
    for component in strongly_connected(graph):
        members = sorted(component)
        for k, start in enumerate(members):
            out += [" -> ".join(c) for c in _cycles_from(start, graph, set(members[k + 1:]))]
    return sorted(out)


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """The graph's strongly connected sets of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, todo = work[-1]
            nxt = next(todo, None)
            if nxt is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    part = set(stack[stack.index(node):])
                    del stack[stack.index(node):]
                    out += [part] if len(part) > 1 else []
            elif nxt not in index:
                index[nxt] = low[nxt] = len(index)
                stack.append(nxt)
                work.append((nxt, iter(sorted(graph.get(nxt, ())))))
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
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
        for line, name in upward(module, all_imports(path)):
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


def test_no_import_circle() -> None:
    found = circles(import_graph())
    new = [c for c in found if c not in KNOWN_CIRCLES]
    assert not new, "import circles (break them: move the shared concept down):\n" + "\n".join(new)
    gone = [c for c in KNOWN_CIRCLES if c not in found]
    assert not gone, f"no longer a circle, remove from KNOWN_CIRCLES: {gone}"


def test_circles_are_every_elementary_cycle_named_as_a_path() -> None:
    graph = {"a": {"b"}, "b": {"c", "a"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}  # e: a self-import, dropped
    assert circles(graph) == ["a -> b -> a", "a -> b -> c -> a"]
    assert strongly_connected(graph) == [{"a", "b", "c"}]
    assert circles({"x": {"y"}, "y": set()}) == []


def test_string_imports_count_and_mentions_do_not() -> None:
    """Literal names passed to an import or listed as modules count; a docstring, a message, a single kept
    place (``after=``), a list mixing other strings and an f-string do not."""
    source = ('"""See drafter_contracts.engine."""\nfrom importlib import import_module\nimport importlib\n'
              'PLUGIN = "drafter_contracts.run.plugin"\n'
              'MODULES = ("drafter_contracts.checks.integrity", "drafter_contracts.checks.rows")\n'
              'def f(name):\n'
              '    import_module(PLUGIN)\n'
              '    importlib.import_module("drafter_contracts.report.html")\n'
              '    __import__("drafter_contracts.errors")\n'
              '    args = ["-p", "drafter_contracts.run.controller", "-p", "no:cacheprovider"]\n'
              '    F(contract_modules=("drafter_contracts.hidden.contracts",),\n'
              '      after="drafter_contracts.checks.drift")\n'
              '    raise ValueError("drafter_contracts.run.worker failed")\n'
              '    import_module(f"drafter_contracts.{name}.family")\n'
              '    return ("drafter_contracts.run.wire", "not a module")\n'
              'pytest_plugins = ["drafter_contracts.run.worker_count"]\n')
    found = {name.removeprefix("drafter_contracts.") for _, name in string_imports(source)}
    assert found == {"run.plugin", "checks.integrity", "checks.rows", "report.html", "errors", "run.controller",
                     "hidden.contracts", "run.worker_count"}


def test_string_imports_are_held_to_the_layers() -> None:
    """A module list in the checks layer naming a report module is an upward import like a statement."""
    source = 'CORE_MODULES = ("drafter_contracts.checks.integrity", "drafter_contracts.report.html")\n'
    assert upward("checks.registry", string_imports(source)) == [(1, "report.html")]


def test_a_package_init_is_imported_only_by_name() -> None:
    """``from .mod import X`` in ``pkg/__init__`` and ``from . import mod`` in a sibling give no circle:
    importing ``pkg.mod`` names ``pkg.mod``, never the package's ``__init__``."""
    init = imported_modules("from .registry import Spec\n", "drafter_contracts.checks")
    sibling = imported_modules("from . import registry\nfrom ..checks import registry as r\n",
                               "drafter_contracts.checks")
    names = {node_of(n) for _, n in init + sibling}
    assert names == {"checks.registry"}
    assert node_of("drafter_contracts.checks") == "checks" and node_of("drafter_contracts") == "__init__"
    assert node_of("drafter_contracts.checks.registry.Spec") == "checks.registry"
    package = imported_modules("from .. import checks\nfrom . import not_a_module\n", "drafter_contracts.checks")
    assert {node_of(n) for _, n in package} == {"checks"}
    graph = {"checks": {"checks.registry"}, "checks.rows": {"checks.registry"}, "checks.registry": set()}
    assert circles(graph) == []


def _folders() -> list[str]:
    """Every folder under the package holding Python modules (a namespace package like spans/ too)."""
    return sorted({".".join(p.parent.relative_to(SRC).parts) for p in MODULES if p.parent != SRC})


def test_every_folder_is_placed_in_the_layers() -> None:
    """A folder (package) is a prefix of :data:`LAYERS`, or every module in it lies in one layer."""
    prefixes = {prefix for _, group in LAYERS for prefix in group}
    assert "checks" in _folders() and "spans" in _folders()
    unplaced = []
    for folder in _folders():
        layers = {layer_of(module_name(p)) for p in SRC.joinpath(*folder.split(".")).rglob("*.py")}
        if folder not in prefixes and len(layers) != 1:
            unplaced.append(f"{folder}/ ({sorted(LAYERS[i][0] if i is not None else '-' for i in layers)})")
    assert not unplaced, f"folders across layers (place them in LAYERS and docs/architecture.md): {unplaced}"


def documented_layers(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """docs/architecture.md's Layers table: (layer, its folders and modules as LAYERS writes them)."""
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| layer ")]
    out = []
    for row in rows:
        layer, cell = (c.strip() for c in row.strip("|").split("|"))
        names = [n.strip().strip("`") for n in cell.split(",")]
        out.append((layer, tuple(n.removesuffix("/").replace("/", ".") for n in names)))
        folders = [n.removesuffix("/") for n in names if n.endswith("/")]
        assert all(SRC.joinpath(f).is_dir() for f in folders), f"{layer}: not folders: {folders}"
    return out


def test_the_architecture_doc_draws_the_same_layers() -> None:
    documented = documented_layers(ARCHITECTURE.read_text("utf-8"))
    assert [layer for layer, _ in documented] == [layer for layer, _ in LAYERS]
    for (layer, names), (_, prefixes) in zip(documented, LAYERS):
        assert sorted(names) == sorted(prefixes), \
            f"layer {layer}: docs/architecture.md {sorted(names)}, LAYERS {sorted(prefixes)}"
        assert all(SRC.joinpath(*n.split(".")).is_dir() or _is_module(f"drafter_contracts.{n}") or n == "__init__"
                   for n in names), f"layer {layer}: names no module or folder"


def test_the_doc_table_reader_sees_a_change() -> None:
    text = ("# A\n\n## Layers\n\n| layer | modules |\n|---|---|\n"
            "| base | errors, `__main__`, spans/, checks/view |\n\n## Next\n")
    assert documented_layers(text) == [("base", ("errors", "__main__", "spans", "checks.view"))]


def test_the_entry_points_are_in_the_entry_layer() -> None:
    """pyproject.toml's entry points (the pytest11 plugin, the console script) are imports from outside:
    they may only name modules of the top layer."""
    project = tomllib.loads(PYPROJECT.read_text("utf-8"))["project"]
    targets = [*project.get("scripts", {}).values(), *(v for group in project.get("entry-points", {}).values()
                                                       for v in group.values())]
    assert targets
    for target in targets:
        module = target.split(":")[0]
        assert _is_module(module) and LAYERS[layer_of(module.removeprefix("drafter_contracts."))][0] == "entry", target


@pytest.mark.parametrize("module", ["errors", "spans.generic", "contract.mask_rules", "dataset.row_view",
                                    "report.html", "run.plugin", "hidden.checks"])
def test_layer_map_places_modules_by_their_longest_prefix(module: str) -> None:
    expected = {"errors": "base", "spans.generic": "spans", "contract.mask_rules": "policy", "dataset.row_view": "data",
                "report.html": "report", "run.plugin": "entry", "hidden.checks": "checks"}[module]
    assert LAYERS[layer_of(module)][0] == expected


def test_the_engine_satisfies_the_protocols_contracts_are_annotated_with(clean_dataset, tokenizer_dir) -> None:
    """The declarations annotate with checks.protocols, not with the engine above them: a real engine and a
    real shard's work must hold every member the protocols declare."""
    from drafter_contracts.checks.protocols import ContractEngine, ShardData
    from drafter_contracts.contract import builtin_contracts, load_contract
    from drafter_contracts.dataset.reader import open_dataset
    from drafter_contracts.engine import Engine
    from drafter_contracts.tokenizer.vocabulary import load_vocabulary

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


def private_imports(source: str, package: str) -> list[tuple[int, str]]:
    """(line, ``module.name``) of each private name (one leading underscore) ``source`` imports from a module
    of the package that lies outside its own folder: a package's private names stay inside it."""
    mine = package.split(".")[:2]
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom):
            continue
        name = from_name(node, package)
        if not name.startswith("drafter_contracts") or name.split(".")[:2] == mine and len(mine) == 2:
            continue
        out += [(node.lineno, f"{name}.{a.name}") for a in node.names
                if a.name.startswith("_") and not a.name.startswith("__")]
    return out


def test_no_private_name_crosses_a_package() -> None:
    found = [f"{path.relative_to(SRC)}:{line} imports {name}" for path in MODULES
             for line, name in private_imports(path.read_text("utf-8"), package_of(path))]
    assert not found, "private names imported from another package (make them public or move them):\n" + \
        "\n".join(found)


def test_a_private_import_from_another_package_is_caught() -> None:
    source = "from ..dataset.columns import _offsets\nfrom .columns import _list_column\n"
    assert private_imports(source, "drafter_contracts.checks") == [(1, "drafter_contracts.dataset.columns._offsets")]
    assert private_imports(source.splitlines()[1], "drafter_contracts.dataset") == []
    assert private_imports("from .engine import _x\n", "drafter_contracts") == [(1, "drafter_contracts.engine._x")]
