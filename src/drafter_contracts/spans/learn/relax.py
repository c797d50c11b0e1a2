"""The relaxations of a template profile: every rule that makes the labeller accept more than the strict shape.

The strict shape of a turn is: a header, the body, one end marker of that header, nothing
between turns, and nothing after the last one. Real templates need exceptions (a header that
opens inside an open turn, turns closed by the next header, an answer after tool output with no
header of its own, ...). Each exception also lets some rows pass that its template can never
render, and a leak can hide in exactly those rows (EXAONE 4's user text typing
``[|assistant|]`` read as an assistant reply once the assistant header could open inside a user
turn). So every relaxation must be *needed*: with it turned off, at least one of the template's
own renderings is mislabelled (``spans/learn/verify.py: tighten`` checks that and turns the others off).

:func:`relaxations` lists a profile's relaxations by name; :func:`without` is the same profile
with one of them turned off. Names are stable for a profile (role, the header's rank among the
headers of that role, the role it may open inside), so the summary can say which relaxation is in
force and which rendering needs it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..labels import Role
from ..profile import SubSpan, TemplateProfile

#: The kinds of relaxation, with what each allows (the summary and docs/templates.md say the same).
KINDS: dict[str, str] = {
    "header-inside-open-turn": "a header may open while a turn of another role is still open, closing it "
                               "(right after the one id the profile names, where it names one)",
    "reopenable-turn": "a header may open while a turn of its own role is still open, closing it "
                       "(right after the one id the profile names, where it names one)",
    "ends-at-next-header": "a turn has no end marker of its own: the next header closes it",
    "alternative-end-marker": "a turn may close with a second end marker besides its first",
    "optional-after-end": "an id the template may write right after an end marker",
    "optional-end-of-sequence": "an id that may close a row after its last turn",
    "headerless-answer-after-tool": "the answer after tool output opens at the tool block's closing marker, "
                                    "with no assistant header",
    "stop-token-inside-turn": "a block opener inside the assistant turn is the model's stop token, and a row "
                              "may end there",
    "joins-blocks": "an assistant header right after an assistant end continues the same message",
    "text-after-bos": "bare text after the begin-of-sequence run is a turn of its own (DeepSeek's system prompt), "
                      "closed by the next header",
}


@dataclass(frozen=True)
class Relaxation:
    """One relaxation of one profile: its stable ``name``, its ``kind`` (a key of :data:`KINDS`) and where it is."""

    name: str
    kind: str
    header: int = -1  # index into profile.headers, when the relaxation belongs to one header
    role: Role | None = None  # the open turn's role (inside), or the end id's owner
    id: int = -1  # the end, after-end or end-of-sequence id; the sub-span's opener

    @property
    def allows(self) -> str:
        return KINDS[self.kind]


def _rank(profile: TemplateProfile, k: int) -> str:
    """``assistant#1``: the k-th header's role and its rank among the headers of that role."""
    h = profile.headers[k]
    rank = sum(1 for g in profile.headers[:k] if g.role == h.role)
    return f"{h.role.name.lower()}#{rank}"


def _answers_after_tool(profile: TemplateProfile) -> set[int]:
    """Assistant headers other than the first that follow a tool turn with no end of its own: the answer
    after tool output opening at the tool block's closing marker (Mistral's ``[/TOOL_RESULTS]``,
    DeepSeek's ``<｜tool▁outputs▁end｜>``, a derived profile's last opener before the answer)."""
    if not any(h.role == Role.TOOL and not h.ends for h in profile.headers):
        return set()
    assistant = [k for k, h in enumerate(profile.headers) if h.role == Role.ASSISTANT]
    return set(assistant[1:]) if len(assistant) > 1 and all(len(profile.headers[k].core) == 1 for k in assistant) \
        else set()


def _closing_pairs(profile: TemplateProfile) -> set[int]:
    """Headers whose core is a headerless answer's opener followed by another header's core (Mistral's
    ``[/TOOL_RESULTS][INST]``): they close a tool turn and open the next; part of that relaxation."""
    openers = {profile.headers[k].core[0] for k in _answers_after_tool(profile)}
    return {k for k, h in enumerate(profile.headers)
            if len(h.core) > 1 and h.core[0] in openers and h.role != Role.ASSISTANT}


def relaxations(profile: TemplateProfile) -> list[Relaxation]:
    """Every relaxation ``profile`` has, in a fixed order (the order ``tighten`` tries them in)."""
    out: list[Relaxation] = []
    headerless = _answers_after_tool(profile)
    pairs = _closing_pairs(profile)
    for k, h in enumerate(profile.headers):
        where = _rank(profile, k)
        for r in h.inside:
            kind = "reopenable-turn" if r == h.role else "header-inside-open-turn"
            out.append(Relaxation(f"{kind}:{where}<{r.name.lower()}", kind, k, r))
        if k in headerless:
            out.append(Relaxation(f"headerless-answer-after-tool:{where}", "headerless-answer-after-tool", k))
        if not h.ends and k not in pairs:
            out.append(Relaxation(f"ends-at-next-header:{where}", "ends-at-next-header", k))
        for e in h.ends[1:]:
            out.append(Relaxation(f"alternative-end-marker:{where}:{e}", "alternative-end-marker", k, id=e))
    for e in profile.after_end:
        out.append(Relaxation(f"optional-after-end:{e}", "optional-after-end", id=e))
    for e in profile.eos:
        out.append(Relaxation(f"optional-end-of-sequence:{e}", "optional-end-of-sequence", id=e))
    for s in profile.subs:
        if s.stops:
            out.append(Relaxation(f"stop-token-inside-turn:{s.open}", "stop-token-inside-turn", id=s.open))
    if profile.joins_blocks:
        out.append(Relaxation("joins-blocks", "joins-blocks"))
    if profile.bos and profile.bos_role is not None:
        out.append(Relaxation(f"text-after-bos:{profile.bos_role.name.lower()}", "text-after-bos",
                              role=profile.bos_role))
    return out


def without(profile: TemplateProfile, relaxation: Relaxation, unused_id: int) -> TemplateProfile:
    """``profile`` with ``relaxation`` turned off.

    ``unused_id`` is an id no rendering holds (the vocabulary's size): a turn that ended at the
    next header is given it as its only end marker, so the next header then opens inside it.
    """
    rx = relaxation
    headers = list(profile.headers)
    if rx.kind in ("header-inside-open-turn", "reopenable-turn"):
        h = headers[rx.header]
        headers[rx.header] = replace(h, inside=tuple(r for r in h.inside if r != rx.role))
    elif rx.kind == "headerless-answer-after-tool":
        opener = headers[rx.header].core[0]
        headers = [h for k, h in enumerate(headers) if k != rx.header and not (len(h.core) > 1 and h.core[0] == opener)]
    elif rx.kind == "ends-at-next-header":
        headers[rx.header] = replace(headers[rx.header], ends=(unused_id,))
    elif rx.kind == "alternative-end-marker":
        h = headers[rx.header]
        headers[rx.header] = replace(h, ends=tuple(e for e in h.ends if e != rx.id))
    else:
        return _without_global(profile, rx)
    return replace(profile, headers=tuple(headers))


def _without_global(profile: TemplateProfile, rx: Relaxation) -> TemplateProfile:
    if rx.kind == "optional-after-end":
        return replace(profile, after_end=tuple(e for e in profile.after_end if e != rx.id))
    if rx.kind == "optional-end-of-sequence":
        return replace(profile, eos=tuple(e for e in profile.eos if e != rx.id))
    if rx.kind == "stop-token-inside-turn":
        return replace(profile, subs=tuple(SubSpan(s.open, s.close, s.role, s.within, False) if s.open == rx.id else s
                                           for s in profile.subs))
    if rx.kind == "joins-blocks":
        return replace(profile, joins_blocks=False)
    if rx.kind == "text-after-bos":
        return replace(profile, bos_role=None)
    raise ValueError(f"unknown relaxation {rx.name}")

