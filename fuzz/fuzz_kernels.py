"""Coverage-guided fuzzing (atheris) of the compiled kernels through their checked wrappers.

    python fuzz/fuzz_kernels.py -atheris_runs=200000       # or -max_total_time=120
    .ci/sanitize                                           # the same against the ASan/UBSan build

Each input becomes ids (int32 or int64, any value), a mask (any byte), offsets (any
values, sorted or not), a template profile (headers with cores, tails, ends, untils,
free tokens and reopening roles; sub-spans with stop tokens; BOS, after-end and EOS ids;
all over a small id alphabet) and a few parameters, and drives the span labeller
(``spans.kernel.label``, the checked wrapper of ``kernels/_labeller.c``'s ``label_profile``) and
``kernels.compiled.token_pass`` (the two kernels every shard runs) plus ``row_hash_sums``. A
wrapper may refuse an input (``ValueError``/``TypeError``, ``InvalidBuffers`` above all
for offsets outside the buffers or decreasing): that is the point of the wrappers. An
input it accepts must run without a sanitizer report or a crash, and give exactly what
the numpy references give on the same input (``spans.generic.label``; ``kernels_numpy``).
Anything else stops the fuzzer with the input saved (atheris writes ``crash-*``).
"""

from __future__ import annotations

import sys

import atheris
import numpy as np
import pyarrow  # noqa: F401  (imported uninstrumented: coverage is wanted for the wrappers only)

with atheris.instrument_imports(include=["drafter_contracts"]):
    from drafter_contracts.kernels import compiled as kernels, numpy_loops as kernels_numpy
    from drafter_contracts.spans import generic, kernel
    from drafter_contracts.spans.labels import Role
    from drafter_contracts.spans.profile import CompiledProfile, Header, SubSpan, TemplateProfile

N_IDS = 96  # the profiles' ids are 80..95 (markers) and 0..15 (words, newlines); ids beyond exercise the clipping
MARKERS = list(range(80, 96))
WORDS = list(range(0, 16))
NEWLINE_LEAD = np.zeros(N_IDS, dtype=bool)
NEWLINE_LEAD[[10, 11, 12]] = True  # "\n", "\n\n", "\n\n\n"
ALPHABET = MARKERS + WORDS + [-1, 200, 2**31 - 1]
HEADER_ROLES = [Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL, Role.OUTSIDE]
BODY_ROLES = [Role.ASSISTANT, Role.REASONING, Role.TOOL_CALL, Role.USER, Role.TOOL]


def _profile(fdp) -> CompiledProfile | None:
    """A template profile drawn from the input; None when the draw is not a valid profile."""
    def pick(seq):
        return seq[fdp.ConsumeIntInRange(0, len(seq) - 1)]

    def maybe(seq):
        return pick(seq) if fdp.ConsumeBool() else None

    headers = []
    for _ in range(fdp.ConsumeIntInRange(1, 5)):
        core = (pick(MARKERS[:4]), *[pick(MARKERS + WORDS) for _ in range(fdp.ConsumeIntInRange(0, 2))])
        ends = tuple(sorted({pick(MARKERS[4:8]) for _ in range(fdp.ConsumeIntInRange(0, 2))}))
        until = maybe(MARKERS[8:10] + WORDS[:2])
        headers.append(Header(pick(HEADER_ROLES), core, maybe([10, 11, 5]), ends, until, maybe(BODY_ROLES),
                              tuple({pick(HEADER_ROLES) for _ in range(fdp.ConsumeIntInRange(0, 2))}),
                              maybe(BODY_ROLES) if until is not None else None))
    subs = []
    for _ in range(fdp.ConsumeIntInRange(0, 4)):
        subs.append(SubSpan(pick(MARKERS[10:16]), maybe(MARKERS[10:16]), pick(BODY_ROLES),
                            tuple({pick(BODY_ROLES) for _ in range(fdp.ConsumeIntInRange(1, 2))}), fdp.ConsumeBool()))
    bos = tuple(pick(MARKERS[8:12]) for _ in range(fdp.ConsumeIntInRange(0, 2)))
    profile = TemplateProfile("fuzz", tuple(headers), after_end=tuple({pick([10, 11, *MARKERS[4:8]])
                                                                       for _ in range(fdp.ConsumeIntInRange(0, 2))}),
                              bos=bos, bos_role=maybe(HEADER_ROLES) if bos else None, subs=tuple(subs),
                              eos=tuple({pick(MARKERS[12:16]) for _ in range(fdp.ConsumeIntInRange(0, 1))}),
                              short_tails=(10,) if fdp.ConsumeBool() else ())
    try:
        return CompiledProfile(profile, NEWLINE_LEAD)
    except ValueError:  # an id that both opens and closes turns: CompiledProfile refuses the profile
        return None


def _draw(data: bytes):
    fdp = atheris.FuzzedDataProvider(data)
    n = fdp.ConsumeIntInRange(0, 300)
    wide = fdp.ConsumeBool()
    mode = fdp.ConsumeIntInRange(0, 2)
    if mode == 0:  # marker soup, where the labeller's rules live
        picks = fdp.ConsumeIntListInRange(n, 0, len(ALPHABET) - 1)
        ids = np.array([ALPHABET[p] for p in picks], dtype=np.int64)
    elif mode == 1:  # mostly words, a marker now and then: runs longer than the labeller's 16-id blocks
        picks = fdp.ConsumeIntListInRange(n, 0, 8 * len(WORDS) + len(ALPHABET) - 1)
        ids = np.array([WORDS[p % len(WORDS)] if p < 8 * len(WORDS) else ALPHABET[p - 8 * len(WORDS)]
                        for p in picks], dtype=np.int64)
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


def TestOneInput(data: bytes) -> None:
    fdp, ids, mask, offsets = _draw(data)
    max_len = fdp.ConsumeIntInRange(1, 64)
    cp = _profile(fdp)
    if cp is not None:
        try:
            got = kernel.label(ids, offsets, cp, max_len)
        except (ValueError, TypeError):
            pass  # refused: C never saw the input
        else:
            want = generic.label(ids, offsets, cp, max_len)
            for field in ("role", "boundary", "problem"):
                assert np.array_equal(getattr(got, field), getattr(want, field)), field
            assert np.array_equal(got.boundary_at, np.flatnonzero(want.boundary))
            assert got.problem_count == int(np.count_nonzero(want.problem))
            change = np.ones(len(ids), dtype=bool)
            change[1:] = want.role[1:] != want.role[:-1]
            change[offsets[:-1][np.diff(offsets) > 0]] = True
            assert np.array_equal(got.run_starts, np.flatnonzero(change))
            assert np.array_equal(got.run_roles, want.role[got.run_starts])
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
