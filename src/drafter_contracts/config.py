"""The contract: one frozen object built from defaults < contract TOML < command line.

Checks read only this object, never pytest options, so a check can be called
from a notebook with a hand-made ``Contract``.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from .errors import UsageProblem

#: Arrow type names a contract may declare for a column.
KNOWN_TYPES = frozenset(
    {f"list<{t}>" for t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")}
    | {f"large_list<{t}>" for t in ("int32", "int64", "bool")}
    | {"int8", "int16", "int32", "int64", "uint16", "uint32", "uint64", "bool", "string"}
)
FAMILIES = ("chatml",)
BUILTIN_CONTRACT = "qwen3.6-dflash"


@dataclass(frozen=True)
class Tolerance:
    """Allowed distance from the expected row count: absolute rows or a percentage."""

    value: float
    percent: bool

    @classmethod
    def parse(cls, raw: object, where: str) -> "Tolerance":
        if isinstance(raw, bool):
            raise UsageProblem(f"{where}: count_tolerance must be a number of rows or a percentage like '0.5%', got {raw!r}")
        if isinstance(raw, (int, float)) and raw >= 0:
            return cls(float(raw), False)
        if isinstance(raw, str):
            m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(%?)\s*", raw)
            if m:
                return cls(float(m.group(1)), bool(m.group(2)))
        raise UsageProblem(f"{where}: count_tolerance must be a number of rows or a percentage like '0.5%', got {raw!r}")

    def rows(self, expected: int) -> int:
        """The tolerance in rows for an expected count (percentages round down)."""
        return int(expected * self.value / 100.0) if self.percent else int(self.value)

    def __str__(self) -> str:
        return f"{self.value:g}%" if self.percent else f"{int(self.value)} rows"


@dataclass(frozen=True)
class MaskPolicy:
    """Which tokens of an assistant turn may carry ``loss_mask = 1``.

    Content, reasoning and tool-call blocks of assistant turns are always
    allowed; the end-of-turn token and the newline after it depend on the
    producer (speculators 0.4-0.7 excludes both, 0.8+ includes both).
    """

    end_of_turn: bool = False
    newline_after_end: bool = False
    boundary_tokens: str = "allow"  # "allow" | "strict"


@dataclass(frozen=True)
class Contract:
    """Everything a dataset is checked against. Built by :func:`load_contract`."""

    name: str
    source: str
    columns: Mapping[str, str]
    allow_extra_columns: bool = False
    expected_count: int | None = None
    count_tolerance: Tolerance = Tolerance(0.0, False)
    min_len: int = 1
    max_len: int = 4096
    min_supervised: int = 1
    family: str = "chatml"
    tokenizer: str | None = None
    vocab_size: int | None = None
    mask: MaskPolicy = field(default_factory=MaskPolicy)
    #: 10,000 rows (~3.4 M tokens at the seed's mean): ~300 MB anonymous memory per worker, 92 shards
    #: for the seed's 913,786 rows; the sweep in README "Scale" measured no speed cost against 20,000.
    shard_size: int = 10_000
    #: Token cap per shard: a worker needs ~75 bytes per token of its shard, so 4 M tokens ~ 0.3 GB.
    max_shard_tokens: int = 4_000_000
    description: str = ""

    def count_bounds(self) -> tuple[int, int] | None:
        """Inclusive [low, high] row count the dataset must fall in, or None if undeclared."""
        if self.expected_count is None:
            return None
        slack = self.count_tolerance.rows(self.expected_count)
        return max(0, self.expected_count - slack), self.expected_count + slack

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view for summary.json."""
        d = dataclasses.asdict(self)
        d["count_tolerance"] = str(self.count_tolerance)
        d["columns"] = dict(self.columns)
        return d


# --- TOML schema -----------------------------------------------------------------------------
# table -> key -> (type(s), contract attribute). One place says what a contract file may hold.
_INT = (int,)
_SCHEMA: dict[str, dict[str, tuple[tuple[type, ...], str]]] = {
    "contract": {"name": ((str,), "name"), "description": ((str,), "description")},
    "dataset": {
        "expected_count": (_INT, "expected_count"),
        "count_tolerance": ((int, float, str), "count_tolerance"),
        "allow_extra_columns": ((bool,), "allow_extra_columns"),
        "shard_size": (_INT, "shard_size"),
        "max_shard_tokens": (_INT, "max_shard_tokens"),
    },
    "lengths": {
        "min_len": (_INT, "min_len"),
        "max_len": (_INT, "max_len"),
        "min_supervised": (_INT, "min_supervised"),
    },
    "tokenizer": {
        "path": ((str,), "tokenizer"),
        "family": ((str,), "family"),
        "vocab_size": (_INT, "vocab_size"),
    },
    "mask": {
        "end_of_turn": ((bool,), "mask.end_of_turn"),
        "newline_after_end": ((bool,), "mask.newline_after_end"),
        "boundary_tokens": ((str,), "mask.boundary_tokens"),
    },
}
_REQUIRED = (("contract", "name"), ("lengths", "max_len"))


def builtin_contracts() -> dict[str, Path]:
    """Contract files shipped with the package, by name (file stem)."""
    folder = resources.files("drafter_contracts").joinpath("contracts")
    return {Path(p.name).stem: Path(str(p)) for p in folder.iterdir() if p.name.endswith(".toml")}


def resolve_contract_path(raw: str | None) -> Path:
    """A path, or the name of a built-in contract; None means the built-in default."""
    builtins = builtin_contracts()
    if raw is None:
        return builtins[BUILTIN_CONTRACT]
    path = Path(raw).expanduser()
    if path.is_file():
        return path
    if raw in builtins:
        return builtins[raw]
    if path.exists():
        raise UsageProblem(f"--contract {raw}: not a file; pass a contract .toml file or one of: {', '.join(sorted(builtins))}")
    raise UsageProblem(f"--contract {raw}: no such file; pass a contract .toml file or one of: {', '.join(sorted(builtins))}")


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise UsageProblem(f"contract {path}: not valid TOML ({exc}); fix the file syntax") from None
    except UnicodeDecodeError:
        raise UsageProblem(f"contract {path}: not UTF-8 text; save the contract file as UTF-8") from None
    except OSError as exc:
        raise UsageProblem(f"contract {path}: cannot be read ({exc.strerror})") from None


def _flatten(doc: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Validate the TOML document against _SCHEMA and return {attribute: value}."""
    values: dict[str, Any] = {}
    for table, body in doc.items():
        if table == "schema":
            continue
        if table not in _SCHEMA:
            raise UsageProblem(f"{where}: unknown table [{table}]; allowed: {', '.join(['schema', *_SCHEMA])}")
        if not isinstance(body, dict):
            raise UsageProblem(f"{where}: '{table}' must be a table ([{table}]), got {type(body).__name__}")
        for key, value in body.items():
            if key not in _SCHEMA[table]:
                raise UsageProblem(f"{where}: unknown key '{key}' in [{table}]; allowed: {', '.join(_SCHEMA[table])}")
            types, attr = _SCHEMA[table][key]
            if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
                want = " or ".join(t.__name__ for t in types)
                raise UsageProblem(f"{where}: [{table}] {key} must be {want}, got {type(value).__name__} {value!r}")
            values[attr] = value
    for table, key in _REQUIRED:
        if key not in doc.get(table, {}):
            raise UsageProblem(f"{where}: missing required value [{table}] {key}")
    return values


def _columns(doc: Mapping[str, Any], where: str) -> dict[str, str]:
    schema = doc.get("schema")
    if not isinstance(schema, dict) or not schema:
        raise UsageProblem(f"{where}: missing required table [schema] (column = \"arrow type\", e.g. input_ids = \"list<int32>\")")
    for col, typ in schema.items():
        if not isinstance(typ, str) or typ not in KNOWN_TYPES:
            raise UsageProblem(f"{where}: [schema] {col} must be one of {', '.join(sorted(KNOWN_TYPES))}, got {typ!r}")
    for needed in ("input_ids", "loss_mask"):
        if needed not in schema:
            raise UsageProblem(f"{where}: [schema] must declare column '{needed}'")
    return dict(schema)


def load_contract(path: Path, overrides: Mapping[str, Any] | None = None) -> Contract:
    """Read and validate a contract file, then apply command-line overrides (already typed)."""
    where = f"contract {path}"
    doc = _read_toml(path)
    flat = _flatten(doc, where)
    mask_kwargs = {k.split(".", 1)[1]: flat.pop(k) for k in list(flat) if k.startswith("mask.")}
    if mask_kwargs.get("boundary_tokens", "allow") not in ("allow", "strict"):
        raise UsageProblem(f"{where}: [mask] boundary_tokens must be 'allow' or 'strict', got {mask_kwargs['boundary_tokens']!r}")
    if "count_tolerance" in flat:
        flat["count_tolerance"] = Tolerance.parse(flat["count_tolerance"], where)
    contract = Contract(source=str(path), columns=_columns(doc, where), mask=MaskPolicy(**mask_kwargs), **flat)
    _check_values(contract, where)
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    if not given:
        return contract
    if isinstance(given.get("count_tolerance"), str):
        given["count_tolerance"] = Tolerance.parse(given["count_tolerance"], "--count-tolerance")
    contract = dataclasses.replace(contract, **given)
    _check_values(contract, "command line (" + ", ".join("--" + k.replace("_", "-") for k in given) + ")")
    return contract


def _check_values(c: Contract, where: str) -> None:
    if c.family not in FAMILIES:
        raise UsageProblem(f"{where}: [tokenizer] family {c.family!r} is not supported; use one of {', '.join(FAMILIES)}")
    for name in ("min_len", "max_len", "min_supervised"):
        if getattr(c, name) < 0:
            raise UsageProblem(f"{where}: {name} must be >= 0, got {getattr(c, name)}")
    if c.min_len > c.max_len:
        raise UsageProblem(f"{where}: min_len {c.min_len} is larger than max_len {c.max_len}")
    if c.shard_size < 1:
        raise UsageProblem(f"{where}: shard_size must be >= 1 row, got {c.shard_size}")
    if c.max_shard_tokens < 1:
        raise UsageProblem(f"{where}: max_shard_tokens must be >= 1, got {c.max_shard_tokens}")
    if c.expected_count is not None and c.expected_count < 0:
        raise UsageProblem(f"{where}: expected_count must be >= 0, got {c.expected_count}")
