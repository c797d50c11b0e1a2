"""Spot recompute: a few sampled rows' hidden states recomputed with the target model through transformers on CPU.

The only check that needs the model. Layer ids follow vLLM's extraction: auxiliary layer
i is the residual stream entering decoder layer i (``hidden_states[i]`` of a transformers
forward with ``output_hidden_states=True``); the last is the model's final hidden state
(``hidden_states[-1]``, after the final norm).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..results import CheckResult
from . import checks as C
from .plan import file_name
from .policy import default_aux_layers
from .reader import Decoder, HeaderError, int_tensor, open_header

#: Relative tolerance per stored dtype: bfloat16 keeps 8 bits of mantissa, float8 e4m3 3 bits.
TOLERANCE = {"BF16": 0.05, "F16": 0.01, "F32": 0.01, "F8_E4M3": 0.15, "F8_E5M2": 0.25}


def without_hub_kernels() -> dict[str, bool]:
    """``from_pretrained`` arguments that keep the model on its own torch layers.

    transformers 5 replaces layers with kernels from the model hub (the ``kernels`` package) by
    default when that package is installed: a recompute would then depend on a download and on
    kernels' global state, and would no longer be the model's own forward pass. Older
    transformers have no such option (and no such default).
    """
    from transformers import PreTrainedModel

    return {"use_kernels": False} if hasattr(PreTrainedModel, "set_use_kernels") else {}


def layer_ids(model_dir: Path, speculator_config: str | None) -> list[int]:
    """Auxiliary layer ids (from a speculator config when given, else EAGLE-3's default for the model)."""
    if speculator_config:
        doc = json.loads(Path(speculator_config).read_text("utf-8"))
        aux = doc.get("eagle_aux_hidden_state_layer_ids") or doc.get("aux_hidden_state_layer_ids")
        if aux:
            return list(aux)
    doc = json.loads((model_dir / "config.json").read_text("utf-8"))
    layers = doc.get("num_hidden_layers") or (doc.get("text_config") or {}).get("num_hidden_layers")
    return default_aux_layers(int(layers))


def reference_states(model, ids: np.ndarray, aux: list[int]) -> np.ndarray:
    """float32 [seq_len, len(aux) + 1, hidden] from one unbatched forward pass."""
    import torch

    base = getattr(model, "model", model)  # the decoder stack: no logits over the vocabulary (~1 GB for 1,000 tokens)
    with torch.no_grad():
        out = base(input_ids=torch.as_tensor(np.array(ids, dtype=np.int64))[None], output_hidden_states=True)
    hs = out.hidden_states
    return torch.stack([hs[i][0] for i in aux] + [hs[-1][0]], dim=1).float().numpy()


def sample_rows(num_rows: int, n: int, seed: int = 0) -> list[int]:
    rng = np.random.default_rng(seed)
    return sorted(rng.choice(num_rows, size=min(n, num_rows), replace=False).tolist())


def spot_recompute(folder: Path, model_dir: Path, n: int, num_rows: int, speculator_config: str | None,
                   rtol: float | None, rows: list[int] | None = None) -> CheckResult:
    """``n`` seeded rows (or ``rows``) recomputed one at a time and compared per layer.

    Running the model needs torch (the ``torch`` extra); without it this contract alone fails, saying so.
    """
    try:
        import torch  # noqa: F401
    except ImportError as exc:  # not installed, or an install that does not import
        return CheckResult(C.RECOMPUTE, "dataset", message=(
            f"--hs-verify-model {model_dir}: recomputing hidden states runs the model with torch, which cannot be "
            f"imported here ({exc}); pip install 'drafter-contracts[torch]', or run where the training stack's "
            "torch is"))
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype="float32", **without_hub_kernels())
    model.eval()
    aux = layer_ids(model_dir, speculator_config)
    f = C.Findings(C.RECOMPUTE, "dataset")
    decoder = Decoder()
    checked = 0
    for row in (rows if rows is not None else sample_rows(num_rows, n)):
        try:
            fd, h = open_header(str(folder / file_name(row)))
        except (OSError, HeaderError):
            continue  # hs_coverage / hs_header name it
        try:
            t, tok = h.tensors.get("hidden_states"), h.tensors.get("token_ids")
            if t is None or tok is None or len(t.shape) != 3:
                continue
            ids = int_tensor(h.read(fd, "token_ids"), tok.dtype)
            x = decoder.decode(h.read(fd, "hidden_states"), t.dtype, int(np.prod(t.shape))).reshape(t.shape).copy()
            if "hidden_states_scales" in h.tensors and t.dtype.startswith("F8"):
                x *= np.frombuffer(h.read(fd, "hidden_states_scales"), dtype=np.float32)[: t.shape[0], None, None]
        finally:
            os.close(fd)
        ref = reference_states(model, ids, aux)
        checked += 1
        if ref.shape != x.shape:
            f.add(row, "shape differs from the recompute", f"file {list(x.shape)}, model {list(ref.shape)}")
            continue
        tol = rtol if rtol is not None else TOLERANCE.get(t.dtype, 0.05)
        num = np.sqrt(((x - ref) ** 2).sum(axis=(0, 2)))
        den = np.sqrt((ref ** 2).sum(axis=(0, 2))) + 1e-12
        rel = num / den
        if (rel > tol).any():
            k = int(np.argmax(rel))
            f.add(row, "states differ from the model's recompute",
                  f"layer {k} ({'last' if k == len(aux) else f'aux {aux[k]}'}): relative distance {rel[k]:.3f} > {tol}")
    result = f.result(checked)
    if checked == 0:
        result.skipped = "none of the sampled rows has a readable file (see hs_coverage, hs_header)"
    return result
