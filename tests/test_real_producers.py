"""Real producers on TRL's real templates: no false alarm, no missed leak.

Every dataset is written by a producer's own code (transformers' generation-tag masks,
speculators 0.7.0's regex path, speculators 0.9.0's per-turn rows through the ``/render``
stand-in, SpecForge 0.2.0's ``build_eagle3_dataset``) on a corpus template
(``fixtures/real_producers.py``), and judged twice: by the ground truth of each row's rendering
(``spans/learn/truth.py``: a supervised token outside assistant text and in-turn scaffold is a leak, an
assistant field the row trains on left unsupervised is missing) and by the suite through the engine
with ``--contract auto`` (the generic contract: ``--template-profile auto``, ``convention = auto``)
and the dataset's tokenizer. The two must agree row for row: a dataset the truth calls correct
passes every per-row contract under the producer's convention, and a wrong one fails
``mask_on_assistant_spans`` on exactly its leaking rows and ``mask_covers_assistant_spans`` on
exactly its incomplete ones. The producers' own defects are in :data:`PRODUCER_DEFECTS`; the
templates' own defects, which the suite reports as such, in :data:`TEMPLATE_DEFECTS` (strict
xfails). The default tier runs :data:`DEFAULT` (one or two templates per family and producer); the
slow tier every family's mutants and the matrix: in CI the datasets with a recorded story (:func:`ci_matrix`),
with ``DRAFTER_CONTRACTS_FULL_MATRIX=1`` all of it. docs/producers.md holds the tables.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from drafter_testkit import real_mutants as rm
from drafter_testkit import real_producers as rp
from drafter_testkit import real_templates as rt

ON, COVERS = rm.ON, rm.COVERS
ALL = {j.key: j for j in rp.matrix()}

#: The default tier: every producer on Qwen3.6, and the cases whose handling differs most (harmony's
#: channels, Gemma 4's tool output inside the model turn, per-turn and SpecForge rows on Llama 3).
DEFAULT = (
    "generation-tags:qwen3_6_training", "speculators-0.7:qwen3_6", "speculators-0.9:qwen3_6", "specforge:qwen3_6@qwen3.5",
    "generation-tags:gptoss_training", "speculators-0.7:gemma4_v5", "speculators-0.9:llama3_1", "specforge:llama3_1@llama3",
)
#: Command A on axolotl's templates (when its wheel is there): speculators 0.7's regex path and the generation-tag
#: path on the tagged variants (``axolotl_templates.TRAINING``). The tool-use template (tool calls, results, the
#: tool plan as reasoning) is in the default tier; plain Command A, which renders no tools, in the slow one.
AXOLOTL_DEFAULT = ("speculators-0.7:axolotl/command_a_tool_use", "generation-tags:axolotl/command_a_tool_use_training")
#: One job per family and producer beyond the default tier that the slow tier's CI matrix always runs.
SLOW_SPREAD = (
    "generation-tags:llama3_training", "speculators-0.7:llama3_1", "speculators-0.9:gemma3", "specforge:qwen3@qwen3-instruct",
    "generation-tags:deepseekv3_training", "speculators-0.7:glm4moe", "speculators-0.9:phi3", "specforge:gemma@gemma",
)

#: Producer outputs the truth calls wrong, and why (the suite must fail exactly their wrong rows).
PRODUCER_DEFECTS: dict[str, str] = {
    **{f"speculators-0.7:{n}": "speculators 0.7's regex runs from the model header to the next '<turn|>', and Gemma 4 "
       "renders tool responses inside the model turn: the responses are supervised as assistant text"
       for n in ("diffusion_gemma", "gemma4_v5")},
    "speculators-0.7:glm4moe": "speculators 0.7 mis-detects GLM-4.5's assistant pattern (a turn has no end token of its "
                               "own): its regex matches no assistant turn, so no assistant text is supervised",
    **{f"speculators-0.7:{n}": "speculators 0.7's detected pattern covers only part of the assistant's output "
       "(harmony's final channel / the answer block): reasoning and tool-call blocks are left unsupervised"
       for n in ("gptoss", "muse_glimmer")},
    "speculators-0.7:axolotl/command_a": "speculators 0.7 learns its regex from renderings that end with the generation "
        "prompt axolotl's Command A always writes: it runs from the previous '<|END_OF_TURN_TOKEN|>' into the next "
        "header's '<|START_OF_TURN_TOKEN|><|', so of two replies in a row (this template drops the tool messages "
        "between them) the second is never matched and its content is left unsupervised",
    "speculators-0.7:axolotl/command_a_tool_use": "speculators 0.7's regex matches '<|START_RESPONSE|>' replies only: "
        "a tool-call turn (the tool plan in '<|START_THINKING|>', the calls in '<|START_ACTION|>') is left unsupervised",
    "specforge:glm4moe@glm-5.2": "SpecForge's glm-5.2 header '<|assistant|><think>' is not what GLM-4.5 renders "
                                 "('<|assistant|>\\n<think>'): no assistant turn matches, nothing is supervised",
    "specforge:gptoss@gpt-oss-naive": "SpecForge's gpt-oss-naive header (analysis channel opened right after "
                                      "'<|start|>assistant') never occurs in the real template's rendering: nothing "
                                      "is supervised",
}
#: Producers that write no dataset at all for a template, and why.
NO_OUTPUT: dict[str, str] = {
    "specforge:deepseek_r1_distill@deepseek-r1-distill": "SpecForge's deepseek-r1-distill configuration has no end "
        "token (None), and its GeneralParser builds its regex with re.escape(None): TypeError before any row",
    "specforge:gemma@gemma": "SpecForge adds its configuration's default system prompt, which Gemma 1's template "
                             "rejects ('System role not supported'): every conversation fails",
}
#: Producer outputs some of whose rows no template rendering explains (the truth cannot judge them).
UNEXPLAINED: dict[str, str] = {
    "specforge:deepseekv3@deepseek-v3": "SpecForge parses tool-call arguments into mappings; DeepSeek V3's template "
        "concatenates them as strings and raises TypeError, and SpecForge then writes its own fallback rendering "
        "(headers joined by hand, not the template's text): those rows are not the template's",
}

#: Templates whose own rendering is defective: the suite reports the defect, the truth reads the text
#: as the template meant it (strict: an entry that starts passing fails the run).
_DEEPSEEK_ROUND = ("template defect: DeepSeek V3 renders a second round of tool calls inside the open tool-outputs "
                   "block with no assistant header; the oracle reads that call as tool output (turns_well_formed: end "
                   "marker with no open turn), the truth as the assistant's call")
_GEMMA4_ANSWER = ("template defect: Gemma 4 v1/v3/v4 render an assistant message that follows tool responses after "
                  "'<turn|>' with no model header; the oracle reads it as text between turns (turns_well_formed), "
                  "the truth as assistant content")
TEMPLATE_DEFECTS: dict[str, str] = {
    "generation-tags:deepseekv3_training": _DEEPSEEK_ROUND,
    "speculators-0.7:deepseekv3": _DEEPSEEK_ROUND,
    **{f"{p}:{n}": _GEMMA4_ANSWER for p in ("speculators-0.7", "speculators-0.9") for n in ("gemma4", "gemma4_v3", "gemma4_v4")},
}
#: Producer defects that leave a part of the assistant's output out of every row holding it: ``--contract auto``
#: learns that as a convention which never trains the part (lossy, and legal: ``convention_losses`` warns);
#: declared with the producer's own convention, the suite fails exactly the truth's rows.
LEARNT_LOSSY: dict[str, str] = {f"speculators-0.7:{n}": "reasoning and tool calls never supervised, in every row: "
                                "learnt as a content-only convention" for n in ("gptoss", "muse_glimmer")}
#: Disagreements between the suite and the truth whose cause is not settled yet (strict xfails).
OPEN: dict[str, str] = {
    **{f"specforge:{n}@qwen3.5": "open: SpecForge's qwen3.5 header holds '<think>\\n', so turns rendered without a "
       "reasoning block are left unsupervised (the truth: incomplete rows). The dataset fails, but auto infers no "
       "convention from such rows and its closest (speculators-per-turn) names other rows; declared as specforge "
       "with reasoning_opener = context, the suite names the truth's rows plus one whose empty assistant message "
       "has its end token unsupervised (the same cause; the truth sees no field to train there)"
       for n in ("qwen3_5_think", "qwen3_5_nothink", "qwen3_6")},
}

#: Where ``--contract auto`` names another convention than the producer's, and why that is the same mask.
COINCIDES: dict[str, tuple[str, str]] = {
    **{f"{p}:{n}": ("generation-tags", "the template is tagged natively: speculators 0.7's probe takes transformers' "
       "generation-tag mask instead of its regex, and SpecForge's '<|im_end|>\\n' span is what the tags enclose")
       for p, n in [(p, n + c) for p, c in (("speculators-0.7", ""), ("specforge", "@lfm"))
                    for n in ("lfm2_2_5", "lfm2_2_5_v2", "lfm2_2_5_vl")]},
    "specforge:deepseekv3@deepseek-v3": ("generation-tags", "DeepSeek V3 writes nothing after "
                                         "'<｜end▁of▁sentence｜>', so SpecForge's span is the generation-tag mask"),
    **{f"specforge:{n}@llama3": ("generation-tags", "Llama 3 writes nothing after '<|eot_id|>', so SpecForge's span "
       "(through the end token and what follows it) is the generation-tag mask, which auto tries first")
       for n in ("llama3", "llama3_1", "llama3_2")},
}


def _param(key: str):
    reason = TEMPLATE_DEFECTS.get(key) or OPEN.get(key)
    marks = [pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)] if reason else []
    if key not in DEFAULT and key not in AXOLOTL_DEFAULT:
        marks.append(pytest.mark.slow)
    return pytest.param(key, marks=marks, id=key)


def _available(job: rp.Job) -> None:
    if job.producer == "specforge" and (why := rp.specforge_available()):
        pytest.skip(why)
    if job.producer.startswith("speculators"):
        root = Path(__file__).resolve().parents[1] / ".deps"
        version = job.producer.split("-")[1] + ".0"
        if not (root / f"speculators-{version}" / "speculators").is_dir():
            pytest.skip(f"no speculators {version} in {root}; run .ci/install-speculators '' {version}")


def check_job(key: str) -> dict:
    """The truth and the suite on one dataset; returns what was found (for the docs' table)."""
    job = ALL[key]
    _available(job)
    rp.ensure([job])
    doc = rp.records(job)
    if not doc["rows"]:
        assert key in NO_OUTPUT, f"{key}: the producer wrote no row ({doc['notes']}); record why in NO_OUTPUT"
        return {"rows": 0}
    assert key not in NO_OUTPUT, f"{key}: recorded as writing nothing, but it wrote {len(doc['rows'])} rows"
    truths = rp.judge(doc, job)
    unexplained = rp.unexplained_rows(truths)
    assert bool(unexplained) == (key in UNEXPLAINED), \
        f"{key}: rows without a truth: {[(i, truths[i].status) for i in unexplained[:3]]}"
    for i in reversed(unexplained):  # judged by nobody: left out of the comparison below
        truths[i] = rp.RowTruth("ok")
    verdict = rp.run_suite(rp.dataset_path(job), rp.template_vocabulary(job.template))
    if key in LEARNT_LOSSY:
        from drafter_contracts.contract import builtin_contracts, load_contract

        assert verdict.how.startswith("convention = auto: learnt from") and ON not in verdict.failing, verdict.how
        declared = load_contract(builtin_contracts()["generic"], {"mask": {"convention": job.convention}})
        verdict = rp.run_suite(rp.dataset_path(job), rp.template_vocabulary(job.template), declared)
    wrong, missing = rp.wrong_rows(truths), rp.incomplete_rows(truths)
    empty = [i for i, r in enumerate(doc["rows"]) if not r["supervised"]]
    assert verdict.failing.get("test_min_supervised", []) == empty, verdict.failing
    others = {k: v for k, v in verdict.failing.items() if k not in (ON, COVERS, "test_min_supervised")}
    assert not others, f"{key}: {others} ({ {k: verdict.reasons[k] for k in others} })"
    if unexplained:
        wrong = sorted(set(wrong) | (set(verdict.failing.get(ON, [])) & set(unexplained)))
        missing = sorted(set(missing) | (set(verdict.failing.get(COVERS, [])) & set(unexplained)))
    assert verdict.failing.get(ON, []) == wrong, (
        f"{key}: mask_on_assistant_spans fails rows {verdict.failing.get(ON, [])}, the truth says {wrong} leak "
        f"({verdict.reasons.get(ON)}; truth: {[truths[i].where for i in wrong[:2]]})")
    assert verdict.failing.get(COVERS, []) == missing, (
        f"{key}: mask_covers_assistant_spans fails rows {verdict.failing.get(COVERS, [])}, the truth says {missing} "
        f"are incomplete ({verdict.reasons.get(COVERS)}; truth: {[truths[i].unsupervised[:2] for i in missing[:2]]})")
    if wrong or missing:
        assert key in PRODUCER_DEFECTS, f"{key}: the producer's output is wrong on rows {wrong or missing}; record why"
    else:
        assert key not in PRODUCER_DEFECTS, f"{key}: recorded as a producer defect, but every row is right"
        want = COINCIDES.get(key, (job.convention, ""))[0]
        assert verdict.fits and verdict.convention == want, f"{key}: auto picked {verdict.how}"
    return {"rows": verdict.rows, "wrong": wrong, "missing": missing, "convention": verdict.convention,
            "fits": verdict.fits}


#: One clean dataset per family, under the convention that fits it.
MUTANT_BASE: dict[str, str] = {
    "qwen": "speculators-0.7:qwen3_6", "qwen-tags": "generation-tags:qwen3_6_training",
    "qwen-per-turn": "speculators-0.9:qwen3_6", "llama3": "speculators-0.7:llama3_1",
    "gemma": "speculators-0.7:gemma3", "gemma4": "generation-tags:diffusion_gemma_training",
    "deepseek": "generation-tags:deepseek_r1_distill_training", "phi3": "speculators-0.7:phi3_5",
    "lfm2": "generation-tags:lfm2_2_5", "cohere": "speculators-0.7:cohere", "glm4moe": "generation-tags:glm4moe_training",
    "gptoss": "generation-tags:gptoss_training", "nemotron3": "speculators-0.7:nemotron_3_nano",
    "muse_glimmer": "generation-tags:muse_glimmer_training", "specforge-llama3": "specforge:llama3_1@llama3",
    "command_a": "speculators-0.7:axolotl/command_a_tool_use",
    "command_a-tags": "generation-tags:axolotl/command_a_tool_use_training",
}
#: Datasets a fix was made for (regression cases of the slow tier in CI).
FIXED = ("speculators-0.9:diffusion_gemma", "speculators-0.9:gemma4_v5", "specforge:phi3@phi3", "specforge:phi3_5@phi3")
FULL_MATRIX = os.environ.get("DRAFTER_CONTRACTS_FULL_MATRIX") == "1"


def ci_matrix() -> set[str]:
    """The matrix the slow tier runs without ``DRAFTER_CONTRACTS_FULL_MATRIX=1``: the default tier's jobs, the
    mutants' bases, and every dataset with a recorded story (a producer or template defect, an open
    disagreement, no output, unexplained rows, a coinciding convention, a fix). Building all 133 datasets from
    scratch takes a quarter of an hour, more than CI can give one test module."""
    return (set(DEFAULT) | set(SLOW_SPREAD) | set(MUTANT_BASE.values()) | set(PRODUCER_DEFECTS) | set(TEMPLATE_DEFECTS) | set(OPEN)
            | set(NO_OUTPUT) | set(UNEXPLAINED) | set(COINCIDES) | set(FIXED) | (set(rp.AXOLOTL_JOBS) & set(ALL)))


@pytest.mark.parametrize("key", [_param(k) for k in ALL if FULL_MATRIX or k in ci_matrix()])
def test_producer_on_template(key: str) -> None:
    check_job(key)


@pytest.mark.slow
def test_the_matrix_says_what_it_covers() -> None:
    """A partial matrix is a visible skip naming how many datasets it leaves out, never a silent subset."""
    left = sorted(set(ALL) - ci_matrix())
    assert ci_matrix() <= set(ALL) and set(FIXED) <= set(ALL)
    if left and not FULL_MATRIX:
        pytest.skip(f"producer matrix run on {len(ALL) - len(left)} of {len(ALL)} datasets (each with a recorded "
                    f"story); DRAFTER_CONTRACTS_FULL_MATRIX=1 adds the {len(left)} others")


def test_every_default_job_is_in_the_matrix() -> None:
    assert set(DEFAULT) <= set(ALL)
    recorded = set(PRODUCER_DEFECTS) | set(TEMPLATE_DEFECTS) | set(COINCIDES) | set(NO_OUTPUT) | set(OPEN)
    # axolotl's templates join the matrix only with its wheel (.ci/fetch-axolotl-templates); with it, every one
    from drafter_testkit import axolotl_templates

    absent = set(rp.AXOLOTL_JOBS) if axolotl_templates.unavailable_reason() is not None else set()
    assert recorded - absent <= set(ALL)
    assert {ALL[k].producer for k in DEFAULT} == set(rp.PRODUCERS)
    assert not set(rt.TEXT_MARKED) & {j.template for j in ALL.values()}


def test_a_dataset_builds_from_any_working_folder(tmp_path: Path, monkeypatch) -> None:
    """The build runs in a subprocess (each producer's code in a process of its own); pytester's tests call it from a
    temporary folder, where ``python -m drafter_testkit...`` finds nothing unless the process starts at the checkout."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DRAFTER_CONTRACTS_CACHE", str(tmp_path / "cache"))  # nothing built yet, whatever ran before
    monkeypatch.delenv("PYTHONPATH", raising=False)
    job = rp.Job("generation-tags", "qwen3_6_training")
    rp.ensure([job], n=2)
    assert (rp.job_dir(job, 2) / "rows.json").is_file()
    assert rp.job_dir(job, 2).is_relative_to(tmp_path / "cache")


# --------------------------------------------------------------------------- the truth's judgement itself


def test_misplaced_supervision_reads_fields_and_gaps() -> None:
    """A clean generation-tag row is sound; its user text or the scaffold between two tool responses is not."""
    import numpy as np

    from drafter_contracts.spans.learn.truth import CharClass, render_truth
    from drafter_testkit.mask_judging import misplaced_supervision, unsupervised_fields

    tok = rt.load_template_tokenizer("qwen3_6_training")
    case = rt.cases("qwen3_6_training", 1).cases[0]  # the agent run: system, tools, two tool responses
    out = tok.apply_chat_template(case.messages, tools=case.tools, chat_template=rt.template_text("qwen3_6_training"),
                                  tokenize=True, return_dict=True, return_assistant_tokens_mask=True, **case.kwargs)
    truth = render_truth(tok, case.messages, case.tools, template=rt.template_text("qwen3_6_training"), **case.kwargs)
    mask = np.asarray(out["assistant_masks"], dtype=bool)
    assert misplaced_supervision(truth, mask).size == 0 and unsupervised_fields(truth, mask) == []
    user = truth.field_tokens([CharClass.USER])
    leak = mask.copy()
    leak[user[:3]] = True
    assert misplaced_supervision(truth, leak).tolist() == user[:3].tolist()
    tools = [f for f in truth.fields if f.char_class == CharClass.TOOL]
    between = np.flatnonzero((truth.offsets[:, 0] >= tools[0].end) & (truth.offsets[:, 1] <= tools[1].start))
    wrapper = mask.copy()
    wrapper[between] = True  # '</tool_response>\n<tool_response>\n' between two responses: no assistant turn there
    assert set(misplaced_supervision(truth, wrapper).tolist()) == set(between.tolist())
    reasoning = truth.field_tokens([CharClass.REASONING])
    dropped = mask.copy()
    dropped[reasoning] = False
    assert [truth.fields[k].char_class for k in unsupervised_fields(truth, dropped)] == [CharClass.REASONING] * len(
        {int(truth.token_field[t]) for t in reasoning})


# --------------------------------------------------------------------------- mutants per family

#: (family, mutant) pairs that do not apply, and why (the family's rows hold no such part).
_NO_TOOLS = "the family's template renders no tool calls, so its rows hold no tool response (real_templates.Rules)"
_NO_REASONING = "the family's template renders no reasoning field (real_templates.Rules)"
NOT_APPLICABLE: dict[tuple[str, str], str] = {
    **{(f, m): _NO_TOOLS for f in ("gemma", "deepseek", "phi3", "cohere") for m in ("tool_text", "tool_responses_supervised")},
    **{(f, "reasoning_dropped"): _NO_REASONING for f in ("llama3", "gemma", "phi3", "cohere", "specforge-llama3")},
    ("command_a-tags", "typed_header"): "axolotl's Command A tool-use template ignores add_generation_prompt (it "
        "writes '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' after every rendering), so no generation prompt shows an "
        "assistant header to type",
    ("command_a", "typed_header"): "as command_a-tags: the template's generation prompt adds nothing",
    **{("command_a", m): "every row of speculators 0.7's Command A dataset with a tool call (so a tool response and a "
       "tool plan) is one its regex already gets wrong (PRODUCER_DEFECTS), and mutants leave those alone; the "
       "generation-tag family (command_a-tags) carries this mutant"
       for m in ("tool_text", "reasoning_dropped", "tool_responses_supervised")},
    ("phi3", "typed_header"): "Phi-3's header '<|assistant|>\\n' is one special token plus a newline: typed as plain "
                              "text it splits where the clean row's BPE does not, so no row takes the insertion cleanly",
}
#: Mutants the convention learnt from the template accepts, and why (the suite must pass them).
ACCEPTED: dict[tuple[str, str], str] = {
    ("glm4moe", "header"): "GLM-4.5's training tags enclose part of the assistant header, so the generation-tags "
                           "convention learnt from them makes the header optional ('optional: header' in the summary); "
                           "the scaffold before an assistant message is in-turn by the truth too",
}
DEFAULT_MUTANT_FAMILIES = ("qwen", "gemma4", "gptoss", "command_a", "command_a-tags")
MUTANTS = (*rm.MUTANTS, "tool_responses_supervised")


def _mutant_param(family: str, mutant: str):
    marks = [] if family in DEFAULT_MUTANT_FAMILIES else [pytest.mark.slow]
    return pytest.param(family, mutant, marks=marks, id=f"{family}-{mutant}")


@pytest.mark.parametrize("family, mutant", [_mutant_param(f, m) for f in MUTANT_BASE for m in MUTANTS])
def test_mutant_is_caught(family: str, mutant: str, tmp_path: Path) -> None:
    if MUTANT_BASE[family] not in ALL:  # an axolotl template without axolotl's wheel
        from drafter_testkit import axolotl_templates

        pytest.skip(axolotl_templates.unavailable_reason() or f"{MUTANT_BASE[family]} is not in the matrix")
    job = ALL[MUTANT_BASE[family]]
    _available(job)
    rp.ensure([job])
    # a base with a producer defect: its wrong rows fail as they do on the clean dataset, and carry no mutant
    base = rp.run_suite(rp.dataset_path(job), rp.template_vocabulary(job.template)).failing \
        if MUTANT_BASE[family] in PRODUCER_DEFECTS else {}
    got = rm.make_mutant(mutant, job, tmp_path / "m", avoid=frozenset().union(*base.values()))
    if got is None:
        reason = NOT_APPLICABLE.get((family, mutant))
        if reason is None:
            pytest.fail(f"{family}: no row of {job.key} has what {mutant} corrupts; record why in NOT_APPLICABLE")
        pytest.skip(reason)
    assert (family, mutant) not in NOT_APPLICABLE, f"{family}-{mutant} applies now: remove its NOT_APPLICABLE entry"
    edits, path = got
    verdict = rp.run_suite(path, rp.template_vocabulary(job.template))
    if (family, mutant) in ACCEPTED:
        assert verdict.ok, f"{family}-{mutant}: recorded as accepted by the learnt convention, but {verdict.failing}"
        return
    assert verdict.convention == ALL[MUTANT_BASE[family]].convention or MUTANT_BASE[family] in COINCIDES, verdict.how
    failing = {test: set(rows) - set(edits) for test, rows in verdict.failing.items()}
    assert {t: r for t, r in failing.items() if r} == {t: set(r) for t, r in base.items()}, \
        f"{family}-{mutant}: rows the mutant left alone fail otherwise than on the clean dataset"
    failing = {test: set(rows) & set(edits) for test, rows in verdict.failing.items()}
    for test in set(failing) - {ON, COVERS}:
        pytest.fail(f"{family}-{mutant}: {test} fails rows {sorted(failing[test])} ({verdict.reasons[test]})")
    for row, edit in edits.items():
        hit = {t for t, rows in failing.items() if row in rows}
        if edit.some_of:
            assert hit and hit <= edit.fails, f"{family}-{mutant}: row {row} fails {hit}, expected some of {set(edit.fails)}"
        else:
            assert hit == set(edit.fails), f"{family}-{mutant}: row {row} fails {hit}, expected {set(edit.fails)} " \
                                           f"({verdict.reasons})"
    assert set().union(*failing.values()) == set(edits), f"{family}-{mutant}: other rows fail too: {failing}"
    if mutant in ("user_text", "typed_header"):
        assert any("user" in r for r in verdict.reasons[ON]), verdict.reasons[ON]


# --------------------------------------------------------------------------- a few real pytest runs


CLI_CASES = ("speculators-0.9:qwen3_6", "speculators-0.7:gemma4_v5")


@pytest.mark.parametrize("key", CLI_CASES)
def test_suite_cli_on_producer_output(pytester, key: str) -> None:
    """The same verdict through ``pytest --dataset-path`` in a real process (the generic contract)."""
    import json

    job = ALL[key]
    _available(job)
    rp.ensure([job])
    wrong = rp.wrong_rows(rp.judge(rp.records(job), job))
    result = pytester.runpytest_subprocess(f"--dataset-path={rp.dataset_path(job)}",
                                           f"--tokenizer={rp.template_tokenizer_dir(job.template)}",
                                           "--report-dir=reports", "-p", "no:cacheprovider", timeout=600)
    summary = json.loads((pytester.path / "reports" / "summary.json").read_text())
    failed = {k for k, c in summary["checks"].items() if c["verdict"] == "fail"}
    assert job.convention in summary["contract"]["mask_how"] or wrong, summary["contract"]["mask_how"]
    if wrong:
        assert result.ret == 1 and failed == {"mask_on_assistant_spans"}, result.stdout.str()[-3000:]
        assert summary["checks"]["mask_on_assistant_spans"]["rows_violating"] == len(wrong)
    else:
        assert result.ret == 0 and not failed, result.stdout.str()[-3000:]


def test_generation_prompt_of_a_template_that_closes_the_conversation() -> None:
    """Phi-3 ends a conversation without a prompt with '<|endoftext|>', which the prompt replaces: the prompt is
    still '<|assistant|>\\n' (it was lost, so per-turn rows were held to no prompt: a false alarm on every row)."""
    from drafter_contracts.spans.learn.resolve import generation_prompts

    vocab = rt.template_vocabulary("phi3")
    assert [vocab.decode(list(p)) for p in generation_prompts(vocab)] == ["<|assistant|>\n"]
