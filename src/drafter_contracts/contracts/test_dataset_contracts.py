"""The contract suite that ``pytest --dataset-path=DIR`` runs: one test per contract.

Dataset-level contracts run once; per-row contracts run once per row shard
(``shard-00003[60000:80000]``), so ``-n auto`` spreads them over cores. Each
test is a single call into the engine; the logic lives in ``drafter_contracts.checks``.
"""

from drafter_contracts.plugin import check_content, check_dataset, check_shard


def test_schema(request, contract_engine):
    """Exactly the declared columns with the declared Arrow types."""
    check_dataset(request, contract_engine, "schema")


def test_row_count(request, contract_engine):
    """Row count within the contract's tolerance of the expected count."""
    check_dataset(request, contract_engine, "row_count")


def test_not_empty(request, contract_engine):
    """At least one row."""
    check_dataset(request, contract_engine, "not_empty")


def test_no_nulls(request, contract_engine, shard):
    """No null rows and no null elements."""
    check_shard(request, contract_engine, shard, "no_nulls")


def test_no_empty_rows(request, contract_engine, shard):
    """No row without tokens."""
    check_shard(request, contract_engine, shard, "no_empty_rows")


def test_lengths_agree(request, contract_engine, shard):
    """len(input_ids) == len(loss_mask) == seq_len on every row."""
    check_shard(request, contract_engine, shard, "lengths_agree")


def test_mask_values(request, contract_engine, shard):
    """An integer loss_mask holds only 0 and 1."""
    check_shard(request, contract_engine, shard, "mask_values")


def test_seq_len_bounds(request, contract_engine, shard):
    """min_len <= seq_len <= max_len on every row."""
    check_shard(request, contract_engine, shard, "seq_len_bounds")


def test_ids_known(request, contract_engine, shard):
    """Every id is a token the tokenizer knows."""
    check_shard(request, contract_engine, shard, "ids_known")


def test_min_supervised(request, contract_engine, shard):
    """Every row has at least min_supervised supervised tokens."""
    check_shard(request, contract_engine, shard, "min_supervised")


def test_turns_well_formed(request, contract_engine, shard):
    """Turns open with a header, have one known role, and close before the next opens."""
    check_shard(request, contract_engine, shard, "turns_well_formed")


def test_mask_on_assistant_spans(request, contract_engine, shard):
    """loss_mask is true only on assistant spans allowed by the mask policy."""
    check_shard(request, contract_engine, shard, "mask_on_assistant_spans")


def test_mask_covers_assistant_spans(request, contract_engine, shard):
    """Every assistant token the mask policy makes eligible is supervised (skipped when completeness is off)."""
    check_shard(request, contract_engine, shard, "mask_covers_assistant_spans")


# --- issue 5: token_freq.pt, tokenizer drift, suspicious content (report-only unless [content] strict) ---

def test_token_freq(request, contract_engine):
    """token_freq.pt equals the supervised-token histogram of the whole dataset (skipped when absent)."""
    check_dataset(request, contract_engine, "token_freq")


def test_tokenizer_drift(request, contract_engine):
    """A seeded sample of rows from every shard re-encodes to the same ids with the tokenizer (same merges)."""
    check_dataset(request, contract_engine, "tokenizer_drift")


def test_duplicate_rows(request, contract_engine, shard):
    """Sends row hashes; exact duplicates are counted over the whole dataset at the controller."""
    check_content(request, contract_engine, shard, "duplicate_rows")


def test_placeholder_replies(request, contract_engine, shard):
    """No placeholder assistant replies ("OK.") and none shorter than min_reply_tokens."""
    check_content(request, contract_engine, shard, "placeholder_replies")


def test_cut_mid_reply(request, contract_engine, shard):
    """No row at exactly max_len whose supervised reply is cut by the cap."""
    check_content(request, contract_engine, shard, "cut_mid_reply")


def test_short_rows(request, contract_engine, shard):
    """No row shorter than the soft minimum soft_min_len."""
    check_content(request, contract_engine, shard, "short_rows")


def test_dflash_anchors(request, contract_engine, shard):
    """Every supervised row has a DFlash anchor: a supervised token outside its last block_size positions."""
    check_content(request, contract_engine, shard, "dflash_anchors")
