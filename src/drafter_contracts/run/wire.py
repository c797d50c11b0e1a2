"""How a shard's report travels to the controller: its ``ShardReport``, encoded once.

A shard's test returns one record (``results.ShardReport``: results, mergeable stats,
the row hashes of the duplicate search); :func:`encode_report` turns exactly that into
(JSON bytes, dtypes, raw buffers) and :func:`decode_report` turns it back, with or
without xdist, so ``-n 0`` and ``-n N`` take the same path. Why not plain
``user_properties``: pytest-xdist sends them through execnet's serializer, which walks
every list element in Python, and a shard's stats hold tens of thousands of sparse id
counts (7 of 18 s of a worker on 100 K rows before the encoding). Encoded with the C
JSON encoder they are one ``bytes`` value that execnet copies as a block; numpy arrays
(sparse id counts, row hashes) go beside it as raw buffers, not as JSON numbers. pytest
repeats ``user_properties`` on the setup, call and teardown reports: :class:`WirePacker`
keeps the encoded report on the call report only.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from ..results import RowViolations, ShardReport

#: The key of the encoded blob in ``report.user_properties``.
WIRE_KEY = "drafter_contracts.run.wire"
_ARRAY = "__drafter_contracts_array__"


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} cannot go into a contract result")


def _lift_arrays(value: Any, arrays: list[np.ndarray]) -> Any:
    """A copy of ``value`` with every numpy array replaced by a reference into ``arrays``."""
    if isinstance(value, np.ndarray):
        arrays.append(np.ascontiguousarray(value))
        return {_ARRAY: len(arrays) - 1}
    if isinstance(value, dict):
        return {k: _lift_arrays(v, arrays) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (dict, list, tuple, np.ndarray)):
        return [_lift_arrays(v, arrays) for v in value]
    return value


def _drop_arrays(value: Any, arrays: list[np.ndarray]) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and _ARRAY in value:
            return arrays[value[_ARRAY]]
        return {k: _drop_arrays(v, arrays) for k, v in value.items()}
    if isinstance(value, list) and value and isinstance(value[0], (dict, list)):
        return [_drop_arrays(v, arrays) for v in value]
    return value


def encode(props: list[tuple[str, Any]]) -> tuple[bytes, list[str], list[bytes]]:
    """Properties as (JSON, dtypes, raw buffers): numpy arrays (sparse id counts) travel as raw bytes."""
    arrays: list[np.ndarray] = []
    doc = [[k, _lift_arrays(v, arrays)] for k, v in props]
    return (json.dumps(doc, separators=(",", ":"), default=_plain).encode(),
            [a.dtype.str for a in arrays], [a.tobytes() for a in arrays])


def decode(blob: tuple[bytes, list[str], list[bytes]]) -> list[tuple[str, Any]]:
    text, dtypes, buffers = blob
    arrays = [np.frombuffer(b, dtype=np.dtype(d)) for d, b in zip(dtypes, buffers)]
    return [(k, _drop_arrays(v, arrays)) for k, v in json.loads(text)]


def encode_report(report: ShardReport) -> tuple[bytes, list[str], list[bytes]]:
    """A shard's whole report as (JSON, dtypes, raw buffers); its violating rows (``RowViolations``: rows,
    positions, reason codes, token ids) go as four raw buffers per contract, whatever their number."""
    return encode([("report", {"shard": report.shard, "results": report.results, "stats": report.stats,
                               "partials": report.partials, "unread": report.unread,
                               "violations": [v.to_wire() for v in report.violations]})])


def decode_report(blob: tuple[bytes, list[str], list[bytes]]) -> ShardReport:
    ((_, doc),) = decode(tuple(blob))
    return ShardReport(int(doc["shard"]), doc["results"], doc["stats"], doc["partials"] or {}, doc["unread"],
                       [RowViolations.from_wire(v) for v in doc.get("violations") or []])


def pack(report: pytest.TestReport, keys: frozenset[str], binary: frozenset[str] = frozenset()) -> None:
    """Worker side: properties named in ``keys`` go into one JSON blob, those in ``binary`` (already
    bytes) as they are; both only on the report the controller records, none on the others."""
    ours = [(k, v) for k, v in report.user_properties if k in keys]
    if not ours and not any(k in binary for k, _ in report.user_properties):
        return
    recorded = report.when == "call" or (report.when == "setup" and report.outcome != "passed")
    kept = [(k, v) for k, v in report.user_properties if k not in keys and (recorded or k not in binary)]
    if recorded and ours:
        kept.append((WIRE_KEY, encode(ours)))
    report.user_properties = kept


def unpack(report: pytest.TestReport) -> None:
    """Controller side: restore the properties a worker packed (idempotent; a no-op without xdist)."""
    props = report.user_properties
    if not any(k == WIRE_KEY for k, _ in props):
        return
    out: list[tuple[str, Any]] = []
    for key, value in props:
        if key == WIRE_KEY:
            out.extend(decode(value))
        else:
            out.append((key, value))
    report.user_properties = out


class WirePacker:
    """Registered on xdist workers only: packs each report as pytest makes it."""

    def __init__(self, keys: frozenset[str], binary: frozenset[str] = frozenset()) -> None:
        self.keys, self.binary = keys, binary

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Any:
        report = yield
        pack(report, self.keys, self.binary)
        return report
