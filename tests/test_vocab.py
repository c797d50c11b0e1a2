"""The tokenizer tables: exact against the tokenizer, and cached so xdist workers skip the parse."""

from __future__ import annotations

import numpy as np

from drafter_contracts.tokenizer.vocabulary import _from_file


def test_tables_match_the_tokenizer(vocab):
    assert vocab.size == 248_077 and vocab.known.all()
    assert vocab.id_of("<|im_start|>") == 248_045 and vocab.id_of("</think>") == 248_069
    assert vocab.single_id("\n") == 198 and vocab.single_id("hello world") is None
    nl = np.flatnonzero(vocab.newline_lead)
    texts = vocab.backend.decode_batch([[int(i)] for i in nl])
    assert all(t.startswith("\n") and t.isspace() for t in texts)
    assert {198, vocab.single_id("\n\n")} <= set(nl.tolist())


def test_second_process_reads_the_cache_not_the_tokenizer(tmp_path, monkeypatch, tokenizer_dir):
    monkeypatch.setenv("DRAFTER_CONTRACTS_CACHE", str(tmp_path))
    first = _from_file(tokenizer_dir / "tokenizer.json", "t")
    markers = _chatml_lookups(first)
    first.save_tables()
    assert list((tmp_path / "vocab").glob("*.npz"))

    second = _from_file(tokenizer_dir / "tokenizer.json", "t")
    again = _chatml_lookups(second)
    assert "backend" not in second.__dict__  # nothing needed the 33 MB tokenizer
    np.testing.assert_array_equal(second.known, first.known)
    np.testing.assert_array_equal(second.newline_lead, first.newline_lead)
    assert again == markers and None not in markers
    assert second.decode([markers[0]]) == "<|im_start|>"  # decoding loads it on demand


def _chatml_lookups(vocab) -> tuple[int | None, ...]:
    """The lookups a ChatML labelling setup makes: marker tokens by name, role words and newline as single ids."""
    return (*(vocab.id_of(t) for t in ("<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>",
                                        "</tool_call>")),
            *(vocab.single_id(w) for w in ("\n", "system", "developer", "user", "assistant", "tool")))


def test_byte_table_decodes_like_the_tokenizer_without_loading_it(tmp_path, monkeypatch, tokenizer_dir):
    """Failure messages and reports decode rows from the cached byte table: no 2-3 s tokenizer parse."""
    monkeypatch.setenv("DRAFTER_CONTRACTS_CACHE", str(tmp_path))
    cold = _from_file(tokenizer_dir / "tokenizer.json", "t")
    assert cold.token_bytes is not None
    cold.save_tables()
    warm = _from_file(tokenizer_dir / "tokenizer.json", "t")
    assert warm._from_cache and "backend" not in warm.__dict__
    rng = np.random.default_rng(1)
    ids = np.flatnonzero(warm.known)
    runs = [rng.choice(ids, size=int(rng.integers(1, 30))).tolist() for _ in range(300)]
    runs.append(cold.backend.encode("naïve 東京 🙂 <|im_start|>user\nhi<|im_end|>").ids)
    texts = [warm.decode(r) for r in runs]
    assert "backend" not in warm.__dict__  # decoded from the table alone
    assert texts == [cold.backend.decode(r, skip_special_tokens=False) for r in runs]
    assert warm.decode([5, 10**9]).endswith("<unk:1000000000>")

