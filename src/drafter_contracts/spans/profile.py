"""A chat template family reduced to token ids: how turns open, close, and split inside.

Every family the suite knows (built-in or derived from a tokenizer's own
``chat_template``) ends up as one :class:`TemplateProfile`; the labellers need
nothing else. Profiles hold ids, not text, so labelling never decodes and
special-token text typed by a user (which tokenizes as plain characters) can never
look like a marker.

The model covers what real templates do (see docs/templates.md):

- a turn opens with a header: an exact id sequence (``<|im_start|>user``), optionally
  followed by any tokens up to a closing id (harmony's ``<|start|>assistant to=functions.f
  <|channel|>commentary json<|message|>``: ``until``), then an optional newline ``tail``;
- the header decides the turn's role and the role of its body (harmony's analysis
  channel is reasoning, a call to a function is a tool call);
- a turn closes at one of its header's end ids, or, when it has none, at the next header
  (GLM: ``<|user|>`` and ``<|observation|>`` close an assistant turn, and the model
  generates them, so they are that turn's end token);
- inside a body, sub-spans run from an opening id to a closing id: reasoning, tool calls,
  and tool output, which some templates place inside user turns (Qwen) or inside the
  assistant's own turn (Gemma 4);
- a row may start with a fixed begin-of-sequence run (``[gMASK]<sop>``), and end with
  end-of-sequence ids after its last turn (Phi-3 writes ``<|endoftext|>``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .labels import Role


def _role(name: str | None) -> Role | None:
    return Role[name.upper()] if name else None


@dataclass(frozen=True)
class Header:
    """One way a turn opens: an exact id sequence, optionally any ids up to ``until``, then a ``tail``.

    The tail (a newline) is where BPE may merge the header with the content's leading
    whitespace (``"\\n" + "\\n"`` -> ``"\\n\\n"``): such a token is a boundary token,
    content of the turn. ``ends`` are the ids that close the turn; empty means the next
    header closes it (then, for an assistant turn, that header's first token is the
    turn's end token: the model writes it to stop). ``body`` is the role of the turn's
    content when it is not ``role`` itself (an assistant header may open reasoning or a
    tool call).
    """

    role: Role
    core: tuple[int, ...]
    tail: int | None = None
    ends: tuple[int, ...] = ()
    until: int | None = None
    body: Role | None = None
    #: Roles of open turns this header may open inside, closing them (DiffusionGemma writes a new
    #: model header after tool responses without closing the model turn); elsewhere a header inside an
    #: open turn is special-token text pasted into content.
    inside: tuple[Role, ...] = ()
    #: Role of the tokens between the core and ``until`` when they are not header (harmony's
    #: ``to=functions.get_weather`` is the model naming the function it calls: part of the call).
    free: Role | None = None
    #: End ids that are ordinary text inside this header's turn: the template itself writes them there
    #: (Command A's tool-use preamble spells ``<|START_RESPONSE|>`` … ``<|END_RESPONSE|>`` as special tokens
    #: in its system turn to explain the format); elsewhere an end id the turn does not accept is a stray.
    plain: tuple[int, ...] = ()
    #: A row may end right after this header, its turn empty: a template that writes the generation prompt
    #: at the end of every rendering (axolotl's Command A appends ``<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>``
    #: even without ``add_generation_prompt``); elsewhere a row that ends inside a turn is an unclosed turn.
    ends_row: bool = False
    #: The closing id of a sub-span that must have closed in the open turn, and not opened again, for this
    #: header to open inside it (DiffusionGemma reopens the model turn only once a ``<tool_response|>`` has
    #: closed the tool output): a header typed inside tool output is pasted text, not a new reply.
    #: None: anywhere (EXAONE 3's unclosed user turn ends at any header).
    inside_after: int | None = None

    @property
    def body_role(self) -> Role:
        return self.body if self.body is not None else self.role

    def to_json(self) -> dict:
        return {"role": self.role.name.lower(), "core": list(self.core), "tail": self.tail, "ends": list(self.ends),
                "until": self.until, "body": self.body.name.lower() if self.body is not None else None,
                "inside": [r.name.lower() for r in self.inside], "inside_after": self.inside_after,
                "free": self.free.name.lower() if self.free is not None else None, "plain": list(self.plain),
                "ends_row": self.ends_row}

    @classmethod
    def from_json(cls, d: dict) -> "Header":
        return cls(Role[d["role"].upper()], tuple(d["core"]), d["tail"], tuple(d["ends"]), d.get("until"),
                   _role(d.get("body")), tuple(Role[r.upper()] for r in d.get("inside", ())), _role(d.get("free")),
                   tuple(d.get("plain", ())), bool(d.get("ends_row", False)), d.get("inside_after"))


@dataclass(frozen=True)
class SubSpan:
    """A block inside a turn body: ``open`` id through ``close`` id (None: to the end of the turn).

    It opens only inside bodies of the roles in ``within``, and its tokens, markers
    included, take ``role``.
    """

    open: int
    close: int | None
    role: Role
    within: tuple[Role, ...] = (Role.ASSISTANT,)
    #: The opening id, right after the assistant's own output, is the model's stop token: it is
    #: labelled that turn's end (Gemma 4 writes ``<|tool_response>`` after its tool calls and waits;
    #: the tool output follows inside the model turn, and the model goes on after the block).
    stops: bool = False

    def to_json(self) -> dict:
        return {"open": self.open, "close": self.close, "role": self.role.name.lower(),
                "within": [r.name.lower() for r in self.within], "stops": self.stops}

    @classmethod
    def from_json(cls, d: dict) -> "SubSpan":
        return cls(d["open"], d["close"], Role[d["role"].upper()], tuple(Role[r.upper()] for r in d["within"]),
                   bool(d.get("stops", False)))


Pair = tuple[int, int | None]  # opening id, closing id (None: runs to the end of the turn)


@dataclass(frozen=True)
class TemplateProfile:
    """Token-level description of one chat template family.

    ``bos`` is the id run that opens every row when the template emits one;
    ``bos_role`` names the role of bare text after it (DeepSeek puts the system prompt
    there). ``after_end`` are ids a template writes right after an end marker
    (ChatML's and Gemma's newline, Cohere 2's ``<|END_OF_TURN_TOKEN|>`` after
    ``<|END_RESPONSE|>``); ``eos`` are ids that may close a row after its last turn.
    ``short_tails`` are newline-run ids no longer than a header tail: they can never be
    a tail merged with content.
    """

    name: str
    headers: tuple[Header, ...]
    after_end: tuple[int, ...] = ()
    bos: tuple[int, ...] = ()
    bos_role: Role | None = None
    subs: tuple[SubSpan, ...] = ()
    eos: tuple[int, ...] = ()
    short_tails: tuple[int, ...] = ()
    #: An assistant header right after an assistant end continues the same message (harmony writes a
    #: message's analysis and final answer as two blocks the model emits in one go).
    joins_blocks: bool = False
    source: str = "builtin"  # "builtin" or "derived"
    notes: tuple[str, ...] = field(default=(), compare=False)
    #: The relaxations verification found in force, each with the probe rendering that needs it
    #: (``spans/learn/verify.py: tighten``): (name, what it allows, rendering that is mislabelled without it).
    #: Empty for a profile that was never verified (its relaxations are then all in force, unproven).
    relaxations: tuple[tuple[str, str, str], ...] = field(default=(), compare=False)

    # ------------------------------------------------------------------ views
    def _pair(self, role: Role) -> Pair | None:
        for s in self.subs:
            if s.role == role and Role.ASSISTANT in s.within:
                return s.open, s.close
        return None

    @property
    def reasoning(self) -> Pair | None:
        """The reasoning markers of assistant bodies (``<think>``/``</think>``), if any."""
        return self._pair(Role.REASONING)

    @property
    def tool_call(self) -> Pair | None:
        return self._pair(Role.TOOL_CALL)

    def marker_ids(self) -> set[int]:
        """Every id the profile gives a meaning to."""
        ids = {i for h in self.headers for i in (*h.core, *h.ends, *h.plain, h.tail, h.until) if i is not None}
        ids |= {i for s in self.subs for i in (s.open, s.close) if i is not None}
        return ids | set(self.after_end) | set(self.bos) | set(self.eos)

    # ------------------------------------------------------------------ persistence
    def to_json(self) -> str:
        return json.dumps({
            "name": self.name, "headers": [h.to_json() for h in self.headers], "after_end": list(self.after_end),
            "bos": list(self.bos), "bos_role": self.bos_role.name.lower() if self.bos_role is not None else None,
            "subs": [s.to_json() for s in self.subs], "eos": list(self.eos),
            "short_tails": list(self.short_tails), "joins_blocks": self.joins_blocks, "source": self.source,
            "notes": list(self.notes),
            "relaxations": [{"name": n, "allows": a, "needed_by": b} for n, a, b in self.relaxations],
        })

    @classmethod
    def from_json(cls, text: str) -> "TemplateProfile":
        d = json.loads(text)
        return cls(d["name"], tuple(Header.from_json(h) for h in d["headers"]), tuple(d["after_end"]), tuple(d["bos"]),
                   _role(d["bos_role"]), tuple(SubSpan.from_json(s) for s in d["subs"]), tuple(d["eos"]),
                   tuple(d["short_tails"]), bool(d.get("joins_blocks", False)), d["source"], tuple(d.get("notes", ())),
                   tuple((r["name"], r["allows"], r["needed_by"]) for r in d.get("relaxations", ())))

    # ------------------------------------------------------------------ comparison
    def structure(self) -> dict:
        """What labelling depends on, order-free: two profiles label alike iff these are equal."""
        return {
            "headers": sorted((int(h.role), h.core, h.tail if h.tail is not None else -1, tuple(sorted(h.ends)),
                               h.until if h.until is not None else -1, int(h.body_role), tuple(sorted(h.inside)),
                               h.inside_after if h.inside_after is not None else -1,
                               int(h.free) if h.free is not None else -1, tuple(sorted(h.plain)), h.ends_row)
                              for h in self.headers),
            "after_end": sorted(self.after_end), "bos": self.bos,
            "bos_role": int(self.bos_role) if self.bos_role is not None else None,
            "subs": sorted((s.open, s.close if s.close is not None else -1, int(s.role), tuple(sorted(s.within)),
                            s.stops) for s in self.subs),
            "eos": sorted(self.eos),
        }

    def roles(self) -> set[Role]:
        return {h.role for h in self.headers}


class CompiledProfile:
    """Lookup tables over ids for one profile and vocabulary size (built once per process).

    Header specs are sorted longest core first, so a longer header wins over its own
    prefix; the begin-of-sequence run is one more spec (it matches only at a row start).
    """

    def __init__(self, profile: TemplateProfile, newline_lead: np.ndarray) -> None:
        self.profile = profile
        self._index_specs(profile, newline_lead)
        self._index_openers_and_ends(profile)
        self._build_end_tables(profile)
        self._build_spec_columns()
        self._build_unknown_headers()
        self._build_nesting(profile)
        self._build_tail_merging(profile, newline_lead)
        self._build_id_flags(profile)

    def _index_specs(self, profile: TemplateProfile, newline_lead: np.ndarray) -> None:
        """Table size, and the header specs in matching order (longest core first, the bos run one more spec)."""
        size = len(newline_lead)
        ids = profile.marker_ids()
        self.size = max([size, *[i + 1 for i in ids]])
        headers = list(profile.headers)
        if profile.bos:
            headers.append(Header(profile.bos_role if profile.bos_role is not None else Role.OUTSIDE, profile.bos))
        self.headers = sorted(headers, key=lambda h: -len(h.core))
        self.is_bos_spec = np.array([bool(profile.bos) and h.core == profile.bos and not h.ends and h.until is None
                                     for h in self.headers], dtype=bool)

    def _index_openers_and_ends(self, profile: TemplateProfile) -> None:
        """Which ids open and which close turns (never both), the ``until`` ids, and a code per end id."""
        self.opener = np.zeros(self.size, dtype=bool)
        self.opener[[h.core[0] for h in self.headers]] = True  # lookup table, for profiles with many openers
        self.opener_ids = tuple(sorted({h.core[0] for h in self.headers}))
        self.end_ids = tuple(sorted({e for h in self.headers for e in h.ends}))
        self.is_end = np.zeros(self.size, dtype=bool)
        self.is_end[list(self.end_ids)] = True
        both = np.flatnonzero(self.opener & self.is_end)
        if len(both):
            raise ValueError(f"profile {profile.name}: ids {both.tolist()} both open and close turns")
        self.until_ids = tuple(sorted({h.until for h in self.headers if h.until is not None}))
        self.end_code = np.zeros(self.size, dtype=np.uint8)
        for code, e in enumerate(self.end_ids):
            self.end_code[e] = code

    def _build_end_tables(self, profile: TemplateProfile) -> None:
        """Per spec and end code: may that end close the spec's turn, and is it plain text inside it."""
        # accepts[spec + 1, end_code]: may this end close a turn opened by this header (row 0: unknown role)?
        self.accepts = np.zeros((len(self.headers) + 1, max(1, len(self.end_ids))), dtype=bool)
        self.accepts[0, :] = True
        for s, h in enumerate(self.headers):
            for e in h.ends:
                self.accepts[s + 1, self.end_ids.index(e)] = True
        # plain[spec + 1, end_code]: is this end id ordinary text inside a turn this header opened?
        self.plain = np.zeros_like(self.accepts)
        for s, h in enumerate(self.headers):
            for e in h.plain:
                if e not in self.end_ids:
                    raise ValueError(f"profile {profile.name}: plain id {e} of a {h.role.name} header is no end id")
                self.plain[s + 1, self.end_ids.index(e)] = True
        self.has_plain = bool(self.plain.any())

    def _build_spec_columns(self) -> None:
        """One value per spec (index spec + 1, row 0 the unknown role): row end, roles, core length, free, until."""
        # ends_row[spec + 1]: may a row end right after this header, its turn empty?
        self.spec_ends_row = np.array([False] + [h.ends_row for h in self.headers], dtype=bool)
        self.spec_role = np.array([Role.UNKNOWN_ROLE] + [h.role for h in self.headers], dtype=np.uint8)
        self.spec_body = np.array([Role.UNKNOWN_ROLE] + [h.body_role for h in self.headers], dtype=np.uint8)
        self.spec_len = np.array([1] + [len(h.core) for h in self.headers], dtype=np.int64)
        # free[spec + 1]: role of the tokens between core and until (0: they are header)
        self.spec_free = np.array([0] + [h.free if h.free is not None and h.until is not None else 0
                                         for h in self.headers], dtype=np.uint8)
        self.has_free = bool(self.spec_free.any())
        self.spec_until = np.array([-1] + [h.until if h.until is not None else -1 for h in self.headers],
                                   dtype=np.int64)

    def _build_unknown_headers(self) -> None:
        """Per opener id: the length, tail and ``until`` of a header of an unknown role it starts."""
        # A header of an unknown role spans as many tokens as the shortest header its opener starts,
        # and ends with their tail when they share one (ChatML: opener, role word, newline).
        self.unknown_len = np.ones(len(self.opener_ids), dtype=np.int64)
        self.unknown_tail = np.full(len(self.opener_ids), -1, dtype=np.int64)
        self.unknown_until = np.full(len(self.opener_ids), -1, dtype=np.int64)
        for k, o in enumerate(self.opener_ids):
            same = [h for h in self.headers if h.core[0] == o]
            self.unknown_len[k] = min(len(h.core) for h in same)
            tails = {h.tail for h in same}
            if len(tails) == 1 and None not in tails:
                self.unknown_tail[k] = tails.pop()
            untils = {h.until for h in same}
            if len(untils) == 1 and None not in untils:
                self.unknown_until[k] = untils.pop()

    def _build_nesting(self, profile: TemplateProfile) -> None:
        """Per spec: inside which open turns it may open, whether its turn needs an end, and its tail."""
        # inside[spec + 1, role]: may this header open while a turn of that role is open (closing it)?
        self.spec_inside = np.zeros((len(self.headers) + 1, 256), dtype=bool)
        for s, h in enumerate(self.headers):
            self.spec_inside[s + 1, list(h.inside)] = True
        # inside_after[spec + 1]: the sub-span (index into subs) that must have closed in the open turn for
        # it to open inside that turn (-1: anywhere)
        closes = [s.close for s in profile.subs]
        self.spec_inside_after = np.array([-1] + [closes.index(h.inside_after) if h.inside_after in closes else -1
                                                  for h in self.headers], dtype=np.int64)
        self.spec_needs_end = np.array([True] + [bool(h.ends) for h in self.headers], dtype=bool)
        # An assistant turn without end ids is closed by the next header, whose first token it generates.
        self.spec_closed_by_next = np.array([False] + [h.role == Role.ASSISTANT and not h.ends for h in self.headers],
                                            dtype=bool)
        self.spec_tail = np.array([-1] + [h.tail if h.tail is not None else -1 for h in self.headers], dtype=np.int64)

    def _build_tail_merging(self, profile: TemplateProfile, newline_lead: np.ndarray) -> None:
        """Which header tails may merge with content, and which whitespace ids are such a merged tail."""
        size = len(newline_lead)
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

    def _build_id_flags(self, profile: TemplateProfile) -> None:
        """Ids written after an end marker, ids that may close a row, and the roles of the assistant's output."""
        self.after_end = np.zeros(self.size, dtype=bool)
        self.after_end[list(profile.after_end)] = True
        self.is_eos = np.zeros(self.size, dtype=bool)
        self.is_eos[list(profile.eos)] = True
        #: by role code: the assistant's own output, which a stop token may follow
        self.assistant_output = np.zeros(256, dtype=bool)
        self.assistant_output[[Role.ASSISTANT, Role.REASONING, Role.TOOL_CALL, Role.ASSISTANT_HEADER]] = True

    @cached_property
    def max_core(self) -> int:
        return max(len(h.core) for h in self.headers)
