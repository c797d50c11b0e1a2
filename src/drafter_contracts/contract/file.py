"""The contract: one frozen object built from defaults < contract TOML < command line.

Checks read only this object, never pytest options, so a check can be called
from a notebook with a hand-made ``Contract``.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from dataclasses import dataclass, field
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from ..contract_families import tables
from ..errors import UsageProblem
from ..table_fields import did_you_mean, read_table
from .mask_policy import MaskPolicy
from .presets import PRESETS, resolve

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, as its backport (a requirement there only)
    import tomli as tomllib

#: Arrow type names a contract may declare for a column.
KNOWN_TYPES = frozenset(
    {f"list<{t}>" for t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")}
    | {f"large_list<{t}>" for t in ("int32", "int64", "bool")}
    | {"int8", "int16", "int32", "int64", "uint16", "uint32", "uint64", "bool", "string"}
)
#: SpecForge's [1, L] columns (docs/layouts.md), as ``init`` pins them.
KNOWN_TYPES |= {f"list<{t}>" for t in KNOWN_TYPES if t.startswith("list<")}
#: Template families a contract may declare: the built-in span profiles (spans/learn/builtin.py) and "auto".
#: What ``--dataset-path`` runs without ``--contract``: a contract that fits any well-formed dataset.
BUILTIN_CONTRACT = "generic"
#: The named example contract of the worked example (a Qwen3.6-27B dataset) (and what ``--masker``
#: reads its policy from).
EXAMPLE_CONTRACT = "qwen3.6-dflash"


def accepted_types(declared: "str | tuple[str, ...] | list[str]") -> tuple[str, ...]:
    """A ``[schema]`` value as the tuple of Arrow types it accepts (one type, or a list of them)."""
    return (declared,) if isinstance(declared, str) else tuple(declared)


@dataclass(frozen=True)
class Tolerance:
    """Allowed distance from the expected row count: absolute rows or a percentage."""

    value: float
    percent: bool

    @classmethod
    def parse(cls, raw: object, where: str) -> "Tolerance":
        if isinstance(raw, bool):
            raise UsageProblem(f"{where}: count_tolerance must be a number of rows or a percentage like '0.5%', "
                               f"got {raw!r}")
        if isinstance(raw, (int, float)) and raw >= 0:
            return cls(float(raw), False)
        if isinstance(raw, str):
            m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(%?)\s*", raw)
            if m:
                return cls(float(m.group(1)), bool(m.group(2)))
        raise UsageProblem(f"{where}: count_tolerance must be a number of rows or a percentage like '0.5%', "
                           f"got {raw!r}")

    def rows(self, expected: int) -> int:
        """The tolerance in rows for an expected count (percentages round down)."""
        return int(expected * self.value / 100.0) if self.percent else int(self.value)

    def __str__(self) -> str:
        return f"{self.value:g}%" if self.percent else f"{int(self.value)} rows"


def parse_mask_overrides(items: list[str] | None) -> dict[str, Any]:
    """``KEY=VALUE`` strings from ``--mask-policy`` to typed MaskPolicy fields (one-line errors)."""
    out: dict[str, Any] = {}
    for item in items or ():
        key, sep, raw = item.partition("=")
        key, raw = key.strip().replace("-", "_"), raw.strip()
        if not sep or not key:
            raise UsageProblem(f"--mask-policy {item!r}: expected KEY=VALUE, e.g. --mask-policy completeness=all")
        if key not in MaskPolicy.keys():
            raise UsageProblem(f"--mask-policy {item!r}: unknown key '{key}'{did_you_mean(key, MaskPolicy.keys())}; "
                               f"allowed: {', '.join(MaskPolicy.keys())}")
        if key == "optional":
            out[key] = tuple(x.strip() for x in raw.split(",") if x.strip())
        elif MaskPolicy.kind(key) is bool:
            low = raw.lower()
            if low not in ("true", "false", "1", "0", "yes", "no"):
                raise UsageProblem(f"--mask-policy {item!r}: {key} must be true or false, got {raw!r}")
            out[key] = low in ("true", "1", "yes")
        else:
            allowed = MaskPolicy.CHOICES[key]
            if raw not in allowed:
                raise UsageProblem(f"--mask-policy {item!r}: {key} must be one of "
                                   f"{', '.join(repr(a) for a in allowed)}, got {raw!r}{did_you_mean(raw, allowed)}")
            out[key] = raw
    return out


@dataclass(frozen=True)
class BaselinePolicy:
    """How far a dataset may move from its saved baseline (``--baseline FILE``) before the run fails.

    Distances are Kolmogorov-Smirnov distances between the two fixed-bin histograms
    (largest gap between the cumulative shares, 0..1); the token shift is the total
    variation distance over the baseline's top-K supervised ids plus one "other" bucket.
    """

    count_tolerance: Tolerance = Tolerance(1.0, True)
    max_seq_len_ks: float = 0.05
    max_supervised_share_ks: float = 0.05
    max_role_share_change: float = 0.02
    max_token_freq_tv: float = 0.05
    top_k: int = 100
    fail_on_fingerprint: bool = True


@dataclass(frozen=True)
class ContentPolicy:
    """Suspicious-content contracts (``[content]``): report-only unless ``strict``.

    They flag rows that are valid but probably useless or harmful to train on;
    a mixture may hold some on purpose, so by default they warn and pass.
    """

    strict: bool = False
    placeholder_replies: tuple[str, ...] = ("OK.",)
    min_reply_tokens: int = 2
    soft_min_len: int = 16
    block_size: int = 16


@dataclass(frozen=True)
class DriftPolicy:
    """Tokenizer-drift sample (``[drift]``): rows spread over all shards, until ``sample_tokens`` tokens or
    ``sample_rows`` rows, whichever comes first (the cost is the tokens re-encoded, not the rows)."""

    sample_rows: int = 1000
    sample_tokens: int = 131_072
    seed: int = 0


@dataclass(frozen=True)
class Contract:
    """Everything a dataset is checked against. Built by :func:`load_contract`."""

    name: str
    source: str
    #: column -> the Arrow type it must have, or a tuple of accepted types (``[schema]`` lists).
    columns: Mapping[str, str | tuple[str, ...]]
    allow_extra_columns: bool = False
    expected_count: int | None = None
    count_tolerance: Tolerance = Tolerance(0.0, False)
    min_len: int = 1
    #: The truncation cap. A contract file may leave it out (the generic contract does): the
    #: engine then takes the longest row as the cap and says so (``max_len_source = "observed"``).
    max_len: int | None = 4096
    min_supervised: int = 1
    #: Span profile: "auto" derives it from the tokenizer's chat template (the built-ins first),
    #: a built-in name forces that family (see spans/learn/resolve.py).
    template_profile: str = "auto"
    tokenizer: str | None = None
    vocab_size: int | None = None
    mask: MaskPolicy = field(default_factory=MaskPolicy)
    baseline: BaselinePolicy = field(default_factory=BaselinePolicy)
    #: 10,000 rows (~3.4 M tokens at a mean row of 335 tokens): ~300 MB anonymous memory per worker,
    #: ~100 shards for a million rows; the sweep in docs/scale.md measured no speed cost against 20,000.
    shard_size: int = 10_000
    #: Token cap per shard: a worker needs ~75 bytes per token of its shard, so 4 M tokens ~ 0.3 GB.
    max_shard_tokens: int = 4_000_000
    description: str = ""
    content: ContentPolicy = field(default_factory=ContentPolicy)
    drift: DriftPolicy = field(default_factory=DriftPolicy)
    #: "contract" (declared in the file or on the command line) or "observed" (not pinned: the longest row).
    max_len_source: str = "contract"
    #: [mask] keys the contract file or the command line wrote (they win over a convention's presets).
    mask_keys: tuple[str, ...] = ()
    #: How the mask policy was resolved (the convention, and what it learnt from the template or the data).
    mask_how: str = ""
    #: Contracts the run must check besides the gate's own (``[contracts] required``): one that cannot run
    #: stops the run before any work (exit 4) unless it is turned off by name.
    required: tuple[str, ...] = ()
    #: Contracts turned off by name (``[contracts] skip``, ``--skip-contract``): reported as not checked.
    skip: tuple[str, ...] = ()
    #: Where the tokenizer came from: given with --tokenizer, named in the contract, or found beside the dataset.
    tokenizer_how: str = ""
    #: How the convention in force was chosen, which the first line of every report says (``report/headline.py``):
    #: ``declared`` (what the contract or ``--mask-policy convention=`` named) and ``by`` ("contract", "command
    #: line" or "default"); for ``auto``, what the first rows showed (``contract/fit.py: chosen``).
    convention_choice: dict[str, Any] = field(default_factory=dict)
    #: Each contract family's policy, parsed from the table it owns (``contract_families.ContractFamily.parse_table``),
    #: by family name; its defaults when the file has no such table.
    families: dict[str, Any] = field(default_factory=dict)

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
        d["baseline"]["count_tolerance"] = str(self.baseline.count_tolerance)
        d["columns"] = {k: (v if isinstance(v, str) else list(v)) for k, v in self.columns.items()}
        policies = d.pop("families")
        for table, family in sorted(tables().items()):  # each family's policy under its table's name
            d[table] = policies.get(family.name)
        return d


#: Keys a contract may still hold that nothing reads: each refused with what to write instead.
_RETIRED = {("tokenizer", "family"): " (the template profile comes from the tokenizer's chat template; "
                                     "template_profile = NAME forces a built-in one)"}


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
        "template_profile": ((str,), "template_profile"),
        "vocab_size": (_INT, "vocab_size"),
    },
    "mask": {key: ((MaskPolicy.kind(key),), f"mask.{key}") for key in MaskPolicy.keys()},
    "baseline": {
        "count_tolerance": ((int, float, str), "baseline.count_tolerance"),
        "max_seq_len_ks": ((int, float), "baseline.max_seq_len_ks"),
        "max_supervised_share_ks": ((int, float), "baseline.max_supervised_share_ks"),
        "max_role_share_change": ((int, float), "baseline.max_role_share_change"),
        "max_token_freq_tv": ((int, float), "baseline.max_token_freq_tv"),
        "top_k": (_INT, "baseline.top_k"),
        "fail_on_fingerprint": ((bool,), "baseline.fail_on_fingerprint"),
    },
    "content": {
        "strict": ((bool,), "content.strict"),
        "placeholder_replies": ((list,), "content.placeholder_replies"),
        "min_reply_tokens": (_INT, "content.min_reply_tokens"),
        "soft_min_len": (_INT, "content.soft_min_len"),
        "block_size": (_INT, "content.block_size"),
    },
    "contracts": {
        "required": ((list,), "required"),
        "skip": ((list,), "skip"),
    },
    "drift": {
        "sample_rows": (_INT, "drift.sample_rows"),
        "sample_tokens": (_INT, "drift.sample_tokens"),
        "seed": (_INT, "drift.seed"),
    },
}
_REQUIRED = (("contract", "name"),)


#: ``--contract auto``: the generic contract, whose ``[mask] convention = "auto"`` infers the
#: producer's convention from the first rows and the template.
AUTO_CONTRACT = "auto"


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
    if raw == AUTO_CONTRACT:  # the generic contract infers the producer's convention from the data
        return builtins[BUILTIN_CONTRACT]
    if path.exists():
        raise UsageProblem(f"--contract {raw}: not a file; pass a contract .toml file or one of: "
                           f"{', '.join(sorted(builtins))}")
    raise UsageProblem(f"--contract {raw}: no such file{did_you_mean(raw, builtins)}; pass a contract .toml file "
                       "(write one with 'drafter-contracts init DATASET') or one of: "
                       f"{', '.join(sorted([*builtins, AUTO_CONTRACT]))}")


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
    allowed = ["schema", *_SCHEMA, *tables()]
    for table, body in doc.items():
        if table == "schema" or table in tables():  # _columns and the owning family's parse_table read those
            continue
        if table not in _SCHEMA:
            raise UsageProblem(f"{where}: unknown table [{table}]{did_you_mean(table, allowed)}; "
                               f"allowed: {', '.join(allowed)}")
        fields = {key: types for key, (types, _) in _SCHEMA[table].items()}
        for key, value in read_table(body, table, fields, where, hint=partial(_unknown_hint, table)).items():
            values[_SCHEMA[table][key][1]] = value
    for table, key in _REQUIRED:
        if key not in doc.get(table, {}):
            raise UsageProblem(f"{where}: missing required value [{table}] {key}")
    return values


def _unknown_hint(table: str, key: str) -> str:
    """What the error about an unknown key of a core table adds: the table it belongs in, what replaced a retired
    key, or the closest key of the table."""
    elsewhere = [t for t, keys in _SCHEMA.items() if key in keys and t != table]
    return (f" (it belongs in [{elsewhere[0]}])" if elsewhere else _RETIRED.get((table, key))
            or did_you_mean(key, _SCHEMA[table]))


def _columns(doc: Mapping[str, Any], where: str) -> dict[str, str | tuple[str, ...]]:
    """``[schema]``: column = "arrow type", or a list of accepted types (``["list<int32>", "list<int64>"]``)."""
    schema = doc.get("schema")
    if not isinstance(schema, dict) or not schema:
        raise UsageProblem(f"{where}: missing required table [schema] "
                           "(column = \"arrow type\", e.g. input_ids = \"list<int32>\")")
    out: dict[str, str | tuple[str, ...]] = {}
    for col, typ in schema.items():
        types = typ if isinstance(typ, list) else [typ]
        if not types:
            raise UsageProblem(f"{where}: [schema] {col} is an empty list; "
                               "give one Arrow type or a list of accepted ones")
        for t in types:
            if not isinstance(t, str) or t not in KNOWN_TYPES:
                raise UsageProblem(f"{where}: [schema] {col}: {t!r} is not an Arrow type this tool knows"
                                   f"{did_you_mean(t, KNOWN_TYPES)}; use one of {', '.join(sorted(KNOWN_TYPES))} "
                                   "(or a list of them)")
        out[col] = types[0] if len(types) == 1 else tuple(dict.fromkeys(types))
    if "input_ids" not in schema:
        raise UsageProblem(f"{where}: [schema] must declare column 'input_ids'")
    masks = ("loss_mask", "labels", "assistant_masks", "completion_mask")  # layouts.MASK_COLUMNS (docs/layouts.md)
    if not any(m in schema for m in masks):
        raise UsageProblem(f"{where}: [schema] must declare column 'loss_mask' (or the mask column of another "
                           f"layout: {', '.join(masks[1:])})")
    return out


def load_contract(path: Path, overrides: Mapping[str, Any] | None = None) -> Contract:
    """Read and validate a contract file, then apply command-line overrides (already typed)."""
    where = f"contract {path}"
    doc = _read_toml(path)
    flat = _flatten(doc, where)
    mask_kwargs = {k.split(".", 1)[1]: flat.pop(k) for k in list(flat) if k.startswith("mask.")}
    _check_mask_choices(mask_kwargs, where)
    if "optional" in mask_kwargs:
        if not all(isinstance(x, str) for x in mask_kwargs["optional"]):
            raise UsageProblem(f"{where}: [mask] optional must be a list of key names, got {mask_kwargs['optional']!r}")
        mask_kwargs["optional"] = tuple(mask_kwargs["optional"])
    MaskPolicy(**mask_kwargs).validate(where)
    if "count_tolerance" in flat:
        flat["count_tolerance"] = Tolerance.parse(flat["count_tolerance"], where)
    content_kwargs = {k.split(".", 1)[1]: flat.pop(k) for k in list(flat) if k.startswith("content.")}
    drift_kwargs = {k.split(".", 1)[1]: flat.pop(k) for k in list(flat) if k.startswith("drift.")}
    if "placeholder_replies" in content_kwargs:
        replies = content_kwargs["placeholder_replies"]
        if not all(isinstance(r, str) and r.strip() for r in replies):
            raise UsageProblem(f"{where}: [content] placeholder_replies must be a list of non-empty strings, "
                               f"got {replies!r}")
        content_kwargs["placeholder_replies"] = tuple(replies)
    for key in ("required", "skip"):
        if key in flat:
            flat[key] = _contract_names(flat[key], f"{where}: [contracts] {key}")
    flat["content"] = ContentPolicy(**content_kwargs)
    flat["drift"] = DriftPolicy(**drift_kwargs)
    flat.setdefault("max_len", None)  # not pinned: the engine takes the longest row (see Contract.max_len)
    flat["mask_keys"] = tuple(sorted(mask_kwargs))
    flat["families"] = {f.name: f.parse_table(doc.get(table), where, path) for table, f in tables().items()
                        if f.parse_table is not None}
    contract = Contract(source=str(path), columns=_columns(doc, where), mask=MaskPolicy(**mask_kwargs),
                        baseline=_baseline_policy(flat, where), **flat)
    _check_values(contract, where)
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    contract = _declared_convention(contract, given)
    contract = _with_preset(contract, frozenset(contract.mask_keys) | frozenset(given.get("mask") or {}))
    mask_given = given.pop("mask", None) or {}
    if mask_given:
        _check_mask_choices(mask_given, "--mask-policy")
        policy = dataclasses.replace(contract.mask, **mask_given)
        policy.validate("--mask-policy")
        contract = dataclasses.replace(contract, mask=policy,
                                       mask_keys=tuple(sorted(set(contract.mask_keys) | set(mask_given))))
    if not given:
        return contract
    if "skip" in given:  # --skip-contract adds to the file's list
        given["skip"] = tuple(dict.fromkeys((*contract.skip, *given["skip"])))
    if isinstance(given.get("count_tolerance"), str):
        given["count_tolerance"] = Tolerance.parse(given["count_tolerance"], "--count-tolerance")
    contract = dataclasses.replace(contract, **given)
    _check_values(contract, "command line (" + ", ".join("--" + k.replace("_", "-") for k in given) + ")")
    return contract


def _contract_names(raw: list[Any], where: str) -> tuple[str, ...]:
    """A list of contract names as written (``checks/gate.py: expand`` checks that each exists)."""
    if not all(isinstance(x, str) and x for x in raw):
        raise UsageProblem(f"{where} must be a list of contract names, got {raw!r}")
    return tuple(dict.fromkeys(raw))


def _check_mask_choices(values: Mapping[str, Any], where: str) -> None:
    """The word-valued ``[mask]`` keys, with a suggestion for a typo (MaskPolicy.validate then says the same)."""
    for key, allowed in MaskPolicy.CHOICES.items():
        if key in values and values[key] not in allowed:
            raise UsageProblem(f"{where}: [mask] {key} must be one of {', '.join(repr(a) for a in allowed)}, "
                               f"got {values[key]!r}{did_you_mean(values[key], allowed)}")


def _declared_convention(contract: Contract, given: Mapping[str, Any]) -> Contract:
    """The convention ``--mask-policy convention=NAME`` names over the file's, and who declared the one in force:
    a mask verdict means nothing to a reader who does not know which convention it held the rows to."""
    on_cli = (given.get("mask") or {}).get("convention")
    by = "command line" if on_cli is not None else "contract" if "convention" in contract.mask_keys else "default"
    mask = contract.mask if on_cli is None else dataclasses.replace(contract.mask, convention=on_cli)
    return dataclasses.replace(contract, mask=mask, convention_choice={"declared": mask.convention, "by": by})


def _with_preset(contract: Contract, explicit: frozenset[str]) -> Contract:
    """The named convention's preset keys under the keys the contract or the command line wrote: ``presets.resolve``
    without a template (what the template decides, ``generation-tags``' tags, the engine resolves again with it)."""
    if contract.mask.convention not in PRESETS:
        return contract
    decision = resolve(contract.mask, None, explicit)
    return dataclasses.replace(contract, mask=decision.policy, mask_how=decision.how)


def _baseline_policy(flat: dict[str, Any], where: str) -> BaselinePolicy:
    """Pop the [baseline] keys out of ``flat`` and validate them."""
    kw = {k.split(".", 1)[1]: flat.pop(k) for k in list(flat) if k.startswith("baseline.")}
    if "count_tolerance" in kw:
        kw["count_tolerance"] = Tolerance.parse(kw["count_tolerance"], f"{where}: [baseline]")
    for key in ("max_seq_len_ks", "max_supervised_share_ks", "max_role_share_change", "max_token_freq_tv"):
        if key in kw and not 0 <= kw[key] <= 1:
            raise UsageProblem(f"{where}: [baseline] {key} must be between 0 and 1, got {kw[key]!r}")
        if key in kw:
            kw[key] = float(kw[key])
    if "top_k" in kw and kw["top_k"] < 1:
        raise UsageProblem(f"{where}: [baseline] top_k must be >= 1, got {kw['top_k']}")
    return BaselinePolicy(**kw)


def _check_values(c: Contract, where: str) -> None:
    from ..spans import profile_names

    if c.template_profile not in profile_names():
        raise UsageProblem(f"{where}: template profile {c.template_profile!r} is unknown"
                           f"{did_you_mean(c.template_profile, profile_names())}; use auto or one of "
                           f"{', '.join(n for n in profile_names() if n != 'auto')}")
    for name in ("min_len", "max_len", "min_supervised"):
        if getattr(c, name) is not None and getattr(c, name) < 0:
            raise UsageProblem(f"{where}: {name} must be >= 0, got {getattr(c, name)}")
    if c.max_len is not None and c.min_len > c.max_len:
        raise UsageProblem(f"{where}: min_len {c.min_len} is larger than max_len {c.max_len}")
    if c.shard_size < 1:
        raise UsageProblem(f"{where}: shard_size must be >= 1 row, got {c.shard_size}")
    if c.max_shard_tokens < 1:
        raise UsageProblem(f"{where}: max_shard_tokens must be >= 1, got {c.max_shard_tokens}")
    for name in ("min_reply_tokens", "soft_min_len"):
        if getattr(c.content, name) < 0:
            raise UsageProblem(f"{where}: [content] {name} must be >= 0, got {getattr(c.content, name)}")
    if c.content.block_size < 1:
        raise UsageProblem(f"{where}: [content] block_size must be >= 1, got {c.content.block_size}")
    if c.drift.sample_rows < 0:
        raise UsageProblem(f"{where}: [drift] sample_rows must be >= 0 (0 turns the drift check off), "
                           f"got {c.drift.sample_rows}")
    if c.drift.sample_tokens < 1:
        raise UsageProblem(f"{where}: [drift] sample_tokens must be >= 1 (sample_rows = 0 turns the drift check off), "
                           f"got {c.drift.sample_tokens}")
    if c.expected_count is not None and c.expected_count < 0:
        raise UsageProblem(f"{where}: expected_count must be >= 0, got {c.expected_count}")
