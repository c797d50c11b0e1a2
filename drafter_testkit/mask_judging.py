"""A loss mask judged by the ground truth of its rendering (``spans/learn/truth.py``), never by the span oracle.

The real-producer corpora (:mod:`.real_producers`, :mod:`.trainer_producers`) hold each producer's masks
to the truth of the row's rendering: :func:`misplaced_supervision` lists the supervised tokens the truth
does not allow (the leaks), :func:`unsupervised_fields` the assistant fields no supervised token touches.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from drafter_contracts.spans.learn.truth import CharClass, TruthRender, gap_kinds

#: The truth's classes of assistant text, which a mask may supervise.
ASSISTANT_PARTS = (CharClass.ASSISTANT, CharClass.REASONING, CharClass.TOOL_CALL)
#: The truth's classes of context (system, user and tool text), which no mask may supervise.
CONTEXT_PARTS = (CharClass.SYSTEM, CharClass.USER, CharClass.TOOL)


def misplaced_supervision(truth: TruthRender, mask: np.ndarray) -> np.ndarray:
    """Supervised tokens the truth does not allow, in token order (empty: the mask is sound).

    A producer's mask is correct by the truth when every supervised token is assistant text or
    scaffold of an assistant turn; which of those it supervises is its convention, judged by the
    contracts, not here. Per supervised token (``mask`` may be shorter than the rendering: a row cut
    at its length cap):

    - wholly inside a field: allowed when the field is assistant content, reasoning or a tool call;
    - with characters of a field and of scaffold (a BPE merge): allowed when one of its characters is
      assistant text, wrong when it holds system, user or tool text and none of the assistant's;
    - wholly scaffold: allowed when its gap may read as an assistant turn (``gap_kinds`` holds A), so a
      header, end token or newline of an assistant turn passes, scaffold between two user or tool
      fields (a tool-response wrapper, a user header between them) does not.

    Scaffold between an assistant field and the next message's field may be either turn's, so the
    truth accepts supervision anywhere in it (where the footer ends is the template's structure, which
    the contracts read); text a user typed is user text whatever it spells.
    """
    mask = np.asarray(mask, dtype=bool)
    n = len(mask)
    if n > truth.n_tokens:
        raise ValueError(f"a mask of {n} tokens does not fit a rendering of {truth.n_tokens} tokens")
    sup = np.flatnonzero(mask)
    if not len(sup):
        return sup.astype(np.int64)
    bits = truth.token_classes[:n].astype(np.int64)
    a_bits = sum(1 << int(p) for p in ASSISTANT_PARTS)
    n_bits = sum(1 << int(p) for p in CONTEXT_PARTS)
    tf = truth.token_field[:n]
    bad = np.zeros(n, dtype=bool)
    inside = tf >= 0
    if len(truth.fields):
        field_class = np.array([f.char_class for f in truth.fields], dtype=np.int64)
        is_context = np.isin(field_class, [int(p) for p in CONTEXT_PARTS])
        bad |= inside & is_context[np.maximum(tf, 0)]
    bad |= (tf == -2) & ((bits & n_bits) != 0) & ((bits & a_bits) == 0)
    scaffold = np.flatnonzero((tf == -1) & mask)
    if len(scaffold):
        ends = np.array([f.end for f in truth.fields], dtype=np.int64)
        gaps = np.searchsorted(ends, truth.offsets[scaffold, 0], side="right")
        kinds = {int(g): "A" in gap_kinds(truth, int(g)) for g in np.unique(gaps)}
        bad[scaffold[[not kinds[int(g)] for g in gaps]]] = True
    return np.flatnonzero(bad & mask).astype(np.int64)


def unsupervised_fields(truth: TruthRender, mask: np.ndarray, messages: Iterable[int] | None = None) -> list[int]:
    """Assistant fields (content, reasoning, tool call) of the given messages (default: every one) that no
    supervised token touches, as indices into ``truth.fields``.

    The other half of a mask's correctness: a producer that trains on an assistant message trains on all
    of what the template rendered of it. Which messages a row trains on is the producer's convention
    (every assistant message, or only the last for per-turn rows), so the caller names them. A field that
    lies past the end of ``mask`` (a row cut at its length cap) or covers no token is not counted.
    """
    mask = np.asarray(mask, dtype=bool)
    n = len(mask)
    wanted = None if messages is None else set(messages)
    ends = truth.offsets[:n, 1]
    starts = truth.offsets[:n, 0]
    out = []
    for k, f in enumerate(truth.fields):
        if f.char_class not in ASSISTANT_PARTS or (wanted is not None and f.message not in wanted):
            continue
        if not truth.text[f.start:f.end].strip():
            continue
        touching = np.flatnonzero((starts < f.end) & (ends > f.start))
        if not len(touching) or touching[-1] >= n - 1 and ends[n - 1] < f.end:
            continue  # nothing of it in the row, or cut inside it
        if not mask[touching].any():
            out.append(k)
    return out
