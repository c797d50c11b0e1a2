"""Hand-written rows for the built-in profiles' shapes that axolotl's vendor templates render.

Each row is what a real template writes (mistral_v3_tekken / mistral_v2v3: consecutive tool
results; deepseek_v3: a second round of calls after tool outputs), labelled by the numpy
reference and, when built, the compiled labeller, which must agree. They pin the built-in
families' fixes without the axolotl wheel (tests/test_axolotl_templates.py checks the
templates themselves).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from drafter_testkit.families import family_tokenizer_dir
from drafter_contracts.spans import generic, kernel
from drafter_contracts.spans.learn.builtin import builtin_profile
from drafter_contracts.spans.labels import Role, TurnProblem
from drafter_contracts.spans.profile import CompiledProfile
from drafter_contracts.tokenizer.vocabulary import load_vocabulary

R = Role
AH = R.ASSISTANT_HEADER


@lru_cache(maxsize=None)
def _family(family: str) -> tuple[Any, CompiledProfile]:
    """The family's vocabulary and compiled built-in, once per process (a vocabulary load costs seconds)."""
    vocab = load_vocabulary(str(family_tokenizer_dir(family)))
    cp = CompiledProfile(builtin_profile(family, vocab), vocab.newline_lead)
    vocab.save_tables()
    return vocab, cp


def _label(family: str, text: str) -> tuple[list[str], list[Role], list[TurnProblem]]:
    vocab, cp = _family(family)
    ids, spans = vocab.encode_with_offsets(text)
    ids = np.asarray(ids, dtype=np.int64)
    offsets = np.array([0, len(ids)], dtype=np.int64)
    ref = generic.label(ids, offsets, cp, 4096)
    if kernel.available():
        got = kernel.label(ids, offsets, cp, 4096)
        np.testing.assert_array_equal(ref.role, got.role)
        np.testing.assert_array_equal(ref.problem, got.problem)
    pieces = [text[a:b] for a, b in spans]
    return pieces, [Role(r) for r in ref.role], [TurnProblem(p) for p in ref.problem]


def _role_of(pieces: list[str], roles: list[Role], piece: str, nth: int = 0) -> Role:
    return [r for p, r in zip(pieces, roles) if p == piece][nth]


def test_mistral_consecutive_tool_results_stay_tool_turns() -> None:
    """``[/TOOL_RESULTS][TOOL_RESULTS]``: the second call's results follow; no assistant turn opens between them."""
    text = ('<s>[INST]Weather?[/INST][TOOL_CALLS][{"name": "w"}]</s>'
            '[TOOL_RESULTS]{"content": "warm"}[/TOOL_RESULTS][TOOL_RESULTS]{"content": "cold"}[/TOOL_RESULTS]Both rainy.</s>')
    pieces, roles, problems = _label("mistral", text)
    assert not any(problems), [(p, pr) for p, pr in zip(pieces, problems) if pr]
    assert _role_of(pieces, roles, "[/TOOL_RESULTS]", 0) == R.HEADER  # closes the first results, opens the next
    assert _role_of(pieces, roles, "[TOOL_RESULTS]", 1) == R.HEADER
    assert _role_of(pieces, roles, "[/TOOL_RESULTS]", 1) == AH  # the answer follows the last results
    assert _role_of(pieces, roles, "Both") == R.ASSISTANT and roles[-1] == R.ASSISTANT_END
    assert _role_of(pieces, roles, "cold") == R.TOOL


def test_mistral_results_then_a_new_user_turn() -> None:
    text = "<s>[INST]q[/INST][TOOL_CALLS][]</s>[TOOL_RESULTS]r[/TOOL_RESULTS][INST]next[/INST]ok</s>"
    pieces, roles, problems = _label("mistral", text)
    assert not any(problems)
    assert _role_of(pieces, roles, "next") == R.USER and _role_of(pieces, roles, "ok") == R.ASSISTANT


def test_mistral_a_single_result_still_opens_the_answer() -> None:
    pieces, roles, problems = _label("mistral", "<s>[INST]q[/INST][TOOL_CALLS][]</s>[TOOL_RESULTS]r[/TOOL_RESULTS]"
                                                "Done.</s>")
    assert not any(problems)
    assert _role_of(pieces, roles, "[/TOOL_RESULTS]") == AH and _role_of(pieces, roles, "Done") == R.ASSISTANT


def test_deepseek_second_call_round_after_tool_outputs() -> None:
    """``<｜tool▁outputs▁end｜><｜Assistant｜>``: a new assistant turn (the next calls), not a header pasted into one."""
    calls = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>w\nx<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
    text = ("<｜begin▁of▁sentence｜><｜User｜>Weather?<｜Assistant｜>" + calls + "<｜end▁of▁sentence｜>"
            "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>warm<｜tool▁output▁end｜><｜tool▁outputs▁end｜>"
            "<｜Assistant｜>Now the article." + calls + "<｜end▁of▁sentence｜>"
            "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>rain<｜tool▁output▁end｜><｜tool▁outputs▁end｜>Done."
            "<｜end▁of▁sentence｜>")
    pieces, roles, problems = _label("deepseek", text)
    assert not any(problems), [(p, pr) for p, pr in zip(pieces, problems) if pr]
    assert _role_of(pieces, roles, "<｜Assistant｜>", 1) == AH
    assert _role_of(pieces, roles, "Now") == R.ASSISTANT
    assert _role_of(pieces, roles, "<｜tool▁call▁begin｜>", 1) == R.TOOL_CALL
    assert _role_of(pieces, roles, "Done") == R.ASSISTANT and _role_of(pieces, roles, "warm") == R.TOOL


def test_deepseek_assistant_header_inside_a_user_turn_is_still_a_problem() -> None:
    """Only an open assistant turn may be closed by a new <｜Assistant｜>; a user turn still needs its reply header."""
    _, _, problems = _label("deepseek", "<｜begin▁of▁sentence｜><｜User｜>q<｜tool▁outputs▁begin｜>r<｜Assistant｜>"
                                        "<｜User｜>a<｜end▁of▁sentence｜>")
    assert TurnProblem.HEADER_IN_OPEN_TURN in problems
