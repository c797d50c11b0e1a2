"""``--masker`` values to :class:`Masker` objects: ``hf``, ``speculators`` or ``module:function``."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from ..errors import UsageProblem
from . import Masker, from_callable


def _import_target(module_part: str) -> Any:
    """A dotted module name, or a path to a ``.py`` file (so a patched script can be pointed at)."""
    if module_part.endswith(".py") or "/" in module_part:
        path = Path(module_part).expanduser().resolve()
        if not path.is_file():
            raise UsageProblem(f"--masker {module_part}:…: no such file; "
                               "pass module:function or path/to/file.py:function")
        name = f"drafter_contracts_user_masker_{abs(hash(str(path)))}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise UsageProblem(f"--masker {module_part}: cannot be imported as a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(module_part)
    except ImportError as exc:
        raise UsageProblem(f"--masker {module_part}:…: cannot import module {module_part!r} ({exc}); "
                           "is it on PYTHONPATH?") from None


def load_masker(spec: str, tokenizer: Any, *, chat_template: str | None = None,
                speculators_path: str | None = None) -> Masker:
    """Resolve ``spec``; every problem is a one-line UsageProblem."""
    if spec == "hf":
        from .hf import make_hf_masker

        return make_hf_masker(tokenizer, chat_template)
    if spec == "speculators":
        from .speculators import make_speculators_masker

        return make_speculators_masker(Path(speculators_path) if speculators_path else None)
    module_part, sep, func = spec.rpartition(":")
    if not sep or not module_part or not func:
        raise UsageProblem(f"--masker {spec}: expected hf, speculators or module:function "
                           "(f(conversation, tools, tokenizer, max_length) -> (input_ids, loss_mask))")
    fn = getattr(_import_target(module_part), func, None)
    if not callable(fn):
        raise UsageProblem(f"--masker {spec}: {module_part} has no function {func!r}")
    return from_callable(spec, fn)
