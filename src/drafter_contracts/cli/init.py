"""``drafter-contracts init DIR``: a contract pinned to a known-good dataset, read once.

The generic contract fits any dataset because it pins nothing; a gate needs the opposite.
``init`` reads a dataset the user trusts (the one a good drafter was trained on) and writes
what it found as a contract file: the row count with a tolerance, the Arrow types, the
length bounds, the tokenizer and the template profile the span oracle chose for it, with a
comment on every key. Committed next to the training config, that file gates every later
dataset: ``pytest --dataset-path=NEW --contract=contract.toml``.

The pass over the data is the engine's own (``Engine.stats`` per shard: role labels,
supervised counts, folded by the merge rules ``checks/accumulators.py`` declares, as the reducer
folds them), so what init observes is exactly what the contracts will measure.
The ``[mask]`` section comes from one function, :func:`mask_section`: the producer's convention
as ``convention = "auto"`` resolves it (a built-in one the rows fit, else the policy learnt from
them), every key written out. The same pass runs the two mask contracts under that policy, so a
dataset whose rows break the convention the others follow is refused, naming them: what init
writes passes the rows it was written from.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import UsageProblem
from ..toml_text import key_line

#: Row-count tolerance written when the user gives none: a regenerated dataset moves a little.
DEFAULT_TOLERANCE = "1%"


class NotKnownGood(Exception):
    """The dataset given to init has rows no contract can accept (one line: what and where to look)."""


@dataclass
class Observed:
    """What one pass over the dataset found (the inputs of the contract file)."""

    path: Path
    num_rows: int
    columns: dict[str, str]
    seq_len_min: int | None = None
    seq_len_max: int | None = None
    rows_at_max: int = 0
    min_supervised: int | None = None
    tokens: int = 0
    supervised_tokens: int | None = None
    rows_excluded: int = 0
    role_tokens: dict[str, int] = field(default_factory=dict)
    role_supervised: dict[str, int] = field(default_factory=dict)
    tokenizer: str | None = None
    vocab_size: int | None = None
    template: dict[str, Any] | None = None  # engine.oracle.to_dict()
    convention: str | None = None  # the mask convention inferred from the first rows (contract.fit.infer)
    convention_how: str = ""
    mask: Any = None  # the mask policy it resolved to (contract.MaskPolicy), written key by key
    learnt: Any = None  # what was learnt from the first rows (contract.learn.Learnt)
    mask_rejected: dict[int, str] = field(default_factory=dict)  # rows the policy's mask rules reject: why
    mask_shifted: dict[int, int] = field(default_factory=dict)  # shift reason code -> rows one token off that way
    pinned: dict[str, Any] = field(default_factory=dict)  # family name -> what it pins (ContractFamily.init.pins)
    seconds: float = 0.0
    #: The shards' ``Engine.stats`` folded by each statistic's merge rule (``checks/accumulators.py``), as the
    #: reducer folds them; the figures above are read off it once every shard is in.
    folded: dict[str, Any] = field(default_factory=dict)


def init_families() -> list[Any]:
    """The contract families that pin something of a known-good dataset (``ContractFamily.init``)."""
    from ..contract_families import families

    return [f for f in families() if f.init is not None]


def observe(dataset_dir: str, tokenizer: str | None, *, dataset_split: str | None = None,
            template_profile: str = "auto", family_options: Mapping[str, Any] | None = None) -> Observed:
    """One pass of the engine over every shard, keeping only the sums a contract pins.

    ``family_options``: family name -> its init option (``InitHooks.option``); each family keeps a
    partial of every shard on the same pass and pins from them."""
    import time

    t0 = time.perf_counter()
    engine, seen = _open(dataset_dir, tokenizer, dataset_split, template_profile)
    options = dict(family_options or {})
    pinning = init_families()
    for fam in pinning:
        if fam.init.open_input is not None:
            engine.inputs[fam.name] = fam.init.open_input(engine.dataset, options.get(fam.name))
    partials: dict[str, list[Any]] = {fam.name: [] for fam in pinning}
    has_mask = seen.supervised_tokens is not None
    for shard in engine.shards:
        st = engine.stats(shard)
        if st is None:
            continue
        _add_shard(seen, engine, shard, st, has_mask)
        if seen.mask is not None:
            _verify_mask(seen, engine, shard)
        for fam in pinning:
            if fam.init.shard is not None:
                partials[fam.name].append(fam.init.shard(engine, shard, st))  # while the shard is in memory
    _read_totals(seen, has_mask)
    for fam in pinning:
        if fam.init.pins is not None:
            seen.pinned[fam.name] = fam.init.pins(engine, partials[fam.name], options.get(fam.name))
    seen.seconds = time.perf_counter() - t0
    return seen


def _open(dataset_dir: str, tokenizer: str | None, dataset_split: str | None,
          template_profile: str) -> tuple[Any, Observed]:
    """The engine over the dataset under the generic contract, and what is known before the pass."""
    from ..contract import load_contract, resolve_contract_path
    from ..dataset.reader import open_dataset
    from ..engine import Engine
    from ..tokenizer.vocabulary import load_vocabulary

    dataset = open_dataset(dataset_dir, dataset_split)
    _ = dataset.table  # unreadable Arrow files are a usage error before any work
    contract = load_contract(resolve_contract_path(None), {"template_profile": template_profile})
    vocab = load_vocabulary(tokenizer) if tokenizer else None
    engine = Engine(dataset, contract, vocab)
    problem = engine.coverage_problem()
    if problem:
        raise UsageProblem(problem)
    if "input_ids" in engine.column_problems:
        raise UsageProblem(f"init {dataset_dir}: {engine.column_problems['input_ids'].split(' (')[0]}; "
                           "init needs a tokenized dataset (input_ids as lists of integers)")
    # a trainer's conversation columns: not tokens, never pinned (dataset/layouts.py)
    source = set(dataset.layout.source)
    seen = Observed(dataset.path, dataset.num_rows,
                    {c: t for c, t in dataset.column_types().items() if c not in source},
                    tokenizer=tokenizer, vocab_size=vocab.size if vocab is not None else None,
                    template=engine.oracle.to_dict() if engine.oracle is not None else None)
    if engine.oracle is not None and engine.contract.mask.convention != "auto":
        seen.convention, seen.convention_how = engine.contract.mask.convention, engine.contract.mask_how
        seen.mask = engine.contract.mask
        from ..contract.fit import learnt_for

        seen.learnt = learnt_for(engine.contract, engine.oracle, engine.vocab, engine._sample)
    seen.supervised_tokens = 0 if "loss_mask" not in engine.column_problems else None
    return engine, seen


def _add_shard(seen: Observed, engine: Any, shard: Any, st: dict[str, Any], has_mask: bool) -> None:
    """Fold one shard's ``Engine.stats`` into what init pins: the statistics ``checks/accumulators.py`` declares, by
    their merge rules, and the two figures only init reads of the shard while it is in memory: the rows at the
    longest length so far (as the engine reads rows, padding cut off) and the fewest supervised tokens in a row."""
    from ..checks.accumulators import add, total

    if st["seq_len_max"] is not None:
        at_top = int((engine.work(shard).view.lengths == st["seq_len_max"]).sum())
        top = total(seen.folded, "seq_len_max")
        seen.rows_at_max = at_top if top is None or st["seq_len_max"] > top else seen.rows_at_max + (
            at_top if st["seq_len_max"] == top else 0)
    if has_mask and st.get("supervised_tokens") is not None:
        per_row = engine.work(shard).view.supervised_per_row
        if len(per_row):
            low = int(per_row.min())
            seen.min_supervised = low if seen.min_supervised is None else min(seen.min_supervised, low)
    add(seen.folded, st)


def _read_totals(seen: Observed, has_mask: bool) -> None:
    """The dataset's figures init pins, read off the folded statistics (no shard read: sums 0, extremes None)."""
    from ..checks.accumulators import total

    seen.tokens, seen.rows_excluded = total(seen.folded, "tokens"), total(seen.folded, "rows_excluded")
    seen.seq_len_min, seen.seq_len_max = total(seen.folded, "seq_len_min"), total(seen.folded, "seq_len_max")
    # a usable mask (engine.column_problems) is in every shard read: its supervised tokens are known
    seen.supervised_tokens = (total(seen.folded, "supervised_tokens") or 0) if has_mask else None
    seen.role_tokens = total(seen.folded, "role_tokens") or {}
    seen.role_supervised = total(seen.folded, "role_supervised") or {}


#: The mask contracts init holds its own rows to: the contract it writes must pass the rows it was written from.
MASK_CHECKS = ("mask_on_assistant_spans", "mask_covers_assistant_spans")


def _verify_mask(seen: Observed, engine: Any, shard: Any) -> None:
    """The shard's rows the resolved mask policy rejects, with why (the first reason of each; a few per shard),
    and its rows whose mask is one token off (the most either mask contract counts: both see the same rows)."""
    from ..contract.mask_shift import SHIFT_TEXT

    shifted: dict[int, int] = {}
    for name in MASK_CHECKS:
        r = engine.shard_check(shard, name)
        if not r.skipped:
            for e in r.examples:
                seen.mask_rejected.setdefault(e.row, e.reason)
            for code, text in SHIFT_TEXT.items():
                shifted[code] = max(shifted.get(code, 0), r.by_reason.get(text, 0))
    for code, n in shifted.items():
        if n:
            seen.mask_shifted[code] = seen.mask_shifted.get(code, 0) + n


def shift_refusal(seen: Observed, dataset_dir: str) -> str | None:
    """One line when the rows' mask is one token off: a contract pinned to them would pin the producer's bug."""
    from ..contract.mask_shift import DIRECTION, LATE

    if not seen.mask_shifted:
        return None
    code = max(seen.mask_shifted, key=seen.mask_shifted.get)
    moved = "earlier" if code == LATE else "later"
    return (f"init {dataset_dir}: the loss_mask is shifted one token {DIRECTION[code]}: "
            f"{seen.mask_shifted[code]:,} rows pass both mask rules of convention {seen.convention} only with their "
            f"mask moved one token {moved}; fix the producer's off-by-one and run init on the corrected dataset")


def mask_refusal(seen: Observed, dataset_dir: str) -> str | None:
    """Why init writes no contract: a mask shifted one token, or rows that break the mask convention the rest
    follow (None: none do)."""
    shifted = shift_refusal(seen, dataset_dir)
    if shifted is not None:
        return shifted
    if not seen.mask_rejected:
        return None
    rows = sorted(seen.mask_rejected)
    shown = "; ".join(f"row {r}: {seen.mask_rejected[r]}" for r in rows[:5])
    return (f"init {dataset_dir}: rows break the mask convention the other rows follow ({shown}), so this is not a "
            f"known-good dataset and a contract pinned to it would fail it; see them all with "
            f"pytest --dataset-path={dataset_dir} --contract=auto, and run init on the clean rows")


# --- the contract file -------------------------------------------------------------------------

def mask_section(seen: Observed) -> list[str]:
    """``[mask]``: the producer's convention learnt from the data, key by key, with the figures that decided it.

    The policy is what ``convention = "auto"`` resolves to (``contract.fit.infer``: a built-in
    convention the first rows fit, else the policy learnt from them, ``contract/learn.py``);
    every key is written, each with what decided it. Without a tokenizer nothing can be inferred: the
    keys are left at the defaults and say so.
    """
    from ..contract import MaskPolicy

    lines = ["[mask]"]
    if seen.role_supervised or seen.role_tokens:
        lines.append("# Observed on this dataset (span-oracle roles): supervised / all tokens per role")
        roles = set(seen.role_tokens) | set(seen.role_supervised)
        for role in sorted(roles, key=lambda r: (-seen.role_tokens.get(r, 0), r)):
            sup, alltok = seen.role_supervised.get(role, 0), seen.role_tokens.get(role, 0)
            share = f"{sup / alltok:.1%}" if alltok else "n/a"
            lines.append(f"#   {role:<20} {sup:>14,} / {alltok:>14,}  ({share})")
    if seen.mask is not None:
        return lines + _policy_lines(seen)
    lines.append("# No tokenizer was given, so the convention could not be inferred (init --tokenizer DIR does).")
    lines.append("# Keys below are the defaults (speculators 0.4-0.7: assistant content, reasoning and tool calls")
    lines.append("# supervised, no end token; completeness off). Change them to the convention your producer follows.")
    defaults = MaskPolicy()
    for f in dataclasses.fields(MaskPolicy):
        value = getattr(defaults, f.name)
        lines.append(key_line(f.name, list(value) if isinstance(value, tuple) else value, _MASK_NOTES.get(f.name, "")))
    return lines


def _policy_lines(seen: Observed) -> list[str]:
    """The resolved policy key by key: the convention it is (a built-in one, or custom), how the first rows
    decided it, the measured parts, and each key with its meaning and what decided it."""
    from ..contract.presets import KEY_ORDER

    policy, learnt = seen.mask, seen.learnt
    out = ["# The producer's convention, learnt from the data (docs/conventions.md):"]
    how_text = re.sub(r"header=\S+ .*?boundary_tokens=\S+", "the keys below", seen.convention_how)
    out += [f"#   {part}" for part in how_text.split("; ")]
    if learnt is not None:
        out.append("# Supervised / all tokens of each part of an assistant turn, in the row's last and earlier turns:")
        for part, by in learnt.shares().items():
            if by:
                out.append(f"#   {part:<20} " + "  ".join(f"{place} {share}" for place, share in sorted(by.items())))
    preset = seen.convention != "custom"
    if preset:
        note = "a built-in convention; the keys below are its keys, written out"
    else:
        near = learnt.nearest if learnt is not None else ""
        note = "custom: exactly the keys below" + (
            f" (nearest preset {near}, differing in {', '.join(learnt.differs)})" if near else "")
    out.append(key_line("convention", seen.convention, note))
    how = learnt.how if learnt is not None and (not preset or learnt.equals == seen.convention) else {}
    for key in KEY_ORDER:
        value = getattr(policy, key)
        note = _MASK_NOTES.get(key, "") + (f" (learnt: {how[key]})" if key in how else "")
        out.append(key_line(key, list(value) if isinstance(value, tuple) else value, note))
    return out


_MASK_NOTES = {
    "content": "assistant text outside reasoning/tool-call blocks may be supervised",
    "reasoning_final": "<think> block of the row's last assistant turn",
    "reasoning_earlier": "<think> blocks of earlier assistant turns",
    "tool_calls": "<tool_call> blocks",
    "end_of_turn": "the assistant's end-of-turn token",
    "newline_after_end": "the newline after it",
    "boundary_tokens": "allow: a token merging header newline and content may be supervised",
    "turns": "all: every assistant turn may be supervised; last: only the row's last",
    "completeness": "off / all / last: eligible tokens of every / the last turn must be supervised",
    "reasoning_opener": "context: the generation prompt holds <think>, left unsupervised",
    "header": "assistant header tokens",
    "prompt_context": "off / last / all: the generation prompt is context, the rest of the turn supervised",
    "empty_reasoning": "supervised / context / optional: an empty <think></think> block",
    "reasoning_separator": "content / supervised / context / optional: the blank line between </think> and the reply",
    "tool_call_separator": "content / supervised / context / optional: whitespace beside a <tool_call> block",
    "optional": "keys that may be supervised but are never required",
    "convention": "the producer convention (custom: these keys as written)",
}


def rows_are(seen: Observed) -> str:
    """What a row count counts, when it is not conversations: a per-turn producer writes a row per assistant turn."""
    from ..contract.presets import ROW_PER_TURN

    return f" (one per assistant turn: {seen.convention} rows count turns, not conversations)" \
        if seen.convention in ROW_PER_TURN else ""


def _dataset_sections(seen: Observed, name: str, count_tolerance: str, max_len: int | None) -> list[str]:
    """The file's head and [contract], [schema], [dataset] and [lengths]: what the rows themselves showed."""
    today = _dt.date.today().isoformat()
    cap = max_len if max_len is not None else seen.seq_len_max
    cap_note = ("the truncation cap given to init" if max_len is not None else
                f"longest row observed ({seen.rows_at_max:,} rows at it); set the real truncation cap if it differs")
    out = [
        f"# Pinned to {seen.path} by 'drafter-contracts init' on {today}.",
        "# Gate a later dataset with:  pytest --dataset-path=NEW --contract=THIS_FILE",
        "# Every value is what init observed; loosen one where later datasets may honestly differ.",
        "",
        "[contract]",
        key_line("name", name, "shows in every report"),
        key_line("description", f"pinned to {seen.path.name}: {seen.num_rows:,} rows{rows_are(seen)}, "
                                f"{seen.tokens:,} tokens", ""),
        "",
        "[schema]",
        "# The Arrow types found; a column not listed fails schema unless allow_extra_columns = true.",
    ]
    out += [key_line(col, typ, "as found") for col, typ in seen.columns.items()]
    return out + [
        "",
        "[dataset]",
        key_line("expected_count", seen.num_rows, f"rows in the known-good dataset{rows_are(seen)}"),
        key_line("count_tolerance", count_tolerance, "allowed distance: rows, or a percentage"),
        key_line("allow_extra_columns", False, "columns beyond [schema] fail the schema contract"),
        "",
        "[lengths]",
        key_line("min_len", seen.seq_len_min or 0, "shortest row observed"),
        key_line("max_len", cap or 0, cap_note),
        key_line("min_supervised", seen.min_supervised if seen.min_supervised is not None else 0,
                 "fewest supervised tokens in a row observed"),
        "",
    ]


def _tokenizer_section(seen: Observed) -> list[str]:
    """[tokenizer]: the tokenizer and template profile init checked with, or why there is none."""
    out = ["[tokenizer]"]
    if not seen.tokenizer:
        return out + ["# No tokenizer given to init: the contracts that read tokens skip until one is set here",
                      "# (path = \"DIR\") or passed with --tokenizer."]
    template = seen.template or {}
    builtin = template.get("source") == "builtin"
    out.append(key_line("path", seen.tokenizer, "the tokenizer the dataset was checked with"))
    if seen.vocab_size is not None:
        out.append(key_line("vocab_size", seen.vocab_size,
                            "ids the tokenizer has; another tokenizer is a usage error"))
    out.append(key_line("template_profile", template.get("name") if builtin else "auto",
                        "built-in profile init chose" if builtin else "derived from the chat template, as init did"))
    out.append(f"# Template profile chosen: {json.dumps(template, ensure_ascii=False)}")
    return out


def _policy_sections() -> list[str]:
    """[content] and [drift] at their defaults, written out so a reader sees what can be tightened."""
    from ..contract.file import ContentPolicy, DriftPolicy

    return [
        "[content]",
        key_line("strict", ContentPolicy.strict,
                 "false: suspicious content (duplicates, placeholder replies) warns"),
        key_line("block_size", ContentPolicy.block_size,
                 "DFlash block size: anchors are never in a row's last block"),
        "",
        "[drift]",
        key_line("sample_rows", DriftPolicy.sample_rows,
                 "at most this many rows re-encoded with the tokenizer (0: off)"),
        key_line("sample_tokens", DriftPolicy.sample_tokens, "and at most about this many tokens"),
        key_line("seed", DriftPolicy.seed, "which rows"),
        ""]


def render_contract(seen: Observed, name: str, *, count_tolerance: str = DEFAULT_TOLERANCE,
                    max_len: int | None = None, mask: Callable[[Observed], list[str]] = mask_section) -> str:
    """The contract file's text: every key pinned to what ``seen`` found, each with its comment."""
    out = [*_dataset_sections(seen, name, count_tolerance, max_len), *_tokenizer_section(seen)]
    out += ["", *mask(seen), ""]
    for fam in init_families():
        out += [*fam.init.section(seen.pinned.get(fam.name)), ""]
    out += _policy_sections()
    return "\n".join(out)


def write_contract(text: str, out: Path, force: bool = False) -> Path:
    """Write the file (refusing to replace one unless ``force``), then prove it loads as a contract."""
    from ..contract import load_contract

    if out.exists() and not force:
        raise UsageProblem(f"init -o {out}: already exists; pass --force to replace it or choose another name")
    if out.is_dir():
        raise UsageProblem(f"init -o {out}: is a folder; pass a file name such as {out / 'contract.toml'}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, "utf-8")
    except OSError as exc:
        raise UsageProblem(f"init -o {out}: cannot be written ({exc.strerror or exc}); "
                           "choose a writable place") from None
    load_contract(out)  # what init writes must be a contract the suite accepts
    return out


def run_init(dataset_dir: str, out: str, tokenizer: str | None, *, force: bool = False,
             count_tolerance: str = DEFAULT_TOLERANCE, max_len: int | None = None, name: str | None = None,
             dataset_split: str | None = None, template_profile: str = "auto",
             family_options: Mapping[str, Any] | None = None) -> tuple[Observed, Path]:
    """Check the arguments, observe the dataset, write the contract; UsageProblem on bad input."""
    from ..contract.file import Tolerance
    from ..tokenizer.source import resolve_tokenizer

    Tolerance.parse(count_tolerance, "init --count-tolerance")
    if max_len is not None and max_len < 1:
        raise UsageProblem(f"init --max-len {max_len}: must be >= 1")
    target = Path(out).expanduser().resolve()
    data = Path(dataset_dir).expanduser().resolve()
    if data == target or data in target.parents:
        raise UsageProblem(f"init -o {out}: is inside the dataset folder; "
                           "the dataset is read-only, write the contract elsewhere")
    if target.exists() and not force:
        raise UsageProblem(f"init -o {out}: already exists; pass --force to replace it or choose another name")
    if not tokenizer:  # the one saved beside the dataset, as a check would find it (tokenizer/source.py)
        from ..tokenizer.source import discover_tokenizer

        found = discover_tokenizer(data if data.is_dir() else data.parent)
        tokenizer = str(found) if found is not None else None
    if tokenizer:
        resolve_tokenizer(tokenizer)
        path = Path(tokenizer).expanduser()
        tokenizer = str(path.resolve()) if path.exists() else tokenizer  # a committed contract must not depend on cwd
    for fam in init_families():
        if fam.init.check is not None:
            fam.init.check((family_options or {}).get(fam.name))
    seen = observe(dataset_dir, tokenizer, dataset_split=dataset_split, template_profile=template_profile,
                   family_options=family_options)
    if max_len is not None and seen.seq_len_max is not None and seen.seq_len_max > max_len:
        raise UsageProblem(f"init --max-len {max_len}: the dataset has rows of {seen.seq_len_max:,} tokens; "
                           "pass the cap the dataset was truncated at")
    if seen.rows_excluded:
        raise NotKnownGood(f"init {dataset_dir}: {seen.rows_excluded:,} rows are null, empty or have disagreeing "
                           "lengths, so this is not a known-good dataset; see them with "
                           f"pytest --dataset-path={dataset_dir} and run init on a clean one")
    refusal = mask_refusal(seen, dataset_dir)
    if refusal:
        raise NotKnownGood(refusal)
    text = render_contract(seen, name or seen.path.name, count_tolerance=count_tolerance, max_len=max_len)
    return seen, write_contract(text, target, force)
