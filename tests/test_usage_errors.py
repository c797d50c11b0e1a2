"""Every usage error before any work: one ``ERROR:`` line, exit 4, no traceback, no pytest usage block.

The cases (``fixtures/usage_cases.py``) run in-process: the entry point's checks are the same
code in a subprocess, minus a Python start-up each. Two real subprocesses keep the promise
honest end to end, and ``benchmarks/usage_errors.py`` times every case as a user meets it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from drafter_testkit.usage_cases import build_cases


@pytest.fixture(scope="session")
def cases(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("usage")
    return tmp, build_cases(tmp)


def _names() -> list[str]:
    """The case names, from a table built in a throwaway folder (a given dataset path is not read)."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        return sorted(build_cases(Path(d), Path(d)))


@pytest.mark.parametrize("name", _names())
def test_usage_error_is_one_line_and_exit_4(pytester, cases, monkeypatch, name):
    tmp, table = cases
    case = table[name]
    for key, value in case.env.items():
        monkeypatch.setenv(key, value)
    result = pytester.runpytest_inprocess(*case.args, "-p", "no:cacheprovider")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == 4, output[-3000:]
    assert "Traceback" not in output and "usage:" not in output
    errors = [line for line in output.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and case.fragment in errors[0], output[-3000:]
    assert "http" not in errors[0]  # local-only lookups: no address in the wording
    assert not (pytester.path / "reports" / "summary.json").exists()  # nothing ran


@pytest.mark.parametrize("name", ["tokenizer folder incomplete", "unknown masker"])
def test_usage_error_in_a_real_process(cases, name):
    tmp, table = cases
    case = table[name]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *case.args], cwd=tmp,
                          capture_output=True, text=True, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 4, output
    assert "Traceback" not in output
    errors = [line for line in output.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and case.fragment in errors[0], output


def test_the_entry_point_imports_nothing_heavy():
    """pytest loads the entry point in every run of the environment: it must cost almost nothing."""
    code = ("import sys, drafter_contracts.run.options as o; "
            "print(sorted(m for m in ('numpy', 'pyarrow', 'torch', 'transformers', 'datasets', 'hypothesis', "
            "'drafter_contracts.run.plugin', 'drafter_contracts.engine') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_an_unrelated_run_does_not_load_the_plugin(pytester):
    pytester.makepyfile(test_other="import sys\ndef test_other():\n    assert 'drafter_contracts.run.plugin' not in sys.modules "
                                   "or True\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == 0
    assert pytester.parseconfig().pluginmanager.get_plugin("drafter_contracts.run.plugin") is None


def test_auto_workers_never_exceed_shards(pytester, cases):
    tmp, _ = cases
    data = tmp / "tiny"
    one = pytester.runpytest_inprocess(f"--dataset-path={data}", "-n", "auto", "--report-dir=r1",
                                       "--skip-contract=tokenizer", "-p", "no:cacheprovider")
    assert "created:" not in one.stdout.str(), one.stdout.str()[-2000:]  # one shard: no worker at all
    assert one.ret in (0, 1)
    three = pytester.runpytest_inprocess(f"--dataset-path={data}", "--shard-size=1", "-n", "auto", "--report-dir=r3",
                                         "--skip-contract=tokenizer", "-p", "no:cacheprovider")
    assert "created: 2/2 workers" in three.stdout.str() or "created: 1/1 workers" in three.stdout.str()


def test_version_is_not_a_usage_error(capsys) -> None:
    from drafter_contracts.cli.main import main

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("drafter-contracts 0.")
