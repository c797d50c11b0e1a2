"""arctic-training 0.8.0 under the template -> mask properties, its own code in its own venv.

``drafter_testkit/arctic_masker.py`` calls arctic-training's ``SFTDataFactory.tokenize_messages``; it runs only
in ``.deps/arctic-venv`` (transformers 4.x, deepspeed), where ``.ci/install-arctic-training`` also installs
drafter-contracts. The first test holds the masker to arctic-training's own data path (its rows equal the
dataset ``trainer_producers.py`` had arctic-training write); the slow ones run ``pytest --masker=...`` there,
from an empty folder, as a user would: the property aimed at producers that find a reply by searching the
rendering fails with a shrunk example whose quoted copy (in user, system or tool text) is supervised, and every
other property reads as arctic-training's behaviour implies (its recorded defects XFAIL).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from drafter_testkit import REPO
from drafter_testkit import trainer_producers as tp

MASKER = f"{REPO / 'drafter_testkit' / 'arctic_masker.py'}:arctic_sft"
AIMED = "test_mask_follows_the_reply_not_its_copy"
#: Every property's outcome on arctic-training 0.8.0, as its behaviour implies (docs/producers.md).
EXPECTED = {
    "test_ids_equal_template_rendering": "xfailed",  # renders without tools; drops rows over max_length
    "test_mask_is_sound": "xfailed",  # str.find: a copy found first is trained; not found, the first tokens are
    "test_mask_is_complete": "xfailed",  # the reply itself then left untrained
    AIMED: "failed",  # the defect the property is aimed at, left unrecorded so it shows in full
    "test_truncation_keeps_ids_and_mask_aligned": "passed",  # a dropped row is not a cut row
    "test_invalid_conversation_is_rejected_or_skipped": "passed",  # the template raises, and so does arctic
    "test_same_conversation_same_rows": "passed",
    "test_support_probe[without_generation_tags]": "skipped",  # arctic-training has no probe
    "test_support_probe[with_generation_tags]": "skipped",
}
#: Rows of one conversation list, computed in arctic-training's venv by the masker (argv: repo, spec, out).
_ROWS_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from transformers import AutoTokenizer
from drafter_testkit.arctic_masker import arctic_sft
spec = json.load(open(sys.argv[2], encoding="utf-8"))
tok = AutoTokenizer.from_pretrained(spec["tokenizer"])
rows = [arctic_sft(c["messages"], c["tools"], tok, spec["max_length"]) for c in spec["conversations"]]
json.dump(rows, open(sys.argv[3], "w"))
"""


def venv_missing() -> str | None:
    """Why the arctic-training venv cannot run the masker (the install script's words), or None."""
    if why := tp.unavailable("arctic"):
        return why
    venv = tp.arctic_python().parent.parent
    if not any(venv.glob("lib/python*/site-packages/drafter_contracts-*.dist-info")):
        return f"no drafter-contracts in the arctic-training venv at {venv}; run .ci/install-arctic-training"
    return None


def _env() -> dict[str, str]:
    """The environment without this process's venv, path and pytest/xdist state."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith(("PYTEST_", "PYTHONHOME"))}


@pytest.mark.slow  # arctic-training's venv renders the 46 conversations again: ~35 s cold
def test_masker_rows_are_arctic_trainings_own(tmp_path: Path) -> None:
    """On the corpus, the masker's rows are the ones arctic-training's data factory wrote (the same ids, and
    loss exactly where its labels are not -100), the tools passed to the masker left out as arctic leaves them."""
    if why := venv_missing():
        pytest.skip(why)
    from datasets import load_from_disk

    tp.ensure(["arctic"])
    cases = tp.conversations()
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"tokenizer": str(tp.producer_dir("arctic") / "tokenizer"),
                                "max_length": tp.ARCTIC_MAX_LENGTH,
                                "conversations": [{"messages": c.messages, "tools": c.tools} for c in cases]}), "utf-8")
    out = tmp_path / "rows.json"
    done = subprocess.run([str(tp.arctic_python()), "-c", _ROWS_SCRIPT, str(REPO), str(spec), str(out)],
                          capture_output=True, text=True, timeout=600, env=_env(), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text())
    data = load_from_disk(str(tp.dataset_path("arctic-sft")))
    assert len(rows) == data.num_rows == len(cases)
    assert any(c.tools for c in cases)
    for k, (ids, mask) in enumerate(rows):
        assert ids == data[k]["input_ids"], k
        assert mask == [label != tp.IGNORE_INDEX for label in data[k]["labels"]], k


def test_outside_its_venv_the_masker_is_a_usage_error(pytester: Any) -> None:
    """Where arctic-training is not installed (this venv), the masker stops the run: one line, exit 4."""
    from importlib.util import find_spec

    if find_spec("arctic_training") is not None:
        pytest.skip("arctic-training is importable here")
    result = pytester.runpytest_inprocess(f"--masker={MASKER}", "-p", "no:cacheprovider")
    assert result.ret == 4, result.stdout.str()[-2000:] + result.stderr.str()[-2000:]
    assert "arctic-training is not installed in this Python" in result.stderr.str()


# --------------------------------------------------------------------------- the suite in arctic-training's venv


def _outcomes(junit: Path) -> dict[str, tuple[str, str]]:
    """test name -> (passed / failed / xfailed / skipped, the message pytest recorded with it)."""
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        failure, skipped = case.find("failure"), case.find("skipped")
        if failure is not None:
            out[case.get("name")] = ("failed", failure.text or failure.get("message", ""))
        elif skipped is not None:
            kind = "xfailed" if skipped.get("type") == "pytest.xfail" else "skipped"
            out[case.get("name")] = (kind, skipped.get("message", ""))
        else:
            out[case.get("name")] = ("passed", "")
    return out


@pytest.fixture(scope="module")
def arctic_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``pytest --masker=...arctic_masker.py:arctic_sft --tokenizer=DIR`` in the venv, from an empty folder."""
    if why := venv_missing():
        pytest.skip(why)
    base = tmp_path_factory.mktemp("arctic-properties")
    tokenizer = tp._arctic_tokenizer(base / "tokenizer")  # the built-in vocabulary as transformers 4 reads it
    empty, junit = base / "run", base / "junit.xml"
    empty.mkdir()
    cmd = [str(tp.arctic_python()), "-m", "pytest", f"--masker={MASKER}", f"--tokenizer={tokenizer}",
           "-p", "no:cacheprovider", "-rA", f"--junitxml={junit}"]
    proc = subprocess.run(cmd, cwd=empty, capture_output=True, text=True, timeout=1200, env=_env())
    assert junit.is_file(), proc.stdout[-4000:] + proc.stderr[-4000:]
    return {"proc": proc, "outcomes": _outcomes(junit), "folder": empty}


@pytest.mark.slow
def test_every_property_reads_as_arctic_training_behaves(arctic_run: dict[str, Any]) -> None:
    """The aimed property fails (exit 1), the recorded defects xfail with their reasons, the rest pass or skip."""
    got = arctic_run["outcomes"]
    assert {name: kind for name, (kind, _) in got.items()} == EXPECTED, arctic_run["proc"].stdout[-6000:]
    assert arctic_run["proc"].returncode == 1
    assert "renders without tools" in got["test_ids_equal_template_rendering"][1]
    assert "str.find" in got["test_mask_is_sound"][1] and "str.find" in got["test_mask_is_complete"][1]
    assert "arctic-training 0.8.0" in got["test_mask_is_sound"][1]
    assert "has no assistant-mask support probe" in got["test_support_probe[with_generation_tags]"][1]
    assert not list(arctic_run["folder"].iterdir()), "the suite wrote into the folder it ran from"


@pytest.mark.slow
def test_the_aimed_property_shows_the_quoted_copy_supervised(arctic_run: dict[str, Any]) -> None:
    """The shrunk example: a user, system or tool message holds a reply, and those tokens carry the loss."""
    text = arctic_run["outcomes"][AIMED][1]
    head = re.search(r"a reply repeated in (user|system|tool) text: \d+ supervised token\(s\) the policy forbids, "
                     r"first at token \d+ \(role (user|system|tool)\)", text)
    assert head, text[-4000:]
    messages = [json.loads(m) for m in re.findall(r"^E?\s+(\{\"role\": .*\})$", text, flags=re.M)]
    replies = [m["content"] for m in messages if m["role"] == "assistant" and m.get("content")]
    quoting = [m for m in messages if m["role"] == head[2] and any(r in (m.get("content") or "") for r in replies)]
    assert replies and quoting, messages
    row = next(line for line in text.splitlines() if "‹header›" in line)
    assert f"‹{head[2]}›" in row and "▶⟦" in row, row  # the offending run is supervised, inside that message
