"""The tokenizer as the checks need it: lookup tables over ids, and decoding for explanations.

Loaded once per process and cached: pytest-xdist workers each hold one copy
(a few MB of tables), never per shard.
"""

from __future__ import annotations

import hashlib
import json
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..errors import UsageProblem
from ..paths import ArrayCache
from .source import BUILTIN_PREFIX, resolve_tokenizer


class Vocabulary:
    """A tokenizer reduced to what checks use: which ids exist and how they read.

    Parsing a 33 MB ``tokenizer.json`` and decoding every id costs seconds, paid by
    every pytest-xdist worker. The derived tables (known ids, newline tokens, the
    marker lookups a span profile made) are therefore cached per tokenizer content
    hash, and the tokenizer itself is loaded only when something must be decoded.
    """

    def __init__(self, name: str, fingerprint: str, load_backend: Callable[[], Any],
                 chat_template: str | None = None, tables: dict[str, Any] | None = None) -> None:
        self.name = name
        self.fingerprint = fingerprint
        self.chat_template = chat_template
        self._load_backend = load_backend
        self._lookups: dict[str, int] = dict(tables["lookups"]) if tables else {}
        self._from_cache = tables is not None
        if tables:
            self.__dict__["known"] = tables["known"]
            self.__dict__["newline_lead"] = tables["newline_lead"]
            self.__dict__["token_bytes"] = tables.get("token_bytes")
            if tables.get("added") is not None:
                self.__dict__["added_ids"] = frozenset(int(i) for i in tables["added"])

    def __repr__(self) -> str:
        return f"Vocabulary({self.name!r}, fingerprint={self.fingerprint!r})"

    # --- chat template rendering (span-profile derivation; loaded only when deriving) ---
    #: Where the transformers tokenizer comes from: set by the loaders below.
    hf_source: str | None = None

    @cached_property
    def hf_tokenizer(self) -> Any:
        """A transformers tokenizer for ``apply_chat_template`` (special tokens such as ``bos_token`` set)."""
        from transformers import AutoTokenizer, PreTrainedTokenizerFast

        if self.hf_source is not None:
            try:
                return AutoTokenizer.from_pretrained(self.hf_source, local_files_only=True)
            except Exception:  # noqa: BLE001 (transformers raises many types)
                pass
            try:  # a tokenizer_class this transformers does not know (5.x's TokenizersBackend read by 4.x)
                tok = PreTrainedTokenizerFast.from_pretrained(self.hf_source, local_files_only=True)
                tok.chat_template = self.chat_template
                return tok
            except Exception:  # noqa: BLE001 a bare tokenizer.json without config: the backend alone
                pass
        tok = PreTrainedTokenizerFast(tokenizer_object=self.backend)
        tok.chat_template = self.chat_template
        return tok

    def render_chat(self, messages: list[dict], **kwargs: Any) -> str:
        """The chat template's text for ``messages`` (raises whatever the template raises)."""
        return self.hf_tokenizer.apply_chat_template(messages, tokenize=False, chat_template=self.chat_template,
                                                     **kwargs)

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids and character spans, tokenized the way apply_chat_template does (no extra BOS/EOS)."""
        enc = self.backend.encode(text, add_special_tokens=False)
        return list(enc.ids), [tuple(o) for o in enc.offsets]

    @cached_property
    def added_ids(self) -> frozenset[int]:
        """Ids of added (special/control) tokens: the only ids a chat template's markers may use."""
        return frozenset(int(i) for i in self.backend.get_added_tokens_decoder())

    @cached_property
    def backend(self) -> Any:
        """The ``tokenizers.Tokenizer`` (loaded on first use)."""
        return self._load_backend()

    @cached_property
    def token_to_id(self) -> dict[str, int]:
        return self.backend.get_vocab(with_added_tokens=True)

    @property
    def size(self) -> int:
        """One more than the largest id; ids at or above it are unknown."""
        return len(self.known)

    @cached_property
    def known(self) -> np.ndarray:
        """``known[i]`` is True when id ``i`` is a token of this tokenizer (base or added)."""
        ids = np.fromiter(self.token_to_id.values(), dtype=np.int64)
        lut = np.zeros(int(ids.max()) + 1, dtype=bool)
        lut[ids] = True
        return lut

    @cached_property
    def newline_lead(self) -> np.ndarray:
        """Ids whose text is whitespace starting with a newline: how a ChatML header ends.

        A longer one (``"\\n\\n"``) is the header's newline merged by BPE with the
        content's leading whitespace: a boundary token.
        """
        texts = self.backend.decode_batch([[i] for i in range(self.size)], skip_special_tokens=False)
        lut = np.zeros(self.size, dtype=bool)
        for i, text in enumerate(texts):
            if text[:1] == "\n" and text.isspace():
                lut[i] = True
        return lut

    @cached_property
    def token_bytes(self) -> tuple[bytes, np.ndarray] | None:
        """Every id's bytes (flat bytes, offsets) for byte-level BPE tokenizers, else None.

        Decoding a few rows for a failure message or a report must not cost a process
        the 2-3 s of parsing tokenizer.json: for a byte-level tokenizer (Qwen, Llama 3,
        DeepSeek) decoding is joining each token's bytes and reading them as UTF-8, so
        the bytes are cached with the other tables. The table is used only if it decodes
        a sample of random id runs exactly like the tokenizer.
        """
        return _byte_table(self.backend, self.size, self.known)

    def _lookup(self, key: str, compute: Callable[[], int | None]) -> int | None:
        if key not in self._lookups:
            found = compute()
            self._lookups[key] = -1 if found is None else found
            self._grown = True
        value = self._lookups[key]
        return None if value < 0 else value

    def id_of(self, token: str) -> int | None:
        """The id of a token string (added tokens included), or None."""
        return self._lookup("token:" + token, lambda: self.token_to_id.get(token))

    def single_id(self, text: str) -> int | None:
        """The id of ``text`` if it encodes to exactly one token, else None."""
        def compute() -> int | None:
            ids = self.backend.encode(text, add_special_tokens=False).ids
            return ids[0] if len(ids) == 1 else None
        return self._lookup("single:" + text, compute)

    def encode_cached(self, text: str) -> tuple[int, ...]:
        """Ids of ``text`` (special tokens recognised), remembered in the cached tables like single_id."""
        key = "seq:" + text
        if key not in self._lookups:
            self._lookups[key] = list(self.backend.encode(text, add_special_tokens=False).ids)
            self._grown = True
        return tuple(self._lookups[key])

    _grown = False

    def save_tables(self) -> None:
        """Cache the derived tables for the next process (atomic; errors only cost speed)."""
        cache = _tables_cache(self.fingerprint)
        if self._from_cache and cache.path.is_file() and not self._grown:
            return
        table = self.token_bytes
        extra = {} if table is None else {"token_bytes": np.frombuffer(table[0], np.uint8), "token_offsets": table[1]}
        cache.write({"known": self.known, "newline_lead": self.newline_lead,
                     "added": np.array(sorted(self.added_ids), np.int64),
                     "lookups": np.array(json.dumps(self._lookups)), **extra})

    def _decode_run(self, run: list[int]) -> str:
        table = self.token_bytes
        if table is None:
            return self.backend.decode(run, skip_special_tokens=False)
        flat, offsets = table
        return b"".join(flat[offsets[i]:offsets[i + 1]] for i in run).decode("utf-8", errors="replace")

    def decode(self, ids: np.ndarray | list[int]) -> str:
        """Decode known ids; unknown ones show as ``<unk:ID>`` instead of raising."""
        out: list[str] = []
        run: list[int] = []
        for i in (int(x) for x in ids):
            if 0 <= i < self.size and self.known[i]:
                run.append(i)
                continue
            if run:
                out.append(self._decode_run(run))
                run = []
            out.append(f"<unk:{i}>")
        if run:
            out.append(self._decode_run(run))
        return "".join(out)


def _tables_cache(fingerprint: str) -> ArrayCache:
    """The derived tables of one tokenizer file, keyed by its content hash and this module's code."""
    return ArrayCache.keyed("vocab", "tables", (fingerprint,), code=(Path(__file__),))


def _cached_tables(fingerprint: str) -> dict[str, Any] | None:
    z = _tables_cache(fingerprint).read()
    try:
        table = (z["token_bytes"].tobytes(), z["token_offsets"]) if "token_bytes" in z else None
        return {"known": z["known"], "newline_lead": z["newline_lead"], "added": z["added"],
                "lookups": json.loads(str(z["lookups"])), "token_bytes": table}
    except (TypeError, KeyError, ValueError):  # no entry (None), or one written by other code
        return None


def _byte_level_chars() -> dict[str, int]:
    """The byte-level BPE alphabet: the printable character standing for each byte (GPT-2's mapping)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1),
            *range(ord("\u00ae"), ord("\u00ff") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


def _byte_table(backend: Any, size: int, known: np.ndarray, samples: int = 400) -> tuple[bytes, np.ndarray] | None:
    """(flat bytes, offsets) of every id, or None when the tokenizer does not decode byte-level."""
    decoder = json.loads(backend.to_str()).get("decoder") or {}
    if decoder.get("type") != "ByteLevel":
        return None
    chars = _byte_level_chars()
    added = {int(i): t.content for i, t in backend.get_added_tokens_decoder().items()}
    parts: list[bytes] = []
    for i in range(size):
        if i in added:
            parts.append(added[i].encode("utf-8"))
            continue
        token = backend.id_to_token(i) if known[i] else None
        if token is None:
            parts.append(b"")
            continue
        try:
            parts.append(bytes(chars[c] for c in token))
        except KeyError:  # a character outside the byte alphabet: not a plain byte-level vocabulary
            return None
    offsets = np.zeros(size + 1, dtype=np.int64)
    np.cumsum([len(p) for p in parts], out=offsets[1:])
    flat = b"".join(parts)
    # Trust but verify: random runs of ids (partial UTF-8 sequences included) decode exactly as the tokenizer does.
    rng = np.random.default_rng(0)
    ids = np.flatnonzero(known)
    for _ in range(samples):
        run = [int(i) for i in rng.choice(ids, size=int(rng.integers(1, 12)))]
        mine = b"".join(flat[offsets[i]:offsets[i + 1]] for i in run).decode("utf-8", errors="replace")
        if mine != backend.decode(run, skip_special_tokens=False):
            return None
    return flat, offsets


def _from_file(path: Path, name: str) -> Vocabulary:
    from tokenizers import Tokenizer

    raw = path.read_bytes()
    fingerprint = hashlib.sha256(raw).hexdigest()[:16]
    tables = _cached_tables(fingerprint)

    def load() -> Any:
        try:
            return Tokenizer.from_str(raw.decode("utf-8"))
        except Exception as exc:  # tokenizers raises plain Exception subclasses
            raise UsageProblem(f"--tokenizer {name}: {path.name} cannot be loaded ({exc}); "
                               "pass a directory saved by save_pretrained") from None

    backend = None if tables is not None else load()  # no cache: validate the file now
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
    vocab = Vocabulary(name, fingerprint, (lambda: backend) if backend is not None else load,
                       template if isinstance(template, str) else None, tables)
    vocab.hf_source = str(path.parent)
    return vocab


@lru_cache(maxsize=4)
def load_vocabulary(name: str) -> Vocabulary:
    """Load ``builtin:qwen3.6``, a folder holding ``tokenizer.json``, or a model name in the local cache.

    Where the name points is decided by ``tokenizer/source.py: resolve_tokenizer`` from the file
    system alone; the file is then read with ``tokenizers`` (never through a hub lookup).
    """
    source = resolve_tokenizer(name)
    if source.startswith(BUILTIN_PREFIX):
        from .builtin import builtin_tokenizer_dir

        return _from_file(builtin_tokenizer_dir() / "tokenizer.json", name)
    return _from_file(Path(source), name)
