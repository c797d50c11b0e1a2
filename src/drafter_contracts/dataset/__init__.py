"""A dataset read in place, as shards of flat numpy arrays: what every check reads.

``reader``        open a dataset read-only (``open_dataset`` -> ``SavedDataset``), plan row shards, hand them out
``columns``       a shard's row range and its list columns as flat numpy (``Shard``, ``ListColumn``)
``layouts``       the column layouts trainers write, told apart by a dataset's columns (docs/layouts.md)
``layout_rows``   a shard of any layout as the same flat arrays (``ShardArrays``, ``LayoutRows``)
``source_files``  Parquet and JSON Lines read in place through cached Arrow IPC streams
``row_view``      a shard's rows as the checks see them (``RowView``), and the rows a check cannot read
"""
