"""What one ``--masker`` run needs, built once from the command line: masker, tokenizer, oracle.

Built in ``pytest_configure`` (so a bad option is a usage error, exit 4) and read by
the packaged properties suite through a fixture.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from ..errors import UsageProblem
from ..maskers import Masker
from ..maskers.hf import has_generation_tags
from ..maskers.loader import load_masker
from ..maskers.oracle import Oracle, resolve_policy, with_template
from ..spans import make_oracle
from .markers import TemplateMarkers, template_markers
from ..tokenizer.vocabulary import load_vocabulary

CONTEXT_KEY = pytest.StashKey["PropertyContext"]()
SUITE_DIR = Path(__file__).resolve().parent


class PropertyContext:
    """Not a dataclass on purpose: hypothesis prints fixtures with each falsifying example, by their repr."""

    def __init__(self, masker: Masker, tokenizer: Any, tokenizer_name: str, oracle: Oracle,
                 tagged_template: str | None, policy_source: str,
                 markers: TemplateMarkers = TemplateMarkers(())) -> None:
        self.masker = masker
        self.tokenizer = tokenizer  # a transformers tokenizer whose chat template is the one the masker renders with
        self.tokenizer_name = tokenizer_name
        self.oracle = oracle  # built for that template: its profile, generation prompts and tags
        self.tagged_template = tagged_template  # a generation-tagged copy of the template, for the probe property
        self.policy_source = policy_source
        self.markers = markers  # the template's assistant header strings the strategies type into user text
        opener = masker.turn_opener(tokenizer) if masker.turn_opener is not None else None
        #: the typed headers that hold what the masker takes for a turn opener (all of them without one)
        self.opener_headers = tuple(h for h in markers.headers if opener is None or opener in h)
        self.notes: dict[str, str] = {}  # precondition -> why a run cannot draw it, for "not exercised"
        if opener is not None and not self.opener_headers:
            self.notes["assistant_header_in_text"] = (
                f"the masker opens a turn on {opener!r}, which none of the template's typeable headers "
                f"({', '.join(map(repr, markers.headers)) or 'none'}) holds: typing it would forge a whole turn, "
                "which no oracle can tell from a real one")

    def __repr__(self) -> str:
        return f"<{self.describe()}>"

    def describe(self) -> str:
        return (f"masker {self.masker.name} ({self.masker.version or 'no version'}), tokenizer {self.tokenizer_name}, "
                f"template profile {self.oracle.spans.profile.name}, policy from {self.policy_source}: "
                f"{self.oracle.describe_policy()}; assistant header typed into user text: {self.markers.describe()}")

    def with_template(self, template: str) -> Any:
        """A copy of the tokenizer whose own chat template is ``template`` (shares the backend)."""
        tok = copy.copy(self.tokenizer)
        tok.chat_template = template
        return tok


def _tagged_template(tokenizer: Any, explicit: str | None) -> str | None:
    if explicit:
        return Path(explicit).expanduser().read_text("utf-8")
    own = getattr(tokenizer, "chat_template", None)
    if has_generation_tags(own):
        return own
    from ..tokenizer.trl_templates import training_variant

    return training_variant(own)


def build_context(config: pytest.Config) -> PropertyContext:
    """Everything from the options; UsageProblem on bad input."""
    from ..run.option_checks import load_contract_options, run_options

    opt = config.getoption
    opts = run_options(config)  # contract and tokenizer name, checked before this (option_checks.check_inputs)
    if not opts.checked:  # an xdist worker: the controller checked the inputs
        load_contract_options(config, opts, masker=True)
    return make_context(opt("masker"), opts.tokenizer, opts.contract, explicit_contract=bool(opt("contract")),
                        chat_template=opt("chat_template"), speculators_path=opt("speculators_path"))


def make_context(masker_spec: str, name: str, contract: Any, *, explicit_contract: bool = False,
                 chat_template: str | None = None, speculators_path: str | None = None) -> PropertyContext:
    """The context for one masker on one tokenizer (``name`` as ``--tokenizer`` takes it), callable without
    pytest: the tests and benchmarks build it for each real template in one process."""
    vocab = load_vocabulary(name)
    tokenizer = copy.copy(vocab.hf_tokenizer)  # the runtime's one loader (its fallbacks for older transformers)
    if vocab.chat_template is not None:  # the folder's template is the one under test, as every rendering passes it
        tokenizer.chat_template = vocab.chat_template
    if not getattr(tokenizer, "chat_template", None):
        raise UsageProblem(f"--tokenizer {name}: has no chat template; "
                           "the properties compare against the tokenizer's own rendering")
    masker = load_masker(masker_spec, tokenizer, chat_template=chat_template, speculators_path=speculators_path)
    if masker.chat_template is not None and masker.chat_template != tokenizer.chat_template:
        # the rows are rendered with the masker's template (hf's tagged copy): so are the reference and the oracle
        tokenizer = copy.copy(tokenizer)
        tokenizer.chat_template = masker.chat_template
    vocab = with_template(vocab, masker.chat_template)
    spans = make_oracle(vocab)  # UsageProblem (exit 4) when no profile labels this template's renderings
    convention = masker.convention
    if convention is None and masker.turns == "last":
        convention = "speculators-per-turn"  # a per-turn producer that names no convention
    policy, source = resolve_policy(contract, spans, vocab, convention, dict(masker.mask_policy), explicit_contract)
    oracle = Oracle(vocab, policy, spans)
    return PropertyContext(masker, tokenizer, name, oracle, _tagged_template(tokenizer, chat_template), source,
                           template_markers(tokenizer, oracle))
