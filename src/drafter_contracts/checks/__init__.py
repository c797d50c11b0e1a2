"""Pure contract checks: (shard arrays or dataset metadata, contract) -> CheckResult.

Nothing here knows about pytest; a notebook can call every function directly.
"""
