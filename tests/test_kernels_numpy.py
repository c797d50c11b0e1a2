"""No compiler, no problem: the numpy references behind every kernel wrapper give the compiled loops' results.

``setup.py`` builds ``kernels/_kernels.c`` as an optional extension; without the library (or with
``DRAFTER_CONTRACTS_KERNELS=numpy``) each wrapper in ``kernels/compiled.py`` runs ``kernels/numpy_loops.py``.
Here every kernel is run both ways on the same drawn inputs and compared output by output,
the whole suite gives the same summary both ways, a real process says in one line that it
runs the references, and a build without a working compiler still installs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drafter_contracts.kernels import compiled as kernels
from drafter_contracts.checks import content
from drafter_contracts.hypothesis_settings import examples
from drafter_contracts.spans.labels import Role

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def numpy_kernels():
    """Run the wrappers on the numpy references (as an install without the library does)."""
    old = os.environ.get(kernels.KERNELS_ENV)
    os.environ[kernels.KERNELS_ENV] = "numpy"
    kernels.loaded_library.cache_clear()
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(kernels.KERNELS_ENV, None)
        else:
            os.environ[kernels.KERNELS_ENV] = old
        kernels.loaded_library.cache_clear()


def both(fn, *args):
    """``fn(*args)`` with the compiled loops and with the references, on fresh copies of every array."""
    def run():
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        return fn(*copies), copies
    assert kernels.backend()["backend"] == "c"
    c = run()
    with numpy_kernels():
        assert kernels.backend()["backend"] == "numpy"
        ref = run()
    return c, ref


def assert_same(c, ref) -> None:
    (c_out, c_args), (r_out, r_args) = c, ref
    if isinstance(c_out, tuple):
        for x, y in zip(c_out, r_out):
            assert x.dtype == y.dtype
            np.testing.assert_array_equal(x, y)
    else:
        assert c_out == r_out
    for x, y in zip(c_args, r_args):
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)


def _rows(data, elements, max_rows=8, max_len=40):
    rows = data.draw(st.lists(st.lists(elements, max_size=max_len), min_size=1, max_size=max_rows))
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int64)
    return [t for r in rows for t in r], offsets


@settings(max_examples=examples(300), deadline=None)
@given(st.data())
def test_labeller_both_ways(chatml, alphabet, data):
    """Roles, boundary flags, problems and the role runs, boundary positions and problem count read from
    them (marker soup): the compiled labeller notes runs as it writes, the numpy reference leaves them
    to ``role_runs``; both must give the same."""
    flat, offsets = _rows(data, st.sampled_from(alphabet))
    dtype = data.draw(st.sampled_from([np.int32, np.int64]))
    ids = np.array(flat, dtype=np.int64).astype(dtype)
    max_len = data.draw(st.integers(1, 40))

    def labels(ids, offsets):
        got = chatml.label(ids, offsets, max_len)
        runs = content.role_runs(got.role, offsets, got.run_starts, got.run_roles, got.run_row_first)
        at = got.boundary_at if got.boundary_at is not None else np.flatnonzero(got.boundary)
        count = got.problem_count if got.problem_count is not None else int(np.count_nonzero(got.problem))
        return (got.role, got.boundary, got.problem, runs.start, runs.end, runs.role, runs.row_first, at,
                np.array([count]))

    assert_same(*both(labels, ids, offsets))


@settings(max_examples=examples(300), deadline=None)
@given(st.data())
def test_token_pass_and_hashes_both_ways(data):
    flat, offsets = _rows(data, st.integers(-3, 70))
    dtype = data.draw(st.sampled_from([np.int32, np.int64]))
    ids = np.array(flat, dtype=np.int64).astype(dtype)
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=len(ids), max_size=len(ids))), dtype=bool).view(np.uint8)
    limit = data.draw(st.integers(1, 80))
    width = data.draw(st.sampled_from([np.int32, np.int64]))
    n_rows = len(offsets) - 1
    assert_same(*both(kernels.token_pass, ids, mask, offsets, 0x9E3779B97F4A7C15, limit, np.zeros(len(ids) + 1, width),
                      np.zeros(limit + 3, width), np.zeros(n_rows, np.uint64), np.zeros(1, np.int64)))
    assert_same(*both(kernels.row_hash_sums, ids, mask, bool(data.draw(st.booleans())), offsets, 12345,
                      np.zeros(n_rows, np.uint64)))
    assert_same(*both(kernels.prefix_count, mask, np.zeros(len(mask) + 1, width)))
    counts = np.zeros(limit, width)
    np.add.at(counts, np.clip(ids.astype(np.int64), 0, limit - 1), 1)
    assert_same(*both(kernels.drain_counts, counts))


@settings(max_examples=examples(300), deadline=None)
@given(st.data())
def test_turn_kernels_both_ways(data):
    """reply_lengths, run_totals and assistant_turns over drawn roles, runs and turns."""
    n = data.draw(st.integers(0, 120))
    ids = np.array(data.draw(st.lists(st.integers(-2, 30), min_size=n, max_size=n)), dtype=np.int64)
    role = np.array(data.draw(st.lists(st.sampled_from([int(r) for r in Role]), min_size=n, max_size=n)), np.uint8)
    boundary = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    blank = np.array(data.draw(st.lists(st.booleans(), min_size=1, max_size=25)), dtype=bool)
    markers = np.array(data.draw(st.lists(st.integers(0, 30), max_size=2)), dtype=np.int64)
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=12)))
    t_start, t_end = np.array(cuts[0::2][:len(cuts) // 2], np.int64), np.array(cuts[1::2], np.int64)
    cap = data.draw(st.integers(0, 40))
    assert_same(*both(kernels.reply_lengths, ids, role, boundary, content._IS_PART, blank, markers, t_start, t_end, cap,
                      np.zeros(len(t_start), np.int64)))
    offsets = np.array([0, *sorted(data.draw(st.lists(st.integers(0, n), max_size=5))), n], np.int64)
    runs = content.role_runs(role, offsets)
    prefix = np.concatenate(([0], np.cumsum(boundary))).astype(np.int32)
    assert_same(*both(kernels.run_totals, runs.role, runs.start, runs.end, prefix, True, np.zeros(len(Role), np.int64),
                      np.zeros(len(Role), np.int64)))
    assert_same(*both(kernels.assistant_turns, runs.role, runs.start, runs.end, runs.row_first, content._IS_TURN))


def test_the_suite_gives_the_same_summary_both_ways(pytester, clean_dataset, tokenizer_dir):
    """Every verdict, count, example and figure of the clean fixture, compiled loops against references."""
    args = (f"--dataset-path={clean_dataset}", f"--tokenizer={tokenizer_dir}", "--shard-size=400",
            "--expected-count=2000", "-p", "no:cacheprovider")
    pytester.runpytest_inprocess(*args, "--report-dir=c")
    with numpy_kernels():
        result = pytester.runpytest_inprocess(*args, "--report-dir=numpy")
    c, ref = (json.loads((pytester.path / d / "summary.json").read_text()) for d in ("c", "numpy"))
    assert c["kernels"]["backend"] == "c" and ref["kernels"] == {"backend": "numpy", "library": None,
                                                                  "why": "$DRAFTER_CONTRACTS_KERNELS=numpy"}
    for key in ("checks", "figures", "profile", "supervised_id_counts", "shards", "exit_status"):
        assert c[key] == ref[key], key
    warnings = [line for line in result.stdout.lines if "numpy reference loops run instead" in line]
    assert len(warnings) == 1 and warnings[0].startswith("WARNING drafter-contracts:")


def test_a_real_run_with_the_library_hidden_warns_once(tmp_path, clean_dataset, tokenizer_dir):
    """As a user without a compiler sees it: exit 0, one warning line, the references named in summary.json."""
    env = {**os.environ, kernels.KERNELS_ENV: "numpy"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--dataset-path={clean_dataset}",
                           f"--tokenizer={tokenizer_dir}", "--shard-size=1000", "--expected-count=2000",
                           f"--report-dir={tmp_path / 'reports'}", "-n", "2"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert proc.stdout.count("the numpy reference loops run instead") == 1
    assert json.loads((tmp_path / "reports" / "summary.json").read_text())["kernels"]["backend"] == "numpy"


def test_an_install_without_a_working_compiler_succeeds_and_runs_the_references(tmp_path):
    """pip builds the package with a compiler that always fails: the wheel builds (the extension is
    optional), holds no library, installs, and its kernels are the numpy references."""
    src = tmp_path / "src-tree"
    for rel in ("setup.py", "pyproject.toml", "README.md"):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, src / rel)
    shutil.copytree(ROOT / "src" / "drafter_contracts", src / "src" / "drafter_contracts",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    env = {**os.environ, "CC": "/bin/false", "LDSHARED": "/bin/false -shared"}
    env.pop(kernels.KERNELS_ENV, None)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-v",
                           "-w", str(tmp_path / "wheel"), str(src)], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert 'building extension "drafter_contracts.kernels._kernels" failed' in proc.stdout + proc.stderr
    wheel, = (tmp_path / "wheel").glob("*.whl")
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    assert not list((target / "drafter_contracts" / "kernels").glob("_kernels*.so"))
    probe = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                            "from drafter_contracts.kernels import compiled as kernels; print(kernels.__file__); "
                            "print(kernels.fallback_warning())",
                            str(target)], capture_output=True, text=True, timeout=120, env=env)
    where, warning = probe.stdout.splitlines()[:2]
    assert where.startswith(str(target)) and "were not built" in warning and "numpy reference loops" in warning


def test_a_stale_library_is_still_a_usage_error(monkeypatch, tmp_path):
    """A library that is there but of another build says how to rebuild, in one line (no silent fallback)."""
    from drafter_contracts.errors import UsageProblem

    monkeypatch.setenv(kernels.KERNELS_ENV, str(tmp_path / "missing.so"))
    kernels.loaded_library.cache_clear()
    try:
        with pytest.raises(UsageProblem, match="no such file"):
            kernels.load()
    finally:
        monkeypatch.delenv(kernels.KERNELS_ENV)
        kernels.loaded_library.cache_clear()
