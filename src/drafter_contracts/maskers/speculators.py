"""The ``speculators`` masker: the installed speculators package's own preprocessing code.

Nothing of speculators is re-implemented; this module only calls it the way its
``prepare-data`` would, one conversation per call so a dropped conversation is seen:

* 0.4-0.7: its probe ``_supports_assistant_mask``, then (for tag-free templates)
  ``_detect_assistant_pattern``, then ``_preprocess_batch`` (normalize, render, tokenize,
  mask with ``_get_input_ids_loss_mask``, drop what the template rejects, bound to
  ``max_length``). One row per conversation, every assistant turn supervised.
* 0.8+: ``_preprocess_batch`` with a render endpoint, which builds one row per assistant
  turn through ``_render_boundary_rows`` and speculators' HTTP client. The endpoint is
  :mod:`.render_server`, a local stand-in for vLLM's ``/render`` (a real HTTP server on
  127.0.0.1 rendering with transformers). Only a row's last assistant turn is supervised,
  its end-of-turn token and newline included.

speculators is not a dependency (its pins would replace torch/transformers): it lives in
its own ``pip install --target`` directory (``.ci/install-speculators``), chosen with
``--speculators-path`` or ``$DRAFTER_SPECULATORS_PATH`` and appended to the end of
``sys.path``. One process can hold one speculators version.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import warnings
from contextlib import contextmanager
from collections.abc import Iterator
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import UsageProblem
from . import KnownDefect, Masker

PATH_ENV = "DRAFTER_SPECULATORS_PATH"
_PREPROCESSING = "speculators.data_generation.preprocessing"

#: Genuine defects the properties found in released speculators versions, with the
#: property that shows each and the precondition it needs. The suite expects them, tied to
#: the version: reproduced is an xfail; drawn but not reproduced fails the run (fixed
#: upstream, or too few examples); never drawn is a skip saying so (docs/properties.md).
KNOWN_DEFECTS: dict[str, dict[str, KnownDefect]] = {
    "0.7.0": {
        "test_mask_is_sound": KnownDefect(
            "the regex mask reads decoded text, so the template's assistant header typed inside user text "
            "(e.g. '<|im_start|>assistant\\n', which tokenizes to the real control tokens) makes the rest of that "
            "user message supervised", needs="assistant_header_in_text"),
        "test_invalid_conversation_is_rejected_or_skipped": KnownDefect(
            "_normalize_conversation drops messages with an unknown role (a logged warning), so a conversation "
            "the strict template rejects becomes a row of the remaining turns", needs="unknown_role_rejected"),
    },
    "0.9.0": {
        "test_invalid_conversation_is_rejected_or_skipped": KnownDefect(
            "_normalize_conversation maps an unknown role to 'assistant' (meant for model-named on-policy turns), "
            "so a conversation the strict template rejects becomes rows in which that message is an assistant "
            "turn (supervised whenever it has context before it)", needs="unknown_role_rejected"),
    },
}


def default_path() -> Path:
    explicit = os.environ.get(PATH_ENV)
    if explicit:
        return Path(explicit).expanduser()
    return Path(__file__).resolve().parents[3] / ".deps" / "speculators-0.7.0"


def load(path: Path | None = None) -> tuple[ModuleType, str]:
    """speculators' preprocessing module and version, from ``path``; UsageProblem when absent."""
    target = (path or default_path()).expanduser().resolve()
    if not (target / "speculators").is_dir():
        raise UsageProblem(f"--masker=speculators: no speculators package in {target}; install one with "
                           f".ci/install-speculators {target} (or pass --speculators-path DIR)")
    if str(target) not in sys.path:
        sys.path.append(str(target))
    try:
        with warnings.catch_warnings():  # torch.jit deprecation noise from speculators' model imports
            warnings.simplefilter("ignore", DeprecationWarning)
            module = import_module(_PREPROCESSING)
        found = version("speculators")
    except (ImportError, PackageNotFoundError) as exc:
        raise UsageProblem(f"--masker=speculators: cannot import {_PREPROCESSING} from {target} ({exc}); "
                           "reinstall it with .ci/install-speculators") from None
    loaded_from = Path(module.__file__).resolve()
    if target not in loaded_from.parents:
        raise UsageProblem(f"--masker=speculators: speculators {found} is already importable from "
                           f"{loaded_from.parents[2]}; it shadows {target}: uninstall it or use that directory")
    return module, found


class _Kept(logging.Handler):
    """Keeps speculators' log lines of one call: why it dropped a conversation is only logged."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextmanager
def _quiet(last: list[str]) -> Iterator[None]:
    """speculators logs a warning per dropped turn or conversation; thousands of examples would bury a failure."""
    logger = logging.getLogger(_PREPROCESSING)
    handler, propagate = _Kept(), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
        last[:] = handler.lines


def _minor(found: str) -> tuple[int, int]:
    major, minor = (int(p) for p in found.split(".")[:2])
    return major, minor


def make_speculators_masker(path: Path | None = None) -> Masker:
    pre, found = load(path)
    defects = KNOWN_DEFECTS.get(found, {})
    if _minor(found) >= (0, 8):
        return _boundary_masker(pre, found, defects)
    return _regex_era_masker(pre, found, defects)


def _regex_era_masker(pre: ModuleType, found: str, defects: dict[str, KnownDefect]) -> Masker:
    patterns: dict[int, str | None] = {}

    def mask_path(tokenizer: Any) -> str | None:
        """``None``: transformers' assistant mask; else speculators' detected regex (its own order)."""
        key = id(tokenizer)
        if key not in patterns:
            patterns[key] = (None if pre._supports_assistant_mask(tokenizer)
                             else str(pre._detect_assistant_pattern(tokenizer)))
        return patterns[key]

    def speculators_masker(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, tokenizer: Any,
                           max_length: int) -> tuple[Any, Any] | None:
        batch = {"conversations": [messages], "tools": [tools]}
        pattern = mask_path(tokenizer)
        with _quiet(speculators_masker.logged):
            out = pre._preprocess_batch(batch, tokenizer, max_length, pattern)
        if not out["input_ids"]:
            return None  # speculators dropped it (it logs the reason)
        return out["input_ids"][0], out["loss_mask"][0]

    def turn_opener(tokenizer: Any) -> str | None:
        """The literal text speculators' detected regex opens an assistant span on (its role marker)."""
        pattern = mask_path(tokenizer)
        if pattern is None:
            return None
        return re.sub(r"\\(.)", r"\1", pattern.split("((?:", 1)[0], flags=re.DOTALL)

    speculators_masker.logged = []  # type: ignore[attr-defined]  # what speculators logged on the last call
    return Masker(name="speculators", fn=speculators_masker, version=f"speculators {found}",
                  probe=lambda tok: bool(pre._supports_assistant_mask(tok)), known_defects=defects,
                  convention="speculators-regex", turn_opener=turn_opener)


def _boundary_masker(pre: ModuleType, found: str, defects: dict[str, KnownDefect]) -> Masker:
    from .render_server import RenderServer

    servers: dict[int, RenderServer] = {}

    def endpoint(tokenizer: Any) -> str:
        key = id(tokenizer)
        if key not in servers:
            servers[key] = RenderServer(tokenizer).start()
        return servers[key].endpoint

    def speculators_masker(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, tokenizer: Any,
                           max_length: int) -> list[tuple[Any, Any]] | None:
        batch = {"conversations": [messages], "tools": [tools]}
        url = endpoint(tokenizer)
        with _quiet(speculators_masker.logged):
            out = pre._preprocess_batch(batch, False, url, max_length)
        rows = list(zip(out["input_ids"], out["loss_mask"]))
        return rows or None

    speculators_masker.logged = []  # type: ignore[attr-defined]

    return Masker(name="speculators", fn=speculators_masker, version=f"speculators {found}", turns="last",
                  known_defects=defects, convention="speculators-per-turn")
