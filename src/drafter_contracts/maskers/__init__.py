"""Maskers: the code under test that turns a conversation into ``(input_ids, loss_mask)``.

A masker is any callable ``f(conversation, tools, tokenizer, max_length)`` where
``conversation`` is a list of OpenAI-format messages. It answers with

* one row ``(input_ids, loss_mask)`` (speculators 0.4-0.7, ``hf``, most custom pipelines), or
* a list of rows (producers that fan a conversation out, one row per assistant turn, as
  speculators 0.8+ does), or
* ``None`` when it skips the conversation on purpose (speculators drops conversations its
  template cannot render);

and it *raises* when it rejects the conversation. Skipping and rejecting are both fine
for an invalid conversation; emitting a row for one is not.

Optional attributes a masker may carry, read with ``getattr``:

* ``supports_assistant_mask(tokenizer) -> bool``: the producer's own probe (properties
  check it neither crashes on a strict template nor answers wrongly);
* ``turns``: ``"all"`` (every assistant turn of a row is supervised, default) or
  ``"last"`` (only the row's last assistant turn);
* ``convention``: the producer convention it follows (``docs/conventions.md``: e.g.
  ``"speculators-regex"``, ``"generation-tags"``, ``"speculators-per-turn"``), which decides
  the mask policy when no ``--contract`` is given;
* ``mask_policy``: ``{"end_of_turn": bool, "newline_after_end": bool}`` keys over that
  convention (or over the default contract's, without one);
* ``version``: what is under test (known defects are tied to it);
* ``known_defects``: ``{property name: reason}`` (or :class:`KnownDefect`), recorded
  failures the suite expects (see ``docs/properties.md``, "Known defects and exit codes").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Row = tuple[list[int], list[bool]]


@dataclass(frozen=True)
class KnownDefect:
    """A recorded failure of one property for one masker version.

    ``needs`` names the precondition the failure depends on (a key of
    ``properties.preconditions.PRECONDITIONS``), so a run that never drew it can say the
    defect was not exercised instead of calling it fixed; None: every example exercises it.
    """

    reason: str
    needs: str | None = None
MaskerFn = Callable[[list[dict[str, Any]], list[dict[str, Any]] | None, Any, int], Any]


@dataclass(frozen=True)
class Masker:
    """A masker with what the properties need to know about it."""

    name: str  # "hf", "speculators", or "module:function"
    fn: MaskerFn
    version: str = ""
    turns: str = "all"
    mask_policy: dict[str, Any] = field(default_factory=dict)
    probe: Callable[[Any], bool] | None = None
    #: property name -> the recorded failure of this masker/version (see KnownDefect)
    known_defects: dict[str, KnownDefect] = field(default_factory=dict)
    #: the producer convention whose mask policy applies without --contract (None: the contract's)
    convention: str | None = None
    #: the chat template the masker renders with, when it is not the tokenizer's own (hf's tagged copy)
    chat_template: str | None = None
    #: the text a regex masker takes for an assistant turn opener on a tokenizer (None: it has none), so a
    #: defect that needs that text typed in user text knows whether a run drew it
    turn_opener: Callable[[Any], str | None] | None = None

    def __repr__(self) -> str:
        return f"Masker({self.name!r}, {self.version!r})"

    def rows(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, tokenizer: Any,
             max_length: int) -> list[Row] | None:
        """The masker's answer as a list of rows (``None``: skipped); exceptions propagate (rejected)."""
        out = self.fn(messages, tools, tokenizer, max_length)
        if out is None:
            return None
        if isinstance(out, tuple) and len(out) == 2 and not _is_row(out[0]):
            return [_as_row(out)]
        return [_as_row(r) for r in out]


def _is_row(obj: Any) -> bool:
    return isinstance(obj, tuple) and len(obj) == 2


def _as_row(row: Any) -> Row:
    """Plain lists, whatever the masker returned (torch tensors, numpy arrays, lists)."""
    ids, mask = row
    ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
    mask = mask.tolist() if hasattr(mask, "tolist") else list(mask)
    return [int(i) for i in ids], [bool(m) for m in mask]


def as_defects(raw: dict[str, Any] | None) -> dict[str, KnownDefect]:
    """``{property: reason | KnownDefect}`` as KnownDefect values (a plain reason has no precondition)."""
    return {k: v if isinstance(v, KnownDefect) else KnownDefect(str(v)) for k, v in (raw or {}).items()}


def from_callable(name: str, fn: MaskerFn) -> Masker:
    """Wrap a user's function, reading its optional attributes."""
    convention = getattr(fn, "convention", None)
    return Masker(name=name, fn=fn, version=str(getattr(fn, "version", "")),
                  turns=str(getattr(fn, "turns", "all")), mask_policy=dict(getattr(fn, "mask_policy", {}) or {}),
                  probe=getattr(fn, "supports_assistant_mask", None),
                  known_defects=as_defects(getattr(fn, "known_defects", None)),
                  convention=str(convention) if convention else None)
