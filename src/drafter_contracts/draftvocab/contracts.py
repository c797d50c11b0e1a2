"""The draft-vocabulary contracts: the mapping is well formed, it is the one this dataset's counts
produce, and it covers the supervised tokens.

* ``vocab_mapping_consistent`` (a test of its own): ``t2d`` bool with exactly N entries true,
  ``nonzero(t2d) == d2t + arange(N)``, ids ascending and tokens of the tokenizer, and the sizes and
  fingerprint a contract pins;
* ``vocab_mapping_matches_data`` (whole dataset): the selection equals what ``rule.py`` derives from
  the exact supervised counts the shards' token pass already made (``run.supervised_counts()``: no
  second read of the ids), and says whether ``token_freq.pt`` and the mapping are stale together;
* ``draft_vocab_coverage`` (whole dataset, per-shard partial): the share of supervised tokens the
  draft vocabulary covers, overall, per role and per row, and every supervised special token covered.

Without a mapping each is skipped with the reason; a mapping that is not well formed skips the other
two (it names one contract: ``vocab_mapping_consistent``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..checks.declare import IDS, MASK, Scope, Spec, Verdict, register
from ..checks.token_freq import FILE_NAME as TOKEN_FREQ, load_token_freq
from ..results import CheckResult
from ..spans.labels import Role
from .files import DraftMapping, fingerprint
from .policy import NAME, VocabPolicy
from .rule import dense, expected_selection

CONSISTENT, MATCHES, COVERAGE = "vocab_mapping_consistent", "vocab_mapping_matches_data", "draft_vocab_coverage"
#: Per-row coverage histogram: 20 bins of 5% over [0, 1), and one for rows covered entirely.
ROW_BINS = 20
TOP_LEFT_OUT = 5
#: Below this overlap with the expected selection, a mapping is said to look built from other data.
OTHER_DATA_OVERLAP = 0.95
#: The roles the coverage is split by (the span labeller's assistant parts and the end marker).
ROLES = {Role.ASSISTANT: "content", Role.REASONING: "reasoning", Role.TOOL_CALL: "tool_calls",
         Role.ASSISTANT_END: "end_of_turn"}
KEEP_ROWS = 10


def _policy(e) -> VocabPolicy:
    return e.contract.families.get(NAME) or VocabPolicy()


def _name(e, i: int) -> str:
    return f"{i} {e.vocab.decode([i])!r}" if e.vocab is not None else str(i)


# --------------------------------------------------------------------------- well formed


def structure_problems(m: DraftMapping, vocab_size: int | None, known: np.ndarray | None) -> list[str]:
    """What makes ``d2t``/``t2d`` unusable together (each a sentence with the figure that shows it)."""
    d2t, t2d = m.d2t, m.t2d
    if t2d.ndim != 1 or d2t.ndim != 1:
        return [f"d2t has shape {list(d2t.shape)} and t2d {list(t2d.shape)}; both must be one-dimensional"]
    out = []
    if t2d.dtype != np.bool_:
        out.append(f"t2d is {t2d.dtype}, not bool over the target vocabulary")
    if not np.issubdtype(d2t.dtype, np.integer):
        return out + [f"d2t is {d2t.dtype}, not integer offsets"]
    n, marked = len(d2t), np.flatnonzero(t2d)
    if len(marked) != n:
        out.append(f"t2d marks {len(marked):,} ids but d2t has {n:,} entries; exactly N = {n:,} must be true")
    target = d2t.astype(np.int64) + np.arange(n, dtype=np.int64)
    if n > 1 and not np.all(np.diff(target) > 0):
        bad = int(np.flatnonzero(np.diff(target) <= 0)[0])
        out.append(f"d2t + arange(N) is not strictly ascending (draft ids {bad} and {bad + 1} "
                   f"map to {int(target[bad])} and {int(target[bad + 1])})")
    if len(marked) == n and not np.array_equal(marked, target):
        at = np.flatnonzero(marked != target)
        shift = np.unique(target[at] - marked[at])
        how = f" (every one off by {int(shift[0]):+d})" if len(shift) == 1 and len(at) > 1 else ""
        out.append(f"nonzero(t2d) != d2t + arange(N) at {len(at):,} of {n:,} draft ids{how}; first at draft id "
                   f"{int(at[0])}: d2t gives {int(target[at[0]])}, t2d marks {int(marked[at[0]])}")
    if vocab_size is not None:
        ids = target if len(marked) != n else marked
        outside = ids[(ids < 0) | (ids >= vocab_size)]
        if len(outside):
            out.append(f"{len(outside):,} draft ids are outside the tokenizer's {vocab_size:,} ids "
                       f"(first {int(outside[0])})")
        elif known is not None and not known[ids].all():
            unknown = ids[~known[ids]]
            out.append(f"{len(unknown):,} draft ids are not tokens of the tokenizer (first {int(unknown[0])})")
        if len(t2d) < vocab_size:
            out.append(f"t2d covers {len(t2d):,} target ids, fewer than the tokenizer's {vocab_size:,}: "
                       "it was built for another vocabulary")
    return out


def pin_problems(m: DraftMapping, policy: VocabPolicy) -> list[str]:
    """What differs from the contract's pins (the sizes, the fingerprint, the file name's N)."""
    out, n = [], len(m.d2t)
    if m.named_size is not None and m.named_size != n:
        out.append(f"{m.files[0].name} holds {n:,} entries, not the {m.named_size:,} its name says")
    if policy.draft_vocab_size is not None and policy.draft_vocab_size != n:
        out.append(f"draft size {n:,}, the contract pins [vocab] draft_vocab_size = {policy.draft_vocab_size:,}")
    if policy.target_vocab_size is not None and len(m.t2d) != policy.target_vocab_size:
        out.append(f"t2d has {len(m.t2d):,} entries, the target vocabulary has {policy.target_vocab_size:,} "
                   "([vocab] target_vocab_size): a mapping of another vocabulary size")
    if policy.fingerprint is not None and not out:
        got = fingerprint(m)
        if got != policy.fingerprint:
            out.append(f"fingerprint {got}, the contract pins {policy.fingerprint}: another draft vocabulary")
    return out


def mapping_state(e) -> tuple[DraftMapping | None, str | None, list[str]]:
    """(mapping, why the data contracts cannot use it, the consistency problems), once per process."""
    src = e.inputs.get(NAME)
    if src is None:
        return None, ("no draft vocabulary mapping given "
                      "(d2t-N.npy / t2d-N.npy beside the dataset, --vocab-mapping FILE)"), []
    cached = getattr(src, "_state", None)
    if cached is not None:
        return cached
    m, problem = src.load()
    if m is None:
        state = (None, src.absent or problem, [problem] if not src.absent else [])
    else:
        vocab = e.vocab
        structural = structure_problems(m, vocab.size if vocab is not None else None,
                                        vocab.known if vocab is not None else None)
        problems = structural + pin_problems(m, _policy(e))
        why = f"the mapping {m.where} is not well formed (see test_{CONSISTENT})" if structural else None
        state = (m, why, problems)
    src._state = state
    return state


def check_consistent(e) -> CheckResult:
    src = e.inputs.get(NAME)
    m, why, problems = mapping_state(e)
    if m is None and not problems:
        return CheckResult(CONSISTENT, "dataset", skipped=why)
    n = len(m.d2t) if m is not None else 0
    message = ""
    if problems:
        message = f"{m.where if m is not None else ' + '.join(p.name for p in src.files)}: " + "; ".join(problems)
    if e.vocab is None and m is not None and not problems:
        return CheckResult(CONSISTENT, "dataset", rows_checked=n)  # ids checked against t2d only; no tokenizer
    return CheckResult(CONSISTENT, "dataset", rows_checked=n, message=message)


# --------------------------------------------------------------------------- built from this data


def _counts(run, name: str) -> tuple[np.ndarray | None, str | None]:
    """The dataset's dense supervised counts, or why they do not cover the whole dataset."""
    e = run.engine
    if "input_ids" in e.column_problems or "loss_mask" in e.column_problems:
        return None, e.column_problems.get("input_ids", e.column_problems.get("loss_mask"))
    if e.split is not None and e.split[1] > 1:
        return None, (f"--split {e.split[0]}/{e.split[1]}: the mapping is built from the whole dataset's counts; "
                      "check it in a run without --split")
    counts = run.supervised_counts()
    if counts is None or len(run.shard_stats()) != len(e.shards):
        return None, (f"stats cover {len(run.shard_stats())} of {len(e.shards)} shards (tests deselected or skipped); "
                      f"{name} needs every row's counts")
    return dense(*counts), None


def _token_freq_path(e):
    path = getattr(e, "token_freq_path", None)
    if path is None and (e.dataset.path / TOKEN_FREQ).is_file():
        path = e.dataset.path / TOKEN_FREQ
    return path


def _stale_pair(e, data: np.ndarray, m: DraftMapping, selected: np.ndarray) -> tuple[str, list[str]]:
    """token_freq.pt and the mapping taken together: (sentence for a failing mapping, detail lines)."""
    path = _token_freq_path(e)
    if path is None:
        return "", [f"no {TOKEN_FREQ} to compare the mapping with"]
    stored, problem = load_token_freq(path)
    if stored is None:
        return "", [f"{TOKEN_FREQ} not compared: {problem}"]
    size = max(len(stored), len(data))
    fresh = np.array_equal(np.pad(stored, (0, size - len(stored))), np.pad(data, (0, size - len(data))))
    from_file = np.array_equal(expected_selection(stored, len(selected), m.producer, selected).ids, selected)
    if fresh:
        return (f"{TOKEN_FREQ} counts this dataset, so only the mapping is stale",
                [f"{TOKEN_FREQ} equals this dataset's counts"])
    if from_file:
        return (f"both are stale: the mapping is the one {path.name} produces, and {path.name} does not count this "
                f"dataset (see test_token_freq)"), [f"{TOKEN_FREQ} is stale and the mapping was built from it"]
    return (f"both are stale: {path.name} does not count this dataset either, and the mapping is not built from it"), [
        f"{TOKEN_FREQ} is stale; the mapping comes from other counts still"]


def matches_verdict(e, data: np.ndarray, m: DraftMapping) -> Verdict:
    """The mapping against the selection the producer's rule makes from ``data``."""
    selected = m.selected()
    n, total = len(selected), int(data.sum())
    exp = expected_selection(data, n, m.producer, selected)
    left_out = np.setdiff1d(exp.ids, selected, assume_unique=True)
    details = [f"rule: {m.producer} (most frequent first" + (", ties and padding in the data's order"
               if m.producer == "specforge" else ", ties by id, padding with the lowest unused ids") + ")",
               f"draft size {n:,}; {exp.distinct:,} distinct supervised ids over {total:,} supervised tokens"]
    if exp.open_choice:
        details.append(f"{exp.open_choice:,} ids of equal count at the boundary: "
                       "the rule leaves their order to the data")
    problems = []
    if len(left_out):
        overlap = 1 - len(left_out) / n if n else 0.0
        top = left_out[np.argsort(-data[left_out], kind="stable")[:TOP_LEFT_OUT]]
        lost = int(data[left_out].sum())
        shown = "; ".join(f"{_name(e, int(i))} ×{int(data[i]):,}" for i in top)
        sentence = (f"{len(left_out):,} of {n:,} draft ids differ from the selection this dataset's supervised counts "
                    f"produce ({m.producer} rule); the left-out ids carry {lost:,} supervised tokens "
                    f"({lost / total:.2%}), most frequent: {shown}; overlap {overlap:.1%}")
        if overlap < OTHER_DATA_OVERLAP:
            sentence += " — the mapping looks built from other data"
        pair, lines = _stale_pair(e, data, m, selected)
        problems.append(sentence + (f"; {pair}" if pair else ""))
        details += lines
    else:
        details += _stale_pair(e, data, m, selected)[1]
    if exp.padding and not _policy(e).allow_padding:
        pad = np.setdiff1d(selected, np.flatnonzero(data), assume_unique=True)
        problems.append(f"draft size {n:,} is larger than the {exp.distinct:,} distinct supervised ids: "
                        f"{len(pad):,} draft ids ({pad[:3].tolist()}…) are padding that is never supervised; "
                        f"choose a draft size <= {exp.distinct:,} (or [vocab] allow_padding = true)")
    result = CheckResult(MATCHES, "dataset", rows_checked=e.dataset.num_rows, message="; ".join(problems))
    return Verdict(result, details)


def _whole_inputs(run, name: str) -> tuple[DraftMapping, np.ndarray] | CheckResult:
    """A whole-dataset contract's mapping and exact counts, or its skip saying which one is missing."""
    m, why, _ = mapping_state(run.engine)
    if m is None or why is not None:
        return CheckResult(name, "dataset", skipped=why)
    data, why = _counts(run, name)
    if data is None:
        return CheckResult(name, "dataset", skipped=why)
    return m, data


def _reduce_matches(run) -> Verdict | CheckResult:
    got = _whole_inputs(run, MATCHES)
    return got if isinstance(got, CheckResult) else matches_verdict(run.engine, got[1], got[0])


# --------------------------------------------------------------------------- coverage


def covered_table(e, m: DraftMapping) -> np.ndarray:
    """Bool per id, True for the draft vocabulary, with a False sentinel last: ``np.take(mode="clip")`` sends
    ids beyond it (unknown ids, a t2d shorter than the data's range) there, uncovered."""
    src = e.inputs.get(NAME)
    table = getattr(src, "_table", None)
    if table is None:
        size = max(len(m.t2d), e.vocab.size if e.vocab is not None else 0) + 1
        table = np.zeros(size, dtype=bool)
        table[:len(m.t2d)] = m.t2d.astype(bool)
        src._table = table
    return table


def shard_coverage(e, shard) -> dict[str, Any] | None:
    """What one shard contributes: uncovered supervised tokens by role, the per-row coverage histogram and
    its lowest rows. One gather of the ids into the draft table; then only the (few) uncovered positions."""
    m, why, _ = mapping_state(e)
    if m is None or why is not None or e.unreadable(shard):
        return None
    w = e.work(shard)
    view = w.view
    if view.mask is None:
        return None
    covered = np.take(covered_table(e, m), view.ids, mode="clip")
    missed = np.flatnonzero(np.greater(view.mask, covered))  # supervised and not in the draft vocabulary
    per_row_sup = view.supervised_per_row
    row_of = np.searchsorted(view.offsets, missed, side="right") - 1
    per_row_missed = np.bincount(row_of, minlength=len(per_row_sup))
    has = per_row_sup > 0
    share = 1.0 - per_row_missed[has] / per_row_sup[has]
    hist = np.bincount(np.minimum((share * ROW_BINS).astype(np.int64), ROW_BINS - 1), minlength=ROW_BINS)
    full = int(np.count_nonzero(per_row_missed[has] == 0))
    hist[ROW_BINS - 1] -= full  # the 95..100% bin keeps rows below 100%; full rows get a bin of their own
    rows = (view.rows[has] + shard.start).astype(np.int64)
    low = np.argsort(share, kind="stable")[:KEEP_ROWS]
    out: dict[str, Any] = {"supervised": int(per_row_sup.sum()), "missed": int(len(missed)),
                           "row_hist": [*map(int, hist), full], "rows": int(has.sum()),
                           "lowest": [[int(rows[i]), float(share[i])] for i in low]}
    threshold = _policy(e).min_row_coverage
    if threshold is not None:
        below = share < threshold
        out["below"] = int(below.sum())
        out["below_rows"] = [int(r) for r in rows[below][:KEEP_ROWS]]
    labels = w.labels
    if labels is not None:
        out["missed_by_role"] = {Role(i).name.lower(): int(c) for i, c in
                                 enumerate(np.bincount(labels.role[missed], minlength=len(Role))) if c}
    return out


def _carrier(e, w) -> CheckResult:
    """The shard's record of the coverage contract (its verdict is the controller's)."""
    _, why, _ = mapping_state(e)
    if why is not None:
        return CheckResult(COVERAGE, w.shard.id, skipped=why)
    return CheckResult(COVERAGE, w.shard.id, rows_checked=len(w.view.rows))


def _merged_rows(parts: list[dict]) -> dict[str, Any]:
    """The shards' per-row partials summed: coverage histogram, rows, rows below the floor, lowest rows, misses."""
    merged: dict[str, Any] = {"hist": np.zeros(ROW_BINS + 1, dtype=np.int64), "rows": 0, "below": 0,
                              "below_rows": [], "lowest": [], "missed": {}}
    for p in parts:
        merged["hist"] += np.asarray(p["row_hist"], dtype=np.int64)
        merged["rows"] += p["rows"]
        merged["below"] += p.get("below", 0)
        merged["below_rows"] += p.get("below_rows", [])
        merged["lowest"] += p["lowest"]
        for k, v in (p.get("missed_by_role") or {}).items():
            merged["missed"][k] = merged["missed"].get(k, 0) + v
    merged["lowest"].sort(key=lambda x: x[1])
    return merged


def _coverage_by_role(parts: list[dict], stats: list[dict], missed: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Supervised and covered tokens per role; empty when no shard had role labels (no tokenizer)."""
    role_sup: dict[str, int] = {}
    for st in stats:
        for k, v in (st.get("role_supervised") or {}).items():
            role_sup[k] = role_sup.get(k, 0) + int(v)
    by_role: dict[str, dict[str, Any]] = {}
    if not (role_sup and any("missed_by_role" in p for p in parts)):
        return by_role
    for role, label in ROLES.items():
        sup = role_sup.get(role.name.lower(), 0)
        if sup:
            by_role[label] = {"supervised": sup, "covered": sup - missed.get(role.name.lower(), 0),
                              "share": (sup - missed.get(role.name.lower(), 0)) / sup}
    return by_role


def _special_tokens_lost(e, data: np.ndarray, ids: np.ndarray, inside: np.ndarray,
                         problems: list[str], details: list[str]) -> None:
    """A supervised special token outside the draft vocabulary is a problem: the drafter never predicts it."""
    if e.vocab is None:
        details.append("special tokens: not checked (no tokenizer)")
        return
    special = np.zeros(len(data), dtype=bool)
    sp = e.special_ids
    special[:min(len(sp), len(data))] = sp[:len(data)]
    lost = ids[special[ids] & ~inside]
    if len(lost):
        problems.append(f"{len(lost)} special token(s) the mask supervises are outside the draft vocabulary, "
                        "so the drafter never predicts them: "
                        + "; ".join(f"{_name(e, int(i))} ×{int(data[i]):,}" for i in lost[:5]))
    else:
        details.append(f"every supervised special token is covered ({int((special[ids]).sum())} distinct)")


def coverage_verdict(e, data: np.ndarray, m: DraftMapping, parts: list[dict], stats: list[dict]) -> Verdict:
    """Overall from the exact counts; per role and per row from the shards' partials."""
    policy = _policy(e)
    table = covered_table(e, m)
    total = int(data.sum())
    ids = np.flatnonzero(data)
    inside = np.take(table, ids, mode="clip")
    covered = int(data[ids[inside]].sum())
    overall = covered / total if total else 1.0
    problems = []
    details = [f"draft vocabulary of {len(m.d2t):,} ids covers {covered:,} of {total:,} supervised tokens "
               f"({overall:.4%}); {int((~inside).sum()):,} of {len(ids):,} distinct supervised ids are outside it"]
    rows = _merged_rows(parts)
    by_role = _coverage_by_role(parts, stats, rows["missed"])
    if by_role:
        details.append("per role (span-oracle labels): "
                       + "; ".join(f"{k} {v['share']:.3%} of {v['supervised']:,}" for k, v in by_role.items()))
    else:
        details.append("per role: not measured (no tokenizer, so no role labels)")
    if rows["lowest"]:
        details.append("lowest rows: " + ", ".join(f"row {r:,} {s:.1%}" for r, s in rows["lowest"][:5]))
    details.append(f"rows fully covered: {int(rows['hist'][-1]):,} of {rows['rows']:,}")
    _special_tokens_lost(e, data, ids, inside, problems, details)
    if policy.min_coverage is not None and overall < policy.min_coverage:
        problems.append(f"covers {overall:.4%} of the supervised tokens, "
                        f"below [vocab] min_coverage = {policy.min_coverage:.4%}")
    if rows["below"]:
        first = ", ".join(f"{r:,}" for r in sorted(rows["below_rows"])[:5])
        problems.append(f"{rows['below']:,} rows are covered below [vocab] min_row_coverage = "
                        f"{policy.min_row_coverage:.1%} (first rows {first})")
    figures = {"overall": overall, "supervised": total, "covered": covered, "draft_vocab_size": len(m.d2t),
               "by_role": by_role, "row_hist": [int(x) for x in rows["hist"]], "row_bins": ROW_BINS,
               "rows": rows["rows"], "rows_below": rows["below"], "min_coverage": policy.min_coverage,
               "min_row_coverage": policy.min_row_coverage}
    result = CheckResult(COVERAGE, "dataset", rows_checked=rows["rows"], rows_violating=rows["below"],
                         message="; ".join(problems))
    return Verdict(result, details, figures)


def _reduce_coverage(run) -> Verdict | CheckResult:
    got = _whole_inputs(run, COVERAGE)
    if isinstance(got, CheckResult):
        return got
    parts = [p for p in run.partials(COVERAGE).values() if p is not None]
    return coverage_verdict(run.engine, got[1], got[0], parts, run.shard_stats())


register(Spec(CONSISTENT, Scope.DATASET, "d2t/t2d are one well-formed draft vocabulary of the tokenizer's ids",
              needs=frozenset(), unit="draft ids", run=check_consistent))
register(Spec(MATCHES, Scope.WHOLE, "the draft vocabulary is the one this dataset's supervised counts produce",
              needs=frozenset({IDS, MASK}), reduce=_reduce_matches))
register(Spec(COVERAGE, Scope.WHOLE,
              "the draft vocabulary covers the supervised tokens: overall, per row, special tokens",
              needs=frozenset({IDS, MASK}), run=_carrier, partial=shard_coverage, reduce=_reduce_coverage))
