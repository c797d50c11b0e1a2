"""Runs the contracts of one shard at a time, lazily, and keeps only their small results.

One pytest test per shard runs every per-row contract of the registry
(``checks/registry.py``) on it: the shard is read once, labelled once, and each
contract's ``run`` reads the shard's shared arrays, view and labels. Arrays of the
previous shard are dropped when the next one is opened, so memory is bounded by one
shard. Dataset-level contracts run here too (``dataset_check``); whole-dataset
verdicts are the controller's (``run/controller.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from .checks import content, spans
from .checks.declare import IDS, MASK, RAW, TOKENIZER, Scope
from .checks.registry import names, spec, specs
from .dataset.row_view import RowView, problem_rows, usable_view
from .contract import Contract
from .contract.mask_shift import MaskShift, mask_shift_of
from .dataset.reader import SavedDataset, plan_shards, shard_groups
from .dataset.columns import Shard
from .dataset.layout_rows import ShardArrays
from .decoded_rows import DEFAULT_EXAMPLES
from .dataset.layouts import column_problems as layout_column_problems
from .errors import InvalidBuffers
from .contract_families import family, names as family_names
from .checks.integrity import Integrity, file_state, scan_tables, shard_buffers_problem, state_changes
from .checks.stats import count_buffer, drained, run_counts, seq_len_histogram, share_histogram, sparse_counts
from .results import CheckResult
from .spans.labels import Labels, Role
from .spans import SpanOracle, make_oracle
from .tokenizer.vocabulary import Vocabulary

# Views of the registry (checks/registry.py), by the groups the reports and tests name. Contracts an
# option asks for (``on_request``: a family's that read an input an option gives) are in them only
# through an Engine's ``shard_checks`` / ``dataset_checks``, when the run has what they need.
#: Per-row contracts (not content), in report order.
ROW_CHECKS = tuple(n for n in names(Scope.ROW) if not spec(n).content and not spec(n).on_request)
#: Contracts with a test of their own (metadata, the drift sample).
DATASET_CHECKS = tuple(n for n in names(Scope.DATASET) if not spec(n).on_request)
#: Whole-dataset verdicts decided at the controller (token_freq.pt, what the run covered).
GLOBAL_CHECKS = tuple(n for n in names(Scope.WHOLE) if not spec(n).content and not spec(n).on_request)
#: Suspicious-content contracts (report-only unless [content] strict).
CONTENT_CHECKS = tuple(n for n in specs() if specs()[n].content)
#: What one shard's test runs, in report order.
SHARD_CHECKS = tuple(n for n in names(shard_test=True) if not spec(n).on_request)


class ShardWork:
    """Lazily computed arrays, view and labels of one shard."""

    def __init__(self, dataset: SavedDataset, shard: Shard, contract: Contract,
                 oracle: SpanOracle | None, id_limit: int = 1 << 24) -> None:
        self.dataset, self.shard, self.contract, self.oracle = dataset, shard, contract, oracle
        self.id_limit = id_limit

    @cached_property
    def arrays(self) -> ShardArrays:
        """The shard's columns, their offsets re-checked: the files may have changed since the integrity scan."""
        try:
            arrays = self.dataset.read(self.shard)
        except (ValueError, IndexError, pa.ArrowException) as exc:  # only damaged buffers make a read fail
            raise InvalidBuffers(f"{self.shard.id} cannot be read ({type(exc).__name__}: {exc})") from None
        problem = shard_buffers_problem(arrays)
        if problem:
            raise InvalidBuffers(f"{self.shard.id}: {problem}")
        return arrays

    @cached_property
    def view(self) -> RowView:
        view = usable_view(self.arrays)
        assert view is not None  # callers check for input_ids first
        return view

    @cached_property
    def labels(self) -> Labels | None:
        if self.oracle is None:
            return None
        return self.oracle.label(self.view.ids, self.view.offsets, self.contract.max_len)

    @cached_property
    def mask_facts(self):
        """What the mask rules read beyond labels (ids, whitespace table, the template's prompts)."""
        return self.oracle.mask_facts(self.view.ids) if self.oracle is not None else None

    @cached_property
    def mask_shift(self) -> MaskShift:
        """The rows whose mask is one token late or early (``contract/mask_shift.py``): computed once, by the
        first mask contract that finds a failing row, and read by the other."""
        return mask_shift_of(self.view, self.labels, self.contract, self.mask_facts)

    @cached_property
    def role_runs(self) -> content.RoleRuns | None:
        """The labels run-length encoded (cut at row starts): per-role totals and the turn checks read these."""
        labels = self.labels
        return None if labels is None else content.role_runs(labels.role, self.view.offsets, labels.run_starts,
                                                             labels.run_roles, labels.run_row_first)

    @cached_property
    def role_totals(self) -> tuple[np.ndarray, np.ndarray | None] | None:
        """Tokens and supervised tokens per role code, summed over the role runs (stats and mask checks)."""
        if self.role_runs is None:
            return None
        mask = self.view.mask
        return run_counts(self.role_runs, self.view.supervised_prefix if mask is not None else None, len(Role))

    @cached_property
    def token_pass(self) -> TokenPass | None:
        """Once per shard: the stats and the duplicate search both read it, in either order."""
        return token_pass(self.view, self.id_limit)

    def stats(self) -> dict:
        """Exact per-shard sums and extremes; the controller adds them up into global figures."""
        a = self.arrays
        p = problem_rows(a)
        lengths = self.view.lengths
        fused = self.token_pass  # first: it fills the prefix sum read below
        out: dict = {
            "shard": self.shard.index,
            "rows": self.shard.rows,
            "rows_excluded": int((p["null"] | p["empty"] | p["disagree"]).sum()),
            "rows_checked": int(len(lengths)),
            "tokens": int(lengths.sum()),
            "seq_len_min": int(lengths.min()) if len(lengths) else None,
            "seq_len_max": int(lengths.max()) if len(lengths) else None,
            "rows_at_max_len": int((lengths == self.contract.max_len).sum()),
            "supervised_tokens": int(self.view.supervised_prefix[-1]) if self.view.mask is not None else None,
        }
        out.update(profile_stats(self.view, self.id_limit, fused.counts if fused is not None else None))
        labels = self.labels
        if self.view.mask is not None:
            out["anchor_positions"] = int(content.anchor_counts(self.view, self.contract.content.block_size).sum())
        if labels is not None:
            mask = self.view.mask
            # Per-role token and supervised counts from the role runs, the latter from the shared
            # supervised prefix sum (run_counts; tests/test_speed_stats.py keeps the per-token pair count).
            counts, sup = self.role_totals
            out["role_tokens"] = {Role(i).name.lower(): int(c) for i, c in enumerate(counts) if c}
            # Boundary tokens are rare (~1 K a shard): find them once (the mask checks share them), read the
            # mask only there.
            at = spans.boundary_positions(labels)
            out["boundary_tokens"] = len(at)
            if mask is not None:
                out["boundary_supervised"] = int(np.count_nonzero(mask[at]))
                out["role_supervised"] = {Role(i).name.lower(): int(c) for i, c in enumerate(sup) if c}
        return out


class TokenPass(NamedTuple):
    """What a shard's one pass over its ids and mask leaves besides the view's supervised prefix sum."""

    counts: dict[str, np.ndarray]  # sparse supervised-id counts (profile_stats, token_freq)
    sums: np.ndarray  # row hash sums (content.row_hashes)
    outside: int  # ids outside [0, id_limit), the tokenizer's size (ids_known)


def token_pass(view: RowView, id_limit: int) -> TokenPass | None:
    """Supervised-id counts, row hash sums and out-of-range ids from one compiled pass that also fills
    the view's supervised prefix sum: four reads of every id and mask bit become one. None without
    a mask or a dense id range: each is then computed on its own when asked for.
    """
    buf = count_buffer(id_limit, len(view.ids))
    if view.mask is None or buf is None or view.offsets[0] != 0 or view.offsets[-1] != len(view.ids):
        return None
    from .kernels.compiled import token_pass as kernel

    n = len(view.ids)
    prefix = np.empty(n + 1, dtype=buf.dtype)  # the kernel takes one width for both: int32 below 2**31 tokens
    sums = np.zeros(len(view.rows), dtype=np.uint64)
    outside = np.zeros(1, dtype=np.int64)
    kernel(np.ascontiguousarray(view.ids), np.ascontiguousarray(view.mask).view(np.uint8),
           np.ascontiguousarray(view.offsets, dtype=np.int64), np.uint64(content.HASH_BASE), id_limit, prefix, buf,
           sums, outside)
    view.__dict__["supervised_prefix"] = prefix  # the cached_property's slot: every check reads this one
    return TokenPass(drained(buf), sums, int(outside[0]))


def profile_stats(view: RowView, id_limit: int = 1 << 24, id_counts: dict[str, np.ndarray] | None = None) -> dict:
    """Mergeable per-shard inputs of the dataset profile: fixed-bin histograms and sparse id counts
    (of the ids below ``id_limit``, the tokenizer's size: larger ones are ids_known's violations;
    ``id_counts`` when the shard's token pass has counted them)."""
    lengths = view.lengths
    out: dict = {"seq_len_hist": seq_len_histogram(lengths)}
    if view.mask is not None:
        # Per-row counts come from the shard's shared prefix sum (one compiled pass serves every check).
        per_row = view.supervised_per_row
        out["supervised_share_hist"] = share_histogram(per_row, lengths)
        # Counted in the shard's token pass; without one (no dense id range), by numpy.
        out["supervised_id_counts"] = (id_counts if id_counts is not None
                                       else sparse_counts(view.ids[view.mask], id_limit))
    return out


def observed_cap(contract: Contract, lengths: np.ndarray | None) -> Contract:
    """A contract without max_len gets the longest row's length as its cap, marked "observed".

    Rows at that length are then treated as possibly cut, which only loosens the turn checks
    for those rows; nothing fails for want of a pinned cap.
    """
    import dataclasses

    cap = int(lengths.max()) if lengths is not None and len(lengths) else 0
    return dataclasses.replace(contract, max_len=max(cap, contract.min_len), max_len_source="observed")


@dataclass
class Engine:
    """Everything a contract run knows: dataset, contract, tokenizer; and the results so far."""

    dataset: SavedDataset
    contract: Contract
    vocab: Vocabulary | None
    _results: dict[tuple[int, str], CheckResult] = field(default_factory=dict)
    _stats: dict[int, dict] = field(default_factory=dict)
    _work: ShardWork | None = None
    token_freq_path: Path | None = None  # --token-freq FILE, else token_freq.pt beside the dataset if present
    oracle: SpanOracle | None = None  # the verified template profile, how it was chosen, and the labeller
    split: tuple[int, int] | None = None  # (K, N): check only the K-th of N shard groups (--split K/N)
    #: What each contract family's contracts read, by family name (``ContractFamily.open_input``; absent: not given).
    inputs: dict[str, Any] = field(default_factory=dict)
    #: Violating rows decoded per contract (``--examples N``; ``decoded_rows.py``): here, since every worker has it.
    examples: int = DEFAULT_EXAMPLES

    def __post_init__(self) -> None:
        _ = self.dataset.layout  # a layout the tool cannot read is a usage error before any work (dataset/layouts.py)
        self.files_at_start = file_state(self.dataset.path, self.dataset.files)  # a change mid-run fails the run
        self.buffer_problems: dict[int, str] = {}  # shards whose buffers a kernel wrapper or re-check refused
        self._gates: dict[int, str | None] = {}
        if self.contract.max_len is None:  # not pinned (the generic contract): the longest row is the cap
            self.contract = observed_cap(self.contract, self.row_lengths)
        if self.vocab is not None and self.oracle is None:
            self.oracle = make_oracle(self.vocab, self.contract.template_profile)
        if self.contract.mask.convention in ("auto", "generation-tags"):
            if self.oracle is None:  # no tokenizer: the mask contracts skip, saying so
                self.contract = replace(self.contract, mask_how=f"convention = {self.contract.mask.convention}: "
                                        "not resolved without a tokenizer (pass --tokenizer)")
            else:
                self._resolve_convention()  # what the template's tags enclose, or what the data fits
        if self.oracle is not None and self.contract.mask.prompt_context != "off":
            self._select_prompts()

    def _select_prompts(self) -> None:
        """Hold per-turn rows to the generation prompt(s) their producer rendered (read off the first rows)."""
        from .contract.mask_rules import prompts_in_use

        view, labels, facts = self._sample()
        if labels is None:
            return
        chosen = prompts_in_use(view, labels, facts, self.contract.mask)
        if chosen is None:
            return
        self.oracle = replace(self.oracle, prompts=chosen)
        shown = " and ".join(repr(self.vocab.decode(list(p))) for p in chosen)
        self.contract = replace(self.contract,
                                mask_how=(self.contract.mask_how + "; " if self.contract.mask_how else "")
                                + f"generation prompt in use (read off the first rows): {shown}")

    def _resolve_convention(self) -> None:
        """Apply the contract's mask convention (learnt from the template, or inferred from the first rows)."""
        from .contract.fit import chosen, decide

        decision = decide(self.contract, self.oracle, self.vocab, frozenset(self.contract.mask_keys),
                          self._sample if self.oracle is not None else None)
        self.contract = replace(self.contract, mask=decision.policy, mask_how=decision.how,
                                convention_choice={**self.contract.convention_choice, **chosen(decision.details)})

    def _sample(self, rows: int = 2000):
        """The first rows' view, labels and mask facts (what ``convention = auto`` infers from)."""
        start, stop = self.integrity.sound_window(rows, self.dataset.num_rows)
        if "input_ids" in self.column_problems or stop <= start:
            return usable_view(self.dataset.read(Shard(0, 0, 0))), None, None
        a = self.dataset.read(Shard(0, start, stop))
        view = usable_view(a)
        labels = self.oracle.label(view.ids, view.offsets, self.contract.max_len)
        return view, labels, self.oracle.mask_facts(view.ids)

    @cached_property
    def integrity(self) -> Integrity:
        """Every record batch validated (offsets only: ~0.05 ms a shard); before anything reads a token."""
        return scan_tables([(f.name, t) for f, t in zip(self.dataset.files, self.dataset._tables)])

    @cached_property
    def row_lengths(self) -> np.ndarray | None:
        lengths = self.dataset.row_lengths()
        return None if lengths is None else self.integrity.usable_lengths(lengths)

    def unreadable(self, shard: Shard) -> str | None:
        """Why a shard must not be read: damaged buffers, a row over max_shard_tokens, files changed mid-run.

        Decided once per shard (the file check is a few stat calls when the shard opens), except
        that a defect the wrappers catch while the shard runs gates its remaining contracts too.
        """
        if shard.index in self.buffer_problems:
            return f"invalid Arrow buffers (see test_arrow_integrity): {self.buffer_problems[shard.index]}"
        if shard.index not in self._gates:
            self._gates.clear()  # one shard at a time, like its results
            self._gates[shard.index] = self._gate(shard)
        return self._gates[shard.index]

    def _gate(self, shard: Shard) -> str | None:
        reason = self.integrity.unreadable(shard.start, shard.stop)
        if reason is None and self.row_lengths is not None and shard.rows == 1:
            tokens = int(self.row_lengths[shard.start])
            if tokens > self.contract.max_shard_tokens:
                reason = (f"row {shard.start:,} holds {tokens:,} tokens, more than max_shard_tokens "
                          f"({self.contract.max_shard_tokens:,}) allows in a shard (the bound on a worker's memory); "
                          f"pass --max-shard-tokens {tokens} to check it anyway")
        if reason is None:
            changed = state_changes(self.files_at_start, file_state(self.dataset.path, self.dataset.files))
            if changed:
                reason = (f"the dataset's files changed during the run: {'; '.join(changed)} "
                          "(see test_dataset_unchanged)")
        return reason

    @cached_property
    def all_shards(self) -> list[Shard]:
        """The whole dataset's shard plan (the same on every machine of a split run)."""
        return plan_shards(self.dataset.num_rows, self.contract.shard_size,
                           self.row_lengths, self.contract.max_shard_tokens)

    @cached_property
    def shards(self) -> list[Shard]:
        """The shards this run checks: all of them, or the K-th group of N under --split K/N."""
        if self.split is None:
            return self.all_shards
        k, n = self.split
        return shard_groups(self.all_shards, self.row_lengths, n)[k - 1]

    @cached_property
    def column_problems(self) -> dict[str, str]:
        """The parts (``input_ids``, ``loss_mask``: the mask's source in the dataset's layout) the per-row checks
        cannot use, with the reason (schema failures say more)."""
        return layout_column_problems(self.dataset.layout, self.dataset.schema)

    def missing_input(self, name: str) -> str | None:
        """Why a contract that reads a family's input cannot run here (that input was not given), or None."""
        for need in spec(name).needs & family_names():
            if self.inputs.get(need) is None:
                return family(need).missing or f"no {need} input"
        return self.dataset.layout.lacks(spec(name).needs)  # a layout's own contract, in a layout without its part

    def runs(self, name: str) -> bool:
        """False for an ``on_request`` contract whose family input was not given (no option or file
        named it): it is left out of the run and its reports, not skipped."""
        return not (spec(name).on_request and self.missing_input(name) is not None)

    @cached_property
    def shard_checks(self) -> tuple[str, ...]:
        """What a shard's test runs in this run: ``SHARD_CHECKS`` and the ``on_request`` ones it has input for."""
        return tuple(c for c in names(shard_test=True) if self.runs(c))

    @cached_property
    def dataset_checks(self) -> tuple[str, ...]:
        """The contracts with a test of their own in this run (``DATASET_CHECKS`` and the requested ones)."""
        return tuple(c for c in names(Scope.DATASET) if self.runs(c))

    @cached_property
    def turned_off(self) -> dict[str, str]:
        """Contracts the user turned off by name or by a contract key, with how (``checks/gate.py``)."""
        from .checks.gate import turned_off

        return turned_off(self.contract)

    def unavailable(self, name: str) -> str | None:
        """Why a contract lacks an input it needs here (a family's input, the tokenizer), or None.

        Unlike a missing column (which ``schema`` fails), a missing input leaves the data unjudged:
        the gate refuses to start when a required contract is unavailable (``checks/gate.py``).
        """
        missing = self.missing_input(name)
        declared = spec(name)
        if missing is None and declared.missing is not None:
            missing = declared.missing(self)
        if missing is not None:
            return missing
        if TOKENIZER in declared.needs and self.vocab is None:
            return ("no tokenizer: none was named, and no tokenizer.json is in the dataset's folder, the two above it "
                    "or a tokenizer/ folder in them; pass --tokenizer DIR, the tokenizer the rows were made with")
        return None

    def skip_reason(self, name: str) -> str | None:
        """Why a contract cannot run here (what it needs, by its registry entry), or None when it can."""
        if name in self.turned_off:
            return f"not checked: {self.turned_off[name]}"
        needs = spec(name).needs
        missing = self.unavailable(name)
        if missing is not None:
            return missing
        if IDS in needs and "input_ids" in self.column_problems:
            return self.column_problems["input_ids"]
        if MASK in needs and "loss_mask" in self.column_problems:
            return self.column_problems["loss_mask"]
        return None

    def blocked(self) -> dict[str, str]:
        """Required contracts (``checks/gate.py``) that cannot run for want of an input: name -> why."""
        from .checks.gate import required

        return {name: reason for name in required(self.contract) if (reason := self.unavailable(name))}

    def dataset_check(self, name: str) -> CheckResult:
        """A dataset-level contract's verdict (its Spec's ``run``)."""
        declared = spec(name)
        if declared is None or declared.scope is not Scope.DATASET:
            raise KeyError(name)
        if name in self.turned_off:
            return CheckResult(name, "dataset", skipped=self.skip_reason(name))
        return declared.run(self)

    def work(self, shard: Shard) -> ShardWork:
        if self._work is None or self._work.shard != shard:
            self._work = None  # drop the previous shard's arrays before reading the next
            # and its results: they were reported; kept, the stats' sparse id counts alone
            # would grow a worker by ~0.8 MB a shard (~75 MB for a million rows)
            self._results.clear()
            self._stats.clear()
            self.dataset.release_pages()  # and its file pages from this process's RSS
            self._work = ShardWork(self.dataset, shard, self.contract, self.oracle,
                                   self.vocab.size if self.vocab is not None else 1 << 24)
        return self._work

    def stats(self, shard: Shard) -> dict | None:
        """Per-shard figures (None when input_ids is unusable or the shard is not read)."""
        if "input_ids" in self.column_problems or self.unreadable(shard):
            return None
        if shard.index not in self._stats:
            try:
                self._stats[shard.index] = self.work(shard).stats()
            except InvalidBuffers as exc:  # the shard's contracts skip with this reason (shard_check)
                self.buffer_problems[shard.index] = str(exc)
                return None
        return self._stats[shard.index]

    def shard_check(self, shard: Shard, name: str) -> CheckResult:
        key = (shard.index, name)
        if key not in self._results:
            reason = self.skip_reason(name)
            unreadable = self.unreadable(shard)
            if unreadable is not None:
                self._results[key] = CheckResult(name, shard.id, skipped=unreadable)
            elif reason is not None:
                self._results[key] = CheckResult(name, shard.id, skipped=reason)
            elif RAW not in spec(name).needs and shard.rows and not len(self.work(shard).view.rows):
                self._results[key] = CheckResult(name, shard.id, skipped=(
                    f"all {shard.rows:,} rows of {shard.id} are null, empty or have skewed lengths "
                    "(see test_no_nulls, test_no_empty_rows, test_lengths_agree)"))
            else:
                try:
                    self._results[key] = self._run(self.work(shard), name)
                except InvalidBuffers as exc:  # a data defect the wrappers or the re-read caught: no tool bug
                    self.buffer_problems[shard.index] = str(exc)
                    self._results[key] = CheckResult(name, shard.id, skipped=self.unreadable(shard))
        return self._results[key]

    def _run(self, w: ShardWork, name: str) -> CheckResult:
        """One contract on one shard: its Spec's ``run``, and its hint when it has one."""
        declared = spec(name)
        result = declared.run(self, w)
        if declared.hint is not None:
            result.hint = declared.hint(self, w, result)
        return result

    @staticmethod
    def mask_totals(w: ShardWork) -> tuple[np.ndarray, np.ndarray] | None:
        """Per-role (tokens, supervised tokens) for the mask checks' shortcut; None without a mask."""
        totals = w.role_totals if w.view.mask is not None else None
        return totals if totals is not None and totals[1] is not None else None

    def outside_ids(self, w: ShardWork) -> int | None:
        """The shard's ids outside the tokenizer's range, as its token pass counted them (None if it did not)."""
        fused = w.token_pass
        return fused.outside if fused is not None and w.id_limit == len(self.vocab.known) else None

    def first_tokens(self, shard: Shard, rows: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """The id at each (global row, position in it) of the open shard: -1 for a whole-row position
        (-1), one past the row's ids, or a shard whose ids were never read (``violations.parquet``'s token_id)."""
        out = np.full(len(rows), -1, dtype=np.int64)
        w = self._work
        if (not len(rows) or w is None or w.shard != shard or "arrays" not in w.__dict__
                or w.arrays.input_ids is None):
            return out
        col = w.arrays.input_ids
        local = rows - shard.start
        ok = (positions >= 0) & (local >= 0) & (local < len(col.offsets) - 1)
        ok[ok] &= positions[ok] < col.lengths[local[ok]]
        if col.null_rows is not None:
            ok[ok] &= ~col.null_rows[local[ok]]
        at = col.offsets[local[ok]] + positions[ok]
        out[ok] = col.values[at]
        if col.null_elements is not None:
            out[np.flatnonzero(ok)[col.null_elements[at]]] = -1
        return out

    def row(self, index: int) -> tuple[np.ndarray, np.ndarray | None, int | None]:
        """One row's ids, mask and seq_len (for explanations): sliced from the open shard's arrays when
        the row is in it (a shard's test explains its own rows), else a one-row shard read."""
        w = self._work
        if w is not None and w.shard.start <= index < w.shard.stop and "arrays" in w.__dict__:
            a, j = w.arrays, index - w.shard.start
        else:
            reason = self.integrity.unreadable(index, index + 1)
            if reason is not None:
                raise InvalidBuffers(reason)
            a, j = ShardWork(self.dataset, Shard(-1, index, index + 1), self.contract, None).arrays, 0

        def cut(col):
            return col.values[col.offsets[j]:col.offsets[j + 1]]

        ids = cut(a.input_ids) if a.input_ids is not None else np.zeros(0, np.int64)
        mask = None
        if a.loss_mask is not None:
            values = cut(a.loss_mask)
            mask = values if values.dtype == np.bool_ else values != 0
        seq_len = int(a.seq_len[j]) if a.seq_len is not None else None
        return ids, mask, seq_len

    def coverage_problem(self) -> str | None:
        """A tokenizer that cannot be the data's: over 1% of the first rows' ids unknown to it.

        A few unknown ids are a data defect (test_ids_known names the rows); most ids
        unknown means the wrong --tokenizer, which is a usage error, not a data verdict.
        The first 1,000 rows (~300 K ids) decide it: reading all of a 3.4 M-token first
        shard cost the controller ~35 ms before any worker could start.
        """
        readable = [s for s in self.all_shards if self.integrity.unreadable(s.start, s.stop) is None]
        if self.vocab is None or "input_ids" in self.column_problems or not readable:
            return None
        first = readable[0]
        ids = self.dataset.read(Shard(first.index, first.start, min(first.stop, first.start + 1000))).input_ids.values
        if not len(ids):
            return None
        known = self.vocab.known
        inside = (ids >= 0) & (ids < len(known))
        unknown = int(len(ids) - known[ids[inside]].sum())
        if unknown <= 0.01 * len(ids):
            return None
        return (f"--tokenizer {self.vocab.name}: {unknown:,} of the first {len(ids):,} ids of the dataset are not its "
                f"tokens (largest id {int(ids.max()):,}, tokenizer size {self.vocab.size:,}); pass the tokenizer that "
                "produced the dataset")

    # --- content, drift, token_freq -------------------------------------------------------------

    def row_hashes(self, shard: Shard) -> tuple[np.ndarray, np.ndarray]:
        """(global row index, 64-bit hash) of the shard's usable rows, for the controller's duplicate search."""
        w = self.work(shard)
        fused = w.token_pass
        return ((w.view.rows + shard.start).astype(np.int64),
                content.row_hashes(w.view, fused.sums if fused is not None else None))

    def row_keys(self, rows: np.ndarray) -> list[bytes]:
        """Exact contents (ids, then mask) of the given global rows, for comparing duplicate candidates.

        Rows are read per record batch in chunks, so memory is bounded by the chunk
        whatever the number of candidates.
        """
        rows = np.asarray(rows, dtype=np.int64)
        order = np.argsort(rows, kind="stable")
        keys: list[bytes] = [b""] * len(rows)
        has_mask = "loss_mask" not in self.column_problems
        for lo in range(0, len(rows), 4096):
            at = order[lo:lo + 4096]
            part = self.dataset.read_rows(rows[at])  # as the engine reads them: padding cut, the mask token-level
            ids = part.input_ids
            mask = part.loss_mask if has_mask else None
            for j, k in enumerate(at.tolist()):
                key = ids.values[ids.offsets[j]:ids.offsets[j + 1]].tobytes()
                if mask is not None:
                    key += b"|" + (mask.values[mask.offsets[j]:mask.offsets[j + 1]] != 0).tobytes()
                keys[k] = key
        return keys

    @cached_property
    def special_ids(self) -> np.ndarray:
        """Bool per id: added/special tokens, where the tokenizer splits text before BPE."""
        out = np.zeros(self.vocab.size, dtype=bool)
        ids = [i for i in self.vocab.added_ids if 0 <= i < self.vocab.size]  # cached with the tables: no parse
        out[ids] = True
        return out

    @cached_property
    def reply_tables(self) -> content.ReplyTables:
        vocab = self.vocab
        blank = vocab.newline_lead.copy()
        think = self.oracle.profile.reasoning
        markers = np.array([i for pair in (think,) if pair for i in pair if i is not None], dtype=np.int64)
        encoded = content.placeholder_ids(vocab, (*self.contract.content.placeholder_replies, " "))
        if len(encoded[" "]) == 1:
            blank[encoded[" "][0]] = True
        placeholders = tuple((text, np.array(encoded[text], dtype=np.int64))
                             for text in self.contract.content.placeholder_replies)
        return content.ReplyTables(blank, markers, placeholders)
