"""What a contract reads of the engine and of a shard's work, declared below the engine.

The contracts are registered (``declare.Spec``) and run by ``engine.Engine``, which imports the
registry; the callables a ``Spec`` holds take the engine and a shard's ``ShardWork`` as arguments.
Annotating them with the engine's own classes would tie the declarations to the layer above them, so
they are annotated with these protocols instead: the members a contract may read. The engine's
classes satisfy them (``tests/test_import_layers.py`` checks it on a real engine), so a member a
contract needs is added here and there together.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..contract import Contract
    from ..dataset.reader import SavedDataset
    from ..dataset.columns import Shard
    from ..dataset.layout_rows import ShardArrays
    from ..spans.labels import Labels
    from ..spans.oracle import SpanOracle
    from ..spans.turns import MaskFacts
    from ..tokenizer.vocabulary import Vocabulary
    from ..dataset.row_view import RowView


@runtime_checkable
class ShardData(Protocol):
    """One shard's arrays, view and labels, computed once and shared by every contract of the shard."""

    shard: "Shard"
    contract: "Contract"

    @property
    def arrays(self) -> "ShardArrays": ...
    @property
    def view(self) -> "RowView": ...
    @property
    def labels(self) -> "Labels | None": ...
    @property
    def mask_facts(self) -> "MaskFacts | None": ...
    @property
    def role_runs(self) -> Any: ...  # checks.content.RoleRuns: the labels run-length encoded
    @property
    def token_pass(self) -> Any: ...  # engine.TokenPass: the shard's fused pass over its ids


@runtime_checkable
class ContractEngine(Protocol):
    """The run's dataset, contract, tokenizer and template, and the shards a contract may read."""

    dataset: "SavedDataset"
    contract: "Contract"
    vocab: "Vocabulary | None"
    oracle: "SpanOracle | None"
    split: tuple[int, int] | None
    token_freq_path: Path | None
    #: What each contract family's contracts read, by family name (``ContractFamily.open_input``).
    inputs: dict[str, Any]

    @property
    def shards(self) -> list["Shard"]: ...
    @property
    def all_shards(self) -> list["Shard"]: ...
    @property
    def column_problems(self) -> dict[str, str]: ...
    def work(self, shard: "Shard") -> ShardData: ...
    def unreadable(self, shard: "Shard") -> str | None: ...
    def stats(self, shard: "Shard") -> dict | None: ...
