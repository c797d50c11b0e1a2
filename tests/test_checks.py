"""Check functions called directly, without pytest's plugin: each one catches its defect and only it."""

from __future__ import annotations

from pathlib import Path

import datasets
import pyarrow as pa
import pytest

from drafter_contracts.checks import dataset_level, rows, spans
from drafter_contracts.dataset.row_view import usable_view
from drafter_contracts.contract import load_contract, resolve_contract_path
from drafter_contracts.dataset.reader import open_dataset
from drafter_contracts.dataset.columns import Shard


@pytest.fixture(scope="module")
def contract():
    return load_contract(resolve_contract_path("qwen3.6-dflash"), {"min_len": 5})


@pytest.fixture(scope="module")
def enc(vocab):
    return lambda text: vocab.backend.encode(text, add_special_tokens=False).ids


@pytest.fixture(scope="module")
def good(enc):
    """A well-formed row and its correct speculators-0.4-style mask."""
    head = enc("<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n")
    body = enc("<think>\nadd\n</think>\n\n4")
    tail = enc("<|im_end|>\n")
    return head + body + tail, [False] * len(head) + [True] * len(body) + [False] * len(tail)


def shard_of(tmp_path: Path, table: pa.Table):
    out = tmp_path / "ds"
    datasets.Dataset(table).save_to_disk(str(out))
    ds = open_dataset(out)
    return ds.read(Shard(0, 0, ds.num_rows))


def table(rows_: list[tuple[list[int] | None, list[bool] | None, int | None]]) -> pa.Table:
    return pa.table({
        "input_ids": pa.array([r[0] for r in rows_], pa.list_(pa.int32())),
        "loss_mask": pa.array([r[1] for r in rows_], pa.list_(pa.bool_())),
        "seq_len": pa.array([r[2] for r in rows_], pa.int64()),
    })


def test_clean_rows_pass_everything(tmp_path, good, vocab, contract, chatml):
    ids, mask = good
    a = shard_of(tmp_path, table([(ids, mask, len(ids))] * 3))
    v = usable_view(a)
    labels = chatml.label(v.ids, v.offsets, contract.max_len)
    results = [rows.check_no_nulls(a), rows.check_no_empty_rows(a), rows.check_lengths_agree(a),
               rows.check_seq_len_bounds(v, a, contract), rows.check_ids_known(v, a, vocab.known),
               rows.check_min_supervised(v, a, contract), spans.check_turns_well_formed(v, a, labels),
               spans.check_mask_on_assistant_spans(v, a, labels, contract)]
    assert all(r.ok for r in results), [r for r in results if not r.ok]


def test_each_row_defect_is_named_once(tmp_path, good, vocab, contract):
    ids, mask = good
    bad_len = (ids, mask[:-1], len(ids))
    null_el = (ids, mask[:2] + [None] + mask[3:], len(ids))
    a = shard_of(tmp_path, table([(ids, mask, len(ids)), bad_len, ([], [], 0), (None, mask, len(ids)), null_el]))
    assert [e.row for e in rows.check_no_nulls(a).examples] == [3, 4]
    assert [e.row for e in rows.check_no_empty_rows(a).examples] == [2]
    assert [e.row for e in rows.check_lengths_agree(a).examples] == [1]
    v = usable_view(a)
    assert v.rows.tolist() == [0]
    assert rows.check_min_supervised(v, a, contract).ok


def test_unknown_ids_and_bounds(tmp_path, good, vocab, contract):
    ids, mask = good
    padded = list(ids)
    padded[5] = 248_100  # inside a padded embedding table, unknown to the tokenizer
    huge = list(ids)
    huge[6] = 10**9
    a = shard_of(tmp_path, table([(ids, mask, len(ids)), (padded, mask, len(ids)), (huge, mask, len(ids)),
                                  (ids[:3], mask[:3], 3)]))
    v = usable_view(a)
    r = rows.check_ids_known(v, a, vocab.known)
    assert [(e.row, e.position) for e in r.examples] == [(1, 5), (2, 6)]
    assert all(reason.startswith(f"id >= tokenizer size {vocab.size}") for reason in r.by_reason)
    b = rows.check_seq_len_bounds(v, a, contract)
    assert [e.row for e in b.examples] == [3]


@pytest.mark.parametrize("mutate, reason", [
    # A mask one token off is named as the shift, with what the row breaks as it stands folded into it.
    (lambda m, ids: [False] + m[:-1], "loss_mask shifted one token right (late): moved one token earlier, the row "
                                      "passes both mask rules; as it stands: assistant end-of-turn token supervised"),
    (lambda m, ids: m[1:] + [False], "loss_mask shifted one token left (early): moved one token later, the row "
                                     "passes both mask rules; as it stands: assistant turn header supervised"),
    (lambda m, ids: [i == 3 or x for i, x in enumerate(m)], "user token supervised"),
    (lambda m, ids: m[:-1] + [True], "newline after assistant end supervised"),
])
def test_mask_defects(tmp_path, good, vocab, contract, mutate, reason, chatml):
    ids, mask = good
    bad = mutate(list(mask), ids)
    a = shard_of(tmp_path, table([(ids, mask, len(ids)), (ids, bad, len(ids))]))
    v = usable_view(a)
    labels = chatml.label(v.ids, v.offsets, contract.max_len)
    r = spans.check_mask_on_assistant_spans(v, a, labels, contract)
    assert r.rows_violating == 1 and r.examples[0].row == 1
    assert r.examples[0].reason.startswith(reason)


def test_policy_can_allow_the_end_token(tmp_path, good, vocab, chatml):
    ids, mask = good
    with_end = mask[:-2] + [True, True]  # <|im_end|> and the newline after it, as speculators 0.8+ writes
    a = shard_of(tmp_path, table([(ids, with_end, len(ids))]))
    v = usable_view(a)
    strict = load_contract(resolve_contract_path("qwen3.6-dflash"))
    loose = load_contract(resolve_contract_path("qwen3.6-dflash"))
    loose = type(loose)(**{**loose.__dict__, "mask": type(loose.mask)(end_of_turn=True, newline_after_end=True)})
    labels = chatml.label(v.ids, v.offsets, 4096)
    assert not spans.check_mask_on_assistant_spans(v, a, labels, strict).ok
    assert spans.check_mask_on_assistant_spans(v, a, labels, loose).ok


def test_dataset_level(contract):
    assert dataset_level.check_schema({"input_ids": "list<int32>", "loss_mask": "list<bool>", "seq_len": "int64"}, contract).ok
    r = dataset_level.check_schema({"input_ids": "list<int64>", "loss_mask": "list<bool>", "x": "int64"}, contract)
    assert "input_ids is list<int64>, contract says list<int32>" in r.message
    assert "missing column seq_len" in r.message and "extra column x" in r.message
    assert dataset_level.check_row_count(913_786 - 4_568, contract).ok
    assert "expected 913,786" in dataset_level.check_row_count(913_786 - 4_569, contract).message
    assert not dataset_level.check_not_empty(0).ok


def test_wrong_seq_len_does_not_hide_other_defects(tmp_path, good, vocab, contract, chatml):
    ids, mask = good
    user_supervised = [i == 3 or x for i, x in enumerate(mask)]
    a = shard_of(tmp_path, table([(ids, user_supervised, len(ids) + 1)]))
    assert [e.row for e in rows.check_lengths_agree(a).examples] == [0]
    v = usable_view(a)
    labels = chatml.label(v.ids, v.offsets, contract.max_len)
    assert spans.check_mask_on_assistant_spans(v, a, labels, contract).rows_violating == 1


def test_integer_mask_values_other_than_0_1(tmp_path, good):
    ids, mask = good
    as_int = [int(x) for x in mask]
    label_style = [2 if x else 0 for x in mask]
    t = pa.table({"input_ids": pa.array([ids, ids], pa.list_(pa.int64())),
                  "loss_mask": pa.array([as_int, label_style], pa.list_(pa.int64())),
                  "seq_len": pa.array([len(ids)] * 2, pa.int64())})
    r = rows.check_mask_values(shard_of(tmp_path, t))
    assert [(e.row, e.position) for e in r.examples] == [(1, mask.index(True))]


def test_wrong_tokenizer_is_refused_before_any_test(clean_dataset, vocab):
    import copy

    from drafter_contracts.engine import Engine

    contract = load_contract(resolve_contract_path("qwen3.6-dflash"))
    assert Engine(open_dataset(clean_dataset), contract, vocab).coverage_problem() is None
    small = copy.copy(vocab)
    small.__dict__["known"] = vocab.known.copy()
    small.known[1000:248044] = False  # a tokenizer that knows only 1,000 base tokens
    problem = Engine(open_dataset(clean_dataset), contract, small).coverage_problem()
    assert problem and "are not its tokens" in problem


def test_a_row_is_counted_under_every_rule_it_breaks_most_severe_first(tmp_path, good, enc, vocab, contract, chatml):
    ids, mask = good
    later = enc("<|im_start|>user\nthanks<|im_end|>\n")
    row = ids + later
    end = len(ids) - 2  # the assistant's <|im_end|>: a marker, met first in the row
    user = len(ids) + 3  # "thanks", the later user turn's text: more severe, met later
    assert vocab.decode([row[end]]) == "<|im_end|>" and "thanks" in vocab.decode([row[user]])
    both = [i in (end, user) or x for i, x in enumerate(mask + [False] * len(later))]
    end_only = [i == end or x for i, x in enumerate(mask + [False] * len(later))]
    a = shard_of(tmp_path, table([(row, both, len(row)), (row, end_only, len(row))]))
    v = usable_view(a)
    labels = chatml.label(v.ids, v.offsets, contract.max_len)
    r = spans.check_mask_on_assistant_spans(v, a, labels, contract)
    user_text, end_text = "user token supervised", "assistant end-of-turn token supervised (policy: end_of_turn = false)"
    assert r.rows_violating == 2
    assert r.by_reason == {user_text: 1, end_text: 2} and list(r.by_reason) == [user_text, end_text]
    assert r.severity[user_text] < r.severity[end_text]
    first, second = r.examples
    assert (first.row, first.position) == (0, user) and first.reason == f"{user_text} (also: {end_text})"
    assert (second.row, second.position, second.reason) == (1, end, end_text)
