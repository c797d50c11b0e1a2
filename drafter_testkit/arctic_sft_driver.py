"""arctic-training's SFT tokenization of a conversation list, run inside arctic-training's own venv.

arctic-training 0.8.0 needs transformers < 5 and deepspeed, so its code cannot run in the project's
environment: ``trainer_producers.py`` starts this file with ``.deps/arctic-venv/bin/python``
(``.ci/install-arctic-training``). It imports nothing of the project (it must run on arctic's own packages alone),
only arctic-training, transformers and datasets, and does what arctic-training's ``SFTDataFactory``
does with a ``messages`` column (``process``: ``select_columns``, ``map`` of ``tokenize_messages``
with the config's ``mask_inputs`` / ``ignore_empty_think``, the other columns removed; then the
``filter_dataset_length`` callback), with the tokenizer loaded as ``HFTokenizerFactory`` loads it.
``num_proc`` is None (in this process), so that every ``apply_chat_template`` call arctic-training
makes is recorded: the messages as passed, the keyword arguments, the text returned.

Usage: python arctic_sft_driver.py INPUT.json OUT_DIR
  INPUT.json: {"tokenizer": DIR, "conversations": [[message, ...], ...], "max_length": N}
  writes OUT_DIR/data (``save_to_disk``: input_ids, attention_mask, labels as the map leaves them)
  and OUT_DIR/calls.json (the recorded renderings, in call order).
"""

from __future__ import annotations

import copy
import json
import logging
import sys
from pathlib import Path
from typing import Any

#: Keyword arguments that say how to return a rendering, not what is rendered.
_MECHANICS = {"conversation", "messages", "tokenize", "return_dict", "chat_template", "tools"}


def load_tokenizer(directory: str) -> Any:
    """As ``HFTokenizerFactory.create_tokenizer``: ``AutoTokenizer``, the eos token as pad when there is none."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(directory)
    if getattr(tokenizer, "pad_token", None) is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def record_renderings(tokenizer: Any) -> list[dict[str, Any]]:
    """Wrap the tokenizer's ``apply_chat_template`` (an instance attribute shadows the method); the calls list."""
    calls: list[dict[str, Any]] = []
    inner = type(tokenizer).apply_chat_template.__get__(tokenizer)

    def call(conversation: Any = None, *args: Any, **kwargs: Any) -> Any:
        messages = copy.deepcopy(conversation if conversation is not None else kwargs.get("messages"))
        out = inner(conversation, *args, **kwargs)
        calls.append({"messages": messages, "tools": copy.deepcopy(kwargs.get("tools")),
                      "kwargs": {k: v for k, v in kwargs.items() if k not in _MECHANICS},
                      "template": kwargs.get("chat_template") or tokenizer.chat_template,
                      "text": out if isinstance(out, str) else None})
        return out

    tokenizer.apply_chat_template = call
    return calls


def tokenize(conversations: list[list[dict[str, Any]]], tokenizer: Any, max_length: int) -> Any:
    """``SFTDataFactory.process`` on a ``messages`` column, then ``filter_dataset_length``."""
    from arctic_training.data.sft_factory import SFTDataFactory
    from datasets import Dataset, Features, Json

    # Json: every message keeps exactly its own keys (an Arrow struct would add the other messages' keys as nulls)
    dataset = Dataset.from_dict({"messages": conversations}, features=Features({"messages": Json()}))
    dataset = dataset.select_columns(["messages"])
    dataset = dataset.select(range(len(dataset)))
    dataset = dataset.map(
        lambda ex: {**SFTDataFactory.tokenize_messages(ex["messages"], tokenizer, mask_inputs=True,
                                                       ignore_empty_think=False)},
        remove_columns=dataset.column_names, num_proc=None, desc="Tokenizing messages")
    return dataset.filter(lambda x: len(x["input_ids"]) <= max_length, num_proc=None,
                          desc="Filtering dataset by max length")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python arctic_sft_driver.py INPUT.json OUT_DIR", file=sys.stderr)
        return 4
    logging.disable(logging.WARNING)  # deepspeed's note that it fell back to the CPU accelerator
    spec = json.loads(Path(argv[0]).read_text("utf-8"))
    out = Path(argv[1])
    tokenizer = load_tokenizer(spec["tokenizer"])
    calls = record_renderings(tokenizer)
    dataset = tokenize(spec["conversations"], tokenizer, int(spec["max_length"]))
    dataset.save_to_disk(str(out / "data"), num_shards=1)
    (out / "calls.json").write_text(json.dumps(calls, ensure_ascii=False), "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
