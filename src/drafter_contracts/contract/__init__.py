"""The policy a dataset is held to: the contract file, the producer conventions and the mask rules.

``file``        the contract file (TOML) read into one frozen ``Contract``: defaults < file < command line
``mask_policy`` ``MaskPolicy``, the ``[mask]`` table: which tokens of an assistant turn may, and which must, carry loss
``presets``     the producer conventions as mask-policy presets, applied in one place (``with_preset``), and how
                two policies compare key by key
``mask_rules``  the mask policy applied to role labels: what may be supervised, what must, and the generation
                prompt the data's producer rendered
``mask_shift``  rows whose mask is one token late or early, judged by the mask rules
``mask_reasons`` why a row breaks a mask rule: reason codes, their words, the shift folded in
``fit``         ``convention = "auto"``: the preset the first rows fit, else the policy learnt from them
``learn``       the policy the rows follow, learnt key by key and verified with the mask rules

The policy layer: it reads role labels (spans/) and a shard's flat arrays, never the engine or a
contract's registry entry; the mask contracts (``checks/spans.py``) apply its rules. This module
exports the contract file's names (standard library only, cheap to import from the entry point);
the numpy modules are imported by name.
"""

from .file import AUTO_CONTRACT, BUILTIN_CONTRACT, EXAMPLE_CONTRACT, Contract, builtin_contracts, load_contract
from .file import parse_mask_overrides, resolve_contract_path
from .mask_policy import MaskPolicy

__all__ = ["AUTO_CONTRACT", "BUILTIN_CONTRACT", "EXAMPLE_CONTRACT", "Contract", "MaskPolicy", "builtin_contracts",
           "load_contract", "parse_mask_overrides", "resolve_contract_path"]
