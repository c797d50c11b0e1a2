"""The mask policy applied to role labels: which tokens may be supervised, and which must be.

Turn structure comes from the role array alone, so any labeller that keeps the
shared conventions (a header is ``Role.HEADER``; an assistant body is ASSISTANT /
REASONING / TOOL_CALL; then ASSISTANT_END and AFTER_ASSISTANT_END) gets per-turn
policies for free. An assistant turn is a run of assistant-turn roles: runs are
broken by headers, other roles and row starts. Everything is vectorized over the
shard: one comparison of neighbours finds the turn edges, and turns are kept at the
turn level (starts, ends, row, last-in-row); per-token turn arrays are built only
when a policy needs them (reasoning split by turn, ``turns``/``completeness`` =
"last"), and a failing check reads turn facts at its failing positions only.

The two rules the mask contracts (``checks/spans.py``) and the fitting of a convention (``fit.py``,
``learn.py``) apply alike: :func:`disallowed_supervision` (supervised where the policy forbids) and
:func:`required_tokens` (must be supervised). :func:`prompts_in_use` reads off sample rows which
generation prompts their producer rendered (the engine holds per-turn rows to those).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dataset.row_view import in_table
from ..spans.labels import Labels, Role
from ..spans.turns import IS_TURN, AssistantTurns, MaskFacts, turns_of
from .mask_policy import MaskPolicy


#: Roles some policy may allow: the turn roles and the assistant header; the others never carry loss.
ALLOWABLE_ROLES = IS_TURN.copy()
ALLOWABLE_ROLES[Role.ASSISTANT_HEADER] = True


def in_ranges(n: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Bool per token: inside one of the half-open ranges [lo, hi)."""
    ok = hi > lo
    delta = np.zeros(n + 1, dtype=np.int32)
    np.add.at(delta, lo[ok], 1)
    np.add.at(delta, hi[ok], -1)
    return np.cumsum(delta[:-1]) > 0


def header_starts(role: np.ndarray, offsets: np.ndarray, turns: AssistantTurns) -> np.ndarray:
    """Per turn, where its assistant header starts (the turn's own start when no header precedes it)."""
    s = turns.starts
    if len(s) == 0:
        return s
    ah = role == Role.ASSISTANT_HEADER
    first = ah.copy()
    first[1:] &= ~ah[:-1]
    first[offsets[:-1][np.diff(offsets) > 0]] |= ah[offsets[:-1][np.diff(offsets) > 0]]
    run_starts = np.flatnonzero(first)
    before = s - 1
    has = (before >= 0) & (turns.row_of_turn == np.searchsorted(offsets, np.maximum(before, 0), side="right") - 1)
    has &= ah[np.maximum(before, 0)]
    k = np.searchsorted(run_starts, before, side="right") - 1
    return np.where(has & (k >= 0), run_starts[np.maximum(k, 0)], s)


def prompt_windows(facts: MaskFacts, offsets: np.ndarray, labels: Labels, turns: AssistantTurns, which: str
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For the selected turns (the last of each row, or all): header start, and where the context the
    generation prompts hold ends, for the prompt that matches least and the one that matches most.

    A prompt matches the row's tokens from the header start for as long as they agree (the rule a
    per-turn producer applies: supervision starts where the prompt's ids and the turn's ids part).
    Returns (turn index, header start, shortest context end, longest context end).
    """
    sel = np.flatnonzero(turns.is_last_turn) if which == "last" else np.arange(len(turns.starts))
    hs = header_starts(labels.role, offsets, turns)[sel]
    row_end = offsets[turns.row_of_turn[sel] + 1]
    after_tool = follows_tool_output(labels.role, offsets[turns.row_of_turn[sel]], hs) if () in facts.prompts else None
    ids = facts.ids
    n = len(ids)
    big = np.iinfo(np.int64).max
    kmin = np.full(len(sel), big, dtype=np.int64)
    kmax = np.zeros(len(sel), dtype=np.int64)
    for prompt in facts.prompts or ((),):
        alive = np.ones(len(sel), dtype=bool)
        k = np.zeros(len(sel), dtype=np.int64)
        for j, tok in enumerate(prompt):
            q = hs + j
            alive &= (q < row_end) & (ids[np.minimum(q, max(n - 1, 0))] == tok)
            k += alive
        # The shortest context counts only prompts that fit this turn at all: a turn after a user
        # message opens with the header a tool continuation's empty prompt does not have. The empty
        # prompt fits a turn that follows tool output (Gemma 4 keeps the model turn open over a tool
        # response, so the prompt adds nothing and a re-opened header is generated, hence supervised).
        fits = k > 0 if after_tool is None or prompt else after_tool
        kmin = np.where(fits, np.minimum(kmin, k), kmin)
        kmax = np.maximum(kmax, k)
    kmin = np.where(kmin == big, 0, kmin)
    return sel, hs, hs + kmin, hs + kmax


#: Roles of message text (not scaffold): what a turn's header follows.
_CONTENT_ROLES = np.array([Role.SYSTEM, Role.USER, Role.TOOL, Role.ASSISTANT, Role.REASONING, Role.TOOL_CALL])


def follows_tool_output(role: np.ndarray, row_starts: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Bool per position in ``at``: the last message text before it in its row is tool output.

    This is the context a template renders its generation prompt in after a tool message, which
    can differ from the prompt after a user message (empty, where the tool response sits inside
    the model turn).
    """
    text = np.flatnonzero(np.isin(role, _CONTENT_ROLES))
    k = np.searchsorted(text, at) - 1
    prev = text[np.maximum(k, 0)] if len(text) else np.zeros(len(at), dtype=np.int64)
    return (k >= 0) & (prev >= row_starts) & (role[prev] == Role.TOOL) if len(text) else np.zeros(len(at), dtype=bool)


def empty_reasoning_tokens(facts: MaskFacts, labels: Labels) -> np.ndarray:
    """Bool per token: an empty reasoning block (its markers and whitespace only) and the whitespace after it."""
    role, n = labels.role, len(labels.role)
    lead = facts.newline_lead
    ids = facts.ids
    reasoning = role == Role.REASONING
    if not reasoning.any() or lead is None:
        return np.zeros(n, dtype=bool)
    safe = np.clip(ids, 0, len(lead) - 1)
    blank = lead[safe] & (ids >= 0) & (ids < len(lead))
    start = reasoning.copy()
    start[1:] &= ~reasoning[:-1]
    end = reasoning.copy()
    end[:-1] &= ~reasoning[1:]
    s_pos, e_pos = np.flatnonzero(start), np.flatnonzero(end)
    # a block is empty when only its first and last tokens (the markers) are not whitespace
    nonblank = np.concatenate(([0], np.cumsum(~blank, dtype=np.int64)))
    inner = nonblank[e_pos] - nonblank[s_pos + 1]  # non-whitespace strictly inside
    empty = (e_pos > s_pos) & (inner <= 0)
    # and the whitespace right after the block, up to the next other token
    after_end = e_pos[empty] + 1
    nb = np.flatnonzero(~blank | (role != Role.ASSISTANT))
    stop = (nb[np.minimum(np.searchsorted(nb, after_end), max(len(nb) - 1, 0))] if len(nb)
            else np.full(len(after_end), n))
    stop = np.where(np.searchsorted(nb, after_end) < len(nb), stop, n)
    return in_ranges(n, np.concatenate((s_pos[empty], after_end)), np.concatenate((e_pos[empty] + 1, stop)))


def _blank_assistant(facts: MaskFacts, labels: Labels) -> np.ndarray | None:
    """Bool per token: assistant content that is whitespace with a newline (the tokenizer's newline table)."""
    lead, ids = facts.newline_lead, facts.ids
    if lead is None:
        return None
    blank = lead[np.clip(ids, 0, len(lead) - 1)] & (ids >= 0) & (ids < len(lead))
    return blank & (labels.role == Role.ASSISTANT)


def _edge_runs(like: np.ndarray, block: np.ndarray, offsets: np.ndarray | None, after: bool) -> np.ndarray:
    """Bool per token: the runs of ``like`` tokens right after each run of ``block`` ends (``after``), or right
    before each starts, within one row."""
    n = len(like)
    step = block[:-1] & ~block[1:] if after else ~block[:-1] & block[1:]
    edge = np.flatnonzero(step) + 1  # after: the first token after a block; before: a block's first token
    row = np.searchsorted(offsets, edge, side="right") - 1 if offsets is not None else np.zeros(len(edge), np.int64)
    lo_row = offsets[row] if offsets is not None else np.zeros(len(edge), np.int64)
    hi_row = offsets[row + 1] if offsets is not None else np.full(len(edge), n)
    edge_in = edge if after else edge - 1  # the token next to the block on the run's side
    keep = like[edge_in] & (edge != lo_row)  # a block that opens or ends a row has nothing beside it in the row
    edge, lo_row, hi_row = edge[keep], lo_row[keep], hi_row[keep]
    stop_at = np.flatnonzero(~like)  # a run ends at the nearest token that is not ``like``
    if after:
        k = np.searchsorted(stop_at, edge)
        stop = np.full(len(edge), n, dtype=np.int64)
        has = k < len(stop_at)
        stop[has] = stop_at[k[has]]
        return in_ranges(n, edge, np.minimum(stop, hi_row))
    k = np.searchsorted(stop_at, edge) - 1
    first = np.zeros(len(edge), dtype=np.int64)
    has = k >= 0
    first[has] = stop_at[k[has]] + 1
    return in_ranges(n, np.maximum(first, lo_row), edge)


def separator_tokens(facts: MaskFacts, labels: Labels, offsets: np.ndarray | None = None) -> np.ndarray:
    """Bool per token: the reasoning separator, the whitespace between a reasoning block's end and the reply.

    The run of whitespace tokens (the tokenizer's newline table) labelled assistant content that
    starts right after the last token of a reasoning block (``</think>`` then ``\\n\\n``), in the same
    row. The span oracle calls it content; producers that locate the reply text alone leave it out
    (``reasoning_separator``). After an empty block it is also what ``empty_reasoning`` governs.
    """
    blank = _blank_assistant(facts, labels)
    reasoning = labels.role == Role.REASONING
    if blank is None or not reasoning.any():
        return np.zeros(len(labels.role), dtype=bool)
    return _edge_runs(blank, reasoning, offsets, after=True)


def tool_call_separator_tokens(facts: MaskFacts, labels: Labels, offsets: np.ndarray | None = None) -> np.ndarray:
    """Bool per token: whitespace labelled assistant content right before or after a tool-call block (the
    newline between the reply and ``<tool_call>``, between two calls), a reasoning separator aside."""
    blank = _blank_assistant(facts, labels)
    calls = labels.role == Role.TOOL_CALL
    if blank is None or not calls.any():
        return np.zeros(len(labels.role), dtype=bool)
    out = _edge_runs(blank, calls, offsets, after=True) | _edge_runs(blank, calls, offsets, after=False)
    return out & ~separator_tokens(facts, labels, offsets)


#: The separator keys and the tokens each governs.
SEPARATORS = (("reasoning_separator", separator_tokens), ("tool_call_separator", tool_call_separator_tokens))


def _role_table(policy: MaskPolicy) -> np.ndarray:
    """``allowed[role]`` for roles whose permission does not depend on the turn (reasoning does)."""
    allowed = np.zeros(256, dtype=bool)
    allowed[Role.ASSISTANT] = policy.content
    allowed[Role.TOOL_CALL] = policy.tool_calls
    allowed[Role.ASSISTANT_END] = policy.end_of_turn
    allowed[Role.AFTER_ASSISTANT_END] = policy.newline_after_end
    allowed[Role.ASSISTANT_HEADER] = policy.header
    return allowed


#: ``optional`` names -> the role each makes optional
_OPTIONAL_ROLE = {"content": Role.ASSISTANT, "reasoning": Role.REASONING, "tool_calls": Role.TOOL_CALL,
                  "end_of_turn": Role.ASSISTANT_END, "newline_after_end": Role.AFTER_ASSISTANT_END,
                  "header": Role.ASSISTANT_HEADER}


def optional_table(policy: MaskPolicy) -> np.ndarray:
    out = np.zeros(256, dtype=bool)
    out[[_OPTIONAL_ROLE[k] for k in policy.optional]] = True
    return out


def needs_turns(policy: MaskPolicy) -> bool:
    """Whether the allowed/required tokens depend on which turn a token is in (else role alone decides)."""
    return (policy.reasoning_final != policy.reasoning_earlier or policy.turns == "last"
            or policy.completeness == "last" or policy.prompt_context != "off")


def allowed_tokens(labels: Labels, turns: AssistantTurns | None, policy: MaskPolicy,
                   opener: np.ndarray | None = None, facts: MaskFacts | None = None,
                   offsets: np.ndarray | None = None) -> np.ndarray:
    """Bool per token: may carry loss under the policy (soundness).

    ``opener`` (from :func:`opener_tokens`) marks reasoning openers; with
    ``reasoning_opener = "context"`` they belong to the generation prompt and may not.
    Reasoning whose permission is the same in every turn goes in the role table, so the
    common policies cost one table test per token and never build per-token ``last``.
    Every role the table allows is an assistant role, so allowed tokens are in assistant
    turns or their headers by construction. ``turns`` may be None when not :func:`needs_turns`.
    With ``prompt_context``, a selected turn's tokens from where the shortest-matching
    generation prompt ends through the turn's end are allowed whatever their role, and
    the prompt's tokens before that are not (``facts`` and ``offsets`` needed). The separators
    (:data:`SEPARATORS`: the whitespace after a reasoning block, around a tool-call block) follow
    ``content`` unless their keys say otherwise (``facts`` needed).
    """
    table = _role_table(policy)
    split_reasoning = policy.reasoning_final != policy.reasoning_earlier
    if not split_reasoning:
        table[Role.REASONING] = policy.reasoning_final
    assert not (table & ~ALLOWABLE_ROLES).any()  # roles outside assistant turns are never allowed
    allowed = in_table(labels.role, table)
    if split_reasoning:
        in_last = turns.last if policy.reasoning_final else ~turns.last
        allowed |= (labels.role == Role.REASONING) & in_last
    context = []  # separators never supervised: taken out last, like an empty reasoning block
    for key, tokens in SEPARATORS:
        value = getattr(policy, key)
        if value != "content" and facts is not None:
            sep = tokens(facts, labels, offsets)
            if value == "context":
                context.append(sep)
            else:  # supervised / optional: allowed whatever content says
                allowed |= sep
    if policy.turns == "last":
        allowed &= turns.last
    if policy.reasoning_opener == "context" and opener is not None:
        allowed &= ~opener
    if policy.prompt_context != "off" and facts is not None and offsets is not None:
        sel, hs, lo, _ = prompt_windows(facts, offsets, labels, turns, policy.prompt_context)
        n = len(labels.role)
        allowed &= ~in_ranges(n, hs, lo)
        allowed |= in_ranges(n, lo, turns.ends[sel] + 1)
    if policy.empty_reasoning == "context" and facts is not None:
        allowed &= ~empty_reasoning_tokens(facts, labels)
    for sep in context:
        allowed &= ~sep
    return allowed


def allowed_at(role_at: np.ndarray, turns_last_at: np.ndarray, policy: MaskPolicy) -> np.ndarray:
    """:func:`allowed_tokens` with ``turns = "all"`` and no opener, at a few positions only.

    ``role_at``/``turns_last_at``: the role and last-turn flag of those positions. Used to
    name the rule a failing token breaks without a second shard-long pass.
    """
    table = _role_table(policy)
    ok = table[role_at]
    if policy.reasoning_final == policy.reasoning_earlier:
        ok |= (role_at == Role.REASONING) & policy.reasoning_final
    else:
        ok |= (role_at == Role.REASONING) & np.where(turns_last_at, policy.reasoning_final, policy.reasoning_earlier)
    return ok


def opener_at(ids: np.ndarray, role: np.ndarray, newline_lead: np.ndarray | None, pos: np.ndarray) -> np.ndarray:
    """``opener_tokens(ids, labels, newline_lead)[pos]`` for a few positions, reading only their neighbours."""
    n = len(role)

    def first(p: np.ndarray) -> np.ndarray:
        r = role[np.clip(p, 0, max(n - 1, 0))] == Role.REASONING
        prev = (p > 0) & (role[np.clip(p - 1, 0, max(n - 1, 0))] == Role.REASONING)
        return r & ~prev

    out = first(pos)
    if newline_lead is not None and n:
        q = np.clip(pos, 0, n - 1)
        ok = (pos >= 1) & first(pos - 1) & (role[q] == Role.REASONING)
        out |= ok & newline_lead[np.clip(ids[q], 0, len(newline_lead) - 1)]
    return out


def opener_tokens(ids: np.ndarray, labels: Labels, newline_lead: np.ndarray | None) -> np.ndarray:
    """The reasoning opener: the first REASONING token of each block and, if whitespace with a newline, the next."""
    role = labels.role
    reasoning = role == Role.REASONING
    prev = np.zeros(len(role), dtype=bool)
    prev[1:] = reasoning[:-1]
    first = reasoning & ~prev
    out = first.copy()
    if newline_lead is not None and len(ids):
        nxt = np.flatnonzero(first) + 1
        nxt = nxt[nxt < len(ids)]
        ok = reasoning[nxt] & newline_lead[np.clip(ids[nxt], 0, len(newline_lead) - 1)]
        out[nxt[ok]] = True
    return out


def required_tokens(ids: np.ndarray, offsets: np.ndarray, labels: Labels, turns: AssistantTurns | None,
                    policy: MaskPolicy, max_len: int, newline_lead: np.ndarray | None = None,
                    facts: MaskFacts | None = None) -> np.ndarray:
    """Bool per token: must be supervised under the policy's completeness (all False when off).

    Eligible tokens are the allowed ones, minus boundary tokens (they belong to the header
    as much as to the content), the roles the policy lists as ``optional``, what follows an
    assistant end marker unless it is the newline (an end-of-text token), the tokens some
    generation prompt holds and another does not (``prompt_context``), an empty reasoning
    block unless it is supervised like any reasoning, and, with ``reasoning_opener =
    "context"``, the opener a generation prompt already holds. With ``completeness = "last"``,
    a row cut at max_len whose last token is outside an assistant turn lost its last turn to
    the cut: its visible turns are context, so nothing in it is required. ``turns`` may be
    None when not :func:`needs_turns`.
    """
    n = len(ids)
    if policy.completeness == "off" or n == 0:
        return np.zeros(n, dtype=bool)
    facts = facts if facts is not None else MaskFacts(ids, newline_lead)
    opener = opener_tokens(ids, labels, newline_lead) if policy.reasoning_opener == "context" else None
    need = allowed_tokens(labels, turns, policy, opener, facts, offsets)
    np.greater(need, labels.boundary, out=need)  # need & ~boundary, one pass
    if policy.optional:
        need &= ~in_table(labels.role, optional_table(policy))
    if policy.newline_after_end and facts.newline_lead is not None:
        # What follows an assistant end is required only where it is the newline: an end-of-text
        # token a template appends after the last turn (Phi-3) is allowed, not required.
        after = np.flatnonzero(labels.role == Role.AFTER_ASSISTANT_END)
        lead = facts.newline_lead
        tok = ids[after]
        need[after[~((tok >= 0) & (tok < len(lead)) & lead[np.clip(tok, 0, len(lead) - 1)])]] = False
    if policy.prompt_context != "off":
        _, _, lo, hi = prompt_windows(facts, offsets, labels, turns, policy.prompt_context)
        need &= ~in_ranges(n, lo, hi)
    if policy.empty_reasoning == "optional":
        need &= ~empty_reasoning_tokens(facts, labels)
    for key, tokens in SEPARATORS:
        if getattr(policy, key) == "optional":
            need &= ~tokens(facts, labels, offsets)
    if policy.completeness == "last":
        # Turn-level: only the tokens of last turns, and not in rows whose last turn the cut took.
        lengths = np.diff(offsets)
        nonempty = lengths > 0
        last_tok = offsets[1:][nonempty] - 1
        cut_elsewhere = np.zeros(len(lengths), dtype=bool)
        cut_elsewhere[nonempty] = (lengths[nonempty] >= max_len) & ~turns.in_turn[last_tok]
        keep = turns.is_last_turn & ~cut_elsewhere[turns.row_of_turn]
        if policy.prompt_context != "off":  # the turn's header part after the prompt counts too
            sel, _, lo, _ = prompt_windows(facts, offsets, labels, turns, policy.prompt_context)
            keep_tok = turns.spread(keep, False, bool) | in_ranges(n, lo[keep[sel]], turns.starts[sel][keep[sel]])
        else:
            keep_tok = turns.spread(keep, False, bool)
        need &= keep_tok
    return need


def disallowed_supervision(mask: np.ndarray, labels: Labels, policy: MaskPolicy,
                           offsets: np.ndarray | None = None, ids: np.ndarray | None = None,
                           newline_lead: np.ndarray | None = None,
                           facts: MaskFacts | None = None) -> np.ndarray:
    """Bool per token: supervised where the policy forbids it (``offsets`` default: one row).

    ``facts`` (or ``ids`` and ``newline_lead``) let the rules that read ids find what they need:
    reasoning openers, generation prompts, empty reasoning blocks.
    """
    if offsets is None:
        offsets = np.array([0, len(mask)], dtype=np.int64)
    if facts is None and ids is not None:
        facts = MaskFacts(ids, newline_lead)
    joins = facts.joins_blocks if facts is not None else False
    turns = turns_of(labels, offsets, joins) if needs_turns(policy) else None
    opener = None
    if policy.reasoning_opener == "context" and facts is not None:
        opener = opener_tokens(facts.ids, labels, facts.newline_lead)
    allowed = allowed_tokens(labels, turns, policy, opener, facts, offsets)
    bad = np.greater(mask, allowed, out=allowed) if mask.dtype == np.bool_ else mask & ~allowed  # mask & ~allowed
    if policy.boundary_tokens == "strict":
        bad |= mask & labels.boundary
    return bad


# --------------------------------------------------------------------------- the generation prompt in use


def prompt_explains(view: Any, labels: Any, facts: Any) -> tuple[Any, np.ndarray, np.ndarray] | None:
    """Which generation prompt explains each row's last assistant turn (the per-turn rule's boundary).

    Returns (the shard's assistant turns, ``has``: bool per last turn, supervised at all from its
    header on, ``explains``: bool per prompt and last turn, its supervision starts exactly where that
    prompt's context ends), or None without prompts, mask or tokens.
    """
    prompts = facts.prompts
    if not prompts or view.mask is None or not len(view.ids):
        return None
    turns = turns_of(labels, view.offsets, facts.joins_blocks)
    sel = np.flatnonzero(turns.is_last_turn)
    if not len(sel):
        return None
    ends = turns.ends[sel]
    # first supervised position of each selected turn's range, from its header start
    hs = header_starts(labels.role, view.offsets, turns)[sel]
    prefix = view.supervised_prefix
    first = np.full(len(sel), -1, dtype=np.int64)
    sup_pos = np.flatnonzero(view.mask)
    k = np.searchsorted(sup_pos, hs)
    has = (k < len(sup_pos))
    first[has] = sup_pos[np.minimum(k[has], len(sup_pos) - 1)]
    has &= (first <= ends) & (prefix[ends + 1] - prefix[hs] > 0)
    explains = []
    for prompt in prompts:
        one = MaskFacts(facts.ids, facts.newline_lead, (prompt,), facts.joins_blocks)
        _, _, lo, _ = prompt_windows(one, view.offsets, labels, turns, "last")
        explains.append(has & (first == lo))
    return turns, has, np.array(explains)


def prompts_in_use(view: Any, labels: Any, facts: Any, policy: MaskPolicy) -> tuple[tuple[int, ...], ...] | None:
    """The generation prompts the data's producer rendered, among those the template can render.

    A template's prompt differs with ``enable_thinking`` and after a tool message; a producer
    renders one per conversation. For each sample row, the prompt whose context ends exactly
    where the row's last turn starts being supervised explains the row; the fewest prompts
    that explain every explained row are the ones the checks then hold the data to (tokens
    one of them holds and another does not may go either way only when the data uses both).
    None when no sample row is explained (then every prompt is kept, and the checks say why).
    """
    prompts = facts.prompts
    if policy.prompt_context == "off" or len(prompts) < 2 or view.mask is None or not len(view.ids):
        return None
    found = prompt_explains(view, labels, facts)
    if found is None:
        return None
    explains = found[2]
    if not explains.any():
        return None
    chosen: list[int] = []
    left = explains.any(axis=0)
    while left.any():
        best = int(np.argmax((explains & left).sum(axis=1)))
        chosen.append(best)
        left &= ~explains[best]
    return tuple(prompts[i] for i in sorted(chosen))
