"""Datasets three trainers' own data preparation writes, in each trainer's native layout, with each row's truth.

``real_producers.py`` covers the drafter producers (speculators, SpecForge), which write
``input_ids`` / ``loss_mask``. Trainers write other layouts: labels with -100 where no loss is
taken (shifted by one or not), ``assistant_masks`` beside them, ``attention_mask`` padding, ``[1, L]``
nesting. This module runs three of them, each by its own code in a folder of its own, and keeps what
they write as they write it (``save_to_disk``):

* ``modelopt``: NVIDIA Model-Optimizer 0.47.0 (``.ci/install-modelopt``: ``.deps/modelopt-0.47.0``,
  appended to the END of ``sys.path``) on TRL's ``qwen3_6_training.jinja`` (its ``{% generation %}``
  tags are what ``answer_only_loss`` needs). ``modelopt-sample``: ``_tokenize_with_loss_mask`` per
  conversation, ``input_ids`` ``[1, T]`` and ``loss_mask`` ``[T]``. ``modelopt-eagle3`` /
  ``modelopt-dflash``: ``LanguageDataCollator(answer_only_loss=True, return_labels=True)`` with
  ``shift_labels`` True / False, batches of :data:`BATCH` padded to :data:`TRAIN_LEN`: ``input_ids``,
  ``attention_mask``, ``assistant_masks``, ``labels``.
* ``trl``: TRL 1.16's ``SFTTrainer`` (the venv's) on a tiny random Qwen3 model, its prepared
  ``train_dataset`` saved as it is. ``trl-assistant-only``: ``assistant_only_loss=True`` on
  ``messages`` (TRL swaps in the ``_training`` template itself); ``trl-completion-only``:
  ``completion_only_loss=True`` on prompt / completion conversations (the tokenizer's own template).
* ``arctic``: Snowflake arctic-training 0.8.0 (``.ci/install-arctic-training``: ``.deps/arctic-venv``,
  transformers < 5 and deepspeed) through ``arctic_sft_driver.py``: ``SFTDataFactory.tokenize_messages``
  on TRL's ``qwen3_6.jinja``, ``input_ids`` / ``attention_mask`` / ``labels``. It finds each reply's
  text with ``str.find`` and trains those tokens plus the one after, so a reply a system, user or tool
  message quoted first is trained where it was quoted (:data:`QUOTED` holds such conversations).

The conversations are ``real_templates.cases`` of Qwen3.6 (reasoning, tool calls, system prompts,
marker strings typed by users) plus :data:`QUOTED`. As in ``real_producers.py``, every
``apply_chat_template`` call a trainer makes is recorded (:class:`TrainerRecorder`; in arctic's venv the
driver records them), a row is the recorded rendering whose ids it equals (or starts: a row cut at a
length cap), and its truth (``spans/learn/truth.py``) is taken on that call's arguments, never from the span
oracle. ``rows.json`` beside each dataset holds per row the rendering, the supervised tokens the truth
does not allow (``misplaced``: the leak defects) and the assistant fields the row trains on but leaves
unsupervised, and the rows of each kind. Each producer's datasets are built in a subprocess of their own
(``python -m drafter_testkit.trainer_producers build PRODUCER N``), cached under
``$DRAFTER_CONTRACTS_CACHE/trainer-producers``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from drafter_contracts.paths import cache_root, cached_build

from . import DEPS, REPO
from . import real_producers as rp
from . import real_templates as rt

#: Bump when a driver, the conversations or the row records change (the code's bytes are in the digest too).
VERSION = "1"
#: Generated conversations per dataset (plus :data:`QUOTED`).
DEFAULT_N = 40
TEMPLATE, TRAINING_TEMPLATE = "qwen3_6", "qwen3_6_training"
#: Model-Optimizer's collator pads and truncates every row to this many tokens; a few rows are cut.
TRAIN_LEN, BATCH = 512, 4
#: arctic-training's ``DataConfig.max_length`` default (``filter_dataset_length`` drops longer rows).
ARCTIC_MAX_LENGTH = 8192
IGNORE_INDEX = -100
MODELOPT_VERSION, TRL_VERSION, ARCTIC_VERSION = "0.47.0", "1.16.0", "0.8.0"
MODELOPT_PATH_ENV, ARCTIC_PYTHON_ENV = "DRAFTER_MODELOPT_PATH", "DRAFTER_ARCTIC_PYTHON"
PRODUCERS = ("modelopt", "trl", "arctic")


@dataclass(frozen=True)
class Native:
    """One dataset a trainer writes: its columns as written (:func:`feature_kind` of each), how its labels are
    shifted (1: ``labels[t] = input_ids[t + 1]``, 0: unshifted, None: a 0/1 mask), and the words the suite's
    layout line (``summary.json: dataset.layout``) must hold once it reads the layout."""

    name: str
    producer: str
    columns: dict[str, str]
    shift: int | None
    layout_words: tuple[str, ...]
    last_only: bool = False  # the trainer trains on the last assistant message only (prompt / completion)


#: Model-Optimizer's collator rows: its ``torch.long`` tensors, int64 (:func:`_save`). Where a trainer's rows pass
#: through ``datasets``' ``map`` (TRL, arctic-training), ``input_ids`` is stored as int32 and ``attention_mask`` as
#: int8: ``datasets`` narrows those column names (``OptimizedTypedSequence``).
_PADDED = {"input_ids": "[int64]", "attention_mask": "[int64]", "assistant_masks": "[int64]", "labels": "[int64]"}
JSON = "json"
DATASETS: dict[str, Native] = {n.name: n for n in (
    Native("modelopt-sample", "modelopt", {"input_ids": "[[int64]]", "loss_mask": "[int64]"}, None,
           ("loss_mask", "nested [1, L]")),
    Native("modelopt-eagle3", "modelopt", _PADDED, 1, ("labels (shifted by one", "right-padded by attention_mask")),
    Native("modelopt-dflash", "modelopt", _PADDED, 0, ("labels (unshifted", "right-padded by attention_mask")),
    Native("trl-assistant-only", "trl", {"messages": JSON, "tools": JSON, "chat_template_kwargs": JSON,
                                         "input_ids": "[int32]", "labels": "[int64]"}, 0, ("labels (unshifted",)),
    Native("trl-completion-only", "trl", {"prompt": JSON, "completion": JSON, "tools": JSON,
                                          "chat_template_kwargs": JSON, "input_ids": "[int32]", "labels": "[int64]"},
           0, ("labels (unshifted",), last_only=True),
    Native("arctic-sft", "arctic", {"input_ids": "[int32]", "attention_mask": "[int8]", "labels": "[int64]"}, 0,
           ("labels (unshifted", "attention_mask")),
)}


def feature_kind(feature: Any) -> str:
    """A ``datasets`` feature as this module writes column types: ``int64``, ``[int64]``, ``[[int64]]``, ``json``."""
    from datasets import Json, LargeList, List, Sequence, Value

    if isinstance(feature, Value):
        return feature.dtype
    if isinstance(feature, (List, LargeList, Sequence)):
        return f"[{feature_kind(feature.feature)}]"
    if isinstance(feature, Json):
        return JSON
    return type(feature).__name__


# --------------------------------------------------------------------------- the conversations


def _msg(role: str, content: str, **extra: Any) -> dict[str, Any]:
    return {"role": role, "content": content, **extra}


def _weather_call(city: str) -> dict[str, Any]:
    return {"id": "call_q1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": city}}}


#: Conversations whose reply a system, user or tool message holds verbatim, and the controls. Per origin: the
#: messages, and what arctic-training's ``str.find`` does with them (``leak``: a reply is first found in context
#: text, so that text is trained; ``incomplete``: identical replies, the second one's labels land on the first
#: copy and it is left untrained; ``clean``: the quote comes after the reply, which is found first).
QUOTED: dict[str, tuple[str, list[dict[str, Any]]]] = {
    "quote-system": ("leak", [
        _msg("system", 'You are the help desk assistant of Northwind. Greet every user with exactly: '
                       '"Hello! How can I help you today?"'),
        _msg("user", "Hi there"),
        _msg("assistant", "Hello! How can I help you today?"),
        _msg("user", "When are you open on Saturdays?"),
        _msg("assistant", "On Saturdays the help desk is open from 10:00 to 14:00.")]),
    "quote-user": ("leak", [
        _msg("user", "Repeat after me, word for word: The meeting moves to Thursday at 10:00 in room B."),
        _msg("assistant", "The meeting moves to Thursday at 10:00 in room B."),
        _msg("user", "Thanks. Who should I tell?"),
        _msg("assistant", "Tell everyone on the invite list; the calendar entry is updated automatically.")]),
    "quote-tool": ("leak", [
        _msg("system", "Use the tools when they help."),
        _msg("user", "What's the weather in Oslo right now?"),
        _msg("assistant", "", tool_calls=[_weather_call("Oslo")]),
        _msg("tool", "Oslo: 4 °C, light snow, wind 12 km/h.", tool_call_id="call_q1", name="get_weather"),
        _msg("assistant", "Oslo: 4 °C, light snow, wind 12 km/h.")]),
    "quote-later-reply": ("leak", [
        _msg("user", 'Rate my haiku. If nothing needs fixing, just answer "Looks good to me."\n\n'
                     "morning fog lifting / the harbour bell rings very quietly / gulls over the pier"),
        _msg("assistant", 'The second line has nine syllables; "the harbour bell softly rings" keeps it to seven.'),
        _msg("user", "morning fog lifting / the harbour bell softly rings / gulls over the pier"),
        _msg("assistant", "Looks good to me.")]),
    "identical-replies": ("incomplete", [
        _msg("user", "Is the build on main green?"),
        _msg("assistant", "Yes, every check passed."),
        _msg("user", "And after the rebase onto release-2.4?"),
        _msg("assistant", "Yes, every check passed.")]),
    "quote-after-reply": ("clean", [
        _msg("user", "Give me a one-line summary of the quarterly report."),
        _msg("assistant", "Revenue grew 12% while costs stayed flat."),
        _msg("user", 'You wrote "Revenue grew 12% while costs stayed flat." Which costs?'),
        _msg("assistant", "Mostly cloud hosting and payroll; both were renegotiated in March.")]),
}
#: The tool the tool-quoting conversation calls.
_QUOTED_TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def conversations(n: int = DEFAULT_N) -> list[rt.Case]:
    """``n`` Qwen3.6 cases of the real-template corpus, then every :data:`QUOTED` conversation."""
    cases = list(rt.cases(TEMPLATE, n).cases)
    for origin, (_, messages) in QUOTED.items():
        tools = _QUOTED_TOOLS if any(m.get("tool_calls") for m in messages) else None
        cases.append(rt.Case(copy.deepcopy(messages), tools, {}, origin))
    return cases


def _key(messages: Any) -> str:
    return json.dumps(messages, sort_keys=True, ensure_ascii=False)


# --------------------------------------------------------------------------- where the datasets live


def modelopt_path() -> Path:
    explicit = os.environ.get(MODELOPT_PATH_ENV)
    return Path(explicit).expanduser() if explicit else DEPS / f"modelopt-{MODELOPT_VERSION}"


def arctic_python() -> Path:
    explicit = os.environ.get(ARCTIC_PYTHON_ENV)
    return Path(explicit).expanduser() if explicit else DEPS / "arctic-venv" / "bin" / "python"


def unavailable(producer: str) -> str | None:
    """None when the producer's code is installed where this module looks, else why not (a test's skip reason)."""
    if producer == "modelopt":
        target = modelopt_path()
        if not (target / f"nvidia_modelopt-{MODELOPT_VERSION}.dist-info").is_dir():
            return f"no nvidia-modelopt {MODELOPT_VERSION} in {target}; run .ci/install-modelopt"
    elif producer == "arctic":
        venv = arctic_python().parent.parent
        found = sorted(venv.glob(f"lib/python*/site-packages/arctic_training-{ARCTIC_VERSION}.dist-info"))
        if not arctic_python().is_file() or not found:
            return f"no arctic-training {ARCTIC_VERSION} venv at {venv}; run .ci/install-arctic-training"
    elif producer == "trl":
        from importlib.metadata import PackageNotFoundError, version

        try:
            found_trl = version("trl")
        except PackageNotFoundError:
            found_trl = "none"
        if found_trl != TRL_VERSION:
            return f"trl {found_trl} installed, the TRL producer runs {TRL_VERSION}: pip install -e '.[demo]'"
    return None


@lru_cache(maxsize=None)
def _digest(producer: str, n: int) -> str:
    """What a cached build depends on: this code, the driver, the conversations, the templates, :data:`VERSION`
    (bump it when what ``real_producers`` lends, the recorder and the row explanation, changes its output)."""
    from drafter_contracts.demo import conversations as demo

    here = Path(__file__).parent
    h = hashlib.sha256(f"{VERSION}\0{producer}\0{n}".encode())
    for p in (Path(__file__), here / "arctic_sft_driver.py", here / "real_templates.py", Path(demo.__file__)):
        h.update(p.read_bytes())
    for name in (TEMPLATE, TRAINING_TEMPLATE):
        h.update(rt.template_text(name).encode())
    return h.hexdigest()[:10]


def producer_dir(producer: str, n: int = DEFAULT_N) -> Path:
    return cache_root() / "trainer-producers" / f"{producer}-n{n}-{_digest(producer, n)}"


def dataset_path(name: str, n: int = DEFAULT_N) -> Path:
    return producer_dir(DATASETS[name].producer, n) / name / "data"


def records(name: str, n: int = DEFAULT_N) -> dict[str, Any]:
    return json.loads((producer_dir(DATASETS[name].producer, n) / name / "rows.json").read_text("utf-8"))


def ensure(producers: Iterable[str], n: int = DEFAULT_N, timeout: float = 1200) -> None:
    """Build the missing producers' datasets, one subprocess each (each imports its own trainer's code)."""
    for producer in dict.fromkeys(producers):
        if (producer_dir(producer, n) / "built.json").is_file():
            continue
        cmd = [sys.executable, "-m", "drafter_testkit.trainer_producers", "build", producer, str(n)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ), cwd=REPO)
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
            raise RuntimeError(f"building the {producer} datasets failed (exit {done.returncode}):\n{tail}")


# --------------------------------------------------------------------------- recording the renderings


class TrainerRecorder(rp.Recorder):
    """``real_producers.Recorder`` for trainers' calls too: a batch of conversations (Model-Optimizer's collator)
    and ``[1, T]`` tensors. Each conversation is recorded as rendered alone with the call's template arguments
    (padding, truncation and tensors are how the producer takes the result, not what is rendered)."""

    def _call(self, conversation: Any = None, *args: Any, **kwargs: Any) -> Any:
        if conversation is None:
            conversation = kwargs.pop("messages", kwargs.pop("conversation", None))
        batch = isinstance(conversation, list) and bool(conversation) and isinstance(conversation[0], list)
        snapshot = copy.deepcopy(conversation if batch else [conversation])
        out = self._inner(conversation, *args, **kwargs)
        if args or not all(isinstance(c, list) and all(isinstance(m, dict) for m in c) for c in snapshot):
            return out
        keep = {k: v for k, v in kwargs.items() if k not in rp._MECHANICS}
        template = kwargs.get("chat_template") or self.tokenizer.chat_template
        prompt = bool(kwargs.get("add_generation_prompt"))
        for messages in snapshot:
            text = self._inner(messages, tools=kwargs.get("tools"), chat_template=template, tokenize=False,
                               add_generation_prompt=prompt, **keep)
            ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
            self.calls.append(rp.Rendering(messages, copy.deepcopy(kwargs.get("tools")), keep, template, prompt, ids))
        return out


# --------------------------------------------------------------------------- reading rows back, judging them


def supervised_tokens(ids: list[int], labels: list[int], shift: int) -> list[bool]:
    """Which tokens a row's labels train on: token ``t`` for ``labels[t - shift] != -100``."""
    sup = [lab != IGNORE_INDEX for lab in labels]
    return ([False] * shift + sup[:len(ids) - shift]) if shift else sup


def read_native(name: str, data: Path) -> list[tuple[list[int], list[bool]]]:
    """Each row's tokens (padding taken off) and the tokens it supervises, read from the trainer's own columns."""
    from datasets import load_from_disk

    spec = DATASETS[name]
    table = load_from_disk(str(data)).with_format(None)
    cols = {c: table[c] for c in ("input_ids", "loss_mask", "labels", "attention_mask") if c in table.column_names}
    rows = []
    for k, ids in enumerate(cols["input_ids"]):
        if ids and isinstance(ids[0], list):  # [1, T]
            ids = ids[0]
        n = sum(cols["attention_mask"][k]) if "attention_mask" in cols else len(ids)
        ids = list(ids[:n])
        if spec.shift is None:
            mask = [bool(m) for m in cols["loss_mask"][k][:n]]
        else:
            mask = supervised_tokens(ids, cols["labels"][k][:n], spec.shift)
        rows.append((ids, mask))
    return rows


def _kind_of(truth: Any, t: int) -> str:
    """What a misplaced token holds: system / user / tool text, scaffold, or a token mixing both."""
    from drafter_contracts.spans.learn.truth import CLASS_NAMES

    f = int(truth.token_field[t])
    return CLASS_NAMES[truth.fields[f].char_class] if f >= 0 else ("scaffold" if f == -1 else "mixed")


def judge_row(tok: Any, rec: dict[str, Any], ids: list[int], mask: list[bool], last_only: bool) -> dict[str, Any]:
    """The truth of one explained row: its misplaced tokens (and what they hold) and its untouched assistant fields."""
    import numpy as np

    from drafter_contracts.spans.learn.truth import TemplateRejected, TruthUnavailable, render_truth

    from .mask_judging import misplaced_supervision, unsupervised_fields

    if "unexplained" in rec:
        return {"status": f"unexplained: {rec['unexplained']}"}
    try:
        truth = render_truth(tok, rec["messages"], rec["tools"], template=rp.template_text(rec["template"]),
                             **rec["kwargs"])
    except (TemplateRejected, TruthUnavailable) as exc:
        return {"status": f"unavailable: {exc}"}
    if len(ids) > truth.n_tokens or truth.ids[:len(ids)].tolist() != ids:
        return {"status": "unavailable: the truth's tokens differ from the row's"}
    row_mask = np.asarray(mask, dtype=bool)
    bad = [int(t) for t in misplaced_supervision(truth, row_mask)]
    trained = [len(rec["messages"]) - 1] if last_only else None
    missing = unsupervised_fields(truth, row_mask, trained)
    by_kind: dict[str, list[int]] = {}
    for t in bad:
        by_kind.setdefault(_kind_of(truth, t), []).append(t)
    return {"status": "ok", "misplaced": bad, "misplaced_by_kind": by_kind,
            "texts": [truth.token_text(t) for t in bad[:12]],
            "unsupervised": [truth.fields[k].describe(truth.roles) for k in missing]}


def judge(name: str, rows: list[tuple[list[int], list[bool]]], calls: list[rp.Rendering],
          origins: dict[str, str]) -> dict[str, Any]:
    """``rows.json``: per row its rendering and truth, then the rows of each defect kind."""
    tok = rt.load_template_tokenizer(TEMPLATE)
    explained = rp.explain_rows(rows, calls, TEMPLATE)
    out = []
    for rec, (ids, mask) in zip(explained, rows):
        rec = {**rec, **judge_row(tok, rec, ids, mask, DATASETS[name].last_only)}
        rec["origin"] = origins.get(_key(rec.get("messages")), "")
        out.append(rec)
    doc: dict[str, Any] = {"dataset": name, "producer": DATASETS[name].producer, "rows": out}
    doc.update(defect_rows(out))
    return doc


def defect_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The rows of each kind: leaking (supervised context), incomplete, empty, unjudged; leaks by what they hold."""
    leak = [i for i, r in enumerate(rows) if r.get("misplaced")]
    by_kind: dict[str, list[int]] = {}
    for i in leak:
        for kind in rows[i]["misplaced_by_kind"]:
            by_kind.setdefault(kind, []).append(i)
    return {"leak_rows": leak, "leak_rows_by_kind": by_kind,
            "incomplete_rows": [i for i, r in enumerate(rows) if r.get("unsupervised")],
            "empty_rows": [i for i, r in enumerate(rows) if not r["supervised"]],
            "unjudged_rows": [i for i, r in enumerate(rows) if r.get("status") != "ok"]}


def clean_rows(doc: dict[str, Any]) -> list[int]:
    """Rows the truth finds nothing wrong with: no leak, no untouched assistant field, something supervised."""
    bad = set(doc["leak_rows"]) | set(doc["incomplete_rows"]) | set(doc["empty_rows"]) | set(doc["unjudged_rows"])
    return [i for i in range(len(doc["rows"])) if i not in bad]


# --------------------------------------------------------------------------- the producers (run in a subprocess)


def _builtin_tokenizer() -> Any:
    """The built-in Qwen3.6 tokenizer as ``AutoTokenizer`` loads it (its own template: TRL's ``qwen3_6.jinja``)."""
    from transformers import AutoTokenizer

    from drafter_contracts.tokenizer.builtin import builtin_tokenizer_dir

    return AutoTokenizer.from_pretrained(str(builtin_tokenizer_dir()))


def _save(columns: dict[str, Any], folder: Path) -> None:
    """``Dataset.from_dict(...).save_to_disk`` of Model-Optimizer's ``torch.long`` tensors, as int64 lists.

    The types are given: inferred, ``datasets`` would store ``input_ids`` as int32 and ``attention_mask`` as
    int8 (its ``OptimizedTypedSequence`` narrows those column names), which is not what the trainer handed over.
    """
    from datasets import Dataset, Features, List, Value

    def feature(tensor: Any) -> Any:
        leaf: Any = Value(str(tensor.dtype).removeprefix("torch."))
        for _ in range(tensor.dim() - 1):
            leaf = List(leaf)
        return leaf

    features = Features({k: List(feature(v[0])) for k, v in columns.items()})
    Dataset.from_dict({k: [t.tolist() for t in v] for k, v in columns.items()}, features=features).save_to_disk(
        str(folder / "data"), num_shards=1)


def _modelopt() -> tuple[Any, Any]:
    """Model-Optimizer's per-sample tokenizer and its collator, imported from its folder at the END of sys.path."""
    import warnings

    target = str(modelopt_path())
    if target not in sys.path:
        sys.path.append(target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transformers 5.25 lies outside the releases modelopt 0.47 has tested
        from modelopt.torch.speculative.plugins.hf_streaming_dataset import _tokenize_with_loss_mask
        from modelopt.torch.utils.plugins.transformers_dataset import LanguageDataCollator
    return _tokenize_with_loss_mask, LanguageDataCollator


def produce_modelopt(cases: list[rt.Case], out: Path) -> dict[str, list[rp.Rendering]]:
    """The per-sample path, then the collator with shifted (EAGLE-3) and unshifted (DFlash) labels."""
    from drafter_contracts.tokenizer.trl_templates import vendor_template

    tokenize_one, collator_class = _modelopt()
    training = vendor_template(TRAINING_TEMPLATE)
    tok = _builtin_tokenizer()
    tok.chat_template = training  # what modelopt's data.chat_template does before the streaming dataset tokenizes
    recorder = TrainerRecorder(tok)
    try:
        samples = [tokenize_one(tok, c.messages, True, max_seq_len=None) for c in cases]
    finally:
        recorder.close()
    _save({"input_ids": [ids for ids, _ in samples], "loss_mask": [m for _, m in samples]}, out / "modelopt-sample")
    calls = {"modelopt-sample": recorder.calls}
    for name, shift in (("modelopt-eagle3", True), ("modelopt-dflash", False)):
        collator = collator_class(tok, TRAIN_LEN, chat_template=training, answer_only_loss=True, return_labels=True,
                                  shift_labels=shift)
        recorder = TrainerRecorder(tok)
        try:
            batches = [collator([{"messages": c.messages} for c in cases[i:i + BATCH]])
                       for i in range(0, len(cases), BATCH)]
        finally:
            recorder.close()
        _save({k: [row for b in batches for row in b[k]] for k in batches[0].keys()}, out / name)
        calls[name] = recorder.calls
    return calls


def _tiny_model(tok: Any) -> Any:
    """A 2-layer random Qwen3 of the tokenizer's vocabulary: SFTTrainer needs a model, the preparation never runs it."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=8, tie_word_embeddings=True,
                         pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    return Qwen3ForCausalLM(config)


def produce_trl(cases: list[rt.Case], out: Path) -> dict[str, list[rp.Rendering]]:
    """SFTTrainer's own preparation (``trainer.train_dataset``) for assistant-only and completion-only loss."""
    from datasets import Dataset, Features, Json
    from trl import SFTConfig, SFTTrainer

    tok = _builtin_tokenizer()
    chats = [{"messages": c.messages, "tools": c.tools, "chat_template_kwargs": c.kwargs} for c in cases]
    pairs = [{"prompt": c.messages[:-1], "completion": c.messages[-1:], "tools": c.tools,
              "chat_template_kwargs": c.kwargs} for c in cases if c.messages[-1]["role"] == "assistant"]
    calls = {}
    with tempfile.TemporaryDirectory() as work:
        for name, rows, loss in (("trl-assistant-only", chats, {"assistant_only_loss": True}),
                                 ("trl-completion-only", pairs, {"completion_only_loss": True})):
            # Json: a message keeps its own keys (an Arrow struct would give every message every other one's, as nulls)
            data = Dataset.from_list(rows, features=Features({k: Json() for k in rows[0]}))
            args = SFTConfig(output_dir=str(Path(work) / name), dataset_num_proc=None, report_to="none", use_cpu=True,
                             bf16=False, **loss)
            recorder = TrainerRecorder(tok)
            try:
                prepared = SFTTrainer(model=_tiny_model(tok), args=args, train_dataset=data,
                                      processing_class=tok).train_dataset
            finally:
                recorder.close()
            prepared.save_to_disk(str(out / name / "data"), num_shards=1)
            calls[name] = recorder.calls
    return calls


def _arctic_tokenizer(folder: Path) -> Path:
    """The built-in tokenizer with TRL's ``qwen3_6.jinja``, as transformers 4 reads it: ``tokenizer_class`` is
    ``Qwen2Tokenizer`` (what Qwen's own repositories name; transformers 4 has no ``TokenizersBackend``)."""
    from drafter_contracts.tokenizer.builtin import builtin_tokenizer_dir
    from drafter_contracts.tokenizer.trl_templates import vendor_template

    src = builtin_tokenizer_dir()
    folder.mkdir(parents=True)
    try:
        os.link(src / "tokenizer.json", folder / "tokenizer.json")
    except OSError:
        shutil.copyfile(src / "tokenizer.json", folder / "tokenizer.json")
    config = json.loads((src / "tokenizer_config.json").read_text("utf-8"))
    config["tokenizer_class"] = "Qwen2Tokenizer"
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2), "utf-8")
    (folder / "chat_template.jinja").write_text(vendor_template(TEMPLATE), "utf-8")
    return folder


def arctic_messages(case: rt.Case) -> list[dict[str, Any]]:
    """The conversation as arctic-training can take it: ``tokenize_messages`` calls ``str.find`` on every assistant
    message's content and raises TypeError on None (a tool-call turn without text), so None is given as ''."""
    return [{**m, "content": ""} if m.get("content") is None else m for m in case.messages]


def produce_arctic(cases: list[rt.Case], out: Path) -> dict[str, list[rp.Rendering]]:
    """``arctic_sft_driver.py`` in arctic-training's venv; its recorded texts tokenized back into renderings."""
    tokenizer = _arctic_tokenizer(out / "tokenizer")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    with tempfile.TemporaryDirectory() as work:
        spec = Path(work) / "input.json"
        spec.write_text(json.dumps({"tokenizer": str(tokenizer), "conversations": [arctic_messages(c) for c in cases],
                                    "max_length": ARCTIC_MAX_LENGTH}, ensure_ascii=False), "utf-8")
        cmd = [str(arctic_python()), str(Path(__file__).with_name("arctic_sft_driver.py")), str(spec), work]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
            raise RuntimeError(f"arctic-training's tokenization failed (exit {done.returncode}):\n{tail}")
        (out / "arctic-sft").mkdir()
        shutil.move(str(Path(work) / "data"), str(out / "arctic-sft" / "data"))
        recorded = json.loads((Path(work) / "calls.json").read_text("utf-8"))
    tok = rt.load_template_tokenizer(TEMPLATE)
    calls = [rp.Rendering(c["messages"], c["tools"], {k: v for k, v in c["kwargs"].items() if k not in rp._MECHANICS},
                          c["template"], bool(c["kwargs"].get("add_generation_prompt")),
                          list(tok(c["text"], add_special_tokens=False)["input_ids"]))
             for c in recorded if c["text"] is not None]
    return {"arctic-sft": calls}


_PRODUCE = {"modelopt": produce_modelopt, "trl": produce_trl, "arctic": produce_arctic}


def build(producer: str, n: int, out: Path) -> None:
    """Run the producer on the conversations; per dataset ``NAME/data`` and ``NAME/rows.json``, then ``built.json``."""
    from datasets.utils import disable_progress_bars

    disable_progress_bars()
    cases = conversations(n)
    origins = {_key(m): c.origin for c in cases for m in (arctic_messages(c), c.messages)}
    out.mkdir(parents=True)
    calls = _PRODUCE[producer](cases, out)
    for name, recorded in calls.items():
        doc = judge(name, read_native(name, out / name / "data"), recorded, origins)
        doc.update(n=n, conversations=len(cases), version=VERSION)
        (out / name / "rows.json").write_text(json.dumps(doc, ensure_ascii=False, default=str), "utf-8")
    (out / "built.json").write_text(json.dumps(sorted(calls)), "utf-8")


def build_cached(producer: str, n: int) -> Path:
    return cached_build(producer_dir(producer, n), "built.json", lambda out: build(producer, n, out))


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 3 or args[0] != "build" or args[1] not in PRODUCERS:
        print(f"usage: python -m drafter_testkit.trainer_producers build {{{','.join(PRODUCERS)}}} N", file=sys.stderr)
        return 4
    if why := unavailable(args[1]):
        print(why, file=sys.stderr)
        return 4
    build_cached(args[1], int(args[2]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
