"""The hidden-state family as the core sees it (``contract_families.ContractFamily``): its options, its
``[hidden_states]`` table, the folder its contracts read and its report sections.

Standard library at module level only (``policy.py`` is too): the entry point reads ``add_options`` in every
pytest run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..contract_families import ContractFamily
from .policy import NAME, parse_policy


@dataclass(frozen=True)
class HiddenOptions:
    """The hidden-states command line, typed (``parse_options``; checked in ``check_options``)."""

    folder: Path | None = None  # --hidden-states, or DATASET/hidden_states when it exists
    verify_model: Path | None = None
    verify_rows: int = 0
    headers_only: bool = False


def add_options(group: Any) -> None:
    group.addoption("--hidden-states", metavar="HS_DIR", help="folder of hs_{i}.safetensors files, one per dataset row "
                    "(default: DATASET/hidden_states when it exists); runs the hidden-state contracts")
    group.addoption("--hs-headers-only", action="store_true", default=False,
                    help="hidden states: only the header pass (coverage, header, alignment, shape), "
                         "no tensor data read")
    group.addoption("--hs-verify-model", metavar="DIR", help="hidden states: the target model (transformers folder) "
                    "to recompute --hs-verify-rows sampled rows with, on CPU")
    group.addoption("--hs-verify-rows", metavar="N", help="hidden states: rows the spot recompute samples (default 8)")


def needs_dataset(config: Any) -> str | None:
    if config.getoption("hidden_states", None) and not config.getoption("dataset_path", None):
        return "--hidden-states HS_DIR: needs --dataset-path DIR (the dataset whose rows the files hold)"
    return None


def parse_options(config: Any) -> HiddenOptions:
    """One stat for the default folder; no file is read."""
    from ..option_values import parse_int

    opt = config.getoption
    raw = opt("hidden_states", None)
    folder = None
    if raw:
        folder = Path(raw).expanduser()
    elif opt("dataset_path", None):
        beside = Path(opt("dataset_path")).expanduser() / "hidden_states"
        folder = beside if beside.is_dir() else None
    rows = parse_int(opt("hs_verify_rows", None), "--hs-verify-rows", 1)
    model = opt("hs_verify_model", None)
    return HiddenOptions(folder, Path(model).expanduser() if model else None,
                         rows if rows is not None else (8 if model else 0), bool(opt("hs_headers_only", False)))


def check_options(config: Any, opts: HiddenOptions, contract: Any) -> None:
    from ..errors import UsageProblem

    policy = contract.families.get(NAME)
    opt = config.getoption
    if opts.folder is not None and not opts.folder.is_dir():
        raise UsageProblem(f"--hidden-states {opt('hidden_states')}: "
                           + ("is a file, not a folder" if opts.folder.exists() else "no such folder")
                           + "; pass the folder holding hs_{i}.safetensors (one file per row)")
    model = opts.verify_model
    if model is not None and not (model / "config.json").is_file():
        raise UsageProblem(f"--hs-verify-model {opt('hs_verify_model')}: " + ("no config.json in it" if model.is_dir()
                           else "no such folder") + "; pass the target model's transformers folder")
    if opt("hs_verify_rows", None) and model is None:
        raise UsageProblem("--hs-verify-rows N: needs --hs-verify-model DIR (the model to recompute the rows with)")
    if opts.folder is None and (model is not None or opts.headers_only):
        raise UsageProblem("--hs-verify-model / --hs-headers-only: no hidden-states folder; "
                           "pass --hidden-states HS_DIR")
    if opts.folder is not None and policy is not None and policy.config and not Path(policy.config).is_file():
        raise UsageProblem(f"contract {contract.source}: [hidden_states] config {policy.config}: no such file; "
                           "pass a speculator's or the target model's config.json")


def open_input(config: Any, opts: HiddenOptions, dataset: Any, contract: Any) -> Any:
    """The folder's HiddenRun (None without a folder: the family's contracts are left out)."""
    if opts.folder is None:
        return None
    from .run import open_run

    return open_run(opts.folder, dataset, contract.families.get(NAME), verify_model=opts.verify_model,
                    verify_rows=opts.verify_rows, headers_only=opts.headers_only)


def parse_table(body: Any, where: str, contract_file: Path | None) -> Any:
    return parse_policy(body, where, contract_file)


def terminal_lines(summary: dict[str, Any]) -> list[str]:
    from .report import terminal_lines as lines

    return lines(summary)


def html_section(summary: dict[str, Any]) -> str:
    from .report import html_section as section

    return section(summary)


FAMILY = ContractFamily(
    name=NAME, contract_modules=("drafter_contracts.hidden.contracts",), table="hidden_states", parse_table=parse_table,
    add_options=add_options, parse_options=parse_options, needs_dataset=needs_dataset, check_options=check_options,
    open_input=open_input, missing="no hidden-states folder: pass --hidden-states DIR",
    describe=lambda run: run.describe(), terminal_lines=terminal_lines, html_section=html_section, html_place="end")
