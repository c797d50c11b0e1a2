"""Contract families plug into the core through ``families.ContractFamily`` alone.

The hidden-state and draft-vocabulary contracts are families: the core finds them, reads their
options, tables, inputs and report sections through the interface, and imports none of their
modules. The proof that a family touches no core file is a new one added to a copy of the
package: its option, its contract table, its contract, its summary.json section and its terminal
line all appear, and the core is byte-identical.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import read_summary
from test_import_layers import module_name
from test_layers import MODULES, SRC, imports

#: Core modules that still reach into a family's package, and what for (exact: a new one fails).
REACHES_INTO_A_FAMILY: dict[tuple[str, str], str] = {
    ("demo.dataset", "draftvocab"): "the demo writes the draft vocabulary its dataset selects",
}


def test_the_package_holds_two_families_and_their_contracts_follow_their_anchor() -> None:
    from drafter_contracts.checks.registry import CORE_MODULES, MODULES as REPORT_ORDER
    from drafter_contracts.contract_families import families, names, tables

    assert names() == {"draft_vocab", "hidden_states"}
    assert set(tables()) == {"vocab", "hidden_states"}
    for fam in families():
        at = REPORT_ORDER.index(fam.contract_modules[0])
        assert REPORT_ORDER[at:at + len(fam.contract_modules)] == fam.contract_modules
        anchor = CORE_MODULES.index(fam.after) if fam.after else len(CORE_MODULES) - 1
        assert REPORT_ORDER[at - 1] == CORE_MODULES[anchor] or REPORT_ORDER[at - 1] in {
            m for f in families() for m in f.contract_modules}


def test_no_core_module_imports_a_family() -> None:
    from drafter_contracts.contract_families import families

    packages = {f.contract_modules[0].split(".")[1] for f in families()}
    found: dict[tuple[str, str], list[int]] = {}
    for path in MODULES:
        me = module_name(path)
        if me.split(".")[0] in packages:
            continue
        for line, name in imports(path):
            parts = name.split(".")
            if parts[0] == "drafter_contracts" and len(parts) > 1 and parts[1] in packages:
                found.setdefault((me, parts[1]), []).append(line)
    assert set(found) == set(REACHES_INTO_A_FAMILY), found


def test_core_files_name_no_family() -> None:
    """The core's option, engine, plugin, contract-loader and report modules say nothing of a family."""
    core = ["run/options.py", "run/option_checks.py", "run/plugin.py", "engine.py", "run/controller.py", "contract/file.py",
            "checks/registry.py", "checks/declare.py", "report/summary.py", "report/html.py", "report/reducer.py",
            "cli/init.py", "cli/main.py"]
    for rel in core:
        text = (SRC / rel).read_text()
        for word in ("hidden_states", "hidden-states", "HiddenRun", "hidden.", "draftvocab", "vocab_mapping", "d2t"):
            assert word not in text, f"{rel} names {word!r}"


FAMILY_PY = '''
"""A family written for the test: a cap on the row count, by option or contract table."""
from __future__ import annotations

from ..contract_families import ContractFamily, InitHooks

NAME = "row_cap"


def add_options(group):
    group.addoption("--row-cap", type=int, default=None, help="most rows the dataset may hold")


def parse_options(config):
    return config.getoption("row_cap", None)


def check_options(config, cap, contract):
    from ..errors import UsageProblem

    if cap is not None and cap < 1:
        raise UsageProblem(f"--row-cap {cap}: must be >= 1")


def parse_table(body, where, contract_file):
    return None if body is None else int(body["max_rows"])


def open_input(config, cap, dataset, contract):
    cap = cap if cap is not None else contract.families.get(NAME)
    return None if cap is None else {"cap": cap, "rows": dataset.num_rows}


def init_arguments(parser):
    parser.add_argument("--row-cap-headroom", type=int, default=2, help="cap = headroom x the rows observed")


def init_section(cap):
    from ..toml_text import key_line

    return ["[row_cap]", key_line("max_rows", cap, "headroom x the rows init read")]


INIT = InitHooks(section=init_section, add_arguments=init_arguments, option=lambda args: args.row_cap_headroom,
                 shard=lambda engine, shard, stats: shard.rows,
                 pins=lambda engine, rows, headroom: headroom * sum(rows))

FAMILY = ContractFamily(name=NAME, contract_modules=("drafter_contracts.rowcap.contracts",), table="row_cap",
                parse_table=parse_table, add_options=add_options, parse_options=parse_options,
                check_options=check_options, open_input=open_input, missing="no cap: pass --row-cap N",
                describe=lambda found: {"cap": found["cap"]},
                terminal_lines=lambda summary: [f"row cap: {summary['row_cap']['cap']:,}"] if "row_cap" in summary else [],
                init=INIT)
'''

CONTRACTS_PY = '''
from __future__ import annotations

from ..checks.declare import Scope, Spec, register
from ..results import CheckResult


def check(e):
    found = e.inputs["row_cap"]
    over = found["rows"] > found["cap"]
    return CheckResult("rows_under_cap", "dataset", rows_checked=found["rows"],
                       message=f"{found['rows']:,} rows > cap {found['cap']:,}" if over else "")


register(Spec("rows_under_cap", Scope.DATASET, "no more rows than the cap", needs=frozenset({"row_cap"}),
              run=check, on_request=True))
'''


@pytest.fixture(scope="module")
def package_with_a_new_family(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pkg")
    shutil.copytree(SRC, root / "drafter_contracts", ignore=shutil.ignore_patterns("__pycache__"))
    fam = root / "drafter_contracts" / "rowcap"
    fam.mkdir()
    (fam / "__init__.py").write_text("")
    (fam / "family.py").write_text(textwrap.dedent(FAMILY_PY))
    (fam / "contracts.py").write_text(textwrap.dedent(CONTRACTS_PY))
    return root


def _run(pkg: Path, cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    cwd.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(pkg), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0",
                           f"--report-dir={cwd / 'reports'}", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env=env)
    return proc, read_summary(cwd / "reports")


def test_a_family_added_to_the_package_runs_without_a_core_change(package_with_a_new_family, clean_dataset,
                                                                  tmp_path) -> None:
    pkg = package_with_a_new_family
    for rel in ("run/options.py", "run/option_checks.py", "run/plugin.py", "engine.py", "contract/file.py", "checks/registry.py",
                "checks/declare.py", "report/summary.py", "cli/init.py", "cli/main.py"):
        assert (pkg / "drafter_contracts" / rel).read_bytes() == (SRC / rel).read_bytes()
    data = f"--dataset-path={clean_dataset}", "--tokenizer=builtin:qwen3.6"

    proc, summary = _run(pkg, tmp_path / "off", *data)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "rows_under_cap" not in summary["checks"], "on_request: left out of the run without its input"

    proc, summary = _run(pkg, tmp_path / "low", *data, "--row-cap=10")
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert summary["checks"]["rows_under_cap"]["verdict"] == "fail"
    assert summary["row_cap"] == {"cap": 10}
    assert "row cap: 10" in proc.stdout and "rows > cap 10" in proc.stdout

    contract = tmp_path / "capped.toml"
    from drafter_contracts.contract import builtin_contracts

    contract.write_text(builtin_contracts()["generic"].read_text() + "\n[row_cap]\nmax_rows = 1000000\n")
    proc, summary = _run(pkg, tmp_path / "table", *data, f"--contract={contract}")
    assert summary is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert summary["checks"]["rows_under_cap"]["verdict"] == "pass"
    assert summary["row_cap"] == {"cap": 1000000}

    # init pins the family's table from its own partial of each shard, in init's one pass
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(pkg), os.environ.get("PYTHONPATH", "")]))
    pinned = tmp_path / "pinned.toml"
    proc = subprocess.run([sys.executable, "-m", "drafter_contracts", "init", str(clean_dataset), "-o", str(pinned),
                           "--row-cap-headroom", "3"], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = summary["dataset"]["num_rows"]
    assert f"max_rows = {3 * rows}" in pinned.read_text()
    proc, summary = _run(pkg, tmp_path / "pinned", *data, f"--contract={pinned}")
    assert summary["checks"]["rows_under_cap"]["verdict"] == "pass", proc.stdout[-3000:]
    assert summary["row_cap"] == {"cap": 3 * rows}

    proc, _ = _run(pkg, tmp_path / "bad", *data, "--row-cap=0")
    assert proc.returncode == 4 and "--row-cap 0: must be >= 1" in proc.stdout + proc.stderr

    # the installed package, which holds no such family, refuses the table like any unknown one
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", *data,
                           f"--contract={contract}", f"--report-dir={tmp_path / 'plain'}"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 4 and "row_cap" in proc.stdout + proc.stderr
