"""A chat template family reduced to token ids: how turns open, close, and split inside.

Every family the suite knows (built-in or derived from a tokenizer's own
``chat_template``) ends up as one :class:`TemplateProfile`; the generic labeller
needs nothing else. Profiles hold ids, not text, so labelling never decodes and
special-token text typed by a user (which tokenizes as plain characters) can never
look like a marker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .labels import Role

#: Roles a header may open. ``Role.OUTSIDE`` is used for a begin-of-sequence token whose
#: following text belongs to no role (text there is a structural problem).
HEADER_ROLES = (Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL, Role.OUTSIDE)


@dataclass(frozen=True)
class Header:
    """One way a turn opens: an exact id sequence, then an optional ``tail`` id (a newline).

    The tail is where BPE may merge the header with the content's leading whitespace
    (``"\\n" + "\\n"`` -> ``"\\n\\n"``): such a token is a boundary token, content of the turn.
    ``ends`` are the ids that close the turn; empty means the next header closes it
    (Mistral and DeepSeek user turns).
    """

    role: Role
    core: tuple[int, ...]
    tail: int | None = None
    ends: tuple[int, ...] = ()

    def to_json(self) -> dict:
        return {"role": self.role.name.lower(), "core": list(self.core), "tail": self.tail, "ends": list(self.ends)}

    @classmethod
    def from_json(cls, d: dict) -> "Header":
        return cls(Role[d["role"].upper()], tuple(d["core"]), d["tail"], tuple(d["ends"]))


Pair = tuple[int, int | None]  # opening id, closing id (None: runs to the end of the turn)


@dataclass(frozen=True)
class TemplateProfile:
    """Token-level description of one chat template family.

    ``bos`` opens every row when the template emits one; ``bos_role`` names the role
    of bare text after it (DeepSeek puts the system prompt there). ``after_end`` is the
    token a template writes right after an end marker (ChatML's and Gemma's newline).
    ``reasoning`` and ``tool_call`` split assistant turns; ``tool_response`` marks tool
    output that a template places inside user turns (Qwen).
    ``short_tails`` are newline-run ids no longer than a header tail: they can never be
    a tail merged with content.
    """

    name: str
    headers: tuple[Header, ...]
    after_end: int | None = None
    bos: int | None = None
    bos_role: Role | None = None
    reasoning: Pair | None = None
    tool_call: Pair | None = None
    tool_response: Pair | None = None
    short_tails: tuple[int, ...] = ()
    source: str = "builtin"  # "builtin" or "derived"
    notes: tuple[str, ...] = field(default=(), compare=False)

    # ------------------------------------------------------------------ persistence
    def to_json(self) -> str:
        return json.dumps({
            "name": self.name, "headers": [h.to_json() for h in self.headers], "after_end": self.after_end,
            "bos": self.bos, "bos_role": self.bos_role.name.lower() if self.bos_role is not None else None,
            "reasoning": self.reasoning, "tool_call": self.tool_call, "tool_response": self.tool_response,
            "short_tails": list(self.short_tails), "source": self.source, "notes": list(self.notes),
        })

    @classmethod
    def from_json(cls, text: str) -> "TemplateProfile":
        d = json.loads(text)
        pair = lambda p: (p[0], p[1]) if p else None  # noqa: E731
        return cls(d["name"], tuple(Header.from_json(h) for h in d["headers"]), d["after_end"], d["bos"],
                   Role[d["bos_role"].upper()] if d["bos_role"] else None, pair(d["reasoning"]),
                   pair(d["tool_call"]), pair(d["tool_response"]), tuple(d["short_tails"]), d["source"],
                   tuple(d.get("notes", ())))

    # ------------------------------------------------------------------ comparison
    def structure(self) -> dict:
        """What labelling depends on, order-free: two profiles label alike iff these are equal."""
        return {
            "headers": sorted((int(h.role), h.core, h.tail if h.tail is not None else -1, tuple(sorted(h.ends)))
                              for h in self.headers),
            "after_end": self.after_end, "bos": self.bos,
            "bos_role": int(self.bos_role) if self.bos_role is not None else None,
            "reasoning": self.reasoning, "tool_call": self.tool_call, "tool_response": self.tool_response,
        }

    def roles(self) -> set[Role]:
        return {h.role for h in self.headers}


class CompiledProfile:
    """Lookup tables over ids for one profile and vocabulary size (built once per process)."""

    def __init__(self, profile: TemplateProfile, newline_lead: np.ndarray) -> None:
        self.profile = profile
        size = len(newline_lead)
        ids = [i for h in profile.headers for i in (*h.core, *h.ends, *( [h.tail] if h.tail is not None else []))]
        ids += [i for p in (profile.reasoning, profile.tool_call, profile.tool_response) if p for i in p if i is not None]
        ids += [i for i in (profile.after_end, profile.bos) if i is not None]
        self.size = max([size, *[i + 1 for i in ids]])
        headers = list(profile.headers)
        if profile.bos is not None:
            headers.append(Header(profile.bos_role if profile.bos_role is not None else Role.OUTSIDE, (profile.bos,)))
        # Longest cores first, so a longer header wins over its own prefix.
        self.headers = sorted(headers, key=lambda h: -len(h.core))
        self.is_bos_spec = np.array([profile.bos is not None and h.core == (profile.bos,) and not h.ends
                                     for h in self.headers], dtype=bool)
        self.opener = np.zeros(self.size, dtype=bool)
        self.opener[[h.core[0] for h in self.headers]] = True  # lookup table, for profiles with many openers
        self.opener_ids = tuple(sorted({h.core[0] for h in self.headers}))
        self.end_ids = tuple(sorted({e for h in self.headers for e in h.ends}))
        self.is_end = np.zeros(self.size, dtype=bool)
        self.is_end[list(self.end_ids)] = True
        both = np.flatnonzero(self.opener & self.is_end)
        if len(both):
            raise ValueError(f"profile {profile.name}: ids {both.tolist()} both open and close turns")
        self.end_code = np.zeros(self.size, dtype=np.uint8)
        for code, e in enumerate(self.end_ids):
            self.end_code[e] = code
        # accepts[spec + 1, end_code]: may this end close a turn opened by this header (row 0: unknown role)?
        self.accepts = np.zeros((len(self.headers) + 1, max(1, len(self.end_ids))), dtype=bool)
        self.accepts[0, :] = True
        for s, h in enumerate(self.headers):
            for e in h.ends:
                self.accepts[s + 1, self.end_ids.index(e)] = True
        self.spec_role = np.array([Role.UNKNOWN_ROLE] + [h.role for h in self.headers], dtype=np.uint8)
        self.spec_len = np.array([1] + [len(h.core) for h in self.headers], dtype=np.int64)
        # A header of an unknown role spans as many tokens as the shortest header its opener starts,
        # and ends with their tail when they share one (ChatML: opener, role word, newline).
        self.unknown_len = np.ones(len(self.opener_ids), dtype=np.int64)
        self.unknown_tail = np.full(len(self.opener_ids), -1, dtype=np.int64)
        for k, o in enumerate(self.opener_ids):
            same = [h for h in self.headers if h.core[0] == o]
            self.unknown_len[k] = min(len(h.core) for h in same)
            tails = {h.tail for h in same}
            if len(tails) == 1 and None not in tails:
                self.unknown_tail[k] = tails.pop()
        self.spec_needs_end = np.array([True] + [bool(h.ends) for h in self.headers], dtype=bool)
        self.spec_tail = np.array([-1] + [h.tail if h.tail is not None else -1 for h in self.headers], dtype=np.int64)
        # Only a newline tail can merge with the content's leading whitespace.
        self.spec_tail_merges = np.array([False] + [h.tail is not None and h.tail < size and bool(newline_lead[h.tail])
                                                    for h in self.headers], dtype=bool)
        self.unknown_tail_merges = np.array([t >= 0 and t < size and bool(newline_lead[t]) for t in self.unknown_tail],
                                            dtype=bool)
        lead = np.zeros(self.size, dtype=bool)
        lead[:size] = newline_lead
        lead[list(profile.short_tails)] = False
        for h in self.headers:
            if h.tail is not None:
                lead[h.tail] = False
        self.merges_tail = lead  # whitespace tokens that are a header tail merged with content

    @cached_property
    def max_core(self) -> int:
        return max(len(h.core) for h in self.headers)
