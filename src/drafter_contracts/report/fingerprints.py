"""Identities of what a run looked at: the dataset's files and the tokenizer with its chat template.

Cheap on purpose (metadata and hashes of small files, no token read): a baseline
compares them to say "this is not the data / tokenizer you profiled last time".
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..dataset.reader import SavedDataset
from ..tokenizer.vocabulary import Vocabulary


def _short(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def dataset_fingerprint(dataset: SavedDataset) -> dict[str, Any]:
    """Path, files with sizes, the ``_fingerprint`` datasets wrote into state.json, row count."""
    state_fp = None
    if dataset.files:
        state = dataset.files[0].parent / "state.json"
        try:
            state_fp = json.loads(state.read_text("utf-8")).get("_fingerprint")
        except (OSError, ValueError, AttributeError):
            state_fp = None
    return {
        "path": str(dataset.given),  # the folder, or the one Parquet / JSON Lines file passed
        "split": dataset.split,
        "num_rows": dataset.num_rows,
        "files": [{"name": f.name, "bytes": f.stat().st_size} for f in dataset.files],
        "state_fingerprint": state_fp,
        "fingerprint": dataset.fingerprint(),
        "format": dataset.source,  # save_to_disk, Parquet or JSON Lines (dataset/source_files.py)
        "layout": dataset.detected.describe(),  # which columns were read, and how (dataset/layouts.py)
    }


def tokenizer_fingerprint(vocab: Vocabulary | None) -> dict[str, Any]:
    """``vocab_fingerprint`` hashes tokenizer.json (vocabulary, merges, special tokens); the template apart."""
    if vocab is None:
        return {"name": None, "size": None, "vocab_fingerprint": None, "template_fingerprint": None,
                "fingerprint": None}
    template = _short(vocab.chat_template) if vocab.chat_template else None
    return {
        "name": vocab.name,
        "size": vocab.size,
        "vocab_fingerprint": vocab.fingerprint,
        "template_fingerprint": template,
        "fingerprint": _short(f"{vocab.fingerprint}:{template}"),
    }
