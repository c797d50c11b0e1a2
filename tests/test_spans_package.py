"""spans/ has one front door: its ``__init__`` exports the labels, the turns and the oracle without loading
anything, ``learn/`` holds the template learning (its probe sets in one module), and the oracle's verification
is a typed record written to summary.json in the cached document's form."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import drafter_contracts.spans as spans
import drafter_contracts.spans.learn as learn
from drafter_contracts.spans.oracle import Verification

SPANS = Path(spans.__file__).parent


def test_importing_the_package_loads_none_of_its_modules() -> None:
    code = ("import json, sys; import drafter_contracts.spans, drafter_contracts.spans.learn; "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('drafter_contracts.', 'transformers')))))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                       text=True).stdout)
    assert loaded == ["drafter_contracts.spans", "drafter_contracts.spans.learn"]


@pytest.mark.parametrize("package", [spans, learn], ids=["spans", "learn"])
def test_every_exported_name_is_its_defining_modules(package: object) -> None:
    for name in package.__all__:
        module = importlib.import_module(package._EXPORTS[name], package.__name__)
        assert getattr(package, name) is getattr(module, name), name
    with pytest.raises(AttributeError):
        package.no_such_name  # noqa: B018


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


CHECKED = {"ok": True, "renderings": 40, "mismatches": 0, "first": None, "limits": ["a limit"],
           "skipped": ["x: the template rejects it (no)"],
           "relaxations": [{"name": "free-tool-call", "allows": "a call anywhere", "needed_by": "tool-call: ..."}],
           "turned_off": ["joins-blocks"]}
TAGS = {"keys": {"content": True, "optional": ["reasoning"]}, "note": "from the template's generation tags"}


@pytest.mark.parametrize(("verification", "tags", "expected"), [
    (CHECKED, TAGS, {**CHECKED, "tags": TAGS}),
    (CHECKED, None, {**CHECKED, "tags": None}),
    ({}, None, {"tags": None}),
    ({}, {"error": "tags enclose user text"}, {"tags": {"error": "tags enclose user text"}}),
], ids=["verified-with-tags", "verified-without-tags", "not-verified", "tags-refused"])
def test_the_verification_record_writes_the_cached_documents_form(verification: dict, tags: dict | None,
                                                                  expected: dict) -> None:
    record = Verification.from_doc(verification, tags)
    assert json.dumps(record.to_dict()) == json.dumps(expected)  # same keys, same order, same values
    assert record.checked == bool(verification) and record.tags == tags


def test_an_oracle_built_for_a_given_profile_writes_an_empty_verification() -> None:
    assert Verification().to_dict() == {}
