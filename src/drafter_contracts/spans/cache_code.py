"""The code a cached template profile is keyed by: the learning package and every spans module it imports.

A derived or verified profile is stored across runs, so the key must change whenever code that shapes
it does. That code is ``learn/`` (every file of it, found on disk) and what it runs of the rest of
``spans/`` (the labels, profiles, labellers, turns and the oracle the generation tags are read with),
found by following the imports of ``learn/`` inside ``spans/``, those in function bodies included, until
no new module turns up. Neither set is written by hand, so a module added to ``learn/``, or a spans
module it starts to import, is in the key at once; a spans module the learning never runs (the
excerpt renderer) is not, and an edit to it serves the cached profiles as they are.
"""

from __future__ import annotations

import ast
from pathlib import Path

SPANS = Path(__file__).parent
LEARN = SPANS / "learn"


def _module_file(parts: list[str]) -> Path | None:
    """The file of the spans module (or package) at ``parts`` below ``spans/``, None outside it or absent."""
    base = SPANS.joinpath(*parts)
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def _imported(path: Path) -> set[Path]:
    """The spans files one file imports: ``from .x import y`` and ``from .. import x`` (relative to its
    package) and ``drafter_contracts.spans...`` by absolute name, anywhere in the file. ``from P import x``
    counts the module ``x`` where x is one, and ``P`` itself only for the names it defines."""
    package = list(path.parent.relative_to(SPANS).parts)
    out: set[Path] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            if node.level - 1 > len(package):
                continue  # above spans/: not spans code
            base = package[:len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("drafter_contracts.spans"):
            base = node.module.split(".")[2:]
        elif isinstance(node, ast.Import):
            names = [a.name.split(".")[2:] for a in node.names if a.name.startswith("drafter_contracts.spans.")]
            out |= {f for f in map(_module_file, names) if f is not None}
            continue
        else:
            continue
        modules = [f for f in (_module_file(base + [a.name]) for a in node.names) if f is not None]
        found = _module_file(base) if len(modules) < len(node.names) else None  # names the module itself defines
        out |= set(modules) | ({found} if found is not None else set())
    return out


def _closure(start: set[Path]) -> set[Path]:
    seen: set[Path] = set()
    todo = set(start)
    while todo:
        path = todo.pop()
        seen.add(path)
        todo |= _imported(path) - seen
    return seen


#: The ``.py`` files of ``learn/`` and of the spans modules they import, sorted so the key does not depend
#: on the file system's listing order.
SPANS_CODE: tuple[Path, ...] = tuple(sorted(_closure(set(LEARN.rglob("*.py")))))
