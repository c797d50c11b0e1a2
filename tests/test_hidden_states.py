"""Hidden-state contracts: the reader against safetensors and torch, speculators' own loader and check on every
fixture file, the clean folders pass, and every mutant fails exactly its contract with its rows named."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch  # noqa: F401
import torch
# torch.manual_seed (the fixture model) imports torch._dynamo lazily; when an in-process pytester run was
# the first to import it, pytester drops those modules afterwards and the next import registers a
# TORCH_LIBRARY namespace again, which torch refuses (RuntimeError). Imported once here, at collection.
import torch._dynamo  # noqa: F401

# Imported before any in-process run: pytester drops what an inner run imported first, and a second
# import of datasets registers its Arrow extension types twice (see tests/conftest.py).
import drafter_testkit.generate  # noqa: F401

from drafter_testkit import hidden_mutants as M
from drafter_testkit import hidden_states as H
from drafter_contracts.hidden import checks as C
from drafter_contracts.hidden.policy import HiddenPolicy
from drafter_contracts.hidden.report import section
from drafter_contracts.hidden.reader import FP8_E4M3, FP8_E5M2, Decoder, HeaderError, open_header, parse_header
from drafter_contracts.hidden.run import HiddenRun, prefix_keys

#: The mutants speculators 0.9.0's loader or check_hidden_states reject too; it accepts the others' files.
SPECULATORS_SEES = {"truncated_copy", "earlier_tokenization", "shifted_by_one", "swapped_files", "nan_position"}


def needs_speculators() -> None:
    """The float8 folders are quantized by speculators 0.9.0's own hs-connectors (in their folder, ``.deps``):
    without them the tests that read those folders skip, saying so (README: tests that need a producer)."""
    try:
        H.speculators_path()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def clean() -> Path:
    return H.clean_folder()


@pytest.fixture(scope="module")
def fp8() -> Path:
    needs_speculators()
    return M.fp8_folder()


@pytest.fixture(scope="module")
def contract_files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("contracts")
    out = {}
    for dtype in ("bfloat16", "float8_e4m3fn"):
        out[dtype] = folder / f"hs-{dtype}.toml"
        out[dtype].write_text(H.contract_text(H.model_dir() / "config.json", dtype))
    return out


def run_suite(pytester, dataset: Path, folder: Path | None, contract: Path, *extra: str) -> tuple[int, dict]:
    report = pytester.path / "reports"
    args = ["-p", "no:cacheprovider", f"--dataset-path={dataset}", f"--contract={contract}", f"--report-dir={report}",
            "-n", "0", *extra]
    if folder is not None:
        args.append(f"--hidden-states={folder}")
    result = pytester.runpytest_inprocess(*args)
    return result.ret, json.loads((report / "summary.json").read_text())


def failing(summary: dict) -> set[str]:
    return {k for k, c in summary["checks"].items() if c["verdict"] == "fail"}


# --- the reader ------------------------------------------------------------------------------------


def test_reader_matches_safetensors_and_torch(clean: Path, fp8: Path) -> None:
    """Header fields as safe_open reads them; decoded values bit-equal torch's float32 conversion."""
    from safetensors import safe_open

    decoder = Decoder()
    for folder in (clean, fp8):
        for i in range(0, H.ROWS, 37):
            fd, h = open_header(str(folder / f"hs_{i}.safetensors"))
            try:
                with safe_open(str(folder / f"hs_{i}.safetensors"), framework="pt") as f:
                    assert set(f.keys()) == set(h.tensors)
                    for name in f.keys():
                        ref = f.get_tensor(name)
                        t = h.tensors[name]
                        assert tuple(ref.shape) == t.shape
                        if name == "hidden_states":
                            got = decoder.decode(h.read(fd, name), t.dtype, ref.numel()).reshape(t.shape)
                            assert np.array_equal(got, ref.float().numpy())
            finally:
                os.close(fd)


def test_fp8_tables_match_torch() -> None:
    codes = torch.arange(256, dtype=torch.uint8)
    for table, dtype in ((FP8_E4M3, torch.float8_e4m3fn), (FP8_E5M2, torch.float8_e5m2)):
        ref = codes.view(dtype).float().numpy()
        assert np.array_equal(np.isnan(table), np.isnan(ref))
        assert np.array_equal(table[~np.isnan(ref)], ref[~np.isnan(ref)])


def test_header_defects_are_named(clean: Path) -> None:
    data = (clean / "hs_3.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    cases = {
        "truncated copy": data[: len(data) // 2],
        "runs past the end": data[: 8 + n // 2],
        "no header": data[:5],
        "not JSON": data[:8] + b"\xff" * n + data[8 + n:],
        "after the last tensor": data + b"\0" * 16,
    }
    for expected, blob in cases.items():
        with pytest.raises(HeaderError, match=expected):
            parse_header(blob[:65536], len(blob))
    assert set(parse_header(data, len(data)).tensors) == {"token_ids", "hidden_states"}


def test_prefix_keys_equal_a_plain_hash() -> None:
    rng = np.random.default_rng(0)
    rows = [rng.integers(0, 5, size=int(n)) for n in rng.integers(1, 300, size=200)]
    values = np.concatenate(rows).astype(np.int32)
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int64)
    r, p, k = prefix_keys(values, offsets, chunk=37)
    seen: dict[tuple, int] = {}
    for row, pos, key in zip(r.tolist(), p.tolist(), k.tolist()):
        prefix = tuple(rows[row][: pos + 1].tolist())
        assert seen.setdefault(prefix, key) == key  # same prefix, same key
    assert len(set(seen.values())) == len(seen)  # different prefixes, different keys
    assert len(r) == sum(int((C.CHECKPOINTS < len(x)).sum()) for x in rows)


# --- speculators' own reader and check, on every fixture file ------------------------------------------


#: speculators 0.9.0's loader and check over folders, in a process of its own (imported in this one, its
#: folder would shadow the speculators 0.7.0 the properties tests load in the same worker). One process
#: reads every folder: its imports (torch, speculators) cost seconds, the folders milliseconds.
_SPECULATORS_CHECK = """
import json, sys
from pathlib import Path
import numpy as np
from drafter_testkit import hidden_states as H
jobs = json.loads(sys.argv[1])
transfer, _ = H.import_hs_connectors()
sys.path.append(str(H.speculators_path()))
from speculators.data_generation.offline import check_hidden_states
answers = {}
for name, (folder, dataset, fp8, sample) in jobs.items():
    reader = transfer.FP8Transfer(Path(folder)) if fp8 else transfer.FileTransfer(Path(folder))
    rows = H.dataset_rows(Path(dataset))
    out = {}
    for i, ids in enumerate(rows):
        try:
            data = reader.get_cached(i)
            if data is not None:
                check_hidden_states(data, ids.tolist())
        except Exception as exc:  # what the trainer would skip or die on
            out[i] = f"{type(exc).__name__}: {exc}"[:120]
    if sample:
        np.savez(sample, **{str(i): reader.get_cached(i)["hidden_states"].float().numpy()
                            for i in range(0, len(rows), 29)})
    answers[name] = out
print(json.dumps(answers))
"""


def _speculators_rejects(jobs: dict[str, tuple[Path, Path, bool, Path | None]]) -> dict[str, dict[int, str]]:
    """Per job (folder, dataset, fp8, sample): rows whose file speculators' FileTransfer / FP8Transfer or
    check_hidden_states rejects, and why; with a sample path, every 29th row's states as FP8Transfer
    dequantizes them, saved there (.npz)."""
    import subprocess
    import sys

    arg = json.dumps({k: [str(f), str(d), fp8, str(s or "")] for k, (f, d, fp8, s) in jobs.items()})
    done = subprocess.run([sys.executable, "-c", _SPECULATORS_CHECK, arg], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    return {k: {int(r): why for r, why in v.items()} for k, v in answers.items()}


@pytest.fixture(scope="module")
def speculators_verdicts(clean: Path, fp8: Path, tmp_path_factory) -> tuple[dict[str, dict[int, str]], Path]:
    """speculators' reading of the two clean folders and of every mutant, in one process."""
    sample = tmp_path_factory.mktemp("fp8") / "fp8-sample.npz"
    jobs: dict[str, tuple[Path, Path, bool, Path | None]] = {
        "bfloat16": (clean, H.dataset_dir(), False, None), "float8_e4m3fn": (fp8, H.dataset_dir(), True, sample)}
    for name in sorted(M.MUTANTS):
        m = M.build_mutant(name)
        jobs[name] = (m.folder, m.dataset, m.dtype != "bfloat16", None)
    return _speculators_rejects(jobs), sample


def _suite_rows(folder: Path, dataset: Path, dtype: str, kinds: tuple[str, ...]) -> set[int]:
    """Rows the per-file contracts flag (small shards, so every flagged row is among the examples)."""
    from drafter_contracts.dataset.reader import open_dataset, plan_shards

    data = open_dataset(dataset)
    run = HiddenRun(folder, data, HiddenPolicy(config=str(H.model_dir() / "config.json"), dtype=dtype))
    flagged = set()
    for shard in plan_shards(data.num_rows, 10):
        for r in run.run_shard(shard).results:
            if r.check in kinds:
                assert r.rows_violating <= len(r.examples)
                flagged |= {v.row for v in r.examples}
    return flagged


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
def test_speculators_reads_every_clean_file(dtype: str, clean: Path, fp8: Path, speculators_verdicts) -> None:
    """FileTransfer / FP8Transfer load every file and check_hidden_states accepts it against its row;
    FP8Transfer's dequantized states are the suite's (to bfloat16 rounding)."""
    verdicts, sample = speculators_verdicts
    folder = fp8 if dtype != "bfloat16" else clean
    assert verdicts[dtype] == {}
    assert _suite_rows(folder, H.dataset_dir(), dtype, C.SHARD_CHECKS) == set()
    if dtype != "bfloat16":
        refs = np.load(sample)
        decoder = Decoder()
        assert len(refs.files) == len(range(0, H.ROWS, 29))
        for i in range(0, H.ROWS, 29):
            ref = refs[str(i)]
            fd, h = open_header(str(folder / f"hs_{i}.safetensors"))
            try:
                t = h.tensors["hidden_states"]
                x = decoder.decode(h.read(fd, "hidden_states"), t.dtype, ref.size).reshape(t.shape)
                x = x * np.frombuffer(h.read(fd, "hidden_states_scales"), np.float32)[:, None, None]
            finally:
                os.close(fd)
            assert np.allclose(x, ref, rtol=2 ** -7, atol=1e-6)


@pytest.mark.parametrize("name", sorted(M.MUTANTS))
def test_speculators_agrees_on_every_mutant_file(name: str, speculators_verdicts) -> None:
    """Where speculators' loader and check see a defect, the suite names the same files, and no others;
    the defects it does not look for (zero or reordered layers, another model, another context, a wrong
    scale, missing or extra files) it accepts, file by file, while the suite names their rows."""
    m = M.build_mutant(name)
    theirs = set(speculators_verdicts[0][name])
    ours = _suite_rows(m.folder, m.dataset, m.dtype, (C.HEADER, C.ALIGNMENT, C.VALUES))
    if name in SPECULATORS_SEES:
        assert theirs == ours == set(m.rows)
    else:
        assert theirs == set()


# --- the suite: clean folders pass, every mutant fails exactly its contract ---------------------------------


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
def test_clean_folder_passes(pytester, request, dtype: str, clean: Path, contract_files) -> None:
    folder = clean if dtype == "bfloat16" else request.getfixturevalue("fp8")
    ret, summary = run_suite(pytester, H.dataset_dir(), folder, contract_files[dtype])
    assert ret == 0, failing(summary)
    verdicts = {k: summary["checks"][k]["verdict"] for k in C.ALL_CHECKS}
    assert verdicts == {**{k: "pass" for k in C.ALL_CHECKS}, C.RECOMPUTE: "skip"}
    from drafter_testkit.schema import validate_summary

    assert validate_summary(summary) == []  # hidden_states, figures.contract_figures, checks.*.figures included
    h = section(summary)
    assert h["files"] == H.ROWS and h["value_bytes"] > 0 and h["header_bytes"] < h["value_bytes"] / 5
    assert len(h["norms"]["quantiles"]["p50"]) == 4


@pytest.mark.parametrize("name", sorted(M.MUTANTS))
def test_mutant_fails_exactly_its_contract(pytester, name: str, contract_files) -> None:
    if name in M.FP8_MUTANTS:
        needs_speculators()
    m = M.build_mutant(name)
    ret, summary = run_suite(pytester, m.dataset, m.folder, contract_files[m.dtype])
    assert ret == 1
    assert failing(summary) == set(m.expected_failures)
    (check,) = m.expected_failures
    named = {e["row"] for e in summary["checks"][check]["examples"]}
    assert set(m.rows[:20]) <= named and len(named) == min(len(m.rows), 20) or not m.rows
    if not m.rows:  # the extra file: named by its name
        assert f"hs_{H.ROWS}.safetensors" in summary["checks"][check]["messages"][0]


def test_without_hidden_states_nothing_changes(pytester, contract_files) -> None:
    """No --hidden-states and no hidden_states folder beside the dataset: the token contracts alone, as before."""
    ret, summary = run_suite(pytester, H.dataset_dir(), None, contract_files["bfloat16"])
    assert ret == 0
    assert not any(k.startswith("hs_") for k in summary["checks"]) and "hidden_states" not in summary


def test_folder_beside_the_dataset_is_found(pytester, tmp_path: Path, clean: Path, contract_files) -> None:
    data = tmp_path / "dataset"
    data.mkdir()
    for entry in H.dataset_dir().iterdir():
        (data / entry.name).symlink_to(entry)
    (data / "hidden_states").symlink_to(clean)
    ret, summary = run_suite(pytester, data, None, contract_files["bfloat16"])
    assert ret == 0 and summary["checks"]["hs_alignment"]["verdict"] == "pass"


def _same(summary: dict) -> tuple:
    """What -n and --split must not change: every verdict, count and example, and what the passes read."""
    h = section(summary)
    checks = {k: (v["verdict"], v["rows_checked"], v["rows_violating"], v["by_reason"], [e["row"] for e in v["examples"]])
              for k, v in summary["checks"].items()}
    return checks, h["files"], h["header_bytes"], h["value_bytes"], h["norms"]


def test_xdist_and_headers_only(pytester, contract_files) -> None:
    """-n 2 over 6 row shards gives the -n 0 verdicts and figures (one path: ShardReport -> Reducer);
    --hs-headers-only reads no tensor data and skips the value contracts."""
    m = M.build_mutant("layers_reversed")
    _, single = run_suite(pytester, m.dataset, m.folder, contract_files["bfloat16"], "--shard-size=20")
    _, spread = run_suite(pytester, m.dataset, m.folder, contract_files["bfloat16"], "--shard-size=20", "-n", "2")
    assert len(single["shards"]) == 6 and _same(single) == _same(spread)
    assert failing(spread) == {C.LAYER_NORMS}
    _, heads = run_suite(pytester, m.dataset, m.folder, contract_files["bfloat16"], "--hs-headers-only")
    assert section(heads)["value_bytes"] == 0 and failing(heads) == set()
    assert {heads["checks"][k]["verdict"] for k in (C.VALUES, *C.GLOBAL_CHECKS)} == {"skip"}


def test_split_parts_merge_to_the_whole(pytester, tmp_path: Path, contract_files) -> None:
    """--split 1/2 + 2/2, then merge-reports: the per-file verdicts, coverage and the bytes read add up to the
    one-machine run's (the controller's value verdicts judge each part: per_part, like the drift sample)."""
    from drafter_contracts.report.merge import merge_summaries

    m = M.build_mutant("missing_file")
    _, whole = run_suite(pytester, m.dataset, m.folder, contract_files["bfloat16"], "--shard-size=20")
    parts = []
    for k in (1, 2):
        _, doc = run_suite(pytester, m.dataset, m.folder, contract_files["bfloat16"], "--shard-size=20", f"--split={k}/2")
        (tmp_path / f"part{k}.json").write_text(json.dumps(doc))
        parts.append(tmp_path / f"part{k}.json")
    merged = merge_summaries(parts)
    for key in ("files", "header_bytes", "value_bytes"):
        assert section(merged)[key] == section(whole)[key] > 0
    for name in (C.COVERAGE, *C.SHARD_CHECKS):
        w, g = whole["checks"][name], merged["checks"][name]
        assert (g["verdict"], g["rows_checked"], g["rows_violating"]) == (w["verdict"], w["rows_checked"], w["rows_violating"])
    assert failing(merged) == {C.COVERAGE} and merged["checks"][C.COVERAGE]["examples"][0]["row"] == m.rows[0]


def test_controller_verdicts_reach_junit_and_the_terminal(pytester, contract_files) -> None:
    """hs_layer_norms is decided at the controller: its failing test is in junit.xml beside the shard tests, and
    the terminal says how many bytes each pass read and at what rate."""
    m = M.build_mutant("layers_reversed")
    report = pytester.path / "reports"
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", f"--dataset-path={m.dataset}",
                                          f"--contract={contract_files['bfloat16']}", f"--report-dir={report}", "-n", "0",
                                          f"--hidden-states={m.folder}")
    assert result.ret == 1
    xml = (report / "junit.xml").read_text()
    assert 'name="test_hs_layer_norms"' in xml and "layers out of order" in xml
    out = result.stdout.str()
    assert "header pass:" in out and "value pass:" in out and "/s per worker" in out
    assert "FAILED" in out and "test_hs_layer_norms" in out


def test_report_plots_norms_and_names_rows(pytester, contract_files) -> None:
    m = M.build_mutant("layers_reversed")
    run_suite(pytester, m.dataset, m.folder, contract_files["bfloat16"])
    page = (pytester.path / "reports" / "report.html").read_text()
    assert 'class="hs-norms"' in page and page.count("<polyline") >= 4
    assert f"row {m.rows[0]:,}</code>" in page and "layers out of order" in page


# --- spot recompute ------------------------------------------------------------------------------------


def test_spot_recompute_agrees_on_clean_and_catches_reordered_layers(clean: Path) -> None:
    from drafter_contracts.hidden.recompute import spot_recompute

    model = H.model_dir()
    ok = spot_recompute(clean, model, 0, H.ROWS, None, None, rows=[0, 45, 91])
    assert ok.ok and ok.rows_checked == 3
    m = M.build_mutant("layers_reversed")
    bad = spot_recompute(m.folder, model, 0, H.ROWS, None, None, rows=[0, *m.rows])
    assert bad.rows_violating == 1 and bad.examples[0].row == m.rows[0]


def test_spot_recompute_through_pytest(pytester, clean: Path, contract_files) -> None:
    ret, summary = run_suite(pytester, H.dataset_dir(), clean, contract_files["bfloat16"],
                             f"--hs-verify-model={H.model_dir()}", "--hs-verify-rows=2")
    assert ret == 0 and summary["checks"][C.RECOMPUTE]["verdict"] == "pass"
    assert summary["checks"][C.RECOMPUTE]["rows_checked"] == 2


# --- usage errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize("args, says", [
    (("--hidden-states=/no/such/folder",), "--hidden-states /no/such/folder: no such folder"),
    (("--hs-verify-rows=3",), "--hs-verify-rows N: needs --hs-verify-model"),
    (("--hs-verify-rows=three",), "--hs-verify-rows three: not a whole number"),
])
def test_usage_errors(usage_run, args, says) -> None:
    run = usage_run(f"--dataset-path={H.dataset_dir()}", *args)
    assert run.ret == 4 and len(run.errors) == 1 and says in run.errors[0]


def test_bad_hidden_states_table(usage_run, tmp_path: Path) -> None:
    contract = tmp_path / "c.toml"
    contract.write_text(H.contract_text(H.model_dir() / "config.json") + "hiden_size = 3\n")
    run = usage_run(f"--dataset-path={H.dataset_dir()}", f"--contract={contract}")
    assert run.ret == 4 and len(run.errors) == 1 and "unknown key 'hiden_size' in [hidden_states]" in run.errors[0]
    assert "did you mean 'hidden_size'" in run.errors[0]


def test_hidden_states_needs_a_dataset(usage_run, clean: Path) -> None:
    run = usage_run(f"--hidden-states={clean}")
    assert run.ret == 4 and "needs --dataset-path" in run.errors[0]


@pytest.mark.parametrize("dtype", ["BF16", "F8_E4M3", "F8_E5M2"])
def test_moment_kernel_equals_numpy(dtype: str) -> None:
    """The compiled one-pass moments agree with the numpy formulation (to float32 summation order), NaN included."""
    from drafter_contracts.hidden import moments as K

    if K.library() is None:
        pytest.skip("hidden/_hs_kernels is not built (no C compiler at install): the numpy formulation runs")
    rng = np.random.default_rng(1)
    for rows, hidden in ((1, 1), (3, 15), (7, 16), (5, 5121), (40, 64)):
        x = rng.standard_normal((rows, hidden)).astype(np.float32) * 3
        raw = ((x.view(np.uint32) >> 16).astype(np.uint16).tobytes() if dtype == "BF16"
               else rng.integers(0, 256, size=rows * hidden, dtype=np.uint8).tobytes())
        s, q = K.moments(raw, dtype, rows, hidden)
        with np.errstate(invalid="ignore", over="ignore"):  # float8 NaN codes among the random bytes
            rs, rq = K.moments_reference(raw, dtype, rows, hidden)
        assert np.array_equal(np.isnan(s), np.isnan(rs)) and np.array_equal(np.isnan(q), np.isnan(rq))
        ok = ~np.isnan(rs)
        assert np.allclose(s[ok], rs[ok], rtol=1e-5, atol=1e-4 * np.sqrt(hidden))
        assert np.allclose(q[ok], rq[ok], rtol=1e-5)


def test_prefix_filter_has_no_false_negatives() -> None:
    from drafter_contracts.hidden.run import PrefixFilter

    rng = np.random.default_rng(2)
    keys = rng.integers(0, 2**63, size=200_000, dtype=np.uint64)
    shared = keys[:1000]
    f = PrefixFilter()
    f.add(np.concatenate([keys[:100_000], shared[:10]]))  # the first 10 twice in one chunk
    f.add(np.concatenate([keys[100_000:], shared]))  # the first 1000 again in another chunk
    assert f.seen_twice(shared).all()
    assert f.seen_twice(keys[1000:]).mean() < 0.01


def test_the_spot_recompute_loads_the_model_without_hub_kernels() -> None:
    """transformers 5 kernelizes a model with hub kernels by default when ``kernels`` is installed (a
    download, and kernels' global state shared by every model of the process); the recompute must run
    the model's own layers."""
    from transformers import AutoModelForCausalLM

    from drafter_contracts.hidden.recompute import without_hub_kernels

    model = AutoModelForCausalLM.from_pretrained(str(H.model_dir()), dtype="float32", **without_hub_kernels())
    assert getattr(model, "use_kernels", False) is False
