"""The compiled kernels against the numpy they stand for, and their constants against the enums."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from drafter_contracts import kernels
from drafter_contracts.report.profile import DENSE_COUNT_LIMIT, sparse_counts, supervised_counts
from drafter_contracts.spans.labels import Role, TurnProblem


def test_codes_mirror_the_enums():
    """The kernels compile role and problem codes as plain ints: each must equal its enum member."""
    for name in ("OUTSIDE", "HEADER", "ASSISTANT", "REASONING", "TOOL_CALL", "ASSISTANT_END", "END",
                 "AFTER_ASSISTANT_END", "INJECTED", "UNKNOWN_ROLE"):
        assert getattr(kernels, name) == Role[name], name
    for name in ("NO_LEADING_HEADER", "HEADER_IN_OPEN_TURN", "STRAY_END", "MALFORMED_HEADER",
                 "TEXT_OUTSIDE_TURN", "UNCLOSED_TURN"):
        assert getattr(kernels, name) == TurnProblem[name], name
    assert kernels.UNKNOWN_ROLE_PROBLEM == TurnProblem.UNKNOWN_ROLE


@given(hnp.arrays(np.int64, st.integers(0, 400), elements=st.integers(-3, 70)), st.randoms(use_true_random=False),
       st.sampled_from([np.int32, np.int64, np.uint32]), st.integers(1, 80))
def test_supervised_counts_equal_bincount(ids, rnd, dtype, limit):
    """Counts of supervised ids in [0, limit) equal numpy's, whatever the id dtype; corrupt ids are not counted."""
    if dtype == np.uint32:
        ids = np.abs(ids)
    ids = ids.astype(dtype)
    mask = np.array([rnd.random() < 0.6 for _ in range(len(ids))], dtype=bool)
    got = supervised_counts(ids, mask, limit)
    want = sparse_counts(ids[mask], limit)
    assert got["ids"].dtype == want["ids"].dtype and got["counts"].dtype == want["counts"].dtype
    np.testing.assert_array_equal(got["ids"], want["ids"])
    np.testing.assert_array_equal(got["counts"], want["counts"])
    if len(ids) and mask.any():  # beyond the dense range the numpy path answers, with the same result
        big = supervised_counts(ids, mask, DENSE_COUNT_LIMIT + 1)
        np.testing.assert_array_equal(big["counts"], sparse_counts(ids[mask], DENSE_COUNT_LIMIT + 1)["counts"])


_CONTROLLER = """
import sys, pytest
rc = pytest.main(sys.argv[1:])
print("numba loaded:", "numba" in sys.modules, "exit", rc)
"""


def test_xdist_controller_never_loads_numba(clean_dataset, tmp_path):
    """Workers label shards with the kernels; the controller, which only decodes a few rows for the
    summary (a warning's excerpt here), must not pay numba's import and kernel loading."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _CONTROLLER, f"--dataset-path={clean_dataset}", "-n", "2", "-q",
                          "-p", "no:cacheprovider", f"--report-dir={tmp_path}", "--expected-count=2000"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert "WARN " in out.stdout  # the summary decoded at least one row at the controller
    assert "numba loaded: False exit 0" in out.stdout, out.stdout[-2000:]
