"""``--template-profile NAME|auto`` -> the span oracle: a verified profile and the labeller for it.

``auto`` tries every built-in family whose special tokens the tokenizer has, then the
profile derived from its chat template, and uses the first that labels the template's
own renderings exactly (``spans/learn/verify.py``). The presence of a family's markers is
never enough, and nothing falls back to a guess: when no candidate labels the
renderings, the run stops with one line naming the closest candidate's first
disagreement. A named built-in is held to the same check whenever the tokenizer has
a chat template.

The choice costs a tokenizer load and a few dozen template renderings (seconds), so
it is cached per tokenizer, template and labelling code under the cache root; xdist
workers and later runs read the cached profile.
"""

from __future__ import annotations

from typing import Any

from ...errors import UsageProblem
from ...paths import JsonCache
from ...tokenizer.vocabulary import Vocabulary
from ..cache_code import SPANS_CODE
from ..oracle import SpanOracle, Verification
from ..prefix import common_prefix_length
from ..profile import CompiledProfile, TemplateProfile
from .builtin import ALIASES, BUILTINS, MissingToken, available_builtins, builtin_profile
from .derive import DerivationFailed, cached_derivation
from .probes import PROMPT_CONTEXTS

AUTO = "auto"
RESOLVE_VERSION = 3  # 2: generation prompts of templates that close a finished conversation (Phi-3); 3: tightness


def profile_names() -> tuple[str, ...]:
    return (AUTO, *BUILTINS, *ALIASES)


def _cache(vocab: Vocabulary, name: str) -> JsonCache:
    return JsonCache.keyed("profiles", "oracle",
                           (vocab.fingerprint, vocab.chat_template or "", name, str(RESOLVE_VERSION)), code=SPANS_CODE)


def _display(name: str) -> str:
    return ALIASES.get(name, name)


def _limits(verdict: Any) -> str:
    return "".join(f"; limit: {x}" for x in verdict.limits)


def _chosen(profile: TemplateProfile, how: str, verdict: Any, probes: Any, vocab: Vocabulary) -> dict[str, Any]:
    """The cacheable document of a verified choice: the profile with every relaxation no probe needs turned
    off (``verify.tighten``), and in ``verification`` the relaxations in force with the rendering that needs each."""
    from .verify import tighten

    tight = tighten(profile, probes, vocab)
    return {"profile": tight.profile.to_json(), "how": how + _limits(verdict),
            "verification": verdict.to_dict() | {"skipped": probes.skipped} | tight.to_dict()}


def _choose_uncached(vocab: Vocabulary, name: str) -> dict[str, Any]:
    """The choice as a cacheable document: {"profile", "how", "verification"} or {"error"}."""
    choices = ", ".join(BUILTINS)
    if name != AUTO:
        return _choose_named(vocab, name, choices)
    return _choose_auto(vocab, choices)


def _choose_named(vocab: Vocabulary, name: str, choices: str) -> dict[str, Any]:
    """A built-in family the user named: taken as is without a chat template to check it against, otherwise
    only when it labels the template's renderings exactly."""
    from .verify import ProbesUnavailable, probe_renderings, verify

    family = _display(name)
    if family not in BUILTINS:
        return {"error": f"--template-profile {name}: unknown; use auto or one of {choices}"}
    try:
        profile = builtin_profile(family, vocab)
    except MissingToken as exc:
        return {"error": f"--template-profile {name}: --tokenizer {vocab.name} has no {exc.args[0]} token, "
                         f"so it is not a {family} tokenizer; pass the tokenizer that produced the dataset or "
                         "another --template-profile"}
    if not vocab.chat_template:
        return {"profile": profile.to_json(), "how": f"built-in {family} (requested; the tokenizer has no chat "
                "template to verify it against)", "verification": {}}
    try:
        probes = probe_renderings(vocab)
    except ProbesUnavailable as exc:
        return {"profile": profile.to_json(), "how": f"built-in {family} (requested; not verified: {exc})",
                "verification": {}}
    verdict = verify(profile, probes, vocab)
    if not verdict.ok:
        return {"error": f"--template-profile {name}: the {family} profile mislabels this tokenizer's chat "
                         f"template ({verdict.first}); pass the tokenizer that produced the dataset, or "
                         "--template-profile auto"}
    return _chosen(profile,
                   f"built-in {family} (requested; labels {verdict.renderings} template renderings exactly)",
                   verdict, probes, vocab)


def _choose_auto(vocab: Vocabulary, choices: str) -> dict[str, Any]:
    """``auto``: the first built-in family whose markers the tokenizer has, then the profile derived from its
    chat template, that labels the template's renderings exactly; else an error naming the closest."""
    from .verify import ProbesUnavailable, probe_renderings, verify

    where = f"--tokenizer {vocab.name}"
    if not vocab.chat_template:
        return {"error": f"{where}: has no chat template, so where its turns start cannot be learnt; pass the "
                         f"tokenizer that produced the dataset (with its chat template), or --template-profile "
                         f"with one of {choices}"}
    try:
        probes = probe_renderings(vocab)
    except ProbesUnavailable as exc:
        return {"error": f"{where}: its chat template cannot be verified ({exc}); pass --template-profile with one "
                         f"of {choices} to force a family"}
    tried: list[tuple[str, Any]] = []
    for family, profile in available_builtins(vocab).items():
        verdict = verify(profile, probes, vocab)
        if verdict.ok:
            return _chosen(profile, f"built-in {family} (labels {verdict.renderings} template renderings exactly)",
                           verdict, probes, vocab)
        tried.append((f"built-in {family}", verdict))
    try:
        derived = cached_derivation(vocab)
    except DerivationFailed as exc:
        derived_note = f"derivation failed: {exc}"
    else:
        verdict = verify(derived, probes, vocab)
        if verdict.ok:
            return _chosen(derived, f"derived from the chat template (labels {verdict.renderings} template renderings "
                           "exactly)", verdict, probes, vocab)
        tried.append(("the derived profile", verdict))
        derived_note = ""
    return _no_profile_error(where, choices, tried, derived_note)


def _no_profile_error(where: str, choices: str, tried: list[tuple[str, Any]], derived_note: str) -> dict[str, Any]:
    """The error of an ``auto`` choice nothing passed: why derivation failed, if it did, then the closest
    candidate's mislabelled tokens and first disagreement."""
    closest = min(tried, key=lambda t: t[1].mismatches) if tried else None
    parts = [derived_note] if derived_note else []  # what could not be learnt comes first: it is the cause
    if closest is not None:
        parts.append(f"closest: {closest[0]}, {closest[1].mismatches} mislabelled tokens, "
                     f"first at {closest[1].first}")
    return {"error": f"{where}: no template profile labels its chat template's renderings exactly ("
                     + "; ".join(parts or ["no built-in family has its special tokens"])
                     + f"); pass the tokenizer that produced the dataset, or --template-profile with one of "
                       f"{choices} if you know the family"}


def _tags(vocab: Vocabulary, profile: TemplateProfile) -> dict[str, Any] | None:
    """Where the template's generation tags put supervision ({"keys", "note"} or {"error"}), None without tags."""
    from .tags import tag_policy

    try:
        found = tag_policy(SpanOracle(profile, "", CompiledProfile(profile, vocab.newline_lead)), vocab)
    except UsageProblem as exc:
        return {"error": str(exc)}
    if found is None:
        return None
    keys, note = found
    return {"keys": {k: (list(v) if isinstance(v, tuple) else bool(v) if not isinstance(v, str) else v)
                     for k, v in keys.items()}, "note": note}


def generation_prompts(vocab: Vocabulary) -> tuple[tuple[int, ...], ...]:
    """Every token run the template's generation prompt can be, after a user message and after a tool
    message, with ``enable_thinking`` on and off where the template reads it.

    The prompt is what ``add_generation_prompt=True`` adds to the rendering, tokenized in place
    (the longest common token prefix of the two renderings is cut off). A context the template
    rejects is skipped; a prompt that rewrites the history before it is ignored.
    """
    if not vocab.chat_template:
        return ()
    switches: list[dict[str, Any]] = [{}]
    if "enable_thinking" in vocab.chat_template:
        switches += [{"enable_thinking": True}, {"enable_thinking": False}]
    out: dict[tuple[int, ...], None] = {}
    for messages, tl in PROMPT_CONTEXTS:
        for sw in switches:
            try:
                base = vocab.render_chat(messages, tools=tl, add_generation_prompt=False, **sw)
                full = vocab.render_chat(messages, tools=tl, add_generation_prompt=True, **sw)
            except Exception:  # templates raise anything on a context they do not take
                continue
            if not full.startswith(base) and not _ends_the_conversation(base, full, messages[-1]):
                continue
            a, b = vocab.encode_with_offsets(base)[0], vocab.encode_with_offsets(full)[0]
            out[tuple(b[common_prefix_length(a, b):])] = None
    return tuple(out)


def _ends_the_conversation(base: str, full: str, last: dict[str, Any]) -> bool:
    """The rendering without the prompt parts from the one with it only after the last message: the template
    closes a finished conversation with a suffix of its own (Phi-3 appends ``<|endoftext|>``), which the prompt
    replaces. History before that point is the same, so what the prompt adds is still its tokens after the
    common prefix."""
    k = common_prefix_length(base, full)
    content = last.get("content")
    if not isinstance(content, str) or not content:
        return False
    at = base.rfind(content)
    return at >= 0 and at + len(content) <= k


def _choice(vocab: Vocabulary, name: str) -> dict[str, Any]:
    """The cached choice for ``--template-profile name``: {"profile", "how", "verification", "prompts", "tags"};
    UsageProblem with the one line that says why when no profile can be used."""
    def compute() -> dict[str, Any]:
        doc = _choose_uncached(vocab, name)
        if "error" not in doc:
            doc["prompts"] = [list(p) for p in generation_prompts(vocab)]
            doc["tags"] = _tags(vocab, TemplateProfile.from_json(doc["profile"]))
        return doc

    doc = _cache(vocab, name).get(compute)
    if "error" in doc:
        raise UsageProblem(doc["error"])
    return doc


def _verification(doc: dict[str, Any]) -> Verification:
    return Verification.from_doc(doc.get("verification", {}), doc.get("tags"))


def choose_profile(vocab: Vocabulary, name: str = AUTO) -> tuple[TemplateProfile, str, Verification]:
    """The verified profile for ``--template-profile name``, a line saying how it was chosen, and the verification."""
    doc = _choice(vocab, name)
    return TemplateProfile.from_json(doc["profile"]), doc["how"], _verification(doc)


def make_oracle(vocab: Vocabulary, name: str = AUTO) -> SpanOracle:
    """The span oracle for ``--template-profile name`` (``auto``: the first profile that labels the template's
    own renderings exactly), cached per tokenizer, template and labelling code."""
    doc = _choice(vocab, name)
    profile = TemplateProfile.from_json(doc["profile"])
    prompts = tuple(tuple(p) for p in doc.get("prompts", []))
    return SpanOracle(profile, doc["how"], CompiledProfile(profile, vocab.newline_lead), _verification(doc), prompts,
                      vocab.newline_lead)


def oracle_for_profile(profile: TemplateProfile, vocab: Vocabulary, how: str = "given") -> SpanOracle:
    """An oracle for a profile the caller already holds (tests, explanations of a fixed family)."""
    return SpanOracle(profile, how, CompiledProfile(profile, vocab.newline_lead), Verification(),
                      generation_prompts(vocab), vocab.newline_lead)
