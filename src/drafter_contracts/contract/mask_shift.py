"""A ``loss_mask`` one token off: the rows that would pass both mask rules with their mask moved one token.

A producer that slices its labels with an off-by-one (``labels[1:]`` where ``labels`` was wanted, a
mask built for the shifted targets then shifted again) writes a mask that starts and ends every
supervised span one token late (or early). The mask rules then see two unrelated defects on the
same row: a token after (before) each span supervised, and the span's first (last) token left out.
Named as such, the fix looks like two policy questions; named as a shift, it is one line of the
producer. So a row is called shifted only on evidence that cannot be a policy difference: it fails
the rules as it stands, and with its mask moved one token it passes both.

Pure numpy over a shard's flat buffers (``mask``, ``allowed`` and ``required`` per token, ``offsets``
per row): a handful of whole-shard passes, no loop over rows or tokens. What may and what must be
supervised comes from the mask rules themselves (``mask_rules.py``, applied by :func:`mask_shift_of` below), so
the shift is judged by exactly the rules the contracts apply.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..spans.labels import Labels
from ..spans.turns import MaskFacts, turns_of
from .mask_rules import disallowed_supervision, needs_turns, required_tokens

#: Reason codes of a shifted row (beyond every Role value and the mask contracts' own codes).
LATE, EARLY = 120, 121
#: What each direction's one reason says (the same words in both mask contracts, so reports can name them once).
SHIFT_TEXT = {
    LATE: "loss_mask shifted one token right (late): moved one token earlier, the row passes both mask rules",
    EARLY: "loss_mask shifted one token left (early): moved one token later, the row passes both mask rules",
}
#: Short words for each direction (init's refusal, the auto convention's explanation).
DIRECTION = {LATE: "right (late)", EARLY: "left (early)"}


@dataclass(frozen=True)
class MaskShift:
    """Per row of a shard's view: whether its mask is one token late, or one token early."""

    late: np.ndarray  # bool per row: moved one token earlier, the row passes both rules (it fails as it stands)
    early: np.ndarray  # bool per row: moved one token later, the row passes both rules (and it is not late)

    @property
    def count(self) -> int:
        return int(np.count_nonzero(self.late) + np.count_nonzero(self.early))

    def codes(self, rows: np.ndarray) -> np.ndarray:
        """The shift reason code of each of ``rows`` (0: not shifted)."""
        rows = np.asarray(rows, dtype=np.int64)
        return np.where(self.late[rows], LATE, np.where(self.early[rows], EARLY, 0)).astype(np.int16)

    def direction(self) -> int | None:
        """The code of the direction most shifted rows take (None: no row is shifted)."""
        late, early = int(np.count_nonzero(self.late)), int(np.count_nonzero(self.early))
        if late == early == 0:
            return None
        return LATE if late >= early else EARLY


def no_shift(rows: int) -> MaskShift:
    return MaskShift(np.zeros(rows, dtype=bool), np.zeros(rows, dtype=bool))


def rows_with(flags: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Bool per row: some token of the row is set (reads only the set tokens' positions)."""
    out = np.zeros(len(offsets) - 1, dtype=bool)
    hits = np.flatnonzero(flags)
    if len(hits):
        out[np.searchsorted(offsets, hits, side="right") - 1] = True
    return out


def _breaks_rules(mask: np.ndarray, allowed: np.ndarray, required: np.ndarray, offsets: np.ndarray,
                  ignore: np.ndarray | None = None) -> np.ndarray:
    """Bool per row: supervised where not allowed, or a required token left out (``ignore``: positions whose
    requirement is not judged: the token a moved mask vacates, whose true bit fell off the row's edge)."""
    missing = required & ~mask
    if ignore is not None and len(ignore):
        missing[ignore] = False
    return rows_with((mask & ~allowed) | missing, offsets)


def shifted_rows(mask: np.ndarray, offsets: np.ndarray, allowed: np.ndarray, required: np.ndarray) -> MaskShift:
    """The rows whose mask is one token late or early.

    ``mask``, ``allowed`` (may carry loss) and ``required`` (must carry loss): bool per token, flat over
    the rows ``offsets`` delimits. A row is late when it breaks a rule as it stands, some token is
    supervised, its first token is not (moving the mask earlier would drop that bit: a shift never
    starts a row supervised), and the mask moved one token earlier breaks neither rule; early is the
    mirror image (its last token unsupervised, moved one token later). The token the move vacates (a
    late row's last, an early row's first) is not required: its true value was lost with the shift. A
    row that is both (it cannot be, in practice) counts as late.
    """
    mask = np.ascontiguousarray(mask, dtype=bool)
    offsets = np.asarray(offsets, dtype=np.int64)
    rows = len(offsets) - 1
    if rows <= 0 or not len(mask):
        return no_shift(max(rows, 0))
    nonempty = offsets[1:] > offsets[:-1]
    firsts, lasts = offsets[:-1][nonempty], offsets[1:][nonempty] - 1
    candidate = _breaks_rules(mask, allowed, required, offsets) & rows_with(mask, offsets)
    if not candidate.any():
        return no_shift(rows)
    first_bit = np.zeros(rows, dtype=bool)
    first_bit[nonempty] = mask[firsts]
    last_bit = np.zeros(rows, dtype=bool)
    last_bit[nonempty] = mask[lasts]

    earlier = np.zeros_like(mask)  # each token takes the next one's bit; a row's last token gets none
    earlier[:-1] = mask[1:]
    earlier[lasts] = False
    late = candidate & ~first_bit & ~_breaks_rules(earlier, allowed, required, offsets, lasts)

    later = np.zeros_like(mask)  # each token takes the previous one's bit; a row's first token gets none
    later[1:] = mask[:-1]
    later[firsts] = False
    early = candidate & ~late & ~last_bit & ~_breaks_rules(later, allowed, required, offsets, firsts)
    return MaskShift(late, early)


def mask_shift_of(view: Any, labels: Labels | None, contract: Any, facts: MaskFacts | None = None) -> MaskShift:
    """The view rows whose mask is one token late or early, judged by the two mask rules: what may carry
    loss is what :func:`disallowed_supervision` lets through, what must is :func:`required_tokens` under
    the contract's completeness (``contract``: its ``mask`` and ``max_len``). Where completeness is off, a
    shift is named only when the moved mask is complete (``completeness = "all"``): the strongest evidence,
    so no false alarm.
    """
    if view.mask is None or labels is None or not len(view.ids):
        return no_shift(len(view.rows))
    facts = facts if facts is not None else MaskFacts(view.ids)
    policy = contract.mask
    allowed = ~disallowed_supervision(np.ones(len(view.ids), dtype=bool), labels, policy, view.offsets, facts=facts)
    judged = policy if policy.completeness != "off" else dataclasses.replace(policy, completeness="all")
    turns = turns_of(labels, view.offsets, facts.joins_blocks) if needs_turns(judged) else None
    required = required_tokens(view.ids, view.offsets, labels, turns, judged, contract.max_len,
                               facts.newline_lead, facts)
    return shifted_rows(view.mask, view.offsets, allowed, required)
