"""How many pytest-xdist workers a dataset run starts: never more than it has shards.

A worker imports numpy, pyarrow and the tokenizer tables before its first test; one with no
shard to check only adds that cost, and a single shard is checked fastest in this process.
``-n auto`` asks the ``pytest_xdist_auto_num_workers`` hook (``run/options.py``); an explicit
``-n N`` has already become N ``popen`` gateways by then, so it is capped here, before xdist
starts them, and the run's header says so.
"""

from __future__ import annotations

import os

import pytest

#: Where the cap's note waits for the run's header (``run.plugin.pytest_report_header``).
NOTE_KEY = pytest.StashKey[str]()


def cpus() -> int:
    """The cores this process may use (``PYTEST_XDIST_AUTO_NUM_WORKERS`` overrides, as in xdist)."""
    env = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "")
    if env.isdigit():
        return int(env)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def auto_workers(shards: int) -> int:
    """``-n auto``: one worker per shard up to the cores; none (in-process) for one shard."""
    return 0 if shards <= 1 else min(cpus(), shards)


def cap_explicit(config: pytest.Config, shards: int) -> str | None:
    """Lower an explicit ``-n N`` to the shard count (0, in-process, for one shard); return the note.

    Only local workers (``popen`` gateways) are capped: ``--tx`` specs naming other machines
    are the user's plan and stay as given.
    """
    opt = config.option
    tx = list(getattr(opt, "tx", None) or ())
    if not tx or any(spec != "popen" for spec in tx) or getattr(opt, "collectonly", False):
        return None
    keep = 0 if shards <= 1 else min(len(tx), shards)
    if keep == len(tx):
        return None
    opt.tx, opt.numprocesses = ["popen"] * keep, keep
    if keep == 0:
        opt.dist = "no"
    where = "checked in this process" if keep == 0 else f"{keep} workers started"
    return (f"drafter-contracts: -n {len(tx)} capped: {shards} shard{'' if shards == 1 else 's'} to check, "
            f"{where} (never more workers than shards)")
