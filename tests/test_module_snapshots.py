"""In-process pytest runs keep the installed modules they imported first (drafter_testkit/module_snapshots.py).

Without it a library first imported inside an inner run is dropped from ``sys.modules`` afterwards
while the modules loaded before it keep that copy, and the next import makes a second one: the
order-dependent ``'Mode' and 'Mode'`` failure of ``kernels`` under transformers' ``from_pretrained``.
"""

from __future__ import annotations

import sys

import pytest

from drafter_testkit.module_snapshots import is_installed, library_roots

#: Standard-library modules nothing in the suite imports; the test takes the first one not yet loaded.
UNUSED_STDLIB = ("colorsys", "tabnanny", "sched", "wave", "netrc", "pyclbr", "symtable", "mailbox", "xdrlib")


class _SeenAtTeardown:
    """A plugin of the inner run: the module object the inner test imported, as the inner run left it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.module = None

    def pytest_runtest_teardown(self) -> None:
        self.module = sys.modules.get(self.name)


def test_a_library_first_imported_by_an_inner_run_is_the_same_module_afterwards(pytester: pytest.Pytester) -> None:
    name = next((n for n in UNUSED_STDLIB if n not in sys.modules), None)
    assert name is not None, f"every candidate of {UNUSED_STDLIB} is already loaded: add one nothing imports"
    pytester.makepyfile(test_inner=f"def test_inner():\n    import {name}\n")
    seen = _SeenAtTeardown(name)
    pytester.inline_run("-p", "no:cacheprovider", "-p", "no:randomly", plugins=[seen]).assertoutcome(passed=1)
    assert seen.module is not None
    assert sys.modules.get(name) is seen.module, f"{name} was dropped after the in-process run: its next import is a copy"
    assert "test_inner" not in sys.modules, "the inner run's own test module must still be dropped"


def test_installed_means_a_library_folder() -> None:
    import _pytest
    import numpy

    assert is_installed("numpy") and is_installed("_pytest") and is_installed("os") and is_installed("sys")
    assert not is_installed("drafter_testkit.module_snapshots"), "the checkout's own packages are re-imported afresh"
    assert not is_installed("not.a.loaded.module")
    assert numpy.__file__ and _pytest.__file__ and library_roots()
