"""Explanations: a violating row decoded with each token's role and mask state, as segments and as one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from drafter_contracts.config import builtin_contracts, load_contract
from drafter_contracts.dataset import open_dataset
from drafter_contracts.engine import Engine
from drafter_contracts.explain import BEFORE, excerpt, explain_violation, format_failure, render_segments, window
from drafter_testkit import policy_mutants as pm
from drafter_testkit.producers import convention_dataset_dir

MAX_LEN = 2048


@pytest.fixture(scope="session")
def shifted(tmp_path_factory) -> tuple[Path, int]:
    """A regex-era dataset whose row has its mask one token late: every <|im_end|> of the row supervised."""
    clean = convention_dataset_dir("speculators-regex", 300, 0, MAX_LEN)
    out = tmp_path_factory.mktemp("explain") / "shifted"
    mutation = pm.make_policy_mutant("policy_shift_right", "speculators-regex", clean, out)
    return out, mutation.rows[0]


@pytest.fixture(scope="session")
def engine(shifted, vocab) -> Engine:
    contract = load_contract(builtin_contracts()["speculators-regex"], {"max_len": MAX_LEN})
    return Engine(open_dataset(str(shifted[0])), contract, vocab)


def _violation(engine: Engine, check: str):
    result = engine.shard_check(engine.shards[0], check)
    assert not result.ok
    return result, result.examples[0]


def test_segments_cover_the_window_exactly(engine, vocab):
    result, v = _violation(engine, "mask_on_assistant_spans")
    e = explain_violation(result, v, engine)
    ids, mask, _ = engine.row(v.row)
    segs = e.window.segments
    assert segs[0].start == max(0, v.position - BEFORE) and e.window.cut_before == (segs[0].start > 0)
    assert all(a.end == b.start for a, b in zip(segs, segs[1:]))  # contiguous, no token lost
    assert "".join(s.text for s in segs) == vocab.decode(ids[segs[0].start:segs[-1].end])
    for s in segs:  # one mask state per segment, and it is the data's
        assert set(mask[s.start:s.end].tolist()) == {s.supervised}
    assert any(s.role == "assistant_end" and s.supervised and s.offending and s.text == "<|im_end|>" for s in segs)


def test_every_offending_token_in_the_window_is_marked(engine):
    """Shifted right: each <|im_end|> of the row is supervised; all of them in the window are marked, not only the first."""
    result, v = _violation(engine, "mask_on_assistant_spans")
    ids, mask, _ = engine.row(v.row)
    w = window(ids, mask, engine.oracle.label(ids, np.array([0, len(ids)]), MAX_LEN).role, 0,
               engine.vocab, offending=None)
    e = explain_violation(result, v, engine)
    offending = [s for s in e.window.segments if s.offending]
    assert offending and all(s.role == "assistant_end" for s in offending)
    assert len(w.segments) > 1  # the plain window (no offending array) still decodes


def test_completeness_violation_marks_the_unsupervised_tokens(engine):
    result, v = _violation(engine, "mask_covers_assistant_spans")
    e = explain_violation(result, v, engine)
    first = next(s for s in e.window.segments if s.offending)
    assert first.start == v.position and not first.supervised and first.role in ("reasoning", "assistant")


def test_compact_line(engine):
    result, v = _violation(engine, "mask_on_assistant_spans")
    line = explain_violation(result, v, engine).text()
    assert "‹assistant_end›▶⟦<|im_end|>⟧" in line
    assert "\n" not in line and "⏎" in line
    assert line.count("‹header›") == line.count("<|im_start|>")  # a role tag once per change, not per token


def test_structured_form_is_json_ready(engine):
    result, v = _violation(engine, "mask_on_assistant_spans")
    d = explain_violation(result, v, engine).to_dict()
    back = json.loads(json.dumps(d))
    assert back["row"] == v.row and back["check"] == "mask_on_assistant_spans"
    assert {"text", "role", "supervised", "offending", "start", "end"} <= set(back["segments"][0])


def test_format_failure_keeps_its_signature_and_shape(engine, shifted):
    result, v = _violation(engine, "mask_on_assistant_spans")
    text = format_failure(result, engine)
    lines = text.splitlines()
    assert lines[0].startswith("mask_on_assistant_spans: 1 of 300 rows violate")
    assert f"first rows: {shifted[1]}" in text and lines[-1].strip().startswith("legend:")


def test_excerpt_old_call_without_tokenizer():
    ids = np.array([5, 6, 7, 8, 9])
    mask = np.array([False, True, True, False, False])
    line = excerpt(ids, mask, None, 3, None)
    assert line == "5⟦6 7⟧▶89"  # ids in runs; ▶ starts the run at the position
    w = window(ids, mask, None, 3, None)
    assert [s.text for s in w.segments] == ["5", "6 7", "8", "9"] and [s.offending for s in w.segments] == [
        False, False, True, False]
    assert render_segments(w) == line
