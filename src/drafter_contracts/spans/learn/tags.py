"""Where a template's ``{% generation %}`` tags put supervision, learnt from its own masks.

The ``generation-tags`` producer convention (transformers' ``return_assistant_tokens_mask``,
TRL's ``assistant_only_loss``) supervises what the tags enclose; which roles that is depends on
where a template sets them, so it is read off the template's renderings of the probe
conversations and cached with the resolved profile (``resolve.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import UsageProblem
from ..labels import ROLE_NAMES, Role
from .probes import PROBES, string_args


def tag_policy(oracle: Any, vocab: Any) -> tuple[dict[str, Any], str] | None:
    """Where the tokenizer's ``{% generation %}`` tags put supervision, per role, from its own masks.

    Each probe conversation is rendered with transformers' ``return_assistant_tokens_mask``
    and labelled by the span oracle. A role whose tokens are always inside the tags is
    supervised, never: not, sometimes: optional. None when the template has no tags. A
    template whose tags enclose user, system or tool text is refused: its masks leak by design.
    """
    template = vocab.chat_template or ""
    if "generation" not in template or "endgeneration" not in template:
        return None
    tok = vocab.hf_tokenizer
    seen = np.zeros(256, dtype=np.int64)
    sup = np.zeros(256, dtype=np.int64)
    rendered = 0
    for name, (messages, tools) in PROBES.items():
        for msgs in (messages, string_args(messages)):
            try:
                out = tok.apply_chat_template(msgs, tools=tools, chat_template=template, tokenize=True,
                                              return_dict=True, return_assistant_tokens_mask=True)
            except Exception:  # a probe the template rejects says nothing about its tags
                continue
            ids = np.asarray(out["input_ids"], dtype=np.int64)
            mask = np.asarray(out["assistant_masks"], dtype=bool)
            labels = oracle.label_row(ids, 1 << 30)
            ok = ~labels.boundary
            np.add.at(seen, labels.role[ok], 1)
            np.add.at(sup, labels.role[ok & mask], 1)
            rendered += 1
            break
    if not rendered:
        return None
    leaks = [Role(r) for r in (Role.SYSTEM, Role.USER, Role.TOOL, Role.HEADER) if sup[r]]
    if leaks:
        raise UsageProblem(f"--tokenizer {vocab.name}: its chat template's generation tags enclose "
                           f"{', '.join(ROLE_NAMES[r] for r in leaks)} tokens, so masks made with them supervise "
                           "context; fix the template's {% generation %} tags, or declare the contract's [mask] "
                           "keys yourself")
    keys: dict[str, Any] = {}
    optional: list[str] = []
    for key, role in (("content", Role.ASSISTANT), ("tool_calls", Role.TOOL_CALL), ("end_of_turn", Role.ASSISTANT_END),
                      ("newline_after_end", Role.AFTER_ASSISTANT_END), ("header", Role.ASSISTANT_HEADER),
                      ("reasoning", Role.REASONING)):
        if not seen[role]:
            continue
        frac = sup[role] / seen[role]
        value = frac > 0
        if key == "reasoning":
            keys["reasoning_final"] = keys["reasoning_earlier"] = value
        else:
            keys[key] = value
        if 0 < frac < 1:
            optional.append(key)
    keys["optional"] = tuple(optional)
    shown = ", ".join(f"{k} = {str(v).lower()}" for k, v in keys.items() if k != "optional")
    note = f"from the template's generation tags ({rendered} probe renderings): {shown}"
    if optional:
        note += f"; optional: {', '.join(optional)}"
    return keys, note
