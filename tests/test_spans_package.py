"""``learn/`` holds the template learning (its probe sets in one module), and the oracle's verification is a
typed record written to summary.json in the cached document's form."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from drafter_contracts.spans import oracle
from drafter_contracts.spans.oracle import Verification

SPANS = Path(oracle.__file__).parent


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
