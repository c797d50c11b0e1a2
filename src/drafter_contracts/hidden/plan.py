"""The hidden-states folder: file names, and one listing of what else it holds.

File ``hs_{i}`` belongs to row i, so a row shard's test opens its rows' files without
listing the folder (a file it cannot find is hs_coverage's, sent to the controller); the
entries no row reads (extra, misnamed, lock files) come from one listing at the controller.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

NAME = re.compile(r"hs_(0|[1-9]\d*)\.safetensors")


def file_name(index: int) -> str:
    return f"hs_{index}.safetensors"


@dataclass
class Listing:
    """One scan of the folder: which row indices have a file, and every entry that is not one."""

    present: np.ndarray  # bool per dataset row
    extras: list[tuple[str, str]] = field(default_factory=list)  # (name, why it is not a row's file)
    extra_count: int = 0
    total_bytes: int = 0


def list_folder(folder: Path, num_rows: int, keep: int = 50) -> Listing:
    """Scan ``folder`` once (os.scandir: no stat per entry beyond what the directory read gives)."""
    present = np.zeros(num_rows, dtype=bool)
    listing = Listing(present)
    with os.scandir(folder) as it:
        for entry in it:
            name = entry.name
            m = NAME.fullmatch(name)
            reason = None
            if m is None:
                if name.endswith(".lock") and NAME.fullmatch(name[:-5]):
                    reason = ("lock file of an unfinished write (its reader waits on it, then loads a possibly "
                              "partial file)")
                elif re.fullmatch(r"hs_\d+\.safetensors", name):
                    reason = "index written with leading zeros: the trainer opens hs_{i}.safetensors and never reads it"
                else:
                    reason = "not named hs_{i}.safetensors: no row reads it"
            elif not entry.is_file():
                reason = "not a regular file"
            else:
                i = int(m.group(1))
                if i >= num_rows:
                    reason = f"index {i:,} beyond the dataset's {num_rows:,} rows (a folder from a larger dataset?)"
                else:
                    present[i] = True
                    continue
            listing.extra_count += 1
            if len(listing.extras) < keep:
                listing.extras.append((name, reason))
    listing.extras.sort()
    return listing
