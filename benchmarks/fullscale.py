"""A full-scale clean dataset with the 913,786-row Qwen3.6 dataset's shape, generated as token ids with numpy.

Rendering 913,786 conversations through ``apply_chat_template`` would take an hour;
the benchmark needs the shape, not the rendering. So the rows are *re-worded copies*
of a bank of rows that the real chat template did render (the project's cached
2,000-row fixture: system prompts with tools, reasoning blocks, tool calls, tool
responses inside user turns, "OK." placeholders, rows cut at 4,096). Every template
token, mask bit and row length is the bank's; only plain words change: each token
that is a space plus ASCII letters (" model", " The") is replaced by a random other
such token of the same case, when the token after it does not continue the word.
Such tokens are whole pre-tokenizer pieces that encode to themselves, so a re-worded
row still decodes and re-encodes to the same ids, and rows are not duplicates (bank
rows with fewer than ``MIN_WORDS`` such words, the CJK-only ones, are not used).

The whole thing is vectorized per chunk of rows (gathers with ``np.repeat``), and
written through ``datasets``' own ``save_to_disk``.
"""

from __future__ import annotations

import testkit_path  # noqa: F401  (drafter_testkit is imported from the checkout)
import argparse
import json
import re
import shutil
import sys
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow as pa

from drafter_contracts.paths import cache_root, cached_build
from drafter_testkit.generate import ARROW_SCHEMA, fixture_dataset_dir, load_tokenizer
from drafter_testkit.tokenizer import FIRST_SPECIAL_ID

#: The Qwen3.6 dataset's row count.
FULL_ROWS = 913_786
#: Bump when the generator's output changes, or stale caches keep serving old rows.
VERSION = "v3"
BANK_ROWS = 2000
CHUNK_ROWS = 50_000
#: Bank rows with fewer re-wordable words (CJK-only rows, short code answers) would repeat
#: verbatim hundreds of times at full scale; they (94 of 2,000, all CJK-only) are left out.
MIN_WORDS = 3
#: ``save_to_disk``'s own default cap per Arrow file.
MAX_FILE_BYTES = 500 << 20

_WORD = re.compile(r"^Ġ([A-Za-z]+)$")  # byte-level BPE spells a leading space as Ġ
#: Byte-level spellings of whitespace: a token starting with one starts a new piece.
_SPACE_CHARS = {"Ġ", "Ċ", "ĉ", "č"}


@dataclass(frozen=True)
class WordTables:
    """Per-id facts about the Qwen3.6 vocabulary that re-wording needs."""

    is_word: np.ndarray  # bool per id: " letters", encodes to itself
    capital: np.ndarray  # bool per id: the word starts with an upper-case letter
    ends_piece: np.ndarray  # bool per id: a word before this token is a complete piece
    lower_words: np.ndarray  # int32 ids of lower-case words
    capital_words: np.ndarray  # int32 ids of capitalized words


@lru_cache
def word_tables() -> WordTables:
    """Scan the real tokenizer once (a few seconds)."""
    tok = load_tokenizer()
    size = len(tok)
    pieces = tok.convert_ids_to_tokens(list(range(size)))
    candidates = [(i, p) for i, p in enumerate(pieces[:FIRST_SPECIAL_ID]) if p and _WORD.match(p)]
    encoded = tok([" " + _WORD.match(p).group(1) for _, p in candidates], add_special_tokens=False)["input_ids"]
    is_word = np.zeros(size, dtype=bool)
    capital = np.zeros(size, dtype=bool)
    for (i, p), enc in zip(candidates, encoded):
        if enc == [i]:
            is_word[i] = True
            capital[i] = p[1].isupper()
    ends_piece = np.zeros(size, dtype=bool)
    for i, p in enumerate(pieces):
        if i >= FIRST_SPECIAL_ID:
            ends_piece[i] = True
        elif p:
            c = p[0]
            ends_piece[i] = c in _SPACE_CHARS or (ord(c) < 127 and not c.isalpha())
    lower = np.flatnonzero(is_word & ~capital).astype(np.int32)
    caps = np.flatnonzero(is_word & capital).astype(np.int32)
    return WordTables(is_word, capital, ends_piece, lower, caps)


@dataclass(frozen=True)
class Bank:
    """The rendered rows that full-scale rows are re-worded copies of (flat arrays)."""

    ids: np.ndarray
    mask: np.ndarray
    offsets: np.ndarray
    replaceable: np.ndarray  # bool per token
    usable: np.ndarray  # indices of bank rows with enough words to re-word into unique rows

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)


def load_bank(bank_dir: Path | None = None) -> Bank:
    from datasets import load_from_disk

    ds = load_from_disk(str(bank_dir or fixture_dataset_dir(BANK_ROWS, 0)))
    table = ds.data.table
    ids_col = table.column("input_ids").combine_chunks()
    mask_col = table.column("loss_mask").combine_chunks()
    ids = ids_col.values.to_numpy().astype(np.int32)
    mask = mask_col.values.to_numpy(zero_copy_only=False)
    offsets = ids_col.offsets.to_numpy().astype(np.int64)
    w = word_tables()
    nxt = np.append(ids[1:], FIRST_SPECIAL_ID)
    last_of_row = np.zeros(len(ids), dtype=bool)
    last_of_row[offsets[1:] - 1] = True
    replaceable = w.is_word[ids] & (w.ends_piece[nxt] & ~last_of_row)
    cs = np.concatenate(([0], np.cumsum(replaceable)))
    usable = np.flatnonzero(cs[offsets[1:]] - cs[offsets[:-1]] >= MIN_WORDS)
    return Bank(ids, mask, offsets, replaceable, usable)


def chunk_table(bank: Bank, rows: int, seed: int, chunk: int) -> pa.Table:
    """Rows ``[chunk*CHUNK_ROWS, +rows)`` of the dataset: deterministic per (seed, chunk)."""
    w = word_tables()
    rng = np.random.default_rng([seed, chunk])
    pick = bank.usable[rng.integers(0, len(bank.usable), size=rows)]
    lengths = bank.lengths[pick]
    out_offsets = np.concatenate(([0], np.cumsum(lengths)))
    src = np.repeat(bank.offsets[pick] - out_offsets[:-1], lengths) + np.arange(out_offsets[-1])
    ids = bank.ids[src]
    mask = bank.mask[src]
    where = np.flatnonzero(bank.replaceable[src])
    caps = w.capital[ids[where]]
    ids[where[caps]] = w.capital_words[rng.integers(0, len(w.capital_words), int(caps.sum()))]
    ids[where[~caps]] = w.lower_words[rng.integers(0, len(w.lower_words), int((~caps).sum()))]
    offsets32 = pa.array(out_offsets.astype(np.int32))
    return pa.Table.from_arrays(
        [pa.ListArray.from_arrays(offsets32, pa.array(ids, pa.int32())),
         pa.ListArray.from_arrays(offsets32, pa.array(mask, pa.bool_())),
         pa.array(lengths.astype(np.int64))],
        schema=ARROW_SCHEMA)


def build(out_dir: Path, rows: int, seed: int = 0, log=print) -> Path:
    """Generate ``rows`` rows into ``out_dir`` with ``save_to_disk`` (one chunk in memory at a time)."""
    from datasets import Dataset
    from datasets.utils import disable_progress_bars

    started = time.time()
    bank = load_bank()
    out_dir = Path(out_dir)
    staging = out_dir.parent / f".{out_dir.name}-staging.arrow"
    total_bytes = 0
    with pa.OSFile(str(staging), "wb") as sink, pa.ipc.new_stream(sink, ARROW_SCHEMA) as writer:
        for chunk, start in enumerate(range(0, rows, CHUNK_ROWS)):
            table = chunk_table(bank, min(CHUNK_ROWS, rows - start), seed, chunk)
            total_bytes += table.nbytes
            writer.write_table(table)
    log(f"  generated {rows:,} rows ({total_bytes / 1e9:.2f} GB) in {time.time() - started:.1f} s; saving ...")
    try:
        disable_progress_bars()
        ds = Dataset.from_file(str(staging))  # memory-mapped: save_to_disk streams it
        ds.save_to_disk(str(out_dir), num_shards=max(1, -(-total_bytes // MAX_FILE_BYTES)))
        del ds
    finally:
        staging.unlink(missing_ok=True)
    log(f"  wrote {out_dir} in {time.time() - started:.1f} s")
    return out_dir


def dataset_dir(rows: int = FULL_ROWS, seed: int = 0, root: Path | None = None, log=print) -> Path:
    """The cached dataset of ``rows`` rows (built on first use)."""
    root = Path(root) if root else cache_root() / "benchmarks"
    target = root / f"fullscale-{rows}-s{seed}-{VERSION}"
    if (target / "state.json").is_file():
        return target
    need = rows * 1500  # ~1.4 kB of Arrow per row, written twice (staging + save_to_disk)
    root.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(root).free
    if free < need * 1.2:
        raise SystemExit(f"{root}: {free / 1e9:.1f} GB free, need ~{need / 1e9:.1f} GB to build {rows:,} rows; "
                         "pass --out on a larger disk")
    log(f"building {target} ...")
    return cached_build(target, "state.json", lambda out: build(out, rows, seed, log))


def describe(path: Path) -> dict:
    """Shape figures of a built dataset, from its offsets only."""
    from drafter_contracts.dataset.reader import open_dataset

    ds = open_dataset(path)
    lengths = ds.row_lengths()
    return {"rows": int(len(lengths)), "tokens": int(lengths.sum()), "seq_len_mean": round(float(lengths.mean()), 1),
            "seq_len_min": int(lengths.min()), "seq_len_max": int(lengths.max()),
            "rows_at_4096": int((lengths == 4096).sum()), "files": len(ds.files),
            "arrow_bytes": sum(f.stat().st_size for f in ds.files)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=FULL_ROWS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="parent folder of the cached dataset (default: the fixture cache)")
    args = parser.parse_args(argv)
    path = dataset_dir(args.rows, args.seed, args.out)
    print(json.dumps({"path": str(path), **describe(path)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
