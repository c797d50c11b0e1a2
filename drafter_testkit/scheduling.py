"""Which of the project's tests share an xdist worker: those that load the same vendor tokenizer.

A vendor tokenizer (the 248k-token Qwen3.6 BPE plus the vendor's special tokens) costs seconds to
parse in every process that loads it, and the corpus tests load one per vendor; the speculators
check over the hidden-state fixtures costs tens of seconds per process. xdist's ``loadgroup`` mode
would keep such tests on one worker, but under pytest 9 it groups nothing (it renames
``item._nodeid``, which pytest 9 no longer reads), so ``tests/conftest.py`` installs this scheduler
instead: xdist's ``loadscope`` scheduling with the scope of a test taken from :func:`group_of`.
Every other test is a scope of its own, balanced as ``load`` would.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

_PARAM = re.compile(r"^(?P<file>[^:]+)::(?P<test>[^\[]+)(?:\[(?P<param>.*)\])?$")


@lru_cache(maxsize=1)
def _vendors() -> dict[str, dict[str, str]]:
    """File -> template or vendor name -> vendor, for the two template corpora (read once, in the controller)."""
    from . import axolotl_templates as at
    from . import real_templates as rt

    out = {"tests/test_real_templates.py": {n: rt.vendor_of(n).name for n in rt.template_names()}}
    out["tests/test_real_templates.py"].update({v: v for v in rt.VENDORS})
    try:
        axolotl = {n: at.vendor_of(n).name for n in at.template_names()}
    except Exception:  # noqa: BLE001 (the wheel is absent: its tests skip, nothing to group)
        axolotl = {}
    out["tests/test_axolotl_templates.py"] = {**axolotl, **{v: v for v in at.VENDORS}}
    producers = {}
    for name, vendor in out["tests/test_real_templates.py"].items():
        producers[name] = vendor
    out["tests/test_real_producers.py"] = producers
    return out


def group_of(nodeid: str) -> str | None:
    """The group a test belongs to (None: a scope of its own)."""
    m = _PARAM.match(nodeid)
    if m is None:
        return None
    file, test, param = m.group("file"), m.group("test"), m.group("param") or ""
    if file == "tests/test_hidden_states.py" and test.startswith("test_speculators_"):
        return f"{file}::speculators"
    if file == "tests/test_families.py" and param:
        return f"{file}::{param}"
    table = _vendors().get(file)
    if table is None:
        return None
    if file == "tests/test_real_producers.py":  # producer:template[@config]
        param = param.split(":", 1)[-1].split("@", 1)[0]
    vendor = table.get(param)
    return f"{file}::{vendor}" if vendor else None


def make_scheduler(config: Any, log: Any) -> Any:
    """xdist's ``loadscope`` scheduling whose scopes are :func:`group_of`'s groups."""
    from xdist.scheduler import LoadScopeScheduling

    class VendorScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid) or nodeid

    return VendorScheduling(config, log)
