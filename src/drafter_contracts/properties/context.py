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
from ..maskers.oracle import Oracle, policy_from
from ..tokenizer_source import BUILTIN_PREFIX, resolve_tokenizer
from ..vocab import load_vocabulary

CONTEXT_KEY = pytest.StashKey["PropertyContext"]()
SUITE_DIR = Path(__file__).resolve().parent


class PropertyContext:
    """Not a dataclass on purpose: hypothesis prints fixtures with each falsifying example, by their repr."""

    def __init__(self, masker: Masker, tokenizer: Any, tokenizer_name: str, oracle: Oracle,
                 tagged_template: str | None, policy_source: str) -> None:
        self.masker = masker
        self.tokenizer = tokenizer  # a transformers tokenizer carrying the model's own (stock) chat template
        self.tokenizer_name = tokenizer_name
        self.oracle = oracle
        self.tagged_template = tagged_template  # a generation-tagged copy of the template, for the probe property
        self.policy_source = policy_source

    def __repr__(self) -> str:
        return f"<{self.describe()}>"

    def describe(self) -> str:
        return (f"masker {self.masker.name} ({self.masker.version or 'no version'}), tokenizer {self.tokenizer_name}, "
                f"turns={self.masker.turns}, policy {self.oracle.policy} from {self.policy_source}")

    def with_template(self, template: str) -> Any:
        """A copy of the tokenizer whose own chat template is ``template`` (shares the backend)."""
        tok = copy.copy(self.tokenizer)
        tok.chat_template = template
        return tok


def _tokenizer_dir(name: str) -> str:
    """The folder transformers loads: the built-in's, or where tokenizer_source found tokenizer.json."""
    source = resolve_tokenizer(name)
    if source.startswith(BUILTIN_PREFIX):
        from ..fixtures.tokenizer import qwen36_tokenizer_dir

        return str(qwen36_tokenizer_dir())
    return str(Path(source).parent)


def _tagged_template(tokenizer: Any, explicit: str | None) -> str | None:
    if explicit:
        return Path(explicit).expanduser().read_text("utf-8")
    own = getattr(tokenizer, "chat_template", None)
    if has_generation_tags(own):
        return own
    from ..fixtures.generate import tagged_template
    from ..fixtures.tokenizer import strip_generation_tags

    builtin = tagged_template()
    return builtin if own is not None and strip_generation_tags(builtin) == own else None


def build_context(config: pytest.Config) -> PropertyContext:
    """Everything from the options; UsageProblem on bad input."""
    from ..options import load_contract_options, run_options

    opt = config.getoption
    opts = run_options(config)  # contract and tokenizer name, checked before this (options.check_inputs)
    if not opts.checked:  # an xdist worker: the controller checked the inputs
        load_contract_options(config, opts, masker=True)
    contract, name = opts.contract, opts.tokenizer
    vocab = load_vocabulary(name)
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(_tokenizer_dir(name), local_files_only=True)
    except Exception as exc:  # noqa: BLE001 (transformers raises many types)
        raise UsageProblem(f"--tokenizer {name}: cannot be loaded by transformers ({exc}); pass a tokenizer directory") from None
    if not getattr(tokenizer, "chat_template", None):
        raise UsageProblem(f"--tokenizer {name}: has no chat template; the properties compare against the tokenizer's own rendering")
    masker = load_masker(opt("masker"), tokenizer, chat_template=opt("chat_template"),
                         speculators_path=opt("speculators_path"))
    if opt("contract"):
        policy, source = contract.mask, f"--contract {opt('contract')}"
    else:
        policy = policy_from(masker.mask_policy, contract.mask)
        source = f"the masker's declared policy over {contract.name}" if masker.mask_policy else contract.name
    return PropertyContext(masker, tokenizer, name, Oracle.build(vocab, policy),
                           _tagged_template(tokenizer, opt("chat_template")), source)
