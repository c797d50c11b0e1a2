"""Token-level role labels: which template role each token of a row is, and the assistant turns they form.

The flow is labels -> turns -> oracle:

- ``labels.py``: the codes (:class:`Role`, :class:`TurnProblem`) and a shard's per-token
  :class:`Labels` (role, boundary, problem); checks and explanations only ever see these.
- ``turns.py``: the assistant turns read off the roles alone (:func:`assistant_turns`,
  :func:`turns_of`) and the :class:`MaskFacts` the mask rules read.
- ``oracle.py``: the :class:`SpanOracle`, a verified template profile and the one door to labelling
  with it, with the :class:`Verification` record of how it was checked; :func:`make_oracle` builds it
  for ``--template-profile NAME|auto``.

How a template is written down and labelled:

- ``profile.py``: a template family as token ids (:class:`TemplateProfile`) and its compiled tables.
- ``labeller.py``: the one entry point of labelling; ``generic.py`` is its numpy statement,
  ``kernel.py`` its compiled form (``kernels/_labeller.c``).
- ``prefix.py``: where two renderings (or token runs) diverge.
- ``excerpt.py``: a row decoded with its mask, roles and offending tokens marked.

``learn/``: where a profile comes from, learnt from the tokenizer's own chat template (built-in families,
derivation, the probe conversations, the ground truth of a rendering, verification, relaxations, the
generation tags, and the choice ``make_oracle`` caches); its ``__init__`` maps it. ``cache_code.py`` lists
the files the cached choice is keyed by.

Importing this package loads nothing: every name below is imported on first use, so the option parser
and the layers below may name it freely.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names as type checkers see them; at run time __getattr__ imports each on first use
    from .labels import ASSISTANT_PARTS, ROLE_NAMES, TURN_PROBLEM_TEXT, Labels, Role, TurnProblem
    from .learn.resolve import AUTO, make_oracle, oracle_for_profile, profile_names
    from .oracle import LearntTags, SpanOracle, Verification
    from .turns import IS_TURN, AssistantTurns, MaskFacts, assistant_turns, turns_of

#: public name -> the module (relative to this package) that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("ASSISTANT_PARTS", "Labels", "ROLE_NAMES", "Role", "TURN_PROBLEM_TEXT", "TurnProblem"), ".labels"),
    **dict.fromkeys(("AssistantTurns", "IS_TURN", "MaskFacts", "assistant_turns", "turns_of"), ".turns"),
    **dict.fromkeys(("LearntTags", "SpanOracle", "Verification"), ".oracle"),
    **dict.fromkeys(("AUTO", "make_oracle", "oracle_for_profile", "profile_names"), ".learn.resolve"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name], __name__), name)
