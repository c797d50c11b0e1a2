"""The tokenizer as the checks need it: lookup tables over ids, and decoding for explanations.

Loaded once per process and cached: pytest-xdist workers each hold one copy
(a few MB of tables), never per shard.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np

from .errors import UsageProblem

BUILTIN_PREFIX = "builtin:"
BUILTIN_TOKENIZERS = ("qwen3.6",)


@dataclass
class Vocabulary:
    """A tokenizer reduced to what checks use: which ids exist and how they read."""

    name: str
    backend: object  # tokenizers.Tokenizer
    fingerprint: str
    token_to_id: dict[str, int] = field(repr=False)
    chat_template: str | None = field(default=None, repr=False)

    @cached_property
    def size(self) -> int:
        """One more than the largest id; ids at or above it are unknown."""
        return max(self.token_to_id.values()) + 1

    @cached_property
    def known(self) -> np.ndarray:
        """``known[i]`` is True when id ``i`` is a token of this tokenizer (base or added)."""
        lut = np.zeros(self.size, dtype=bool)
        lut[np.fromiter(self.token_to_id.values(), dtype=np.int64)] = True
        return lut

    @cached_property
    def texts(self) -> list[str]:
        """Each id's own decoded text (special tokens included)."""
        return self.backend.decode_batch([[i] for i in range(self.size)], skip_special_tokens=False)

    @cached_property
    def newline_lead(self) -> np.ndarray:
        """Ids whose text is whitespace starting with a newline: how a ChatML header ends.

        A longer one (``"\\n\\n"``) is the header's newline merged by BPE with the
        content's leading whitespace: a boundary token.
        """
        lut = np.zeros(self.size, dtype=bool)
        for i, text in enumerate(self.texts):
            if text[:1] == "\n" and text.isspace():
                lut[i] = True
        return lut

    def id_of(self, token: str) -> int | None:
        return self.token_to_id.get(token)

    def single_id(self, text: str) -> int | None:
        """The id of ``text`` if it encodes to exactly one token, else None."""
        ids = self.backend.encode(text, add_special_tokens=False).ids
        return ids[0] if len(ids) == 1 else None

    def decode(self, ids: np.ndarray | list[int]) -> str:
        """Decode known ids; unknown ones show as ``<unk:ID>`` instead of raising."""
        out: list[str] = []
        run: list[int] = []
        for i in (int(x) for x in ids):
            if 0 <= i < self.size and self.known[i]:
                run.append(i)
                continue
            if run:
                out.append(self.backend.decode(run, skip_special_tokens=False))
                run = []
            out.append(f"<unk:{i}>")
        if run:
            out.append(self.backend.decode(run, skip_special_tokens=False))
        return "".join(out)


def _from_file(path: Path, name: str) -> Vocabulary:
    from tokenizers import Tokenizer

    raw = path.read_bytes()
    try:
        backend = Tokenizer.from_str(raw.decode("utf-8"))
    except Exception as exc:  # tokenizers raises plain Exception subclasses
        raise UsageProblem(f"--tokenizer {name}: {path.name} cannot be loaded ({exc}); pass a directory saved by save_pretrained") from None
    template = None
    config = path.parent / "tokenizer_config.json"
    jinja = path.parent / "chat_template.jinja"
    if jinja.is_file():
        template = jinja.read_text("utf-8")
    elif config.is_file():
        try:
            template = json.loads(config.read_text("utf-8")).get("chat_template")
        except ValueError:
            template = None
    return Vocabulary(name, backend, hashlib.sha256(raw).hexdigest()[:16],
                      backend.get_vocab(with_added_tokens=True), template if isinstance(template, str) else None)


def _from_transformers(name: str) -> Vocabulary:
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(name, local_files_only=True)  # a CI gate must not depend on a hub
    except Exception as exc:  # anything from hub lookups to missing files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageProblem(f"--tokenizer {name}: cannot be loaded from local files ({first}); pass a local tokenizer directory "
                           f"(with tokenizer.json) or {BUILTIN_PREFIX}{BUILTIN_TOKENIZERS[0]}") from None
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None:
        raise UsageProblem(f"--tokenizer {name}: only a slow tokenizer is available; save a fast one (tokenizer.json) and pass its directory")
    raw = backend.to_str().encode("utf-8")
    template = getattr(tok, "chat_template", None)
    return Vocabulary(name, backend, hashlib.sha256(raw).hexdigest()[:16],
                      backend.get_vocab(with_added_tokens=True), template if isinstance(template, str) else None)


@lru_cache(maxsize=4)
def load_vocabulary(name: str) -> Vocabulary:
    """Load ``builtin:qwen3.6``, a directory holding ``tokenizer.json``, or a name transformers resolves."""
    if name.startswith(BUILTIN_PREFIX):
        which = name[len(BUILTIN_PREFIX):]
        if which not in BUILTIN_TOKENIZERS:
            raise UsageProblem(f"--tokenizer {name}: unknown built-in; use one of "
                               + ", ".join(BUILTIN_PREFIX + b for b in BUILTIN_TOKENIZERS))
        from .fixtures.tokenizer import qwen36_tokenizer_dir

        return _from_file(qwen36_tokenizer_dir() / "tokenizer.json", name)
    path = Path(name).expanduser()
    if path.is_dir():
        if (path / "tokenizer.json").is_file():
            return _from_file(path / "tokenizer.json", name)
        return _from_transformers(str(path))
    if path.is_file() and path.name == "tokenizer.json":
        return _from_file(path, name)
    if path.exists():
        raise UsageProblem(f"--tokenizer {name}: not a tokenizer directory; pass the folder holding tokenizer.json")
    if name.startswith((".", "/", "~")):
        raise UsageProblem(f"--tokenizer {name}: no such directory; pass the folder holding tokenizer.json "
                           f"or {BUILTIN_PREFIX}{BUILTIN_TOKENIZERS[0]}")
    return _from_transformers(name)
