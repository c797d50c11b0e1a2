"""Contracts on the hidden states extracted for every dataset row (speculators' offline layout).

``reader``  safetensors headers parsed from the bytes, tensors decoded with numpy (bfloat16, float8)
``policy``  the ``[hidden_states]`` contract table and what a model's config.json declares
``plan``    the folder listing and the shard plan over files (row-index ranges)
``checks``  pure functions: (shard's headers / tensors, dataset rows, policy) -> CheckResult
``run``     one shard's header pass and value pass, and the payload it sends to the controller
``verdicts`` controller side: coverage, norm bounds learnt over the dataset, prefix consistency
``recompute`` the optional spot recompute with the target model through transformers (CPU)
"""
