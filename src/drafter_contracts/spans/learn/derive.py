"""Learn a :class:`TemplateProfile` from a tokenizer's own ``chat_template``.

Probe conversations whose contents are sentinel words are rendered through the
template (transformers' ``apply_chat_template``) and tokenized; the tokens between
sentinels are the headers and footers of each role, the special tokens around a
reasoning sentinel or a tool call are the assistant's sub-span markers. Everything
learnt is ids, never text patterns. The result is checked by labelling the probes
with it: a profile that mislabels its own probes is rejected.

Rendering costs a tokenizer load (seconds), so the result - or the reason it failed -
is cached per template and vocabulary under the cache root.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...paths import JsonCache
from ...tokenizer.vocabulary import Vocabulary
from ..cache_code import SPANS_CODE
from ..labels import Role
from ..prefix import common_prefix_length
from ..profile import CompiledProfile, Header, Pair, SubSpan, TemplateProfile
from .probes import A1, A2, FN, REASON, SYS, TOOL_CALL, TOOL_OUT, TOOL_SCHEMA, U1, U2, content_parts

DERIVE_VERSION = 3  # 3: profiles carry their relaxations

class DerivationFailed(Exception):
    """The template's structure could not be learnt; the message says what was missing."""


Ids = tuple[int, ...]


@dataclass
class Render:
    """One probe rendered and tokenized, cut at its sentinels."""

    ids: list[int]
    gaps: list[Ids]  # tokens before the first sentinel, between sentinels, after the last
    spans: list[tuple[int, int]]  # token range [a, b) of each sentinel


def _render(vocab: Vocabulary, messages: list[dict], sentinels: list[str], **kwargs: Any) -> Render:
    try:
        return _render_as(vocab, messages, sentinels, **kwargs)
    except DerivationFailed:
        try:  # a template that reads only content-part lists renders the probe in that form
            return _render_as(vocab, content_parts(messages), sentinels, **kwargs)
        except DerivationFailed:
            pass
        raise


def _render_as(vocab: Vocabulary, messages: list[dict], sentinels: list[str], **kwargs: Any) -> Render:
    try:
        text = vocab.render_chat(messages, **kwargs)
    except Exception as exc:  # templates raise anything (TemplateError, their own exceptions)
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DerivationFailed(f"the template cannot render a {'/'.join(m['role'] for m in messages)} probe "
                               f"({why})") from None
    ids, offsets = vocab.encode_with_offsets(text)
    starts = np.array([o[0] for o in offsets]), np.array([o[1] for o in offsets])
    gaps, spans, cursor, tok_cursor = [], [], 0, 0
    for s in sentinels:
        at = text.find(s, cursor)
        if at < 0:
            raise DerivationFailed(f"the template drops the text of a probe message ({s!r} not rendered)")
        a = int(np.searchsorted(starts[1], at, side="right"))  # first token ending after the sentinel starts
        b = int(np.searchsorted(starts[0], at + len(s), side="left"))  # first token starting after it ends
        gaps.append(tuple(ids[tok_cursor:a]))
        spans.append((a, b))
        cursor, tok_cursor = at + len(s), b
    gaps.append(tuple(ids[tok_cursor:]))
    return Render(ids, gaps, spans)


def _strip_prefix(seq: Ids, prefix: Ids, what: str) -> Ids:
    if seq[:len(prefix)] != prefix:
        raise DerivationFailed(f"{what} does not start with the assistant footer")
    return seq[len(prefix):]


class _Learner:
    def __init__(self, vocab: Vocabulary) -> None:
        self.vocab = vocab
        self.added = vocab.added_ids
        self.notes: list[str] = []

    def text(self, ids: Ids) -> str:
        return repr(self.vocab.decode(list(ids)))

    def header(self, role: Role, seq: Ids, ends: Ids, what: str) -> Header:
        """A header from its tokens: must open with a special token; a final newline run is its tail."""
        if not seq:
            raise DerivationFailed(f"the {what} has no header tokens (nothing marks where its turn starts)")
        if seq[0] not in self.added:
            raise DerivationFailed(f"the {what} header {self.text(seq)} does not start with a special token, so plain "
                                   "text typed by a user could forge it")
        tail = None
        if len(seq) > 1 and self.vocab.newline_lead[seq[-1]] and set(self.vocab.decode([seq[-1]])) == {"\n"}:
            seq, tail = seq[:-1], seq[-1]
        return Header(role, seq, tail, ends)

    def split_footer(self, footer: Ids) -> tuple[Ids, int | None]:
        """A footer is an end marker, optionally followed by one newline token."""
        if not footer:
            return (), None
        if footer[0] not in self.added:
            raise DerivationFailed(f"the turn footer {self.text(footer)} does not start with a special token")
        if len(footer) == 1:
            return (footer[0],), None
        if len(footer) == 2 and set(self.vocab.decode([footer[1]])) == {"\n"}:
            return (footer[0],), footer[1]
        raise DerivationFailed(f"the turn footer {self.text(footer)} is longer than an end marker and a newline")

    def special_around(self, ids: list[int], lo: int, a: int, b: int, hi: int) -> Pair | None:
        """The last special token in ids[lo:a] and the first in ids[b:hi] (the markers around a span)."""
        before = [i for i in ids[lo:a] if i in self.added]
        after = [i for i in ids[b:hi] if i in self.added]
        if not before:
            return None
        return before[-1], (after[0] if after and after[0] != before[-1] else None)


def derive_profile(vocab: Vocabulary) -> TemplateProfile:
    """Learn the profile of ``vocab.chat_template``; DerivationFailed says what could not be learnt."""
    if not vocab.chat_template:
        raise DerivationFailed("the tokenizer has no chat_template")
    L = _Learner(vocab)
    convo = [{"role": "user", "content": U1}, {"role": "assistant", "content": A1},
             {"role": "user", "content": U2}, {"role": "assistant", "content": A2}]
    two = _render(vocab, convo, [U1, A1, U2, A2])
    first, u_to_a, a_to_u, final = two.gaps[0], two.gaps[1], two.gaps[2], two.gaps[4]
    footer = final[:common_prefix_length(final, a_to_u)]
    a_end, after_end = L.split_footer(footer)
    user_seq = _strip_prefix(a_to_u, footer, "the text between an assistant turn and the next user turn")
    # The user footer is what the gap before the assistant shares with the assistant footer.
    u_footer = u_to_a[:common_prefix_length(u_to_a, footer)]
    u_end, _ = L.split_footer(u_footer)
    asst_seq = u_to_a[len(u_footer):]
    user = L.header(Role.USER, user_seq, u_end, "user turn")
    asst = L.header(Role.ASSISTANT, asst_seq, a_end, "assistant turn")
    if not a_end:
        raise DerivationFailed("assistant turns have no end marker (nothing closes an assistant turn)")
    if first[-len(user_seq):] != user_seq:
        raise DerivationFailed("the first user turn is rendered with a different header than later ones")
    bos_part = first[:-len(user_seq)]
    if len(bos_part) > 1 or (bos_part and bos_part[0] not in L.added):
        raise DerivationFailed(f"unexpected tokens {L.text(bos_part)} before the first turn")
    bos = bos_part[0] if bos_part else None
    headers = [user, asst]
    bos_role = _learn_system(L, convo, bos_part, bos, user_seq, headers)
    reasoning = _learn_reasoning(L, convo, u_to_a, asst_seq)
    tool_call = _learn_tools(L, convo, footer, bos_part, user_seq, asst_seq, asst, headers, bos_role)
    profile = _assemble(vocab, L, headers, after_end, bos, bos_role, reasoning, tool_call)
    _self_check(vocab, profile, two, convo)
    return profile


def _learn_system(L: _Learner, convo: list[dict], bos_part: Ids, bos: int | None, user_seq: Ids,
                  headers: list[Header]) -> Role | None:
    """The system prompt: its own turn (a header appended), bare text after BOS (the BOS role returned), or
    folded into the first user turn; a template without a system role is noted, not refused."""
    try:
        sys_r = _render(L.vocab, [{"role": "system", "content": SYS}, *convo[:2]], [SYS, U1, A1])
    except DerivationFailed as exc:
        L.notes.append(f"no system role ({exc})")
        return None
    sys_first, s_to_u = sys_r.gaps[0], sys_r.gaps[1]
    if sys_first[:len(bos_part)] != bos_part:
        raise DerivationFailed("a system prompt changes what precedes the first turn")
    sys_seq = sys_first[len(bos_part):]
    if s_to_u[-len(user_seq):] != user_seq:
        L.notes.append("system prompt folded into the first user turn (labelled user)")
    elif not sys_seq:
        if bos is None:
            raise DerivationFailed("the system prompt has neither a header nor a BOS before it")
        L.notes.append("system prompt is bare text after BOS")
        return Role.SYSTEM
    else:
        s_end, _ = L.split_footer(s_to_u[:-len(user_seq)])
        headers.append(L.header(Role.SYSTEM, sys_seq, s_end, "system turn"))
    return None


def _learn_reasoning(L: _Learner, convo: list[dict], u_to_a: Ids, asst_seq: Ids) -> Pair | None:
    """The special tokens around the reasoning of a final assistant turn (a reasoning field, else inline
    ``<think>``), when they are not part of the assistant header."""
    reasoning = None
    for message in ({"role": "assistant", "content": A1, "reasoning_content": REASON},
                    {"role": "assistant", "content": f"<think>\n{REASON}\n</think>\n\n{A1}"}):
        try:
            r = _render(L.vocab, [convo[0], message], [U1, REASON, A1])
        except DerivationFailed:
            continue
        lo = r.spans[0][1] + len(u_to_a)
        reasoning = L.special_around(r.ids, lo, r.spans[1][0], r.spans[1][1], r.spans[2][0])
        if reasoning is not None and reasoning[0] not in asst_seq:
            break
        reasoning = None
    if reasoning is None:
        L.notes.append("no reasoning markers")
    return reasoning


def _learn_tools(L: _Learner, convo: list[dict], footer: Ids, bos_part: Ids, user_seq: Ids, asst_seq: Ids,
                 asst: Header, headers: list[Header], bos_role: Role | None) -> Pair | None:
    """The call block after assistant content (its special tokens are the tool-call markers), where the tool
    list is declared, and where tool output goes (headers appended); no tool turns is noted, not refused."""
    try:
        t = _render(L.vocab, [convo[0], {"role": "assistant", "content": A1, "tool_calls": [TOOL_CALL]},
                              {"role": "tool", "content": TOOL_OUT, "name": FN, "tool_call_id": "call_qz1"},
                              {"role": "assistant", "content": A2}], [U1, A1, TOOL_OUT, A2], tools=[TOOL_SCHEMA])
    except DerivationFailed as exc:
        L.notes.append(f"no tool turns ({exc})")
        return None
    tool_call = None
    gap = t.gaps[2]
    cut = next((i for i in range(len(gap)) if gap[i:i + len(footer)] == footer), None)
    if cut is None:
        raise DerivationFailed("an assistant turn with tool calls is not closed like other assistant turns")
    block, tool_seq = gap[:cut], gap[cut + len(footer):]
    specials = [i for i in block if i in L.added]
    if specials:
        tool_call = (specials[0], specials[-1] if specials[-1] != specials[0] else None)
    else:
        L.notes.append("tool calls carry no special markers (labelled assistant content)")
    _learn_tool_declarations(L, t.gaps[0], bos_part, user_seq, headers, bos_role)
    if tool_seq[:len(user_seq)] == user_seq:
        L.notes.append("tool output rendered inside a user turn (labelled user)")
    else:
        _learn_tool_turn(L, tool_seq, t.gaps[3], asst_seq, asst, headers)
    return tool_call


def _learn_tool_turn(L: _Learner, tool_seq: Ids, back: Ids, asst_seq: Ids, asst: Header,
                     headers: list[Header]) -> None:
    """A tool turn of its own: its header, and how the assistant answer after it opens (``back`` is the gap
    between the tool output and that answer); both appended to ``headers``."""
    if back[-len(asst_seq):] == asst_seq:
        t_end, _ = L.split_footer(back[:-len(asst_seq)])
    else:  # the answer follows the tool block's closing marker directly (Mistral, DeepSeek)
        opener = [i for i in back if i in L.added]
        if not opener:
            raise DerivationFailed("nothing marks where the assistant answer after tool output starts")
        t_end = ()
        headers.append(Header(Role.ASSISTANT, (opener[-1],), None, asst.ends))
    headers.append(L.header(Role.TOOL, tool_seq, t_end, "tool turn"))


def _assemble(vocab: Vocabulary, L: _Learner, headers: list[Header], after_end: int | None, bos: int | None,
              bos_role: Role | None, reasoning: Pair | None, tool_call: Pair | None) -> TemplateProfile:
    """The profile from what was learnt; short newline tails are the one- and two-newline tokens no longer
    than some header's tail."""
    short = tuple(i for i in (vocab.single_id("\n" * k) for k in (1, 2)) if i is not None)
    subs = tuple(SubSpan(p[0], p[1], role) for p, role in ((reasoning, Role.REASONING), (tool_call, Role.TOOL_CALL))
                 if p is not None)
    return TemplateProfile("derived", tuple(headers), after_end=(after_end,) if after_end is not None else (),
                           bos=(bos,) if bos is not None else (), bos_role=bos_role, subs=subs,
                           short_tails=tuple(i for i in short if any(
                               h.tail is not None and len(vocab.decode([i])) <= len(vocab.decode([h.tail]))
                               for h in headers)),
                           source="derived", notes=tuple(L.notes))


def _learn_tool_declarations(L: _Learner, first: Ids, bos_part: Ids, user_seq: Ids, headers: list[Header],
                             bos_role: Role | None) -> None:
    """Where the tool list goes: a known turn, bare text after BOS, the first user turn, or its own block."""
    if first[-len(user_seq):] != user_seq:
        if first[:len(bos_part) + len(user_seq)] == bos_part + user_seq:
            return  # declared inside the first user turn
        raise DerivationFailed("declaring tools changes the first turn's header")
    block = first[len(bos_part):-len(user_seq)]
    if not block or any(block[:len(h.core)] == h.core for h in headers):
        return
    if block[0] not in L.added:
        if bos_role is None:
            raise DerivationFailed(f"the tool list {L.text(block[:8])}... is rendered outside any turn")
        return  # bare text after BOS, like the system prompt
    if block[-1] in L.added and block[-1] != block[0]:
        headers.append(Header(Role.SYSTEM, (block[0],), None, (block[-1],)))
        L.notes.append("tool list in its own block (labelled system)")
        return
    raise DerivationFailed(f"the tool list block {L.text(block[:4])}... has no closing marker")


def _self_check(vocab: Vocabulary, profile: TemplateProfile, probe: Render, convo: list[dict]) -> None:
    """Label the main probe with the new profile: every sentinel must get its own role, no problems."""
    from ..generic import label

    try:
        cp = CompiledProfile(profile, vocab.newline_lead)
    except ValueError as exc:
        raise DerivationFailed(str(exc)) from None
    ids = np.array(probe.ids, dtype=np.int64)
    lab = label(ids, np.array([0, len(ids)], dtype=np.int64), cp, 1 << 30)
    if lab.problem.any():
        at = int(np.flatnonzero(lab.problem)[0])
        raise DerivationFailed(f"the learnt profile misreads its own probe at token {at} "
                               f"({vocab.decode(ids[at:at + 3])!r})")
    want = {"user": Role.USER, "assistant": Role.ASSISTANT}
    for (a, b), m in zip(probe.spans, convo):
        if not (lab.role[a:b] == want[m["role"]]).all():
            raise DerivationFailed(f"the learnt profile does not label {m['role']} text as {m['role']}")


# --------------------------------------------------------------------------- cache

def _cache(vocab: Vocabulary) -> JsonCache:
    return JsonCache.keyed("profiles", "derived", (vocab.fingerprint, vocab.chat_template or "", str(DERIVE_VERSION)),
                           code=SPANS_CODE)  # no stale learning


def cached_derivation(vocab: Vocabulary) -> TemplateProfile:
    """derive_profile, remembered per template and vocabulary (failures too: they cost as much)."""
    def compute() -> dict:
        try:
            return {"profile": derive_profile(vocab).to_json()}
        except DerivationFailed as exc:
            return {"error": str(exc)}

    doc = _cache(vocab).get(compute)
    if "error" in doc:
        raise DerivationFailed(doc["error"])
    return TemplateProfile.from_json(doc["profile"])
