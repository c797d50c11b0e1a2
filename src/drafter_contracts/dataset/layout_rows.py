"""A shard of any layout (``dataset/layouts.py``) as the flat arrays the engine reads (:class:`ShardArrays`), and
what the layout's own contracts read (:class:`LayoutRows`).

Three steps, each numpy over the shard's flat buffers (never a loop per row or token):

* ``[1, L]`` columns are unnested without a copy: the inner lists' offsets, taken at the outer
  offsets, are the rows' offsets (a row with other than one inner list is malformed);
* padding is cut off: a row's length is its number of ``attention_mask`` 1s, which must be one
  run at one end (right or left padding); only rows that have padding are copied;
* labels become the token-level mask: token t is supervised iff it is a trained target
  (unshifted: ``labels[t] != -100``; shifted by one: ``labels[t - 1] != -100``, token 0 never).

Rows the layout cannot cut (a hole in the attention mask, a length that differs from
``input_ids``, a nesting other than ``[1, L]``) are kept whole and flagged: the view leaves them out
and ``layout_well_formed`` names them. :func:`resolve` reads the first rows to decide what the
columns alone cannot (the labels' shift, the padding side).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa

from .columns import (ListColumn, Shard, _chunk_column, _list_column, _offsets, join_columns, read_seq_len,
                      to_numpy)
from .layouts import IGNORE_INDEX, Layout

#: Share of the first rows' trained labels one reading (shifted or not) must explain to be taken.
SHIFT_EVIDENCE = 0.9


@dataclass
class LayoutRows:
    """Per-row facts of a shard's layout (row order of the shard; codes 0 mean fine)."""

    layout: Layout
    null: np.ndarray  # bool: null row or element in a column the layout reads (no_nulls names it)
    nesting: np.ndarray | None  # int8: 1 no inner list, 2 several inner lists ([1, L] layouts)
    attention: np.ndarray | None  # int8: 1 length differs from input_ids, 2 not one run of 1s at one end
    side: np.ndarray | None  # int8: 0 no padding, 1 right, 2 left
    padding_trained: np.ndarray | None  # bool: a position attention_mask hides takes loss
    labels: ListColumn | None  # the labels, cut like the rows
    agree: tuple[tuple[str, ListColumn], ...] = ()  # assistant_masks / completion_mask beside labels, cut

    @property
    def malformed(self) -> np.ndarray:
        """Rows the layout cannot cut: left out of the other contracts (view.problem_rows)."""
        bad = np.zeros(len(self.null), dtype=bool)
        for codes in (self.nesting, self.attention):
            if codes is not None:
                bad |= codes != 0
        return bad & ~self.null


@dataclass
class ShardArrays:
    """The columns of one shard as the engine reads them, whatever layout wrote them; a column the dataset
    lacks is None.

    ``input_ids`` and ``loss_mask`` are the rows without padding, the mask token-level (a labels
    layout's labels turned into the tokens they supervise: :func:`token_mask`); ``names`` are the
    raw columns behind them (what a verdict calls them). ``extra``: the other list columns the
    layout reads (attention_mask, assistant_masks beside labels), cut like the rows, for the null
    checks; ``layout``: what the layout's own contracts read (None in the speculators layout).
    """

    shard: Shard
    input_ids: ListColumn | None
    loss_mask: ListColumn | None
    seq_len: np.ndarray | None  # int64 per row (nulls read as 0)
    seq_len_nulls: np.ndarray | None  # bool per row, None when no nulls
    cache: dict = field(default_factory=dict)  # derived per-shard facts, computed once
    names: tuple[str, str] = ("input_ids", "loss_mask")
    extra: tuple[tuple[str, ListColumn], ...] = ()
    layout: LayoutRows | None = None


@dataclass
class _Windows:
    """The kept part [start, stop) of every row, relative to its start; ``whole``: kept as stored."""

    start: np.ndarray
    stop: np.ndarray
    whole: np.ndarray
    attention: np.ndarray | None = None
    side: np.ndarray | None = None


def _nested_column(chunked: pa.ChunkedArray) -> tuple[ListColumn, np.ndarray]:
    """A ``[1, L]`` column as flat rows (a row's inner lists joined) and its inner-list count per row."""
    parts, counts = [], []
    for chunk in chunked.chunks or [pa.array([], chunked.type)]:
        outer = _offsets(chunk).astype(np.int64, copy=False)
        first = int(outer[0])
        inner = _chunk_column(chunk.values.slice(first, int(outer[-1]) - first))
        rel = outer - first
        null = to_numpy(chunk.is_null()) if chunk.null_count else None
        if inner.null_rows is not None:  # a null inner list makes its row null
            cs = np.concatenate(([0], np.cumsum(inner.null_rows, dtype=np.int64)))
            hit = (cs[rel[1:]] - cs[rel[:-1]]) > 0
            null = hit if null is None else (null | hit)
        parts.append(ListColumn(inner.values, inner.offsets[rel], null, inner.null_elements))
        counts.append(np.diff(rel))
    return join_columns(parts), np.concatenate(counts)


def _usable(t: pa.DataType) -> bool:
    """A list (after unnesting) of integers or booleans: what the flat reads and the cuts handle."""
    while pa.types.is_list(t) or pa.types.is_large_list(t):
        t = t.value_type
    return pa.types.is_integer(t) or pa.types.is_boolean(t)


def _read_columns(layout: Layout, part: pa.Table) -> tuple[dict[str, ListColumn], np.ndarray | None]:
    """The layout's list columns of the part, unnested; and per row the worst nesting code (None: not nested)."""
    cols: dict[str, ListColumn] = {}
    nesting = None
    for name in layout.list_columns():
        if name not in part.column_names or not _usable(part.schema.field(name).type):
            continue  # column_problems says why (the schema contract fails it)
        chunked = part.column(name)
        if name not in layout.nested:
            cols[name] = _list_column(chunked)  # a list of integers or booleans (_usable): never refused
            continue
        cols[name], count = _nested_column(chunked)
        code = np.where(count == 0, 1, np.where(count > 1, 2, 0)).astype(np.int8)
        nesting = code if nesting is None else np.maximum(nesting, code)
    return cols, nesting


def _null_rows(cols: list[ListColumn], n: int) -> np.ndarray:
    null = np.zeros(n, dtype=bool)
    for col in cols:
        if col.null_rows is not None:
            null |= col.null_rows
        if col.null_elements is not None:
            null[np.searchsorted(col.offsets, np.flatnonzero(col.null_elements), side="right") - 1] = True
    return null


def _prefix(flags: np.ndarray) -> np.ndarray:
    """``cs[i]`` = true flags among the first i (one compiled pass; int64)."""
    from ..kernels.compiled import prefix_count

    cs = np.empty(len(flags) + 1, dtype=np.int64)
    prefix_count(np.ascontiguousarray(flags, dtype=np.bool_).view(np.uint8), cs)
    return cs


def _windows(layout: Layout, cols: dict[str, ListColumn], null: np.ndarray) -> _Windows:
    """Where each row's tokens are: all of it, or the run of 1s of its attention_mask at one end."""
    length = cols[layout.ids].lengths
    n = len(length)
    if layout.padding is None or layout.padding not in cols:
        return _Windows(np.zeros(n, np.int64), length, np.ones(n, dtype=bool))
    att = cols[layout.padding]
    on = att.values if att.values.dtype == np.bool_ else att.values != 0
    cs = _prefix(on)
    o0, o1 = att.offsets[:-1], att.offsets[1:]
    ones = cs[o1] - cs[o0]
    right = (cs[o0 + ones] - cs[o0]) == ones
    left = (cs[o1] - cs[o1 - ones]) == ones
    bad_len = (att.lengths != length) & ~null
    hole = ~(right | left) & ~bad_len & ~null
    same = np.ones(n, dtype=bool)
    for col in cols.values():
        same &= col.lengths == length
    whole = null | bad_len | hole | ~same | (ones == length)
    start = np.where(whole | right, 0, length - ones)
    stop = np.where(whole, length, start + ones)
    side = np.where(whole, 0, np.where(right, 1, 2)).astype(np.int8)
    attention = np.where(bad_len, 1, np.where(hole, 2, 0)).astype(np.int8)
    return _Windows(start, stop, whole, attention, side)


def _cut(col: ListColumn, win: _Windows) -> ListColumn:
    """The column with every row's padding cut off (rows kept whole stay as they are)."""
    if win.whole.all():
        return col
    o0, o1 = col.offsets[:-1], col.offsets[1:]
    s = np.where(win.whole, o0, o0 + win.start)
    e = np.where(win.whole, o1, o0 + win.stop)
    pieces = np.stack([s - o0, e - s, o1 - e], axis=1).ravel()
    keep = np.repeat(np.tile(np.array([False, True, False]), len(s)), pieces)
    offsets = np.concatenate(([0], np.cumsum(e - s, dtype=np.int64)))
    return ListColumn(col.values[keep], offsets, col.null_rows,
                      None if col.null_elements is None else col.null_elements[keep])


def _trained(layout: Layout, col: ListColumn) -> np.ndarray:
    """Bool per stored value: the position takes loss (a label other than -100, a mask value other than 0)."""
    if layout.labels:
        return col.values != IGNORE_INDEX
    return col.values if col.values.dtype == np.bool_ else col.values != 0


def _padding_trained(layout: Layout, col: ListColumn, win: _Windows) -> np.ndarray:
    """Rows whose padding (the part cut off) holds a trained position."""
    out = np.zeros(len(win.whole), dtype=bool)
    rows = np.flatnonzero(~win.whole)
    if not len(rows):
        return out
    cs = _prefix(_trained(layout, col))
    o0, o1 = col.offsets[rows], col.offsets[rows + 1]
    inside = cs[o0 + win.stop[rows]] - cs[o0 + win.start[rows]]
    out[rows] = (cs[o1] - cs[o0]) != inside
    return out


def token_mask(labels: ListColumn, shift: int) -> ListColumn:
    """The token-level mask labels train: token t is a trained target (shift 1: ``labels[t - 1]`` is trained)."""
    trained = labels.values != IGNORE_INDEX
    if shift == 1:
        mask = np.zeros_like(trained)
        mask[1:] = trained[:-1]
        mask[labels.offsets[:-1][labels.lengths > 0]] = False  # token 0 of a row is nobody's target
        trained = mask
    return ListColumn(trained, labels.offsets, labels.null_rows, labels.null_elements)


def read_part(layout: Layout, part: pa.Table, shard: Shard) -> ShardArrays:
    """A shard's rows of any layout as the engine's arrays: unnested, padding cut, labels as the mask."""
    cols, nesting = _read_columns(layout, part)
    seq_len, seq_nulls = read_seq_len(part, layout.seq_len)
    null = _null_rows(list(cols.values()), shard.rows)
    if layout.ids not in cols:
        return ShardArrays(shard, None, None, seq_len, seq_nulls, names=(layout.ids, str(layout.mask)),
                           layout=LayoutRows(layout, null, nesting, None, None, None, None))
    win = _windows(layout, cols, null)
    mask_col = cols.get(layout.mask) if layout.mask else None
    trained = _padding_trained(layout, mask_col, win) if mask_col is not None else None
    cut = {name: _cut(col, win) for name, col in cols.items()}
    mask = cut.get(layout.mask) if layout.mask else None
    labels = mask if layout.labels else None
    if labels is not None:
        mask = token_mask(labels, layout.shift or 0)
    agree = tuple((c, cut[c]) for c in layout.agree if c in cut)
    rows = LayoutRows(layout, null, nesting, win.attention, win.side, trained, labels, agree)
    extra = (*agree, *(((layout.padding, cut[layout.padding]),) if layout.padding in cut else ()))
    return ShardArrays(shard, cut[layout.ids], mask, seq_len, seq_nulls, names=(layout.ids, str(layout.mask)),
                       extra=extra, layout=rows)


def resolve(layout: Layout, first: pa.Table) -> Layout:
    """The layout with what the first rows tell: the padding sides seen, and whether labels are shifted."""
    if not (layout.labels or layout.padding) or first.num_rows == 0:
        return layout  # no rows: nothing to read off, and nothing a guess could get wrong
    a = read_part(replace(layout, shift=0), first, Shard(0, 0, first.num_rows))
    facts = a.layout
    if facts.side is not None:
        seen = [word for code, word in ((1, "right"), (2, "left")) if (facts.side == code).any()]
        layout = replace(layout, sides=" and ".join(seen) or "none")
    if not layout.labels or a.input_ids is None:
        return layout
    shift, problem = decide_shift(a)
    return replace(layout, shift=shift, problem=problem)


def rows_of(col: ListColumn, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values, offsets) of the kept rows of a column (every row kept: the column itself, no copy)."""
    if keep.all():
        return col.values, col.offsets
    values = col.values[np.repeat(keep, col.lengths)]
    return values, np.concatenate(([0], np.cumsum(col.lengths[keep], dtype=np.int64)))


def label_codes(ids: np.ndarray, labels: np.ndarray, offsets: np.ndarray, shift: int) -> np.ndarray:
    """Per token of aligned rows: 0 fine or untrained, 1 a trained label that is not its id (``ids[t]``, or
    ``ids[t + 1]`` shifted by one), 2 a shifted label trained at its row's last token (no next token)."""
    trained = labels != IGNORE_INDEX
    code = np.zeros(len(ids), dtype=np.int8)
    if shift == 0:
        code[trained & (labels != ids)] = 1
        return code
    last = np.zeros(len(ids), dtype=bool)
    last[offsets[1:][np.diff(offsets) > 0] - 1] = True
    nxt = np.empty_like(ids)
    nxt[:-1] = ids[1:]
    code[trained & ~last & (labels != nxt)] = 1
    code[trained & last] = 2
    return code


def decide_shift(a: ShardArrays) -> tuple[int | None, str | None]:
    """0 or 1, whichever explains at least ``SHIFT_EVIDENCE`` of the trained labels (and more than the
    other); else (None, what was seen)."""
    facts, ids = a.layout, a.input_ids
    ok = ~facts.null & ~facts.malformed & (ids.lengths == facts.labels.lengths)
    id_values, offsets = rows_of(ids, ok)
    labels, _ = rows_of(facts.labels, ok)
    n = int((labels != IGNORE_INDEX).sum())
    rows = a.shard.rows
    if n == 0:
        return None, (f"labels: every label of the first {rows:,} rows is {IGNORE_INDEX} (or the rows are malformed): "
                      "nothing tells whether the labels are shifted")
    same = 1 - int((label_codes(id_values, labels, offsets, 0) != 0).sum()) / n
    ahead = 1 - int((label_codes(id_values, labels, offsets, 1) != 0).sum()) / n
    if max(same, ahead) >= SHIFT_EVIDENCE and same != ahead:
        return (0 if same > ahead else 1), None
    return None, (f"labels: of the {n:,} trained labels in the first {rows:,} rows, {same:.1%} equal the input_id at "
                  f"their position and {ahead:.1%} the next one; neither explains them (labels must be input_ids, "
                  f"shifted by one or not, with {IGNORE_INDEX} where no loss is taken)")
