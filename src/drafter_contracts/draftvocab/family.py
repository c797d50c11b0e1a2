"""The draft-vocabulary family as the core sees it (``contract_families.ContractFamily``): ``--vocab-mapping``, the
``[vocab]`` table, the mapping its contracts read, its report.html section and what init pins (``pins``).

Standard library at module level only (``policy.py`` is too): the entry point reads ``add_options`` in every
pytest run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..contract_families import ContractFamily, InitHooks
from .policy import NAME, VocabPolicy, check_mapping_path, parse_policy


def add_options(group: Any) -> None:
    group.addoption("--vocab-mapping", metavar="FILE", help="draft vocabulary to check: vocab_mapping.pt "
                    "({'d2t','t2d'}) or one file of a d2t-N.npy / t2d-N.npy pair (default: the pair beside the "
                    "dataset, if any)")


def parse_options(config: Any) -> str | None:
    return config.getoption("vocab_mapping", None)


def check_options(config: Any, option: str | None, contract: Any) -> None:
    if option:
        check_mapping_path(option, "--vocab-mapping")


def open_input(config: Any, option: str | None, dataset: Any, contract: Any) -> Any:
    from .files import locate

    return locate(dataset.path, option, contract.families.get(NAME) or VocabPolicy())


def parse_table(body: Any, where: str, contract_file: Path | None) -> Any:
    return parse_policy(body, where, contract_file)


def html_section(summary: dict[str, Any]) -> str:
    from .report import html_section as section

    return section(summary)


def add_init_arguments(parser: Any) -> None:
    parser.add_argument("--vocab-mapping", metavar="FILE", help="draft vocabulary to pin (default: the d2t-N.npy / "
                        "t2d-N.npy pair beside the dataset, if any)")


def init_option(args: Any) -> str | None:
    return getattr(args, "vocab_mapping", None)


def check_init_option(option: str | None) -> None:
    if option:
        check_mapping_path(option, "init --vocab-mapping")


def _init_hook(name: str) -> Any:
    """A hook of ``pins`` imported when init calls it (numpy stays out of every pytest start)."""
    def call(*args: Any) -> Any:
        from . import pins

        return getattr(pins, name)(*args)
    call.__name__ = name
    return call


INIT = InitHooks(add_arguments=add_init_arguments, option=init_option, check=check_init_option,
                 **{hook: _init_hook(hook) for hook in ("section", "open_input", "shard", "pins")})

FAMILY = ContractFamily(
    name=NAME, contract_modules=("drafter_contracts.draftvocab.contracts",),
    after="drafter_contracts.checks.token_freq", table="vocab", parse_table=parse_table, add_options=add_options,
    parse_options=parse_options, check_options=check_options, open_input=open_input, html_section=html_section,
    html_place="dataset", init=INIT)
