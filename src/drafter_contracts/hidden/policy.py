"""The family's name, the ``[hidden_states]`` table of a contract, and what a model's ``config.json`` declares.

Standard library only: ``contract.load_contract`` parses the table while options are
checked, before any heavy import (a bad key is one line, exit 4).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Mapping

from ..errors import UsageProblem
from ..table_fields import did_you_mean, read_table

#: The family's name: ``Engine.inputs`` key, the ``needs`` entry of its contracts, summary.json's section. Here,
#: below the family and its contracts, so that the contracts read it without importing the family (which the
#: core's discovery of families and of contract modules would close into a circle).
NAME = "hidden_states"
DTYPES = ("bfloat16", "float16", "float32", "float8_e4m3fn", "float8_e5m2")
#: EAGLE-3's default auxiliary layers for a target of L layers (speculators, vLLM): [2, L // 2, L - 3].
def default_aux_layers(num_hidden_layers: int) -> list[int]:
    return [2, num_hidden_layers // 2, num_hidden_layers - 3]


@dataclass(frozen=True)
class HiddenPolicy:
    """What a hidden-states folder must hold, and how strict the value contracts are."""

    #: Layers per position in ``hidden_states`` (auxiliary layers + the last); None: from ``config`` or the folder.
    num_layers: int | None = None
    hidden_size: int | None = None
    #: "bfloat16", "float8_e4m3fn" (with per-token scales), ...; None: the folder's majority.
    dtype: str | None = None
    #: A speculator's or the target model's config.json (relative to the contract file).
    config: str | None = None
    #: Read every tensor byte (finite values, norms, prefix consistency); false: headers only.
    values: bool = True
    #: A layer whose norms are this many times off the dataset's median (either way) fails hs_layer_norms.
    norm_fail_ratio: float = 4.0
    #: Rows beyond this many MADs of the dataset's median norm (per layer, position bucket) are listed (WARN).
    norm_outlier_mads: float = 6.0
    #: hs_norm_outliers fails instead of warning.
    norm_strict: bool = False
    #: Rows sharing a token prefix must agree there within this relative distance (bfloat16 noise ~0.01).
    prefix_rtol: float = 0.05
    #: The spot recompute's relative tolerance; None: from the dtype (bfloat16 0.05, float8 0.15, else 0.01).
    verify_rtol: float | None = None

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


_TYPES: dict[str, tuple[type, ...]] = {
    "num_layers": (int,), "hidden_size": (int,), "dtype": (str,), "config": (str,),
    "values": (bool,), "norm_fail_ratio": (int, float), "norm_outlier_mads": (int, float), "norm_strict": (bool,),
    "prefix_rtol": (int, float), "verify_rtol": (int, float),
}


def parse_policy(body: Any, where: str, contract_file: Path | None = None) -> HiddenPolicy:
    """``[hidden_states]`` -> HiddenPolicy; unknown keys, wrong types and bad values are usage errors."""
    if body is None:
        return HiddenPolicy()
    policy = HiddenPolicy(**read_table(body, "hidden_states", _TYPES, where, kind=Mapping))
    check_policy(policy, where)
    if policy.config is not None and contract_file is not None and not Path(policy.config).is_absolute():
        policy = replace(policy, config=str((contract_file.parent / policy.config).resolve()))
    return policy


def check_policy(p: HiddenPolicy, where: str) -> None:
    for key in ("num_layers", "hidden_size"):
        v = getattr(p, key)
        if v is not None and v < 1:
            raise UsageProblem(f"{where}: [hidden_states] {key} must be >= 1, got {v}")
    if p.dtype is not None and p.dtype not in DTYPES:
        raise UsageProblem(f"{where}: [hidden_states] dtype must be one of {', '.join(DTYPES)}, got {p.dtype!r}"
                           f"{did_you_mean(p.dtype, DTYPES)}")
    if p.norm_fail_ratio <= 1:
        raise UsageProblem(f"{where}: [hidden_states] norm_fail_ratio must be > 1 (a factor), got {p.norm_fail_ratio}")
    for key in ("norm_outlier_mads", "prefix_rtol"):
        if getattr(p, key) <= 0:
            raise UsageProblem(f"{where}: [hidden_states] {key} must be > 0, got {getattr(p, key)}")


def read_model_config(path: Path) -> tuple[int | None, int | None, str]:
    """(layers per position, hidden_size, what said so) from a speculator's or a target model's config.json.

    A speculator config names its auxiliary layers (``eagle_aux_hidden_state_layer_ids`` or
    ``aux_hidden_state_layer_ids``): the files hold those plus the last layer. A target model's
    config gives ``num_hidden_layers``: EAGLE-3's default auxiliary layers [2, L//2, L-3] plus
    the last, four layers.
    """
    try:
        doc = json.loads(Path(path).read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageProblem(f"[hidden_states] config {path}: cannot be read as JSON ({exc}); "
                           "pass a config.json") from None
    if not isinstance(doc, dict):
        raise UsageProblem(f"[hidden_states] config {path}: not a JSON object; pass a model's config.json")

    def find(d: Mapping[str, Any], key: str) -> Any:
        if key in d:
            return d[key]
        for sub in ("text_config", "transformer_layer_config", "verifier_config"):
            if isinstance(d.get(sub), Mapping) and key in d[sub]:
                return d[sub][key]
        return None

    aux = find(doc, "eagle_aux_hidden_state_layer_ids") or find(doc, "aux_hidden_state_layer_ids")
    hidden = find(doc, "hidden_size")
    if aux:
        return len(aux) + 1, hidden, f"{path}: auxiliary layers {list(aux)} + the last"
    layers = find(doc, "num_hidden_layers")
    if isinstance(layers, int):
        return 4, hidden, (f"{path}: {layers} layers, EAGLE-3 default auxiliary layers {default_aux_layers(layers)} "
                           "+ the last")
    if hidden is None:
        raise UsageProblem(f"[hidden_states] config {path}: holds neither hidden_size nor auxiliary layer ids; "
                           "pass a speculator's or the target model's config.json")
    return None, hidden, f"{path}: hidden_size"
