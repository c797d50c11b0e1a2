"""``[vocab]`` of a contract file, and the ``--vocab-mapping`` path check: standard library only.

The entry point (``run/options.py``) validates ``--vocab-mapping`` before any heavy import, and
``contract.load_contract`` parses the table, so both live here, away from numpy and torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..errors import UsageProblem
from ..table_fields import did_you_mean, read_table

#: The family's name: the key of its policy in ``Contract.families`` and of its mapping in ``Engine.inputs``
#: (always there: an absent mapping skips the contracts, saying why). Here, below the family, its contracts
#: and its init pins, so each reads it without importing another.
NAME = "draft_vocab"
#: Producers whose selection rule ``rule.py`` knows; "auto": by the file format (.npy pair: speculators,
#: .pt dict: SpecForge).
PRODUCERS = ("auto", "speculators", "specforge")
#: speculators' file names in the data folder (``train/cli.py``): the draft size is in the name.
PAIR_NAME = re.compile(r"^(d2t|t2d)-(\d+)\.npy$")


@dataclass(frozen=True)
class VocabPolicy:
    """What the draft vocabulary must be, and how much of the supervised tokens it must cover."""

    mapping: str | None = None  # a .pt ({"d2t","t2d"}) or one file of a d2t-N.npy / t2d-N.npy pair
    draft_vocab_size: int | None = None  # N; picks d2t-N.npy beside the data when several pairs are there
    target_vocab_size: int | None = None  # len(t2d): the target model's vocabulary (config.json vocab_size)
    producer: str = "auto"
    fingerprint: str | None = None  # sha256 of the mapping (files.fingerprint), pinned by init
    min_coverage: float | None = None  # share of supervised tokens the draft vocabulary must cover
    min_row_coverage: float | None = None  # the same, for every row with supervised tokens
    #: A draft size above the number of distinct supervised ids pads the selection with ids never
    #: supervised (the producers' rule); false fails such a mapping, true accepts it.
    allow_padding: bool = False


_KEYS: dict[str, tuple[type, ...]] = {
    "mapping": (str,), "draft_vocab_size": (int,), "target_vocab_size": (int,), "producer": (str,),
    "fingerprint": (str,), "min_coverage": (int, float), "min_row_coverage": (int, float), "allow_padding": (bool,),
}


def parse_policy(table: Mapping[str, Any] | None, where: str, contract_path: Path | None) -> VocabPolicy:
    """The ``[vocab]`` table, validated (one-line UsageProblem); a relative mapping path is relative to the contract."""
    if table is None:
        return VocabPolicy()
    values = read_table(table, "vocab", _KEYS, where)
    for key in ("draft_vocab_size", "target_vocab_size"):
        if key in values and values[key] < 1:
            raise UsageProblem(f"{where}: [vocab] {key} must be >= 1, got {values[key]}")
    for key in ("min_coverage", "min_row_coverage"):
        if key in values:
            if not 0 <= values[key] <= 1:
                raise UsageProblem(f"{where}: [vocab] {key} is a share between 0 and 1, got {values[key]!r}")
            values[key] = float(values[key])
    if values.get("producer", "auto") not in PRODUCERS:
        raise UsageProblem(f"{where}: [vocab] producer must be one of {', '.join(repr(p) for p in PRODUCERS)}, "
                           f"got {values['producer']!r}{did_you_mean(values['producer'], PRODUCERS)}")
    if "mapping" in values:
        path = Path(values["mapping"]).expanduser()
        if not path.is_absolute() and contract_path is not None:
            path = (contract_path.parent / path).resolve()
        check_mapping_path(str(path), f"{where}: [vocab] mapping")
        values["mapping"] = str(path)
    return VocabPolicy(**values)


def check_mapping_path(raw: str, where: str) -> list[Path]:
    """The files a mapping path names: a ``.pt`` alone, or a ``d2t-N.npy`` / ``t2d-N.npy`` with its partner.

    Only names and existence are checked (no file is read): a bad path is a usage error before any
    work; a file that exists but cannot be read is the ``vocab_mapping_consistent`` verdict.
    """
    path = Path(raw).expanduser()
    if path.is_dir():
        raise UsageProblem(f"{where} {raw}: is a folder; pass a vocab_mapping.pt or one file of a "
                           "d2t-N.npy / t2d-N.npy pair")
    if not path.is_file():
        raise UsageProblem(f"{where} {raw}: no such file; pass a vocab_mapping.pt or one file of a "
                           "d2t-N.npy / t2d-N.npy pair")
    if path.suffix == ".pt":
        return [path]
    m = PAIR_NAME.match(path.name)
    if m is None:
        raise UsageProblem(f"{where} {raw}: not a mapping file name; expected a .pt ({{'d2t', 't2d'}}, as SpecForge "
                           "saves it) or d2t-N.npy / t2d-N.npy (as speculators saves them)")
    other = path.with_name(f"{'t2d' if m.group(1) == 'd2t' else 'd2t'}-{m.group(2)}.npy")
    if not other.is_file():
        raise UsageProblem(f"{where} {raw}: its partner {other.name} is not beside it; d2t and t2d are used together")
    d2t, t2d = (path, other) if m.group(1) == "d2t" else (other, path)
    return [d2t, t2d]
