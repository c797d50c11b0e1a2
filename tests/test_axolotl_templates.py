"""The span oracle and the ground truth on axolotl 0.19.0's vendor templates (the second real corpus).

The same three checks as tests/test_real_templates.py, per template of axolotl's wheel
(``fixtures/axolotl_templates.py``): the tokenizer built for its vendor (ids asserted, for
the vendors TRL's corpus lacks); for generation-tagged templates, that the rendering-based
truth agrees with the authors' tags; and that ``make_oracle(vocab, "auto")`` labels full
and per-turn renderings as the truth says, or refuses (exit 4) a template whose turns only
text a user can type marks.

Without the wheel (``bash .ci/fetch-axolotl-templates`` downloads it) the corpus tests skip
with that reason, and under CI, whose ``.ci/run`` fetches it first, test_corpus_is_fetched_under_ci fails.
:data:`XFAIL` holds, strictly, the templates whose own renderings are defective
(``template_table.AXOLOTL_DEFECTS``) and the few the oracle cannot label yet although they are
sound (``AXOLOTL_ORACLE_GAPS``, each saying what the oracle lacks).
"""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest

import corpus_checks

from drafter_testkit import axolotl_templates as at
from drafter_testkit import real_templates as rt
from drafter_testkit import template_table
from drafter_testkit.template_table import AXOLOTL_DEFECTS, AXOLOTL_ORACLE_GAPS
from drafter_testkit.tiers import AXOLOTL_DEFAULT, default_vendors, tiered
from drafter_testkit.tokenizer import FIRST_SPECIAL_ID
from drafter_contracts.spans.learn.truth import CharClass, TemplateRejected, check_labels, render_truth

MISSING = at.unavailable_reason()
NAMES = at.template_names() if MISSING is None else ()
TAGGED = tuple(n for n in NAMES if rt.has_generation_tags(at.template_text(n)))
#: Conversations per template in the default run, and in the slow sweep (plus long rows there).
DEFAULT_N, SLOW_N, SLOW_LONG = 8, 40, 2
DOCS = Path(__file__).resolve().parents[1] / "docs" / "real-templates.md"
XFAIL = {**AXOLOTL_DEFECTS, **AXOLOTL_ORACLE_GAPS}


def _absent() -> list:
    """One parameter that says why the corpus is not there: a skip naming the fetch script (under CI,
    test_corpus_is_fetched_under_ci fails as well)."""
    return [pytest.param("(corpus absent)", marks=pytest.mark.skip(reason=MISSING or ""))]


def _names(names: tuple[str, ...], xfail: bool = False, tier: bool = True) -> list:
    """Per-template parameters; with ``tier``, only the default tier's templates (drafter_testkit/tiers.py)
    unmarked, the rest marked slow (the tests that read no tokenizer run every template by default)."""
    if not names and MISSING is not None:
        return _absent()
    marks = (lambda n: (pytest.mark.xfail(strict=True, raises=AssertionError, reason=XFAIL[n]),) if n in XFAIL else ()
             ) if xfail else (lambda n: ())
    return tiered(names, AXOLOTL_DEFAULT if tier else frozenset(names), marks)


# --------------------------------------------------------------------------- the wheel


def test_corpus_is_fetched_under_ci() -> None:
    """CI runs .ci/fetch-axolotl-templates before the tests: there the corpus must be readable."""
    if MISSING is not None and os.environ.get("CI"):
        pytest.fail(MISSING)
    if MISSING is not None:
        pytest.skip(MISSING)
    assert len(NAMES) == 36, "axolotl's corpus changed: review axolotl_templates.py's tables"


def test_an_absent_wheel_names_the_script_that_fetches_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(at.WHEEL_ENV, str(tmp_path / "nowhere.whl"))
    why = at.unavailable_reason()
    assert why is not None and at.FETCH_SCRIPT in why and "nowhere.whl" in why
    bad = tmp_path / "bad.whl"
    bad.write_bytes(b"not a zip")
    monkeypatch.setenv(at.WHEEL_ENV, str(bad))
    assert at.FETCH_SCRIPT in (at.unavailable_reason() or "")
    empty = tmp_path / "empty.whl"
    with zipfile.ZipFile(empty, "w") as z:
        z.writestr("axolotl/__init__.py", "")
    monkeypatch.setenv(at.WHEEL_ENV, str(empty))
    assert "holds no" in (at.unavailable_reason() or "")
    at.corpus.cache_clear()
    try:
        with pytest.raises(at.CorpusUnavailable, match="holds no"):
            at.corpus()
    finally:
        at.corpus.cache_clear()


@pytest.mark.parametrize("name", _names(NAMES, tier=False))
def test_every_template_has_rules_and_a_vendor(name: str) -> None:
    r = at.rules(name)
    assert r.vendor in at.VENDORS
    if r.same_as is not None:  # TRL's template (up to a final newline): its rules are reused, the texts must agree
        assert rt.template_text(r.same_as).strip() == at.template_text(name).strip()


def test_rules_cover_exactly_the_corpus() -> None:
    if MISSING is not None:
        pytest.skip(MISSING)
    assert set(at._BASE) == set(NAMES)
    assert {"alpaca", "metharme", "mistral_v1", "llava"} <= set(at.text_marked())
    assert {"phi_4", "llava"} <= set(TAGGED)


#: Marker-shaped strings these templates write that are text in the vendor's tokenizer (not added tokens).
TEXT_MARKERS = {"<tools>", "</tools>", "<tool>", "</tool>", "<co>", "</co>", "<documents>", "</documents>",
                "<tool_definitions>", "</tool_definitions>", "<active_output_modes>", "</active_output_modes>",
                "<tool_calls>", "</tool_calls>", "<citations>", "</citations>", "<tool_call>", "</tool_call>"}
_MARKER = re.compile(r"<\|[^<>|\s]+\|>|<｜[^<>\s]+｜>|<\|[a-z_\"]+>|<[a-z_]+\|>|\[/?[A-Z_]+\]|\[\|[a-z]+\|\]"
                     r"|</?[a-z_]+>")
#: Bracketed words some templates write that are no marker at all.
_NOT_MARKERS = {"[IMG_PLACEHOLDER]"}


@pytest.mark.parametrize("name", _names(NAMES, tier=False))
def test_the_markers_a_template_writes_are_its_vendors_tokens(name: str) -> None:
    """Every special-looking marker a template writes is an added token of its vendor (text-marked: none is)."""
    vendor = at.vendor_of(name)
    code = re.sub(r"\{#.*?#\}", "", at.template_text(name), flags=re.DOTALL)
    found = set(_MARKER.findall(code)) - _NOT_MARKERS
    if at.rules(name).text_marked:
        assert not found & {"[INST]", "[/INST]", "<|user|>", "<|model|>"} & set(vendor.special_tokens)
        return
    missing = sorted(found - set(vendor.special_tokens) - TEXT_MARKERS)
    assert not missing, f"{name} writes {missing}, which {vendor.name}'s token table lacks"


@pytest.mark.parametrize("vendor", tiered(sorted(at.NEW_VENDORS), default_vendors(AXOLOTL_DEFAULT, at.vendor_of))
                         if MISSING is None else _absent())
def test_vendor_tokenizer_ids(vendor: str) -> None:
    """The vendors added for this corpus (TRL's are checked in test_real_templates.py)."""
    if MISSING is not None:
        pytest.skip(MISSING)  # the tokenizer's stock template is this corpus' first template of the vendor
    tok = at.load_vendor_tokenizer(vendor)
    v = at.VENDORS[vendor]
    backend = tok.backend_tokenizer
    for k, t in enumerate(v.special_tokens):
        assert backend.token_to_id(t) == FIRST_SPECIAL_ID + k, t
        assert backend.encode(t, add_special_tokens=False).ids == [FIRST_SPECIAL_ID + k], t
    assert (tok.bos_token, tok.eos_token) == (v.bos, v.eos)
    assert len(rt.added_tokens(tok)) == len(v.special_tokens)


def test_mistral_tool_call_ids_are_fitted() -> None:
    """Mistral v3 raises on any tool-call id that is not 9 alphanumerics: adaptation rewrites them, consistently."""
    if MISSING is not None:
        pytest.skip(MISSING)
    agent = at.cases("mistral_v3_tekken", 1).cases[0]
    ids = [c["id"] for m in agent.messages for c in m.get("tool_calls") or []]
    answers = [m["tool_call_id"] for m in agent.messages if m["role"] == "tool"]
    assert ids and all(len(i) == 9 and i.isalnum() for i in ids)
    assert answers == ids  # each response still answers its call


#: Rows the built-ins added for this corpus must label: (family, template whose vendor tokenizer to use, text,
#: piece -> role of its first occurrence). The pieces are whole tokens of the row.
NEW_BUILTIN_ROWS = [
    ("llama4", "llama4",
     "<|begin_of_text|><|header_start|>user<|header_end|>\n\nWeather?<|eot|>"
     "<|header_start|>assistant<|header_end|>\n\n<|python_start|>Checking<|python_end|>"
     '{"name": "w", "parameters": {}}<|eot|><|header_start|>ipython<|header_end|>\n\n"cold"<|eot|>'
     "<|header_start|>assistant<|header_end|>\n\nCold.<|eot|>",
     {"Weather": "USER", "Checking": "ASSISTANT", "<|python_end|>": "ASSISTANT", "cold": "TOOL", "Cold": "ASSISTANT"}),
    ("exaone4", "exaone4",
     "[|system|]\nBe brief.[|endofturn|]\n[|user|]\nWeather?[|endofturn|]\n[|assistant|]\n<think>\n\n</think>\n\n"
     '<tool_call>{"name": "w"}</tool_call>[|endofturn|]\n[|tool|]\n<tool_result>{"result": "cold"}</tool_result>'
     "[|endofturn|]\n[|assistant|]\n<think>\n\n</think>\n\nCold.[|endofturn|]\n",
     {"Be": "SYSTEM", "Weather": "USER", "<tool_call>": "TOOL_CALL", "cold": "TOOL", "Cold": "ASSISTANT",
      "<think>": "REASONING"}),
    ("exaone", "exaone",  # EXAONE 3: the user turn ends with a newline and no marker
     "[|system|][|endofturn|]\n[|user|]Weather?\n[|assistant|]Cold.[|endofturn|]\n",
     {"Weather": "USER", "Cold": "ASSISTANT"}),
    ("jamba", "jamba",
     "<|startoftext|><|bom|><|system|> <|eom|><|bom|><|user|> Weather?<|eom|><|bom|><|assistant|> <tool_calls>[]"
     '</tool_calls><|eom|><|bom|><|tool|> (w){"t": "cold"}<|eom|><|bom|><|assistant|> Cold.<|eom|>',
     {" Weather": "USER", "<|eom|>": "END", "cold": "TOOL", " Cold": "ASSISTANT"}),
]


@pytest.mark.parametrize("family, template, text, expect", NEW_BUILTIN_ROWS if MISSING is None else [
    pytest.param("", "", "", {}, marks=pytest.mark.skip(reason=MISSING or ""))])
def test_new_builtin_rows(family: str, template: str, text: str, expect: dict[str, str]) -> None:
    """The built-ins added for this corpus (llama4, exaone, exaone4, jamba) on hand-written rows of their shape."""
    from drafter_contracts.spans.learn.builtin import builtin_profile
    from drafter_contracts.spans.labeller import label
    from drafter_contracts.spans.labels import Role
    from drafter_contracts.spans.profile import CompiledProfile

    vocab = at.template_vocabulary(template)
    vocab.save_tables()  # the next process reads the tables instead of tokenizer.json
    cp = CompiledProfile(builtin_profile(family, vocab), vocab.newline_lead)
    ids, spans = vocab.encode_with_offsets(text)
    got = label(np.asarray(ids, dtype=np.int64), np.array([0, len(ids)], dtype=np.int64), cp, 4096)
    pieces = [text[a:b] for a, b in spans]
    assert not got.problem.any(), [(p, int(q)) for p, q in zip(pieces, got.problem) if q]
    roles: dict[str, str] = {}
    for piece, r in zip(pieces, got.role):
        roles.setdefault(piece, Role(r).name)
    assert {k: roles.get(k) for k in expect} == expect


def test_exaone_builtin_labels_conversations_without_tools() -> None:
    """EXAONE 3 is refused by auto only for its tool probe (an oracle gap): the built-in itself labels every
    rendering of the conversations the template can render exactly."""
    if MISSING is not None:
        pytest.skip(MISSING)
    from drafter_contracts.spans.learn.builtin import builtin_profile
    from drafter_contracts.spans.learn.resolve import oracle_for_profile

    vocab = at.template_vocabulary("exaone")
    oracle = oracle_for_profile(builtin_profile("exaone", vocab), vocab)
    for where, tr in _truths("exaone", DEFAULT_N):
        labels = oracle.label(tr.ids, np.array([0, tr.n_tokens], dtype=np.int64), 1 << 30)
        found = check_labels(tr, labels.role, labels.problem, labels.boundary)
        assert not found, f"{where}: {found[0]}"


# --------------------------------------------------------------------------- truth vs the authors' tags


ASSISTANT_CLASSES = (CharClass.ASSISTANT, CharClass.REASONING, CharClass.TOOL_CALL)
OTHER_CLASSES = (CharClass.SYSTEM, CharClass.USER, CharClass.TOOL)


@pytest.mark.parametrize("name", _names(TAGGED))
def test_truth_agrees_with_the_generation_tags(name: str) -> None:
    tok = at.load_template_tokenizer(name)
    checked = 0
    for case in at.cases(name, DEFAULT_N, tokenizer=tok).cases:
        try:
            tr = render_truth(tok, case.messages, case.tools, template=at.template_text(name), **case.kwargs)
        except TemplateRejected:
            continue
        out = tok.apply_chat_template(case.messages, tools=case.tools, chat_template=at.template_text(name),
                                      tokenize=True, return_dict=True, return_assistant_tokens_mask=True,
                                      **case.kwargs)
        assert list(out["input_ids"]) == list(tr.ids), f"{name} {case.origin}: truth tokenized differently"
        mask = np.asarray(out["assistant_masks"], dtype=bool)
        inside, outside = tr.field_tokens(ASSISTANT_CLASSES), tr.field_tokens(OTHER_CLASSES)
        assert not len(inside[~mask[inside]]), f"{name} {case.origin}: assistant text outside the generation tags"
        assert not len(outside[mask[outside]]), f"{name} {case.origin}: other text inside the generation tags"
        checked += 1
    assert checked, f"{name}: every conversation rejected"


# --------------------------------------------------------------------------- the oracle vs the truth


def _truths(name: str, n: int, long: int = 0) -> list[tuple[str, object]]:
    return corpus_checks.truths(at, name, n, long)


def oracle_check(name: str, n: int, long: int = 0) -> int:
    return corpus_checks.oracle_check(at, name, n, long)


@pytest.mark.parametrize("name", _names(NAMES, xfail=True))
def test_oracle_matches_truth(name: str) -> None:
    oracle_check(name, DEFAULT_N)


@pytest.mark.slow
@pytest.mark.parametrize("name", _names(NAMES, xfail=True, tier=False))
def test_oracle_matches_truth_sweep(name: str) -> None:
    """More conversations and long rows: the slow tier (``pytest -m slow``)."""
    oracle_check(name, SLOW_N, SLOW_LONG)


def test_every_defect_names_a_template_of_the_corpus() -> None:
    if MISSING is not None:
        pytest.skip(MISSING)
    assert set(XFAIL) <= set(NAMES)
    assert not set(XFAIL) & set(at.text_marked())  # a text-marked template is refused, not a defect
    assert not set(AXOLOTL_DEFECTS) & set(AXOLOTL_ORACLE_GAPS)
    assert all(v.startswith("template defect: ") for v in AXOLOTL_DEFECTS.values())
    assert all(v.startswith("oracle gap: ") for v in AXOLOTL_ORACLE_GAPS.values())


# --------------------------------------------------------------------------- the docs


def _docs_section() -> str:
    text = DOCS.read_text("utf-8")
    assert template_table.AXOLOTL_HEADING in text, f"{DOCS.name} lacks the axolotl section"
    return text.split(template_table.AXOLOTL_HEADING, 1)[1]


@pytest.mark.parametrize("name", _names(NAMES))
def test_docs_row_is_current(name: str) -> None:
    """docs/real-templates.md's axolotl table is what the oracle does (``python -m ...template_table axolotl``)."""
    rows = {row.split("`", 2)[1]: row for row in _docs_section().splitlines() if row.startswith("| `")}
    assert rows.get(name) == template_table.handling(name, "axolotl").row()


def collection_order(item: pytest.Item) -> tuple[str, str]:
    """Each vendor's tests together (tests/conftest.py sorts by this): an xdist worker loads a tokenizer once."""
    params = item.callspec.params if hasattr(item, "callspec") else {}
    name = params.get("name") or params.get("template") or params.get("vendor") or ""
    return (at.vendor_of(name).name if name in NAMES else name, name)


# --------------------------------------------------------------------------- tightness


@pytest.mark.parametrize("name", _names(NAMES))
def test_relaxations_in_force_each_have_the_probe_that_needs_them(name: str) -> None:
    """Every relaxation the chosen profile keeps is needed by a rendering of the template (named); the rest are off.
    EXAONE 4 keeps no header that opens inside an open turn (only EXAONE 3's unclosed user turns need one)."""
    kept = corpus_checks.relaxations_in_force(at, name)
    if kept is None:
        assert "refused (exit 4)" in template_table.handling(name, "axolotl").row(), name
        return
    if name == "exaone4":
        assert not [n for n, _, _ in kept if n.startswith("header-inside-open-turn")], kept


@pytest.mark.parametrize("name", _names(NAMES))
def test_negative_probes_fail(name: str) -> None:
    """User, system and tool text typing the template's own markers, tokenized with special tokens parsed and
    masked where a regex producer matches the typed header: every such row fails, bar the named kinds."""
    from drafter_testkit.negative_probes import cached_report

    corpus_checks.negative_check(at, name, cached_report(at, name))


def test_negative_probes_catch_the_loose_exaone4_profile() -> None:
    """The probes can fail: with the assistant header allowed inside an open user turn (EXAONE 3's relaxation,
    which the EXAONE 4 profile had), user text typing ``[|assistant|]`` reads as a supervised reply that passes."""
    if MISSING is not None:
        pytest.skip(MISSING)
    from dataclasses import replace

    from drafter_contracts.spans.learn.builtin import builtin_profile
    from drafter_contracts.spans.labels import Role
    from drafter_contracts.spans.learn.resolve import oracle_for_profile
    from drafter_testkit.negative_probes import cached_report, probe_template

    vocab = at.template_vocabulary("exaone4")
    tight = builtin_profile("exaone4", vocab)
    loose = replace(tight, headers=tuple(replace(h, inside=(Role.USER,)) if h.role == Role.ASSISTANT else h
                                         for h in tight.headers))
    report = probe_template(at, "exaone4", oracle_for_profile(loose, vocab), targets=("user",))
    leaks = [r for r in report.passing() if r.read_as_assistant and not r.twin]
    assert [r.typed for r in leaks] == ["[|assistant|]\n"], report.passing()
    tight_report = cached_report(at, "exaone4")
    assert [r for r in tight_report.rows if r.target == "user" and r.typed == "[|assistant|]\n"][0].failed


@pytest.mark.slow
def test_exaone4_producer_rows_typing_the_assistant_header_all_fail() -> None:
    """speculators 0.7.0's regex path on the corpus' conversations for ``exaone4``, each also with ``[|assistant|]``
    typed into its first user message: every row whose mask covers the typed text fails a contract."""
    if MISSING is not None:
        pytest.skip(MISSING)
    from drafter_testkit.negative_probes import count_typed_marker_leaks
    from drafter_testkit.speculators_producer import SpeculatorsUnavailable, load_preprocessing

    try:
        load_preprocessing()
    except SpeculatorsUnavailable as exc:
        pytest.skip(str(exc))
    count = count_typed_marker_leaks(at, "exaone4", 20)
    assert count.leaking and not count.passing and count.caught == count.leaking
