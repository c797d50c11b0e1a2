"""The pytest11 entry point: every option, and nothing heavy.

pytest loads this module in every run of every environment the package is installed in,
including runs that have nothing to do with datasets. So it imports only the standard
library and pytest, and registers the real plugin (``drafter_contracts.run.plugin``: engine,
reports, numpy, pyarrow, the tokenizer) only when ``--dataset-path`` or ``--masker`` is given.

Before that it checks every value it can without heavy imports (numbers, paths, the report
folder, the tokenizer's files, the contract file, the masker's name; ``run/option_checks.py``, which
the plugin reads the parsed values from), so bad input is one ``ERROR:`` line and exit code 4
within about a second, never after minutes of work and never pytest's usage block: options that
take numbers are declared as strings and parsed there.
"""

from __future__ import annotations

import importlib

import pytest

from . import option_help
from ..contract_families import families
from ..decoded_rows import DEFAULT_EXAMPLES
from .option_checks import RunOptions, run_options
from .option_help import listed, listed_append

PLUGIN = "drafter_contracts.run.plugin"


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("drafter-contracts", "data contracts for tokenized drafter datasets")
    g.addoption("--dataset-path", metavar="DIR",
                help="folder written by datasets.save_to_disk; runs the contract suite on it")
    g.addoption("--contract", metavar="FILE.toml", action=listed(option_help.builtin_contracts),
                help="contract file (write one with 'drafter-contracts init') or built-in name (default: generic).")
    g.addoption("--tokenizer", metavar="DIR_OR_NAME",
                help="tokenizer folder (holding tokenizer.json), a model name in the local cache, or builtin:qwen3.6")
    g.addoption("--skip-contract", metavar="NAME[,NAME]", action=listed_append(option_help.contract_names),
                help="turn contracts off by name, repeatable (or a group); they are reported as "
                     "not checked, in words on the verdict line. Without it, a contract the gate requires that "
                     "cannot run (no tokenizer) stops the run (exit 4).")
    g.addoption("--expected-count", metavar="N", help="expected number of rows")
    g.addoption("--count-tolerance", metavar="N|P%",
                help="allowed distance from --expected-count: rows or a percentage")
    g.addoption("--min-len", metavar="N", help="smallest allowed seq_len")
    g.addoption("--max-len", metavar="N", help="largest allowed seq_len (the truncation cap)")
    g.addoption("--min-supervised", metavar="N", help="fewest supervised tokens a row may have")
    g.addoption("--allow-extra-columns", action="store_true", default=None,
                help="accept columns the contract's [schema] does not declare")
    g.addoption("--shard-size", metavar="ROWS", help="rows per shard (the unit xdist spreads)")
    g.addoption("--max-shard-tokens", metavar="N", help="tokens per shard at most (bounds a worker's memory)")
    g.addoption("--report-dir", metavar="DIR", default="reports",
                help="where summary.json, violations.parquet, report.html and junit.xml go (default: reports/)")
    g.addoption("--only-failing", action="store_true", default=False,
                help="the terminal summary lists only failing, incomplete and required-but-unchecked contracts "
                     "(the verdict line still counts every contract)")
    g.addoption("--examples", metavar="N",
                help=f"violating rows decoded per contract in the terminal and report.html "
                     f"(default: {DEFAULT_EXAMPLES}; 0: none, the rows still listed by index)")
    g.addoption("--mask-policy", metavar="KEY=VALUE", action="append",
                help="override one [mask] policy key of the contract, repeatable "
                     "(e.g. --mask-policy completeness=all --mask-policy end_of_turn=true)")
    g.addoption("--save-baseline", metavar="FILE",
                help="write the dataset's profile to FILE (compare later with --baseline)")
    g.addoption("--baseline", metavar="FILE", help="compare the dataset with a profile saved by --save-baseline; "
                                                   "thresholds from the contract's [baseline] table")
    g.addoption("--token-freq", metavar="FILE",
                help="token_freq.pt to check (default: the one beside the dataset, if any)")
    g.addoption("--template-profile", metavar="NAME|auto", action=listed(option_help.template_profiles),
                help="chat template family of the tokenizer: auto (derive from its chat_template) or a built-in.")
    g.addoption("--dataset-split", metavar="NAME", help="split to check when the dataset is a saved DatasetDict")
    g.addoption("--split", metavar="K/N", help="check only the K-th of N disjoint shard groups (one machine of N); "
                "join the N summary.json files with 'drafter-contracts merge-reports'")
    g.addoption("--masker", metavar="hf|speculators|MODULE:FUNCTION",
                help="run the template -> mask properties against this masker "
                     "(profile: --hypothesis-profile ci|thorough)")
    g.addoption("--chat-template", metavar="FILE",
                help="generation-tagged chat template for --masker=hf and the probe property")
    g.addoption("--speculators-path", metavar="DIR",
                help="pip --target folder holding the speculators to test (default: $DRAFTER_SPECULATORS_PATH)")
    for family in families():  # each contract family's own options
        if family.add_options is not None:
            family.add_options(g)


def active(config: pytest.Config) -> bool:
    """Whether this run is the tool's: a dataset to check or a masker to test."""
    return bool(config.getoption("dataset_path", None) or config.getoption("masker", None))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    for family in families():
        problem = family.needs_dataset(config) if family.needs_dataset is not None else None
        if problem:
            raise pytest.UsageError(problem)
    if active(config):
        opts = run_options(config)  # first: a usage error must not wait for hypothesis's import (1-4 s)
        if opts.dataset is not None and not hasattr(config, "workerinput"):
            from .worker_count import NOTE_KEY, cap_explicit

            note = cap_explicit(config, planned_shards(opts))  # before xdist starts its workers (trylast)
            if note:
                config.stash[NOTE_KEY] = note
    if config.getoption("masker", None) or config.getoption("hypothesis_profile", None):
        # Before hypothesis's own pytest_configure loads --hypothesis-profile (this hook is tryfirst).
        from ..hypothesis_settings import register_profiles

        register_profiles()
    if active(config):
        # pytest_configure is a historic hook: the plugin's own pytest_configure runs on registration.
        config.pluginmanager.register(importlib.import_module(PLUGIN), PLUGIN)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` on a dataset: no more workers than shards (none for one shard: it runs in-process)."""
    if not config.getoption("dataset_path", None) or hasattr(config, "workerinput"):
        return None
    from .worker_count import auto_workers

    return auto_workers(planned_shards(run_options(config)))


def planned_shards(opts: RunOptions) -> int:
    """How many shards this run will check (the plan the engine makes, from metadata and offsets)."""
    from ..dataset.reader import plan_shards, shard_groups

    ds, c = opts.dataset, opts.contract
    lengths = ds.row_lengths()
    shards = plan_shards(ds.num_rows, c.shard_size, lengths, c.max_shard_tokens)
    if opts.split is not None:
        shards = shard_groups(shards, lengths, opts.split[1])[opts.split[0] - 1]
    return len(shards)
