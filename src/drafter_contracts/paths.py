"""Where the suite keeps what it may rebuild (a per-user cache), and how it writes files there.

One module for runtime and fixtures alike: the runtime caches learnt template
profiles and tokenizer tables, the fixtures cache built tokenizers and datasets.
Nothing is ever written next to a user's dataset.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def cache_root() -> Path:
    """``$DRAFTER_CONTRACTS_CACHE``, else ``$XDG_CACHE_HOME/drafter-contracts``, else ``~/.cache/...``."""
    explicit = os.environ.get("DRAFTER_CONTRACTS_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "drafter-contracts"


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary sibling and a rename.

    Readers (other xdist workers, a later run) see the old file or the whole new one,
    never a half-written one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def atomic_write_text(path: Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))
