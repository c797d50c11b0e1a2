"""Find the draft vocabulary where producers put it and read it without running code.

* speculators 0.9 (``train/cli.py``) saves ``d2t-{N}.npy`` / ``t2d-{N}.npy`` **in the data folder** and
  loads an existing pair on the next run, whatever data it was built from;
* SpecForge 0.2 (``generate_vocab_mapping_file``) saves ``{"d2t", "t2d"}`` with ``torch.save`` under
  its cache folder: it is checked when named by ``--vocab-mapping`` or ``[vocab] mapping``.

``.npy`` files are read with ``allow_pickle=False`` and ``.pt`` files with
``torch.load(weights_only=True)``: a mapping comes with the data, and loading it must not execute a
pickle. torch is optional (the ``torch`` extra); without it a ``.pt`` cannot be read and the
mapping's contracts say so, alone.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .policy import PAIR_NAME, VocabPolicy, check_mapping_path

TORCH_EXTRA = "pip install 'drafter-contracts[torch]'"


@dataclass
class DraftMapping:
    """One mapping as read: the arrays exactly as stored (dtype and shape unchecked: the contracts check them)."""

    d2t: np.ndarray
    t2d: np.ndarray
    files: list[Path]
    producer: str  # "speculators" (.npy pair) or "specforge" (.pt), unless [vocab] producer says otherwise
    named_size: int | None = None  # the N of a d2t-N.npy file name

    @property
    def where(self) -> str:
        return " + ".join(p.name for p in self.files)

    def selected(self) -> np.ndarray:
        """Target ids of the draft vocabulary, as ``t2d`` marks them (what the loss reads)."""
        return np.flatnonzero(self.t2d)


@dataclass
class MappingSource:
    """Where this run's mapping is (or why there is none), loaded once per process on first use."""

    files: list[Path] = field(default_factory=list)
    absent: str | None = None  # why no mapping is checked (the contracts skip with it)
    producer: str = "auto"
    _loaded: tuple[DraftMapping | None, str] | None = None

    def load(self) -> tuple[DraftMapping | None, str]:
        """(mapping, "") or (None, why it cannot be read)."""
        if self._loaded is None:
            self._loaded = read_mapping(self.files, self.producer) if self.files else (None, self.absent or "")
        return self._loaded


def locate(dataset_dir: Path, option: str | None, policy: VocabPolicy) -> MappingSource:
    """``--vocab-mapping`` > ``[vocab] mapping`` > the ``d2t-N.npy`` / ``t2d-N.npy`` pair beside the dataset."""
    if option:
        return MappingSource(check_mapping_path(option, "--vocab-mapping"), producer=policy.producer)
    if policy.mapping:
        return MappingSource(check_mapping_path(policy.mapping, "[vocab] mapping"), producer=policy.producer)
    pairs: dict[int, set[str]] = {}
    for p in dataset_dir.iterdir():
        m = PAIR_NAME.match(p.name)
        if m is not None:
            pairs.setdefault(int(m.group(2)), set()).add(m.group(1))
    whole = sorted(n for n, kinds in pairs.items() if kinds == {"d2t", "t2d"})
    if policy.draft_vocab_size is not None:
        n = policy.draft_vocab_size
        if n in whole:
            return MappingSource([dataset_dir / f"d2t-{n}.npy", dataset_dir / f"t2d-{n}.npy"], producer=policy.producer)
        return MappingSource(absent=f"no d2t-{n}.npy / t2d-{n}.npy beside the dataset ([vocab] draft_vocab_size = {n})"
                             + (f"; it holds the pairs of N = {', '.join(map(str, whole))}" if whole else "")
                             + "; pass --vocab-mapping FILE")
    if len(whole) == 1:
        n = whole[0]
        return MappingSource([dataset_dir / f"d2t-{n}.npy", dataset_dir / f"t2d-{n}.npy"], producer=policy.producer)
    if len(whole) > 1:
        return MappingSource(absent=f"{len(whole)} d2t/t2d pairs beside the dataset "
                             f"(N = {', '.join(map(str, whole))}): "
                             "pin [vocab] draft_vocab_size or pass --vocab-mapping FILE")
    half = sorted(f"{next(iter(k))}-{n}.npy" for n, k in pairs.items() if len(k) == 1)
    return MappingSource(absent="no draft vocabulary mapping: no d2t-N.npy / t2d-N.npy pair beside the dataset"
                         + (f" ({', '.join(half)} without its partner)" if half else "")
                         + ", no --vocab-mapping FILE, no [vocab] mapping")


def read_mapping(files: list[Path], producer: str = "auto") -> tuple[DraftMapping | None, str]:
    """Read a ``.pt`` or an ``.npy`` pair (``check_mapping_path`` ordered them d2t, t2d)."""
    if len(files) == 2:
        arrays = []
        for p in files:
            try:
                arrays.append(np.load(p, allow_pickle=False))
            except (ValueError, OSError, EOFError) as exc:
                return None, f"{p} cannot be read with numpy.load(allow_pickle=False) ({str(exc)[:200]})"
        m = PAIR_NAME.match(files[0].name)
        return DraftMapping(arrays[0], arrays[1], list(files), "speculators" if producer == "auto" else producer,
                            int(m.group(2)) if m else None), ""
    return _read_pt(files[0], "specforge" if producer == "auto" else producer)


def _read_pt(path: Path, producer: str) -> tuple[DraftMapping | None, str]:
    try:
        import torch
    except ImportError as exc:
        return None, (f"{path} cannot be read: reading a .pt file needs torch, which cannot be imported here ({exc}); "
                      f"{TORCH_EXTRA}, or run where the training stack's torch is")
    try:
        obj: Any = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # unpickling errors come as many types
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return None, f"{path} cannot be loaded with torch.load(weights_only=True) ({first[:200]})"
    if not isinstance(obj, dict) or not {"d2t", "t2d"} <= set(obj):
        what = f"a dict with keys {sorted(map(str, obj))[:5]}" if isinstance(obj, dict) else f"a {type(obj).__name__}"
        return None, f"{path} holds {what}, not {{'d2t': tensor, 't2d': tensor}} as SpecForge saves it"
    out = []
    for key in ("d2t", "t2d"):
        value = obj[key]
        if not isinstance(value, torch.Tensor):
            return None, f"{path}: {key} is a {type(value).__name__}, not a tensor"
        out.append(value.detach().cpu().numpy())
    return DraftMapping(out[0], out[1], [path], producer), ""


def fingerprint(m: DraftMapping) -> str:
    """sha256 over the selected target ids and len(t2d): equal for the same draft vocabulary in either format."""
    h = hashlib.sha256()
    h.update(np.int64(len(m.t2d)).tobytes())
    h.update(m.selected().astype(np.int64).tobytes())
    return "sha256:" + h.hexdigest()[:32]
