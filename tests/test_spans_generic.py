"""The generic labeller against a plain per-token reading of the same profile, on random marker soups.

Profiles come from the real family tokenizers (Qwen3.6 BPE + family special tokens);
rows are random sequences of their marker ids, newline runs and words. A second
property pins the ChatML fast path to the generic labeller on the ChatML profile.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drafter_contracts.fixtures.families import family_tokenizer_dir
from drafter_contracts.spans import chatml, generic
from drafter_contracts.spans.builtin import builtin_profile
from drafter_contracts.spans.labels import Role, TurnProblem
from drafter_contracts.spans.profile import CompiledProfile, TemplateProfile
from drafter_contracts.vocab import load_vocabulary

R, P = Role, TurnProblem
FAMILIES = ("chatml", "llama3", "mistral", "deepseek", "phi4", "gemma")


@pytest.fixture(scope="module")
def compiled() -> dict[str, tuple[CompiledProfile, list[int]]]:
    """Each family's compiled built-in profile, newline table, and an alphabet of ids to build rows from."""
    out = {}
    for name in FAMILIES:
        vocab = load_vocabulary(str(family_tokenizer_dir(name)))
        profile = builtin_profile(name, vocab)
        cp = CompiledProfile(profile, vocab.newline_lead)
        words = [vocab.single_id(w) for w in ("hello", " world", "user", "assistant", "model", "system")]
        newlines = [vocab.single_id("\n" * k) for k in (1, 2, 3)]
        markers = {i for h in cp.headers for i in (*h.core, *h.ends)}
        markers |= {i for p in (profile.reasoning, profile.tool_call) if p for i in p if i is not None}
        markers |= {i for i in (profile.after_end, profile.bos) if i is not None}
        out[name] = (cp, vocab.newline_lead, sorted({*markers, *(w for w in words if w is not None), *(n for n in newlines if n is not None)}))
    return out


# --- reference: one token at a time ---------------------------------------------------------

def _match(row: list[int], p: int, cp: CompiledProfile) -> tuple[int, bool]:
    """Index into cp.headers of the header starting at p (-1 none), and whether the row cut it short."""
    cut = False
    for si, h in enumerate(cp.headers):
        core = h.core
        if row[p:p + len(core)] == list(core):
            return si, False
        avail = row[p:]
        if len(avail) < len(core) and avail == list(core[:len(avail)]):
            cut = True
    return -1, cut


def reference(row: list[int], cp: CompiledProfile, max_len: int, newline_lead: np.ndarray
              ) -> tuple[list[int], list[bool], list[int]]:
    prof: TemplateProfile = cp.profile
    n = len(row)
    roles, boundary, problems = [int(R.OUTSIDE)] * n, [False] * n, [0] * n

    def flag(p: int, code: int) -> None:
        if 0 <= p < n and problems[p] == 0:
            problems[p] = code

    opener_ids = {h.core[0] for h in cp.headers}
    end_ids = set(cp.end_ids)
    turn = None  # dict: start, spec, role, hlen, closed_at
    prev = None  # ("S", spec) or ("E", None)
    sub_open: dict[str, int] = {}
    last_end_any = -2
    for p, t in enumerate(row):
        if t in opener_ids:
            nested = prev is not None and prev[0] == "S" and (prev[1] < 0 or bool(cp.headers[prev[1]].ends))
            if nested:
                problems[p] = P.HEADER_IN_OPEN_TURN
            spec, cut = _match(row, p, cp)
            same = [h for h in cp.headers if h.core[0] == t]  # what an unknown role's header looks like
            tails = {h.tail for h in same}
            if spec >= 0:
                hlen, tail = len(cp.headers[spec].core), cp.headers[spec].tail
            else:
                hlen = n - p if cut else min(min(len(h.core) for h in same), n - p)
                tail = tails.pop() if len(tails) == 1 else None
            if spec < 0 and not cut and p + 1 < n:
                nxt = row[p + 1]
                if nxt in end_ids:
                    flag(p + 1, P.MALFORMED_HEADER)
                elif nxt not in opener_ids:
                    flag(p + 1, P.UNKNOWN_ROLE)
            role = int(cp.headers[spec].role) if spec >= 0 else int(R.UNKNOWN_ROLE)
            if tail is not None and p + hlen < n and not any(x in opener_ids or x in end_ids for x in row[p + 1:p + hlen]):
                q = row[p + hlen]
                if q == tail:
                    hlen += 1
                elif bool(newline_lead[tail]) and cp.merges_tail[q]:
                    boundary[p + hlen] = True
                elif not nested and q not in opener_ids and q not in end_ids:
                    flag(p + hlen, P.MALFORMED_HEADER)
            if nested:
                role = int(R.INJECTED)
            turn = {"start": p, "spec": spec, "role": role, "hlen": hlen, "closed_at": None}
            prev, sub_open = ("S", spec), {}
        elif t in end_ids:
            ok = prev is not None and prev[0] == "S" and (prev[1] < 0 or t in cp.headers[prev[1]].ends)
            last_end_any = p
            if not ok:  # closes nothing, but is still the marker the next one follows
                flag(p, P.STRAY_END)
                roles[p], prev = int(R.OUTSIDE), ("E", None)
                continue
            roles[p] = int(R.ASSISTANT_END if turn["role"] == R.ASSISTANT else R.END)
            turn["closed_at"], prev = p, ("E", None)
            continue
        if turn is None:
            continue
        if turn["closed_at"] is not None:
            if p == last_end_any + 1 and t == prof.after_end:
                roles[p] = int(R.AFTER_ASSISTANT_END if turn["role"] == R.ASSISTANT else R.OUTSIDE)
            else:
                flag(p, P.TEXT_OUTSIDE_TURN)
            continue
        k = p - turn["start"]
        if k < turn["hlen"]:
            roles[p] = int(R.HEADER)
            continue
        role = turn["role"]
        if role == R.OUTSIDE:
            flag(p, P.TEXT_OUTSIDE_TURN)
            continue
        roles[p] = role
        if role == R.ASSISTANT and not boundary[p]:
            for name, pair, sub in (("r", prof.reasoning, R.REASONING), ("t", prof.tool_call, R.TOOL_CALL)):
                if pair is None:
                    continue
                if t == pair[0]:
                    sub_open[name] = 1
                closing = pair[1] is not None and t == pair[1]
                if sub_open.get(name) or (closing and name in sub_open):  # a block's closer is part of it
                    roles[p] = int(sub)
                if closing and name in sub_open:
                    sub_open[name] = 0
    if n:
        if row[0] not in opener_ids:
            flag(0, P.NO_LEADING_HEADER)
        if prof.bos is not None:
            for p in range(1, n):
                if row[p] == prof.bos:
                    problems[p] = P.MISPLACED_BOS
        if turn is not None and turn["closed_at"] is None and n < max_len:
            spec = turn["spec"]
            if spec < 0 or cp.headers[spec].ends:
                flag(n - 1, P.UNCLOSED_TURN)
    return roles, boundary, problems


def _run(rows: list[list[int]], cp, max_len: int):
    ids = np.array([i for r in rows for i in r], dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int64)
    return generic.label(ids, offsets, cp, max_len), offsets


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_generic_matches_per_token_reference(compiled, data):
    family = data.draw(st.sampled_from(FAMILIES))
    cp, lead, alphabet = compiled[family]
    rows = data.draw(st.lists(st.lists(st.sampled_from(alphabet), min_size=1, max_size=30), min_size=1, max_size=4))
    max_len = data.draw(st.sampled_from([max(len(r) for r in rows), 4096]))
    lab, offsets = _run(rows, cp, max_len)
    for i, row in enumerate(rows):
        roles, boundary, problems = reference(row, cp, max_len, lead)
        a, b = offsets[i], offsets[i + 1]
        assert lab.role[a:b].tolist() == roles, (family, row)
        assert lab.boundary[a:b].tolist() == boundary, (family, row)
        assert [bool(x) for x in lab.problem[a:b]] == [bool(x) for x in problems], (family, row, lab.problem[a:b].tolist(), problems)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_chatml_fast_path_equals_generic(compiled, data, vocab):
    cp, _, alphabet = compiled["chatml"]
    fast = chatml.ChatMLProfile.from_vocabulary(vocab)
    rows = data.draw(st.lists(st.lists(st.sampled_from(alphabet), min_size=1, max_size=30), min_size=1, max_size=4))
    max_len = data.draw(st.sampled_from([max(len(r) for r in rows), 4096]))
    ids = np.array([i for r in rows for i in r], dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int64)
    a, b = generic.label(ids, offsets, cp, max_len), chatml.label(ids, offsets, fast, max_len)
    np.testing.assert_array_equal(a.role, b.role)
    np.testing.assert_array_equal(a.boundary, b.boundary)
    np.testing.assert_array_equal(a.problem > 0, b.problem > 0)


# --- hand-written cases per family ------------------------------------------------------------

def _enc(name: str):
    vocab = load_vocabulary(str(family_tokenizer_dir(name)))
    return vocab, (lambda text: vocab.encode_with_offsets(text)[0])


@pytest.mark.parametrize("family, text, expect", [
    ("llama3", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
               "<|start_header_id|>assistant<|end_header_id|>\n\nYes<|eot_id|>",
     [R.HEADER] * 5 + [R.USER, R.END] + [R.HEADER] * 4 + [R.ASSISTANT, R.ASSISTANT_END]),
    ("gemma", "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nYes<end_of_turn>\n",
     [R.HEADER] * 4 + [R.USER, R.END, R.OUTSIDE] + [R.HEADER] * 3 + [R.ASSISTANT, R.ASSISTANT_END, R.AFTER_ASSISTANT_END]),
    ("mistral", "<s>[INST]Hi[/INST]Yes</s>", [R.HEADER, R.HEADER, R.USER, R.HEADER, R.ASSISTANT, R.ASSISTANT_END]),
    ("deepseek", "<｜begin▁of▁sentence｜>Be brief<｜User｜>Hi<｜Assistant｜><think>\nhm\n</think>\n\nYes<｜end▁of▁sentence｜>",
     None),
    ("phi4", "<|im_start|>user<|im_sep|>Hi<|im_end|><|im_start|>assistant<|im_sep|>Yes<|im_end|>",
     [R.HEADER] * 3 + [R.USER, R.END] + [R.HEADER] * 3 + [R.ASSISTANT, R.ASSISTANT_END]),
])
def test_family_rows(family, text, expect):
    vocab, enc = _enc(family)
    cp = CompiledProfile(builtin_profile(family, vocab), vocab.newline_lead)
    ids = enc(text)
    lab, _ = _run([ids], cp, 4096)
    assert not lab.problem.any()
    if expect is not None:
        assert [Role(r) for r in lab.role] == expect
    else:  # deepseek: bare system text after BOS, reasoning block inside the reply
        roles = [Role(r) for r in lab.role]
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
    lab, _ = _run([enc(text)], cp, 4096)
    assert problem in {TurnProblem(p) for p in lab.problem if p}


def test_llama_boundary_token_is_content(compiled):
    vocab, enc = _enc("llama3")
    cp = compiled["llama3"][0]
    ids = enc("<|begin_of_text|><|start_header_id|>assistant<|end_header_id|>\n\n\nYes<|eot_id|>")
    lab, _ = _run([ids], cp, 4096)
    j = ids.index(vocab.single_id("\n\n\n"))
    assert lab.boundary[j] and Role(lab.role[j]) == R.ASSISTANT and lab.boundary.sum() == 1
    assert not lab.problem.any()


def test_supervised_boundary_token_is_allowed_unless_strict(compiled):
    from drafter_contracts.checks.spans import disallowed_supervision
    from drafter_contracts.config import MaskPolicy

    vocab, enc = _enc("llama3")
    ids = enc("<|begin_of_text|><|start_header_id|>assistant<|end_header_id|>\n\n\nYes<|eot_id|>")
    lab, _ = _run([ids], compiled["llama3"][0], 4096)
    mask = np.zeros(len(ids), dtype=bool)
    mask[ids.index(vocab.single_id("\n\n\n")):-1] = True  # what a generation-tag masker writes
    assert not disallowed_supervision(mask, lab, MaskPolicy()).any()
    strict = disallowed_supervision(mask, lab, MaskPolicy(boundary_tokens="strict"))
    assert strict.sum() == 1 and lab.boundary[strict].all()
