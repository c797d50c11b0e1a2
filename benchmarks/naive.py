"""The plain-Python baseline: one Python loop per row (and per token) doing the suite's per-row checks.

What a team writes before it has a suite: load the dataset with ``datasets``, iterate
the rows as Python lists, and check each one. To compare like with like it covers the
same per-row contracts as the suite under the default contract: lengths and seq_len,
ids in the vocabulary, at least one supervised token, turn structure, loss only on
assistant content and on all of it, exact duplicates, placeholder and too-short
replies, replies cut at max_len, short rows and rows without a DFlash anchor. Its turn
walk is a plain ChatML state machine written from the template's shape, not the
suite's labeller; it is a baseline for time, and its verdict is only reported.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np


def _ids(vocab: Any) -> dict[str, Any]:
    one = vocab.single_id
    return {"start": vocab.id_of("<|im_start|>"), "end": vocab.id_of("<|im_end|>"), "nl": one("\n"),
            "think": (vocab.id_of("<think>"), vocab.id_of("</think>")),
            "roles": {one(w): w for w in ("system", "developer", "user", "assistant", "tool")},
            "placeholder": [t for t in vocab.backend.encode("OK.", add_special_tokens=False).ids],
            "nl_lead": vocab.newline_lead.tolist()}


def check_row(ids: list[int], mask: list[int], seq_len: int, t: dict[str, Any], seen: set, *, vocab_size: int,
              min_len: int = 10, max_len: int = 4096, soft_min_len: int = 16, block: int = 16,
              min_reply: int = 2) -> list[str]:
    """Names of the contracts one row breaks (or warns on), found token by token."""
    bad = []
    n = len(ids)
    if n == 0:
        return ["no_empty_rows"]
    if not (n == len(mask) == seq_len):
        return ["lengths_agree"]
    if not (min_len <= n <= max_len):
        bad.append("seq_len_bounds")
    supervised = sum(mask)
    if supervised < 1:
        bad.append("min_supervised")
    if not all(0 <= x < vocab_size for x in ids):
        bad.append("ids_known")
    start, end, nl, roles = t["start"], t["end"], t["nl"], t["roles"]
    think_open, think_close = t["think"]
    lead = t["nl_lead"]
    role, pos, closed_at, well_formed = None, 0, -2, ids[0] == start
    on_other = missing = False
    reply: list[int] = []
    replies: list[list[int]] = []
    for i, (x, m) in enumerate(zip(ids, mask)):
        if x == start:
            if role is not None:
                well_formed = False
            role = roles.get(ids[i + 1]) if i + 1 < n else None
            if role is None:
                well_formed = False
                role = "?"
            pos = 0
            reply = []
        elif x == end:
            if role is None:
                well_formed = False
            elif role == "assistant":
                replies.append(reply)
            role, closed_at = None, i
            if m:
                on_other = True
            continue
        else:
            pos += 1
        if role is None:
            if i == closed_at + 1 and x == nl:
                if m:
                    on_other = True
                continue
            well_formed = False
            if m:
                on_other = True
            continue
        header = x == start or pos <= 1 or (pos == 2 and x == nl)
        if pos == 2 and x != nl:
            if 0 <= x < len(lead) and lead[x]:  # the header's newline merged into the content's first token: either mask is fine
                continue
            well_formed = False
        content = role == "assistant" and not header
        if m and not content:
            on_other = True
        if content and not m:
            missing = True
        if content and x not in (think_open, think_close) and not (0 <= x < len(lead) and lead[x]):
            reply.append(x)
    if role is not None and n < max_len:
        well_formed = False
    if not well_formed:
        bad.append("turns_well_formed")
    if on_other:
        bad.append("mask_on_assistant_spans")
    if missing:
        bad.append("mask_covers_assistant_spans")
    key = hash((tuple(ids), tuple(mask)))
    if key in seen:
        bad.append("duplicate_rows")
    seen.add(key)
    if any(r == t["placeholder"] for r in replies):
        bad.append("placeholder_replies")
    elif any(len(r) < min_reply for r in replies):
        bad.append("placeholder_replies")
    if n == max_len and mask[-1] and role == "assistant":
        bad.append("cut_mid_reply")
    if n < soft_min_len:
        bad.append("short_rows")
    if supervised and not any(mask[:max(0, n - block)]):
        bad.append("dflash_anchors")
    return bad


def naive_loop(path: Path, sample_rows: int, vocab: Any) -> dict[str, Any]:
    """Time :func:`check_row` over an evenly spread sample of 1,000-row blocks, extrapolated to every row."""
    from datasets import load_from_disk

    ds = load_from_disk(str(path))
    n = len(ds)
    take = min(sample_rows, n)
    starts = np.linspace(0, n - min(1000, take), num=max(1, take // 1000), dtype=np.int64)
    t = _ids(vocab)
    seen: set = set()
    flagged: dict[str, int] = {}
    rows = tokens = 0
    t0 = time.perf_counter()
    for s in starts:
        for row in ds.select(range(int(s), int(s) + min(1000, take))):
            ids, mask = row["input_ids"], row["loss_mask"]
            for name in check_row(ids, mask, row["seq_len"], t, seen, vocab_size=vocab.size):
                flagged[name] = flagged.get(name, 0) + 1
            rows += 1
            tokens += len(ids)
    elapsed = time.perf_counter() - t0
    return {"sample_rows": rows, "sample_tokens": tokens, "seconds": round(elapsed, 2),
            "rows_flagged": dict(sorted(flagged.items())), "extrapolated_s": round(elapsed / rows * n, 1), "rows": n}
