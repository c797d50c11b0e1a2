"""Validation of summary.json: its JSON Schema (shipped beside this module) and the shard-stats invariants.

The JSON Schema fixes the document's shape; pandera checks what a shape cannot say:
that each shard's figures add up (rows = checked + excluded, histograms count every
checked row). A merge of several machines' summaries relies on both.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

SCHEMA_FILE = "summary.schema.json"


@lru_cache(maxsize=1)
def summary_schema() -> dict[str, Any]:
    return json.loads(resources.files("drafter_testkit").joinpath(SCHEMA_FILE).read_text("utf-8"))


def shard_table_schema() -> Any:
    """pandera schema of the per-shard stats table (one row per shard)."""
    import pandera.pandas as pa

    nonneg = pa.Check.ge(0)
    return pa.DataFrameSchema(
        {
            "shard": pa.Column(int, nonneg, unique=True),
            "rows": pa.Column(int, nonneg),
            "rows_checked": pa.Column(int, nonneg),
            "rows_excluded": pa.Column(int, nonneg),
            "tokens": pa.Column(int, nonneg),
            "seq_len_hist_total": pa.Column(int, nonneg),
            "share_hist_total": pa.Column(float, nonneg, nullable=True),
            "supervised_tokens": pa.Column(float, nonneg, nullable=True),
        },
        checks=[
            pa.Check(lambda df: df.rows == df.rows_checked + df.rows_excluded,
                     error="rows == rows_checked + rows_excluded"),
            pa.Check(lambda df: df.seq_len_hist_total == df.rows_checked,
                     error="seq_len histogram counts every checked row"),
            pa.Check(lambda df: df.share_hist_total.isna() | (df.share_hist_total == df.rows_checked),
                     error="supervised-share histogram counts every checked row"),
            pa.Check(lambda df: df.supervised_tokens.isna() | (df.supervised_tokens <= df.tokens),
                     error="supervised_tokens <= tokens"),
        ],
        strict=True,
    )


def shard_table(shards: list[dict[str, Any]]) -> Any:
    import pandas as pd

    return pd.DataFrame({
        "shard": [s["shard"] for s in shards],
        "rows": [s["rows"] for s in shards],
        "rows_checked": [s["rows_checked"] for s in shards],
        "rows_excluded": [s["rows_excluded"] for s in shards],
        "tokens": [s["tokens"] for s in shards],
        "seq_len_hist_total": [sum(s["seq_len_hist"]) for s in shards],
        "share_hist_total": [float(sum(s["supervised_share_hist"])) if s.get("supervised_share_hist") is not None
                             else None for s in shards],
        "supervised_tokens": [float(s["supervised_tokens"]) if s.get("supervised_tokens") is not None else None
                              for s in shards],
    }).astype({"share_hist_total": float, "supervised_tokens": float})


def validate_summary(doc: dict[str, Any]) -> list[str]:
    """Every problem found, one readable line each (empty: valid)."""
    import jsonschema
    import pandera.errors

    validator = jsonschema.Draft202012Validator(summary_schema())
    problems = [f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
                for e in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))]
    if problems or not doc.get("shards"):
        return problems
    try:
        shard_table_schema().validate(shard_table(doc["shards"]), lazy=True)
    except pandera.errors.SchemaErrors as exc:
        cases = exc.failure_cases
        shard_ids = [s["shard"] for s in doc["shards"]]
        found = (f"shards: shard {shard_ids[int(row.index)]} breaks {row.check}" if row.index is not None
                 else f"shards: {row.check} ({row.failure_case})" for row in cases.itertuples())
        problems += list(dict.fromkeys(found))
    return problems
