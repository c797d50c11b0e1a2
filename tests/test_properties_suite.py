"""The properties suite run as a user runs it: ``pytest --masker=...`` in a subprocess, from an unrelated folder.

The ``hf`` masker on the generation-tagged template passes every property; each
deliberately broken masker (one historical speculators bug each) makes the property
that guards against that bug fail with a readable, shrunk example; the real speculators
passes except for its recorded defects, which are strict xfails.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from drafter_contracts.maskers.speculators import KNOWN_DEFECTS

BROKEN = "drafter_testkit.broken_maskers"
REPO = Path(__file__).resolve().parents[1]


def run_properties(cwd: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "-rsx", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=timeout, env=os.environ.copy())


def outcomes(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """test name -> PASSED/FAILED/XFAIL/SKIPPED/XPASS, from the -v progress lines."""
    return {m[1]: m[2] for m in re.finditer(r"::(test_\w+(?:\[[^\]]*\])?) (PASSED|FAILED|XFAIL|SKIPPED|XPASS|ERROR)",
                                           proc.stdout)}


@pytest.mark.slow
def test_hf_masker_passes_every_property(tmp_path: Path) -> None:
    proc = run_properties(tmp_path, "--masker=hf")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    got = outcomes(proc)
    assert len(got) == 9 and set(got.values()) == {"PASSED"}, got
    assert not list(tmp_path.iterdir()), "the suite wrote into the folder it ran from"


#: broken masker -> the property that must catch it
CAUGHT_BY = {
    "reasoning_unmasked": "test_mask_is_complete",
    "unbounded": "test_truncation_keeps_ids_and_mask_aligned",
    "length_skew": "test_truncation_keeps_ids_and_mask_aligned",
    "unknown_roles_dropped": "test_invalid_conversation_is_rejected_or_skipped",
    "probe_crashes": "test_support_probe",
    "reply_found_by_search": "test_mask_follows_the_reply_not_its_copy",
}
#: what the shrunk example must show
SHOWS = {
    "reasoning_unmasked": "(role reasoning)",
    "unbounded": "row longer than max_length",
    "length_skew": "len(input_ids)",
    "unknown_roles_dropped": "unknown_role",
    "probe_crashes": "probe crashed on a strict template",
    "reply_found_by_search": "a reply repeated in",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CAUGHT_BY))
def test_broken_masker_is_caught_with_a_readable_example(tmp_path: Path, name: str) -> None:
    prop = CAUGHT_BY[name]
    proc = run_properties(tmp_path, f"--masker={BROKEN}:{name}", "-k", prop)
    assert proc.returncode == 1, proc.stdout[-6000:]
    failed = [t for t, o in outcomes(proc).items() if t.split("[")[0] == prop and o == "FAILED"]
    assert failed, proc.stdout[-6000:]
    out = proc.stdout
    assert SHOWS[name] in out, out[-6000:]
    if name != "probe_crashes":
        assert "conversation:" in out and '{"role": "user"' in out
        assert "legend: ⟦…⟧ loss_mask=1" in out and re.search(r"‹(user|assistant|reasoning|header)›", out)
        assert "Falsifying example" in out or "Failing test case" in out or "falsifying" in out.lower()


def _speculators_dir(wanted: str) -> Path | None:
    """Where speculators ``wanted`` is installed: $DRAFTER_SPECULATORS_PATH if it holds it, else .deps/speculators-V."""
    candidates = [os.environ.get("DRAFTER_SPECULATORS_PATH"), str(REPO / ".deps" / f"speculators-{wanted}")]
    for c in filter(None, candidates):
        if (Path(c) / f"speculators-{wanted}.dist-info").is_dir():
            return Path(c)
    return None


@pytest.mark.slow
@pytest.mark.parametrize("wanted", ["0.7.0", "0.9.0"])
def test_real_speculators_verdict(tmp_path: Path, wanted: str) -> None:
    """``pytest --masker=speculators`` against the real package: its known defects xfail (strictly), the rest pass."""
    path = _speculators_dir(wanted)
    if path is None:
        pytest.skip(f"speculators {wanted} not installed: run .ci/install-speculators '' {wanted}")
    proc = run_properties(tmp_path, "--masker=speculators", f"--speculators-path={path}")
    got = outcomes(proc)
    defects = KNOWN_DEFECTS[wanted]
    assert proc.returncode == 0, proc.stdout[-8000:]
    assert len(got) == 9, got
    for test, outcome in got.items():
        if test.split("[")[0] in defects:
            assert outcome == "XFAIL", (test, outcome)
        else:
            assert outcome in ("PASSED", "SKIPPED"), (test, outcome)
    if wanted == "0.9.0":  # no probe in 0.8+: skipped, with the reason shown
        assert got["test_support_probe[with_generation_tags]"] == "SKIPPED"
        assert "has no assistant-mask support probe" in proc.stdout


@pytest.mark.parametrize("args, says", [
    (["--masker=nonsense"], "unknown masker; use hf, speculators or module:function"),
    (["--masker=speculators", "--speculators-path=/nonexistent"], "--speculators-path /nonexistent: no such folder"),
    (["--masker=hf", "--dataset-path=/nonexistent"], "run different suites"),
])
def test_bad_masker_options_are_one_line_and_exit_4(pytester, args: list[str], says: str) -> None:
    """In-process: the checks run in the entry point before anything is imported (tests/test_usage_errors.py
    runs one of them in a real process)."""
    result = pytester.runpytest_inprocess(*args, "-p", "no:cacheprovider")
    assert result.ret == 4, result.stdout.str()[-2000:] + result.stderr.str()[-2000:]
    lines = [line for line in result.stderr.str().splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0], result.stderr.str()
