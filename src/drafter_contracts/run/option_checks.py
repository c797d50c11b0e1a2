"""The command line, parsed and checked once (:func:`run_options`): typed values, the inputs on disk, the
contract with the command line applied and the tokenizer it names.

The entry point (``run/options.py``) calls it before any heavy import, so bad input is one ``ERROR:``
line and exit code 4; the plugin (``run/plugin.py``) and the masker suite (``properties/context.py``)
read the same parsed values. Like the entry point it imports only the standard library and pytest
at module level: what it checks with (the contract loader, the dataset's metadata, the tokenizer's
files) is imported where it is used.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ..contract_families import families
from ..decoded_rows import DEFAULT_EXAMPLES
from ..option_values import parse_int, parse_split

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


def run_options(config: pytest.Config) -> RunOptions:
    """Parse (every process) and check (the controller, once) the command line; exit 4 on bad input."""
    from ..errors import UsageProblem

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
    from ..contract import parse_mask_overrides

    opt = config.getoption
    over: dict[str, Any] = {}
    for name, lowest in INT_OPTIONS:
        over[name] = parse_int(opt(name), "--" + name.replace("_", "-"), lowest)
    tol = opt("count_tolerance")
    if tol is not None:
        from ..contract.file import Tolerance

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
    from ..errors import UsageProblem

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
    from ..dataset.reader import open_dataset

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

    from ..contract import EXAMPLE_CONTRACT, load_contract, resolve_contract_path
    from ..tokenizer.source import BUILTIN_PREFIX, BUILTIN_TOKENIZERS, resolve_tokenizer

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

    from ..tokenizer.source import discover_tokenizer

    found = discover_tokenizer(opts.dataset.path)
    if found is None:
        return None
    opts.contract = replace(opts.contract, tokenizer=str(found),
                            tokenizer_how="found beside the dataset; pass --tokenizer to choose another")
    return str(found)


def contract_relative(raw: str | None, contract_file: Path, from_cli: bool) -> str | None:
    """A relative tokenizer path in a contract file is relative to that file."""
    from ..tokenizer.source import BUILTIN_PREFIX

    if raw is None or from_cli or raw.startswith(BUILTIN_PREFIX) or Path(raw).is_absolute():
        return raw
    candidate = (contract_file.parent / raw).resolve()
    return str(candidate) if candidate.exists() else raw


def check_writable_dir(folder: Path, option: str) -> None:
    """Create ``folder`` if needed and prove a file can be written there (as the reports will be)."""
    from ..errors import UsageProblem

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
    from ..errors import UsageProblem
    from ..table_fields import did_you_mean

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
