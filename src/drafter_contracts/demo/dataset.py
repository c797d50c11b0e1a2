"""The demo's dataset: fixture conversations rendered through Qwen3.6's real chat template.

``drafter-contracts demo`` needs a dataset to gate, and none can be downloaded here: it renders the
conversations of :mod:`.conversations` through ``builtin:qwen3.6`` (the Qwen3.6 vocabulary with the
vendor's template) and masks them the way speculators 0.4-0.7 masks a ChatML rendering, then writes
them as speculators does (``save_to_disk``: ``input_ids`` list<int32>, ``loss_mask`` list<bool>,
``seq_len`` int64). The writers are also what the project's own fixtures write their rows with.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..paths import cache_root, cached_build
from .conversations import generate_conversations

#: Bump when the rows the demo writes change for the same template (the template's digest is in the key).
DEMO_VERSION = "v3"

#: Column order and Arrow types of the worked example's dataset (contracts/qwen3.6-dflash.toml) the demo imitates.
ARROW_SCHEMA: pa.Schema = pa.schema([
    pa.field("input_ids", pa.list_(pa.int32())),
    pa.field("loss_mask", pa.list_(pa.bool_())),
    pa.field("seq_len", pa.int64()),
])


def load_tokenizer(tokenizer_dir: Path) -> Any:
    """A transformers tokenizer from a folder (loading takes seconds: callers keep it)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tokenizer_dir))


# --------------------------------------------------------------------------- writing


def rows_table(rows: Iterable[tuple[list[int], list[bool]]]) -> pa.Table:
    """An Arrow table with exactly ``ARROW_SCHEMA`` (seq_len = len(input_ids))."""
    ids_col: list[list[int]] = []
    mask_col: list[list[bool]] = []
    for ids, mask in rows:
        ids_col.append(ids)
        mask_col.append(mask)
    seq_len = [len(ids) for ids in ids_col]
    return pa.Table.from_arrays(
        [pa.array(ids_col, type=ARROW_SCHEMA.field("input_ids").type),
         pa.array(mask_col, type=ARROW_SCHEMA.field("loss_mask").type),
         pa.array(seq_len, type=pa.int64())],
        schema=ARROW_SCHEMA,
    )


def table_fingerprint(table: pa.Table) -> str:
    """A digest of the table's schema and buffers, given to ``datasets`` as the Dataset's fingerprint.

    Without one, ``datasets`` hashes the Dataset object with dill, which on some Pythons and imports
    cannot pickle pyarrow's types (``Can't pickle <class 'MonthDayNano'>`` on Python 3.12); a digest of
    the bytes is as deterministic and needs no pickling.
    """
    import hashlib

    h = hashlib.sha256(table.schema.to_string().encode())
    for column in table.columns:
        for chunk in column.chunks:
            h.update(f"{chunk.offset}:{len(chunk)}".encode())
            for buf in chunk.buffers():
                if buf is not None:
                    h.update(buf)
    return h.hexdigest()[:16]


def save_table(table: pa.Table, out_dir: Path, num_shards: int = 2) -> Path:
    """``save_to_disk`` an Arrow table as-is (its own schema, even a deliberately wrong one)."""
    from datasets import Dataset, DatasetInfo, Features
    from datasets.table import InMemoryTable
    from datasets.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    table = table.replace_schema_metadata(None)  # stale "huggingface" features would override the real types
    ds = Dataset(InMemoryTable(table), info=DatasetInfo(features=Features.from_arrow_schema(table.schema)),
                 fingerprint=table_fingerprint(table))
    shards = max(1, min(num_shards, table.num_rows))
    quiet = are_progress_bars_disabled()
    disable_progress_bars()
    try:
        ds.save_to_disk(str(out_dir), num_shards=shards)
    finally:
        if not quiet:
            enable_progress_bars()
    return Path(out_dir)


def write_dataset(rows: Iterable[tuple[list[int], list[bool]]], out_dir: Path, num_shards: int = 2) -> Path:
    """Write rows the way speculators does: ``save_to_disk`` with the Qwen3.6 dataset's three columns."""
    return save_table(rows_table(rows), Path(out_dir), num_shards)


# --------------------------------------------------------------------------- the demo: Qwen3.6's real template

#: speculators 0.4-0.7's pattern for a ChatML template, restated: the role marker it detects for
#: Qwen3.6 (``<|im_start|>assistant\n`` once the think block is stripped from it), a lazy body that
#: never crosses another opener, and the stable suffix ``<|im_end|>``.
_REGEX_ERA_BODY = re.compile(r"<\|im_start\|>assistant\n((?:(?!<\|im_start\|>).)*?)<\|im_end\|>", re.DOTALL)


def regex_era_row(conversation: dict[str, Any], tokenizer: Any, max_len: int | None) -> tuple[list[int], list[bool]]:
    """``(input_ids, loss_mask)`` as speculators 0.4-0.7 masks a ChatML rendering: every token whose
    characters overlap an assistant body (think block, content, tool calls; not the header, not
    ``<|im_end|>``), through the tokenizer's own chat template."""
    text = tokenizer.apply_chat_template(conversation["messages"], tools=conversation.get("tools"), tokenize=False)
    enc = tokenizer.backend_tokenizer.encode(text, add_special_tokens=False)
    spans = [m.span(1) for m in _REGEX_ERA_BODY.finditer(text)]
    mask = [False] * len(enc.ids)
    k = 0
    for i, (a, b) in enumerate(enc.offsets):
        while k < len(spans) and spans[k][1] <= a:
            k += 1
        mask[i] = k < len(spans) and spans[k][0] < b and a < spans[k][1]
    ids = list(enc.ids)
    if max_len is not None:
        ids, mask = ids[:max_len], mask[:max_len]
    return ids, mask


def build_demo_dataset(out_dir: Path, n_rows: int, seed: int = 0, max_len: int = 4096) -> Path:
    """Fixture conversations through ``builtin:qwen3.6`` (Qwen3.6's real template), masked the regex-era way.

    Conversations the template rejects (it raises on some message orders) are skipped; the
    generator is asked for more until ``n_rows`` rows are written.
    """
    from ..tokenizer.builtin import builtin_tokenizer_dir

    tokenizer = load_tokenizer(builtin_tokenizer_dir())

    def rows() -> Iterator[tuple[list[int], list[bool]]]:
        made = 0
        for conv in generate_conversations(n_rows * 2, seed):
            if made == n_rows:
                return
            try:
                row = regex_era_row(conv, tokenizer, max_len)
            except Exception:  # the template's own refusals (jinja TemplateError and friends)
                continue
            made += 1
            yield row
        raise RuntimeError(f"Qwen3.6's template rendered fewer than {n_rows} of {n_rows * 2} conversations")

    out = write_dataset(rows(), Path(out_dir), 2)
    write_draft_vocabulary(out, len(tokenizer), DEMO_DRAFT_SIZE)
    return out


#: The demo's draft vocabulary: fewer ids than the demo's distinct supervised tokens, so its coverage
#: report has something to show.
DEMO_DRAFT_SIZE = 1024


def write_draft_vocabulary(dataset_dir: Path, vocab_size: int, n: int) -> Path:
    """``d2t-N.npy`` / ``t2d-N.npy`` beside the rows, as speculators 0.9 saves them in its data folder, chosen
    by its rule (the ``n`` most frequent supervised ids, ties by id) from the rows' exact counts."""
    import numpy as np
    import pyarrow.compute as pc
    from datasets import load_from_disk

    from ..draftvocab.rule import expected_selection

    table = load_from_disk(str(dataset_dir)).data.table
    ids = pc.list_flatten(table.column("input_ids")).to_numpy()
    mask = pc.list_flatten(table.column("loss_mask")).to_numpy(zero_copy_only=False)
    counts = np.bincount(ids[mask], minlength=vocab_size)
    selected = expected_selection(counts, n, "speculators").ids
    np.save(dataset_dir / f"d2t-{n}.npy", selected - np.arange(n))
    t2d = np.zeros(vocab_size, dtype=bool)
    t2d[selected] = True
    np.save(dataset_dir / f"t2d-{n}.npy", t2d)
    return dataset_dir


def demo_dataset_dir(n_rows: int = 2000, seed: int = 0) -> Path:
    """The cached demo dataset (Qwen3.6's real template, regex-era masks), built on first use.

    Keyed by the built-in tokenizer's folder, whose name carries the template's digest: another trl
    release with another Qwen3.6 template gets a dataset of its own.
    """
    from ..tokenizer.builtin import builtin_tokenizer_dir

    target = cache_root() / "datasets" / f"demo-{builtin_tokenizer_dir().name}-{n_rows}-s{seed}-{DEMO_VERSION}"
    return cached_build(target, "state.json", lambda out: build_demo_dataset(out, n_rows, seed))


