"""Puts the checkout on ``sys.path``: the benchmarks build their data with ``drafter_testkit``, which the
package does not install (it is the tests' support kit, importable from the repository only)."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
