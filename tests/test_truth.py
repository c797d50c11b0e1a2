"""The rendering-based ground truth on hand-made templates whose answers are known.

Templates are small jinja strings rendered by transformers with the real Qwen3.6
tokenizer, so every place a field lands can be written down here by hand.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from drafter_testkit.real_templates import template_text as trl_template
from drafter_contracts.spans.labels import Role
from drafter_contracts.spans.learn.truth import (CLASS_NAMES, CharClass, TemplateRejected, TruthRender, TruthUnavailable,
                                           allowed_roles, check_labels, render_truth)

CHATML = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | trim }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def tok(tokenizer_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tokenizer_dir))


def spans(tr: TruthRender) -> list[tuple[int, str, str, str]]:
    """(message, class, what, text) of every placed field, in text order."""
    return [(f.message, CLASS_NAMES[f.char_class], f.what, tr.text[f.start:f.end]) for f in tr.fields]


def call(name: str, args, cid: str = "c1") -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


# --------------------------------------------------------------------------- placing fields


def test_plain_fields_and_their_characters(tok) -> None:
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "  Hi there \n"},
            {"role": "assistant", "content": "Hello!"}]
    tr = render_truth(tok, msgs, template=CHATML)
    assert tr.text == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
                       "<|im_start|>assistant\nHello!<|im_end|>\n")
    assert spans(tr) == [(0, "system", "content", "Be brief."), (1, "user", "content", "Hi there"),
                         (2, "assistant", "content", "Hello!")]
    at = tr.text.index("Hello!")
    assert (tr.char_class[at:at + 6] == CharClass.ASSISTANT).all() and (tr.char_message[at:at + 6] == 2).all()
    assert tr.char_class[at - 1] == CharClass.SCAFFOLD and tr.char_message[at - 1] == -1
    assert tr.dropped == ()
    # Tokens: the markers are scaffold, "Hello" lies wholly inside the assistant field.
    texts = [tr.token_text(t) for t in range(tr.n_tokens)]
    hello = texts.index("Hello")
    assert tr.token_field[hello] == 2 and tr.classes_of_token(hello) == [CharClass.ASSISTANT]
    start = texts.index("<|im_start|>")
    assert tr.token_field[start] == -1 and tr.classes_of_token(start) == [CharClass.SCAFFOLD]
    assert list(tr.ids) == tok.apply_chat_template(msgs, chat_template=CHATML, tokenize=True, return_dict=True)["input_ids"]


def test_json_escaped_field_is_placed_inside_its_quotes(tok) -> None:
    template = "{% for m in messages %}[{{ m.role }}]{{ m.content | tojson }}\n{% endfor %}"
    tr = render_truth(tok, [{"role": "user", "content": 'He said "hi"\nbye'}], template=template)
    assert tr.text == '[user]"He said \\"hi\\"\\nbye"\n'
    assert spans(tr) == [(0, "user", "content", 'He said \\"hi\\"\\nbye')]


def test_twice_escaped_and_quote_escaped_forms(tok) -> None:
    template = ("{% for m in messages %}{% if m.role == 'user' %}{{ (m.content | tojson) | tojson }}"
                "{% else %}'{{ m.content | replace(\"'\", \"\\\\'\") }}'{% endif %}{{ '\\n' }}{% endfor %}")
    tr = render_truth(tok, [{"role": "user", "content": 'it\'s "x"'}, {"role": "assistant", "content": "don't"}],
                      template=template)
    assert tr.text == '"\\"it\'s \\\\\\"x\\\\\\"\\""\n\'don\\\'t\'\n'
    assert spans(tr) == [(0, "user", "content", 'it\'s \\\\\\"x\\\\\\"'),
                         (1, "assistant", "content", "don\\'t")]


def test_a_field_the_template_drops_is_absent(tok) -> None:
    template = ("{% for m in messages %}{% if m.role != 'system' %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                "<|im_end|>\n{% endif %}{% endfor %}")
    tr = render_truth(tok, [{"role": "system", "content": "secret"}, {"role": "user", "content": "hello"}],
                      template=template)
    assert spans(tr) == [(1, "user", "content", "hello")]
    assert tr.dropped == ("content of message 0",)
    assert "secret" not in tr.text


def test_qwen36_drops_earlier_reasoning_and_keeps_the_last(tok) -> None:
    msgs = [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1", "reasoning_content": "R one"},
            {"role": "user", "content": "Q2"},
            {"role": "assistant", "content": "<think>\nR two\n</think>\n\nA2"}]
    tr = render_truth(tok, msgs, template=trl_template("qwen3_6"), per_turn=True)
    assert spans(tr) == [(0, "user", "content", "Q1"), (1, "assistant", "content", "A1"),
                         (2, "user", "content", "Q2"), (3, "reasoning", "inline <think> reasoning", "R two"),
                         (3, "assistant", "content", "A2")]
    assert tr.dropped == ("reasoning_content of message 1",)
    # The generation prompt of Qwen3.6 holds "<think>\n": the model generates from the reasoning on.
    assert tr.prompt_text.endswith("<|im_start|>assistant\n<think>\n")
    assert tr.text[tr.generated[0]:] == "R two\n</think>\n\nA2<|im_end|>\n"


def test_tool_calls_name_keys_values_and_numbers(tok) -> None:
    template = ("{% for m in messages %}{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>"
                "{{ {'name': c.function.name, 'arguments': c.function.arguments} | tojson }}</tool_call>{% endfor %}"
                "{% else %}[{{ m.role }}]{{ m.content }}{% endif %}{{ '\\n' }}{% endfor %}")
    msgs = [{"role": "user", "content": "weather?"},
            {"role": "assistant", "content": "", "tool_calls": [call("get_weather", {"city": "Paris", "days": 3,
                                                                                    "metric": True})]}]
    tr = render_truth(tok, msgs, template=template)
    assert tr.text == ('[user]weather?\n<tool_call>{"name": "get_weather", "arguments": '
                       '{"city": "Paris", "days": 3, "metric": true}}</tool_call>\n')
    assert spans(tr) == [(0, "user", "content", "weather?"), (1, "tool_call", "tool_calls[0].name", "get_weather"),
                         (1, "tool_call", "tool_calls[0].arguments.city", "city"),
                         (1, "tool_call", "tool_calls[0].arguments.city=value", "Paris"),
                         (1, "tool_call", "tool_calls[0].arguments.days", "days"),
                         (1, "tool_call", "tool_calls[0].arguments.days=value", "3"),
                         (1, "tool_call", "tool_calls[0].arguments.metric", "metric"),
                         (1, "tool_call", "tool_calls[0].arguments.metric=value", "true")]
    # A JSON-string argument is the call's text as one piece.
    msgs[1]["tool_calls"][0]["function"]["arguments"] = '{"city": "Lyon"}'
    tr = render_truth(tok, msgs, template=template)
    assert spans(tr)[-1] == (1, "tool_call", "tool_calls[0].arguments", '{\\"city\\": \\"Lyon\\"}')


def test_sorted_arguments_and_a_repeated_function_name(tok) -> None:
    """Keys in dictsort order; a name the template writes again in a response header is scaffold there."""
    template = ("{% set ns = namespace(name='') %}{% for m in messages %}"
                "{% if m.tool_calls %}{% for c in m.tool_calls %}{% set ns.name = c.function.name %}"
                "call {{ c.function.name }}({% for k, v in c.function.arguments | dictsort %}{{ k }}={{ v }};{% endfor %})"
                "{% endfor %}{% elif m.role == 'tool' %} <{{ ns.name }} says> {{ m.content }}"
                "{% else %}[{{ m.role }}] {{ m.content }}{% endif %}{{ '\\n' }}{% endfor %}")
    msgs = [{"role": "user", "content": "go"},
            {"role": "assistant", "tool_calls": [call("lookup", {"zeta": "last", "alpha": "first"})]},
            {"role": "tool", "tool_call_id": "c1", "content": "found it"}]
    tr = render_truth(tok, msgs, template=template)
    assert tr.text == "[user] go\ncall lookup(alpha=first;zeta=last;)\n <lookup says> found it\n"
    assert spans(tr) == [(0, "user", "content", "go"), (1, "tool_call", "tool_calls[0].name", "lookup"),
                         (1, "tool_call", "tool_calls[0].arguments.alpha", "alpha"),
                         (1, "tool_call", "tool_calls[0].arguments.alpha=value", "first"),
                         (1, "tool_call", "tool_calls[0].arguments.zeta", "zeta"),
                         (1, "tool_call", "tool_calls[0].arguments.zeta=value", "last"),
                         (2, "tool", "content", "found it")]
    copy_at = tr.text.index("<lookup") + 1
    assert (tr.char_class[copy_at:copy_at + 6] == CharClass.SCAFFOLD).all()


def test_tool_responses_rendered_inside_the_assistant_turn(tok) -> None:
    """Text order differs from message order (Gemma 4 style): truth follows the rendering."""
    template = ("{% for m in messages %}{% if m.role == 'assistant' %}<model>"
                "{% for c in m.tool_calls or [] %}[call {{ c.function.name }}]{% endfor %}"
                "{% for t in messages[loop.index0 + 1:] if t.role == 'tool' %}[result {{ t.content }}]{% endfor %}"
                "{{ m.content }}</model>{% elif m.role == 'user' %}<user>{{ m.content }}</user>{% endif %}{% endfor %}")
    msgs = [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": "done", "tool_calls": [call("ping", {})]},
            {"role": "tool", "tool_call_id": "c1", "content": "pong"}]
    tr = render_truth(tok, msgs, template=template)
    assert spans(tr) == [(0, "user", "content", "hi"), (1, "tool_call", "tool_calls[0].name", "ping"),
                         (2, "tool", "content", "pong"), (1, "assistant", "content", "done")]


def test_boundary_token_straddles_scaffold_and_content(tok) -> None:
    tr = render_truth(tok, [{"role": "user", "content": "Hello"}], template="User:{{ ' ' + messages[0].content }}")
    texts = [tr.token_text(t) for t in range(tr.n_tokens)]
    assert texts == ["User", ":", " Hello"]
    assert tr.token_field[2] == -2
    assert tr.classes_of_token(2) == [CharClass.SCAFFOLD, CharClass.USER]


def test_per_turn_generated_range(tok) -> None:
    msgs = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]
    tr = render_truth(tok, msgs, template=CHATML, per_turn=True)
    assert tr.prompt_text == "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"
    assert tr.text[tr.generated[0]:tr.generated[1]] == "A<|im_end|>\n"
    assert [tr.token_text(t) for t in tr.generated_tokens()] == ["A", "<|im_end|>", "\n"]
    with pytest.raises(ValueError, match="ends with an assistant message"):
        render_truth(tok, msgs[:1], template=CHATML, per_turn=True)


def test_per_turn_with_a_template_that_rewrites_history(tok) -> None:
    """Like gpt-oss: a note kept only while no answer follows. The prompt parts before the turn: no range."""
    template = ("{% for m in messages %}{% if m.role == 'user' %}[u]{{ m.content }}"
                "{% elif m.note is defined and loop.last is false and messages[-1].role != 'assistant' %}"
                "[note]{{ m.note }}[a]{{ m.content }}{% else %}[a]{{ m.content }}{% endif %}{% endfor %}"
                "{% if add_generation_prompt %}[a]{% endif %}")
    msgs = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A1", "note": "n"},
            {"role": "user", "content": "Q2"}, {"role": "assistant", "content": "A2"}]
    tr = render_truth(tok, msgs, template=template, per_turn=True)
    assert tr.prompt_text == "[u]Q[note]n[a]A1[u]Q2[a]" and tr.text == "[u]Q[a]A1[u]Q2[a]A2"
    assert tr.generated is None and "content of message 1" in tr.history_rewritten
    assert len(tr.generated_tokens()) == 0


# --------------------------------------------------------------------------- refusing to guess


def test_a_field_rendered_twice_is_unavailable(tok) -> None:
    with pytest.raises(TruthUnavailable, match="more than once"):
        render_truth(tok, [{"role": "user", "content": "echo"}],
                     template="{% for m in messages %}{{ m.content }}|{{ m.content }}{% endfor %}")


def test_an_ambiguous_reading_is_unavailable(tok) -> None:
    """'a\\\\' then '\\\\b' written raw then escaped: a + three backslashes + b reads two ways."""
    template = "{{ messages[0].content }}{{ (messages[1].content | tojson)[1:-1] }}"
    msgs = [{"role": "user", "content": "a\\"}, {"role": "assistant", "content": "\\b"}]
    with pytest.raises(TruthUnavailable, match="two ways"):
        render_truth(tok, msgs, template=template)


def test_a_template_that_branches_on_the_text_is_unavailable(tok) -> None:
    template = "{% for m in messages %}{% if '?' in m.content %}Q: {% endif %}{{ m.content }}\n{% endfor %}"
    with pytest.raises(TruthUnavailable, match="not written as its text"):
        render_truth(tok, [{"role": "user", "content": "ok"}, {"role": "user", "content": "Why?"}], template=template)


def test_a_transformed_field_is_not_taken_for_dropped(tok) -> None:
    with pytest.raises(TruthUnavailable, match="before any field"):
        render_truth(tok, [{"role": "user", "content": "hello"}], template="{{ messages[0].content | upper }}")


def test_a_rejecting_template_raises_template_rejected(tok) -> None:
    with pytest.raises(TemplateRejected, match="no users"):
        render_truth(tok, [{"role": "user", "content": "x"}], template="{{ raise_exception('no users') }}")


def test_an_unknown_role_is_unavailable(tok) -> None:
    with pytest.raises(TruthUnavailable, match="narrator"):
        render_truth(tok, [{"role": "narrator", "content": "x"}], template=CHATML)


# --------------------------------------------------------------------------- check_labels


def _chat(tok, per_turn: bool = False) -> TruthRender:
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"},
            {"role": "assistant", "content": "Hello!"}]
    return render_truth(tok, msgs, template=CHATML, per_turn=per_turn)


def _labels_by_hand(tr: TruthRender) -> np.ndarray:
    """ChatML labels written from the text: header, content, end, newline."""
    role = np.zeros(tr.n_tokens, dtype=np.uint8)
    current, after_end = Role.OUTSIDE, False
    texts = [tr.token_text(t) for t in range(tr.n_tokens)]
    for t, text in enumerate(texts):
        if text == "<|im_start|>":
            current = {"system": Role.SYSTEM, "user": Role.USER, "assistant": Role.ASSISTANT}[texts[t + 1]]
            role[t] = Role.HEADER
        elif t and texts[t - 1] == "<|im_start|>" or (t > 1 and texts[t - 2] == "<|im_start|>" and text == "\n"):
            role[t] = Role.HEADER
        elif text == "<|im_end|>":
            role[t] = Role.ASSISTANT_END if current == Role.ASSISTANT else Role.END
            after_end = current == Role.ASSISTANT
        elif text == "\n" and t and texts[t - 1] == "<|im_end|>":
            role[t] = Role.AFTER_ASSISTANT_END if after_end else Role.OUTSIDE
        else:
            role[t] = current
    return role


def _check(tr: TruthRender, role: np.ndarray, problem: np.ndarray | None = None, **kw):
    problem = np.zeros(len(role), np.uint8) if problem is None else problem
    return check_labels(tr, role, problem, np.zeros(len(role), bool), **kw)


def test_correct_labels_pass(tok) -> None:
    tr = _chat(tok, per_turn=True)
    assert _check(tr, _labels_by_hand(tr)) == []


def test_rule_a_content_token_with_the_wrong_role(tok) -> None:
    tr = _chat(tok)
    role = _labels_by_hand(tr)
    t = [tr.token_text(k) for k in range(tr.n_tokens)].index(" there")
    role[t] = Role.ASSISTANT
    (m,) = _check(tr, role)
    assert (m.token, m.reason[:2], m.label) == (t, "a:", "ASSISTANT")
    assert "user content of message 1" in m.truth


def test_rule_a_system_as_user_and_unmarked_tool_calls(tok) -> None:
    tr = _chat(tok)
    role = _labels_by_hand(tr)
    role[role == Role.SYSTEM] = Role.USER
    assert _check(tr, role) and not _check(tr, role, system_as_user=True)
    assert allowed_roles(CharClass.TOOL_CALL) == {Role.TOOL_CALL}
    assert allowed_roles(CharClass.TOOL_CALL, unmarked_tool_calls=True) == {Role.TOOL_CALL, Role.ASSISTANT}


def test_rule_b_boundary_token(tok) -> None:
    tr = render_truth(tok, [{"role": "user", "content": "Hello"}], template="User:{{ ' ' + messages[0].content }}")
    role = np.array([Role.HEADER, Role.HEADER, Role.USER], dtype=np.uint8)
    assert _check(tr, role) == []
    role[2] = Role.HEADER  # the scaffold side's rule: before the first field, N
    assert _check(tr, role) == []
    role[2] = Role.ASSISTANT  # neither the user field's role nor N
    (m,) = _check(tr, role)
    assert m.token == 2 and m.reason.startswith("b:")


def test_rule_c_scaffold_between_fields(tok) -> None:
    tr = _chat(tok)
    role = _labels_by_hand(tr)
    texts = [tr.token_text(k) for k in range(tr.n_tokens)]
    # Between the user and the assistant field the scaffold reads N*A*: an assistant-turn role, then N again, fails.
    first_end = texts.index("<|im_end|>", texts.index("Hi"))
    role[first_end] = Role.ASSISTANT_HEADER
    (m,) = _check(tr, role)
    assert m.token == first_end + 1 and m.reason.startswith("c:") and "N*A*" in m.reason
    # The assistant header itself may be either (A or N).
    role = _labels_by_hand(tr)
    header = len(texts) - 1 - texts[::-1].index("<|im_start|>")
    role[header:header + 3] = Role.ASSISTANT_HEADER
    assert _check(tr, role) == []


def test_rule_d_generated_tokens_are_assistant_turn(tok) -> None:
    tr = _chat(tok, per_turn=True)
    role = _labels_by_hand(tr)
    role[-2:] = (Role.END, Role.OUTSIDE)  # the assistant's "<|im_end|>\n", generated by the model, read as N
    mm = _check(tr, role)
    assert [(m.token, m.reason[:2]) for m in mm] == [(tr.n_tokens - 2, "d:"), (tr.n_tokens - 1, "d:")]
    assert _check(_chat(tok), role) == []  # no generated range on a full rendering


def test_rule_e_problems_unless_truncated(tok) -> None:
    tr = _chat(tok)
    role = _labels_by_hand(tr)
    problem = np.zeros(tr.n_tokens, np.uint8)
    problem[3] = 6
    (m,) = _check(tr, role, problem)
    assert m.token == 3 and m.reason.startswith("e:")
    assert _check(tr, role[:-2], problem[:-2]) == []  # a truncated row may end inside a turn
    with pytest.raises(ValueError, match="do not fit"):
        _check(tr, np.concatenate([role, role]))
