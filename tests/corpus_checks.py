"""The oracle against the rendering's truth on a corpus of vendors' templates (TRL's, axolotl's).

``corpus`` is the fixture module of one corpus (``fixtures.real_templates`` or
``fixtures.axolotl_templates``): both give a template's rules, text, tokenizer, vocabulary and
conversations under the same names, so one check serves both.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from drafter_contracts.errors import UsageProblem
from drafter_contracts.spans.resolve import make_oracle
from drafter_contracts.spans.truth import TemplateRejected, check_labels, render_truth


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
