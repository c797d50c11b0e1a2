"""Explanations: a violating row decoded with each token's role and mask state, as segments and as one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from drafter_contracts.contract import builtin_contracts, load_contract
from drafter_contracts.dataset.reader import open_dataset
from drafter_contracts.engine import Engine
from drafter_contracts.report.explain import explain_violation, format_failure, offending_tokens
from drafter_contracts.spans.excerpt import BEFORE, MAX_SPANS, excerpt, offending_runs, render_segments, window
from drafter_contracts.spans.labels import Role
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
    windows: list[list] = [[segs[0]]]  # contiguous runs of segments: one per window, no token lost inside one
    for a, b in zip(segs, segs[1:]):
        assert b.start >= a.end
        if b.start == a.end:
            windows[-1].append(b)
        else:
            windows.append([b])
    assert len(windows) <= MAX_SPANS
    for w in windows:
        assert "".join(s.text for s in w) == vocab.decode(ids[w[0].start:w[-1].end])
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


def test_every_offending_run_of_the_row_is_shown_or_counted(engine):
    """A row whose every user turn is supervised, the turns far apart: each run is in a window of the
    excerpt or counted in its '+N more' tail, and the window's spans list them all."""
    contract = engine.contract
    for row in range(engine.dataset.num_rows):
        ids, mask, _ = engine.row(row)
        labels = engine.oracle.label_row(ids, MAX_LEN)
        user = labels.role == Role.USER
        if len(offending_runs(user)) >= 3 and np.flatnonzero(user)[-1] - np.flatnonzero(user)[0] > 4 * BEFORE:
            break
    else:
        pytest.fail("no row with three user turns far apart")
    leaked = mask.astype(bool) | user
    off = offending_tokens("mask_on_assistant_spans", ids, leaked, labels, contract, engine.vocab.newline_lead,
                           engine.oracle.mask_facts(ids))
    assert off is not None and (off >= user).all()
    first = int(np.flatnonzero(off)[0])
    w = window(ids, leaked, labels.role, first, engine.vocab, off)
    runs = [tuple(r) for r in offending_runs(off).tolist()]
    assert list(w.spans) == runs and w.span_count == len(runs) >= 3
    shown = [(seg.start, seg.end) for seg in w.segments if seg.offending]
    reached = [r for r in runs if any(a < r[1] and r[0] < b for a, b in shown)]
    assert len(reached) == min(len(runs), len(reached) + w.spans_not_shown) and len(reached) >= min(3, MAX_SPANS)
    last_user = max(r for r in offending_runs(user).tolist())
    line = render_segments(w)
    assert " … " in line
    if tuple(last_user) in reached:
        assert any(seg.start == last_user[0] and seg.offending and seg.supervised for seg in w.segments)
    if w.spans_not_shown:
        assert line.endswith(f"more offending span{'s' if w.spans_not_shown > 1 else ''})")


def test_far_offending_runs_get_windows_of_their_own():
    """Without a tokenizer: a slip at token 3 and a leak at 150..159 of a 400-token row both show,
    joined by ' … '; ten leaks show the first MAX_SPANS windows and count the rest."""
    ids = np.arange(400)
    mask = np.zeros(400, dtype=bool)
    off = np.zeros(400, dtype=bool)
    off[3] = True
    off[150:160] = mask[150:160] = True
    w = window(ids, mask, None, 3, None, off)
    assert [(s.start, s.end) for s in w.segments if s.offending] == [(3, 4), (150, 160)]
    assert w.spans == ((3, 4), (150, 160)) and w.spans_not_shown == 0
    line = render_segments(w)
    assert " … " in line and "▶⟦150 151" in line and "more offending" not in line
    assert w.segments[-1].end == 161 and w.cut_after
    many = np.zeros(400, dtype=bool)
    many[5:400:40] = True  # ten runs, 40 tokens apart
    w = window(ids, None, None, 5, None, many)
    assert w.span_count == 10 and len(offending_runs(many)) == 10
    assert w.spans_not_shown == 10 - sum(1 for s in w.segments if s.offending) > 0
    assert render_segments(w).endswith(f"(+{w.spans_not_shown} more offending spans)")


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
