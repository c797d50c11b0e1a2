"""``token_freq.pt`` must equal the supervised-token histogram of the whole dataset.

speculators writes ``{token_id: count}`` over tokens with ``loss_mask = 1`` and keeps
an existing file when the data is re-tokenized, so a stale one silently skews the
drafter's vocabulary statistics. The histogram is recomputed exactly: one
``np.bincount`` of supervised ids per shard, streamed (memory bounded by a shard).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from ..results import CheckResult
from .declare import IDS, MASK, Scope, Spec, register
from ..dataset.row_view import usable_view

FILE_NAME = "token_freq.pt"
TORCH_EXTRA = "pip install 'drafter-contracts[torch]'"
TOP_DIFFERENCES = 5


def supervised_histogram(shard_arrays: Iterable[Any]) -> np.ndarray:
    """Counts of supervised ids over all given shards (rows with null/empty/length defects left out)."""
    total = np.zeros(0, dtype=np.int64)
    for a in shard_arrays:
        view = usable_view(a)
        if view is None or view.mask is None:
            continue
        sup = view.ids[view.mask]
        sup = sup[sup >= 0]
        counts = np.bincount(sup, minlength=len(total)) if len(sup) else np.zeros(len(total), np.int64)
        if len(counts) > len(total):
            total = np.concatenate((total, np.zeros(len(counts) - len(total), np.int64)))
        total += counts.astype(np.int64, copy=False)
    return total


def load_token_freq(path: Path) -> tuple[np.ndarray | None, str]:
    """The file as a dense count array, or (None, why it cannot be used).

    ``weights_only=True``: the file comes with the data and must not run code when loaded;
    a dict of ints and tensors loads under it. torch is optional (the ``torch`` extra): without it
    the file cannot be read, and this contract, alone, says so.
    """
    try:
        import torch
    except ImportError as exc:  # not installed, or an install that does not import
        return None, (f"{path} cannot be read: reading a .pt file needs torch, which cannot be imported here "
                      f"({exc}); {TORCH_EXTRA}, or run where the training stack's torch is")
    try:
        obj = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # unpickling errors come as many types
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return None, f"{path} cannot be loaded with torch.load(weights_only=True) ({first[:200]})"
    if isinstance(obj, torch.Tensor) and obj.ndim == 1:
        return obj.to(torch.int64).numpy(), ""
    if not isinstance(obj, dict):
        return None, f"{path} holds a {type(obj).__name__}, not a dict {{token_id: count}}"
    try:
        keys = np.array([int(k) for k in obj], dtype=np.int64)
        values = np.array([int(v) for v in obj.values()], dtype=np.int64)
    except (TypeError, ValueError, RuntimeError):
        return None, f"{path} is a dict whose keys/values are not integers; expected {{token_id: count}}"
    if len(keys) and keys.min() < 0:
        return None, f"{path} has negative token ids"
    dense = np.zeros(int(keys.max()) + 1 if len(keys) else 0, dtype=np.int64)
    np.add.at(dense, keys, values)
    return dense, ""


def compare(recomputed: np.ndarray, stored: np.ndarray, decode: Callable[[int], str] | None,
            path: Path) -> CheckResult:
    """Exact comparison; the message gives the size of the difference and the top differing ids."""
    size = max(len(recomputed), len(stored))
    want = np.zeros(size, np.int64)
    want[:len(recomputed)] = recomputed
    got = np.zeros(size, np.int64)
    got[:len(stored)] = stored
    diff = got - want
    differing = np.flatnonzero(diff)
    rows_checked = int(want.sum())
    if not len(differing):
        return CheckResult("token_freq", "dataset", rows_checked=rows_checked)
    top = differing[np.argsort(-np.abs(diff[differing]), kind="stable")[:TOP_DIFFERENCES]]

    def name(i: int) -> str:
        return f"{i} {decode(i)!r}" if decode is not None else str(i)

    shown = "; ".join(f"{name(int(i))}: file {int(got[i]):,} vs data {int(want[i]):,}" for i in top)
    message = (f"{path.name} is stale: {len(differing):,} token ids have other counts than the dataset's supervised "
               f"tokens (file total {int(got.sum()):,}, data total {int(want.sum()):,}, sum of |differences| "
               f"{int(np.abs(diff).sum()):,}); largest: {shown}. Delete it and let speculators rewrite it")
    return CheckResult("token_freq", "dataset", rows_checked=rows_checked, message=message)


def missing_file(e) -> str | None:
    """Why there is no token_freq.pt to check in this run, or None."""
    if e.token_freq_path is None and not (e.dataset.path / FILE_NAME).is_file():
        return f"no {FILE_NAME} beside the dataset and no --token-freq FILE given"
    return None


def check_token_freq(e, counts: tuple[np.ndarray, np.ndarray] | None, shards_covered: int) -> CheckResult:
    """token_freq.pt against the exact supervised-id counts the shards' stats already carry.

    Runs at the controller after every shard reported: the counts are the sum of the
    shards' own, so checking the file costs no second pass over the dataset.
    """
    absent = missing_file(e)
    if absent is not None:
        return CheckResult("token_freq", "dataset", skipped=absent)
    path = e.token_freq_path or e.dataset.path / FILE_NAME
    if "input_ids" in e.column_problems or "loss_mask" in e.column_problems:
        return CheckResult("token_freq", "dataset", skipped=e.column_problems.get(
            "input_ids", e.column_problems.get("loss_mask")))
    if e.split is not None and e.split[1] > 1:
        return CheckResult("token_freq", "dataset", skipped=(
            f"--split {e.split[0]}/{e.split[1]}: token_freq.pt counts the whole dataset; check it in a run "
            "without --split (the merged summary.json holds the exact supervised_id_counts to compare)"))
    if counts is None or shards_covered != len(e.shards):
        return CheckResult("token_freq", "dataset", skipped=(
            f"stats cover {shards_covered} of {len(e.shards)} shards (tests deselected or skipped); "
            "token_freq.pt counts the whole dataset"))
    stored, problem = load_token_freq(path)
    if stored is None:
        return CheckResult("token_freq", "dataset", message=problem)
    ids, n = counts
    recomputed = np.zeros(int(ids.max()) + 1 if len(ids) else 0, dtype=np.int64)
    recomputed[ids] = n
    decode = (lambda i: e.vocab.decode([i])) if e.vocab is not None else None
    result = compare(recomputed, stored, decode, path)
    result.rows_checked = e.dataset.num_rows
    return result


register(Spec("token_freq", Scope.WHOLE, "token_freq.pt equals the supervised-token counts of the whole dataset",
              needs=frozenset({IDS, MASK}), report_skip=False,  # no file to check: said in the summary alone
              missing=missing_file,
              reduce=lambda run: check_token_freq(run.engine, run.supervised_counts(), len(run.shard_stats()))))
