"""Tokenizer drift: the pure check on hand-built rows (real Qwen3.6 tokenizer), then the suite on a mutant.

The tolerance rules are pinned both ways: the legitimate non-canonical forms pass
(header tokenized apart from its content, a row cut anywhere in its last segment),
and a single split merge anywhere else fails with its position.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from drafter_contracts.checks.drift import (REASON, VerifiedSegments, check_tokenizer_drift, global_sample, rows_per_shard,
                                           sample_rows, within_budget)
from drafter_contracts.dataset.columns import Shard
from drafter_contracts.dataset.row_view import RowView
from drafter_contracts.dataset.columns import Shard
from drafter_contracts.dataset.layout_rows import ShardArrays
from drafter_contracts.engine import Engine
from drafter_testkit.content_mutants import drift_retokenized, fewer_merges_tokenizer_dir
from drafter_testkit.generate import IM_END_ID, IM_START_ID, load_tokenizer, render_row
from drafter_contracts.demo.conversations import generate_conversations


@pytest.fixture(scope="module")
def tok(tokenizer_dir):
    return load_tokenizer(tokenizer_dir)


@pytest.fixture(scope="module")
def special(vocab) -> np.ndarray:
    out = np.zeros(vocab.size, dtype=bool)
    out[list(vocab.backend.get_added_tokens_decoder())] = True
    return out


def run(rows: list[list[int]], vocab, special, k: int | None = None, backend=None, verified=None):
    ids = np.concatenate([np.asarray(r, dtype=np.int32) for r in rows])
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int64)
    view = RowView(ids, np.zeros(len(ids), bool), offsets, np.arange(len(rows)), None)
    a = ShardArrays(Shard(0, 0, len(rows)), None, None, None, None)
    return check_tokenizer_drift(view, a, backend or vocab.backend, special, vocab.known, k or len(rows), seed=0,
                                 verified=verified)


def test_rendered_rows_pass(tok, vocab, special):
    rows = [render_row(c, tok, None)[0] for c in generate_conversations(60, 3)]
    res = run(rows, vocab, special)
    assert res.ok and res.rows_checked == 60


def test_verified_segments_spare_the_tokenizer_and_a_difference_is_never_remembered(tok, vocab, special, tmp_path,
                                                                                    monkeypatch):
    monkeypatch.setenv("DRAFTER_CONTRACTS_CACHE", str(tmp_path))
    rows = [render_row(c, tok, None)[0] for c in generate_conversations(20, 4)]
    parses = []

    def backend():
        parses.append(1)
        return vocab.backend

    first = VerifiedSegments(vocab.fingerprint)
    assert run(rows, vocab, special, backend=backend, verified=first).ok
    assert parses == [1]  # first sight: the tokenizer is needed
    again = VerifiedSegments(vocab.fingerprint)  # a new process reads what the first one kept, every key whole
    assert again.keys == first._new and len(again.keys) > 20 and again.path.parent == tmp_path / "drift"
    nul = VerifiedSegments("t")
    nul.add(b"\x01" * 15 + b"\x00")  # a digest ending in a NUL byte survives the file
    nul.save()
    assert b"\x01" * 15 + b"\x00" in VerifiedSegments("t")
    assert run(rows, vocab, special, backend=backend, verified=again).ok and parses == [1]  # no parse at all
    # One row changed: only its segments are new; its split word fails, and stays failing on every run.
    bad = list(rows[0])
    at = next(i for i in range(len(bad)) if bad[i] < IM_START_ID and len(vocab.decode([bad[i]]).strip()) >= 4)
    word = vocab.decode([bad[at]])
    bad[at:at + 1] = [*vocab.backend.encode(word[:2], add_special_tokens=False).ids,
                      *vocab.backend.encode(word[2:], add_special_tokens=False).ids]
    for _ in range(2):
        res = run([bad, *rows[1:]], vocab, special, backend=backend, verified=VerifiedSegments(vocab.fingerprint))
        assert res.rows_violating == 1 and res.examples[0].row == 0
    assert parses == [1, 1, 1]
    other = VerifiedSegments("another-tokenizer")  # keyed by the tokenizer's content hash
    assert not other.keys


def test_one_split_merge_fails_with_position_and_both_sequences(tok, vocab, special):
    ids = render_row(next(generate_conversations(1, 5)), tok, None)[0]
    # Split the first multi-character word token of the first user turn into two tokens.
    text_ids = [i for i in range(len(ids)) if ids[i] < IM_START_ID and len(vocab.decode([ids[i]]).strip()) >= 4]
    pos = text_ids[3]
    word = vocab.decode([ids[pos]])
    pieces = [tok.convert_tokens_to_ids(t) for t in tok.tokenize(word[:2])] + \
        [tok.convert_tokens_to_ids(t) for t in tok.tokenize(word[2:])]
    assert vocab.decode(pieces) == word and len(pieces) >= 2
    bad = ids[:pos] + pieces + ids[pos + 1:]
    res = run([ids, bad], vocab, special)
    assert res.rows_violating == 1 and res.by_reason == {REASON: 1}
    v = res.examples[0]
    assert v.row == 1 and v.position == pos
    assert f"{pieces[0]} " in v.reason and f"{ids[pos]} " in v.reason and repr(word) in v.reason


def test_header_tokenized_apart_from_content_passes(tok, vocab, special):
    """A producer that tokenized '<|im_start|>assistant\\n' and '\\nHello' separately (no '\\n\\n' merge)."""
    enc = lambda t: tok.encode(t, add_special_tokens=False)  # noqa: E731
    canonical = enc("assistant\n\nHello there")
    apart = enc("assistant\n") + enc("\nHello there")
    assert canonical != apart  # BPE would merge the two newlines
    row = [IM_START_ID, *enc("user\nHi"), IM_END_ID, *enc("\n"), IM_START_ID, *apart, IM_END_ID, *enc("\n")]
    assert run([row], vocab, special).ok
    # The same freedom is not granted elsewhere in a segment.
    inner = enc("assistant\nHello") + enc("\n") + enc("\nthere")
    row2 = [IM_START_ID, *inner, IM_END_ID]
    if inner != enc("assistant\nHello\n\nthere"):
        assert not run([row2], vocab, special).ok


def test_rows_cut_anywhere_in_their_last_segment_pass(tok, vocab, special):
    """Truncation at max_len may split a word or a multi-byte character: never a drift alarm."""
    ids = render_row(next(generate_conversations(1, 11)), tok, None)[0]
    cuts = [c for c in range(len(ids) - 80, len(ids)) if ids[c - 1] not in (IM_START_ID, IM_END_ID)]
    res = run([ids[:c] for c in cuts], vocab, special)
    assert res.ok, res.examples[:3]
    emoji = tok.encode("Done 👨‍💻 ok", add_special_tokens=False)
    row = [IM_START_ID, *tok.encode("assistant\n", add_special_tokens=False), *emoji]
    assert run([row[:k] for k in range(4, len(row) + 1)], vocab, special).ok


def test_rows_with_unknown_ids_are_left_to_ids_known(tok, vocab, special):
    ids = render_row(next(generate_conversations(1, 2)), tok, None)[0]
    res = run([ids[:10] + [vocab.size + 5] + ids[10:]], vocab, special)
    assert res.ok and res.rows_checked == 0


def test_sample_is_seeded_spread_and_bounded():
    view = RowView(np.zeros(1000, np.int32), None, np.arange(1001), np.arange(1000), None)
    usable = np.ones(1000, bool)
    a = sample_rows(view, 0, 10, 0, usable)
    assert len(a) == 10 and np.array_equal(a, sample_rows(view, 0, 10, 0, usable))
    assert not np.array_equal(a, sample_rows(view, 0, 10, 1, usable))
    assert a.max() - a.min() > 300  # spread over the shard, not its head
    assert rows_per_shard(1000, 46) == 22 and rows_per_shard(0, 5) == 0


def test_sample_is_bounded_in_tokens_per_shard_whatever_the_row_lengths():
    shards = [Shard(0, 0, 500), Shard(1, 500, 1000)]
    ordered = global_sample(shards, 100, 7)
    assert [len(o) for o in ordered] == [100, 100]
    assert all(((o >= s.start) & (o < s.stop)).all() for o, s in zip(ordered, shards))
    assert [o.tolist() for o in global_sample(shards, 100, 7)] == [o.tolist() for o in ordered]  # fixed for a seed
    length_of = {int(r): (4000 if r % 3 == 0 else 50) for o in ordered for r in o}  # long and short rows
    candidates = np.array(sorted(length_of))

    def within_budget_of(lengths: dict[int, int], budget: int) -> np.ndarray:
        return within_budget(ordered, candidates, np.array([lengths[r] for r in candidates.tolist()]), budget)

    picked = within_budget_of(length_of, 1000)
    assert np.all(np.diff(picked) > 0)
    for o in ordered:
        mine = [int(r) for r in o if int(r) in set(picked.tolist())]
        assert mine == [int(r) for r in o[:len(mine)]]  # a prefix in hash order: the same rows for any budget cut
        tokens = sum(length_of[r] for r in mine)
        assert tokens - length_of[mine[-1]] < 1000 <= tokens or len(mine) == len(o)  # stops at the row reaching it
    assert len(within_budget_of({r: 10**6 for r in length_of}, 1000)) == 2  # at least one row a shard
    assert len(within_budget_of(length_of, 10**9)) == 200  # the row cap still holds


def test_fewer_merges_tokenizer_keeps_ids_and_changes_splits(tmp_path, tokenizer_dir, tok):
    other = load_tokenizer(fewer_merges_tokenizer_dir(tmp_path / "tok"))
    text = "Composting is the art of turning scraps into soil."
    a, b = tok.encode(text, add_special_tokens=False), other.encode(text, add_special_tokens=False)
    assert tok.decode(b) == text and len(b) > len(a)
    assert json.loads((tmp_path / "tok" / "tokenizer.json").read_text())["model"]["vocab"] == \
        json.loads((Path(tokenizer_dir) / "tokenizer.json").read_text())["model"]["vocab"]


@pytest.fixture(scope="module")
def drift_mutant(tmp_path_factory, clean_dataset):
    out = tmp_path_factory.mktemp("drift") / "drift_retokenized"
    return out, drift_retokenized(clean_dataset, out, 0)


@pytest.mark.parametrize("workers", ["0", "2"])
def test_suite_catches_retokenized_dataset(pytester, drift_mutant, tokenizer_dir, workers):
    folder, mutation = drift_mutant
    result = pytester.runpytest_subprocess(f"--dataset-path={folder}", "--contract=qwen3.6-dflash", f"--tokenizer={tokenizer_dir}", "--shard-size=400",
                                           "--expected-count=2000", "--report-dir=reports", "-p", "no:cacheprovider",
                                           "-n", workers)
    summary = json.loads((pytester.path / "reports" / "summary.json").read_text())
    failed = {k for k, c in summary["checks"].items() if c["verdict"] == "fail"}
    assert failed == {"tokenizer_drift"} == {t.removeprefix("test_") for t in mutation.expected_failures}
    assert result.ret == 1
    drift = summary["checks"]["tokenizer_drift"]
    # 2,000 rows of ~310 tokens: the default 131,072-token budget stops the sample before its 1,000-row cap.
    assert 300 < drift["rows_checked"] < 1000 and drift["rows_violating"] > 0
    out = result.stdout.str()
    assert "re-encoding with the tokenizer gives other ids at token" in out and "vs tokenizer [" in out


def test_sample_rows_zero_skips_with_reason(pytester, clean_dataset, tokenizer_dir):
    contract = pytester.path / "c.toml"
    from drafter_contracts.contract import builtin_contracts

    text = builtin_contracts()["qwen3.6-dflash"].read_text()
    assert "sample_rows = 1000" in text
    contract.write_text(text.replace("sample_rows = 1000", "sample_rows = 0"))
    result = pytester.runpytest_inprocess(f"--dataset-path={clean_dataset}", f"--tokenizer={tokenizer_dir}",
                                          f"--contract={contract}", "-k", "drift", "--report-dir=reports")
    summary = json.loads((pytester.path / "reports" / "summary.json").read_text())
    assert result.ret == 0
    assert summary["checks"]["tokenizer_drift"]["verdict"] == "skip"
    assert "sample_rows = 0" in summary["checks"]["tokenizer_drift"]["skip_reasons"][0]


def test_engine_special_ids_are_the_added_tokens(clean_dataset, vocab):
    from drafter_contracts.contract import builtin_contracts, load_contract
    from drafter_contracts.dataset.reader import open_dataset

    eng = Engine(open_dataset(clean_dataset), load_contract(builtin_contracts()["qwen3.6-dflash"]), vocab)
    assert eng.special_ids.sum() == 33 and eng.special_ids[IM_START_ID] and eng.special_ids[IM_END_ID]
