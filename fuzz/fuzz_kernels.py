"""Coverage-guided fuzzing (atheris) of the compiled kernels through their checked wrappers.

    python fuzz/fuzz_kernels.py -atheris_runs=200000       # or -max_total_time=120
    .ci/sanitize                                           # the same against the ASan/UBSan build

Each input becomes ids (int32 or int64, any value), a mask (any byte), offsets (any
values, sorted or not) and a few parameters, and drives ``kernels.label_chatml`` and
``kernels.token_pass`` (the two kernels every shard runs) plus ``row_hash_sums``. A
wrapper may refuse an input (``ValueError``/``TypeError``, ``InvalidBuffers`` above all
for offsets outside the buffers or decreasing): that is the point of the wrappers. An
input it accepts must run without a sanitizer report or a crash, and give exactly what
the numpy references in ``kernels_numpy`` give on the same input. Anything else stops
the fuzzer with the input saved (atheris writes ``crash-*``).
"""

from __future__ import annotations

import sys

import atheris
import numpy as np
import pyarrow  # noqa: F401  (imported uninstrumented: coverage is wanted for the wrappers only)

with atheris.instrument_imports(include=["drafter_contracts"]):
    from drafter_contracts import kernels, kernels_numpy

N_IDS = 96  # the labeller's id tables cover 0..95; ids beyond (or negative) exercise the clipping
START, END, NEWLINE, THINK, THINK_END, CALL, CALL_END = 90, 91, 10, 92, 93, 94, 95
ROLE_OF_ID = np.full(N_IDS, 12, dtype=np.uint8)  # UNKNOWN_ROLE
ROLE_OF_ID[[20, 21, 22, 23, 24]] = [2, 3, 5, 4, 2]  # system, user, assistant, tool, developer
NEWLINE_LEAD = np.zeros(N_IDS, dtype=bool)
NEWLINE_LEAD[[10, 11, 12]] = True
ALPHABET = [START, END, NEWLINE, THINK, THINK_END, CALL, CALL_END, 20, 21, 22, 23, 24, 11, 12, 30, 31, -1, 200, 2**31 - 1]


def _draw(data: bytes):
    fdp = atheris.FuzzedDataProvider(data)
    n = fdp.ConsumeIntInRange(0, 300)
    wide = fdp.ConsumeBool()
    if fdp.ConsumeBool():  # marker soup, where the labeller's rules live
        picks = fdp.ConsumeIntListInRange(n, 0, len(ALPHABET) - 1)
        ids = np.array([ALPHABET[p] for p in picks], dtype=np.int64)
    else:
        ids = np.array(fdp.ConsumeIntListInRange(n, -2**31, 2**31 - 1), dtype=np.int64)
    ids = ids.astype(np.int64 if wide else np.int32)
    mask = np.frombuffer(fdp.ConsumeBytes(n).ljust(n, b"\0"), dtype=np.uint8)
    if fdp.ConsumeBool():  # a bool mask, as the engine passes; else any byte
        mask = mask & np.uint8(1)
    k = fdp.ConsumeIntInRange(0, 12)
    offsets = np.array(fdp.ConsumeIntListInRange(k, -3, n + 3), dtype=np.int64)
    if fdp.ConsumeBool():
        offsets = np.sort(offsets)
    if fdp.ConsumeBool() and len(offsets):
        offsets[0], offsets[-1] = 0, n
    return fdp, ids, np.ascontiguousarray(mask), offsets


def _label(fn, ids, offsets, max_len):
    n = len(ids)
    outs = [np.zeros(n, np.uint8), np.zeros(n, bool), np.zeros(n, np.uint8), np.zeros(n, np.int64),
            np.zeros(n, np.uint8), np.zeros(n, bool), np.zeros(n // 3 + 1, np.int64), np.zeros(2, np.int64)]
    k = fn(ids, offsets, START, END, NEWLINE, ROLE_OF_ID, NEWLINE_LEAD, THINK, THINK_END, True, CALL, CALL_END, True,
           max_len, 90, *outs)
    return k, outs


def TestOneInput(data: bytes) -> None:
    fdp, ids, mask, offsets = _draw(data)
    max_len = fdp.ConsumeIntInRange(1, 64)
    try:
        k, outs = _label(kernels.label_chatml, ids, offsets, max_len)
    except (ValueError, TypeError):
        pass  # refused: C never saw the input
    else:
        want_k, want = _label(kernels_numpy.label_chatml, ids, offsets, max_len)
        a, b = int(offsets[0]), int(offsets[-1])
        assert k == want_k, (k, want_k)
        for got, ref in zip(outs[:3], want[:3]):
            assert np.array_equal(got[a:b], ref[a:b])
        for got, ref in zip(outs[3:6], want[3:6]):
            assert np.array_equal(got[:k], ref[:k])
        assert np.array_equal(outs[7], want[7]) and np.array_equal(outs[6][:outs[7][0]], want[6][:want[7][0]])
    limit = fdp.ConsumeIntInRange(1, 400)
    n_rows = max(len(offsets) - 1, 0)

    def token_pass(fn):
        outs = [np.zeros(len(ids) + 1, np.int32), np.zeros(limit, np.int32), np.zeros(n_rows, np.uint64),
                np.zeros(1, np.int64)]
        fn(ids, mask, offsets, 0x9E3779B97F4A7C15, limit, *outs)
        return outs

    try:
        got = token_pass(kernels.token_pass)
    except (ValueError, TypeError):
        pass
    else:
        for g, w in zip(got, token_pass(kernels_numpy.token_pass)):
            assert np.array_equal(g, w)
    try:
        sums = np.zeros(n_rows, np.uint64)
        kernels.row_hash_sums(ids, mask, True, offsets, 12345, sums)
    except (ValueError, TypeError):
        pass
    else:
        want_sums = np.zeros(n_rows, np.uint64)
        kernels_numpy.row_hash_sums(ids, mask, True, offsets, 12345, want_sums)
        assert np.array_equal(sums, want_sums)


def main() -> None:
    assert kernels.backend()["backend"] == "c", "fuzzing the kernels needs the compiled library"
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
