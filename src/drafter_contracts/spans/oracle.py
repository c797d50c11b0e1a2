"""The span oracle: a verified template profile, the one door to labelling with it, and what its check found.

:class:`SpanOracle` is what the rest of the package labels with (``make_oracle`` in ``learn/resolve.py``
builds it for ``--template-profile``); :class:`Verification` is the record of how its profile was checked
against the template's own renderings and where the template's generation tags put supervision. Both are
written to summary.json (``tokenizer.template_profile``) by ``to_dict``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np

from .labels import Labels
from .profile import CompiledProfile, TemplateProfile


class LearntTags(TypedDict, total=False):
    """Where the template's ``{% generation %}`` tags put supervision (``learn/tags.py``), as cached with the
    profile: ``keys`` (the mask keys they imply, tuples as lists) and ``note`` (one line saying so), or ``error``
    (tags that enclose context, which no mask may supervise)."""

    keys: dict[str, Any]
    note: str
    error: str


@dataclass(frozen=True)
class Verification:
    """What checking the chosen profile against the template's own probe renderings found.

    ``checked``: whether the probes were labelled at all (False for a named family with no chat template or
    no renderable probe, and for an oracle built for a profile the caller holds); the fields after it are
    those of ``learn/verify.py``'s ``ProbeAgreement`` and ``Tightness`` and the probes the template rejected.
    ``tags_read``: whether the generation tags were looked for (every choice of ``make_oracle``); ``tags``
    is then what they say, None for a template without them.
    """

    checked: bool = False
    ok: bool = False
    renderings: int = 0
    mismatches: int = 0
    first: str | None = None  # the first disagreement
    limits: tuple[str, ...] = ()  # optional probes the profile fails, with what that means for the data
    skipped: tuple[str, ...] = ()  # probes the template rejected, with why
    relaxations: tuple[tuple[str, str, str], ...] = ()  # (name, what it allows, the rendering that needs it)
    turned_off: tuple[str, ...] = ()  # relaxations no rendering needed
    tags_read: bool = False
    tags: LearntTags | None = None

    @classmethod
    def from_doc(cls, verification: dict[str, Any], tags: LearntTags | None) -> Verification:
        """The record of a cached choice: its ``verification`` document (empty when nothing was checked) and
        its learnt ``tags``."""
        if not verification:
            return cls(tags_read=True, tags=tags)
        return cls(True, bool(verification["ok"]), int(verification["renderings"]), int(verification["mismatches"]),
                   verification["first"], tuple(verification["limits"]), tuple(verification["skipped"]),
                   tuple((r["name"], r["allows"], r["needed_by"]) for r in verification["relaxations"]),
                   tuple(verification["turned_off"]), True, tags)

    def to_dict(self) -> dict[str, Any]:
        """The summary's form: the keys of the cached document, in its order."""
        out: dict[str, Any] = {}
        if self.checked:
            out = {"ok": self.ok, "renderings": self.renderings, "mismatches": self.mismatches, "first": self.first,
                   "limits": list(self.limits), "skipped": list(self.skipped),
                   "relaxations": [{"name": n, "allows": a, "needed_by": b} for n, a, b in self.relaxations],
                   "turned_off": list(self.turned_off)}
        if self.tags_read:
            out["tags"] = self.tags
        return out


@dataclass
class SpanOracle:
    """The chosen profile and the one door to labelling with it (``label``).

    ``prompts`` are the token runs the template's generation prompt can be (the mask rules'
    ``prompt_context`` reads them); ``newline_lead`` is the tokenizer's whitespace table.
    """

    profile: TemplateProfile
    how: str  # one line for the summary: what was chosen and why
    compiled: CompiledProfile
    verification: Verification = field(default_factory=Verification)
    prompts: tuple[tuple[int, ...], ...] = ()
    newline_lead: np.ndarray | None = None

    def mask_facts(self, ids: np.ndarray) -> Any:
        """What the mask rules read for a shard's ids under this template."""
        from .turns import MaskFacts

        return MaskFacts(ids, self.newline_lead, self.prompts, self.profile.joins_blocks)

    def label(self, ids: np.ndarray, offsets: np.ndarray, max_len: int) -> Labels:
        """Role, boundary and problem of every token of a flattened shard (``offsets``: row starts + end)."""
        from . import labeller

        return labeller.label(ids, offsets, self.compiled, max_len)

    def label_row(self, ids: np.ndarray, max_len: int) -> Labels:
        """Labels of one row, for an explanation or a report."""
        return self.label(np.asarray(ids), np.array([0, len(ids)], dtype=np.int64), max_len)

    def to_dict(self) -> dict:
        return {"name": self.profile.name, "source": self.profile.source, "how": self.how,
                "notes": list(self.profile.notes), "verification": self.verification.to_dict(),
                "relaxations": [{"name": n, "allows": a, "needed_by": b} for n, a, b in self.profile.relaxations],
                "generation_prompts": [list(p) for p in self.prompts]}
