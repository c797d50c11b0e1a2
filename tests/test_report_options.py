"""What the terminal and report.html show of a run: ``--examples N`` decoded rows per contract,
``--only-failing`` and ``-q``.

One shard of the fixture dataset held to the end token (``--mask-policy end_of_turn=true``): every row
with an assistant turn breaks ``mask_covers_assistant_spans``, and the content contracts warn.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from drafter_contracts.results import MAX_EXAMPLES
from helpers import run_inprocess, run_pytest, section_lines

FAILING = "mask_covers_assistant_spans"


@pytest.fixture(scope="module")
def clean_args(clean_dataset: Path, tokenizer_dir: Path) -> tuple[str, ...]:
    return (f"--dataset-path={clean_dataset}", "--contract=qwen3.6-dflash", f"--tokenizer={tokenizer_dir}",
            "--expected-count=2000", "--shard-size=2000", "-n", "0")


@pytest.fixture(scope="module")
def args(clean_args: tuple[str, ...]) -> tuple[str, ...]:
    return (*clean_args, "--mask-policy=end_of_turn=true")


def decoded_in_failure(lines: list[str], name: str) -> int:
    """Rows the failing test's text decodes for contract ``name`` (``report/explain.py: format_failure``)."""
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{name}: ") and " rows violate" in line)
    block = []
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        block.append(line)
    return sum(bool(re.match(r"  row \d+ \(", line)) for line in block)


def rows_on_page(page: str, name: str) -> int:
    """Decoded rows report.html draws under contract ``name``."""
    start = page.index(f'<h3 id="rows-{name}">')
    end = page.find("<h3", start + 1)
    return page[start:end if end > 0 else len(page)].count('<div class="row">')


def excerpts(summary: dict, name: str) -> int:
    return sum("excerpt" in e for e in summary["checks"][name]["examples"])


def warn_rows(lines: list[str], name: str) -> int:
    return sum(line.startswith(f"  WARN {name}: row ") for line in lines)


@pytest.fixture(scope="module")
def five(tmp_path_factory, args) -> tuple[list[str], dict, str]:
    """``--examples=5`` with workers (-n 2): the rows are decoded where the shard is, so N must reach them.
    Its terminal lines, summary.json and report.html."""
    cwd = tmp_path_factory.mktemp("examples-5")
    proc, summary = run_pytest(cwd, *args, "--examples=5", "-n", "2")
    assert proc.returncode == 1, proc.stdout[-3000:]
    return proc.stdout.splitlines(), summary, (cwd / "reports" / "report.html").read_text()


def test_examples_decodes_that_many_rows_in_every_report(five):
    lines, summary, page = five
    assert decoded_in_failure(lines, FAILING) == 5
    assert excerpts(summary, FAILING) == 5
    assert rows_on_page(page, FAILING) == 5
    warned = [n for n, c in summary["checks"].items() if c["verdict"] == "warn"]
    assert warned and all(warn_rows(lines, n) == min(5, len(summary["checks"][n]["examples"])) for n in warned)
    assert any(len(summary["checks"][n]["examples"]) >= 5 for n in warned)
    assert not any(line.startswith("--examples") for line in section_lines(lines))


def test_the_page_keeps_the_warnings_rows_apart_from_the_violations(five):
    _, summary, page = five
    before, warnings = page.split('<h2 id="warning-rows">Rows to look at (warnings)</h2>')
    violations = before.split('<h2 id="violating-rows">Violating rows</h2>')[1]
    warned = [n for n, c in summary["checks"].items() if c["verdict"] == "warn"]
    assert f'id="rows-{FAILING}"' in violations and f'id="rows-{FAILING}"' not in warnings
    assert warned and all(f'id="rows-{n}"' in warnings and f'id="rows-{n}"' not in violations for n in warned)


def test_examples_zero_lists_the_rows_without_decoding_them(pytester, args):
    result, summary = run_inprocess(pytester, *args, "--examples=0")
    assert result.ret == 1
    lines = result.outlines
    assert decoded_in_failure(lines, FAILING) == 0 and not any("legend:" in line for line in lines)
    assert any(line.startswith("  first rows: ") for line in lines)
    assert all(excerpts(summary, n) == 0 for n in summary["checks"])
    assert not any(re.match(r"  WARN \w+: row ", line) for line in lines)
    page = (pytester.path / "reports" / "report.html").read_text()
    assert '<div class="row">' not in page and "more rows: " in page


def test_more_examples_than_a_result_keeps_is_said(pytester, args):
    result, summary = run_inprocess(pytester, *args, f"--examples={MAX_EXAMPLES + 5}")
    assert result.ret == 1
    assert decoded_in_failure(result.outlines, FAILING) == MAX_EXAMPLES == excerpts(summary, FAILING)
    note = f"--examples {MAX_EXAMPLES + 5}: a contract keeps its {MAX_EXAMPLES} lowest violating rows"
    assert any(line.startswith(note) for line in section_lines(result.outlines))


def contract_lines(section: list[str]) -> list[str]:
    return [line for line in section if re.match(r"  (PASS|FAIL|WARN|SKIP|INCOMPLETE)\b", line)]


def counted_on_the_verdict_line(summary: dict) -> str:
    """The part of the verdict line that counts every contract, whatever the terminal listed."""
    verdicts = [c["verdict"] for c in summary["checks"].values()]
    return (f"drafter-contracts: {verdicts.count('fail')} of {len(verdicts)} contracts violated on 2,000 rows",
            f"; {verdicts.count('warn')} warn")


def test_only_failing_lists_the_contracts_that_hold_the_run_back(pytester, args):
    result, summary = run_inprocess(pytester, *args, "--only-failing")
    assert result.ret == 1
    section = section_lines(result.outlines)
    listed = contract_lines(section)
    assert [line.split()[:2] for line in listed] == [["FAIL", FAILING]]
    left = len(summary["checks"]) - 1
    assert f"  {left} passing, warning or skipped contract(s) not listed (--only-failing)" in section
    assert not any(line.startswith("  WARN ") for line in section)  # nor the warnings' rows
    assert section[1].startswith("dataset ") and any(line.startswith("report: ") for line in section)
    head, warned = counted_on_the_verdict_line(summary)
    assert result.outlines[-1].startswith(head) and warned in result.outlines[-1]


def test_quiet_keeps_the_failures_and_the_verdict_line(pytester, args):
    result, summary = run_inprocess(pytester, *args, "-q")
    assert result.ret == 1
    lines = result.outlines
    assert decoded_in_failure(lines, FAILING) == 3  # the failing test's decoded rows stay
    section = section_lines(lines)
    assert section[0].startswith("convention speculators-regex (declared in the contract) · template profile ")
    assert section[1:] == [line for line in contract_lines(section) if line.startswith("  FAIL ")]
    assert len(section) == 2
    head, warned = counted_on_the_verdict_line(summary)
    assert lines[-1].startswith(head) and warned in lines[-1]


def test_quiet_on_a_clean_run_prints_the_verdict_line_alone(pytester, clean_args):
    result, summary = run_inprocess(pytester, *clean_args, "-q")
    assert result.ret == 0
    assert section_lines(result.outlines) == [] and not any("report: " in line for line in result.outlines)
    assert result.outlines[-1].startswith(counted_on_the_verdict_line(summary)[0])
    assert summary["checks"] and (pytester.path / "reports" / "report.html").is_file()  # the reports are written


def test_required_but_not_checked_is_listed_as_such():
    from drafter_contracts.report.summary import terminal_lines

    def entry(verdict: str, **more) -> dict:
        return {"verdict": verdict, "rows_checked": 10, "rows_violating": 0, "messages": [], "skip_reasons": [],
                "by_reason": {}, "examples": [], **more}

    summary = {"contract": {"mask": {"convention": "speculators-regex"}, "convention_choice": {}},
               "tokenizer": {"name": None}, "dataset": {}, "unchecked": [], "unreported": [],
               "checks": {"schema": entry("pass"), "ids_known": entry("fail", rows_violating=2),
                          "turns_well_formed": entry("skip", skip_reasons=["no shard"]),
                          "token_freq": entry("skip", skip_reasons=["no file"]),
                          "min_supervised": entry("incomplete", messages=["1 shard(s) not checked"]),
                          "short_rows": entry("warn", rows_violating=1)},
               "not_checked": {"required": {"turns_well_formed": "no shard"}, "turned_off": {}}}
    listed = [line.split()[:2] for line in terminal_lines(summary, quiet=True)[1:]]
    assert listed == [["FAIL", "ids_known"], ["SKIP", "turns_well_formed"], ["INCOMPLETE", "min_supervised"]]
    assert "required but not checked: no shard" in terminal_lines(summary, quiet=True)[2]
