"""Keep installed modules loaded across pytester's in-process runs.

pytester snapshots ``sys.modules`` before each in-process pytest run (and each test that uses it) and
restores the snapshot afterwards, so an inner run's test modules do not leak into the next one. The
restore also drops every library the inner run imported first, while the modules imported before it
keep references to the dropped copies: transformers' lazy package keeps the ``modeling_utils`` it
loaded (and, through it, the ``kernels`` package and its Rust extension), and the next
``from_pretrained`` imports ``kernels`` again, so two ``Mode`` classes meet in one comparison
(``TypeError: unsupported operand type(s) for 'in': 'Mode' and 'Mode'``); a second torch or a
second Rust extension corrupts memory. Which test imported a library first depends on the order,
so the failure did too.

The root is the restore, not any one library: :func:`keep_installed_modules` makes the snapshot
keep what lives in the interpreter's library folders (the standard library, site-packages), and
restore the rest as before (the inner runs' own test modules, conftests, and the checkout's
packages, which tests import afresh to see what a run imports).
"""

from __future__ import annotations

import os
import sys
import sysconfig
from functools import lru_cache
from typing import Any, Callable

#: pytester's private snapshot factory and the snapshot's private predicate (pytest 8 and 9).
_TAKE = "_Pytester__take_sys_modules_snapshot"
_PRESERVE = "_SysModulesSnapshot__preserve"


def library_roots() -> tuple[str, ...]:
    """The interpreter's library folders: modules found there are installed, never a test's own."""
    paths = sysconfig.get_paths()
    return tuple(sorted({os.path.realpath(paths[k]) + os.sep for k in ("stdlib", "platstdlib", "purelib", "platlib")}))


def is_installed(name: str, roots: tuple[str, ...] | None = None) -> bool:
    """Whether the loaded module ``name`` comes from a library folder (a file, or a namespace package's path)."""
    module = sys.modules.get(name)
    if module is None:
        return False
    where = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", None) or ()), None)
    if not isinstance(where, str):
        return name in sys.builtin_module_names
    return _under(where, roots or library_roots())


@lru_cache(maxsize=None)
def _under(where: str, roots: tuple[str, ...]) -> bool:
    """``where`` resolved lies under one of ``roots`` (cached: every restore asks for thousands of modules)."""
    return os.path.realpath(where).startswith(roots)


def keep_installed_modules() -> bool:
    """Patch pytester so that its ``sys.modules`` snapshots keep installed modules; False when this pytest
    has no such snapshot (then nothing is patched, and the caller's pre-imports are the only guard)."""
    from _pytest import pytester

    take: Callable[[Any], Any] | None = getattr(pytester.Pytester, _TAKE, None)
    if take is None or getattr(take, "keeps_installed", False):
        return take is not None
    roots = library_roots()

    def take_keeping_installed(self: Any) -> Any:
        snapshot = take(self)
        own: Callable[[str], bool] | None = getattr(snapshot, _PRESERVE, None)
        setattr(snapshot, _PRESERVE, lambda name: bool(own and own(name)) or is_installed(name, roots))
        return snapshot

    take_keeping_installed.keeps_installed = True  # type: ignore[attr-defined]
    setattr(pytester.Pytester, _TAKE, take_keeping_installed)
    return True
