"""What a run covered: every shard it set out to check, on files that did not change meanwhile.

A pytest-xdist worker killed mid-shard (the OOM killer's SIGKILL) takes that shard's
results with it: pytest reports the crash, but every contract's own record only holds
the shards that reported, so a report built from them alone reads as a clean pass over
fewer rows. The controller therefore keeps track of which shard tests were collected to
run, which sent their results, and why the others did not (a crash report, a test
error, a run that stopped early), and of shards a worker refused to read (damaged
buffers, a row over ``max_shard_tokens``, files changed under it). Two verdicts come of
it, both decided at the controller and sent through pytest's report hooks:

* ``all_shards_checked``: fails, naming each unchecked shard, its rows and why; the
  per-row contracts are then ``incomplete`` in every report, never ``pass``;
* ``dataset_unchanged``: the files (size, mtime, inode) and state.json's ``_fingerprint``
  at the end are those of the start; a dataset rewritten during the run fails.

Shards left out on purpose (``-k``, ``--split``) are not collected, so they are not
counted here; the figures still say which shards they cover.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from .declare import Scope, Spec, register
from ..dataset.columns import Shard
from .integrity import file_state, state_changes
from ..results import CheckResult

SHARDS_CHECK = "all_shards_checked"
FILES_CHECK = "dataset_unchanged"
_SHARD_PARAM = re.compile(r"\[(shard-\d+\[\d+:\d+\])\]$")


class Coverage:
    """Controller-side record of the shard tests: expected, arrived, refused, lost (and why)."""

    def __init__(self, shards: list[Shard], dataset_checks: Iterable[str] = ()) -> None:
        self.dataset_checks = frozenset(dataset_checks)  # contracts with a test of their own (test_schema, ...)
        self.tests_expected: dict[str, str] = {}  # check -> nodeid, collected to run
        self.tests_arrived: set[str] = set()
        self.tests_lost: dict[str, str] = {}
        self.by_id = {s.id: s for s in shards}
        self.by_index = {s.index: s for s in shards}
        self.expected: set[int] | None = None  # None until collection says which shard tests will run
        self.arrived: set[int] = set()
        self.unread: dict[int, str] = {}  # shard -> why its worker did not read it
        self.lost: dict[int, str] = {}  # shard -> what the report that replaced its results said

    def shard_of(self, nodeid: str) -> Shard | None:
        m = _SHARD_PARAM.search(nodeid)
        return self.by_id.get(m.group(1)) if m else None

    def check_of(self, nodeid: str) -> str | None:
        """The dataset-level contract a test node runs (``...::test_schema`` -> ``schema``), if any."""
        name = nodeid.rsplit("::", 1)[-1].removeprefix("test_")
        return name if "::" in nodeid and name in self.dataset_checks else None

    def expect(self, nodeids: Iterable[str]) -> None:
        """Tests collected to run (xdist: every worker collects the same ones)."""
        nodeids = list(nodeids)
        found = {s.index for s in map(self.shard_of, nodeids) if s is not None}
        self.expected = found if self.expected is None else self.expected | found
        for nodeid in nodeids:
            check = self.check_of(nodeid)
            if check is not None:
                self.tests_expected[check] = nodeid

    def note(self, nodeid: str, when: str, outcome: str, has_results: bool, unread: str | None,
             longrepr: str | None) -> None:
        """One test report: results arrived, or (a crash's ``???`` report, a failed setup) why they did not."""
        shard = self.shard_of(nodeid)
        if shard is None:
            self._note_test(nodeid, when, outcome, has_results, longrepr)
            return
        if has_results:
            self.arrived.add(shard.index)
            self.lost.pop(shard.index, None)
            if unread:
                self.unread[shard.index] = unread
            return
        if when == "???" or (outcome == "failed" and when in ("setup", "call")):
            first = (longrepr or "").strip().splitlines()
            text = first[0] if first else "its test failed before reporting"
            if when == "???":
                self.lost[shard.index] = f"its worker died while checking it ({text}; killed by the OOM killer?)"
            elif shard.index not in self.arrived:
                self.lost[shard.index] = f"its test errored before reporting ({text})"

    def _note_test(self, nodeid: str, when: str, outcome: str, has_results: bool, longrepr: str | None) -> None:
        check = self.check_of(nodeid)
        if check is None:
            return
        if has_results:
            self.tests_arrived.add(check)
            self.tests_lost.pop(check, None)
        elif when == "???":
            first = (longrepr or "").strip().splitlines()
            self.tests_lost[check] = (f"its worker died while running it ({first[0] if first else 'crashed'}; "
                                      "killed by the OOM killer?)")
        elif outcome == "failed" and when in ("setup", "call") and check not in self.tests_arrived:
            first = (longrepr or "").strip().splitlines()
            self.tests_lost[check] = f"its test errored before reporting ({first[0] if first else 'no message'})"

    def unreported(self) -> list[dict[str, Any]]:
        """Dataset-level contract tests collected to run that sent no verdict, and why."""
        return [{"check": check, "test": nodeid,
                 "reason": self.tests_lost.get(check, "no result arrived (the run stopped before it)")}
                for check, nodeid in sorted(self.tests_expected.items()) if check not in self.tests_arrived]

    def unchecked(self) -> list[dict[str, Any]]:
        """Every expected shard without checked results, with its rows and why, in shard order."""
        expected = self.expected if self.expected is not None else self.arrived | set(self.lost)
        out = []
        for index in sorted(expected):
            s = self.by_index[index]
            if s.index in self.unread:
                reason = f"not read: {self.unread[s.index]}"
            elif s.index not in self.arrived:
                reason = self.lost.get(s.index, "no result arrived (the run stopped before it, or its test was "
                                                "interrupted)")
            else:
                continue
            out.append({"shard": s.id, "index": s.index, "rows": [s.start, s.stop], "reason": reason})
        return out

    def result(self) -> CheckResult:
        """``all_shards_checked``: every shard collected to run sent checked results, and every
        dataset-level contract test its verdict."""
        missing = self.unchecked()
        silent = self.unreported()
        expected = self.expected if self.expected is not None else self.arrived | set(self.lost)
        rows_expected = sum(self.by_index[i].rows for i in expected)
        rows_missing = sum(u["rows"][1] - u["rows"][0] for u in missing)
        message = ""
        if missing:
            by_reason: dict[str, list[str]] = {}
            for u in missing:
                by_reason.setdefault(u["reason"], []).append(u["shard"])
            parts = "; ".join(", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "") + f": {reason}"
                              for reason, ids in list(by_reason.items())[:10])
            more = f"; … {len(by_reason) - 10} more reasons" if len(by_reason) > 10 else ""
            lost = [u["shard"] for u in missing if u["index"] not in self.arrived]
            again = f"; re-run the lost shards (one alone: -k {lost[0].split('[')[0]})" if lost else ""
            message = (f"{len(missing)} of {len(expected)} shards ({rows_missing:,} of {rows_expected:,} rows) were "
                       f"not checked: {parts}{more}. Every per-row contract is incomplete{again}")
        if silent:
            tests = "; ".join(f"{u['test'].rsplit('::', 1)[-1]}: {u['reason']}" for u in silent)
            message = (message + ". " if message else "") + (
                f"{len(silent)} contract test(s) sent no verdict: {tests}; those contracts are incomplete, re-run them")
        return CheckResult(SHARDS_CHECK, "dataset", rows_checked=rows_expected - rows_missing,
                           rows_violating=rows_missing, message=message)


def unchanged_result(before: dict[str, Any], after: dict[str, Any], num_rows: int) -> CheckResult:
    """``dataset_unchanged``: the files at the end of the run are the files of its start."""
    changed = state_changes(before, after)
    message = ""
    if changed:
        message = ("the dataset changed while it was checked: " + "; ".join(changed)
                   + ". Verdicts mix old and new data; re-run on a dataset nothing writes to (copy it first)")
    return CheckResult(FILES_CHECK, "dataset", rows_checked=num_rows, message=message)


def _unchanged(run) -> CheckResult:
    e = run.engine
    return unchanged_result(e.files_at_start, file_state(e.dataset.path, e.dataset.files),
                            sum(s.rows for s in e.shards))


register(Spec(SHARDS_CHECK, Scope.WHOLE, "every shard collected to run sent checked results", needs=frozenset(),
              per_part=True, reduce=lambda run: run.coverage.result()))
register(Spec(FILES_CHECK, Scope.WHOLE, "the dataset's files did not change during the run", needs=frozenset(),
              per_part=True, reduce=_unchanged))
