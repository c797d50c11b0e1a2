"""The benchmark's code at a tiny scale: the generator's rows are clean and realistic, the measurements add up.

No timing is asserted here (the machine is shared); ``benchmarks/run.py`` takes those.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str):
    if name in sys.modules:
        return sys.modules[name]
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def fullscale():
    return _load("fullscale")


@pytest.fixture(scope="module")
def bench():
    return _load("run")


@pytest.fixture(scope="module")
def small(tmp_path_factory, fullscale):
    root = tmp_path_factory.mktemp("bench")
    return fullscale.dataset_dir(1500, 7, root, log=lambda *_: None)


def _rows(path: Path) -> tuple[list[list[int]], list[list[bool]], list[int]]:
    from datasets import load_from_disk

    ds = load_from_disk(str(path))
    return ds["input_ids"], ds["loss_mask"], ds["seq_len"]


def test_rows_are_reworded_bank_rows(fullscale, small):
    bank = fullscale.load_bank()
    table = fullscale.chunk_table(bank, 300, 7, 0)
    ids = table.column("input_ids").combine_chunks()
    lengths = np.diff(ids.offsets.to_numpy())
    assert (table.column("seq_len").to_numpy() == lengths).all()
    # Same pick as chunk_table: each row has a bank row's length, mask, and its ids outside re-worded words.
    pick = bank.usable[np.random.default_rng([7, 0]).integers(0, len(bank.usable), size=300)]
    assert (lengths == bank.lengths[pick]).all()
    flat = ids.values.to_numpy()
    src = np.concatenate([np.arange(bank.offsets[p], bank.offsets[p + 1]) for p in pick])
    mask = table.column("loss_mask").combine_chunks().values.to_numpy(zero_copy_only=False)
    assert (mask == bank.mask[src]).all()
    same = flat == bank.ids[src]
    assert same[~bank.replaceable[src]].all()
    assert (~same[bank.replaceable[src]]).mean() > 0.9  # words really change
    assert bank.replaceable[src].mean() > 0.3  # and most of the text is words


def test_rows_decode_and_reencode_to_the_same_ids(small):
    from drafter_testkit.generate import load_tokenizer

    tok = load_tokenizer()
    ids, _, _ = _rows(small)
    for row in ids[:150]:
        assert tok(tok.decode(row), add_special_tokens=False)["input_ids"] == row


def test_shape_and_no_duplicates(fullscale, small):
    shape = fullscale.describe(small)
    assert shape["rows"] == 1500 and shape["seq_len_max"] <= 4096 and shape["seq_len_min"] >= 17
    assert 250 < shape["seq_len_mean"] < 450
    ids, _, _ = _rows(small)
    assert len({tuple(r) for r in ids}) == len(ids)
    files = sorted(p.name for p in small.glob("data-*.arrow"))
    assert files == ["data-00000-of-00001.arrow"] and (small / "state.json").is_file()


def test_floor_and_naive_loop_see_every_row(bench, small):
    ids, mask, seq_len = _rows(small)
    floor = bench.floor_seconds(small, repeats=2)
    assert floor["rows"] == len(ids) and floor["tokens"] == sum(seq_len)
    assert floor["supervised"] == sum(sum(m) for m in mask)
    assert floor["min_id"] == min(min(r) for r in ids) and floor["max_id"] == max(max(r) for r in ids)
    naive = bench.naive_loop(small, 1000, _vocab())
    assert naive["sample_rows"] == 1000 and naive["sample_tokens"] > 1000 * 17 and naive["extrapolated_s"] > 0
    assert not _HARD & set(naive["rows_flagged"]), naive  # clean rows: only content warnings


_HARD = {"lengths_agree", "seq_len_bounds", "ids_known", "min_supervised", "turns_well_formed",
         "mask_on_assistant_spans", "mask_covers_assistant_spans", "duplicate_rows"}


def _vocab():
    from drafter_contracts.tokenizer.vocabulary import load_vocabulary

    return load_vocabulary("builtin:qwen3.6")


def test_naive_row_check_sees_each_breakage(small):
    """The baseline really does the suite's checks: each single breakage of a clean row is named."""
    naive = _load("naive")
    vocab = _vocab()
    t = naive._ids(vocab)
    ids, masks, _ = _rows(small)
    row, mask = ids[0], [int(b) for b in masks[0]]

    def flagged(r, m, seen=None):
        return set(naive.check_row(r, m, len(r), t, set() if seen is None else seen, vocab_size=vocab.size)) & _HARD

    assert flagged(row, mask) == set()
    sup = mask.index(1)
    assert flagged(row, mask[:3] + [1] + mask[4:]) == {"mask_on_assistant_spans"}  # loss inside the first header
    assert flagged(row, mask[:sup] + [0] + mask[sup + 1:]) == {"mask_covers_assistant_spans"}
    assert flagged(row[:sup] + [vocab.size + 5] + row[sup + 1:], mask) == {"ids_known"}
    assert flagged([t["start"]] + row, [0] + mask) == {"turns_well_formed"}  # a header inside an open turn
    seen: set = set()
    assert flagged(row, mask, seen) == set() and flagged(row, mask, seen) == {"duplicate_rows"}


def test_suite_run_passes_and_reports_memory(bench, small, tmp_path):
    run = bench.suite_run(small, 1500, 0, tmp_path / "r")
    assert run["exit_status"] == 0 and "fail" not in run["verdicts"] and "pass" in run["verdicts"], run
    assert run["tokens"] == bench.floor_seconds(small, 1)["tokens"]
    assert run["peak_rss_per_worker_mb"] and min(run["peak_rss_per_worker_mb"]) > 50
    assert 0 < max(run["peak_anon_per_worker_mb"]) <= max(run["peak_rss_per_worker_mb"])


def test_ratios_and_table(bench):
    def r(wall, rss=800, anon=300):
        return {"wall_s": wall, "peak_rss_per_worker_mb": [rss, rss], "peak_anon_per_worker_mb": [anon, anon]}

    def rd(floor, full2, small2, full1, small1):
        return {"floor_s": floor, "walls": {"full_n2": full2, "rows1000_n2": small2, "full_n1": full1, "rows1000_n1": small1}}

    res = {"floor": {"seconds": 0.5}, "naive": {"extrapolated_s": 400.0}, "fixed_run": "rows1000_n2",
           "suite": {"full_n2": r(7.0), "full_n1": r(13.0), "rows1000_n2": r(5.0, 300, 100), "rows100000_n2": r(6.0)},
           # each ratio is the median of the rounds' own: (7 - 5) / 0.5 = 4, (8 - 5) / 0.6 = 5, (9 - 4) / 0.4 = 12.5
           "rounds": [rd(0.5, 7.0, 5.0, 13.0, 4.0), rd(0.6, 8.0, 5.0, 14.0, 4.0), rd(0.4, 9.0, 4.0, 12.0, 5.0)],
           "empty_suite": {"n1_s": 1.0, "n2_s": 1.5}}
    q = bench.ratios(res)
    assert q["marginal_over_floor"] == 5.0 and q["marginal_over_floor_by_round"] == [4.0, 5.0, 12.5]
    assert q["marginal_s"] == 3.0 and q["naive_over_marginal"] == 133.3 and q["naive_over_suite"] == 57.1
    assert q["marginal_n1_over_n2"] == 3.33  # median of 9 / 2, 10 / 3, 7 / 5
    assert q["n1_over_n2"] == 1.75  # median of 13 / 7, 14 / 8, 12 / 9
    assert q["anon_growth_100k_to_full"] == 1.0 and q["rss_growth_100k_to_full"] == 1.0
    # start-up 1.5 s (-n 2) and 1.0 s (-n 1), per-row part at the target 6 x 0.5 = 3 s: (1 + 6) / (1.5 + 3)
    assert q["whole_run_bounds"] == {"n1_over_n2_at_most": 1.56, "naive_over_suite_at_most": 88.9}
    assert all(q["meets"].values()), q["meets"]
    res["suite"]["full_n2"] = r(9.0, 2000, 400)
    res["rounds"][0]["walls"]["full_n2"] = 9.5
    q = bench.ratios(res)
    assert not q["meets"]["marginal_over_floor"] and not q["meets"]["peak_rss_per_worker_gb"]
    assert not q["meets"]["anon_growth_100k_to_full"] and not q["meets"]["rss_growth_100k_to_full"]
    res["ratios"] = q
    text = bench.table(res)
    assert "NO" in text and "rows100000 300" in text and "at most 1.56" in text


def test_median_of_takes_the_median_wall_and_the_largest_memory(bench):
    runs = [{"wall_s": 9.0, "exit_status": 0, "peak_rss_per_worker_mb": [700, 650], "peak_anon_per_worker_mb": [300, 280]},
            {"wall_s": 7.5, "exit_status": 0, "peak_rss_per_worker_mb": [600, 640], "peak_anon_per_worker_mb": [310, 250]},
            {"wall_s": 8.0, "exit_status": 0, "peak_rss_per_worker_mb": [610, 620], "peak_anon_per_worker_mb": [290, 240]}]
    med = bench.median_of(runs)
    assert med["wall_s"] == 8.0 and med["fastest_wall_s"] == 7.5 and med["walls_s"] == [9.0, 7.5, 8.0]
    assert med["exit_statuses"] == [0]
    assert med["peak_rss_per_worker_mb"] == [610, 620] and med["peak_anon_per_worker_mb"] == [290, 240]
    assert med["peak_rss_max_any_run_mb"] == 700 and med["peak_anon_max_any_run_mb"] == 310
    assert bench.median_of(runs[:2])["wall_s"] == 8.25  # an even count: the mean of the middle two
