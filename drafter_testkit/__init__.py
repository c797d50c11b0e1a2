"""The project's own test kit: fixture builders, mutants, corpora, broken maskers, summary.json validation.

Not installed with the package (``pip install drafter-contracts`` brings the suite, the CLI, the
``--masker`` properties and the demo): the tests, benchmarks and fuzzers import it from the
checkout (``pythonpath`` in pyproject.toml's pytest table; the scripts put the repository on
``sys.path``). Nothing under ``src/`` imports it (``tests/test_layers.py`` holds that).
"""

from pathlib import Path

#: The checkout this kit belongs to, and where ``.ci/install-*`` put the producers and corpora.
REPO = Path(__file__).resolve().parents[1]
DEPS = REPO / ".deps"
