"""The contract suite that ``pytest --dataset-path=DIR`` runs.

Dataset-level contracts are one test each. The per-row contracts run together in one
test per row shard (``test_row_contracts[shard-00003[30000:40000]]``), so ``-n auto``
spreads shards over cores and a shard is read and labelled once, in one worker. Each
contract still has its own verdict, counts and examples in summary.json and
report.html, and a failing shard's message names every contract it breaks. Each test
is a single call into the engine; the logic lives in ``drafter_contracts.checks``.
"""

from drafter_contracts.plugin import check_dataset, check_rows


def test_arrow_integrity(request, contract_engine):
    """Every record batch's buffers valid (offsets, bitmaps, lengths) and the metadata datasets reads sound.

    First, so a damaged file is named before anything else; the rows of a damaged
    record batch are read by no other contract (their shards skip, saying why).
    """
    check_dataset(request, contract_engine, "arrow_integrity")


def test_schema(request, contract_engine):
    """Exactly the declared columns with the declared Arrow types."""
    check_dataset(request, contract_engine, "schema")


def test_row_count(request, contract_engine):
    """Row count within the contract's tolerance of the expected count."""
    check_dataset(request, contract_engine, "row_count")


def test_not_empty(request, contract_engine):
    """At least one row."""
    check_dataset(request, contract_engine, "not_empty")


def test_tokenizer_drift(request, contract_engine):
    """A seeded sample of rows from every shard re-encodes to the same ids with the tokenizer (same merges).

    Collected before the shards: it loads the tokenizer, the longest single step, so it
    starts first rather than finishing last on one worker.
    """
    check_dataset(request, contract_engine, "tokenizer_drift")


def test_row_contracts(request, contract_engine, shard):
    """Every per-row contract on one shard of rows:

    no_nulls, no_empty_rows, lengths_agree (len(input_ids) == len(loss_mask) == seq_len),
    mask_values (an integer loss_mask holds only 0 and 1), seq_len_bounds, ids_known,
    min_supervised, turns_well_formed, mask_on_assistant_spans (loss_mask true only where
    the mask policy allows), mask_covers_assistant_spans (every eligible assistant token
    supervised; skipped when completeness is off); and the content contracts, report-only
    unless [content] strict: duplicate_rows (hashes sent, compared over the whole dataset
    at the controller), placeholder_replies, cut_mid_reply, short_rows, dflash_anchors.
    """
    check_rows(request, contract_engine, shard)
