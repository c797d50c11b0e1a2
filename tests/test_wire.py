"""The worker -> controller encoding of contract results (xdist transport)."""

import numpy as np
import pytest

from drafter_contracts.report.reducer import merged_counts
from drafter_contracts.checks.stats import sparse_counts
from drafter_contracts.run.wire import WIRE_KEY, decode, encode, pack, unpack


def _report(when: str, props: list, outcome: str = "passed") -> pytest.TestReport:
    return pytest.TestReport("t.py::test_x[s]", ("t.py", 0, "test_x"), {}, outcome, None, when, user_properties=props)


def test_arrays_travel_as_raw_buffers_and_come_back_equal():
    counts = sparse_counts(np.array([5, 3, 5, 7, 7, 7], dtype=np.int32))
    props = [("drafter_contracts.stats", {"shard": 2, "tokens": np.int64(6), "supervised_id_counts": counts,
                                          "hist": [1, 2, 3]})]
    text, dtypes, buffers = encode(props)
    assert b"supervised_id_counts" in text and b"[3,5,7]" not in text  # the ids are not JSON numbers
    ((key, back),) = decode((text, dtypes, buffers))
    assert key == "drafter_contracts.stats" and back["tokens"] == 6 and back["hist"] == [1, 2, 3]
    assert back["supervised_id_counts"]["ids"].tolist() == [3, 5, 7]
    assert back["supervised_id_counts"]["counts"].tolist() == [1, 2, 3]


def test_properties_ride_on_the_call_report_only():
    keys, binary = frozenset({"r"}), frozenset({"h"})
    props = [("r", {"ok": True}), ("h", {"rows": b"\x00" * 8}), ("other", 1)]
    setup, call, teardown = _report("setup", []), _report("call", list(props)), _report("teardown", list(props))
    for r in (setup, call, teardown):
        pack(r, keys, binary)
    assert teardown.user_properties == [("other", 1)]
    assert [k for k, _ in call.user_properties] == ["h", "other", WIRE_KEY]
    unpack(call)
    unpack(call)  # idempotent: two controller plugins may both unpack
    assert dict(call.user_properties) == {"h": {"rows": b"\x00" * 8}, "other": 1, "r": {"ok": True}}


def test_a_failed_setup_report_keeps_its_properties():
    r = _report("setup", [("r", {"x": 1})], outcome="failed")
    pack(r, frozenset({"r"}))
    unpack(r)
    assert dict(r.user_properties) == {"r": {"x": 1}}


def test_merged_counts_sum_exactly_across_parts_and_list_inputs():
    a = sparse_counts(np.array([1, 1, 4], dtype=np.int32))
    b = {"ids": [1, 9], "counts": [10, 2]}  # a merged summary's JSON lists
    ids, counts = merged_counts([{"supervised_id_counts": a}, {"supervised_id_counts": b}])
    assert ids.tolist() == [1, 4, 9] and counts.tolist() == [12, 1, 2]
    assert merged_counts([{"supervised_id_counts": None}]) is None
    # Ids out of order or repeated (not what a shard sends, but a hand-edited part may) still add up.
    c = {"ids": [9, 1, 9], "counts": [1, 1, 1]}
    ids, counts = merged_counts([{"supervised_id_counts": a}, {"supervised_id_counts": c}])
    assert ids.tolist() == [1, 4, 9] and counts.tolist() == [3, 1, 2]


def _shard_stats(shard: int, **extra) -> dict:
    return {"shard": shard, "rows": 1, "rows_checked": 1, "rows_excluded": 0, "tokens": 1, "rows_at_max_len": 0,
            "seq_len_min": 1, "seq_len_max": 1, "supervised_tokens": 1, **extra}


def test_recorder_sums_id_counts_as_shards_arrive_and_once_per_shard():
    from drafter_contracts.report.reducer import Reducer
    from drafter_contracts.results import ShardReport

    rec = Reducer()
    for shard, ids in ((0, [5, 5, 9]), (1, [9, 2]), (1, [9, 2])):  # shard 1 reported twice (a re-run)
        stats = _shard_stats(shard, supervised_id_counts=sparse_counts(np.array(ids, dtype=np.int32)))
        rec.add(ShardReport(shard, [], stats))
    ids, counts = rec.supervised_counts()
    assert ids.tolist() == [2, 5, 9] and counts.tolist() == [1, 2, 2]
    assert all("supervised_id_counts" not in s for s in rec.stats.values())  # not kept per shard
    rec.add(ShardReport(2, [], _shard_stats(2)))  # a shard without loss_mask
    assert rec.supervised_counts() is None


def test_a_shard_report_travels_whole():
    """What a shard's test sends: results, stats with sparse counts, row hashes; back equal, arrays as arrays."""
    from drafter_contracts.results import ShardReport
    from drafter_contracts.run.wire import decode_report, encode_report

    counts = sparse_counts(np.array([4, 4, 6], dtype=np.int32))
    hashes = (np.array([10, 11], np.int64), np.array([2**63 + 5, 7], np.uint64))
    rep = ShardReport(3, [{"check": "x", "rows_checked": 2}], _shard_stats(3, supervised_id_counts=counts),
                      {"duplicate_rows": hashes}, None)
    text, dtypes, buffers = encode_report(rep)
    assert b"9223372036854775813" not in text  # the hashes are raw buffers, not JSON numbers
    back = decode_report((text, dtypes, buffers))
    assert (back.shard, back.results, back.unread) == (3, rep.results, None)
    assert back.stats["supervised_id_counts"]["ids"].tolist() == [4, 6]
    rows, sums = back.partials["duplicate_rows"]
    assert rows.tolist() == [10, 11] and sums.dtype == np.uint64 and sums.tolist() == [2**63 + 5, 7]
