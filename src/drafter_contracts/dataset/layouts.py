"""The column layouts trainers write, told apart by a dataset's columns (docs/layouts.md).

speculators writes ``input_ids`` / ``loss_mask`` / ``seq_len``; Hugging Face trainers (TRL,
axolotl, LLaMA-Factory, arctic-training) write ``labels`` with -100 where no loss is taken, NVIDIA
Model-Optimizer writes them shifted by one (``labels[t] = input_ids[t + 1]``) with
``assistant_masks`` beside them; TRL writes ``completion_mask``, transformers ``assistant_masks``;
padded rows carry ``attention_mask``; SpecForge's cache stores every column as ``[1, L]``. A
:class:`Layout` names which column plays which part, so that ``dataset/layout_rows.py`` can turn a shard of
any of them into the flat ``input_ids`` / token-level ``loss_mask`` the engine reads, and nothing
downstream knows which trainer wrote the rows.

This module decides from the schema alone (:func:`from_schema`); what only the rows can tell (are
labels shifted, which side is padded) ``dataset.layout_rows.resolve`` reads off the first rows. A layout the
tool cannot read carries its ``problem``: one line, a usage error before any work.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pyarrow as pa

from .columns import arrow_type_name

IDS, SEQ_LEN, PADDING = "input_ids", "seq_len", "attention_mask"
#: Where the mask comes from, in order of precedence: the first one present is what the trainer trains on.
MASK_COLUMNS = ("loss_mask", "labels", "assistant_masks", "completion_mask")
#: 0/1 masks written beside labels; the labels decide, these must agree with them (labels_match_ids).
AGREE_COLUMNS = ("assistant_masks", "completion_mask")
#: Conversation columns a trainer keeps beside the token columns it adds (TRL's SFT preparation leaves its
#: input columns): in a trainer's layout they are the rows' source, not extra columns.
SOURCE_COLUMNS = ("messages", "conversations", "prompt", "completion", "tools", "chat_template_kwargs", "text")
#: The label value that takes no loss (PyTorch's CrossEntropyLoss default, every Hugging Face trainer's).
IGNORE_INDEX = -100
#: ``needs`` entries (checks/registry.py) of the layout's own contracts: a run whose layout has no such
#: part leaves them out (``Layout.lacks``), like a contract an option asks for.
NEEDS_LABELS = "layout:labels"
NEEDS_FORM = "layout:padding-or-nesting"
_MASK_TYPES = ("list<bool>", "list<int8>", "list<uint8>", "list<int32>", "list<int64>")
#: Accepted types of the columns a contract's [schema] need not name: their part has no speculators column.
DEFAULT_TYPES = {"labels": ("list<int32>", "list<int64>"), PADDING: _MASK_TYPES,
                 "assistant_masks": _MASK_TYPES, "completion_mask": _MASK_TYPES}
READS = ("speculators input_ids + loss_mask [+ seq_len]; input_ids + labels (-100 ignored, shifted by one or not) "
         "[+ assistant_masks / completion_mask]; input_ids + assistant_masks or completion_mask; any of them with "
         "attention_mask padding (right or left) and SpecForge's [1, L] nesting (docs/layouts.md)")


@dataclass(frozen=True)
class Layout:
    """Which column plays which part. ``mask`` None: no mask source (then ``problem`` says so)."""

    mask: str | None
    #: labels only: 0 (``labels[t] = input_ids[t]``), 1 (``labels[t] = input_ids[t + 1]``); None: not decided yet.
    shift: int | None = None
    agree: tuple[str, ...] = ()
    padding: str | None = None
    nested: frozenset[str] = frozenset()
    seq_len: str | None = None
    #: Padding the first rows showed: "right", "left", "right and left", "none" ("": not read yet).
    sides: str = ""
    #: Why no run can read the dataset (one line, exit 4), or None.
    problem: str | None = None
    #: The trainer's source columns kept beside the token columns (``SOURCE_COLUMNS``; never in the speculators layout).
    source: tuple[str, ...] = ()
    ids: str = IDS

    @property
    def labels(self) -> bool:
        return self.mask == "labels"

    @property
    def plain(self) -> bool:
        """The speculators layout (or a dataset without any mask source): read exactly as it always was."""
        return self.mask in ("loss_mask", None) and self.padding is None and not self.nested

    @property
    def name(self) -> str:
        if self.plain:
            return "speculators"
        return "specforge" if self.nested and self.mask == "loss_mask" else str(self.mask)

    def list_columns(self) -> tuple[str, ...]:
        """The list columns a shard's read takes from the files, ids first, then the mask source."""
        cols = [self.ids, *([self.mask] if self.mask else []), *self.agree, *([self.padding] if self.padding else [])]
        return tuple(dict.fromkeys(cols))

    def parts(self) -> dict[str, str]:
        """Raw column -> the part it plays: ``input_ids``, ``loss_mask`` (a 0/1 mask), ``labels``,
        ``attention_mask``, ``seq_len`` (what the schema contract holds to the contract's types)."""
        out = {self.ids: IDS}
        if self.mask:
            out[self.mask] = "labels" if self.labels else "loss_mask"
        out.update({c: "loss_mask" for c in self.agree})
        if self.padding:
            out[self.padding] = PADDING
        if self.seq_len:
            out[self.seq_len] = SEQ_LEN
        return out

    def lacks(self, needs: frozenset[str]) -> str | None:
        """Why a contract needing a part of the layout (``NEEDS_*``) has nothing to check here, or None."""
        if NEEDS_LABELS in needs and not self.labels:
            return f"the dataset's layout ({self.name}) has no labels column"
        if NEEDS_FORM in needs and self.padding is None and not self.nested:
            return f"the dataset's layout ({self.name}) has neither attention_mask padding nor [1, L] nesting"
        return None

    def describe(self) -> str:
        """One line for summary.json and the terminal: which columns were read, and how."""
        if self.plain:
            cols = ", ".join(c for c in (self.ids, self.mask, self.seq_len) if c)
            return f"speculators ({cols})" + ("" if self.seq_len else "; seq_len derived from the list length")
        parts = [self._mask_words()]
        if self.agree:
            parts.append(f"{' and '.join(self.agree)} must agree with the labels")
        if self.nested:
            parts.append(f"nested [1, L] ({', '.join(c for c in self.list_columns() if c in self.nested)})")
        if self.padding:
            parts.append(_padding_words(self.padding, self.sides))
        if not self.seq_len:
            source = f"the {self.padding} sum" if self.padding else "the list length"
            parts.append(f"seq_len derived from {source}")
        if self.source:
            parts.append(f"the trainer's source columns kept ({', '.join(self.source)})")
        return ", ".join(parts)

    def _mask_words(self) -> str:
        if not self.labels:
            return f"{self.mask} (0/1 per token)"
        shift = {0: "unshifted", 1: "shifted by one"}.get(self.shift, "shift not decided")
        return f"labels ({shift}, ignore index {IGNORE_INDEX})"


def _padding_words(column: str, sides: str) -> str:
    if sides in ("right", "left"):
        return f"{sides}-padded by {column}"
    if sides == "right and left":
        return f"padded by {column} (right and left)"
    return f"padded by {column} (no padding in the first rows)"


def _depth(t: pa.DataType) -> int:
    """How many list levels wrap the values (0: not a list)."""
    depth = 0
    while pa.types.is_list(t) or pa.types.is_large_list(t):
        depth, t = depth + 1, t.value_type
    return depth


def _leaf(t: pa.DataType) -> pa.DataType:
    while pa.types.is_list(t) or pa.types.is_large_list(t):
        t = t.value_type
    return t


def unnested_type(t: pa.DataType) -> pa.DataType:
    """A ``[1, L]`` column's type with the outer list taken off (what the rows hold)."""
    return t.value_type if _depth(t) == 2 else t


def from_schema(schema: pa.Schema) -> Layout:
    """The layout the columns say, before any row is read (labels' shift and the padding sides come later)."""
    types = {f.name: f.type for f in schema}
    mask = next((c for c in MASK_COLUMNS if c in types), None)
    layout = Layout(mask, agree=tuple(c for c in AGREE_COLUMNS if mask == "labels" and c in types),
                    padding=PADDING if PADDING in types else None, seq_len=SEQ_LEN if SEQ_LEN in types else None)
    layout = replace(layout, nested=frozenset(c for c in layout.list_columns() if c in types and _depth(types[c]) == 2))
    if not layout.plain:
        layout = replace(layout, source=tuple(c for c in SOURCE_COLUMNS if c in types))
    problem = _problem(layout, types)
    return layout if problem is None else replace(layout, problem=unreadable(problem, schema))


def unreadable(problem: str, schema: pa.Schema) -> str:
    """A layout problem as the one line a user reads: what is wrong, the columns seen, the layouts read."""
    seen = ", ".join(f"{f.name} ({arrow_type_name(f.type)})" for f in schema) or "none"
    return f"{problem} (columns seen: {seen}); the layouts read: {READS}"


def _problem(layout: Layout, types: dict[str, pa.DataType]) -> str | None:
    """What makes the layout unreadable (a guess would be needed), or None."""
    if IDS not in types:
        return "no input_ids column"
    deep = [c for c in layout.list_columns() if c in types and _depth(types[c]) > 2]
    if deep:
        return f"{', '.join(deep)} nested deeper than [1, L]"
    if layout.mask is None:
        return "no mask source: none of " + ", ".join(MASK_COLUMNS)
    if layout.labels:
        leaf = _leaf(types["labels"])
        if _depth(types["labels"]) == 0 or not pa.types.is_signed_integer(leaf):
            return f"labels is {arrow_type_name(types['labels'])}, not lists of signed integers (-100: no loss)"
    if layout.padding is not None:
        leaf = _leaf(types[PADDING])
        if _depth(types[PADDING]) == 0 or not (pa.types.is_integer(leaf) or pa.types.is_boolean(leaf)):
            return f"attention_mask is {arrow_type_name(types[PADDING])}, not lists of 0/1"
    return None


def column_problems(layout: Layout, schema: pa.Schema) -> dict[str, str]:
    """The parts the per-row checks cannot use (keyed ``input_ids`` / ``loss_mask``), with the reason."""
    types = {f.name: f.type for f in schema}
    out: dict[str, str] = {}
    for part, column, kind in ((IDS, layout.ids, "integer"),
                               ("loss_mask", layout.mask or "loss_mask",
                                "integer" if layout.labels else "bool or integer")):
        t = types.get(column)
        if t is not None and column in layout.nested:
            t = unnested_type(t)
        if t is None:
            out[part] = f"column {column} is missing (see test_schema)"
        elif not (pa.types.is_list(t) or pa.types.is_large_list(t)) or not (
                pa.types.is_integer(t.value_type) or (kind != "integer" and pa.types.is_boolean(t.value_type))):
            out[part] = f"column {column} is {t}, not a list of {kind} values (see test_schema)"
    return out
