"""Maskers one by one: hf, the loader's usage errors, the /render stand-in, the real speculators code path."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from drafter_contracts.errors import UsageProblem
from drafter_contracts.demo.conversations import generate_conversations
from drafter_testkit.generate import load_tokenizer, render_row
from drafter_testkit import broken_maskers as broken
from drafter_contracts.maskers.hf import make_hf_masker, supports_assistant_mask
from drafter_contracts.maskers.loader import load_masker
from drafter_contracts.maskers.render_server import RENDER_PATH, RenderServer

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir):
    return load_tokenizer(tokenizer_dir)


@pytest.fixture(scope="module")
def conversations():
    return list(generate_conversations(40, 3))


def test_hf_masker_equals_the_fixture_rows(tokenizer, conversations) -> None:
    """Same transformers path as the fixture datasets: identical rows, and real supervision."""
    from drafter_testkit.generate import TEMPLATE_NAME
    from drafter_testkit.tokenizer import template_path

    masker = load_masker("hf", tokenizer, chat_template=str(template_path(TEMPLATE_NAME)))
    for conv in conversations:
        rows = masker.rows(conv["messages"], conv["tools"], tokenizer, 512)
        assert rows == [render_row(conv, tokenizer, 512)]
        assert any(rows[0][1])


def test_hf_probe_tells_tagged_from_stock(tokenizer) -> None:
    from drafter_testkit.generate import tagged_template

    assert supports_assistant_mask(tokenizer) is False  # the built-in tokenizer ships the stock template
    assert supports_assistant_mask(tokenizer, tagged_template()) is True


def test_hf_needs_a_tagged_template(tokenizer, tmp_path: Path) -> None:
    untagged = tmp_path / "t.jinja"
    untagged.write_text("{{ messages }}")
    with pytest.raises(UsageProblem, match="no {% generation %} tags"):
        make_hf_masker(tokenizer, untagged)
    with pytest.raises(UsageProblem, match="no such file"):
        make_hf_masker(tokenizer, tmp_path / "missing.jinja")


@pytest.mark.parametrize("spec, message", [
    ("nonsense", "expected hf, speculators or module:function"),
    ("no_such_module_xyz:f", "cannot import module"),
    ("drafter_testkit.broken_maskers:nope", "has no function 'nope'"),
    ("/no/such/file.py:f", "no such file"),
])
def test_bad_masker_specs_are_usage_problems(tokenizer, spec: str, message: str) -> None:
    with pytest.raises(UsageProblem, match=message):
        load_masker(spec, tokenizer)


def test_module_function_from_a_file(tokenizer, tmp_path: Path) -> None:
    """A user's patched pipeline as path/to/file.py:function, with its optional attributes."""
    script = tmp_path / "mine.py"
    script.write_text("def f(conversation, tools, tokenizer, max_length):\n"
                      "    return [1, 2, 3][:max_length], [0, 1, 1][:max_length]\n"
                      "f.turns = 'last'\nf.version = 'mine 1.0'\n")
    masker = load_masker(f"{script}:f", tokenizer)
    assert masker.rows([], None, tokenizer, 2) == [([1, 2], [False, True])]
    assert (masker.turns, masker.version) == ("last", "mine 1.0")


def test_broken_maskers_break_what_they_say(tokenizer) -> None:
    """Each historical bug, on a conversation that shows it."""
    conv = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yes", "reasoning_content": "hmm"}]
    good_ids, good_mask = render_row({"messages": conv, "tools": None}, tokenizer, None)
    ids, mask = broken.reasoning_unmasked(conv, None, tokenizer, 4096)
    assert ids == good_ids and sum(mask) < sum(good_mask) and not mask[good_ids.index(broken.THINK)]
    ids, mask = broken.unbounded(conv, None, tokenizer, 5)
    assert len(ids) == len(mask) == len(good_ids) > 5
    ids, mask = broken.length_skew(conv, None, tokenizer, 5)
    assert len(ids) == 5 and len(mask) == len(good_ids)
    ids, _ = broken.unknown_roles_dropped(conv + [{"role": "narrator", "content": "x"}], None, tokenizer, 4096)
    assert ids == good_ids
    with pytest.raises(Exception, match="No user query"):
        broken.probe_crashes.supports_assistant_mask(tokenizer)


# ------------------------------------------------------------------ the /render stand-in


def _post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_render_stand_in_answers_like_the_endpoint(tokenizer) -> None:
    server = RenderServer(tokenizer).start()
    try:
        url = server.endpoint + RENDER_PATH
        msgs = [{"role": "user", "content": "Hello 世界"}, {"role": "assistant", "content": "Hi!"}]
        full = tokenizer.apply_chat_template(msgs, tokenize=True, return_dict=True)["input_ids"]
        status, body = _post(url, {"messages": msgs, "add_generation_prompt": False})
        assert status == 200 and body["token_ids"] == list(full)
        status, body = _post(url, {"messages": msgs[:1], "add_generation_prompt": True})
        prompt = tokenizer.apply_chat_template(msgs[:1], tokenize=True, return_dict=True,
                                               add_generation_prompt=True)["input_ids"]
        assert body["token_ids"] == list(prompt) and len(prompt) < len(full)
        _, body = _post(url, {"messages": msgs, "add_generation_prompt": False, "truncate_prompt_tokens": 4,
                              "truncation_side": "right"})
        assert body["token_ids"] == list(full[:4])
        _, body = _post(url, {"messages": msgs, "add_generation_prompt": False, "truncate_prompt_tokens": 4})
        assert body["token_ids"] == list(full[-4:])  # vLLM's default side is left
        status, body = _post(url, {"messages": msgs[1:], "add_generation_prompt": False})
        assert status == 400 and "No user query" in body["error"]["message"]
        status, _ = _post(server.endpoint + "/v1/other", {})
        assert status == 404
        assert server.requests == 5
    finally:
        server.stop()


# ------------------------------------------------------------------ real speculators


def _speculators(path_env: str = "DRAFTER_SPECULATORS_PATH"):
    from drafter_contracts.maskers.speculators import default_path, load

    try:
        return load(default_path())
    except UsageProblem as exc:
        pytest.skip(f"speculators not available: {exc}")


def test_speculators_masker_is_speculators_own_rows(tokenizer, tokenizer_dir, conversations) -> None:
    """The masker adds nothing: for 0.4-0.7 its rows are what speculators' _preprocess_batch wrote."""
    pre, found = _speculators()
    from drafter_contracts.maskers.speculators import make_speculators_masker

    masker = make_speculators_masker()
    assert masker.version == f"speculators {found}"
    if masker.turns == "last":  # 0.8+: one row per assistant turn, each ending with a supervised turn
        for conv in conversations[:10]:
            rows = masker.rows(conv["messages"], conv["tools"], tokenizer, 4096) or []
            n_assistant = sum(m["role"] == "assistant" for m in conv["messages"][1:])
            assert 1 <= len(rows) <= n_assistant
            for ids, mask in rows:
                assert mask[-1] and not mask[0]
        return
    from drafter_testkit.speculators_producer import speculators_rows

    expected = list(speculators_rows(conversations, tokenizer, 1024, preprocessing=pre))
    got = [masker.rows(c["messages"], c["tools"], tokenizer, 1024)[0] for c in conversations]
    assert got == expected


def test_hf_takes_trls_tagged_copy_of_a_trl_template(tokenizer) -> None:
    """A tokenizer carrying one of TRL's vendor templates is masked with TRL's ``_training`` copy of it;
    any other untagged template is one usage line."""
    import copy

    from drafter_contracts.tokenizer.trl_templates import vendor_template

    tok = copy.copy(tokenizer)
    tok.chat_template = vendor_template("qwen3_6")
    masker = make_hf_masker(tok)
    assert masker.chat_template == vendor_template("qwen3_6_training")
    ids, mask = masker.rows([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello there"}],
                            None, tok, 512)[0]
    assert any(mask) and not all(mask)
    tok.chat_template = vendor_template("qwen3_6").replace("<|im_start|>", "<|im_start|> ")
    with pytest.raises(UsageProblem, match="no {% generation %} tags"):
        make_hf_masker(tok)
