"""Tokenizer drift: re-encode a seeded sample of rows with the current tokenizer and compare ids.

Ids that decode fine can still come from another tokenizer (fewer merges, another
version): ``ids_known`` passes, the drafter trains on token splits the target model
never produces. A row is split into segments at added/special tokens (the tokenizer
splits text there too), each segment is decoded and re-encoded, and any difference
fails with the position and both token sequences decoded.

Legitimate non-canonical tokenizations are tolerated, each by one narrow rule:
- a producer that tokenized the turn header and the content separately (BPE would
  have merged the header's newline with the content's leading whitespace): a segment
  also matches as ``encode(up to its first newline) + encode(rest)``;
- a row cut mid-text (at ``max_len``, or a truncated turn): its last segment is
  compared only up to its last newline, where the pre-tokenizer always splits.

The sample: every shard contributes its rows in the order of a seeded 64-bit hash of
the global row index, up to ``ceil(sample_rows / shards)`` rows and about
``ceil(sample_tokens / shards)`` tokens, so the sample is spread over the whole
dataset, fixed for a seed, and bounded in re-encoding work whatever the row lengths.
Only the candidate rows are read (``take``), so one test does it all: one process
loads the tokenizer, not every xdist worker, and only when a sampled segment is not
already known to re-encode to its ids (``VerifiedSegments``).
"""

from __future__ import annotations

import hashlib
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..dataset.columns import Shard
from ..dataset.layout_rows import ShardArrays
from ..paths import atomic_write_bytes
from ..results import CheckResult, Violation
from .content import mix64
from .declare import IDS, TOKENIZER, Scope, Spec, register
from ..dataset.row_view import RowView, usable_view

REASON = "re-encoding with the tokenizer gives other ids"
MAX_SHOWN_TOKENS = 12


@dataclass(frozen=True)
class Segment:
    view_row: int
    start: int  # flat position in the view
    stop: int
    cut: bool  # last segment of a row not closed by a special token


def rows_per_shard(sample_rows: int, num_shards: int) -> int:
    return 0 if sample_rows <= 0 or num_shards <= 0 else math.ceil(sample_rows / num_shards)


def sample_rows(view: RowView, shard_start: int, k: int, seed: int, usable: np.ndarray) -> np.ndarray:
    """View-row numbers of the ``k`` usable rows with the smallest seeded hash of their global index."""
    candidates = np.flatnonzero(usable)
    if k <= 0 or not len(candidates):
        return np.zeros(0, dtype=np.int64)
    global_rows = (view.rows[candidates] + shard_start).astype(np.uint64)
    h = mix64(global_rows ^ mix64(np.full(len(candidates), seed, dtype=np.uint64)))
    if len(candidates) > k:
        chosen = np.argpartition(h, k - 1)[:k]
    else:
        chosen = np.arange(len(candidates))
    return np.sort(candidates[chosen])


def global_sample(shards: list, k: int, seed: int) -> list[np.ndarray]:
    """Per shard, global row indices of its ``k`` rows with the smallest seeded hash, in hash order
    (a loop over shards only): a prefix of each is the shard's sample, whatever budget cuts it."""
    out = []
    salt = mix64(np.array([seed], dtype=np.uint64))
    for s in shards:
        idx = np.arange(s.start, s.stop, dtype=np.uint64)
        if not len(idx) or k <= 0:
            continue
        h = mix64(idx ^ salt)
        pick = np.argpartition(h, k - 1)[:k] if len(idx) > k else np.arange(len(idx))
        out.append(s.start + pick[np.argsort(h[pick], kind="stable")].astype(np.int64))
    return out


def within_budget(ordered: list[np.ndarray], candidates: np.ndarray, lengths: np.ndarray, budget: int) -> np.ndarray:
    """Sorted global rows: each shard's hash-ordered rows up to the one that reaches ``budget`` tokens
    (at least one row a shard), so the sample's cost is bounded in tokens whatever the row lengths.
    ``lengths[i]`` is the length of row ``candidates[i]`` (sorted: every row of ``ordered``)."""
    keep = []
    for rows in ordered:  # a loop over shards only
        mine = lengths[np.searchsorted(candidates, rows)]
        before = np.cumsum(mine) - mine  # tokens taken before each row
        keep.append(rows[before < max(budget, 1)])
    return np.sort(np.concatenate(keep)) if keep else np.zeros(0, dtype=np.int64)


def segments(view: RowView, rows: np.ndarray, special: np.ndarray) -> list[Segment]:
    """Runs of non-special tokens of the sampled rows (a loop over the bounded sample only)."""
    out: list[Segment] = []
    for r in rows.tolist():
        lo, hi = int(view.offsets[r]), int(view.offsets[r + 1])
        sp = special[np.clip(view.ids[lo:hi], 0, len(special) - 1)]
        edges = np.flatnonzero(np.diff(np.concatenate(([True], sp, [True])).astype(np.int8)))
        # edges alternate: start of a non-special run, end of it
        for s, e in zip(edges[::2], edges[1::2]):
            out.append(Segment(r, lo + int(s), lo + int(e), cut=(lo + int(e) == hi)))
    return out


def _matches(original: list[int], text: str, encoded: list[int], encode) -> tuple[bool, int, list[int]]:
    """(tolerated, first differing index, the tokenizer's ids) for one segment."""
    if encoded == original:
        return True, -1, encoded
    nl = text.find("\n")
    if 0 <= nl < len(text) - 1:
        split = encode(text[:nl + 1]) + encode(text[nl + 1:])
        if split == original:
            return True, -1, encoded
    first = next((i for i, (x, y) in enumerate(zip(original, encoded)) if x != y), min(len(original), len(encoded)))
    return False, first, encoded


def segment_key(ids: np.ndarray, cut: bool) -> bytes:
    """What a segment's verdict depends on besides the tokenizer and this module: its ids, and whether it is cut."""
    return hashlib.blake2b(np.ascontiguousarray(ids, dtype=np.int64).tobytes() + (b"c" if cut else b""),
                           digest_size=16).digest()


class VerifiedSegments:
    """Segments already seen to re-encode to their own ids with one tokenizer, kept between runs.

    Re-encoding is a pure function of the segment's ids, the tokenizer and the tolerance rules of this
    module, so a segment verified once is verified for good; a rerun over unchanged data (the gate in CI,
    a re-check after a contract edit) then needs no tokenizer parse at all, the fixed cost of this
    contract. Keyed by the tokenizer's content hash and this file's own hash; only matches are kept (a
    difference is re-encoded every time, to show it).
    """

    MAX_KEYS = 1 << 20

    def __init__(self, fingerprint: str) -> None:
        from ..paths import cache_root

        code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
        self.path = cache_root() / "drift" / f"{fingerprint}-{code}.npy"
        try:
            table = np.load(self.path, allow_pickle=False)  # (n, 16) bytes: numpy's S16 would drop trailing NULs
            self.keys = {row.tobytes() for row in table} if table.ndim == 2 and table.shape[1] == 16 else set()
        except (OSError, ValueError):
            self.keys = set()
        self._new: set[bytes] = set()

    def __contains__(self, key: bytes) -> bool:
        return key in self.keys

    def add(self, key: bytes) -> None:
        if key not in self.keys:
            self._new.add(key)

    def save(self) -> None:
        """Write the grown set (atomic; a failed write only costs the next run its speed)."""
        if not self._new:
            return
        keys = self._new | (self.keys if len(self.keys) + len(self._new) <= self.MAX_KEYS else set())
        buf = io.BytesIO()
        table = np.frombuffer(b"".join(sorted(keys)), dtype=np.uint8).reshape(-1, 16)
        np.save(buf, table, allow_pickle=False)
        try:
            atomic_write_bytes(self.path, buf.getvalue())
        except OSError:
            pass


def check_tokenizer_drift(view: RowView, a: ShardArrays, backend: Any, special: np.ndarray, known: np.ndarray,
                          k: int, seed: int, verified: VerifiedSegments | None = None) -> CheckResult:
    """Re-encode the sampled rows' segments; a difference names the row, token position and both sequences.

    ``backend`` is the ``tokenizers.Tokenizer``, or a function returning it: called only when a segment is
    not in ``verified`` (parsing a large tokenizer.json costs seconds and holds the GIL while it runs)."""
    ids = view.ids
    bad = ~((ids >= 0) & (ids < len(known)) & known[np.clip(ids, 0, len(known) - 1)])
    cs = np.concatenate(([0], np.cumsum(bad)))
    usable = (cs[view.offsets[1:]] - cs[view.offsets[:-1]]) == 0  # rows with unknown ids: see ids_known
    chosen = sample_rows(view, a.shard.start, k, seed, usable)
    all_segs = segments(view, chosen, special)
    keys = [segment_key(ids[s.start:s.stop], s.cut) for s in all_segs]
    todo = [i for i, key in enumerate(keys) if verified is None or key not in verified]
    segs = [all_segs[i] for i in todo]
    first_bad: dict[int, tuple[int, list[int], list[int]]] = {}
    tok = (backend() if callable(backend) else backend) if segs else None
    if segs:
        originals = [ids[s.start:s.stop].tolist() for s in segs]
        texts = tok.decode_batch(originals, skip_special_tokens=False)
        before = tok.encode_special_tokens
        tok.encode_special_tokens = True  # text inside a segment was plain text: never turn it into control tokens
        try:
            def encode(t: str) -> list[int]:
                return tok.encode(t, add_special_tokens=False).ids

            compare_texts = [t[:t.rfind("\n") + 1] if s.cut else t  # a cut segment: up to its last newline only
                             for s, t in zip(segs, texts)]
            encoded = [e.ids for e in tok.encode_batch(compare_texts, add_special_tokens=False)]
            for i, s, orig, text, enc in zip(todo, segs, originals, compare_texts, encoded):
                if s.view_row in first_bad:
                    continue
                if s.cut:
                    orig = orig[:len(enc)] if len(enc) <= len(orig) else orig
                ok, at, enc = _matches(orig, text, enc, encode)
                if ok:
                    if verified is not None:
                        verified.add(keys[i])
                    continue
                pos = s.start + at - int(view.offsets[s.view_row])
                first_bad[s.view_row] = (pos, orig[at:at + MAX_SHOWN_TOKENS], enc[at:at + MAX_SHOWN_TOKENS])
        finally:
            tok.encode_special_tokens = before
        if verified is not None:
            verified.save()

    def pieces(seq: list[int]) -> str:
        texts = tok.decode_batch([[i] for i in seq], skip_special_tokens=False) if seq else []
        return "[" + ", ".join(f"{i} {t!r}" for i, t in zip(seq, texts)) + "]"

    examples = []
    for r, (pos, data_ids, tok_ids) in sorted(first_bad.items()):
        examples.append(Violation(int(view.rows[r]) + a.shard.start, int(pos),
                                  f"{REASON} at token {pos}: data {pieces(data_ids)} vs tokenizer {pieces(tok_ids)}"))
    return CheckResult("tokenizer_drift", a.shard.id, rows_checked=int(len(chosen)), rows_violating=len(examples),
                       by_reason={REASON: len(examples)} if examples else {}, examples=examples[:20])


def run_drift(e) -> CheckResult:
    """Tokenizer drift on a seeded sample spread over all shards; only the sampled rows are read."""
    if e.vocab is None:
        return CheckResult("tokenizer_drift", "dataset",
                           skipped="no tokenizer: pass --tokenizer DIR or set [tokenizer] path in the contract")
    if e.contract.drift.sample_rows == 0:
        return CheckResult("tokenizer_drift", "dataset",
                           skipped="[drift] sample_rows = 0 in the contract: tokenizer drift is not checked")
    if "input_ids" in e.column_problems:
        return CheckResult("tokenizer_drift", "dataset", skipped=e.column_problems["input_ids"])
    # Rows per shard from the whole plan, drawn from this part's shards: the parts of a
    # --split run sample exactly the rows one machine would have.
    drift = e.contract.drift
    k = rows_per_shard(drift.sample_rows, len(e.all_shards))
    readable = [s for s in e.shards if e.unreadable(s) is None]  # damaged rows are arrow_integrity's
    ordered = global_sample(readable, k, drift.seed)
    candidates = np.sort(np.concatenate(ordered)) if ordered else np.zeros(0, dtype=np.int64)
    lengths = e.dataset.read_rows(candidates).input_ids.lengths  # rows as the engine reads them (dataset/layouts.py)
    budget = rows_per_shard(drift.sample_tokens, len(e.all_shards))
    picked = within_budget(ordered, candidates, lengths, budget)
    read = e.dataset.read_rows(picked)  # at most sample_rows rows
    a = ShardArrays(Shard(0, 0, len(picked)), read.input_ids,
                    read.loss_mask if "loss_mask" not in e.column_problems else None, None, None)
    view = usable_view(a)
    result = check_tokenizer_drift(view, a, lambda: e.vocab.backend, e.special_ids, e.vocab.known,
                                   len(picked), drift.seed, VerifiedSegments(e.vocab.fingerprint))
    result.scope = "dataset"
    result.examples = [Violation(int(picked[v.row]), v.position, v.reason) for v in result.examples]
    return result


register(Spec("tokenizer_drift", Scope.DATASET, "a sample of rows from every shard re-encodes to the same ids",
              needs=frozenset({IDS, TOKENIZER}), per_part=True, run=run_drift,
              turned_off=lambda c: "[drift] sample_rows = 0" if c.drift.sample_rows == 0 else None))
