"""``spans/`` modules keep their private helpers to themselves, and the probe sets are written only in
``learn/probes.py``, where they are defined."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from drafter_contracts.spans import labels

SPANS = Path(labels.__file__).parent


def _modules() -> list[Path]:
    return sorted(SPANS.rglob("*.py"))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.relative_to(SPANS).as_posix())
def test_no_spans_module_imports_a_private_name_or_mutates_a_probe_set(path: Path) -> None:
    """Private helpers stay in their module, and the probe sets are written only where they are defined."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert not [a.name for a in node.names if a.name.startswith("_") and a.name != "__future__"], (
                f"{path.name}:{node.lineno} imports a private name")
        if isinstance(node, (ast.Assign, ast.AugAssign)) and path.name != "probes.py":
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                base = t.value if isinstance(t, (ast.Subscript, ast.Attribute)) else t
                assert not (isinstance(base, ast.Name) and base.id in {"PROBES", "OPTIONAL", "EVIDENCE", "SWITCHES"}
                            ), f"{path.name}:{node.lineno} writes a probe set"
