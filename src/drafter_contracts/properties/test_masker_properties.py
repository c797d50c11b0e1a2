"""Template → mask properties: does the masker turn *any* conversation into the right row?

Each test is one property, checked by hypothesis on conversations from
:mod:`drafter_contracts.strategies` against the masker chosen with ``--masker``. The
conversations type the assistant header of the template under test into user and system
text (``ctx.markers``). The reference is independent of the masker: ids come from the
template's own ``apply_chat_template``, roles from the span oracle (token ids only),
allowed and required supervision from the mask rules a dataset run applies
(``contract.mask_rules`` under the convention's policy). A failure shows the shrunk conversation
and the decoded row with roles and supervised tokens marked. Each test runs its
hypothesis property through :func:`.expect.settle`, which turns known defects and
properties with nothing to test into xfails and skips that say why.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, note

from drafter_contracts import strategies as cs
from drafter_contracts.maskers import Row
from drafter_contracts.maskers.oracle import LEGEND
from drafter_contracts.properties.context import PropertyContext
from drafter_contracts.properties.expect import Tally, header_in_text, settle

NO_LIMIT = 1 << 30


# ------------------------------------------------------------------ helpers


def render(ctx: PropertyContext, messages: list[dict[str, Any]], tools: Any, *, prompt: bool = False) -> list[int]:
    """The template's own rendering (the tokenizer's, or the masker's tagged copy): the reference for ids."""
    return list(ctx.tokenizer.apply_chat_template(messages, tools=tools, tokenize=True, return_dict=True,
                                                  add_generation_prompt=prompt)["input_ids"])


def show_conversation(conv: dict[str, Any]) -> str:
    lines = [json.dumps(m, ensure_ascii=False) for m in conv["messages"]]
    if conv.get("tools"):
        lines.append("tools: " + json.dumps([t["function"]["name"] for t in conv["tools"]]))
    return "\n    ".join(lines)


def problem(ctx: PropertyContext, what: str, conv: dict[str, Any], max_len: int, row: Row | None = None,
            position: int = -1) -> AssertionError:
    """The failure: what is wrong, the conversation, and the decoded row (roles, ⟦supervised⟧)."""
    lines = [f"{ctx.masker.name}: {what}", f"  max_length={max_len}", "  conversation:\n    " + show_conversation(conv)]
    if row is not None:
        ids, mask = row
        shown_mask = mask if len(mask) == len(ids) else [False] * len(ids)
        lines.append(f"  row ({len(ids)} ids, {len(mask)} mask values):")
        lines.append("    " + ctx.oracle.show(ids, shown_mask, position, max_len))
        lines.append("  " + LEGEND)
    return AssertionError("\n".join(lines))


def template_accepts(ctx: PropertyContext, conv: dict[str, Any], tally: Tally) -> bool:
    """Whether the template renders this (valid-by-construction) conversation; the drawn conversations suit a
    strict Qwen template, and another template may refuse some (Cohere: no tool calls, alternating roles).
    A refused one is outside the property for this template: counted, not tested."""
    try:
        render(ctx, conv["messages"], conv["tools"])
    except Exception as exc:  # noqa: BLE001 (templates raise jinja2 errors, ValueError, ...)
        tally.skipped[f"the template refuses it ({type(exc).__name__}: {str(exc)[:80]})"] += 1
        return False
    return True


def refused_all(tally: Tally) -> str:
    refused = sum(tally.skipped.values())
    why = "; ".join(f"{k} x{v}" for k, v in tally.skipped.most_common(3))
    return f"the template refuses every conversation drawn ({refused} of {refused}: {why}), so there is nothing to test"


def rows_of(ctx: PropertyContext, conv: dict[str, Any], max_len: int) -> list[Row] | None:
    return ctx.masker.rows(copy.deepcopy(conv["messages"]), copy.deepcopy(conv["tools"]), ctx.tokenizer, max_len)


def expected_rows(ctx: PropertyContext, conv: dict[str, Any], max_len: int) -> list[tuple[list[int], int]]:
    """Reference rows as ``(ids, context_until)``.

    ``turns="all"``: one row, the whole conversation. ``turns="last"`` (one row per
    assistant turn): the render of the conversation up to each assistant turn that has
    context before it and whose context fits; ``context_until`` is where that render
    leaves the generation-prompt render (what inference already holds).
    """
    msgs, tools = conv["messages"], conv["tools"]
    if ctx.masker.turns != "last":
        return [(render(ctx, msgs, tools)[:max_len], 0)]
    out = []
    for j, m in enumerate(msgs):
        if m["role"] != "assistant" or j == 0:
            continue
        prompt = render(ctx, msgs[:j], tools, prompt=True)
        if len(prompt) >= max_len:
            continue
        full = render(ctx, msgs[:j + 1], tools)[:max_len]
        common = next((i for i, (a, b) in enumerate(zip(prompt, full)) if a != b), min(len(prompt), len(full)))
        out.append((full, common))
    return out


def aligned(ctx: PropertyContext, conv: dict[str, Any], max_len: int, row: Row, tally: Tally | None = None) -> None:
    ids, mask = row
    if len(ids) != len(mask):
        if tally is not None:
            tally.failed()
        raise problem(ctx, f"len(input_ids) {len(ids)} != len(loss_mask) {len(mask)}: packed rows would shift every "
                      "later mask", conv, max_len, row)


def match(expected: list[tuple[list[int], int]], ids: list[int]) -> tuple[list[int], int] | None:
    return next((e for e in expected if e[0] == ids), None)


# ------------------------------------------------------------------ properties


def _conversations(ctx: PropertyContext):
    return cs.conversations(markers=ctx.markers.headers)


def test_ids_equal_template_rendering(ctx: PropertyContext) -> None:
    """input_ids are the template's own rendering (cut at max_len); a valid conversation is not dropped."""
    tally = Tally()

    @given(conv=_conversations(ctx), max_len=cs.max_lengths())
    def prop(conv: dict[str, Any], max_len: int) -> None:
        if not template_accepts(ctx, conv, tally):
            return
        tally.example()
        rows = rows_of(ctx, conv, max_len)
        expected = expected_rows(ctx, conv, max_len)
        if not rows:
            if expected:
                tally.failed()
                raise problem(ctx, "dropped a valid conversation (no row)", conv, max_len)
            return
        for row in rows:
            if match(expected, row[0]) is None:
                tally.failed()
                ref = expected[0][0] if expected else []
                at = next((i for i, (a, b) in enumerate(zip(row[0], ref)) if a != b), min(len(row[0]), len(ref)))
                note(f"reference rendering: {ctx.oracle.show(ref, [False] * len(ref), at, max_len)}")
                raise problem(ctx, f"input_ids differ from the template's rendering from token {at} "
                              f"(row {len(row[0])} ids, reference {len(ref)})", conv, max_len, row, at)

    settle(ctx, "test_ids_equal_template_rendering", prop, tally, nothing_to_test=lambda: refused_all(tally))


def test_mask_is_sound(ctx: PropertyContext) -> None:
    """loss_mask is 1 only where the policy allows it (assistant spans per the oracle)."""
    tally = Tally()

    @given(conv=_conversations(ctx), max_len=cs.max_lengths())
    def prop(conv: dict[str, Any], max_len: int) -> None:
        if not template_accepts(ctx, conv, tally):
            return
        tally.example()
        tally.saw("assistant_header_in_text", header_in_text(conv, ctx.opener_headers))
        for row in rows_of(ctx, conv, max_len) or []:
            aligned(ctx, conv, max_len, row, tally)
            labels = ctx.oracle.labels_for(row[0], max_len)
            bad = np.flatnonzero(ctx.oracle.unsound_tokens(row[1], row[0], labels))
            if len(bad):
                tally.failed()
                raise problem(ctx, f"{len(bad)} supervised token(s) the policy forbids, first at token {bad[0]} "
                              f"(role {ctx.oracle.role_name(labels, int(bad[0]))})", conv, max_len, row, int(bad[0]))

    settle(ctx, "test_mask_is_sound", prop, tally, nothing_to_test=lambda: refused_all(tally))


def test_mask_is_complete(ctx: PropertyContext) -> None:
    """Every assistant content, reasoning and tool-call token the policy asks for is supervised."""
    tally = Tally()

    @given(conv=_conversations(ctx), max_len=cs.max_lengths())
    def prop(conv: dict[str, Any], max_len: int) -> None:
        if not template_accepts(ctx, conv, tally):
            return
        tally.example()
        expected = expected_rows(ctx, conv, max_len)
        for row in rows_of(ctx, conv, max_len) or []:
            aligned(ctx, conv, max_len, row, tally)
            if match(expected, row[0]) is None:
                continue  # a wrong row is test_ids_equal_template_rendering's finding
            labels = ctx.oracle.labels_for(row[0], max_len)
            missing = np.flatnonzero(ctx.oracle.missing_tokens(row[1], row[0], labels, max_len))
            if len(missing):
                tally.failed()
                raise problem(ctx, f"{len(missing)} assistant token(s) left unsupervised, first at token {missing[0]} "
                              f"(role {ctx.oracle.role_name(labels, int(missing[0]))})",
                              conv, max_len, row, int(missing[0]))

    settle(ctx, "test_mask_is_complete", prop, tally, nothing_to_test=lambda: refused_all(tally))


def test_mask_follows_the_reply_not_its_copy(ctx: PropertyContext) -> None:
    """A reply repeated in user, system or tool text, or by another reply, is supervised where the reply is.

    Aimed at producers that locate a reply's text in the rendering by searching for it: every example
    repeats a reply (``strategies.echoed_conversations``), so the defect shows in the first examples,
    not by chance. The copy must stay unsupervised (soundness) and the reply itself supervised
    (completeness), judged by the same oracle and policy as the other properties.
    """
    tally = Tally()

    @given(conv=cs.echoed_conversations(markers=ctx.markers.headers))
    def prop(conv: dict[str, Any]) -> None:
        if not template_accepts(ctx, conv, tally):
            return
        tally.example()
        expected = expected_rows(ctx, conv, NO_LIMIT)
        for row in rows_of(ctx, conv, NO_LIMIT) or []:
            aligned(ctx, conv, NO_LIMIT, row, tally)
            labels = ctx.oracle.labels_for(row[0], NO_LIMIT)
            bad = np.flatnonzero(ctx.oracle.unsound_tokens(row[1], row[0], labels))
            missing = (np.flatnonzero(ctx.oracle.missing_tokens(row[1], row[0], labels, NO_LIMIT))
                       if match(expected, row[0]) is not None else np.zeros(0, dtype=np.intp))
            for found, what in ((bad, "supervised token(s) the policy forbids"),
                                (missing, "assistant token(s) left unsupervised")):
                if len(found):
                    tally.failed()
                    raise problem(ctx, f"a reply repeated in {conv['echo'].replace('_', ' ')} text: {len(found)} "
                                  f"{what}, first at token {found[0]} (role "
                                  f"{ctx.oracle.role_name(labels, int(found[0]))})", conv, NO_LIMIT, row,
                                  int(found[0]))

    settle(ctx, "test_mask_follows_the_reply_not_its_copy", prop, tally, nothing_to_test=lambda: refused_all(tally))


def test_truncation_keeps_ids_and_mask_aligned(ctx: PropertyContext) -> None:
    """Rows are bounded by max_len, ids and mask have one length, and the cut row is a prefix of the uncut one."""
    tally = Tally()

    @given(conv=_conversations(ctx), max_len=cs.max_lengths())
    def prop(conv: dict[str, Any], max_len: int) -> None:
        if not template_accepts(ctx, conv, tally):
            return
        tally.example()
        rows = rows_of(ctx, conv, max_len) or []
        for row in rows:
            aligned(ctx, conv, max_len, row, tally)
            if len(row[0]) > max_len:
                tally.failed()
                raise problem(ctx, f"row longer than max_length: {len(row[0])} ids", conv, max_len, row, max_len)
        full = rows_of(ctx, conv, NO_LIMIT) or []
        for row in rows:
            if not any(f[0][:max_len] == row[0] and f[1][:max_len] == row[1] for f in full):
                tally.failed()
                uncut = next((f for f in full if f[0][:max_len] == row[0]), None)
                if uncut is None:
                    raise problem(ctx, "the cut row's ids are not a prefix of any uncut row", conv, max_len, row)
                at = next(i for i, (a, b) in enumerate(zip(row[1], uncut[1])) if a != b)
                raise problem(ctx, f"cutting at max_length changed the mask at token {at}", conv, max_len, row, at)

    settle(ctx, "test_truncation_keeps_ids_and_mask_aligned", prop, tally, nothing_to_test=lambda: refused_all(tally))


def test_invalid_conversation_is_rejected_or_skipped(ctx: PropertyContext) -> None:
    """A conversation the template refuses raises or is skipped; never a row.

    Only the drawn conversations the template under test refuses are tested: a lenient
    template renders some or all of them (then there is nothing to reject, and the test
    skips saying so rather than reporting hypothesis' Unsatisfiable).
    """
    tally = Tally()

    @given(conv=cs.invalid_conversations(markers=ctx.markers.headers))
    def prop(conv: dict[str, Any]) -> None:
        try:
            render(ctx, conv["messages"], conv["tools"])
        except Exception:  # noqa: BLE001 (templates raise jinja2 errors, ValueError, ...)
            pass
        else:
            tally.skipped[conv["invalid"]] += 1  # this template accepts it: not a rejection case here
            return
        tally.example()
        tally.saw("unknown_role_rejected", conv["invalid"] == "unknown_role")
        try:
            rows = rows_of(ctx, conv, 4096)
        except Exception:  # noqa: BLE001 (rejecting is the right answer)
            return
        if rows:
            tally.failed()
            raise problem(ctx, f"made a row from a conversation the template rejects ({conv['invalid']})", conv, 4096,
                          rows[0], int(np.argmax(rows[0][1])) if any(rows[0][1]) else -1)

    def nothing_to_test() -> str:
        accepted = sum(tally.skipped.values())
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(tally.skipped.items()))
        return (f"the template accepts every invalid conversation drawn ({accepted} of {accepted}: {kinds}), "
                "so there is no rejection to test")

    settle(ctx, "test_invalid_conversation_is_rejected_or_skipped", prop, tally, nothing_to_test=nothing_to_test)


def test_same_conversation_same_rows(ctx: PropertyContext) -> None:
    """Deterministic: the same conversation twice gives the same rows (and the input is not mutated)."""
    tally = Tally()

    @given(conv=_conversations(ctx), max_len=cs.max_lengths())
    def prop(conv: dict[str, Any], max_len: int) -> None:
        if not template_accepts(ctx, conv, tally):
            return
        tally.example()
        before = copy.deepcopy(conv)
        messages, tools = copy.deepcopy(conv["messages"]), copy.deepcopy(conv["tools"])
        first = ctx.masker.rows(messages, tools, ctx.tokenizer, max_len)
        if messages != before["messages"] or tools != before["tools"]:
            tally.failed()
            raise problem(ctx, "the masker changed the conversation it was given", before, max_len)
        second = rows_of(ctx, conv, max_len)
        if first != second:
            tally.failed()
            raise problem(ctx, "two calls gave different rows", conv, max_len, (second or first or [None])[0])

    settle(ctx, "test_same_conversation_same_rows", prop, tally, nothing_to_test=lambda: refused_all(tally))


@pytest.mark.parametrize("template", ["without_generation_tags", "with_generation_tags"])
def test_support_probe(ctx: PropertyContext, template: str) -> None:
    """The producer's assistant-mask probe never crashes on a strict template, and answers right."""
    probe = ctx.masker.probe
    if probe is None:
        pytest.skip(f"{ctx.masker.name} ({ctx.masker.version}) has no assistant-mask support probe")
    if ctx.tagged_template is None:
        pytest.skip("no generation-tagged copy of the tokenizer's template (pass --chat-template FILE)")
    from drafter_contracts.maskers.hf import strip_generation_tags

    text = ctx.tagged_template if template == "with_generation_tags" else strip_generation_tags(ctx.tagged_template)
    tok = ctx.with_template(text)
    try:
        tok.apply_chat_template([{"role": "assistant", "content": "x"}], tokenize=False)
        strict = False
    except Exception:  # noqa: BLE001
        strict = True
    try:
        answer = probe(tok)
    except Exception as exc:  # noqa: BLE001
        kind = "strict " if strict else ""
        pytest.fail(f"{ctx.masker.name}: the support probe crashed on a {kind}template {template}: "
                    f"{type(exc).__name__}: {exc}", pytrace=False)
    want = template == "with_generation_tags"
    assert bool(answer) is want, f"{ctx.masker.name}: probe says {answer!r} for a template {template}"
