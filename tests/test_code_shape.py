"""The package's code stays readable in one screen: functions under 60 lines, lines under 121 characters.

A function that outgrows 60 lines is split at its own phases; the one exception is a kernel's numpy
statement, which reads best whole beside its C twin. :data:`WHOLE` lists those exceptions exactly:
a new long function fails, and one no longer long must leave the list.
"""

from __future__ import annotations

import ast
from pathlib import Path

from test_layers import MODULES, SRC

MAX_FUNCTION_LINES = 59
MAX_LINE = 120
#: (module path relative to the package, function) -> why it stays whole.
WHOLE: dict[tuple[str, str], str] = {
    ("spans/generic.py", "label"): "the labeller's numpy statement, held line by line to kernels/_labeller.c",
}


def _functions(path: Path) -> list[tuple[str, int, int]]:
    """(name, first line, length) of every function and method in the file, nested ones included."""
    tree = ast.parse(path.read_text("utf-8"))
    return [(n.name, n.lineno, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_no_function_is_longer_than_a_screen() -> None:
    long, seen = [], set()
    for path in MODULES:
        rel = str(path.relative_to(SRC))
        for name, line, length in _functions(path):
            if length <= MAX_FUNCTION_LINES:
                continue
            if (rel, name) in WHOLE:
                seen.add((rel, name))
            else:
                long.append(f"{rel}:{line} {name}: {length} lines")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (split them at their phases):\n" + "\n".join(long)
    assert seen == set(WHOLE), f"no longer long, remove from WHOLE: {sorted(set(WHOLE) - seen)}"


def test_no_line_is_wider_than_120_characters() -> None:
    wide = [f"{path.relative_to(SRC)}:{n}: {len(text)} characters" for path in MODULES
            for n, text in enumerate(path.read_text("utf-8").splitlines(), 1) if len(text) > MAX_LINE]
    assert not wide, f"lines over {MAX_LINE} characters (rewrap them):\n" + "\n".join(wide)
