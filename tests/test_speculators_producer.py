"""No false alarm on a correct dataset made by another tool: speculators 0.7.0's own preprocessing.

A few hundred fixture conversations go through speculators' real code (its probe,
its assistant-pattern regex, its ``_preprocess_batch``), are cast to the contract
dtypes and saved with ``save_to_disk``; then ``python -m pytest --dataset-path=...``
runs in a subprocess and must pass every contract. Further tests pin what speculators
actually produced, so the pass cannot be vacuous (empty masks, no tool calls, no
truncation would all pass trivially), and a negative control shows the same harness
does fail when speculators is told to supervise ``<|im_end|>``.

speculators lives outside the venv (``.ci/install-speculators DIR``); the tests skip,
with the reason, when ``$DRAFTER_SPECULATORS_PATH`` (default ``<repo>/.deps/speculators-0.7.0``)
holds no importable speculators 0.7.0.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from helpers import NEEDS_A_FILE

from drafter_contracts.demo.conversations import generate_conversations
from drafter_testkit.speculators_producer import (
    PATH_ENV,
    ProducerNotes,
    SpeculatorsUnavailable,
    build_speculators_dataset,
    load_preprocessing,
    speculators_rows,
    write_rows,
)
from drafter_testkit.tokenizer import FIRST_SPECIAL_ID, SPECIAL_TOKENS

REPO = Path(__file__).resolve().parents[1]
N_CONVERSATIONS = 400  # seed 0: includes 4 rows cut at 4,096 tokens (indices 69, 188, 300, 345)
SEED = 0
MAX_LEN = 4096


def _id(token: str) -> int:
    return FIRST_SPECIAL_ID + SPECIAL_TOKENS.index(token)


IM_START, IM_END = _id("<|im_start|>"), _id("<|im_end|>")
TOOL_CALL, TOOL_RESPONSE, THINK = _id("<tool_call>"), _id("<tool_response>"), _id("<think>")


@dataclass(frozen=True)
class Produced:
    path: Path
    notes: ProducerNotes
    input_ids: list[np.ndarray]
    loss_mask: list[np.ndarray]
    features: dict[str, Any]


def run_suite(dataset: Path, tokenizer_dir: Path, rows: int, report: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``python -m pytest --dataset-path=...`` in a subprocess; returns it and its summary.json.

    cwd is the repo root: with the editable install the suite sits under the repo's conftest.py.
    """
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--dataset-path={dataset}",
         "--contract=speculators-regex", f"--tokenizer={tokenizer_dir}", f"--expected-count={rows}", f"--report-dir={report}"],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=os.environ.copy())
    summary_file = report / "summary.json"
    assert summary_file.is_file(), f"no summary.json:\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}"
    return proc, json.loads(summary_file.read_text())


def run_suite_inprocess(pytester, dataset: Path, tokenizer_dir: Path, rows: int) -> tuple[int, str, dict[str, Any]]:
    """The same run through pytester in this process (test_suite_passes_on_speculators_dataset keeps a real one)."""
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", f"--dataset-path={dataset}", "--contract=speculators-regex",
                                          f"--tokenizer={tokenizer_dir}", f"--expected-count={rows}", "--report-dir=reports")
    summary_file = pytester.path / "reports" / "summary.json"
    assert summary_file.is_file(), result.stdout.str()[-4000:]
    return result.ret, result.stdout.str(), json.loads(summary_file.read_text())


@pytest.fixture(scope="session")
def speculators_path() -> Path:
    """Where speculators 0.7.0 was installed; skips every test here when it cannot be imported."""
    target = Path(os.environ.get(PATH_ENV) or REPO / ".deps" / "speculators-0.7.0")
    try:
        load_preprocessing(target)
    except SpeculatorsUnavailable as exc:
        pytest.skip(f"speculators 0.7.0 not available: {exc}")
    return target


@pytest.fixture(scope="session")
def preprocessing(speculators_path: Path) -> ModuleType:
    return load_preprocessing(speculators_path)


@pytest.fixture(scope="session")
def produced(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path, speculators_path: Path) -> Produced:
    """The speculators-made dataset (built once per session: ~10 s, ~7 s of it importing torch)."""
    notes = ProducerNotes()
    out = build_speculators_dataset(tmp_path_factory.mktemp("speculators") / "ds", N_CONVERSATIONS, SEED,
                                    tokenizer_dir, max_len=MAX_LEN, speculators_path=speculators_path, notes=notes)
    from datasets import load_from_disk

    ds = load_from_disk(str(out)).with_format("numpy")
    return Produced(out, notes, list(ds["input_ids"]), list(ds["loss_mask"]), ds.features.to_dict())


def test_suite_passes_on_speculators_dataset(produced: Produced, tokenizer_dir: Path, tmp_path: Path) -> None:
    """Exit 0, and summary.json shows every contract passing (or skipped with a reason)."""
    proc, summary = run_suite(produced.path, tokenizer_dir, produced.notes.rows, tmp_path / "report")
    assert proc.returncode == 0, f"suite flagged speculators' dataset:\n{proc.stdout[-6000:]}\n{proc.stderr[-2000:]}"
    assert summary["exit_status"] == 0
    assert summary["dataset"]["num_rows"] == produced.notes.rows
    checks = summary["checks"]
    assert {"schema", "lengths_agree", "turns_well_formed", "mask_on_assistant_spans"} <= set(checks)
    for name, check in checks.items():
        assert check["verdict"] in ("pass", "skip", "warn"), (name, check)  # warn: report-only content contracts
        assert check["verdict"] != "warn" or check["report_only"], name
        assert check["verdict"] != "skip" or check["skip_reasons"], f"{name} skipped without a reason"
    assert checks["mask_on_assistant_spans"]["verdict"] == "pass"
    assert checks["mask_on_assistant_spans"]["rows_checked"] == produced.notes.rows
    # Tokenizer drift: the rows of the default sample (400 rows are under its 1,000-row cap; its
    # 131,072-token budget leaves out the last few) re-encode to speculators' ids.
    assert checks["tokenizer_drift"]["verdict"] == "pass"
    assert 0.95 * produced.notes.rows < checks["tokenizer_drift"]["rows_checked"] <= produced.notes.rows
    assert summary["figures"]["complete"] and summary["figures"]["supervised_share"] > 0


def test_speculators_took_the_regex_path(produced: Produced) -> None:
    """Stock (tag-free) template: the probe finds no usable HF mask, so the regex path made the masks."""
    notes = produced.notes
    assert notes.hf_assistant_mask is False
    assert notes.assistant_pattern is not None and "assistant" in notes.assistant_pattern
    assert "think" not in notes.assistant_pattern  # the 0.7 fix: reasoning stays inside the content group
    assert notes.conversations == N_CONVERSATIONS
    assert notes.rows == N_CONVERSATIONS - len(notes.dropped) == len(produced.input_ids)
    assert not notes.dropped, f"speculators dropped conversations: {notes.dropped}"


def test_written_with_contract_dtypes(produced: Produced) -> None:
    """speculators emits int64 ids; the producer casts to what the contract declares."""
    f = produced.features
    assert f["input_ids"]["feature"]["dtype"] == "int32"
    assert f["loss_mask"]["feature"]["dtype"] == "bool"
    assert f["seq_len"]["dtype"] == "int64"


def test_speculators_masks_are_not_trivial(produced: Produced) -> None:
    """Real supervision, on the right tokens: assistant text, reasoning and tool calls; never markers."""
    ids = np.concatenate(produced.input_ids)
    mask = np.concatenate(produced.loss_mask).astype(bool)
    share = mask.mean()
    assert 0.3 < share < 0.95, share
    assert all(m.any() for m in produced.loss_mask), "a row without supervision"
    assert not mask[ids == IM_START].any() and not mask[ids == IM_END].any()
    assert not mask[ids == TOOL_RESPONSE].any()
    assert mask[ids == TOOL_CALL].any(), "no supervised tool call: the tool-use rows were not exercised"
    assert mask[ids == THINK].any(), "no supervised <think>: reasoning was not exercised"
    lengths = [len(r) for r in produced.input_ids]
    assert max(lengths) == MAX_LEN, "no row reached the truncation cap"
    truncated = [m for r, m in zip(produced.input_ids, produced.loss_mask) if len(r) == MAX_LEN]
    assert any(m[-1] for m in truncated), "a row cut mid-answer should end supervised"


def test_negative_control_im_end_in_pattern_fails(produced: Produced, preprocessing: ModuleType,
                                                   tokenizer_dir: Path, tmp_path: Path, pytester) -> None:
    """Same speculators code, told (via its own assistant_pattern) to supervise <|im_end|>: rejected.

    Shows the subprocess harness can fail, so the clean pass above means something.
    """
    good = produced.notes.assistant_pattern
    assert good is not None
    end = re.escape("<|im_end|>")
    bad = good.replace(")" + end, end + ")")
    assert bad != good
    tokenizer = preprocessing.load_processor(str(tokenizer_dir))
    conversations = generate_conversations(100, SEED)
    out = write_rows(speculators_rows(conversations, tokenizer, MAX_LEN, preprocessing=preprocessing,
                                      assistant_pattern=bad), tmp_path / "ds")
    ret, stdout, summary = run_suite_inprocess(pytester, out, tokenizer_dir, 100)
    assert ret == 1, stdout[-4000:]
    verdicts = {name: c["verdict"] for name, c in summary["checks"].items()}
    assert verdicts.pop("mask_on_assistant_spans") == "fail"
    assert "fail" not in verdicts.values(), verdicts
    # Only the contracts of a file beside the data (none here) may skip; only the report-only content ones may warn.
    assert {k for k, v in verdicts.items() if v != "pass"} <= {
        *NEEDS_A_FILE, "duplicate_rows", "placeholder_replies", "cut_mid_reply", "short_rows", "dflash_anchors",
        "convention_losses"}, verdicts


def test_raw_int64_output_passes_its_producer_contract(produced: Produced, tokenizer_dir: Path, tmp_path: Path,
                                                       pytester) -> None:
    """speculators' own dtypes (int64 ids, int64 0/1 mask), saved without a cast, pass speculators-regex."""
    rows = zip((r.astype(np.int64).tolist() for r in produced.input_ids),
               (m.astype(bool).tolist() for m in produced.loss_mask))
    out = write_rows(rows, tmp_path / "raw", cast=False)
    from datasets import load_from_disk

    features = load_from_disk(str(out)).features.to_dict()
    assert features["input_ids"]["feature"]["dtype"] == "int64" and features["loss_mask"]["feature"]["dtype"] == "int64"
    ret, stdout, summary = run_suite_inprocess(pytester, out, tokenizer_dir, produced.notes.rows)
    assert ret == 0, stdout[-4000:]
    checks = summary["checks"]
    assert checks["schema"]["verdict"] == "pass" and checks["mask_values"]["verdict"] == "pass"
    assert checks["mask_on_assistant_spans"]["verdict"] == "pass"
    assert checks["mask_covers_assistant_spans"]["verdict"] == "pass"
    assert summary["dataset"]["columns"]["loss_mask"] == "list<int64>"
