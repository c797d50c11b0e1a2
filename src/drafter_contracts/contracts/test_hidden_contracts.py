"""The hidden-state contracts that ``pytest --dataset-path=DIR --hidden-states=HS_DIR`` runs.

Collected only when the run has a hidden-states folder (``--hidden-states``, or
``DIR/hidden_states`` beside the dataset). The per-file contracts run together in one
test per shard of files (``test_hidden_states[hs-00003[3000:4000]]``); the contracts
that need every shard (layer norms, norm outliers, prefix consistency) are decided at
the controller. The logic lives in ``drafter_contracts.hidden``.
"""

from drafter_contracts.hidden.glue import check_hidden_dataset, check_hidden_shard


def test_hs_coverage(request, hs_run):
    """One file hs_{i}.safetensors per row index: none missing, none extra (beyond the dataset, names no row reads)."""
    check_hidden_dataset(request, hs_run, "hs_coverage")


def test_hs_spot_recompute(request, hs_run):
    """--hs-verify-model DIR --hs-verify-rows N: N sampled rows recomputed with the target model (CPU) agree."""
    check_hidden_dataset(request, hs_run, "hs_spot_recompute")


def test_hidden_states(request, hs_run, hs_shard):
    """One shard of files: hs_header (valid header, byte ranges inside the file), hs_shape_dtype
    ([seq_len, L, H] and dtype as declared), hs_alignment (token_ids == the row's input_ids),
    hs_values (finite, no zero or constant vectors; read with the value pass)."""
    check_hidden_shard(request, hs_run, hs_shard)
