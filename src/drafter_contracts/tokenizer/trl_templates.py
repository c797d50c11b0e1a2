"""Vendors' chat templates as an installed trl ships them (``trl/chat_templates/*.jinja``), read as files.

trl is not a requirement of the package (the ``demo`` extra brings it): ``builtin:qwen3.6`` takes
Qwen3.6's template from it, and ``--masker=hf`` takes the generation-tagged ``_training`` copy TRL
keeps beside a vendor's template. trl is located with ``importlib.util.find_spec`` and never
imported: importing it pulls torch and accelerate, which a check does not need.
"""

from __future__ import annotations

from pathlib import Path

#: Where the ``demo`` extra brings trl from (the first release whose wheel ships ``qwen3_6.jinja``).
DEMO_EXTRA = "pip install 'drafter-contracts[demo]'"


def trl_templates_dir() -> Path | None:
    """``trl/chat_templates`` of an installed trl, found without importing trl (its import pulls torch)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("trl")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        folder = Path(location) / "chat_templates"
        if folder.is_dir():
            return folder
    return None


def vendor_template(name: str) -> str:
    """A vendor's chat template as TRL ships it (``trl/chat_templates/NAME.jinja``), read from the installed wheel.

    Raises :class:`~drafter_contracts.errors.UsageProblem` (one line, exit 4) when trl is missing or
    its release does not ship the template.
    """
    from ..errors import UsageProblem

    folder = trl_templates_dir()
    if folder is None:
        raise UsageProblem(f"chat template {name}: read from trl's wheel, and trl is not installed: {DEMO_EXTRA}")
    path = folder / f"{name}.jinja"
    if not path.is_file():
        raise UsageProblem(f"chat template {name}: the installed trl ({folder.parent}) ships no {name}.jinja; "
                           f"{DEMO_EXTRA} (trl>=1.3)")
    return path.read_text("utf-8")


def training_variant(template: str | None) -> str | None:
    """TRL's generation-tagged ``NAME_training.jinja`` for a template that is exactly TRL's ``NAME.jinja``.

    None when trl is not installed, the template is none of TRL's, or TRL keeps no tagged copy of it.
    """
    folder = trl_templates_dir()
    if folder is None or not template:
        return None
    for path in sorted(folder.glob("*.jinja")):
        if path.stem.endswith("_training"):
            continue
        tagged = path.with_name(f"{path.stem}_training.jinja")
        if tagged.is_file() and path.read_text("utf-8") == template:
            return tagged.read_text("utf-8")
    return None
