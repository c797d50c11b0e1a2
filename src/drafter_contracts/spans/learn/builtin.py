"""Built-in template profiles, written down per family and resolved against a tokenizer.

Each family is described with token *text*; :class:`Resolver` turns it into ids of
the given vocabulary and says which special token is missing when the tokenizer is
not of that family. A built-in is never used on trust: ``resolve`` uses it only when
it labels the tokenizer's own template renderings exactly (``spans/learn/verify.py``), so a
family's entry may describe a superset of what one template revision renders.

Families and the templates they were written from (TRL 1.16.0's ``chat_templates``
folder holds the vendors' files, see docs/templates.md):

- ``chatml``: Qwen 2.5 / 3 / 3.5 / 3.6 / VL, Nemotron 3 (``<|im_start|>ROLE\\n … <|im_end|>\\n``);
- ``lfm2``: LFM2 / LFM2.5 (ChatML with ``<|startoftext|>`` and its own tool markers);
- ``llama3``: Llama 3 / 3.1 / 3.2 (``<|start_header_id|>ROLE<|end_header_id|>\\n\\n … <|eot_id|>``);
  ``llama4``: Llama 4 (``<|header_start|>ROLE<|header_end|>\\n\\n … <|eot|>``);
- ``gemma``: Gemma 1 / 2 / 3 (``<start_of_turn>user|model\\n … <end_of_turn>\\n``);
- ``gemma4``: Gemma 4 and DiffusionGemma (``<|turn>ROLE\\n … <turn|>\\n``; reasoning, tool calls and tool
  responses as blocks inside the model turn);
- ``harmony``: gpt-oss (``<|start|>ROLE<|channel|>CHANNEL<|message|> … <|end|>|<|return|>|<|call|>``);
- ``atem``: Muse Glimmer (``<|start|>assistant to=RECIPIENT<|message|> … <|eot|>|<|eom|>``);
- ``glm``: GLM-4.5 / 4.6 (``[gMASK]<sop><|user|>\\n …``; an assistant turn ends at the next header);
- ``phi3``: Phi-3 / 3.5 (``<|user|>\\n … <|end|>\\n``); ``phi4`` (``<|im_start|>ROLE<|im_sep|> … <|im_end|>``);
- ``cohere``: Command R / Aya / Command A (``<|START_OF_TURN_TOKEN|><|USER_TOKEN|> … <|END_OF_TURN_TOKEN|>``);
- ``exaone`` / ``exaone4``: EXAONE 3 / 4 (``[|ROLE|] … [|endofturn|]\\n``; EXAONE 4 adds a newline after the role);
- ``jamba``: Jamba 1.5 / 1.6 (``<|bom|><|ROLE|> … <|eom|>``);
- ``mistral`` (v3 / tekken, ``[INST] … [/INST] … </s>``) and ``deepseek`` (V3 / R1, ``<｜User｜> … <｜Assistant｜> …``).
"""

from __future__ import annotations

from typing import Callable

from ...tokenizer.vocabulary import Vocabulary
from ..labels import Role
from ..profile import Header, SubSpan, TemplateProfile


class MissingToken(LookupError):
    """The tokenizer lacks a token the family needs."""


class Resolver:
    """Text -> ids for one vocabulary (special tokens recognised, as chat templates render them)."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.vocab = vocab

    def special(self, text: str) -> int:
        found = self.vocab.id_of(text)
        if found is None or found not in self.vocab.added_ids:
            raise MissingToken(text)
        return found

    def optional(self, text: str) -> int | None:
        try:
            return self.special(text)
        except MissingToken:
            return None

    def seq(self, text: str) -> tuple[int, ...]:
        return self.vocab.encode_cached(text)

    def single(self, text: str) -> int:
        ids = self.seq(text)
        if len(ids) != 1:
            raise MissingToken(f"{text!r} as one token")
        return ids[0]

    def sub(self, a: str, b: str | None, role: Role, within: tuple[Role, ...] = (Role.ASSISTANT,)) -> list[SubSpan]:
        """A sub-span when the tokenizer has both markers as special tokens, else nothing."""
        open_, close = self.optional(a), (self.optional(b) if b is not None else None)
        if open_ is None or (b is not None and close is None):
            return []
        return [SubSpan(open_, close, role, within)]

    def newline_runs(self, longest: int) -> tuple[int, ...]:
        return tuple(i for i in (self.vocab.single_id("\n" * k) for k in range(1, longest + 1)) if i is not None)


def _roles(start: tuple[int, ...], r: Resolver, words: dict[str, Role], tail: int | None, ends: tuple[int, ...],
           sep: tuple[int, ...] = ()) -> list[Header]:
    return [Header(role, (*start, *r.seq(word), *sep), tail, ends) for word, role in words.items()]


_CHATML_ROLES = {"system": Role.SYSTEM, "developer": Role.SYSTEM, "user": Role.USER, "assistant": Role.ASSISTANT,
                 "tool": Role.TOOL}


def chatml(r: Resolver) -> TemplateProfile:
    start, end, nl = r.special("<|im_start|>"), r.special("<|im_end|>"), r.single("\n")
    subs = (r.sub("<think>", "</think>", Role.REASONING) + r.sub("<tool_call>", "</tool_call>", Role.TOOL_CALL)
            + r.sub("<tool_response>", "</tool_response>", Role.TOOL, (Role.USER, Role.TOOL)))
    return TemplateProfile("chatml", tuple(_roles((start,), r, _CHATML_ROLES, nl, (end,))), after_end=(nl,),
                           subs=tuple(subs), short_tails=r.newline_runs(1))


def lfm2(r: Resolver) -> TemplateProfile:
    start, end, nl = r.special("<|im_start|>"), r.special("<|im_end|>"), r.single("\n")
    subs = (r.sub("<think>", "</think>", Role.REASONING)
            + r.sub("<|tool_call_start|>", "<|tool_call_end|>", Role.TOOL_CALL)
            + r.sub("<|tool_response_start|>", "<|tool_response_end|>", Role.TOOL, (Role.USER, Role.TOOL)))
    return TemplateProfile("lfm2", tuple(_roles((start,), r, _CHATML_ROLES, nl, (end,))), after_end=(nl,),
                           bos=(r.special("<|startoftext|>"),), subs=tuple(subs), short_tails=r.newline_runs(1))


def phi4(r: Resolver) -> TemplateProfile:
    start, sep, end = r.special("<|im_start|>"), r.special("<|im_sep|>"), r.special("<|im_end|>")
    words = {"system": Role.SYSTEM, "user": Role.USER, "assistant": Role.ASSISTANT, "tool": Role.TOOL}
    subs = r.sub("<think>", "</think>", Role.REASONING) + r.sub("<|tool_call|>", "<|/tool_call|>", Role.TOOL_CALL)
    return TemplateProfile("phi4", tuple(_roles((start,), r, words, None, (end,), (sep,))), subs=tuple(subs))


def phi3(r: Resolver) -> TemplateProfile:
    end, nl = r.special("<|end|>"), r.single("\n")
    headers = [Header(role, (r.special(tok),), nl, (end,)) for tok, role in (
        ("<|system|>", Role.SYSTEM), ("<|user|>", Role.USER), ("<|assistant|>", Role.ASSISTANT))]
    eos = tuple(i for i in (r.optional("<|endoftext|>"),) if i is not None)
    return TemplateProfile("phi3", tuple(headers), after_end=(nl,), eos=eos, short_tails=r.newline_runs(1))


def _llama_headers(r: Resolver, start: str, stop: str, end: str, end_message: str) -> tuple[Header, ...]:
    """Llama 3 / 4 turns: ``START ROLE STOP`` then two newlines, closed by ``END``; an assistant turn may
    also close with ``END_MESSAGE`` (a tool call waiting for its result) when the tokenizer has it."""
    start_id, stop_id = r.special(start), r.special(stop)
    eot, tail = r.special(end), r.single("\n\n")
    eom = r.optional(end_message)
    words = {"system": Role.SYSTEM, "user": Role.USER, "assistant": Role.ASSISTANT, "ipython": Role.TOOL,
             "tool": Role.TOOL}
    return tuple(Header(role, (start_id, *r.seq(word), stop_id), tail,
                        (eot, eom) if role == Role.ASSISTANT and eom is not None else (eot,))
                 for word, role in words.items())


def llama3(r: Resolver) -> TemplateProfile:
    headers = _llama_headers(r, "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>")
    return TemplateProfile("llama3", headers, bos=(r.special("<|begin_of_text|>"),),
                           subs=tuple(r.sub("<|python_tag|>", None, Role.TOOL_CALL)), short_tails=r.newline_runs(2))


def llama4(r: Resolver) -> TemplateProfile:
    """Llama 4: Llama 3's shape with its own markers (``<|header_start|>ROLE<|header_end|>\\n\\n … <|eot|>``).

    A tool-call message is its content between ``<|python_start|>`` and ``<|python_end|>``, then the
    calls as bare JSON: all of it is the assistant's output, with no marker around the calls themselves.
    """
    headers = _llama_headers(r, "<|header_start|>", "<|header_end|>", "<|eot|>", "<|eom|>")
    return TemplateProfile("llama4", headers, bos=(r.special("<|begin_of_text|>"),), short_tails=r.newline_runs(2))


def gemma(r: Resolver) -> TemplateProfile:
    start, end, nl = r.special("<start_of_turn>"), r.special("<end_of_turn>"), r.single("\n")
    headers = (Header(Role.USER, (start, *r.seq("user")), nl, (end,)),
               Header(Role.ASSISTANT, (start, *r.seq("model")), nl, (end,)),
               Header(Role.SYSTEM, (start, *r.seq("system")), nl, (end,)))
    return TemplateProfile("gemma", headers, after_end=(nl,), bos=(r.special("<bos>"),), short_tails=r.newline_runs(1))


def gemma4(r: Resolver) -> TemplateProfile:
    start, end, nl = r.special("<|turn>"), r.special("<turn|>"), r.single("\n")
    words = {"system": Role.SYSTEM, "developer": Role.SYSTEM, "user": Role.USER, "model": Role.ASSISTANT,
             "tool": Role.TOOL}
    # Tool output sits inside the model turn: the model writes <|tool_response> to stop after its calls,
    # the output follows, and the answer goes on right after <tool_response|>.
    subs = (r.sub("<|channel>", "<channel|>", Role.REASONING) + r.sub("<|tool_call>", "<tool_call|>", Role.TOOL_CALL)
            + [SubSpan(s.open, s.close, s.role, s.within, stops=True)
               for s in r.sub("<|tool_response>", "<tool_response|>", Role.TOOL)])
    # DiffusionGemma writes a new model header after tool responses without closing the model turn,
    # and only there: right after <tool_response|>.
    closes = r.optional("<tool_response|>")
    headers = [Header(h.role, h.core, h.tail, h.ends, inside=(Role.ASSISTANT,) if h.role == Role.ASSISTANT else (),
                      inside_after=closes if h.role == Role.ASSISTANT else None)
               for h in _roles((start,), r, words, nl, (end,))]
    return TemplateProfile("gemma4", tuple(headers), after_end=(nl,),
                           bos=(r.special("<bos>"),), subs=tuple(subs), short_tails=r.newline_runs(1))


def harmony(r: Resolver) -> TemplateProfile:
    start, msg, channel = r.special("<|start|>"), r.special("<|message|>"), r.special("<|channel|>")
    end, ret, call = r.special("<|end|>"), r.special("<|return|>"), r.special("<|call|>")
    asst = (start, *r.seq("assistant"))
    ends = (end, ret, call)
    headers = [
        Header(Role.SYSTEM, (start, *r.seq("system")), None, (end,), msg),
        Header(Role.SYSTEM, (start, *r.seq("developer")), None, (end,), msg),
        Header(Role.USER, (start, *r.seq("user")), None, (end,), msg),
        Header(Role.TOOL, (start, *r.seq("functions")), None, (end,), msg),
        # the channel decides what the body is; a recipient after the role or the channel makes it a tool call
        Header(Role.ASSISTANT, (*asst, channel, *r.seq("analysis")), None, ends, msg, Role.REASONING),
        Header(Role.ASSISTANT, (*asst, channel, *r.seq("final")), None, ends, msg, Role.ASSISTANT),
        Header(Role.ASSISTANT, (*asst, channel, *r.seq("commentary")), None, ends, msg, Role.ASSISTANT),
        Header(Role.ASSISTANT, (*asst, channel, *r.seq("commentary to")), None, ends, msg, Role.TOOL_CALL,
               free=Role.TOOL_CALL),
        Header(Role.ASSISTANT, (*asst, *r.seq(" to")), None, ends, msg, Role.TOOL_CALL, free=Role.TOOL_CALL),
    ]
    bos = r.optional("<|startoftext|>")
    return TemplateProfile("harmony", tuple(headers), bos=(bos,) if bos is not None else (), joins_blocks=True)


def atem(r: Resolver) -> TemplateProfile:
    start, msg = r.special("<|start|>"), r.special("<|message|>")
    eot, eom = r.special("<|eot|>"), r.special("<|eom|>")
    asst = (start, *r.seq("assistant"))
    headers = [
        Header(Role.SYSTEM, (start, *r.seq("system")), None, (eot, eom), msg),
        Header(Role.SYSTEM, (start, *r.seq("developer")), None, (eot, eom), msg),
        Header(Role.USER, (start, *r.seq("user")), None, (eot, eom), msg),
        Header(Role.TOOL, (start, *r.seq("tool")), None, (eot, eom), msg),
        # the recipient decides what the body is: itself (reasoning), the user (the answer), a tool (a call)
        Header(Role.ASSISTANT, (*asst, *r.seq(" to=self")), None, (eot, eom), msg, Role.REASONING),
        Header(Role.ASSISTANT, (*asst, *r.seq(" to=user")), None, (eot, eom), msg, Role.ASSISTANT),
        Header(Role.ASSISTANT, (*asst, *r.seq(" to")), None, (eot, eom), msg, Role.TOOL_CALL, free=Role.TOOL_CALL),
    ]
    bos = r.optional("<|begin_of_text|>") or r.optional("<|startoftext|>")
    return TemplateProfile("atem", tuple(headers), bos=(bos,) if bos is not None else (), joins_blocks=True)


def glm(r: Resolver) -> TemplateProfile:
    nl = r.single("\n")
    headers = (Header(Role.SYSTEM, (r.special("<|system|>"),), nl),
               Header(Role.USER, (r.special("<|user|>"),), nl),
               Header(Role.ASSISTANT, (r.special("<|assistant|>"),), nl),
               Header(Role.TOOL, (r.special("<|observation|>"),), nl))
    subs = (r.sub("<think>", "</think>", Role.REASONING) + r.sub("<tool_call>", "</tool_call>", Role.TOOL_CALL)
            + r.sub("<tool_response>", "</tool_response>", Role.TOOL, (Role.TOOL, Role.USER)))
    return TemplateProfile("glm", headers, bos=(r.special("[gMASK]"), r.special("<sop>")), subs=tuple(subs),
                           short_tails=r.newline_runs(1))


def _cohere(r: Resolver, name: str, always_prompts: bool) -> TemplateProfile:
    sot, eot = r.special("<|START_OF_TURN_TOKEN|>"), r.special("<|END_OF_TURN_TOKEN|>")
    chatbot = r.special("<|CHATBOT_TOKEN|>")
    start_resp, end_resp = r.optional("<|START_RESPONSE|>"), r.optional("<|END_RESPONSE|>")
    if always_prompts:  # Command A's own markers are needed: without them this is plain cohere
        start_resp, end_resp = r.special("<|START_RESPONSE|>"), r.special("<|END_RESPONSE|>")
    # Command A's tool-use preamble explains the reply format in its system turn, spelling <|END_RESPONSE|>
    plain = (end_resp,) if always_prompts else ()
    headers = [Header(Role.SYSTEM, (sot, r.special("<|SYSTEM_TOKEN|>")), None, (eot,), plain=plain),
               Header(Role.USER, (sot, r.special("<|USER_TOKEN|>")), None, (eot,)),
               # axolotl's Command A writes this header at the end of every rendering (the generation prompt)
               Header(Role.ASSISTANT, (sot, chatbot), None, (eot,), ends_row=always_prompts)]
    after: tuple[int, ...] = ()
    if start_resp is not None and end_resp is not None:  # Command A / Aya 2: the reply sits in its own markers
        headers.append(Header(Role.ASSISTANT, (sot, chatbot, start_resp), None, (end_resp, eot)))
        after = (eot,)
    subs = (r.sub("<|START_THINKING|>", "<|END_THINKING|>", Role.REASONING)
            + r.sub("<|START_ACTION|>", "<|END_ACTION|>", Role.TOOL_CALL)
            + r.sub("<|START_TOOL_RESULT|>", "<|END_TOOL_RESULT|>", Role.TOOL, (Role.SYSTEM, Role.USER, Role.TOOL)))
    return TemplateProfile(name, tuple(headers), after_end=after, bos=(r.special("<BOS_TOKEN>"),), subs=tuple(subs))


def cohere(r: Resolver) -> TemplateProfile:
    """Command R / Aya / Command A / R7B as the vendors' templates write them: ``<|START_OF_TURN_TOKEN|><|ROLE_TOKEN|>
    … <|END_OF_TURN_TOKEN|>``; Command A's reply in ``<|START_RESPONSE|>…<|END_RESPONSE|>``, reasoning (the tool
    plan) in ``<|START_THINKING|>``, calls in ``<|START_ACTION|>``, results in ``<|START_TOOL_RESULT|>`` blocks."""
    return _cohere(r, "cohere", always_prompts=False)


def command_a(r: Resolver) -> TemplateProfile:
    """Command A as axolotl's ``command_a*`` templates write it: ``cohere`` plus two things those templates do and
    the vendor's own does not, each allowed only here (so ``cohere`` stays as tight as Command R's template):
    every rendering ends with the generation prompt's ``<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>`` (a row may end
    there, its turn empty), and the tool-use preamble spells ``<|END_RESPONSE|>`` inside the system turn."""
    return _cohere(r, "command_a", always_prompts=True)


def _exaone(r: Resolver, name: str, tail: bool, user_unclosed: bool) -> TemplateProfile:
    """EXAONE's turns; ``user_unclosed``: a user turn ends with no marker, so the assistant header may open
    inside it (EXAONE 3 only: EXAONE 4 closes every turn, and there the same header typed in user text
    is a pasted header, never the start of a reply)."""
    eot, nl = r.special("[|endofturn|]"), r.single("\n")
    words = [("[|system|]", Role.SYSTEM), ("[|user|]", Role.USER), ("[|assistant|]", Role.ASSISTANT),
             ("[|tool|]", Role.TOOL)]
    headers = [Header(role, (r.special(tok),), nl if tail else None, (eot,),
                      inside=(Role.USER,) if role == Role.ASSISTANT and user_unclosed else ())
               for tok, role in words if role != Role.TOOL or r.optional(tok) is not None]
    subs = r.sub("<think>", "</think>", Role.REASONING) + r.sub("<tool_call>", "</tool_call>", Role.TOOL_CALL)
    return TemplateProfile(name, tuple(headers), after_end=(nl,), subs=tuple(subs), short_tails=r.newline_runs(1))


def exaone(r: Resolver) -> TemplateProfile:
    """EXAONE 3: ``[|ROLE|]…[|endofturn|]\\n``, but a user turn ends with no marker (``[|user|]…\\n[|assistant|]``):
    the assistant header may open inside an open user turn, closing it."""
    return _exaone(r, "exaone", tail=False, user_unclosed=True)


def exaone4(r: Resolver) -> TemplateProfile:
    """EXAONE 4: ``[|ROLE|]\\n…[|endofturn|]\\n`` for every role (``[|tool|]`` too), ``<think>`` and ``<tool_call>``
    blocks in the reply."""
    return _exaone(r, "exaone4", tail=True, user_unclosed=False)


def jamba(r: Resolver) -> TemplateProfile:
    """Jamba 1.5 / 1.6: ``<|bom|><|ROLE|> … <|eom|>`` after ``<|startoftext|>``; a system turn, empty when the
    conversation has none, always comes first. The space after the role merges with the content under BPE
    (a boundary token, content of the turn); tool calls are ``<tool_calls>`` text inside the reply."""
    bom, eom = r.special("<|bom|>"), r.special("<|eom|>")
    words = [("<|system|>", Role.SYSTEM), ("<|user|>", Role.USER), ("<|assistant|>", Role.ASSISTANT),
             ("<|tool|>", Role.TOOL)]
    headers = tuple(Header(role, (bom, r.special(tok)), None, (eom,)) for tok, role in words)
    return TemplateProfile("jamba", headers, bos=(r.special("<|startoftext|>"),))


def mistral(r: Resolver) -> TemplateProfile:
    eos = r.special("</s>")
    headers = [Header(Role.USER, (r.special("[INST]"),)),
               Header(Role.ASSISTANT, (r.special("[/INST]"),), None, (eos,))]
    results_end = None
    for open_, close, role in (("[TOOL_RESULTS]", "[/TOOL_RESULTS]", Role.TOOL),
                               ("[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", Role.SYSTEM),
                               ("[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", Role.SYSTEM)):
        a, b = r.optional(open_), r.optional(close)
        if a is None or b is None:
            continue
        if role == Role.TOOL:  # the assistant answers right after the results, with no [/INST]
            headers += [Header(role, (a,)), Header(Role.ASSISTANT, (b,), None, (eos,))]
            results_end = b
        else:
            headers.append(Header(role, (a,), None, (b,)))
    if results_end is not None:
        # [/TOOL_RESULTS] opens the answer only when text follows; before the next call's results or the next
        # [INST] it closes the tool turn, and the pair opens that turn (turns with no end marker of their own:
        # the opener inside the pair then closes nothing).
        headers += [Header(h.role, (results_end, *h.core)) for h in list(headers)
                    if len(h.core) == 1 and not h.ends and h.role in (Role.TOOL, Role.USER)]
    subs = r.sub("[THINK]", "[/THINK]", Role.REASONING) + r.sub("[TOOL_CALLS]", None, Role.TOOL_CALL)
    return TemplateProfile("mistral", tuple(headers), bos=(r.special("<s>"),), subs=tuple(subs))


def deepseek(r: Resolver) -> TemplateProfile:
    eos = r.special("<｜end▁of▁sentence｜>")
    headers = [Header(Role.USER, (r.special("<｜User｜>"),)),
               Header(Role.ASSISTANT, (r.special("<｜Assistant｜>"),), None, (eos,))]
    a, b = r.optional("<｜tool▁outputs▁begin｜>"), r.optional("<｜tool▁outputs▁end｜>")
    if a is not None and b is not None:  # the answer after tool outputs follows their closing marker directly
        # ... or, before a second round of calls, a new <｜Assistant｜> follows it (axolotl's deepseek_v3) and
        # opens that turn, closing the empty one.
        headers[1] = Header(Role.ASSISTANT, headers[1].core, None, (eos,), inside=(Role.ASSISTANT,))
        headers += [Header(Role.TOOL, (a,)), Header(Role.ASSISTANT, (b,), None, (eos,))]
    subs = (r.sub("<think>", "</think>", Role.REASONING)
            + r.sub("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", Role.TOOL_CALL))
    return TemplateProfile("deepseek", tuple(headers), bos=(r.special("<｜begin▁of▁sentence｜>"),),
                           bos_role=Role.SYSTEM, subs=tuple(subs))


#: name -> builder. Order is the order candidates are tried in (``resolve``); each must still
#: label the template's own renderings exactly to be used.
BUILTINS: dict[str, Callable[[Resolver], TemplateProfile]] = {
    "chatml": chatml, "lfm2": lfm2, "phi4": phi4, "phi3": phi3, "llama3": llama3, "llama4": llama4, "gemma": gemma,
    "gemma4": gemma4, "harmony": harmony, "atem": atem, "glm": glm, "cohere": cohere, "command_a": command_a,
    "exaone4": exaone4,
    "exaone": exaone, "jamba": jamba, "mistral": mistral,
    "deepseek": deepseek,
}
#: Other names people use for the same families.
ALIASES = {"qwen": "chatml", "qwen2.5": "chatml", "qwen3": "chatml", "qwen3.5": "chatml", "qwen3.6": "chatml",
           "nemotron": "chatml", "lfm2.5": "lfm2", "llama": "llama3", "llama3.1": "llama3", "llama3.2": "llama3",
           "llama3.3": "llama3", "llama-4": "llama4", "gemma2": "gemma", "gemma3": "gemma", "diffusion-gemma": "gemma4",
           "gpt-oss": "harmony", "gptoss": "harmony", "muse": "atem", "glm4": "glm", "glm4.5": "glm", "glm4moe": "glm",
           "exaone3": "exaone", "phi-3": "phi3", "phi3.5": "phi3", "phi-4": "phi4", "command-r": "cohere",
           "aya": "cohere", "command-r7b": "cohere", "command-a": "command_a",
           "mistral-v3": "mistral", "tekken": "mistral", "deepseek-v3": "deepseek", "deepseek-r1": "deepseek"}


def builtin_profile(name: str, vocab: Vocabulary) -> TemplateProfile:
    """The named family's profile in this vocabulary; MissingToken if the tokenizer is not of that family."""
    return BUILTINS[ALIASES.get(name, name)](Resolver(vocab))


def available_builtins(vocab: Vocabulary) -> dict[str, TemplateProfile]:
    """Every built-in family whose special tokens this tokenizer has (candidates, not verdicts)."""
    out = {}
    for name in BUILTINS:
        try:
            out[name] = builtin_profile(name, vocab)
        except MissingToken:
            continue
    return out
