"""Is a template profile right for this tokenizer? Label the template's own renderings and compare.

A profile (built-in or derived) is used only when it labels every probe rendering of
the tokenizer's chat template exactly as the rendering's ground truth says
(``spans/learn/truth.py``: which characters are which message's content, found from the
template's output alone). Marker tokens present in a vocabulary prove nothing: every
tokenizer built on the Qwen vocabulary has ``<|im_start|>``, whatever its template.

The probes (``probes.py``) cover what templates do differently: a system prompt, several turns,
reasoning (under each field name templates read), tool calls with empty and non-empty
content, one and two tool responses, an answer after tool output, and the
``enable_thinking`` switch. Each is rendered whole and as per-turn rows (every
assistant message as the last one, against the generation prompt), which pins where
the template says the assistant's output starts. Probes a template rejects are
skipped and named; the basic two-turn probe must render.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ...tokenizer.vocabulary import Vocabulary
from ..labels import Role
from ..profile import CompiledProfile, TemplateProfile
from .probes import EVIDENCE, OPTIONAL, PROBES, SWITCHES, content_parts, fixed_length_ids, string_args
from .truth import CharClass

ASSISTANT_PARTS_CODES = frozenset(int(r) for r in (Role.ASSISTANT, Role.REASONING, Role.TOOL_CALL))
_FIELD_PARTS = frozenset(int(c) for c in (CharClass.ASSISTANT, CharClass.REASONING, CharClass.TOOL_CALL))

class ProbesUnavailable(Exception):
    """The template's renderings cannot be used to verify a profile; the message says why."""


@dataclass
class ProbeSet:
    """The ground-truth renderings of every probe the template accepts."""

    renderings: list[Any]  # truth.TruthRender
    names: list[str]  # "probe[/per-turn k][ switch]" for each rendering
    probes: list[str] = field(default_factory=list)  # the probe each rendering comes from
    skipped: list[str] = field(default_factory=list)  # probes the template rejected, with why
    #: per-turn renderings whose earlier messages render differently with the generation prompt
    not_prefix_preserving: list[str] = field(default_factory=list)


def _reads(template: str, name: str) -> bool:
    return name in template


def probe_renderings(vocab: Vocabulary, probes: dict[str, Any] | None = None) -> ProbeSet:
    """Render every probe (whole and per turn) with ground truth; ProbesUnavailable if none can be.

    ``probes`` other than :data:`PROBES` (the evidence of :func:`tighten`) may all be rejected."""
    from . import truth

    if not vocab.chat_template:
        raise ProbesUnavailable("the tokenizer has no chat_template")
    tok = vocab.hf_tokenizer
    out = ProbeSet([], [])
    for name, (messages, tools) in (PROBES if probes is None else probes).items():
        for switch in SWITCHES:
            if switch and not all(_reads(vocab.chat_template, k) for k in switch):
                continue
            label = name + "".join(f" {k}={v}" for k, v in switch.items())
            calls = any(m.get("tool_calls") for m in messages)
            variants = (messages, string_args(messages), fixed_length_ids(messages)) if calls else (messages,)
            variants += (content_parts(messages),)  # templates that read only content-part lists
            problem = None
            for msgs in variants:
                try:
                    got = [truth.render_truth(tok, msgs, tools, template=vocab.chat_template, **switch)]
                    names = [label]
                    for j, m in enumerate(msgs):
                        if m["role"] == "assistant":
                            got.append(truth.render_truth(tok, msgs[:j + 1], tools, template=vocab.chat_template,
                                                          per_turn=True, **switch))
                            names.append(f"{label} / turn {j}")
                except truth.TemplateRejected as exc:
                    problem = f"{label}: the template rejects it ({exc})"
                    continue
                except truth.TruthUnavailable as exc:
                    raise ProbesUnavailable(f"probe {label}: {exc}") from None
                # Where the template renders earlier messages differently once another follows (gpt-oss
                # drops an analysis block when a final answer comes later), the truth has no per-turn range.
                out.not_prefix_preserving += [nm for r, nm in zip(got, names) if r.history_rewritten]
                out.renderings += got
                out.names += names
                out.probes += [name] * len(got)
                problem = None
                break
            if problem is not None:
                out.skipped.append(problem)
    if probes is None and (not out.renderings or "two-turns" not in out.names):
        reason = out.skipped[0] if out.skipped else "nothing rendered"
        raise ProbesUnavailable(f"the template cannot render a plain user/assistant conversation ({reason})")
    return out


@dataclass
class ProbeAgreement:
    """How a profile labels the probe renderings: ``ok`` when every token of every required probe
    agrees with the truth; ``limits`` name the optional probes it fails, with what that means."""

    ok: bool
    renderings: int
    mismatches: int
    first: str | None = None  # the first disagreement, for the one-line refusal
    limits: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "renderings": self.renderings, "mismatches": self.mismatches, "first": self.first,
                "limits": self.limits}


def disagreements(cp: CompiledProfile, render: Any) -> list[Any]:
    """The tokens of one probe rendering whose labels under ``cp`` contradict its truth.

    System text labelled user passes: templates without a system turn fold the system prompt
    into the first user turn (Gemma), and either way it is context no mask may supervise.
    """
    from .. import generic
    from . import truth

    ids = np.asarray(render.ids, dtype=np.int64)
    lab = generic.label(ids, np.array([0, len(ids)], dtype=np.int64), cp, 1 << 30)
    bad = truth.check_labels(render, lab.role, lab.problem, lab.boundary, system_as_user=True,
                             unmarked_tool_calls=True)
    return [m for m in bad if not _interchangeable(m, render, int(lab.role[m.token]))]


def _interchangeable(m: Any, render: Any, role: int) -> bool:
    """A rule-a disagreement between labels that no mask policy tells apart.

    Which assistant part a field is named in the messages and which the template renders it
    as can differ (gpt-oss writes the content of a tool-calling message in the analysis
    channel): every assistant part is supervisable, so the three are interchangeable. Tool
    output a template writes into a user turn with no marker around it can only read as
    user text: both are context no mask may supervise.
    """
    if not m.reason.startswith("a:") or render.token_field[m.token] < 0:
        return False
    cls = int(render.fields[render.token_field[m.token]].char_class)
    if cls in _FIELD_PARTS:
        return role in ASSISTANT_PARTS_CODES
    return cls == CharClass.TOOL and role == int(Role.USER)


def verify(profile: TemplateProfile, probes: ProbeSet, vocab: Vocabulary) -> ProbeAgreement:
    """Label each probe rendering with ``profile`` and compare with its truth."""
    try:
        cp = CompiledProfile(profile, vocab.newline_lead)
    except ValueError as exc:
        return ProbeAgreement(False, 0, 1, str(exc))
    total, first, limits = 0, None, {}
    for render, name, probe in zip(probes.renderings, probes.names, probes.probes):
        bad = disagreements(cp, render)
        if not bad:
            continue
        if probe in OPTIONAL:
            limits.setdefault(probe, f"{OPTIONAL[probe]} are reported by turns_well_formed: this template does "
                                     f"not render them inside its turn structure ({name}: {bad[0]})")
            continue
        if first is None:
            first = f"{name}: {bad[0]}"
        total += len(bad)
    return ProbeAgreement(total == 0, len(probes.renderings), total, first, list(limits.values()))


def _split_message(cp: CompiledProfile, render: Any) -> bool:
    """Whether labelling ``render`` under ``cp`` without joined blocks cuts one assistant message in two turns.

    ``joins_blocks`` changes no label, only where the mask rules see assistant turns end, so its need
    is shown on the turns: two label runs of assistant output whose truth is one message.
    """
    from ..turns import assistant_turns
    from .. import generic

    ids = np.asarray(render.ids, dtype=np.int64)
    offsets = np.array([0, len(ids)], dtype=np.int64)
    lab = generic.label(ids, offsets, cp, 1 << 30)
    turns = assistant_turns(lab.role, offsets, False)
    fields = render.token_field
    for a, b in zip(turns.ends[:-1], turns.starts[1:]):
        before = [int(f) for f in fields[:a + 1] if f >= 0]
        after = [int(f) for f in fields[b:] if f >= 0]
        if before and after and render.fields[before[-1]].message == render.fields[after[0]].message:
            return True
    return False


@dataclass
class Tightness:
    """The profile with every relaxation no probe rendering needs turned off, and the evidence.

    ``needed``: (relaxation name, what it allows, the rendering mislabelled without it and how);
    ``turned_off``: names of the relaxations no rendering needed.
    """

    profile: TemplateProfile
    needed: list[tuple[str, str, str]] = field(default_factory=list)
    turned_off: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"relaxations": [{"name": n, "allows": a, "needed_by": b} for n, a, b in self.needed],
                "turned_off": self.turned_off}


def _first_need(profile: TemplateProfile, probes: ProbeSet, vocab: Vocabulary, kind: str,
                evidence: list[tuple[Any, str]] = ()) -> str | None:
    """The first probe rendering ``profile`` mislabels, with its first disagreement; None if it labels all.

    ``evidence``: renderings the profile before this step labels exactly, though it is not held to them."""
    try:
        cp = CompiledProfile(profile, vocab.newline_lead)
    except ValueError as exc:
        return str(exc)
    pairs = [(r, n, p) for r, n, p in zip(probes.renderings, probes.names, probes.probes)]
    pairs += [(r, n, n.split(" ")[0]) for r, n in evidence]
    for render, name, probe in pairs:
        if kind == "joins-blocks":
            if _split_message(cp, render):
                return f"{name}: one assistant message read as two turns"
            continue
        if probe in OPTIONAL:
            continue  # a limit: the profile is not held to it (verify), so it proves no need either
        bad = disagreements(cp, render)
        if bad:
            return f"{name}: {bad[0]}"
    return None


def tighten(profile: TemplateProfile, probes: ProbeSet, vocab: Vocabulary) -> Tightness:
    """Turn off, one at a time, every relaxation of a verified ``profile`` that no probe rendering needs.

    A relaxation is needed when, with it turned off, some rendering of the template's own probes
    is mislabelled (its truth disagrees); the first such rendering is recorded as the reason it
    stays. The others are turned off in order, each on the profile already tightened, so the
    result still labels every probe exactly (a relaxation needed only once another is off stays).
    """
    from .relax import relaxations, without

    unused = len(vocab.newline_lead)
    try:
        extra = probe_renderings(vocab, EVIDENCE)
        evidence_all = list(zip(extra.renderings, extra.names))
    except ProbesUnavailable:
        evidence_all = []
    current, kept, off = profile, [], []
    decided: set[str] = set()
    while True:
        todo = [rx for rx in relaxations(current) if rx.name not in decided]
        if not todo:
            break
        rx = todo[0]
        decided.add(rx.name)
        cp = CompiledProfile(current, vocab.newline_lead)
        evidence = [(r, n) for r, n in evidence_all if not disagreements(cp, r)]  # labelled exactly so far
        need = _first_need(without(current, rx, unused), probes, vocab, rx.kind, evidence)
        if need is None:
            current = without(current, rx, unused)
            off.append(rx.name)
        else:
            kept.append((rx.name, rx.allows, need))
    return Tightness(replace(current, relaxations=tuple(kept)), kept, off)
