"""Time every usage error as a user meets it: a real ``python -m pytest`` per case, to its one line.

    python benchmarks/usage_errors.py               # 3 rounds; writes reports/usage-errors.json

The cases are ``drafter_testkit.usage_cases`` (the tests run the same table in-process).
Each case must end with exit code 4 and exactly one ``ERROR:`` line holding the case's words; the
figure is its wall time, median of the rounds. For reference, each round also times pytest's own
usage error (an unknown option, the plugin turned off): no usage error can be cheaper than that.
Target: every case <= 2 s.
"""

from __future__ import annotations

import testkit_path  # noqa: F401  (drafter_testkit is imported from the checkout)
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 2.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--report", type=Path, default=Path("reports/usage-errors.json"))
    args = parser.parse_args()

    from drafter_testkit.usage_cases import build_cases

    work = Path(tempfile.mkdtemp(prefix="usage-errors-"))
    cases = build_cases(work / "inputs")
    cwd = work / "run"
    cwd.mkdir()
    times: dict[str, list[float]] = {name: [] for name in cases}
    floor: list[float] = []
    bad: list[str] = []
    for r in range(args.rounds):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", "-p", "no:drafter_contracts", "-p", "no:cacheprovider",
                        "--no-such-option"], cwd=cwd, capture_output=True)  # pytest's own usage error
        floor.append(time.perf_counter() - t0)
        for name, case in cases.items():
            env = {**os.environ, **case.env}
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *case.args], cwd=cwd,
                                  capture_output=True, text=True, env=env, timeout=300)
            times[name].append(time.perf_counter() - t0)
            out = proc.stdout + proc.stderr
            errors = [line for line in out.splitlines() if line.startswith("ERROR:")]
            if proc.returncode != 4 or len(errors) != 1 or case.fragment not in errors[0] or "Traceback" in out:
                bad.append(f"{name}: exit {proc.returncode}, {len(errors)} ERROR line(s): {out.strip()[-300:]}")
        print(f"round {r + 1} of {args.rounds} done (load {os.getloadavg()[0]:.1f})", flush=True)
    rows = {name: round(statistics.median(t), 3) for name, t in times.items()}
    result = {"cases": rows, "pytest_start_without_plugin_s": round(statistics.median(floor), 3),
              "max_s": max(rows.values()), "target_s": TARGET_S, "met": max(rows.values()) <= TARGET_S and not bad,
              "wrong_output": bad, "load_avg_1m": os.getloadavg()[0]}
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(result, indent=2) + "\n")
    width = max(map(len, rows))
    for name, t in sorted(rows.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<{width}}  {t:5.2f} s")
    print(f"pytest's own usage error, plugin off: {result['pytest_start_without_plugin_s']:.2f} s; slowest case "
          f"{result['max_s']:.2f} s (target <= {TARGET_S:g} s); wrong output: {len(bad)}; written to {args.report}")
    for line in bad:
        print("  " + line)
    return 0 if result["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
