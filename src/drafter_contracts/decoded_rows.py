"""How many violating rows of each contract the reports decode (``--examples N``), and the bound on it.

The rows are decoded where the shard is in memory (``run/worker.py``), so the number travels with the
engine, which every worker builds from the same command line; the failing tests' text, the
terminal's WARN excerpts and report.html then show the same rows. A result keeps the lowest
``results.MAX_EXAMPLES`` violating rows by index (its count stays exact): more than that cannot be
decoded, and the terminal says so rather than showing fewer rows than asked without a word.
"""

from __future__ import annotations

#: Rows decoded per contract when ``--examples`` is not given: enough to see a pattern, few enough to read.
DEFAULT_EXAMPLES = 3


def beyond_kept(asked: int) -> str | None:
    """The line that says ``asked`` exceeds the rows a result keeps (None: it does not)."""
    from .results import MAX_EXAMPLES

    if asked <= MAX_EXAMPLES:
        return None
    return (f"--examples {asked}: a contract keeps its {MAX_EXAMPLES} lowest violating rows, "
            f"so at most {MAX_EXAMPLES} are decoded")
