"""Three trainers' own data preparation, in their native layouts, judged row by row by the rendering's truth.

``drafter_testkit/trainer_producers.py`` runs NVIDIA Model-Optimizer 0.47.0 (per-sample ``[1, T]`` rows and
its collator's padded rows, labels shifted for EAGLE-3 and not for DFlash), TRL 1.16's ``SFTTrainer``
preparation (assistant-only and completion-only loss) and arctic-training 0.8.0's ``tokenize_messages``,
each from its own folder, and keeps what each writes. The first tests hold the datasets to the trainers'
layouts and the truth to the defects built into the conversations (arctic-training's ``str.find`` trains a
reply where a system, user or tool message quoted it first); the last ones run the suite on each native
dataset in place, and on a copy converted by hand to the speculators layout, which must agree.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import run_inprocess

from drafter_testkit import trainer_producers as tp

ON = "mask_on_assistant_spans"
#: Per quoted conversation, what the truth finds in the arctic-training row: the classes of text trained on.
QUOTE_LEAKS = {"quote-system": {"system"}, "quote-user": {"user"}, "quote-tool": {"tool"},
               "quote-later-reply": {"user"}}


def _built(name: str) -> dict[str, Any]:
    """The dataset's records, building its producer's datasets first (skipped when the producer is not installed)."""
    producer = tp.DATASETS[name].producer
    if why := tp.unavailable(producer):
        pytest.skip(why)
    tp.ensure([producer])
    return tp.records(name)


def _columns(name: str) -> dict[str, list[Any]]:
    from datasets import load_from_disk

    data = load_from_disk(str(tp.dataset_path(name)))
    return {c: data[c] for c in data.column_names}


@pytest.mark.parametrize("name", list(tp.DATASETS))
def test_native_columns_and_types(name: str) -> None:
    """Each dataset holds exactly the columns its trainer writes, in the types it writes, a row per conversation."""
    from datasets import load_from_disk

    doc = _built(name)
    data = load_from_disk(str(tp.dataset_path(name)))
    assert {c: tp.feature_kind(f) for c, f in data.features.items()} == tp.DATASETS[name].columns
    assert data.num_rows == len(doc["rows"]) == doc["conversations"]
    assert not doc["unjudged_rows"], [doc["rows"][i]["status"] for i in doc["unjudged_rows"][:3]]


def test_modelopt_sample_rows_are_one_by_t() -> None:
    _built("modelopt-sample")
    cols = _columns("modelopt-sample")
    assert all(len(ids) == 1 and len(ids[0]) == len(mask) for ids, mask in zip(cols["input_ids"], cols["loss_mask"]))
    assert all(set(mask) <= {0, 1} and 1 in mask for mask in cols["loss_mask"])


@pytest.mark.parametrize("name", ["modelopt-eagle3", "modelopt-dflash"])
def test_modelopt_collator_rows_are_padded_labels(name: str) -> None:
    """Right-padded to train_len; a label is the next token (EAGLE-3) or the token itself (DFlash), where the
    assistant mask of that token is set, and -100 elsewhere."""
    _built(name)
    cols = _columns(name)
    shift = tp.DATASETS[name].shift
    lengths = [sum(a) for a in cols["attention_mask"]]
    assert {len(r) for c in cols.values() for r in c} == {tp.TRAIN_LEN}
    assert all(a == [1] * n + [0] * (tp.TRAIN_LEN - n) for a, n in zip(cols["attention_mask"], lengths))
    assert min(lengths) < tp.TRAIN_LEN and max(lengths) == tp.TRAIN_LEN  # padded rows and cut rows
    for ids, mask, labels in zip(cols["input_ids"], cols["assistant_masks"], cols["labels"]):
        want = [ids[t + shift] if t + shift < len(ids) and mask[t + shift] else tp.IGNORE_INDEX
                for t in range(len(ids))]
        assert labels == want


@pytest.mark.parametrize("name", ["trl-assistant-only", "trl-completion-only", "arctic-sft"])
def test_unshifted_labels_are_the_tokens(name: str) -> None:
    _built(name)
    cols = _columns(name)
    for ids, labels in zip(cols["input_ids"], cols["labels"]):
        assert len(ids) == len(labels) and all(lab in (tp.IGNORE_INDEX, i) for i, lab in zip(ids, labels))
        assert any(lab != tp.IGNORE_INDEX for lab in labels)
    if "attention_mask" in cols:  # arctic-training writes it unpadded: all ones
        assert all(set(a) == {1} for a in cols["attention_mask"])


@pytest.mark.parametrize("name", [n for n, d in tp.DATASETS.items() if d.producer != "arctic"])
def test_generation_tag_and_completion_masks_are_sound(name: str) -> None:
    """Model-Optimizer and TRL take their masks from the template (generation tags, the prompt's tokens): the
    truth finds every row clean, the quoted conversations included."""
    doc = _built(name)
    assert tp.clean_rows(doc) == list(range(len(doc["rows"]))), {
        k: doc[k] for k in ("leak_rows", "incomplete_rows", "empty_rows")}
    assert set(tp.QUOTED) <= {r["origin"] for r in doc["rows"]}


def test_arctic_truth_finds_the_quoted_replies() -> None:
    """A reply a system, user or tool message held first is trained there; identical replies leave the second copy
    untrained (its labels land on the first); a quote after the reply is harmless."""
    doc = _built("arctic-sft")
    row = {r["origin"]: i for i, r in enumerate(doc["rows"])}
    for origin, classes in QUOTE_LEAKS.items():
        rec = doc["rows"][row[origin]]
        assert row[origin] in doc["leak_rows"] and classes <= set(rec["misplaced_by_kind"]), (origin, rec["status"])
    assert "".join(doc["rows"][row["quote-system"]]["texts"]).startswith("Hello! How can I help")
    identical = row["identical-replies"]
    assert identical not in doc["leak_rows"] and identical in doc["incomplete_rows"]
    assert doc["rows"][identical]["unsupervised"] == ["assistant content of message 3 (assistant)"]
    assert row["quote-after-reply"] in tp.clean_rows(doc)
    assert {o for o, (kind, _) in tp.QUOTED.items() if kind == "leak"} == set(QUOTE_LEAKS)


def test_rows_json_lists_the_defects_by_kind() -> None:
    doc = _built("arctic-sft")
    kinds = doc["leak_rows_by_kind"]
    assert sorted({i for rows in kinds.values() for i in rows}) == doc["leak_rows"]
    assert {"system", "user", "tool"} <= set(kinds)
    assert all(doc["rows"][i]["misplaced"] for i in doc["leak_rows"])


# --------------------------------------------------------------------------- the suite on the native layouts


@pytest.mark.parametrize("name", list(tp.DATASETS))
def test_suite_on_native_dataset(pytester: Any, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """The suite reads the layout, passes the clean rows and names every leaking row by mask_on_assistant_spans."""
    from drafter_contracts import results
    from drafter_contracts.tokenizer.builtin import builtin_tokenizer_dir

    doc = _built(name)
    monkeypatch.setattr(results, "MAX_EXAMPLES", 1 << 30)  # every violating row named, not the first few
    # TRL keeps the conversations beside the tokens (messages / prompt, completion, tools, template arguments):
    # the layout names them as the trainer's source columns, not as extra ones.
    result, summary = run_inprocess(pytester, f"--dataset-path={tp.dataset_path(name)}",
                                    f"--tokenizer={builtin_tokenizer_dir()}")
    assert summary is not None, result.stdout.str()[-3000:]
    layout = summary["dataset"].get("layout", "")
    assert all(word in layout for word in tp.DATASETS[name].layout_words), layout
    failed = {check: {e["row"] for e in c["examples"]} for check, c in summary["checks"].items()
              if c["verdict"] == "fail"}
    assert failed.get(ON, set()) == set(doc["leak_rows"]), summary["checks"].get(ON, {}).get("by_reason")
    clean = set(tp.clean_rows(doc))
    assert {check: sorted(rows & clean)[:5] for check, rows in failed.items() if rows & clean} == {}
    if len(clean) == len(doc["rows"]):
        assert result.ret == 0 and not failed, result.stdout.str()[-3000:]


def _speculators_copy(name: str, out: Any) -> Any:
    """The native rows converted in plain Python, row by row, the way a user would by hand: [1, L] unnested,
    padding cut off by attention_mask, labels turned into a token-level loss_mask (shifted labels train the
    next token), seq_len the row's length."""
    import pyarrow as pa
    from datasets import load_from_disk

    from drafter_contracts.demo.dataset import save_table

    ds, shift = load_from_disk(str(tp.dataset_path(name))), tp.DATASETS[name].shift
    ids_col, mask_col = [], []
    for row in ds:
        ids = row["input_ids"][0] if isinstance(row["input_ids"][0], list) else row["input_ids"]
        keep = len(ids) if "attention_mask" not in row else sum(1 for a in row["attention_mask"] if a)
        start = 0 if "attention_mask" not in row or row["attention_mask"][0] else len(ids) - keep
        if shift is None:
            mask = [bool(m) for m in row["loss_mask"]]
        elif shift == 0:
            mask = [lab != -100 for lab in row["labels"]]
        else:
            mask = [False] + [lab != -100 for lab in row["labels"][:-1]]
        ids_col.append(ids[start:start + keep])
        mask_col.append(mask[start:start + keep])
    table = pa.table({"input_ids": pa.array(ids_col, pa.list_(pa.int64())),
                      "loss_mask": pa.array(mask_col, pa.list_(pa.bool_())),
                      "seq_len": pa.array([len(i) for i in ids_col], pa.int64())})
    return save_table(table, out, num_shards=1)


@pytest.mark.parametrize("name", list(tp.DATASETS))
def test_native_and_converted_copies_agree(pytester: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
                                           name: str) -> None:
    """Read in place, the rows get the verdicts, reasons and rows that a hand-converted speculators copy gets."""
    from drafter_contracts import results
    from drafter_contracts.tokenizer.builtin import builtin_tokenizer_dir

    _built(name)  # the producer's datasets exist (skipped, with the reason, when the producer is not installed)
    monkeypatch.setattr(results, "MAX_EXAMPLES", 1 << 30)
    tokenizer = f"--tokenizer={builtin_tokenizer_dir()}"
    copy = _speculators_copy(name, tmp_path / "converted")
    verdicts = {}
    for which, path in (("native", tp.dataset_path(name)), ("converted", copy)):
        (pytester.path / "reports").mkdir(exist_ok=True)
        _, summary = run_inprocess(pytester, f"--dataset-path={path}", tokenizer)
        verdicts[which] = {check: (c["verdict"], c["by_reason"], sorted(e["row"] for e in c["examples"]))
                           for check, c in summary["checks"].items()
                           if check not in ("schema", "layout_well_formed", "labels_match_ids")}
    assert verdicts["native"] == verdicts["converted"]


def _defective(doc: dict[str, Any]) -> set[int]:
    """Rows a trainer got wrong by its own convention: a leak, or a reply's own text left untrained (an identical
    earlier reply took its labels). Reasoning and tool calls a trainer never trains are its convention."""
    untrained = {i for i, r in enumerate(doc["rows"])
                 if any(u.startswith("assistant content") for u in r.get("unsupervised") or ())}
    return set(doc["leak_rows"]) | untrained | set(doc["empty_rows"]) | set(doc["unjudged_rows"])


@pytest.mark.parametrize("name", list(tp.DATASETS))
def test_init_learns_the_trainer_s_convention(pytester: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
                                              name: str) -> None:
    """init on a trainer's defect-free rows writes a contract those rows pass, its [mask] written out key by key;
    the same contract fails exactly the trainer's defective rows of the whole dataset."""
    from datasets import load_from_disk

    from drafter_contracts import results
    from drafter_contracts.tokenizer.builtin import builtin_tokenizer_dir
    from drafter_contracts.demo.dataset import save_table
    from drafter_contracts.cli.init import run_init

    monkeypatch.setattr(results, "MAX_EXAMPLES", 1 << 30)
    doc, tokenizer = _built(name), str(builtin_tokenizer_dir())
    bad = _defective(doc)
    good = [i for i in range(len(doc["rows"])) if i not in bad]
    table = load_from_disk(str(tp.dataset_path(name))).data.table
    clean = save_table(table.take(good), tmp_path / "clean", num_shards=1)
    contract = tmp_path / "contract.toml"
    run_init(str(clean), str(contract), tokenizer, force=True)
    text = contract.read_text()
    assert "[mask]" in text and "convention" in text and "end_of_turn" in text, text
    result, summary = run_inprocess(pytester, f"--dataset-path={clean}", f"--contract={contract}")
    assert result.ret == 0, [(k, c["by_reason"]) for k, c in summary["checks"].items() if c["verdict"] == "fail"]
    result, summary = run_inprocess(pytester, f"--dataset-path={tp.dataset_path(name)}", f"--contract={contract}",
                                    "--count-tolerance=100%")
    failed = {e["row"] for k, c in summary["checks"].items() if c["verdict"] == "fail" for e in c["examples"]}
    assert failed == bad, (sorted(failed - bad), sorted(bad - failed))
