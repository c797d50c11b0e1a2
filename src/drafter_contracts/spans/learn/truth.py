"""Ground truth for one rendering: which characters and tokens are which message's text.

The span oracle is judged against this, so nothing here looks at token ids, profiles or
the oracle: the truth comes from the chat template's own output. The conversation is
rendered twice through the real template (transformers' ``apply_chat_template``): once as
given, and once with every text field replaced by a unique letters-only placeholder. In
the placeholder rendering each field is found exactly (a placeholder occurs once, or not
at all when the template drops that field), and the text between placeholders is the
template's own scaffold. The real rendering must then read as that scaffold with each
field's text in one of the forms templates write it (as is, stripped, JSON-escaped once
or twice, quote-escaped); the alignment is exact, so a field is never placed by searching
for its text, and anything the template does that this does not model (changing the
scaffold with the text, transforming the text some other way) stops with
:class:`TruthUnavailable` naming what differs - never a guess.

Non-string argument values (numbers, booleans, null) keep their value in both renderings
and are placed right after their key. A function name a template repeats later (in a
tool-response header) counts as scaffold there: only its first rendering is the call.
Whitespace a field starts or ends with is scaffold: templates strip it inconsistently,
and no rule below depends on it.

:func:`check_labels` compares an oracle's per-token labels of the same rendering with
the truth, by the rules in its docstring.
"""

from __future__ import annotations

import copy
import json
import re
import sys
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..labels import Role
from ..prefix import common_prefix_length


class TruthUnavailable(Exception):
    """A field of the conversation cannot be placed in the rendering unambiguously; the message says why."""


class TemplateRejected(Exception):
    """The chat template raised on the conversation as given (it does not accept that shape)."""


class CharClass(IntEnum):
    """What a character of a rendering is: the template's scaffold or a message field of some kind."""

    SCAFFOLD = 0
    SYSTEM = 1
    USER = 2
    TOOL = 3
    ASSISTANT = 4
    REASONING = 5
    TOOL_CALL = 6


CLASS_NAMES = {p: p.name.lower() for p in CharClass}
#: Message role -> the class of its content (developer prompts are system prompts; ipython is Llama's tool role).
ROLE_CLASS = {"system": CharClass.SYSTEM, "developer": CharClass.SYSTEM, "user": CharClass.USER, "tool": CharClass.TOOL,
             "ipython": CharClass.TOOL, "assistant": CharClass.ASSISTANT}
#: Message fields templates read reasoning from (Cohere's Command A writes a tool-call message's ``tool_plan`` in
#: its ``<|START_THINKING|>`` block).
REASONING_KEYS = ("reasoning_content", "thinking", "reasoning", "tool_plan")
#: Roles of an assistant turn; every other role is N in the scaffold rule.
ASSISTANT_TURN_ROLES = frozenset((Role.ASSISTANT, Role.REASONING, Role.TOOL_CALL, Role.ASSISTANT_END,
                                  Role.AFTER_ASSISTANT_END, Role.ASSISTANT_HEADER))

_PLACEHOLDER = re.compile(r"zqx([a-z]{5,7})xqz")
_INLINE_THINK = re.compile(r"^(\s*)<think>(.*?)</think>(.*)$", re.DOTALL)
_MAX_FIELDS = 26 ** 4


# --------------------------------------------------------------------------- what a conversation holds


@dataclass(frozen=True)
class Field:
    """One message field placed in a rendering: characters ``[start, end)`` of ``TruthRender.text``."""

    message: int
    char_class: CharClass
    what: str  # "content", "reasoning", "tool_calls[0].name", "tool_calls[0].arguments.city", "...=value"
    start: int
    end: int

    def describe(self, roles: Sequence[str]) -> str:
        return f"{CLASS_NAMES[self.char_class]} {self.what} of message {self.message} ({roles[self.message]})"


@dataclass
class _Spec:
    """A field before placement: its text, its placeholder, how the template may write it."""

    message: int
    part: CharClass
    what: str
    core: str  # the text to find (for "local" fields: the value's written forms come from ``value``)
    kind: str  # "text" | "name" | "local"
    code: str = ""  # placeholder code (letters), empty for local fields
    value: Any = None  # local fields: the JSON value
    key: int = -1  # local fields: index of the key's spec


def _b26(n: int, width: int) -> str:
    out = []
    for _ in range(width):
        n, r = divmod(n, 26)
        out.append(chr(ord("a") + r))
    return "".join(reversed(out))


class _Planner:
    """Walks the messages once: field specs, and the same messages with placeholders in the fields."""

    def __init__(self) -> None:
        self.specs: list[_Spec] = []

    def _add(self, spec: _Spec, code: str | None = None) -> str:
        if len(self.specs) >= _MAX_FIELDS:
            raise TruthUnavailable("conversation has too many fields for the placeholder alphabet")
        spec.code = code if code is not None else "f" + _b26(len(self.specs), 4)
        self.specs.append(spec)
        return f"zqx{spec.code}xqz"

    def text(self, message: int, part: CharClass, what: str, value: str) -> str:
        """A text field: placeholder replaces its stripped core; its edge whitespace is kept (scaffold)."""
        core = value.strip()
        if not core:
            return value
        lead = value[:len(value) - len(value.lstrip())]
        trail = value[len(value.rstrip()):]
        return lead + self._add(_Spec(message, part, what, core, "text")) + trail

    def content(self, i: int, role: str, part: CharClass, content: Any) -> Any:
        if isinstance(content, str):
            if role == "assistant":
                m = _INLINE_THINK.match(content)
                if m:
                    lead, reasoning, rest = m.groups()
                    return (lead + "<think>" + self.text(i, CharClass.REASONING, "inline <think> reasoning", reasoning)
                            + "</think>" + self.text(i, part, "content", rest))
            return self.text(i, part, "content", content)
        if isinstance(content, list):
            out = []
            for k, item in enumerate(content):
                if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str):
                    item = {**item, "text": self.text(i, part, f"content[{k}].text", item["text"])}
                out.append(item)
            return out
        return content  # None / other: nothing rendered from it is the message's text

    def arguments(self, i: int, call: int, args: Any) -> Any:
        what = f"tool_calls[{call}].arguments"
        if isinstance(args, str):  # a JSON string is written as one piece: the whole string is the call's text
            return self.text(i, CharClass.TOOL_CALL, what, args)
        if not isinstance(args, dict):
            return args
        # Key placeholders sort like the keys (case-insensitive, as jinja's dictsort), so a template that
        # sorts arguments renders both conversations in the same order.
        rank = {k: r for r, k in enumerate(sorted(args, key=lambda k: (str(k).lower(), str(k))))}
        out = {}
        for key, value in args.items():
            if not isinstance(key, str) or not key.strip() or key != key.strip():
                raise TruthUnavailable(f"message {i} {what}: key {key!r} cannot be placed (not a plain string)")
            key_index = len(self.specs)
            placeholder = self._add(_Spec(i, CharClass.TOOL_CALL, f"{what}.{key}", key, "text"),
                                    "k" + _b26(rank[key], 2) + _b26(key_index, 4))
            if isinstance(value, str):
                out[placeholder] = self.text(i, CharClass.TOOL_CALL, f"{what}.{key}=value", value)
            else:
                self.specs.append(_Spec(i, CharClass.TOOL_CALL, f"{what}.{key}=value", "", "local", value=value,
                                        key=key_index))
                out[placeholder] = value
        return out

    def message(self, i: int, m: dict[str, Any]) -> dict[str, Any]:
        role = m.get("role")
        if role not in ROLE_CLASS:
            raise TruthUnavailable(f"message {i} has role {role!r}, which has no class in the truth "
                                   f"(known: {', '.join(ROLE_CLASS)})")
        part = ROLE_CLASS[role]
        out = dict(m)
        if "content" in m:
            out["content"] = self.content(i, role, part, m["content"])
        if role == "assistant":
            for key in REASONING_KEYS:
                if isinstance(m.get(key), str):
                    out[key] = self.text(i, CharClass.REASONING, key, m[key])
            calls = m.get("tool_calls")
            if isinstance(calls, list):
                new_calls = []
                for c, call in enumerate(calls):
                    call = copy.deepcopy(call)
                    fn = call.get("function", call) if isinstance(call, dict) else None
                    if not isinstance(fn, dict):
                        raise TruthUnavailable(f"message {i} tool_calls[{c}] is not a mapping")
                    name = fn.get("name")
                    if isinstance(name, str) and name.strip():
                        if name != name.strip():
                            raise TruthUnavailable(f"message {i} tool_calls[{c}].name has edge whitespace")
                        fn["name"] = self._add(_Spec(i, CharClass.TOOL_CALL, f"tool_calls[{c}].name", name, "name"))
                    if "arguments" in fn:
                        fn["arguments"] = self.arguments(i, c, fn["arguments"])
                    new_calls.append(call)
                out["tool_calls"] = new_calls
        return out


# --------------------------------------------------------------------------- how a field may be written


def _text_forms(core: str) -> list[str]:
    """Ways templates write a string: as is, JSON-escaped (ASCII or not, once or twice), quote-escaped."""
    once = [json.dumps(core, ensure_ascii=a)[1:-1] for a in (False, True)]
    twice = [json.dumps(s, ensure_ascii=a)[1:-1] for s in once for a in (False, True)]
    quoted = core.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\r", "\\r")
    return list(dict.fromkeys([core, *once, *twice, quoted]))


def _value_forms(value: Any) -> list[str]:
    """Ways templates write a non-string JSON value (json, Python's str, jinja's lower-case booleans)."""
    if value is None:
        forms = ["null", "None"]
    elif isinstance(value, bool):
        forms = ["true", "True"] if value else ["false", "False"]
    elif isinstance(value, (int, float)):
        forms = [json.dumps(value), str(value), repr(value)]
    else:
        forms = [json.dumps(value, ensure_ascii=a, separators=s) for a in (False, True)
                 for s in (None, (",", ":"))] + [str(value)]
    return list(dict.fromkeys(forms))


# --------------------------------------------------------------------------- the rendering


@dataclass
class TruthRender:
    """A rendering, its tokens, and which characters/tokens are which message field."""

    text: str
    ids: np.ndarray  # int64 per token
    offsets: np.ndarray  # int64 [n, 2] character span per token
    fields: tuple[Field, ...]  # placed fields, in text order
    dropped: tuple[str, ...]  # fields the template did not render, described
    roles: tuple[str, ...]  # role of each message
    char_class: np.ndarray  # uint8 per character: CharClass
    char_message: np.ndarray  # int32 per character: message index, -1 for scaffold
    char_field: np.ndarray  # int32 per character: index into ``fields``, -1 for scaffold
    token_classes: np.ndarray  # uint8 per token: bit p set when a character of the token is CharClass p
    token_field: np.ndarray  # int32 per token: the field it lies wholly inside, -1 wholly scaffold, -2 mixed
    generated: tuple[int, int] | None = None  # per_turn: characters the model generates
    prompt_text: str | None = None  # per_turn: the rendering of messages[:-1] with the generation prompt
    #: per_turn, when the prompt rendering parts from this one before the last message: why (``generated`` is None)
    history_rewritten: str | None = None
    template_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def n_tokens(self) -> int:
        return len(self.ids)

    def kind(self, message: int) -> str:
        """``"A"`` for an assistant message, ``"N"`` for any other."""
        return "A" if self.roles[message] == "assistant" else "N"

    def token_text(self, t: int) -> str:
        s, e = self.offsets[t]
        return self.text[s:e]

    def classes_of_token(self, t: int) -> list[CharClass]:
        bits = int(self.token_classes[t])
        return [p for p in CharClass if bits >> p & 1]

    def field_tokens(self, parts: Iterable[CharClass] | None = None) -> np.ndarray:
        """Indices of the tokens wholly inside a field (of the given classes)."""
        inside = self.token_field >= 0
        if parts is None:
            return np.flatnonzero(inside)
        wanted = np.zeros(len(CharClass), dtype=bool)
        wanted[list(parts)] = True
        part = np.array([f.char_class for f in self.fields], dtype=np.int64)
        safe = np.where(inside, self.token_field, 0)
        return np.flatnonzero(inside & wanted[part[safe]] if len(part) else inside)

    def generated_tokens(self) -> np.ndarray:
        """Tokens wholly inside the generated range (per_turn renderings)."""
        if self.generated is None:
            return np.zeros(0, dtype=np.int64)
        a, b = self.generated
        starts, ends = self.offsets[:, 0], self.offsets[:, 1]
        return np.flatnonzero((starts >= a) & (ends <= b) & (ends > starts))


def _render(tokenizer: Any, messages: list[dict], tools: Any, template: str | None, add_generation_prompt: bool,
            kwargs: dict[str, Any]) -> str:
    text = tokenizer.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=False,
                                         add_generation_prompt=add_generation_prompt, **kwargs)
    if not isinstance(text, str):
        raise TypeError(f"apply_chat_template returned {type(text).__name__}, not the rendered text")
    return text


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _slots(specs: list[_Spec], sentinel_text: str) -> tuple[list[tuple[int, int, int, bool]], set[int]]:
    """Placeholders in the placeholder rendering: (start, end, spec index, is a copy), and the specs seen."""
    by_code = {s.code: k for k, s in enumerate(specs) if s.kind != "local"}
    slots, seen = [], set()
    for m in _PLACEHOLDER.finditer(sentinel_text):
        k = by_code.get(m.group(1))
        if k is None:
            raise TruthUnavailable(f"the template wrote a placeholder it was not given ({m.group(0)!r})")
        spec = specs[k]
        copy_ = k in seen
        if copy_ and spec.kind != "name":
            raise TruthUnavailable(f"the template renders the {spec.what} of message {spec.message} more than once")
        seen.add(k)
        slots.append((m.start(), m.end(), k, copy_))
    return slots, seen


def _align(text: str, pieces: list[str], forms: list[list[str]], describe: list[str]) -> list[tuple[int, int]]:
    """(start, end) of every slot in ``text`` = pieces[0] + slot0 + pieces[1] + ... + pieces[-1], exactly.

    Each slot is one of its forms; the first complete reading is returned, and a second
    complete reading (two forms of a slot both fitting) is ambiguity.
    """
    n = len(forms)
    memo: dict[tuple[int, int], int] = {}
    choice: dict[tuple[int, int], int] = {}

    def count(i: int, pos: int) -> int:  # readings of slots i.. from pos (after pieces[i] matched), capped at 2
        if i == n:
            return 1 if pos == len(text) else 0
        key = (i, pos)
        if key in memo:
            return memo[key]
        total, first = 0, -1
        nxt = pieces[i + 1]
        for f in forms[i]:
            if text.startswith(f, pos) and text.startswith(nxt, pos + len(f)):
                c = count(i + 1, pos + len(f) + len(nxt))
                if c and first < 0:
                    first = len(f)
                total += c
                if total >= 2:
                    break
        memo[key], choice[key] = min(total, 2), first
        return memo[key]

    if not text.startswith(pieces[0]):
        raise TruthUnavailable(f"the rendering differs from the placeholder rendering before any field (at character "
                               f"{common_prefix_length(text, pieces[0])}): the template's opening depends on the text")
    limit = sys.getrecursionlimit()
    if n + 100 > limit:
        sys.setrecursionlimit(n + 100)
    try:
        found = count(0, len(pieces[0]))
    finally:
        sys.setrecursionlimit(limit)
    if found == 0:
        raise _unreadable(text, pieces, forms, describe)
    if found > 1:
        raise TruthUnavailable("the rendering reads as the placeholder rendering in two ways: a field's text "
                               "also fits the scaffold next to it")
    return _chosen_spans(choice, pieces, n)


def _unreadable(text: str, pieces: list[str], forms: list[list[str]], describe: list[str]) -> TruthUnavailable:
    """Why no reading of ``text`` fits (for ``_align``): names the first slot the greedy reading cannot get past."""
    pos = len(pieces[0])
    for i in range(len(forms)):
        ok = [f for f in forms[i] if text.startswith(f, pos) and text.startswith(pieces[i + 1], pos + len(f))]
        if not ok:
            return TruthUnavailable(f"the {describe[i]} is not written as its text (as is, stripped or escaped) "
                                    f"between the scaffold the template writes around it (rendering at character "
                                    f"{pos}: {text[pos:pos + 40]!r}); the template transforms that text or "
                                    "changes its scaffold with it")
        pos += len(ok[0]) + len(pieces[i + 1])
    return TruthUnavailable("the rendering does not read as the placeholder rendering with the fields' text")


def _chosen_spans(choice: dict[tuple[int, int], int], pieces: list[str], n: int) -> list[tuple[int, int]]:
    """Walk the one complete reading ``_align`` found: the (start, end) of each slot, from the form chosen there."""
    spans, pos = [], len(pieces[0])
    for i in range(n):
        length = choice[(i, pos)]
        spans.append((pos, pos + length))
        pos += length + len(pieces[i + 1])
    return spans


def _token_tables(text: str, offsets: np.ndarray, char_field: np.ndarray, char_class: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Per token: the bit set of the classes of its characters, and the one field it lies in (-1 / -2)."""
    n = len(offsets)
    starts, ends = offsets[:, 0], offsets[:, 1]
    empty = ends <= starts
    L = len(text)
    # Classes present in [s, e) from per-part prefix counts.
    onehot = np.zeros((L + 1, len(CharClass)), dtype=np.int32)
    if L:
        onehot[np.arange(1, L + 1), char_class] = 1
    csum = np.cumsum(onehot, axis=0)
    s_c, e_c = np.minimum(starts, L), np.minimum(ends, L)
    present = (csum[e_c] - csum[s_c]) > 0
    bits = (present * (1 << np.arange(len(CharClass)))).sum(axis=1).astype(np.uint8)
    bits[empty] = 1 << CharClass.SCAFFOLD
    # Homogeneous tokens: no change of field inside [s, e).
    change = np.zeros(L + 1, dtype=np.int64)
    if L > 1:
        change[2:] = np.cumsum(char_field[1:] != char_field[:-1])
    homog = ~empty & (change[np.maximum(e_c, 1)] - change[np.minimum(s_c + 1, L)] == 0) if L else np.zeros(n, bool)
    tf = np.full(n, -2, dtype=np.int32)
    first = char_field[np.minimum(s_c, max(L - 1, 0))] if L else np.full(n, -1)
    tf[homog] = first[homog]
    tf[empty] = -1
    return bits, tf


def render_truth(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *,
                 template: str | None = None, per_turn: bool = False, **template_kwargs: Any) -> TruthRender:
    """Render ``messages`` with the chat template and say which characters and tokens are which field.

    ``tokenizer`` is a transformers tokenizer; ``template`` overrides its chat template.
    Raises :class:`TemplateRejected` when the template raises on the conversation, and
    :class:`TruthUnavailable` when a field cannot be placed unambiguously.
    With ``per_turn`` (the last message must be an assistant message) ``generated`` is the
    character range the model generates: from the end of the longest common prefix of this
    rendering and the rendering of ``messages[:-1]`` with the generation prompt, to the end.
    When the two part before the last message (a field of an earlier message lies past that
    point) the template rewrites history, ``generated`` is None and ``history_rewritten`` says
    where.
    """
    messages = list(messages)
    if per_turn and (not messages or messages[-1].get("role") != "assistant"):
        raise ValueError("per_turn needs a conversation that ends with an assistant message")
    try:
        text = _render(tokenizer, messages, tools, template, False, template_kwargs)
    except Exception as exc:  # templates raise anything: TemplateError, their own raise_exception, TypeError
        raise TemplateRejected(_first_line(exc)) from exc
    if "zqx" in text:
        raise TruthUnavailable("the rendering already contains the placeholder prefix 'zqx'; rename that text")
    planner = _Planner()
    placeheld = [planner.message(i, m) for i, m in enumerate(messages)]
    specs = planner.specs
    try:
        sentinel_text = _render(tokenizer, placeheld, tools, template, False, template_kwargs)
    except Exception as exc:
        raise TruthUnavailable(f"the template rejects the conversation once its text is replaced by placeholders "
                               f"({_first_line(exc)}): it branches on the text itself") from None

    slots, seen = _slots(specs, sentinel_text)
    spans = _align_slots(text, sentinel_text, specs, slots)
    placed, dropped = _place_fields(text, specs, slots, spans, seen)
    fields, char_class, char_message, char_field = _char_tables(text, placed)
    ids, offsets = _encode(tokenizer, text)
    token_classes, token_field = _token_tables(text, offsets, char_field, char_class)

    generated, prompt_text, rewritten = None, None, None
    if per_turn:
        generated, prompt_text, rewritten = _generated_range(tokenizer, messages, tools, template, template_kwargs,
                                                             text, fields)
    return TruthRender(text, ids, offsets, fields, tuple(dropped), tuple(str(m.get("role")) for m in messages),
                       char_class, char_message, char_field, token_classes, token_field, generated, prompt_text,
                       rewritten, dict(template_kwargs))


def _align_slots(text: str, sentinel_text: str, specs: list[_Spec], slots: list[tuple[int, int, int, bool]]
                 ) -> list[tuple[int, int]]:
    """Where each placeholder's field lies in the real rendering: the scaffold between placeholders, and the
    forms each slot's text may take (a repeated name only as is), aligned exactly by ``_align``."""
    pieces, prev = [], 0
    for s, e, _, _ in slots:
        pieces.append(sentinel_text[prev:s])
        prev = e
    pieces.append(sentinel_text[prev:])
    if any(_PLACEHOLDER.search(p) for p in pieces):
        raise TruthUnavailable("a placeholder was split by the template")
    forms, described = [], []
    for _, _, k, is_copy in slots:
        spec = specs[k]
        forms.append([spec.core] if is_copy else _text_forms(spec.core))
        described.append(("copy of the " if is_copy else "") + f"{spec.what} of message {spec.message}")
    return _align(text, pieces, forms, described)


def _place_fields(text: str, specs: list[_Spec], slots: list[tuple[int, int, int, bool]],
                  spans: list[tuple[int, int]], seen: set[int]) -> tuple[list[tuple[int, int, _Spec]], list[str]]:
    """Every spec placed in the rendering as (start, end, spec), slot fields first, then local values after
    their keys; and the fields the template did not render, described (local ones first)."""
    placed: list[tuple[int, int, _Spec]] = []
    where: dict[int, tuple[int, int]] = {}  # spec index -> (start, end) for keys, to place local values
    next_slot_start: dict[int, int] = {}
    for i, ((_, _, k, is_copy), (start, end)) in enumerate(zip(slots, spans)):
        if not is_copy:
            placed.append((start, end, specs[k]))
            where[k] = (start, end)
            # Local values: right after their key, inside the scaffold up to the next slot.
            next_slot_start[k] = spans[i + 1][0] if i + 1 < len(spans) else len(text)
    dropped = []
    for spec in specs:
        if spec.kind != "local":
            continue
        if spec.key not in where:
            dropped.append(f"{spec.what} of message {spec.message}")
            continue
        placed.append(_place_local(text, spec, where[spec.key][1], next_slot_start[spec.key]))
    for k, spec in enumerate(specs):
        if spec.kind != "local" and k not in seen:
            dropped.append(f"{spec.what} of message {spec.message}")
    return placed, dropped


def _place_local(text: str, spec: _Spec, a: int, b: int) -> tuple[int, int, _Spec]:
    """A non-string value in the scaffold ``text[a:b]`` after its key: the earliest of its written forms (the
    longest of those starting there)."""
    hits = [(text.find(f, a, b), f) for f in _value_forms(spec.value)]
    hits = [(p, f) for p, f in hits if p >= 0]
    if not hits:
        raise TruthUnavailable(f"the {spec.what} of message {spec.message} ({spec.value!r}) is not written "
                               f"after its key (scaffold there: {text[a:b][:40]!r})")
    p, f = min(hits, key=lambda h: (h[0], -len(h[1])))
    return p, p + len(f), spec


def _char_tables(text: str, placed: list[tuple[int, int, _Spec]]
                 ) -> tuple[tuple[Field, ...], np.ndarray, np.ndarray, np.ndarray]:
    """The placed fields in text order (overlapping ones refused), and per character its class, message and
    field index (scaffold: class 0, -1, -1)."""
    placed.sort(key=lambda t: t[0])
    fields = tuple(Field(sp.message, sp.part, sp.what, s, e) for s, e, sp in placed)
    for f1, f2 in zip(fields, fields[1:]):
        if f2.start < f1.end:
            raise TruthUnavailable(f"{f1.what} and {f2.what} overlap in the rendering")
    L = len(text)
    char_class = np.zeros(L, dtype=np.uint8)
    char_message = np.full(L, -1, dtype=np.int32)
    char_field = np.full(L, -1, dtype=np.int32)
    for j, f in enumerate(fields):
        char_class[f.start:f.end] = f.char_class
        char_message[f.start:f.end] = f.message
        char_field[f.start:f.end] = j
    return fields, char_class, char_message, char_field


def _encode(tokenizer: Any, text: str) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and character offsets of ``text`` from the fast tokenizer's backend, without special tokens."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise TypeError("render_truth needs a fast (tokenizers-backed) transformers tokenizer")
    enc = backend.encode(text, add_special_tokens=False)
    ids = np.asarray(enc.ids, dtype=np.int64)
    offsets = np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2)
    return ids, offsets


def _generated_range(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                     template: str | None, template_kwargs: dict[str, Any], text: str, fields: tuple[Field, ...]
                     ) -> tuple[tuple[int, int] | None, str, str | None]:
    """per_turn: the characters the model generates (from where the prompt rendering parts from this one to
    the end), the prompt rendering, and why there is no such range when the template rewrites history."""
    try:
        prompt_text = _render(tokenizer, messages[:-1], tools, template, True, template_kwargs)
    except Exception as exc:
        raise TemplateRejected(f"with the generation prompt: {_first_line(exc)}") from exc
    start = common_prefix_length(prompt_text, text)
    # A template that renders history differently once the turn follows (gpt-oss drops the analysis of
    # tool calls a final answer follows) parts before the last message: what follows is not the turn.
    history = [f for f in fields if f.message < len(messages) - 1 and f.end > start]
    if history:
        rewritten = (f"the prompt rendering parts from this one at character {start}, before the "
                     f"{history[0].describe(tuple(str(m.get('role')) for m in messages))}: the template renders "
                     "earlier messages differently once this turn follows")
        return None, prompt_text, rewritten
    return (start, len(text)), prompt_text, None


# --------------------------------------------------------------------------- judging labels


@dataclass(frozen=True)
class Mismatch:
    """One token whose label contradicts the truth."""

    token: int
    text: str
    truth: str
    label: str
    reason: str

    def __str__(self) -> str:
        return f"token {self.token} {self.text!r}: truth {self.truth}; labelled {self.label}; {self.reason}"


def allowed_roles(part: CharClass, *, system_as_user: bool = False,
                  unmarked_tool_calls: bool = False) -> frozenset[Role]:
    """Roles a token wholly inside a field of this class may carry (rule a)."""
    if part == CharClass.SYSTEM:
        return frozenset({Role.SYSTEM, Role.USER} if system_as_user else {Role.SYSTEM})
    if part == CharClass.TOOL_CALL:
        return frozenset({Role.TOOL_CALL, Role.ASSISTANT} if unmarked_tool_calls else {Role.TOOL_CALL})
    return frozenset({{CharClass.USER: Role.USER, CharClass.TOOL: Role.TOOL, CharClass.ASSISTANT: Role.ASSISTANT,
                       CharClass.REASONING: Role.REASONING}[part]})


def _collapse(seq: Iterable[str]) -> list[str]:
    out: list[str] = []
    for x in seq:
        if not out or out[-1] != x:
            out.append(x)
    return out


def _role_name(role: int, problem: int = 0, boundary: bool = False) -> str:
    try:
        name = Role(role).name
    except ValueError:
        name = f"role {role}"
    extra = " (boundary)" if boundary else ""
    if problem:
        extra += f" [problem {problem}]"
    return name + extra


def gap_kinds(truth: TruthRender, g: int) -> list[str]:
    """What scaffold gap ``g`` (before field ``g``; ``len(fields)`` is after the last) may read as, in order:
    the kinds (A = assistant message, N = any other) of the messages from the earlier field's to the later
    one's, consecutive repeats collapsed, with N before the first and after the last field (rule c)."""
    fields, nmsg = truth.fields, len(truth.roles)
    k = len(fields)
    if k == 0:
        return _collapse(["N", *(truth.kind(m) for m in range(nmsg)), "N"])
    if g == 0:
        return _collapse(["N", *(truth.kind(m) for m in range(fields[0].message + 1))])
    if g == k:
        return _collapse([*(truth.kind(m) for m in range(fields[-1].message, nmsg)), "N"])
    a, b = fields[g - 1].message, fields[g].message
    span = range(a, b + 1) if a <= b else range(a, b - 1, -1)
    return _collapse(truth.kind(m) for m in span)


def check_labels(truth: TruthRender, role: np.ndarray, problem: np.ndarray, boundary: np.ndarray, *,
                 system_as_user: bool = False, unmarked_tool_calls: bool = False) -> list[Mismatch]:
    """Every token whose oracle label contradicts the truth, in token order (empty: labels agree).

    ``role``/``problem``/``boundary`` are the oracle's per-token arrays for ``truth``'s rendering
    (``spans.labels.Labels``); shorter arrays mean a truncated row (rule e is then off).
    A = the assistant-turn roles (``ASSISTANT_TURN_ROLES``), N = every other role.

    a. a token wholly inside one field carries its class's role (``allowed_roles``).
    b. a token with characters of a field and of scaffold (or of two fields) carries a role
       allowed for one of its fields, or passes as scaffold under rule c.
    c. scaffold between two fields, read as A/N, follows the messages from the earlier field's
       message to the later one's (both included, consecutive repeats collapsed), each element
       repeated zero or more times: between a user field and an assistant field N*A*. Before
       the first field: N, then the kinds of the messages up to the first field's; after the
       last field: the kinds of the messages from its one to the end, then N.
    d. per_turn: every token wholly inside the generated range is A (no range when the
       template rewrites history: ``truth.history_rewritten``).
    e. no structural problem on a rendering that was not truncated.
    """
    role = np.asarray(role)
    problem = np.asarray(problem)
    boundary = np.asarray(boundary)
    n = len(role)
    if n > truth.n_tokens or len(problem) != n or len(boundary) != n:
        raise ValueError(f"labels for {n} tokens do not fit a rendering of {truth.n_tokens} tokens")
    truncated = n < truth.n_tokens
    is_a = np.isin(role.astype(np.int64), [int(r) for r in ASSISTANT_TURN_ROLES])
    kw = {"system_as_user": system_as_user, "unmarked_tool_calls": unmarked_tool_calls}
    allowed = {p: allowed_roles(p, **kw) for p in CharClass if p != CharClass.SCAFFOLD}

    def label_of(t: int) -> str:
        return _role_name(int(role[t]), int(problem[t]), bool(boundary[t]))

    tf = truth.token_field[:n]
    out, as_scaffold = _check_fields(truth, role.astype(np.int64), tf, allowed, label_of)
    out += _check_scaffold(truth, tf, as_scaffold, is_a, label_of)
    # Rule d.
    for t in truth.generated_tokens():
        if t < n and not is_a[t]:
            out.append(Mismatch(int(t), truth.token_text(int(t)), "generated by the model (per-turn range)",
                                label_of(int(t)), "d: a generated token must carry an assistant-turn role"))
    # Rule e.
    if not truncated:
        for t in np.flatnonzero(problem[:n] != 0):
            out.append(Mismatch(int(t), truth.token_text(int(t)), "a well-formed rendering", label_of(int(t)),
                                "e: a structural problem on an untruncated rendering"))
    out.sort(key=lambda m: m.token)
    return out


def _check_fields(truth: TruthRender, role64: np.ndarray, tf: np.ndarray, allowed: dict[CharClass, frozenset[Role]],
                  label_of: Callable[[int], str]) -> tuple[list[Mismatch], np.ndarray]:
    """Rules a and b of ``check_labels``, over arrays (only the offending tokens are visited one by one): the
    rule-a mismatches, and which tokens are judged as scaffold under rule c (wholly scaffold, or mixed with
    no role its fields allow)."""
    out: list[Mismatch] = []
    n = len(role64)
    size = max(int(role64.max(initial=0)) + 1, max(int(r) for r in Role) + 1)
    lut = np.zeros((len(CharClass), size), dtype=bool)  # lut[class, role]: allowed inside a field of that class
    for c, ok in allowed.items():
        lut[c, [int(r) for r in ok]] = True
    field_class = np.array([f.char_class for f in truth.fields], dtype=np.int64)
    inside = tf >= 0
    cls = np.where(inside, field_class[np.maximum(tf, 0)] if len(field_class) else 0, 0)
    for t in np.flatnonzero(inside & ~lut[cls, role64]):
        fld = truth.fields[int(tf[t])]
        out.append(Mismatch(int(t), truth.token_text(int(t)), fld.describe(truth.roles), label_of(int(t)),
                            f"a: {CLASS_NAMES[fld.char_class]} text must be "
                            f"{'/'.join(sorted(x.name for x in allowed[fld.char_class]))}"))
    bits = truth.token_classes[:n].astype(np.int64)
    sides_ok = np.zeros(n, dtype=bool)  # a boundary token carries a role allowed for one of its fields
    for c in allowed:
        sides_ok |= ((bits >> int(c)) & 1).astype(bool) & lut[c, role64]
    as_scaffold = (tf == -1) | ((tf == -2) & ~sides_ok)  # the latter judged with the scaffold around it (rule c)
    return out, as_scaffold


def _check_scaffold(truth: TruthRender, tf: np.ndarray, as_scaffold: np.ndarray, is_a: np.ndarray,
                    label_of: Callable[[int], str]) -> list[Mismatch]:
    """Rule c of ``check_labels``: scaffold runs between consecutive fields, one mismatch per broken run.
    Only where the gap or the kind changes can the reading fail, so only those tokens are visited."""
    out: list[Mismatch] = []
    memo: dict[int, list[str]] = {}
    scaffold_t = np.flatnonzero(as_scaffold)
    gap = _scaffold_gaps(truth, tf, scaffold_t)
    kind_a = is_a[scaffold_t]
    change = np.ones(len(scaffold_t), dtype=bool)
    change[1:] = (gap[1:] != gap[:-1]) | (kind_a[1:] != kind_a[:-1])
    state: dict[int, int] = {}  # gap -> position in its expected sequence
    for i in np.flatnonzero(change):
        g, t = int(gap[i]), int(scaffold_t[i])
        kind = "A" if kind_a[i] else "N"
        if state.get(g, 0) < 0:
            continue  # already reported: one mismatch per broken run
        if g not in memo:
            memo[g] = gap_kinds(truth, g)
        seq = memo[g]
        pos = state.get(g, 0)
        while pos < len(seq) and seq[pos] != kind:
            pos += 1
        if pos == len(seq):
            rule = "b" if tf[t] == -2 else "c"
            after = "nothing" if g not in state else ("A" if kind == "N" else "N")
            out.append(Mismatch(t, truth.token_text(t), _gap_name(truth, g), label_of(t),
                                f"{rule}: scaffold there must read {''.join(x + '*' for x in seq)} "
                                f"(A = assistant turn, N = other); this token reads {kind} after {after}"))
            state[g] = -1
            continue
        state[g] = pos
    return out


def _scaffold_gaps(truth: TruthRender, tf: np.ndarray, scaffold_t: np.ndarray) -> np.ndarray:
    """The gap (``gap_kinds`` numbering) each of the ``scaffold_t`` tokens lies in, by where its scaffold starts:
    a token mixed with field characters counts from its first scaffold character."""
    field_ends = np.array([f.end for f in truth.fields], dtype=np.int64)
    first_char = truth.offsets[scaffold_t, 0].copy()
    for i in np.flatnonzero(tf[scaffold_t] == -2):
        s, e = (int(x) for x in truth.offsets[scaffold_t[i]])
        chars = np.flatnonzero(truth.char_field[s:e] < 0)
        first_char[i] = s + int(chars[0]) if len(chars) else s
    return np.searchsorted(field_ends, first_char, side="right")


def _gap_name(truth: TruthRender, g: int) -> str:
    """Scaffold gap ``g`` described for a mismatch (which fields it lies between)."""
    fields, roles = truth.fields, truth.roles
    k = len(fields)
    if k == 0:
        return "the rendering (no field placed)"
    if g == 0:
        return f"scaffold before the first field ({fields[0].describe(roles)})"
    if g == k:
        return f"scaffold after the last field ({fields[-1].describe(roles)})"
    return f"scaffold between message {fields[g - 1].message} ({roles[fields[g - 1].message]}) and message " \
           f"{fields[g].message} ({roles[fields[g].message]})"
