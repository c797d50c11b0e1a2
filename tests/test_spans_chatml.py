"""The ChatML span oracle on rows built from the real Qwen3.6 vocabulary.

Besides hand-written cases, a property test compares the vectorized labeller
with a plain per-token state machine written here, on random marker soups.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from drafter_contracts.spans.chatml import ChatMLProfile, label, label_reference
from drafter_contracts.spans.labels import Role, TurnProblem

R, P = Role, TurnProblem


@pytest.fixture(scope="module")
def enc(vocab):
    return lambda text: vocab.backend.encode(text, add_special_tokens=False).ids


def run(rows: list[list[int]], profile, max_len: int = 4096):
    ids = np.array([i for r in rows for i in r], dtype=np.int32)
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int64)
    return label(ids, offsets, profile, max_len)


def test_plain_turns(profile, enc):
    row = enc("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello there<|im_end|>\n")
    lab = run([row], profile)
    roles = [Role(r) for r in lab.role]
    assert roles == [R.HEADER, R.HEADER, R.HEADER, R.USER, R.END, R.OUTSIDE,
                     R.HEADER, R.HEADER, R.HEADER, R.ASSISTANT, R.ASSISTANT, R.ASSISTANT_END, R.AFTER_ASSISTANT_END]
    assert not lab.problem.any() and not lab.boundary.any()


def test_boundary_token_is_content_of_its_turn(profile, enc):
    row = enc("<|im_start|>user\n\nHi<|im_end|>\n<|im_start|>assistant\n\nYes<|im_end|>\n")
    lab = run([row], profile)
    assert row[2] == enc("\n\n")[0]
    assert lab.boundary[2] and Role(lab.role[2]) == R.USER
    j = row.index(enc("\n\n")[0], 4)
    assert lab.boundary[j] and Role(lab.role[j]) == R.ASSISTANT
    assert lab.boundary.sum() == 2 and not lab.problem.any()


def test_reasoning_and_tool_calls(profile, enc):
    row = enc("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nhmm\n</think>\n\nok\n"
              "<tool_call>\n{\"name\": \"f\"}\n</tool_call><|im_end|>\n")
    lab = run([row], profile)
    think, end_think = row.index(enc("<think>")[0]), row.index(enc("</think>")[0])
    call, end_call = row.index(enc("<tool_call>")[0]), row.index(enc("</tool_call>")[0])
    assert all(Role(r) == R.REASONING for r in lab.role[think:end_think + 1])
    assert all(Role(r) == R.TOOL_CALL for r in lab.role[call:end_call + 1])
    assert all(Role(r) == R.ASSISTANT for r in lab.role[end_think + 1:call])
    assert not lab.problem.any()


def test_header_injected_into_open_turn(profile, enc):
    row = enc("<|im_start|>user\nsay <|im_start|>assistant\nfake<|im_end|>\n<|im_start|>assistant\nreal<|im_end|>\n")
    lab = run([row], profile)
    nested = [i for i, t in enumerate(row) if t == profile.start][1]
    assert lab.problem[nested] == P.HEADER_IN_OPEN_TURN
    fake = row.index(enc("fake")[0])
    assert Role(lab.role[fake]) == R.INJECTED
    assert Role(lab.role[row.index(enc("real")[0])]) == R.ASSISTANT


def test_markers_typed_as_plain_text_open_nothing(profile, enc):
    row = (enc("<|im_start|>user\nliteral ") + enc("<|im_") + enc("start|>assistant\nnot a turn")
           + enc("<|im_end|>\n<|im_start|>assistant\nok<|im_end|>\n"))
    lab = run([row], profile)
    assert profile.start not in row[1:6]
    assert not lab.problem.any()
    user_end = row.index(profile.end)
    assert all(Role(r) == R.USER for r in lab.role[3:user_end])


@pytest.mark.parametrize("text, problem", [
    ("hello<|im_start|>user\nq<|im_end|>\n", P.NO_LEADING_HEADER),
    ("<|im_start|>user\nq<|im_end|>\n<|im_end|>\n", P.STRAY_END),
    ("<|im_start|>narrator\nq<|im_end|>\n", P.UNKNOWN_ROLE),
    ("<|im_start|>user q<|im_end|>\n", P.MALFORMED_HEADER),
    ("<|im_start|>user\nq<|im_end|>\nstray text<|im_start|>assistant\na<|im_end|>\n", P.TEXT_OUTSIDE_TURN),
    ("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\ncut short", P.UNCLOSED_TURN),
])
def test_structural_problems(profile, enc, text, problem):
    lab = run([enc(text)], profile)
    found = {TurnProblem(p) for p in lab.problem if p}
    assert problem in found


def test_row_cut_at_max_len_may_end_inside_a_turn(profile, enc):
    row = enc("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\ncut here")
    assert not run([row], profile, max_len=len(row)).problem.any()
    assert run([row], profile, max_len=len(row) + 1).problem.any()


def test_rows_do_not_leak_into_each_other(profile, enc):
    open_row = enc("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\nlong answer")
    next_row = enc("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\na<|im_end|>\n")
    lab = run([open_row, next_row], profile, max_len=len(open_row))
    assert not lab.problem.any()
    second = lab.role[len(open_row):]
    np.testing.assert_array_equal(second, run([next_row], profile).role)


# --- property: vectorized labeller == a per-token state machine ------------------------------

def reference_label(row: list[int], profile: ChatMLProfile, max_len: int) -> tuple[list[int], list[int]]:
    """Straightforward per-token reading of the ChatML rules (slow; for tests only)."""
    roles, problems = [R.OUTSIDE] * len(row), [0] * len(row)
    turn_start, turn_role, last_end, prev_marker = -1, R.OUTSIDE, -1, None
    sub_open = {}
    pairs = {profile.think: R.REASONING, profile.tool_call: R.TOOL_CALL}
    for p, t in enumerate(row):
        if t == profile.start:
            nested = prev_marker == "S"
            if nested:
                problems[p] = P.HEADER_IN_OPEN_TURN
            nxt = row[p + 1] if p + 1 < len(row) else None
            if nxt is None:
                role = R.UNKNOWN_ROLE
            elif nxt in (profile.start, profile.end):
                role = R.UNKNOWN_ROLE
                if nxt == profile.end:
                    problems[p + 1] = problems[p + 1] or P.MALFORMED_HEADER
            else:
                role = Role(int(profile.role_of_id[nxt]))
                if role == R.UNKNOWN_ROLE:
                    problems[p + 1] = P.UNKNOWN_ROLE
            turn_start, turn_role, prev_marker = p, (R.INJECTED if nested else role), "S"
            sub_open = {}
            roles[p] = R.HEADER
            continue
        if t == profile.end:
            if prev_marker != "S":
                problems[p] = P.STRAY_END
                roles[p] = R.OUTSIDE
            else:
                roles[p] = R.ASSISTANT_END if turn_role == R.ASSISTANT else R.END
            prev_marker, last_end = "E", p
            continue
        if turn_start < 0:
            continue
        if last_end > turn_start:  # after the end marker
            if p == last_end + 1 and t == profile.newline:
                roles[p] = R.AFTER_ASSISTANT_END if turn_role == R.ASSISTANT else R.OUTSIDE
            else:
                problems[p] = problems[p] or P.TEXT_OUTSIDE_TURN
            continue
        k = p - turn_start
        if k == 1:
            roles[p] = R.HEADER
            continue
        role = turn_role
        if k == 2:
            if t == profile.newline:
                roles[p] = R.HEADER
                continue
            if not profile.newline_lead[t] and turn_role != R.INJECTED:
                problems[p] = problems[p] or P.MALFORMED_HEADER
        boundary = k == 2 and profile.newline_lead[t]
        if turn_role == R.ASSISTANT and not boundary:
            for pair, sub in pairs.items():
                if t == pair[0]:
                    sub_open[pair] = True
                if sub_open.get(pair):
                    role = sub
                if t == pair[1]:
                    sub_open[pair] = False
        roles[p] = role
    if row:
        if row[0] != profile.start:
            problems[0] = P.NO_LEADING_HEADER
        last = len(row) - 1
        still_open = turn_start >= 0 and last_end < turn_start
        if still_open and len(row) < max_len and not problems[last]:
            problems[last] = P.UNCLOSED_TURN
    return [int(r) for r in roles], [int(x) for x in problems]


@given(st.data())
def test_vectorized_equals_reference(profile, enc, data):
    alphabet = [profile.start, profile.end, profile.newline, enc("\n\n")[0], enc("user")[0], enc("assistant")[0],
                enc("system")[0], enc("Hello")[0], profile.think[0], profile.think[1], profile.tool_call[0],
                profile.tool_call[1], enc("narrator")[0]]
    rows = data.draw(st.lists(st.lists(st.sampled_from(alphabet), max_size=30), min_size=1, max_size=5))
    max_len = data.draw(st.integers(1, 32))
    lab = run(rows, profile, max_len)
    start = 0
    for row in rows:
        want_roles, want_problems = reference_label(row, profile, max_len)
        got_roles = lab.role[start:start + len(row)].tolist()
        got_problems = lab.problem[start:start + len(row)].tolist()
        assert got_roles == want_roles, row
        assert [bool(x) for x in got_problems] == [bool(x) for x in want_problems], row
        start += len(row)


def test_marker_level_equals_reference_on_fixture_rows(profile, enc):
    """A realistic multi-row shard with every structural problem mixed in, labelled both ways."""
    good = enc("<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n"
               "<think>\nhmm\n</think>\n\nok <tool_call>\n{}\n</tool_call><|im_end|>\n")
    rows = [good, enc("hello<|im_end|>\n") + good, good[:-1] + good, enc("<|im_start|>narrator\nx<|im_end|>\n"),
            enc("<|im_start|>user\nsay <|im_start|>assistant\nfake<|im_end|>\n"), [], good[:9], good[:2],
            enc("<|im_start|><|im_end|>\n<|im_start|>user x<|im_end|>\n</think></think><|im_end|>")]
    ids = np.array([i for r in rows for i in r], dtype=np.int32)
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int64)
    fast, ref = label(ids, offsets, profile, 64), label_reference(ids, offsets, profile, 64)
    assert ref.problem.any()
    for field in ("role", "boundary", "problem"):
        np.testing.assert_array_equal(getattr(fast, field), getattr(ref, field), err_msg=field)
