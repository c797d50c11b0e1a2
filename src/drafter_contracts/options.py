"""The pytest11 entry point: every option, the checks of their values, and nothing heavy.

pytest loads this module in every run of every environment the package is installed in,
including runs that have nothing to do with datasets. So it imports only the standard
library and pytest, and registers the real plugin (``drafter_contracts.plugin``: engine,
reports, numpy, pyarrow, the tokenizer) only when ``--dataset-path`` or ``--masker`` is given.

Before that it checks every value it can without heavy imports (numbers, paths, the report
folder, the tokenizer's files, the contract file, the masker's name), so bad input is one
``ERROR:`` line and exit code 4 within about a second, never after minutes of work and never
pytest's usage block: options that take numbers are declared as strings and parsed here.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from . import option_help
from .contract_families import families
from .decoded_rows import DEFAULT_EXAMPLES
from .option_help import listed, listed_append
from .option_values import parse_int, parse_split

PLUGIN = "drafter_contracts.plugin"
BUILTIN_MASKERS = ("hf", "speculators")
#: Options that take an integer: (name, smallest allowed value).
INT_OPTIONS = (("expected_count", 0), ("min_len", 0), ("max_len", 0), ("min_supervised", 0),
               ("shard_size", 1), ("max_shard_tokens", 1))


@dataclass
class RunOptions:
    """The command line, parsed and checked once (on the controller; workers only parse)."""

    overrides: dict[str, Any] = field(default_factory=dict)  # typed, for contract.load_contract
    split: tuple[int, int] | None = None
    report_dir: Path | None = None
    contract_path: Path | None = None
    contract: Any = None  # contract.Contract, loaded with the overrides applied
    dataset: Any = None  # dataset.SavedDataset, opened (metadata only)
    tokenizer: str | None = None  # the name load_vocabulary receives (a relative contract path made absolute)
    checked: bool = False
    families: dict[str, Any] = field(default_factory=dict)  # family name -> its parse_options (contract_families.py)
    examples: int = DEFAULT_EXAMPLES  # --examples N: violating rows decoded per contract (decoded_rows.py)


RUN_KEY = pytest.StashKey[RunOptions]()


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
            from .workers import NOTE_KEY, cap_explicit

            note = cap_explicit(config, planned_shards(opts))  # before xdist starts its workers (trylast)
            if note:
                config.stash[NOTE_KEY] = note
    if config.getoption("masker", None) or config.getoption("hypothesis_profile", None):
        # Before hypothesis's own pytest_configure loads --hypothesis-profile (this hook is tryfirst).
        from .hypothesis_settings import register_profiles

        register_profiles()
    if active(config):
        # pytest_configure is a historic hook: the plugin's own pytest_configure runs on registration.
        config.pluginmanager.register(importlib.import_module(PLUGIN), PLUGIN)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` on a dataset: no more workers than shards (none for one shard: it runs in-process)."""
    if not config.getoption("dataset_path", None) or hasattr(config, "workerinput"):
        return None
    from .workers import auto_workers

    return auto_workers(planned_shards(run_options(config)))


def planned_shards(opts: RunOptions) -> int:
    """How many shards this run will check (the plan the engine makes, from metadata and offsets)."""
    from .dataset import plan_shards, shard_groups

    ds, c = opts.dataset, opts.contract
    lengths = ds.row_lengths()
    shards = plan_shards(ds.num_rows, c.shard_size, lengths, c.max_shard_tokens)
    if opts.split is not None:
        shards = shard_groups(shards, lengths, opts.split[1])[opts.split[0] - 1]
    return len(shards)


def run_options(config: pytest.Config) -> RunOptions:
    """Parse (every process) and check (the controller, once) the command line; exit 4 on bad input."""
    from .errors import UsageProblem

    opts = config.stash.get(RUN_KEY, None)
    if opts is None:
        opts = RunOptions()
        config.stash[RUN_KEY] = opts
        try:
            parse_values(config, opts)
            if not hasattr(config, "workerinput"):
                check_inputs(config, opts)
        except UsageProblem as exc:
            del config.stash[RUN_KEY]
            raise pytest.UsageError(str(exc)) from None
    return opts


def parse_values(config: pytest.Config, opts: RunOptions) -> None:
    """Typed values from the raw strings (no file is touched)."""
    from .contract import parse_mask_overrides

    opt = config.getoption
    over: dict[str, Any] = {}
    for name, lowest in INT_OPTIONS:
        over[name] = parse_int(opt(name), "--" + name.replace("_", "-"), lowest)
    tol = opt("count_tolerance")
    if tol is not None:
        from .contract.file import Tolerance

        Tolerance.parse(tol, "--count-tolerance")
        over["count_tolerance"] = tol
    over["tokenizer"] = opt("tokenizer")
    over["mask"] = parse_mask_overrides(opt("mask_policy"))
    over["template_profile"] = opt("template_profile")
    over["allow_extra_columns"] = opt("allow_extra_columns")
    skipped = [n.strip() for raw in opt("skip_contract") or () for n in raw.split(",") if n.strip()]
    over["skip"] = tuple(skipped) if skipped else None
    opts.overrides = over
    examples = parse_int(opt("examples"), "--examples", 0, example=10)
    opts.examples = DEFAULT_EXAMPLES if examples is None else examples
    if opt("split") is not None:
        opts.split = parse_split(opt("split"))
    opts.report_dir = Path(opt("report_dir")).expanduser().resolve()
    opts.families = {f.name: f.parse_options(config) for f in families() if f.parse_options is not None}


def check_inputs(config: pytest.Config, opts: RunOptions) -> None:
    """Every input that can be wrong, checked before any work: files, folders, names."""
    from .errors import UsageProblem

    opt = config.getoption
    if opt("masker"):
        if opt("dataset_path"):
            raise UsageProblem("--masker and --dataset-path run different suites; run them one at a time")
        check_masker(opt("masker"))
        for name, what in (("chat_template", "a chat template file"),):
            if opt(name) and not Path(opt(name)).expanduser().is_file():
                raise UsageProblem(f"--chat-template {opt(name)}: no such file; pass {what}")
        if opt("speculators_path") and not Path(opt("speculators_path")).expanduser().is_dir():
            raise UsageProblem(f"--speculators-path {opt('speculators_path')}: no such folder; pass the pip --target "
                               "folder speculators was installed into")
        load_contract_options(config, opts, masker=True)
        opts.checked = True
        return
    from .dataset import open_dataset

    opts.dataset = open_dataset(opt("dataset_path"), opt("dataset_split"))
    data = opts.dataset.given.resolve()  # the folder, or the one file named (its folder is the user's, not ours)
    report = opts.report_dir
    if report == data or data in report.parents:
        raise UsageProblem(f"--report-dir {report}: is inside the dataset folder; the dataset is read-only, "
                           "choose another folder")
    if not getattr(config.option, "collectonly", False):
        check_writable_dir(report, "--report-dir")
    for name in ("token_freq", "baseline"):
        value = opt(name)
        if value and not Path(value).expanduser().is_file():
            hint = ("the token_freq.pt written with the dataset" if name == "token_freq"
                    else "a file written by --save-baseline")
            raise UsageProblem(f"--{name.replace('_', '-')} {value}: no such file; pass {hint}")
    save = opt("save_baseline")
    if save:
        target = Path(save).expanduser().resolve()
        if target.is_dir():
            raise UsageProblem(f"--save-baseline {save}: is a directory; pass a file name")
        if data in target.parents:
            raise UsageProblem(f"--save-baseline {save}: is inside the dataset folder; the dataset is read-only, "
                               "choose another place")
        check_writable_dir(target.parent, "--save-baseline")
    load_contract_options(config, opts, masker=False)
    for family in families():
        if family.check_options is not None:
            family.check_options(config, opts.families.get(family.name), opts.contract)
    _ = opts.dataset.table  # open the Arrow files now: unreadable ones are usage errors, not test errors
    opts.checked = True


def load_contract_options(config: pytest.Config, opts: RunOptions, masker: bool) -> None:
    """The contract with the command line applied, and the tokenizer it names, resolved on disk."""
    from dataclasses import replace

    from .contract import EXAMPLE_CONTRACT, load_contract, resolve_contract_path
    from .tokenizer_source import BUILTIN_PREFIX, BUILTIN_TOKENIZERS, resolve_tokenizer

    raw = config.getoption("contract")
    opts.contract_path = resolve_contract_path(raw if raw is not None or not masker else EXAMPLE_CONTRACT)
    opts.contract = load_contract(opts.contract_path, opts.overrides)
    from_cli = config.getoption("tokenizer") is not None
    name = contract_relative(opts.contract.tokenizer, opts.contract_path, from_cli)
    if masker and name is None:
        name = f"{BUILTIN_PREFIX}{BUILTIN_TOKENIZERS[0]}"
    if name is None and opts.dataset is not None:
        name = found_tokenizer(opts)
    elif opts.contract.tokenizer is not None:  # the reports' first line says where the tokenizer came from
        how = "given with --tokenizer" if from_cli else "named in the contract"
        opts.contract = replace(opts.contract, tokenizer_how=how)
    if name is not None:
        resolve_tokenizer(name)
    opts.tokenizer = name


def found_tokenizer(opts: RunOptions) -> str | None:
    """Neither the command line nor the contract names a tokenizer: the one saved beside or above the dataset,
    if any, said in the summary (``Contract.tokenizer_how``)."""
    from dataclasses import replace

    from .tokenizer_source import discover_tokenizer

    found = discover_tokenizer(opts.dataset.path)
    if found is None:
        return None
    opts.contract = replace(opts.contract, tokenizer=str(found),
                            tokenizer_how="found beside the dataset; pass --tokenizer to choose another")
    return str(found)


def contract_relative(raw: str | None, contract_file: Path, from_cli: bool) -> str | None:
    """A relative tokenizer path in a contract file is relative to that file."""
    from .tokenizer_source import BUILTIN_PREFIX

    if raw is None or from_cli or raw.startswith(BUILTIN_PREFIX) or Path(raw).is_absolute():
        return raw
    candidate = (contract_file.parent / raw).resolve()
    return str(candidate) if candidate.exists() else raw


def check_writable_dir(folder: Path, option: str) -> None:
    """Create ``folder`` if needed and prove a file can be written there (as the reports will be)."""
    from .errors import UsageProblem

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageProblem(f"{option} {folder}: is a file, not a folder; "
                           "pass a folder the reports can be written to") from None
    except OSError as exc:
        raise UsageProblem(f"{option} {folder}: cannot be created ({exc.strerror}); "
                           "pass a folder you can write to") from None
    if not folder.is_dir():
        raise UsageProblem(f"{option} {folder}: is not a folder; pass a folder the reports can be written to")
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UsageProblem(f"{option} {folder}: not writable ({exc.strerror}); "
                           "pass a folder you can write to") from None


def check_masker(spec: str) -> None:
    """``hf``, ``speculators`` or ``module:function`` whose module can be found (not imported yet)."""
    from .errors import UsageProblem
    from .table_fields import did_you_mean

    if spec in BUILTIN_MASKERS:
        return
    module_part, sep, func = spec.rpartition(":")
    if not sep or not module_part or not func:
        raise UsageProblem(f"--masker {spec}: unknown masker{did_you_mean(spec, BUILTIN_MASKERS)}; use hf, "
                           "speculators or module:function "
                           "(f(conversation, tools, tokenizer, max_length) -> (input_ids, loss_mask))")
    if module_part.endswith(".py") or "/" in module_part:
        if not Path(module_part).expanduser().is_file():
            raise UsageProblem(f"--masker {spec}: no such file {module_part}; "
                               "pass module:function or path/to/file.py:function")
        return
    try:
        found = importlib.util.find_spec(module_part.split(".")[0]) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise UsageProblem(f"--masker {spec}: no module named {module_part.split('.')[0]!r} on the path; "
                           "is it installed or on PYTHONPATH?")
