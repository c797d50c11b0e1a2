"""Baseline files: the document --save-baseline writes from a run's summary and --baseline reads back.

The comparison itself is the ``baseline`` contract, declared in the checks layer
(``checks/baseline.py``); this module only writes and reads the files.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ..errors import UsageProblem
from ..paths import atomic_write_text
from ..checks.stats import SEQ_LEN_EDGES

KIND = "drafter-contracts-baseline"
VERSION = 1


def make_baseline(summary: dict[str, Any]) -> dict[str, Any]:
    """The baseline document: the summary's profile plus what it was taken from."""
    return {
        "kind": KIND,
        "version": VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "dataset": summary["dataset"],
        "contract": {"name": summary["contract"]["name"], "source": summary["contract"]["source"]},
        "tokenizer": summary["tokenizer"],
        "profile": summary["profile"],
    }


def write_baseline(doc: dict[str, Any], path: Path) -> Path:
    return atomic_write_text(path, json.dumps(doc, indent=1) + "\n")


def load_baseline(path: Path) -> dict[str, Any]:
    """Read and sanity-check a baseline file; any problem is a one-line usage error."""
    where = f"--baseline {path}"
    try:
        doc = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise UsageProblem(f"{where}: no such file; save one first with --save-baseline FILE "
                           "on known-good data") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageProblem(f"{where}: cannot be read ({exc}); pass a file written by --save-baseline") from None
    except ValueError as exc:
        raise UsageProblem(f"{where}: not valid JSON ({exc}); pass a file written by --save-baseline") from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise UsageProblem(f"{where}: not a drafter-contracts baseline; pass a file written by --save-baseline")
    if doc.get("version") != VERSION:
        raise UsageProblem(f"{where}: baseline version {doc.get('version')!r}, this drafter-contracts reads version "
                           f"{VERSION}; save the baseline again with --save-baseline")
    prof = doc.get("profile")
    try:
        ok = (isinstance(prof["rows"], int) and len(prof["seq_len"]["histogram"]) == len(SEQ_LEN_EDGES) - 1
              and prof["seq_len"]["bin_edges"] == SEQ_LEN_EDGES.tolist())
    except (KeyError, TypeError):
        ok = False
    if not ok:
        raise UsageProblem(f"{where}: the profile is missing or was written with other histogram bins; "
                           "save the baseline again with --save-baseline")
    return doc
