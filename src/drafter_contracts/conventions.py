"""Producer conventions: which tokens a producer supervises, as mask policies, some learnt from the template.

A contract's ``[mask] convention`` names one of them; the keys it sets are the
convention's, and keys the contract writes out win. What a convention supervises can
depend on the template, and is then derived from it, never assumed:

- ``speculators-regex`` (speculators 0.4-0.7): assistant content, the reasoning blocks
  the template keeps and tool calls, in every assistant turn; not the header, not the
  end token, not what follows it.
- ``generation-tags`` (transformers' ``return_assistant_tokens_mask``, TRL's SFT
  ``assistant_only_loss``): what the template's ``{% generation %}`` tags enclose. Where
  the tags sit (around the header? the end token? the newline after it?) is read from
  the template's own masks of the probe conversations, per role.
- ``speculators-per-turn`` (speculators 0.8+): one row per assistant turn; the row's
  last turn is supervised from where the template's generation prompt stops matching it,
  through its end token and newline; earlier turns are context.
- ``specforge`` (SpecForge 0.2): every assistant turn from after its header through the
  end token and its newline; ``specforge-no-think`` (its qwen3-instruct configuration)
  also keeps the empty reasoning block of a non-thinking prompt as context.

``auto`` infers the convention from the data: each candidate's mask rules run on the
first rows, and the one they fit is used (the summary says which and why).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from .config import Contract, MaskPolicy
from .errors import UsageProblem

#: Preset keys of each built-in convention (on top of MaskPolicy's defaults).
PRESETS: dict[str, dict[str, Any]] = {
    "speculators-regex": dict(content=True, reasoning_final=True, reasoning_earlier=True, tool_calls=True,
                              end_of_turn=False, newline_after_end=False, header=False, turns="all",
                              completeness="all"),
    "generation-tags": dict(content=True, reasoning_final=True, reasoning_earlier=True, tool_calls=True,
                            end_of_turn=True, newline_after_end=False, header=False, turns="all", completeness="all"),
    "speculators-per-turn": dict(content=True, reasoning_final=True, reasoning_earlier=True, tool_calls=True,
                                 end_of_turn=True, newline_after_end=True, header=False, turns="last",
                                 completeness="last", prompt_context="last"),
    "specforge": dict(content=True, reasoning_final=True, reasoning_earlier=True, tool_calls=True, end_of_turn=True,
                      newline_after_end=True, header=False, turns="all", completeness="all"),
    "specforge-no-think": dict(content=True, reasoning_final=True, reasoning_earlier=True, tool_calls=True,
                               end_of_turn=True, newline_after_end=True, header=False, turns="all",
                               completeness="all", empty_reasoning="context"),
}
#: The order ``auto`` tries them in (the first that fits the data wins).
AUTO_ORDER = ("speculators-regex", "generation-tags", "speculators-per-turn", "specforge", "specforge-no-think")
#: What each convention is, for the summary and hints.
DESCRIPTION = {
    "speculators-regex": "speculators 0.4-0.7: assistant content, reasoning and tool calls; no header or end token",
    "generation-tags": "generation-tag masks: what the template's {% generation %} tags enclose",
    "speculators-per-turn": "speculators 0.8+: one row per assistant turn, from the end of the generation prompt "
                            "through the end token and newline",
    "specforge": "SpecForge: every assistant turn after its header, through the end token and newline",
    "specforge-no-think": "SpecForge (qwen3-instruct): as specforge, the empty reasoning block is context",
}


@dataclass
class Decision:
    """The policy a contract resolves to, and one line saying how."""

    policy: MaskPolicy
    how: str
    details: dict[str, Any] = dataclasses.field(default_factory=dict)


def _apply(base: MaskPolicy, keys: dict[str, Any], explicit: frozenset[str]) -> MaskPolicy:
    """The convention's keys over MaskPolicy's defaults, under the keys the contract or the command line
    set explicitly (taken from ``base``)."""
    fresh = dataclasses.replace(MaskPolicy(), **keys)
    return dataclasses.replace(fresh, **{k: getattr(base, k) for k in explicit if k != "convention"},
                               convention=base.convention)


def tag_policy(oracle: Any, vocab: Any) -> tuple[dict[str, Any], str] | None:
    """Where the tokenizer's ``{% generation %}`` tags put supervision, per role, from its own masks.

    Each probe conversation is rendered with transformers' ``return_assistant_tokens_mask``
    and labelled by the span oracle. A role whose tokens are always inside the tags is
    supervised, never: not, sometimes: optional. None when the template has no tags. A
    template whose tags enclose user, system or tool text is refused: its masks leak by design.
    """
    from .spans.labels import ROLE_NAMES, Role
    from .spans.verify import PROBES, _string_args

    template = vocab.chat_template or ""
    if "generation" not in template or "endgeneration" not in template:
        return None
    tok = vocab.hf_tokenizer
    seen = np.zeros(256, dtype=np.int64)
    sup = np.zeros(256, dtype=np.int64)
    rendered = 0
    for name, (messages, tools) in PROBES.items():
        for msgs in (messages, _string_args(messages)):
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
                           f"{', '.join(ROLE_NAMES[r] for r in leaks)} tokens, so masks made with them supervise context; "
                           "fix the template's {% generation %} tags, or declare the contract's [mask] keys yourself")
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


def resolve(contract: Contract, oracle: Any, vocab: Any, explicit: frozenset[str] = frozenset(),
            sample: Any = None) -> Decision:
    """The contract's mask policy with its convention applied.

    ``explicit`` are the [mask] keys the contract file or the command line wrote (they win over a
    convention's presets). ``sample`` (a callable returning (view, labels) of the first rows) is what
    ``auto`` infers from.
    """
    policy = contract.mask
    name = policy.convention
    if name == "custom":
        return Decision(policy, "the contract's [mask] keys (convention = custom)")
    if name == "auto":
        if sample is None:
            raise UsageProblem("[mask] convention = \"auto\" needs the dataset's first rows and a tokenizer; "
                               "pass --tokenizer or name the convention")
        return infer(contract, oracle, vocab, explicit, sample)
    keys = dict(PRESETS[name])  # load_contract applied them already; re-applied here for callers that did not
    how = DESCRIPTION[name]
    details: dict[str, Any] = {}
    if name == "generation-tags" and oracle is not None:
        learnt = oracle.verification.get("tags")  # learnt with the profile, cached with it (spans/resolve.py)
        if learnt and "error" in learnt:
            raise UsageProblem(learnt["error"])
        if learnt:
            keys.update({k: (tuple(v) if isinstance(v, list) else v) for k, v in learnt["keys"].items()})
            how += "; " + learnt["note"]
            details["tags"] = learnt["note"]
        else:
            how += "; the tokenizer's template has no generation tags, so the preset keys apply"
    return Decision(_apply(policy, keys, explicit), how, details)


def prompts_in_use(view: Any, labels: Any, facts: Any, policy: MaskPolicy) -> tuple[tuple[int, ...], ...] | None:
    """The generation prompts the data's producer rendered, among those the template can render.

    A template's prompt differs with ``enable_thinking`` and after a tool message; a producer
    renders one per conversation. For each sample row, the prompt whose context ends exactly
    where the row's last turn starts being supervised explains the row; the fewest prompts
    that explain every explained row are the ones the checks then hold the data to (tokens
    one of them holds and another does not may go either way only when the data uses both).
    None when no sample row is explained (then every prompt is kept, and the checks say why).
    """
    from .checks import policy as pol

    prompts = facts.prompts
    if policy.prompt_context == "off" or len(prompts) < 2 or view.mask is None or not len(view.ids):
        return None
    turns = pol.turns_of(labels, view.offsets, facts.joins_blocks)
    sel = np.flatnonzero(turns.is_last_turn)
    if not len(sel):
        return None
    ends = turns.ends[sel]
    # first supervised position of each selected turn's range, from its header start
    hs = pol.header_starts(labels.role, view.offsets, turns)[sel]
    prefix = view.supervised_prefix
    first = np.full(len(sel), -1, dtype=np.int64)
    sup_pos = np.flatnonzero(view.mask)
    k = np.searchsorted(sup_pos, hs)
    has = (k < len(sup_pos))
    first[has] = sup_pos[np.minimum(k[has], len(sup_pos) - 1)]
    has &= (first <= ends) & (prefix[ends + 1] - prefix[hs] > 0)
    explains = []
    for prompt in prompts:
        one = pol.MaskFacts(facts.ids, facts.newline_lead, (prompt,), facts.joins_blocks)
        _, _, lo, _ = pol.prompt_windows(one, view.offsets, labels, turns, "last")
        explains.append(has & (first == lo))
    explains = np.array(explains)
    if not explains.any():
        return None
    chosen: list[int] = []
    left = explains.any(axis=0)
    while left.any():
        best = int(np.argmax((explains & left).sum(axis=1)))
        chosen.append(best)
        left &= ~explains[best]
    return tuple(prompts[i] for i in sorted(chosen))


def _violations(view: Any, labels: Any, facts: Any, contract: Contract, policy: MaskPolicy) -> int:
    """Rows of the sample the policy's two mask rules reject (each rule's count, summed)."""
    from .checks import spans
    from .dataset import Shard, ShardArrays

    c = dataclasses.replace(contract, mask=policy)
    arrays = ShardArrays(Shard(0, 0, len(view.rows)), None, None, None, None)
    total = 0
    for fn in (spans.check_mask_on_assistant_spans, spans.check_mask_covers_assistant_spans):
        r = fn(view, arrays, labels, c, facts)
        if not r.skipped:
            total += r.rows_violating
    return total


def candidates(contract: Contract, oracle: Any, vocab: Any, explicit: frozenset[str]) -> dict[str, Decision]:
    out = {}
    for name in AUTO_ORDER:
        c = dataclasses.replace(contract, mask=dataclasses.replace(contract.mask, convention=name))
        try:
            out[name] = resolve(c, oracle, vocab, explicit)
        except UsageProblem:
            continue
    return out


def fitting(view: Any, labels: Any, facts: Any, contract: Contract, oracle: Any, vocab: Any,
            explicit: frozenset[str] = frozenset()) -> list[tuple[str, int]]:
    """(convention, violating rows) of every built-in convention on these rows, fewest first."""
    scored = []
    for name, decision in candidates(contract, oracle, vocab, explicit).items():
        scored.append((name, _violations(view, labels, facts, contract, decision.policy)))
    return sorted(scored, key=lambda t: (t[1], AUTO_ORDER.index(t[0])))


def infer(contract: Contract, oracle: Any, vocab: Any, explicit: frozenset[str], sample: Any) -> Decision:
    """The built-in convention the first rows fit (their mask rules reject none of them)."""
    view, labels, facts = sample()
    rows = len(view.rows)
    if rows == 0 or view.mask is None:
        d = resolve(dataclasses.replace(contract, mask=dataclasses.replace(contract.mask, convention="speculators-regex")),
                    oracle, vocab, explicit)
        return Decision(d.policy, "convention = auto, but the first rows hold no mask to infer from; "
                        "speculators-regex applies", {"inferred": "speculators-regex", "rows": rows})
    decisions = candidates(contract, oracle, vocab, explicit)
    scored = []
    for name, decision in decisions.items():
        scored.append((_violations(view, labels, facts, contract, decision.policy), AUTO_ORDER.index(name), name))
    scored.sort()
    n, _, best = scored[0]
    table = ", ".join(f"{name} {k:,}" for k, _, name in scored)
    if n == 0:
        fits = [name for k, _, name in scored if k == 0]
        how = (f"convention = auto: {best} ({DESCRIPTION[best]}) fits the first {rows:,} rows"
               + (f" (so do {', '.join(fits[1:])}; {best} comes first)" if len(fits) > 1 else "")
               + f"; rows each convention rejects: {table}")
    else:
        how = (f"convention = auto: no built-in convention fits the first {rows:,} rows; the closest is {best} "
               f"({n:,} rows rejected); rows each convention rejects: {table}")
    d = decisions[best]
    return Decision(d.policy, how + ("; " + d.how if d.details else ""),
                    {"inferred": best, "rows": rows, "rejected": {name: k for k, _, name in scored}})
