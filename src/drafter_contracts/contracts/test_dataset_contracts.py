"""The contract suite that ``pytest --dataset-path=DIR`` runs.

Its tests come from the contract registry (``drafter_contracts.checks.registry``): each
dataset-level contract is one test of its own (``test_schema``, ...), and every per-row
contract runs in one test per row shard (``test_row_contracts[shard-00003[30000:40000]]``),
so ``-n auto`` spreads shards over cores and a shard is read and labelled once, in one
worker. Each contract still has its own verdict, counts and examples in summary.json and
report.html, and a failing shard's message names every contract it breaks. Whole-dataset
verdicts (duplicates, token_freq, what the run covered) are decided at the controller and
reach every report through pytest's report hooks. Each test is a single call into the
engine; the logic lives in ``drafter_contracts.checks``.
"""

from drafter_contracts.checks.declare import Scope
from drafter_contracts.checks.registry import names, spec
from drafter_contracts.run.worker import check_dataset, check_rows


def _dataset_test(name: str):
    def test(request, contract_engine):
        check_dataset(request, contract_engine, name)

    test.__name__ = test.__qualname__ = f"test_{name}"
    test.__doc__ = spec(name).doc
    return test


# arrow_integrity first, so a damaged file is named before anything else (the rows of a damaged
# record batch are read by no other contract: their shards skip, saying why); tokenizer_drift
# before the shards: it loads the tokenizer, the longest single step, so it starts first.
for _name in names(Scope.DATASET):
    globals()[f"test_{_name}"] = _dataset_test(_name)


def test_row_contracts(request, contract_engine, shard):
    """Every per-row contract of the registry on one shard of rows, each keeping its own result.

    The content contracts among them are report-only unless [content] strict; duplicate_rows
    sends the shard's row hashes, compared over the whole dataset at the controller.
    """
    check_rows(request, contract_engine, shard)
