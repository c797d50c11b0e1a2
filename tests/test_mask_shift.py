"""A loss_mask one token late or early is named as a shift, with its direction and rows, in one finding.

The pure function on hand-built rows; both mask contracts on the real fixture dataset with one row shifted
(the ``mask_shift_right`` / ``mask_shift_left`` mutants) and on the clean dataset; a wholly shifted dataset
under ``convention = auto`` (a real pytest run: exit 1, the shift named once for both contracts) and
under ``init`` (refused, in one line).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from drafter_contracts.contract.mask_shift import EARLY, LATE, SHIFT_TEXT, mask_shift_of, shifted_rows
from drafter_contracts.contract import builtin_contracts, load_contract
from drafter_contracts.dataset.reader import open_dataset
from drafter_contracts.engine import Engine
from drafter_testkit.generate import save_table
from drafter_testkit.mutants import MUTANTS, _read
from helpers import section_lines

MASK = ("mask_on_assistant_spans", "mask_covers_assistant_spans")
ROWS = 2000


def flat(*rows: str) -> tuple[np.ndarray, np.ndarray]:
    """Rows written as strings of 0/1 (one character a token): flat bools and offsets."""
    values = np.array([c == "1" for r in rows for c in r], dtype=bool)
    return values, np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int64)


# --------------------------------------------------------------------------- the pure function

#: Two rows of one template: context, a reply of three tokens (allowed and required), its end token, more context.
ALLOWED = "0001110000" "0000111000"


def test_right_left_and_unshifted_rows_on_hand_built_arrays():
    mask, offsets = flat("0000111000",  # late: the reply's first token left out, the end token supervised
                         "0001110000")  # early: the token before the reply supervised, its last left out
    allowed, _ = flat(ALLOWED[:10], ALLOWED[10:])
    shift = shifted_rows(mask, offsets, allowed, allowed.copy())
    assert shift.late.tolist() == [True, False] and shift.early.tolist() == [False, True]
    assert shift.codes(np.array([0, 1])).tolist() == [LATE, EARLY] and shift.count == 2
    right, _ = flat(ALLOWED[:10], ALLOWED[10:])
    clean = shifted_rows(right, offsets, allowed, allowed.copy())
    assert clean.count == 0 and clean.direction() is None


def test_empty_rows_rows_without_supervision_and_other_defects_are_not_shifts():
    mask, offsets = flat("", "0000000000", "0001111000", "0011111000", "1000000000")
    allowed, _ = flat("", "0001110000", "0001110000", "0001110000", "0000000000")
    shift = shifted_rows(mask, offsets, allowed, allowed.copy())
    # empty; nothing supervised; one token too many (no move makes it pass); two too many; a first token
    # supervised where nothing may be (moving it earlier would drop it: a shift never starts a row supervised)
    assert shift.late.tolist() == shift.early.tolist() == [False] * 5
    assert shifted_rows(np.zeros(0, bool), np.zeros(1, np.int64), np.zeros(0, bool), np.zeros(0, bool)).count == 0


def test_the_token_a_move_vacates_is_not_required():
    """A reply that runs to the row's end: shifted right, its last bit fell off the row."""
    mask, offsets = flat("0000111")
    allowed, _ = flat("0001111")
    assert shifted_rows(mask, offsets, allowed, allowed.copy()).late.tolist() == [True]


def test_a_row_that_passes_is_never_shifted():
    mask, offsets = flat("0000111000")
    allowed, _ = flat("0000111100")  # the end token may carry loss but need not: the row passes as it stands
    assert shifted_rows(mask, offsets, allowed, mask.copy()).count == 0


# --------------------------------------------------------------------------- the mask contracts

@pytest.fixture(scope="module")
def contract():
    return load_contract(builtin_contracts()["qwen3.6-dflash"], {"expected_count": ROWS})


def mask_results(path: Path, contract, vocab) -> dict[str, list]:
    engine = Engine(open_dataset(str(path)), contract, vocab)
    return {name: [engine.shard_check(shard, name) for shard in engine.shards] for name in MASK}


@pytest.mark.parametrize("mutant, code", [("mask_shift_right", LATE), ("mask_shift_left", EARLY)])
def test_the_shifted_row_is_one_finding_in_both_mask_contracts(mutant, code, clean_dataset, contract, vocab,
                                                               tmp_path):
    mutation = MUTANTS[mutant](clean_dataset, tmp_path / "m", 0)
    for name, results in mask_results(tmp_path / "m", contract, vocab).items():
        failing = [r for r in results if not r.ok]
        assert sum(r.rows_violating for r in failing) == len(mutation.rows), name
        (result,) = failing
        assert result.by_reason == {SHIFT_TEXT[code]: 1}, name  # the row's other reasons are folded into it
        assert result.severity[SHIFT_TEXT[code]] == 0
        (example,) = result.examples
        assert example.row == mutation.rows[0]
        assert example.reason.startswith(SHIFT_TEXT[code] + "; as it stands: ")
        assert ("right (late)" if code == LATE else "left (early)") in example.reason


def test_the_clean_dataset_has_no_shift(clean_dataset, contract, vocab):
    engine = Engine(open_dataset(str(clean_dataset)), contract, vocab)
    for shard in engine.shards:
        assert all(engine.shard_check(shard, name).ok for name in MASK)
        w = engine.work(shard)
        assert mask_shift_of(w.view, w.labels, engine.contract, w.mask_facts).count == 0


def test_a_legitimate_one_token_difference_is_not_a_shift(clean_dataset, contract, vocab, tmp_path):
    """One end token supervised against the policy: one token off, but no move makes the row pass."""
    mutation = MUTANTS["mask_im_end"](clean_dataset, tmp_path / "m", 0)
    got = mask_results(tmp_path / "m", contract, vocab)
    (result,) = [r for r in got["mask_on_assistant_spans"] if not r.ok]
    assert [e.row for e in result.examples] == mutation.rows
    assert not set(result.by_reason) & set(SHIFT_TEXT.values())


# --------------------------------------------------------------------------- a wholly shifted dataset

@pytest.fixture(scope="module")
def shifted_right(tmp_path_factory, clean_dataset) -> Path:
    """The fixture dataset with every row's mask one token late."""
    table = _read(clean_dataset)
    masks = [[False] + m[:-1] for m in table["loss_mask"].to_pylist()]
    out = tmp_path_factory.mktemp("shifted") / "data"
    save_table(table.set_column(1, "loss_mask", pa.array(masks, table.schema.field("loss_mask").type)), out)
    return out


def test_auto_convention_fails_a_shifted_dataset_naming_the_shift(shifted_right, tokenizer_dir, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--report-dir={tmp_path / 'r'}",
                           f"--dataset-path={shifted_right}", "--contract=auto", f"--tokenizer={tokenizer_dir}",
                           "-n", "0"], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env=os.environ.copy())
    assert proc.returncode == 1, proc.stdout[-3000:]
    lines = section_lines(proc.stdout)
    assert "loss_mask shifted one token right (late)" in lines[0]  # the convention line names it
    text = SHIFT_TEXT[LATE]
    both = "(mask_on_assistant_spans and mask_covers_assistant_spans"
    listed = [line for line in lines if text in line]
    assert len(listed) == 1 and both in listed[0], listed
    assert any(line.lstrip().startswith("FAIL mask_covers_assistant_spans") and "listed under" in line
               for line in lines)
    verdict = proc.stdout.strip().splitlines()[-1]
    assert f"with {text} {both})" in verdict and verdict.endswith("(exit 1)")


def test_init_refuses_a_shifted_dataset_in_one_line(shifted_right, tokenizer_dir, tmp_path):
    from drafter_contracts.cli.init import NotKnownGood, run_init

    with pytest.raises(NotKnownGood) as refused:
        run_init(str(shifted_right), str(tmp_path / "contract.toml"), str(tokenizer_dir))
    message = str(refused.value)
    assert "\n" not in message and "the loss_mask is shifted one token right (late)" in message
    assert not (tmp_path / "contract.toml").exists()


# --------------------------------------------------------------------------- which rows are decoded

def test_the_decoded_rows_show_each_reason_before_more_of_one():
    from drafter_contracts.results import Violation, shown_examples

    shift, user = SHIFT_TEXT[LATE], "user token supervised"
    examples = [Violation(r, 1, f"{shift}; as it stands: x") for r in (3, 5, 7, 9)] + [Violation(40, 2, user)]
    by_reason, severity = {shift: 4, user: 1}, {shift: 0, user: 1}
    pick = lambda n: [v.row for v in shown_examples(examples, n, by_reason, severity,  # noqa: E731
                                                    lambda v: v.reason, lambda v: v.row)]
    assert pick(3) == [3, 5, 40] and pick(1) == [3] and pick(0) == [] and pick(9) == [3, 5, 7, 9, 40]


def test_a_shift_and_a_leak_in_one_dataset_both_reach_the_decoded_rows(clean_dataset, contract, vocab, tmp_path):
    from drafter_contracts.report.explain import format_failure

    src, shifted = clean_dataset, set()
    for seed in range(6):
        shifted |= set(MUTANTS["mask_shift_right"](src, tmp_path / f"s{seed}", seed).rows)
        src = tmp_path / f"s{seed}"
    leaked = set(MUTANTS["mask_user_text"](src, tmp_path / "m", 0).rows)
    engine = Engine(open_dataset(str(tmp_path / "m")), contract, vocab)
    failing = [r for r in (engine.shard_check(s, "mask_on_assistant_spans") for s in engine.shards) if not r.ok]
    decoded = {int(line.split()[1]) for r in failing for line in format_failure(r, engine).splitlines()
               if line.startswith("  row ")}
    assert decoded & leaked and decoded & shifted, (decoded, leaked, shifted)
