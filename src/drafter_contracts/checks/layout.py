"""Per-row contracts of the layout itself: what a trainer's own columns must hold for the rows the engine
reads to be the rows the trainer trains on (docs/layouts.md).

Both read the facts ``dataset.layout_rows.read_part`` left on the shard (``ShardArrays.layout``) and run only
in a layout that has what they check: a speculators-layout run has neither (``Layout.lacks``), so they
are left out of its reports, not skipped.
"""

from __future__ import annotations

import numpy as np

from ..dataset.layout_rows import LayoutRows, ShardArrays, label_codes, rows_of
from ..dataset.layouts import NEEDS_FORM, NEEDS_LABELS
from ..results import CheckResult, multi_reason_result
from .declare import RAW, Scope, Spec, register
from ..dataset.row_view import problem_rows

_FORM = {1: "nested [0, L]: no inner list", 2: "nested [k, L] with k > 1: several inner lists, not [1, L]",
         3: "attention_mask length differs from input_ids",
         4: "attention_mask is not one run of 1s at one end (a hole, or padding inside the row)",
         5: "a padding position takes loss (trained where attention_mask is 0)"}


def check_layout_well_formed(a: ShardArrays) -> CheckResult:
    """Rows the layout's padding and nesting describe truly: exactly one inner list where rows are ``[1, L]``,
    an attention_mask that is one run of 1s at one end and as long as the row, and no loss on padding.

    The first two make a row unreadable (the other contracts leave it out); loss on padding is
    cut off with the padding, so the rest of the row is still checked.
    """
    facts = a.layout
    n = a.shard.rows
    if facts is None:
        return CheckResult("layout_well_formed", a.shard.id, rows_checked=n)
    codes: list[np.ndarray] = []
    rows: list[np.ndarray] = []
    for code, flags in _form_flags(facts, n).items():
        hit = np.flatnonzero(flags & ~facts.null)
        rows.append(hit)
        codes.append(np.full(len(hit), code, dtype=np.int8))
    hit_rows = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    hit_codes = np.concatenate(codes) if codes else np.zeros(0, np.int8)
    return multi_reason_result("layout_well_formed", a.shard.id, n, hit_rows, np.full(len(hit_rows), -1),
                               hit_codes, _FORM, {c: c for c in _FORM}, a.shard.start)


def _form_flags(facts: LayoutRows, n: int) -> dict[int, np.ndarray]:
    out: dict[int, np.ndarray] = {}
    if facts.nesting is not None:
        out[1], out[2] = facts.nesting == 1, facts.nesting == 2
    if facts.attention is not None:
        out[3], out[4] = facts.attention == 1, facts.attention == 2
    if facts.padding_trained is not None:
        out[5] = facts.padding_trained
    return out


def _labels_text(shift: int | None, agree: tuple[str, ...]) -> dict[int, str]:
    where = "the next input_id" if shift == 1 else "the input_id at its position"
    text = {1: f"a trained label differs from {where}",
            2: "a trained label at the row's last token: there is no next token to predict"}
    for k, name in enumerate(agree):
        text[3 + 2 * k] = f"{name} disagrees with the tokens the labels train"
        text[4 + 2 * k] = f"{name} length differs from input_ids"
    return text


def check_labels_match_ids(a: ShardArrays) -> CheckResult:
    """Every trained label is the id it must be: ``input_ids[t]`` (unshifted) or ``input_ids[t + 1]``
    (shifted by one, so a trained label at a row's last token has nothing to predict); and a 0/1 mask
    written beside the labels (assistant_masks, completion_mask) marks exactly the tokens they train.

    Rows the view leaves out (null, empty, skewed, malformed) are their own contracts'. Positions are
    the first offending token of the row as the engine reads it (padding cut off).
    """
    facts, ids = a.layout, a.input_ids
    if facts is None or facts.labels is None or ids is None or a.loss_mask is None:
        return CheckResult("labels_match_ids", a.shard.id, rows_checked=a.shard.rows)
    p = problem_rows(a)
    ok = ~(p["null"] | p["empty"] | p["disagree"])  # input_ids and labels (the mask) as long as each other
    rows = np.flatnonzero(ok)
    id_values, offsets = rows_of(ids, ok)
    code = label_codes(id_values, rows_of(facts.labels, ok)[0], offsets, facts.layout.shift or 0)
    whole = np.zeros(a.shard.rows, dtype=np.int8)  # a mask beside the labels that is not as long as the row
    for k, (_, col) in enumerate(facts.agree):
        same = ok & (col.lengths == ids.lengths)
        whole[ok & ~same & (whole == 0)] = 4 + 2 * k
        marked = rows_of(col, same)[0]
        at = np.flatnonzero(np.repeat(same[rows], np.diff(offsets)))  # their tokens among the ok rows'
        bad = at[((marked if marked.dtype == np.bool_ else marked != 0) != rows_of(a.loss_mask, same)[0])
                 & (code[at] == 0)]
        code[bad] = 3 + 2 * k
    tokens = np.flatnonzero(code)
    local = np.searchsorted(offsets, tokens, side="right") - 1
    row_hits = np.flatnonzero(whole)
    text = _labels_text(facts.layout.shift, tuple(name for name, _ in facts.agree))
    return multi_reason_result("labels_match_ids", a.shard.id, int(ok.sum()), np.concatenate([rows[local], row_hits]),
                               np.concatenate([tokens - offsets[local], np.full(len(row_hits), -1)]),
                               np.concatenate([code[tokens], whole[row_hits]]).astype(np.int8), text,
                               {c: c for c in text}, a.shard.start)


register(Spec("layout_well_formed", Scope.ROW,
              "rows nested exactly [1, L], attention_mask one run of 1s at one end, no loss on padding",
              needs=frozenset({RAW, NEEDS_FORM}), on_request=True,
              run=lambda e, w: check_layout_well_formed(w.arrays)))
register(Spec("labels_match_ids", Scope.ROW,
              "every trained label is its input_id (or the next one, shifted labels); a mask beside them agrees",
              needs=frozenset({RAW, NEEDS_LABELS}), on_request=True,
              run=lambda e, w: check_labels_match_ids(w.arrays)))
