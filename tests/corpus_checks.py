"""The oracle against the rendering's truth on a corpus of vendors' templates (TRL's, axolotl's).

``corpus`` is the fixture module of one corpus (``fixtures.real_templates`` or
``fixtures.axolotl_templates``): both give a template's rules, text, tokenizer, vocabulary and
conversations under the same names, so one check serves both.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from drafter_contracts.errors import UsageProblem
from drafter_contracts.spans import make_oracle
from drafter_contracts.spans.learn.truth import TemplateRejected, check_labels, render_truth


def truths(corpus: ModuleType, name: str, n: int, long: int = 0) -> list[tuple[str, object]]:
    """(where, truth) of every full and per-turn rendering; TruthUnavailable propagates (an error, never an xfail)."""
    tok = corpus.load_template_tokenizer(name)
    cs = corpus.cases(name, n, tokenizer=tok)
    if long:
        cs.cases += corpus.long_cases(name, long, tokenizer=tok).cases
    out = []
    for case in cs.cases:
        for j in [None, *case.assistant_turns()]:
            msgs = case.messages if j is None else case.messages[:j + 1]
            try:
                tr = render_truth(tok, msgs, case.tools, template=corpus.template_text(name), per_turn=j is not None,
                                  **case.kwargs)
            except TemplateRejected:
                continue
            out.append((f"{case.origin} {'full' if j is None else f'per-turn {j}'}", tr))
    assert out, f"{name}: every rendering rejected"
    return out


def oracle_check(corpus: ModuleType, name: str, n: int, long: int = 0) -> int:
    """Label every full and per-turn rendering; AssertionError on the first disagreement. Returns renderings checked.

    The truth of every rendering is taken first, so a template the oracle fails still has
    all of its renderings' truth checked.
    """
    r = corpus.rules(name)
    renders = truths(corpus, name, n, long)
    vocab = corpus.template_vocabulary(name)
    try:
        oracle = make_oracle(vocab, "auto")
    except UsageProblem as exc:
        if r.text_marked:
            return 0
        raise AssertionError(f"refused: {exc}") from None
    finally:
        vocab.save_tables()  # the next process reads the vocabulary's tables instead of tokenizer.json
    if r.text_marked:
        raise AssertionError(f"not refused although {r.text_marked}: {oracle.how}")
    for where, tr in renders:
        labels = oracle.label(tr.ids, np.array([0, tr.n_tokens], dtype=np.int64), 1 << 30)
        found = check_labels(tr, labels.role, labels.problem, labels.boundary, system_as_user=r.system_as_user,
                             unmarked_tool_calls=r.unmarked_tool_calls)
        if found:
            raise AssertionError(f"{where}: {found[0]} ({len(found)} mismatches)")
    return len(renders)


def relaxations_in_force(corpus: ModuleType, name: str) -> list[tuple[str, str, str]] | None:
    """The relaxations the chosen profile keeps, each with the rendering that needs it (None: refused).

    Holds "no relaxation without a probe": every relaxation the profile has is listed with a
    rendering of the template's own probes that is mislabelled without it, and nothing else is listed.
    """
    from drafter_contracts.spans.learn.relax import relaxations
    from drafter_contracts.spans.learn.probes import EVIDENCE, PROBES

    vocab = corpus.template_vocabulary(name)
    try:
        oracle = make_oracle(vocab, "auto")
    except UsageProblem:
        return None
    kept = list(oracle.profile.relaxations)
    assert sorted(rx.name for rx in relaxations(oracle.profile)) == sorted(n for n, _, _ in kept), (
        f"{name}: relaxations in force {[rx.name for rx in relaxations(oracle.profile)]}, with a probe that needs them "
        f"{[n for n, _, _ in kept]}")
    for rname, allows, needed_by in kept:
        assert allows and needed_by.split(":", 1)[0].split(" ")[0] in {*PROBES, *EVIDENCE}, f"{name}: {rname} needed by {needed_by!r}"
    off = oracle.verification.turned_off
    assert oracle.verification.checked and not set(off) & {n for n, _, _ in kept}
    return kept


def negative_check(corpus: ModuleType, name: str, report: object) -> list[object]:
    """Every negative probe of one marker fails a contract, bar two named kinds; returns the rows that pass.

    The kinds: a *twin* (the template renders the identical tokens from an honest conversation: the typed
    header's text split off into a message of its own), and a row a relaxation in force lets pass (the row
    fails with any one of them turned off; each is in force because a rendering of the template needs it):
    GLM's and Mistral's turns that end at the next header, DeepSeek's system text after the BOS, which any
    header closes, Gemma 4's model turn, reopenable after the tool output that sits inside it.
    Forged turn boundaries (an end marker typed right before a header) are counted, not held: with special
    tokens parsed from the text they are turn boundaries in token ids (docs/real-templates.md).
    """
    r = corpus.rules(name)
    if report.refused is not None:
        assert r.text_marked or "refused (exit 4)" in handling_row(corpus, name), f"{name}: refused ({report.refused})"
        return []
    assert report.rows, f"{name}: no negative probe rendered ({report.not_rendered[:3]})"
    kept = {n for n, _, _ in make_oracle(corpus.template_vocabulary(name), "auto").profile.relaxations}
    passing = report.passing(single=True)
    for row in passing:
        assert row.twin or row.allowed_by, f"{name}: {row.target} text typing {row.typed!r} passes every contract ({row})"
        assert set(row.allowed_by) <= kept, (name, row)
    return passing


def handling_row(corpus: ModuleType, name: str) -> str:
    from drafter_testkit import template_table

    return template_table.handling(name, "axolotl" if corpus.__name__.endswith("axolotl_templates") else "trl").row()
