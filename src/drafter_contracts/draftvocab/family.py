"""The draft-vocabulary family as the core sees it (``contract_families.ContractFamily``): ``--vocab-mapping``, the
``[vocab]`` table, the mapping its contracts read and its report.html section.

Standard library at module level only: the entry point reads ``add_options`` in every pytest run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..contract_families import ContractFamily

#: ``Engine.inputs`` key of the mapping source (always there: an absent mapping skips the contracts, saying why).
NAME = "draft_vocab"


def add_options(group: Any) -> None:
    group.addoption("--vocab-mapping", metavar="FILE", help="draft vocabulary to check: vocab_mapping.pt ({'d2t','t2d'}) "
                    "or one file of a d2t-N.npy / t2d-N.npy pair (default: the pair beside the dataset, if any)")


def parse_options(config: Any) -> str | None:
    return config.getoption("vocab_mapping", None)


def check_options(config: Any, option: str | None, contract: Any) -> None:
    if option:
        from .policy import check_mapping_path

        check_mapping_path(option, "--vocab-mapping")


def open_input(config: Any, option: str | None, dataset: Any, contract: Any) -> Any:
    from .files import locate

    from .policy import VocabPolicy

    return locate(dataset.path, option, contract.families.get(NAME) or VocabPolicy())


def parse_table(body: Any, where: str, contract_file: Path | None) -> Any:
    from .policy import parse_policy

    return parse_policy(body, where, contract_file)


def html_section(summary: dict[str, Any]) -> str:
    from .report import html_section as section

    return section(summary)


FAMILY = ContractFamily(
    name=NAME, contract_modules=("drafter_contracts.draftvocab.contracts",), after="drafter_contracts.checks.token_freq",
    table="vocab", parse_table=parse_table, add_options=add_options, parse_options=parse_options,
    check_options=check_options, open_input=open_input, html_section=html_section, html_place="dataset")
