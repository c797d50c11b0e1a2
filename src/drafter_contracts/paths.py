"""Where the suite keeps what it may rebuild (a per-user cache), and how it writes files there.

One module for runtime and fixtures alike: the runtime caches learnt template
profiles, tokenizer tables and the built-in tokenizer, the fixtures cache built
tokenizers and datasets. Writes are atomic (a temporary sibling, then a rename) and a
build that several processes want runs once, under a file lock (:func:`cached_build`).
Nothing is ever written next to a user's dataset.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable

if TYPE_CHECKING:  # typing.Self is 3.11+; the package runs on 3.10
    from typing_extensions import Self

__all__ = ["ArrayCache", "JsonCache", "KeyedCache", "atomic_write_bytes", "atomic_write_text", "build_lock",
           "cache_root", "cached_build"]


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
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide reports from the other users of a shared node
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


@contextmanager
def build_lock(target: Path) -> Iterator[None]:
    """An exclusive lock for building ``target`` (``flock``: released when the process dies, too).

    The lock file lives in the temporary folder, keyed by the target's path, so the cache holds
    nothing but finished fixtures.
    """
    folder = Path(tempfile.gettempdir()) / "drafter-contracts-locks"
    folder.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(str(target.resolve()).encode()).hexdigest()[:24]
    with open(folder / f"{target.name}-{key}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def cached_build(target: Path, marker: str, build: Callable[[Path], object]) -> Path:
    """``target``, built by ``build(tmp_dir)`` on first use and renamed into place.

    pytest-xdist workers ask for the same fixture at once: the first takes a file lock and
    builds, the others wait on the lock and then find the finished build, so a fixture is
    built once per machine, not once per worker (a tokenizer costs ~14 s, the dataset ~9 s).
    The build goes into a temporary sibling and is renamed, so a killed build leaves no
    half fixture behind; ``marker`` is a file that only a complete build has.
    """
    if (target / marker).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with build_lock(target):
        if (target / marker).is_file():  # built by another process while this one waited
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        try:
            build(tmp / "out")
            try:
                os.rename(tmp / "out", target)
            except OSError:
                pass  # an incomplete leftover is in the way: said below
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if not (target / marker).is_file():
        raise RuntimeError(f"{target} exists but is incomplete (no {marker}); delete it to rebuild the fixture")
    return target


@dataclass(frozen=True)
class KeyedCache:
    """One document the runtime may recompute: a learnt profile, a verified choice, a tokenizer's tables.

    Its name is a digest of everything the document depends on - the tokenizer's fingerprint and
    chat template, the request, and the bytes of the code that computes it - so a new tokenizer,
    template or code version finds no stale entry. An unreadable entry is a miss and an unwritable
    cache costs time, never correctness. The subclasses say how a document is stored.
    """

    path: Path
    suffix: ClassVar[str] = ""
    #: What a damaged or foreign entry raises when read (a miss).
    damaged: ClassVar[tuple[type[Exception], ...]] = (OSError, ValueError, KeyError)

    @classmethod
    def keyed(cls, folder: str, kind: str, parts: Iterable[str], code: Iterable[Path] = ()) -> "Self":
        h = hashlib.sha256()
        for part in parts:
            h.update(part.encode("utf-8") + b"\0")
        h.update(_code_digest(tuple(code)))
        return cls(cache_root() / folder / f"{kind}-{h.hexdigest()[:24]}{cls.suffix}")

    def read(self) -> Any | None:
        try:
            return self._load()
        except self.damaged:
            return None

    def write(self, doc: Any) -> None:
        try:
            atomic_write_bytes(self.path, self._dump(doc))
        except OSError:
            pass

    def get(self, compute: Callable[[], Any]) -> Any:
        """The stored document, else ``compute()``'s, stored for the next process."""
        doc = self.read()
        if doc is None:
            doc = compute()
            self.write(doc)
        return doc

    def _load(self) -> Any:
        raise NotImplementedError

    def _dump(self, doc: Any) -> bytes:
        raise NotImplementedError


class JsonCache(KeyedCache):
    """A JSON document (profiles, verified choices, encoded texts)."""

    suffix = ".json"

    def _load(self) -> Any:
        return json.loads(self.path.read_text("utf-8"))

    def _dump(self, doc: Any) -> bytes:
        return json.dumps(doc).encode("utf-8")


class ArrayCache(KeyedCache):
    """Named numpy arrays in one ``.npz`` (a tokenizer's tables), read whole: no pickles."""

    suffix = ".npz"
    damaged = (*KeyedCache.damaged, EOFError, zipfile.BadZipFile)  # empty or truncated archives

    def _load(self) -> dict[str, Any]:
        import numpy as np

        with np.load(self.path, allow_pickle=False) as z:
            return {name: z[name] for name in z.files}

    def _dump(self, doc: dict[str, Any]) -> bytes:
        import io

        import numpy as np

        buf = io.BytesIO()
        np.savez(buf, **doc)
        return buf.getvalue()


@lru_cache(maxsize=None)
def _code_digest(files: tuple[Path, ...]) -> bytes:
    """The bytes of the code a cached document depends on, digested once per process."""
    h = hashlib.sha256()
    for file in files:
        h.update(file.read_bytes() if file.is_file() else b"")
    return h.digest()
