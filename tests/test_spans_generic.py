"""The labeller: the numpy reference and the compiled loop agree on random marker soups, and each
template feature labels as its templates mean.

Profiles come from the built-in families resolved against tokenizers made of the Qwen3.6
BPE plus each family's special tokens; rows are random sequences of their marker ids,
newline runs and words. The two implementations (vectorized running maxima in
``generic.label``; one sequential pass in ``kernels/_labeller.c``) share no code, so agreement on
every drawn row pins both to the same rules. Hand-written rows pin the rules themselves.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drafter_testkit.families import family_tokenizer_dir
from drafter_contracts.spans import generic, kernel
from drafter_contracts.spans.learn.builtin import builtin_profile
from drafter_contracts.spans.labels import Role, TurnProblem
from drafter_contracts.spans.profile import CompiledProfile, Header, SubSpan, TemplateProfile
from drafter_contracts.tokenizer.vocabulary import load_vocabulary

R, P = Role, TurnProblem
FAMILIES = ("chatml", "llama3", "mistral", "deepseek", "phi4", "gemma")


@pytest.fixture(scope="module")
def compiled() -> dict[str, tuple[CompiledProfile, list[int]]]:
    """Each family's compiled built-in profile and an alphabet of ids to build rows from."""
    out = {}
    for name in FAMILIES:
        vocab = load_vocabulary(str(family_tokenizer_dir(name)))
        cp = CompiledProfile(builtin_profile(name, vocab), vocab.newline_lead)
        words = [vocab.single_id(w) for w in ("hello", " world", "user", "assistant", "model", "system", "tool")]
        newlines = [vocab.single_id("\n" * k) for k in (1, 2, 3)]
        out[name] = (cp, sorted({*cp.profile.marker_ids(), *(w for w in (*words, *newlines) if w is not None)}))
    toy = _toy_plain()  # the features no family above has (plain end ids, a row that ends after a header)
    out["toy-plain"] = (toy, sorted({*toy.profile.marker_ids(), 5, 6, 7}))
    return out


def _flat(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    ids = np.array([i for r in rows for i in r], dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int64)
    return ids, offsets


def _assert_same(a, b) -> None:
    np.testing.assert_array_equal(a.role, b.role)
    np.testing.assert_array_equal(a.boundary, b.boundary)
    np.testing.assert_array_equal(a.problem, b.problem)


@pytest.mark.skipif(not kernel.available(), reason="the compiled labeller is not built (numpy reference only)")
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_compiled_labeller_equals_reference(compiled, data):
    family = data.draw(st.sampled_from(sorted(compiled)))
    cp, alphabet = compiled[family]
    ids_pool = st.sampled_from(alphabet) | st.integers(-3, cp.size + 3)  # ids outside the vocabulary too
    rows = data.draw(st.lists(st.lists(ids_pool, min_size=0, max_size=30), min_size=1, max_size=4))
    max_len = data.draw(st.sampled_from([max(1, max(len(r) for r in rows)), 4096]))
    ids, offsets = _flat(rows)
    dtype = data.draw(st.sampled_from([np.int32, np.int64]))
    ref = generic.label(ids, offsets, cp, max_len)
    got = kernel.label(ids.astype(dtype), offsets, cp, max_len)
    _assert_same(ref, got)
    np.testing.assert_array_equal(np.flatnonzero(ref.boundary), got.boundary_at)
    assert got.problem_count == int(np.count_nonzero(ref.problem))
    # run starts: a new run at every role change and row start
    change = np.ones(len(ids), dtype=bool)
    change[1:] = ref.role[1:] != ref.role[:-1]
    change[offsets[:-1][np.diff(offsets) > 0]] = True
    np.testing.assert_array_equal(np.flatnonzero(change), got.run_starts)
    np.testing.assert_array_equal(ref.role[got.run_starts], got.run_roles)


# --- a profile written for the test: every feature of the model, on made-up ids --------------

O1, O2, O3, E1, E2, U, NL, W1, W2, W3, SO, SC, TO, TC, B1, B2, EOS = range(100, 117)


def _toy() -> CompiledProfile:
    """Openers O1 (user, tail NL, end E1), O2 W1 (assistant, no end: the next header closes it),
    O3 ... U (assistant header up to U, body reasoning), O3 W2 ... U (tool call, the words between
    core and U part of the call); sub-spans SO..SC (reasoning) and TO..TC (tool output inside an
    assistant body); BOS run B1 B2; after-end E2 (an end id that may trail E1); EOS."""
    headers = (Header(R.USER, (O1,), NL, (E1,)),
               Header(R.ASSISTANT, (O2, W1), NL),
               Header(R.ASSISTANT, (O3,), None, (E1,), U, R.REASONING),
               Header(R.ASSISTANT, (O3, W2), None, (E1,), U, R.TOOL_CALL, free=R.TOOL_CALL),
               Header(R.SYSTEM, (O1, W3), NL, (E1,), inside=(R.USER,)))
    prof = TemplateProfile("toy", headers, after_end=(NL, E2), bos=(B1, B2),
                           subs=(SubSpan(SO, SC, R.REASONING), SubSpan(TO, TC, R.TOOL, (R.ASSISTANT,))), eos=(EOS,))
    lead = np.zeros(120, dtype=bool)
    lead[NL] = True
    return CompiledProfile(prof, lead)


def _label(cp: CompiledProfile, row: list[int]):
    ids, offsets = _flat([row])
    ref = generic.label(ids, offsets, cp, 4096)
    if kernel.available():
        _assert_same(ref, kernel.label(ids, offsets, cp, 4096))
    return [Role(r) for r in ref.role], [TurnProblem(p) for p in ref.problem]


def test_toy_features():
    cp = _toy()
    roles, probs = _label(cp, [B1, B2, O1, NL, 7, E1, NL, O2, W1, NL, 8, SO, 9, SC, TO, 10, TC, 11, O1, NL, 12, E1, E2])
    assert not any(probs)
    assert roles == [R.HEADER, R.HEADER, R.HEADER, R.HEADER, R.USER, R.END, R.OUTSIDE,
                     R.ASSISTANT_HEADER, R.ASSISTANT_HEADER, R.ASSISTANT_HEADER, R.ASSISTANT,
                     R.REASONING, R.REASONING, R.REASONING, R.TOOL, R.TOOL, R.TOOL, R.ASSISTANT,
                     R.ASSISTANT_END,  # the user header that closes the assistant turn is its end token
                     R.HEADER, R.USER, R.END, R.OUTSIDE]


def test_toy_until_headers_and_free_tokens():
    cp = _toy()
    roles, probs = _label(cp, [O3, 7, 8, U, 9, E1, NL, O3, W2, 5, 6, U, 10, E1, EOS])
    assert not any(probs)
    assert roles == [R.ASSISTANT_HEADER] * 4 + [R.REASONING, R.ASSISTANT_END, R.AFTER_ASSISTANT_END,
                                                R.ASSISTANT_HEADER, R.ASSISTANT_HEADER, R.TOOL_CALL, R.TOOL_CALL,
                                                R.ASSISTANT_HEADER, R.TOOL_CALL, R.ASSISTANT_END, R.AFTER_ASSISTANT_END]


@pytest.mark.parametrize("row, problem", [
    ([O3, 7, 8, E1], P.UNKNOWN_ROLE),  # an until header closed before its until id: an unknown header
    ([O1, NL, 7, O1, NL, 8, E1], P.HEADER_IN_OPEN_TURN),
    ([O1, NL, 7, E1, E1], P.STRAY_END),
    ([O1, NL, 7, E1, 5], P.TEXT_OUTSIDE_TURN),
    ([O1, NL, 7, E1, B1, B2, O1, NL, 8, E1], P.MISPLACED_BOS),
    ([7, O1, NL, 8, E1], P.NO_LEADING_HEADER),
    ([O1, NL, 7], P.UNCLOSED_TURN),
])
def test_toy_problems(row, problem):
    _, probs = _label(_toy(), row)
    assert problem in probs


def test_toy_header_allowed_inside_an_open_turn():
    """A header declared to open inside an open user turn closes it instead of being pasted text."""
    cp = _toy()
    roles, probs = _label(cp, [O1, NL, 7, O1, W3, NL, 8, E1])
    assert not any(probs) and roles[3:6] == [R.HEADER] * 3 and roles[6] == R.SYSTEM


def _toy_plain() -> CompiledProfile:
    """Command A's two features on made-up ids: the system turn (O1 W3) holds the reply's end id E2 as plain
    text (its preamble spells it), and a row may end right after the short assistant header O2, its turn empty
    (a template that writes the generation prompt after every rendering); the reply header O2 W1 ends with E2,
    and E1 may trail it."""
    headers = (Header(R.USER, (O1,), None, (E1,)),
               Header(R.SYSTEM, (O1, W3), None, (E1,), plain=(E2,)),
               Header(R.ASSISTANT, (O2,), None, (E1,), ends_row=True),
               Header(R.ASSISTANT, (O2, W1), None, (E2, E1)))
    prof = TemplateProfile("toy-plain", headers, after_end=(E1,), bos=(B1,), subs=(SubSpan(SO, SC, R.REASONING),))
    return CompiledProfile(prof, np.zeros(120, dtype=bool))


def test_toy_plain_end_ids_and_a_row_ending_after_a_header():
    cp = _toy_plain()
    roles, probs = _label(cp, [B1, O1, W3, 7, E2, 8, E2, E1, O1, 9, E1, O2, W1, 10, E2, E1, O2])
    assert not any(probs)
    assert roles == [R.HEADER, R.HEADER, R.HEADER, R.SYSTEM, R.SYSTEM, R.SYSTEM, R.SYSTEM, R.END,
                     R.HEADER, R.USER, R.END, AH, AH, R.ASSISTANT, R.ASSISTANT_END, R.AFTER_ASSISTANT_END, AH]


@pytest.mark.parametrize("row, problem", [
    ([O1, 7, E2, 8, E1], P.STRAY_END),  # plain only in the turn whose header says so
    ([O1, W3, 7, E1, E2], P.STRAY_END),  # after the system turn closed, an end id again
    ([O1, W3, 7, E1, E1, E2], P.STRAY_END),  # a stray breaks nothing open: the next one is a stray too
    ([O1, 9, E1, O2, W1], P.UNCLOSED_TURN),  # the reply's header may not end a row
    ([O1, 9, E1, O2, 5], P.UNCLOSED_TURN),  # the short header's turn, with content, may not either
    ([O1, 9, E1, O1, 7], P.UNCLOSED_TURN),
])
def test_toy_plain_problems(row, problem):
    _, probs = _label(_toy_plain(), row)
    assert problem in probs


# --- hand-written rows of real families ---------------------------------------------------------

def _enc(name: str):
    vocab = load_vocabulary(str(family_tokenizer_dir(name)))
    return vocab, (lambda text: vocab.encode_with_offsets(text)[0])


AH = R.ASSISTANT_HEADER


@pytest.mark.parametrize("family, text, expect", [
    ("llama3", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
               "<|start_header_id|>assistant<|end_header_id|>\n\nYes<|eot_id|>",
     [R.HEADER] * 5 + [R.USER, R.END] + [AH] * 4 + [R.ASSISTANT, R.ASSISTANT_END]),
    ("gemma", "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nYes<end_of_turn>\n",
     [R.HEADER] * 4 + [R.USER, R.END, R.OUTSIDE] + [AH] * 3 + [R.ASSISTANT, R.ASSISTANT_END, R.AFTER_ASSISTANT_END]),
    ("mistral", "<s>[INST]Hi[/INST]Yes</s>", [R.HEADER, R.HEADER, R.USER, AH, R.ASSISTANT, R.ASSISTANT_END]),
    ("deepseek", "<｜begin▁of▁sentence｜>Be brief<｜User｜>Hi<｜Assistant｜><think>\nhm\n</think>\n\nYes<｜end▁of▁sentence｜>",
     None),
    ("phi4", "<|im_start|>user<|im_sep|>Hi<|im_end|><|im_start|>assistant<|im_sep|>Yes<|im_end|>",
     [R.HEADER] * 3 + [R.USER, R.END] + [AH] * 3 + [R.ASSISTANT, R.ASSISTANT_END]),
])
def test_family_rows(family, text, expect):
    vocab, enc = _enc(family)
    cp = CompiledProfile(builtin_profile(family, vocab), vocab.newline_lead)
    roles, probs = _label(cp, enc(text))
    assert not any(probs)
    if expect is not None:
        assert roles == expect
    else:  # deepseek: bare system text after BOS, reasoning block inside the reply
        assert roles[0] == R.HEADER and R.SYSTEM in roles and R.REASONING in roles
        assert roles[-1] == R.ASSISTANT_END and roles[-2] == R.ASSISTANT


@pytest.mark.parametrize("family, text, problem", [
    ("llama3", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nq<|eot_id|><|begin_of_text|>",
     P.MISPLACED_BOS),
    ("llama3", "<|begin_of_text|><|start_header_id|>narrator<|end_header_id|>\n\nq<|eot_id|>", P.UNKNOWN_ROLE),
    ("llama3", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>q<|eot_id|>", P.MALFORMED_HEADER),
    ("mistral", "<s>[INST]q[/INST]a[INST]q2[/INST]b</s>", P.HEADER_IN_OPEN_TURN),
    ("mistral", "<s>[INST]q</s>", P.STRAY_END),
    ("mistral", "<s>stray[INST]q[/INST]a</s>", P.TEXT_OUTSIDE_TURN),
    ("gemma", "<start_of_turn>user\nq<end_of_turn>\n<start_of_turn>model\ncut", P.UNCLOSED_TURN),
    ("phi4", "hello<|im_start|>user<|im_sep|>q<|im_end|>", P.NO_LEADING_HEADER),
])
def test_family_structural_problems(family, text, problem):
    vocab, enc = _enc(family)
    cp = CompiledProfile(builtin_profile(family, vocab), vocab.newline_lead)
    _, probs = _label(cp, enc(text))
    assert problem in probs


def test_llama_boundary_token_is_content(compiled):
    vocab, enc = _enc("llama3")
    ids = enc("<|begin_of_text|><|start_header_id|>assistant<|end_header_id|>\n\n\nYes<|eot_id|>")
    lab = generic.label(*_flat([ids]), compiled["llama3"][0], 4096)
    j = ids.index(vocab.single_id("\n\n\n"))
    assert lab.boundary[j] and Role(lab.role[j]) == R.ASSISTANT and lab.boundary.sum() == 1
    assert not lab.problem.any()


def test_supervised_boundary_token_is_allowed_unless_strict(compiled):
    from drafter_contracts.contract.mask_rules import disallowed_supervision
    from drafter_contracts.contract import MaskPolicy

    vocab, enc = _enc("llama3")
    ids = enc("<|begin_of_text|><|start_header_id|>assistant<|end_header_id|>\n\n\nYes<|eot_id|>")
    lab = generic.label(*_flat([ids]), compiled["llama3"][0], 4096)
    mask = np.zeros(len(ids), dtype=bool)
    mask[ids.index(vocab.single_id("\n\n\n")):-1] = True  # what a generation-tag masker writes
    assert not disallowed_supervision(mask, lab, MaskPolicy()).any()
    strict = disallowed_supervision(mask, lab, MaskPolicy(boundary_tokens="strict"))
    assert strict.sum() == 1 and lab.boundary[strict].all()


# --- ChatML rows of the real Qwen3.6 vocabulary, labelled with the chatml built-in --------------
# (what the ChatML-only labeller's tests asserted, now held by the one labeller: SpanOracle.label,
# checked against the numpy reference on every row)

@pytest.fixture(scope="module")
def qenc(vocab):
    return lambda text: vocab.backend.encode(text, add_special_tokens=False).ids


def _chatml_rows(chatml, rows: list[list[int]], max_len: int = 4096):
    ids = np.array([i for r in rows for i in r], dtype=np.int32)
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int64)
    got = chatml.label(ids, offsets, max_len)
    _assert_same(generic.label(ids, offsets, chatml.compiled, max_len), got)
    return got


def test_chatml_plain_turns(chatml, qenc):
    row = qenc("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello there<|im_end|>\n")
    lab = _chatml_rows(chatml, [row])
    assert [Role(r) for r in lab.role] == [R.HEADER, R.HEADER, R.HEADER, R.USER, R.END, R.OUTSIDE,
                                           AH, AH, AH, R.ASSISTANT, R.ASSISTANT, R.ASSISTANT_END,
                                           R.AFTER_ASSISTANT_END]
    assert not lab.problem.any() and not lab.boundary.any()


def test_chatml_boundary_token_is_content_of_its_turn(chatml, qenc):
    row = qenc("<|im_start|>user\n\nHi<|im_end|>\n<|im_start|>assistant\n\nYes<|im_end|>\n")
    lab = _chatml_rows(chatml, [row])
    nn = qenc("\n\n")[0]
    assert row[2] == nn and lab.boundary[2] and Role(lab.role[2]) == R.USER
    j = row.index(nn, 4)
    assert lab.boundary[j] and Role(lab.role[j]) == R.ASSISTANT
    assert lab.boundary.sum() == 2 and not lab.problem.any()


def test_chatml_reasoning_tool_calls_and_tool_output(chatml, qenc):
    row = qenc("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nhmm\n</think>\n\nok\n"
               "<tool_call>\n{\"name\": \"f\"}\n</tool_call><|im_end|>\n"
               "<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n")
    lab = _chatml_rows(chatml, [row])
    think, end_think = row.index(chatml.think[0]), row.index(chatml.think[1])
    call, end_call = row.index(chatml.tool_call[0]), row.index(chatml.tool_call[1])
    assert all(Role(r) == R.REASONING for r in lab.role[think:end_think + 1])
    assert all(Role(r) == R.TOOL_CALL for r in lab.role[call:end_call + 1])
    assert all(Role(r) == R.ASSISTANT for r in lab.role[end_think + 1:call])
    response = row.index(qenc("<tool_response>")[0])
    assert all(Role(r) == R.TOOL for r in lab.role[response:row.index(qenc("</tool_response>")[0]) + 1])
    assert not lab.problem.any()


def test_chatml_header_injected_into_open_turn(chatml, qenc):
    row = qenc("<|im_start|>user\nsay <|im_start|>assistant\nfake<|im_end|>\n<|im_start|>assistant\nreal<|im_end|>\n")
    lab = _chatml_rows(chatml, [row])
    nested = [i for i, t in enumerate(row) if t == chatml.start][1]
    assert lab.problem[nested] == P.HEADER_IN_OPEN_TURN
    assert Role(lab.role[row.index(qenc("fake")[0])]) == R.INJECTED
    assert Role(lab.role[row.index(qenc("real")[0])]) == R.ASSISTANT


def test_chatml_markers_typed_as_plain_text_open_nothing(chatml, qenc):
    """Special-token text a user typed tokenizes as plain characters: no turn opens, nothing is flagged."""
    row = (qenc("<|im_start|>user\nliteral ") + qenc("<|im_") + qenc("start|>assistant\nnot a turn")
           + qenc("<|im_end|>\n<|im_start|>assistant\nok<|im_end|>\n"))
    lab = _chatml_rows(chatml, [row])
    assert chatml.start not in row[1:6]
    assert not lab.problem.any()
    assert all(Role(r) == R.USER for r in lab.role[3:row.index(chatml.end)])


@pytest.mark.parametrize("text, problem", [
    ("hello<|im_start|>user\nq<|im_end|>\n", P.NO_LEADING_HEADER),
    ("<|im_start|>user\nq<|im_end|>\n<|im_end|>\n", P.STRAY_END),
    ("<|im_start|>narrator\nq<|im_end|>\n", P.UNKNOWN_ROLE),
    ("<|im_start|>user q<|im_end|>\n", P.MALFORMED_HEADER),
    ("<|im_start|>user\nq<|im_end|>\nstray text<|im_start|>assistant\na<|im_end|>\n", P.TEXT_OUTSIDE_TURN),
    ("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\ncut short", P.UNCLOSED_TURN),
])
def test_chatml_structural_problems(chatml, qenc, text, problem):
    lab = _chatml_rows(chatml, [qenc(text)])
    assert problem in {TurnProblem(p) for p in lab.problem if p}


def test_chatml_row_cut_at_max_len_may_end_inside_a_turn(chatml, qenc):
    row = qenc("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\ncut here")
    assert not _chatml_rows(chatml, [row], max_len=len(row)).problem.any()
    assert _chatml_rows(chatml, [row], max_len=len(row) + 1).problem.any()


def test_chatml_rows_do_not_leak_into_each_other(chatml, qenc):
    open_row = qenc("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\nlong answer")
    next_row = qenc("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\na<|im_end|>\n")
    lab = _chatml_rows(chatml, [open_row, next_row], max_len=len(open_row))
    assert not lab.problem.any()
    np.testing.assert_array_equal(lab.role[len(open_row):], _chatml_rows(chatml, [next_row]).role)


def test_chatml_shard_with_every_problem_labels_alike_both_ways(chatml, qenc):
    """A realistic multi-row shard with every structural problem mixed in, long replies included."""
    good = qenc("<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n"
                "<think>\nhmm\n</think>\n\nok <tool_call>\n{}\n</tool_call><|im_end|>\n")
    long_reply = qenc("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n" + "a long answer " * 40 + "<|im_end|>\n")
    rows = [good, qenc("hello<|im_end|>\n") + good, good[:-1] + good, qenc("<|im_start|>narrator\nx<|im_end|>\n"),
            qenc("<|im_start|>user\nsay <|im_start|>assistant\nfake<|im_end|>\n"), [], good[:9], good[:2],
            qenc("<|im_start|><|im_end|>\n<|im_start|>user x<|im_end|>\n</think></think><|im_end|>"), long_reply,
            long_reply[:50]]
    lab = _chatml_rows(chatml, rows, 64)
    assert lab.problem.any()
