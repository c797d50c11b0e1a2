"""The clean fixture's rows written in every layout the tool reads (docs/layouts.md), and in broken ones.

One base dataset in the speculators layout (the first rows of the clean fixture with the
``mask_user_text`` mutant's row among them) written with numpy, pyarrow and datasets as each trainer
writes it: labels unshifted and shifted by one (with assistant_masks beside them, as NVIDIA
Model-Optimizer writes them), assistant_masks, completion_mask, right and left padding by
attention_mask, SpecForge's [1, L] nesting, a folder of Parquet files with Hub-style names, a
folder of JSON Lines files, one Parquet file. ``tests/test_layouts.py`` checks that each gets the
base's verdicts; ``benchmarks/layouts.py`` times them.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from drafter_contracts.demo.dataset import save_table
from drafter_contracts.dataset.layouts import IGNORE_INDEX
from drafter_contracts.paths import cache_root, cached_build

from .mutants import mask_user_text

#: Bump when what the builders below write changes (the layouts are cached across runs).
VERSION = 1
PAD_ID = 0
#: Rows the layout-defect datasets break (indices into the base; each shorter than the longest row).
BAD_LABEL, HOLE, PADDING_LOSS, TWO_LISTS = 5, 17, 33, 41


# --------------------------------------------------------------------------- the base rows

class Rows:
    """The base rows as flat numpy: ids (int32), the token mask, offsets."""

    def __init__(self, table: pa.Table) -> None:
        ids = table.column("input_ids").combine_chunks()
        self.offsets = np.asarray(ids.offsets, dtype=np.int64)
        self.ids = np.asarray(pc.list_flatten(ids), dtype=np.int32)
        self.mask = np.asarray(pc.list_flatten(table.column("loss_mask").combine_chunks()), dtype=bool)
        self.lengths = np.diff(self.offsets)
        self.n = len(self.lengths)

    def labels(self, shift: int) -> np.ndarray:
        """Unshifted: ``labels[t] = ids[t]`` where supervised; shifted: ``labels[t] = ids[t + 1]`` where t + 1 is."""
        if shift == 0:
            return np.where(self.mask, self.ids, IGNORE_INDEX).astype(np.int64)
        out = np.full(len(self.ids), IGNORE_INDEX, dtype=np.int64)
        nxt = np.zeros(len(self.ids), dtype=bool)
        nxt[:-1] = self.mask[1:]
        nxt[self.offsets[1:] - 1] = False  # a row's last token has no next one
        out[nxt] = self.ids[1:][nxt[:-1]]
        return out

    def padded(self, side: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(offsets of rows padded to the longest, where each stored token lands, attention_mask)."""
        width = int(self.lengths.max())
        start = np.arange(self.n) * width + (width - self.lengths if side == "left" else 0)
        dest = np.repeat(start - self.offsets[:-1], self.lengths) + np.arange(len(self.ids))
        attention = np.zeros(self.n * width, dtype=np.int64)
        attention[dest] = 1
        return np.arange(self.n + 1, dtype=np.int64) * width, dest, attention


def _list(values: np.ndarray, offsets: np.ndarray, kind: pa.DataType) -> pa.Array:
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(values, type=kind))


def _nest(arr: pa.Array) -> pa.Array:
    """Each row as one inner list: ``[1, L]`` (SpecForge's cache)."""
    return pa.ListArray.from_arrays(pa.array(np.arange(len(arr) + 1, dtype=np.int32)), arr)


def _fill(values: np.ndarray, dest: np.ndarray, size: int, fill: Any) -> np.ndarray:
    out = np.full(size, fill, dtype=values.dtype)
    out[dest] = values
    return out


# --------------------------------------------------------------------------- the layouts

def _labels_table(r: Rows) -> pa.Table:
    return pa.table({"input_ids": _list(r.ids, r.offsets, pa.int32()),
                     "labels": _list(r.labels(0), r.offsets, pa.int64())})


def _modelopt_table(r: Rows) -> pa.Table:
    """NVIDIA Model-Optimizer's EAGLE-3 rows: labels shifted by one, assistant_masks beside them."""
    return pa.table({"input_ids": _list(r.ids, r.offsets, pa.int32()),
                     "labels": _list(r.labels(1), r.offsets, pa.int64()),
                     "assistant_masks": _list(r.mask.astype(np.int8), r.offsets, pa.int8())})


def _mask_table(column: str) -> Callable[[Rows], pa.Table]:
    return lambda r: pa.table({"input_ids": _list(r.ids, r.offsets, pa.int32()),
                               column: _list(r.mask.astype(np.int64), r.offsets, pa.int64())})


def _right_padded_labels(r: Rows) -> pa.Table:
    """padding="max_length" as a Hugging Face collator writes it: -100 labels and attention 0 on the padding."""
    offsets, dest, attention = r.padded("right")
    return pa.table({"input_ids": _list(_fill(r.ids, dest, len(attention), PAD_ID), offsets, pa.int32()),
                     "labels": _list(_fill(r.labels(0), dest, len(attention), IGNORE_INDEX), offsets, pa.int64()),
                     "attention_mask": _list(attention, offsets, pa.int64())})


def _left_padded_mask(r: Rows) -> pa.Table:
    offsets, dest, attention = r.padded("left")
    return pa.table({"input_ids": _list(_fill(r.ids, dest, len(attention), PAD_ID), offsets, pa.int32()),
                     "loss_mask": _list(_fill(r.mask, dest, len(attention), False), offsets, pa.bool_()),
                     "attention_mask": _list(attention.astype(np.int8), offsets, pa.int8()),
                     "seq_len": pa.array(r.lengths, pa.int64())})


def _specforge(r: Rows) -> pa.Table:
    return pa.table({"input_ids": _nest(_list(r.ids.astype(np.int64), r.offsets, pa.int64())),
                     "loss_mask": _nest(_list(r.mask.astype(np.int64), r.offsets, pa.int64())),
                     "attention_mask": _nest(_list(np.ones(len(r.ids), np.int64), r.offsets, pa.int64()))})


def _save_parquet_folder(table: pa.Table, out: Path) -> None:
    half = table.num_rows // 2
    (out / "data").mkdir(parents=True)
    for k, part in enumerate((table.slice(0, half), table.slice(half))):
        pq.write_table(part, out / "data" / f"train-{k:05d}-of-00002.parquet")


def _save_jsonl_folder(table: pa.Table, out: Path) -> None:
    from datasets import Dataset

    out.mkdir(parents=True)
    half = table.num_rows // 2
    for k, part in enumerate((table.slice(0, half), table.slice(half))):
        Dataset(part).to_json(str(out / f"part-{k}.jsonl"))


def _save_parquet_file(table: pa.Table, out: Path) -> None:
    from datasets import Dataset

    out.mkdir(parents=True)
    Dataset(table).to_parquet(str(out / "train.parquet"))


#: name -> (table builder, writer, the path to pass relative to the layout's folder, words summary.json says)
LAYOUTS: dict[str, tuple[Callable[[Rows], pa.Table], Callable[[pa.Table, Path], Any], str, str]] = {
    "labels": (_labels_table, save_table, "", "labels (unshifted, ignore index -100), seq_len derived"),
    "modelopt": (_modelopt_table, save_table, "", "labels (shifted by one, ignore index -100), assistant_masks must"),
    "assistant_masks": (_mask_table("assistant_masks"), save_table, "", "assistant_masks (0/1 per token)"),
    "completion_mask": (_mask_table("completion_mask"), save_table, "", "completion_mask (0/1 per token)"),
    "right_padded": (_right_padded_labels, save_table, "", "right-padded by attention_mask"),
    "left_padded": (_left_padded_mask, save_table, "", "loss_mask (0/1 per token), left-padded by attention_mask"),
    "specforge": (_specforge, save_table, "", "nested [1, L] (input_ids, loss_mask, attention_mask)"),
    "parquet_folder": (_modelopt_table, _save_parquet_folder, "", "labels (shifted by one"),
    "jsonl_folder": (_mask_table("completion_mask"), _save_jsonl_folder, "", "completion_mask (0/1 per token)"),
    "parquet_file": (_right_padded_labels, _save_parquet_file, "train.parquet", "right-padded by attention_mask"),
}


def _base_table(clean: Path, scratch: Path, rows: int) -> tuple[pa.Table, int]:
    """The first ``rows`` rows of the mask_user_text mutant, its supervised user text among them (at the end)."""
    from datasets import load_from_disk

    mutation = mask_user_text(clean, scratch / "mutant", 0)
    table = load_from_disk(str(scratch / "mutant")).data.table
    (row,) = mutation.rows
    picked = [*range(rows - 1), row] if row >= rows - 1 else list(range(rows))
    shutil.rmtree(scratch / "mutant")
    return table.take(pa.array(picked)).combine_chunks(), picked.index(row)


def layouts_dir(clean: Path, rows: int = 300) -> Path:
    """The base (``speculators/``), every layout of :data:`LAYOUTS`, ``broken_padding/`` and ``broken_nesting/``
    in one cached folder; ``leak.txt`` holds the row of the supervised user text."""
    return cached_build(cache_root() / "layouts" / f"layouts-{rows}-v{VERSION}", "done",
                        lambda out: _build(out, clean, rows))


def _build(out: Path, clean: Path, rows: int) -> None:
    out.mkdir(parents=True)
    base, leak = _base_table(clean, out, rows)
    save_table(base, out / "speculators")
    r = Rows(base)
    for name, (make, write, _, _) in LAYOUTS.items():
        write(make(r), out / name)
    save_table(_broken_padding(r), out / "broken_padding")
    save_table(_broken_nesting(r), out / "broken_nesting")
    (out / "leak.txt").write_text(str(leak))
    (out / "done").write_text("")


def _broken_padding(r: Rows) -> pa.Table:
    """Right-padded labels with a wrong label (BAD_LABEL), a hole (HOLE) and loss on padding (PADDING_LOSS)."""
    offsets, dest, attention = r.padded("right")
    labels = _fill(r.labels(0), dest, len(attention), IGNORE_INDEX)
    at = offsets[BAD_LABEL] + int(np.flatnonzero(r.mask[r.offsets[BAD_LABEL]:r.offsets[BAD_LABEL + 1]])[0])
    labels[at] += 1
    attention[offsets[HOLE] + int(r.lengths[HOLE]) // 2] = 0
    labels[offsets[PADDING_LOSS] + int(r.lengths[PADDING_LOSS])] = PAD_ID
    return pa.table({"input_ids": _list(_fill(r.ids, dest, len(attention), PAD_ID), offsets, pa.int32()),
                     "labels": _list(labels, offsets, pa.int64()), "attention_mask": _list(attention, offsets, pa.int64())})


def _broken_nesting(r: Rows) -> pa.Table:
    """SpecForge's rows with row TWO_LISTS stored as two inner lists ([2, L])."""
    inner = np.concatenate([r.offsets[:TWO_LISTS + 1], [r.offsets[TWO_LISTS] + r.lengths[TWO_LISTS] // 2],
                            r.offsets[TWO_LISTS + 1:]])
    outer = np.concatenate([np.arange(TWO_LISTS + 1), np.arange(TWO_LISTS + 2, r.n + 2)]).astype(np.int32)
    cols = {"input_ids": r.ids.astype(np.int64), "loss_mask": r.mask.astype(np.int64),
            "attention_mask": np.ones(len(r.ids), np.int64)}
    return pa.table({k: pa.ListArray.from_arrays(pa.array(outer), _list(v, inner, pa.int64())) for k, v in cols.items()})
