"""Where a template profile comes from: learnt from the tokenizer's own chat template, verified, cached.

- ``probes.py``: every probe set: the conversations a template is rendered on (``PROBES``, the optional
  ones, the ``EVIDENCE`` of relaxations, the generation prompt's contexts, the derivation's sentinels) and
  the variants a template may need them in.
- ``truth.py``: the ground truth of one rendering (which characters are which message's content), found
  from the template's output alone, and labels judged against it (``check_labels``).
- ``builtin.py``: the built-in families (``BUILTINS``, ``ALIASES``), each built from the tokenizer's ids.
- ``derive.py``: a profile learnt from the template by rendering sentinel conversations (cached).
- ``verify.py``: a profile labels every probe rendering exactly as its truth says, or is not used;
  ``tighten`` turns off every relaxation no rendering needs.
- ``relax.py``: the relaxations a profile may carry, by name, and the profile without one.
- ``tags.py``: where the template's ``{% generation %}`` tags put supervision.
- ``resolve.py``: ``--template-profile NAME|auto`` -> the verified profile, its generation prompts and tags,
  cached per tokenizer, template and code (``spans/cache_code.py``), and the :class:`SpanOracle` made of it
  (``make_oracle``).

Every name below is imported on first use (rendering loads transformers).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

#: public name -> the module (relative to this package) that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("AUTO", "RESOLVE_VERSION", "choose_profile", "generation_prompts", "make_oracle",
                     "oracle_for_profile", "profile_names"), ".resolve"),
    **dict.fromkeys(("ALIASES", "BUILTINS", "MissingToken", "available_builtins", "builtin_profile"), ".builtin"),
    **dict.fromkeys(("DerivationFailed", "cached_derivation", "derive_profile"), ".derive"),
    **dict.fromkeys(("EVIDENCE", "OPTIONAL", "PROBES", "PROMPT_CONTEXTS", "SWITCHES"), ".probes"),
    **dict.fromkeys(("ProbeAgreement", "ProbeSet", "ProbesUnavailable", "Tightness", "probe_renderings", "tighten"),
                    ".verify"),
    **dict.fromkeys(("relaxations", "without"), ".relax"),
    **dict.fromkeys(("CharClass", "TemplateRejected", "TruthRender", "TruthUnavailable", "check_labels",
                     "render_truth"), ".truth"),
    **dict.fromkeys(("tag_policy",), ".tags"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name], __name__), name)
