"""Contracts on the hidden states extracted for every dataset row (speculators' offline layout).

``contracts`` the nine contracts' registry entries (checks/declare.py; they need a hidden-states folder)
``reader``  safetensors headers parsed from the bytes, tensors decoded with numpy (bfloat16, float8)
``policy``  the ``[hidden_states]`` contract table and what a model's config.json declares
``plan``    file names and the one listing of the folder
``checks``  pure functions: (shard's headers / tensors, dataset rows, policy) -> CheckResult
``run``     one process's HiddenRun: a row shard's header pass and value pass, and what they send
``verdicts`` controller side: norm bounds learnt over the dataset, prefix consistency (folded as reports arrive)
``recompute`` the optional spot recompute with the target model through transformers (CPU)
``report``  the terminal lines and the report.html section, read from summary.json
"""
