"""The span oracle and the ground truth on the vendors' own chat templates (TRL 1.16.0's corpus).

Three things are checked per template: the tokenizer built for it (its vendor's special
tokens, ids asserted); for generation-tagged templates, that the rendering-based truth
agrees with the template authors' own ``{% generation %}`` tags; and that the oracle
``make_oracle(vocab, "auto")`` labels full and per-turn renderings as the truth says
(``check_labels`` finds nothing), or refuses a template whose turns are marked only by
text a user can type.

:data:`XFAIL` records the templates whose own renderings are defective, with the defect,
strictly: a template that starts passing turns the run red until its entry is removed. A template whose truth is unavailable is an error, never a skip.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import corpus_checks

from drafter_testkit import real_templates as rt
from drafter_testkit.template_table import TEMPLATE_DEFECTS, handling
from drafter_testkit.tiers import TRL_DEFAULT, default_vendors, tiered
from drafter_testkit.tokenizer import FIRST_SPECIAL_ID
from drafter_contracts.spans.learn.truth import CharClass, TemplateRejected, render_truth

NAMES = rt.template_names()
TAGGED = tuple(n for n in NAMES if rt.has_generation_tags(rt.template_text(n)))
#: Conversations per template in the default run, and in the slow sweep (plus long rows there).
DEFAULT_N, SLOW_N, SLOW_LONG = 8, 40, 2
DOCS = Path(__file__).resolve().parents[1] / "docs" / "real-templates.md"
TEMPLATES_DOC = DOCS.with_name("templates.md")

XFAIL = TEMPLATE_DEFECTS


def _xfail(name: str) -> tuple:
    return (pytest.mark.xfail(strict=True, raises=AssertionError, reason=XFAIL[name]),) if name in XFAIL else ()


#: Per-template parameters: the default tier's templates (drafter_testkit/tiers.py), the rest marked slow.
TIERED = tiered(NAMES, TRL_DEFAULT)
TIERED_XFAIL = tiered(NAMES, TRL_DEFAULT, _xfail)
TIERED_TAGGED = tiered(TAGGED, TRL_DEFAULT)


# --------------------------------------------------------------------------- the corpus and its tokenizers


def test_every_template_has_rules_a_vendor_and_a_description() -> None:
    assert len(NAMES) == 72, "TRL's corpus changed: review real_templates.py's tables"
    descriptions = rt.descriptions()
    for name in NAMES:
        assert rt.rules(name).vendor in rt.VENDORS, name
        assert descriptions.get(name), f"{name}: no description in trl/chat_templates/README.md"
    assert set(rt.TEXT_MARKED) <= set(NAMES)
    assert {rt.rules(n).vendor for n in NAMES} == set(rt.VENDORS)
    assert "lfm2_2_5" in TAGGED and "qwen3_6_training" in TAGGED and "qwen3_6" not in TAGGED


#: Marker-shaped strings a template writes that are text in the vendor's real tokenizer.
TEXT_MARKERS = {"<tools>", "</tools>", "<IMPORTANT>", "</IMPORTANT>", "<function>", "</function>", "<name>", "</name>",
                "<description>", "</description>", "<parameters>", "</parameters>", "<parameter>", "</parameter>",
                "<type>", "</type>", "<enum>", "</enum>", "<required>", "</required>", "<tool_output>",
                "</tool_output>", "<<SYS>>", "<</SYS>>"}
_MARKER = re.compile(r"<\|[^<>|\s]+\|>|<｜[^<>\s]+｜>|<\|[a-z_\"]+>|<[a-z_]+\|>|\[gMASK\]|<sop>|</?[a-z_]+>")


@pytest.mark.parametrize("name", NAMES)
def test_the_markers_a_template_writes_are_its_vendors_tokens(name: str) -> None:
    """Read from the template: every special-looking marker it writes is an added token of its tokenizer."""
    vendor = rt.vendor_of(name)
    code = re.sub(r"\{#.*?#\}", "", rt.template_text(name), flags=re.DOTALL)  # comments render nothing
    found = set(_MARKER.findall(code)) - TEXT_MARKERS
    missing = sorted(found - set(vendor.special_tokens))
    assert not missing, f"{name} writes {missing}, which {vendor.name}'s token table lacks"


@pytest.mark.parametrize("vendor", tiered(sorted(rt.VENDORS), default_vendors(TRL_DEFAULT, rt.vendor_of)))
def test_vendor_tokenizer_ids(vendor: str) -> None:
    tok = rt.load_vendor_tokenizer(vendor)
    v = rt.VENDORS[vendor]
    backend = tok.backend_tokenizer
    for k, t in enumerate(v.special_tokens):
        assert backend.token_to_id(t) == FIRST_SPECIAL_ID + k, t
        assert backend.encode(t, add_special_tokens=False).ids == [FIRST_SPECIAL_ID + k], t
    assert (tok.bos_token, tok.eos_token) == (v.bos, v.eos)
    assert len(rt.added_tokens(tok)) == len(v.special_tokens)


# --------------------------------------------------------------------------- truth vs the authors' tags


def _renders(name: str, n: int):
    """(case, truth) of the full renderings of ``n`` adapted conversations (rejected ones skipped, counted)."""
    tok = rt.load_template_tokenizer(name)
    cs = rt.cases(name, n, tokenizer=tok)
    out, rejected = [], 0
    for case in cs.cases:
        try:
            out.append((case, render_truth(tok, case.messages, case.tools, template=rt.template_text(name),
                                           **case.kwargs)))
        except TemplateRejected:
            rejected += 1
    assert out, f"{name}: every conversation rejected ({rejected})"
    return tok, out


ASSISTANT_CLASSES = (CharClass.ASSISTANT, CharClass.REASONING, CharClass.TOOL_CALL)
OTHER_CLASSES = (CharClass.SYSTEM, CharClass.USER, CharClass.TOOL)


@pytest.mark.parametrize("name", TIERED_TAGGED)
def test_truth_agrees_with_the_generation_tags(name: str) -> None:
    tok, renders = _renders(name, DEFAULT_N)
    for case, tr in renders:
        out = tok.apply_chat_template(case.messages, tools=case.tools, chat_template=rt.template_text(name),
                                      tokenize=True, return_dict=True, return_assistant_tokens_mask=True,
                                      **case.kwargs)
        assert list(out["input_ids"]) == list(tr.ids), f"{name} {case.origin}: truth tokenized differently"
        mask = np.asarray(out["assistant_masks"], dtype=bool)
        inside = tr.field_tokens(ASSISTANT_CLASSES)
        outside = tr.field_tokens(OTHER_CLASSES)
        untagged = inside[~mask[inside]]
        tagged = outside[mask[outside]]
        assert not len(untagged), (f"{name} {case.origin}: assistant text outside the generation tags: "
                                   f"{[tr.token_text(t) for t in untagged[:5]]}")
        assert not len(tagged), (f"{name} {case.origin}: system/user/tool text inside the generation tags: "
                                 f"{[tr.token_text(t) for t in tagged[:5]]}")


def _docs_rows() -> dict[str, str]:
    text = DOCS.read_text("utf-8")
    assert rt.PLACEMENT_HEADER in text, f"{DOCS.name} lacks the generation-tag placement table"
    table = text.split(rt.PLACEMENT_HEADER, 1)[1].split("\n\n", 1)[0]
    return {row.split("`", 2)[1]: row for row in table.splitlines() if row.startswith("| `")}


def test_docs_generation_tag_table_lists_every_tagged_template() -> None:
    assert sorted(_docs_rows()) == sorted(TAGGED)


@pytest.mark.parametrize("name", TIERED_TAGGED)
def test_docs_generation_tag_row_is_current(name: str) -> None:
    """docs/real-templates.md says where the tags sit as measured (``python -m ...real_templates --placement``)."""
    assert _docs_rows().get(name) == rt.placement_row(name)


# --------------------------------------------------------------------------- the oracle vs the truth


def _truths(name: str, n: int, long: int = 0) -> list[tuple[str, object]]:
    return corpus_checks.truths(rt, name, n, long)


def _oracle_check(name: str, n: int, long: int = 0) -> int:
    return corpus_checks.oracle_check(rt, name, n, long)


@pytest.mark.parametrize("name", TIERED_XFAIL)
def test_oracle_matches_truth(name: str) -> None:
    _oracle_check(name, DEFAULT_N)


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(n, marks=_xfail(n)) for n in NAMES])
def test_oracle_matches_truth_sweep(name: str) -> None:
    """More conversations and long rows: the slow tier (``pytest -m slow``)."""
    _oracle_check(name, SLOW_N, SLOW_LONG)


def collection_order(item: pytest.Item) -> tuple[str, str]:
    """Each vendor's tests together (tests/conftest.py sorts by this): an xdist worker loads a tokenizer once."""
    params = item.callspec.params if hasattr(item, "callspec") else {}
    name = params.get("name") or params.get("vendor") or ""
    return (rt.vendor_of(name).name if name in NAMES else name, name)


@pytest.mark.parametrize("name", TIERED)
def test_docs_template_table_is_current(name: str) -> None:
    """docs/templates.md shows, for every template, what auto does with it (regenerate: python -m
    drafter_testkit.template_table)."""
    row = handling(name).row()
    assert row in TEMPLATES_DOC.read_text("utf-8").splitlines(), f"docs/templates.md is stale; its row must read: {row}"


# --------------------------------------------------------------------------- tightness


@pytest.mark.parametrize("name", TIERED)
def test_relaxations_in_force_each_have_the_probe_that_needs_them(name: str) -> None:
    """Every relaxation the chosen profile keeps is needed by a rendering of the template (named); the rest are off."""
    kept = corpus_checks.relaxations_in_force(rt, name)
    if kept is None:
        assert "refused (exit 4)" in handling(name).row(), name


@pytest.mark.parametrize("name", TIERED)
def test_negative_probes_fail(name: str) -> None:
    """User, system and tool text typing the template's own markers, tokenized with special tokens parsed and
    masked where a regex producer matches the typed header: every such row fails, bar the named kinds."""
    from drafter_testkit.negative_probes import cached_report

    corpus_checks.negative_check(rt, name, cached_report(rt, name))
