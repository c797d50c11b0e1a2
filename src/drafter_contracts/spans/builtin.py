"""Built-in template profiles, written down per family and resolved against a tokenizer.

They override derivation (``--template-profile NAME``) and catch what derivation
cannot learn (a tokenizer without a chat template). Each family is described with
token *text*; :class:`Resolver` turns it into ids of the given vocabulary and says
which special token is missing when the tokenizer is not of that family.
"""

from __future__ import annotations

from typing import Callable

from ..vocab import Vocabulary
from .labels import Role
from .profile import Header, Pair, TemplateProfile


class MissingToken(LookupError):
    """The tokenizer lacks a token the family needs."""


class Resolver:
    """Text -> ids for one vocabulary (special tokens recognised, as chat templates render them)."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.vocab = vocab

    def special(self, text: str) -> int:
        found = self.vocab.id_of(text)
        if found is None:
            raise MissingToken(text)
        return found

    def seq(self, text: str) -> tuple[int, ...]:
        return self.vocab.encode_cached(text)

    def single(self, text: str) -> int:
        ids = self.seq(text)
        if len(ids) != 1:
            raise MissingToken(f"{text!r} as one token")
        return ids[0]

    def optional_pair(self, a: str, b: str | None) -> Pair | None:
        try:
            return self.special(a), (self.special(b) if b is not None else None)
        except MissingToken:
            return None

    def newline_runs(self, longest: int) -> tuple[int, ...]:
        return tuple(i for i in (self.vocab.single_id("\n" * k) for k in range(1, longest + 1)) if i is not None)


def chatml(r: Resolver) -> TemplateProfile:
    start, end, nl = r.special("<|im_start|>"), r.special("<|im_end|>"), r.single("\n")
    roles = {"system": Role.SYSTEM, "developer": Role.SYSTEM, "user": Role.USER, "assistant": Role.ASSISTANT,
             "tool": Role.TOOL}
    headers = tuple(Header(role, (start, *r.seq(word)), nl, (end,)) for word, role in roles.items())
    return TemplateProfile("chatml", headers, after_end=nl, reasoning=r.optional_pair("<think>", "</think>"),
                           tool_call=r.optional_pair("<tool_call>", "</tool_call>"), short_tails=r.newline_runs(1))


def phi4(r: Resolver) -> TemplateProfile:
    start, sep, end = r.special("<|im_start|>"), r.special("<|im_sep|>"), r.special("<|im_end|>")
    roles = {"system": Role.SYSTEM, "user": Role.USER, "assistant": Role.ASSISTANT, "tool": Role.TOOL}
    headers = tuple(Header(role, (start, *r.seq(word), sep), None, (end,)) for word, role in roles.items())
    return TemplateProfile("phi4", headers, reasoning=r.optional_pair("<think>", "</think>"),
                           tool_call=r.optional_pair("<|tool_call|>", "<|/tool_call|>"))


def llama3(r: Resolver) -> TemplateProfile:
    start, stop = r.special("<|start_header_id|>"), r.special("<|end_header_id|>")
    eot, tail = r.special("<|eot_id|>"), r.single("\n\n")
    eom = r.vocab.id_of("<|eom_id|>")
    roles = {"system": Role.SYSTEM, "user": Role.USER, "assistant": Role.ASSISTANT, "ipython": Role.TOOL,
             "tool": Role.TOOL}
    headers = tuple(Header(role, (start, *r.seq(word), stop), tail,
                           (eot, eom) if role == Role.ASSISTANT and eom is not None else (eot,))
                    for word, role in roles.items())
    return TemplateProfile("llama3", headers, bos=r.special("<|begin_of_text|>"),
                           tool_call=r.optional_pair("<|python_tag|>", None), short_tails=r.newline_runs(2))


def gemma(r: Resolver) -> TemplateProfile:
    start, end, nl = r.special("<start_of_turn>"), r.special("<end_of_turn>"), r.single("\n")
    headers = (Header(Role.USER, (start, *r.seq("user")), nl, (end,)),
               Header(Role.ASSISTANT, (start, *r.seq("model")), nl, (end,)))
    return TemplateProfile("gemma", headers, after_end=nl, bos=r.special("<bos>"), short_tails=r.newline_runs(1))


def mistral(r: Resolver) -> TemplateProfile:
    eos = r.special("</s>")
    headers = [Header(Role.USER, (r.special("[INST]"),)),
               Header(Role.ASSISTANT, (r.special("[/INST]"),), None, (eos,))]
    for open_, close, role in (("[TOOL_RESULTS]", "[/TOOL_RESULTS]", Role.TOOL),
                               ("[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", Role.SYSTEM),
                               ("[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", Role.SYSTEM)):
        pair = r.optional_pair(open_, close)
        if pair is None:
            continue
        if role == Role.TOOL:  # the assistant answers right after the results, with no [/INST]
            headers += [Header(role, (pair[0],)), Header(Role.ASSISTANT, (pair[1],), None, (eos,))]
        else:
            headers.append(Header(role, (pair[0],), None, (pair[1],)))
    return TemplateProfile("mistral", tuple(headers), bos=r.special("<s>"),
                           reasoning=r.optional_pair("[THINK]", "[/THINK]"),
                           tool_call=r.optional_pair("[TOOL_CALLS]", None))


def deepseek(r: Resolver) -> TemplateProfile:
    eos = r.special("<｜end▁of▁sentence｜>")
    headers = [Header(Role.USER, (r.special("<｜User｜>"),)),
               Header(Role.ASSISTANT, (r.special("<｜Assistant｜>"),), None, (eos,))]
    outputs = r.optional_pair("<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>")
    if outputs is not None:  # the answer after tool outputs follows their closing marker directly
        headers += [Header(Role.TOOL, (outputs[0],)), Header(Role.ASSISTANT, (outputs[1],), None, (eos,))]
    return TemplateProfile("deepseek", tuple(headers), bos=r.special("<｜begin▁of▁sentence｜>"), bos_role=Role.SYSTEM,
                           reasoning=r.optional_pair("<think>", "</think>"),
                           tool_call=r.optional_pair("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"))


#: name -> (builder, the special token that identifies the family when sniffing a tokenizer).
BUILTINS: dict[str, tuple[Callable[[Resolver], TemplateProfile], str]] = {
    "phi4": (phi4, "<|im_sep|>"),  # before chatml: Phi-4 also has <|im_start|>
    "chatml": (chatml, "<|im_start|>"),
    "llama3": (llama3, "<|start_header_id|>"),
    "gemma": (gemma, "<start_of_turn>"),
    "mistral": (mistral, "[INST]"),
    "deepseek": (deepseek, "<｜User｜>"),
}
#: Other names people use for the same families.
ALIASES = {"qwen": "chatml", "qwen2.5": "chatml", "qwen3": "chatml", "qwen3.5": "chatml", "qwen3.6": "chatml",
           "llama": "llama3", "llama3.1": "llama3", "llama3.2": "llama3", "llama3.3": "llama3",
           "gemma2": "gemma", "gemma3": "gemma", "mistral-v3": "mistral", "tekken": "mistral",
           "deepseek-v3": "deepseek", "deepseek-r1": "deepseek", "phi-4": "phi4"}


def builtin_profile(name: str, vocab: Vocabulary) -> TemplateProfile:
    """The named family's profile in this vocabulary; MissingToken if the tokenizer is not of that family."""
    builder, _ = BUILTINS[ALIASES.get(name, name)]
    return builder(Resolver(vocab))


def sniff_family(vocab: Vocabulary) -> str | None:
    """The first built-in family whose identifying special token this tokenizer has."""
    for name, (_, marker) in BUILTINS.items():
        if vocab.id_of(marker) is not None:
            return name
    return None
