"""Draft vocabularies built by the producers' own code, clean and mutated, beside fixture datasets.

speculators 0.9.0 (``speculators.train.vocab_mapping``) and SpecForge 0.2.0
(``specforge.data.preprocessing.generate_vocab_mapping_file``) run in a subprocess each, from their
own folders under ``.deps`` (appended to that process's ``sys.path``), so neither shadows the
speculators 0.7.0 other tests import. speculators' ``train/cli.py`` cannot be imported there (it
needs pydantic_settings, which its folder lacks), so the pair is saved under the names and with the
``np.save`` calls that ``cli.py`` uses: ``d2t-{N}.npy`` / ``t2d-{N}.npy`` in the data folder.

Every case is a folder holding a copy of a per-turn fixture dataset (speculators 0.8+ supervise
``<|im_end|>``, so the end-of-turn mutant has a supervised end token to drop) and the files a
producer would leave: ``token_freq.pt``, the pair, or SpecForge's ``vocab_mapping.pt``. Built once per
machine under the fixture lock, keyed by this module's text.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from drafter_contracts.paths import cache_root, cached_build

from . import DEPS
from .producers import convention_dataset_dir

SPECULATORS = DEPS / "speculators-0.9.0"
SPECFORGE = DEPS / "specforge-0.2.0"
CONVENTION = "speculators-per-turn"
#: Rows of the target model's embedding (len(t2d)): more than the tokenizer's 248,077 ids, as real models pad.
TARGET_VOCAB = 248_320
#: A mapping made for another model.
OTHER_TARGET_VOCAB = 262_144
#: Below the ~1,300 distinct supervised ids of the fixture; PADDED_DRAFT is above them.
DRAFT = 512
PADDED_DRAFT = 2048
IM_END = 248_046


@dataclass(frozen=True)
class Case:
    """One folder: the dataset, the mapping to pass (None: the pair beside the data) and what must fail."""

    name: str
    fails: frozenset[str]  # contract names


CASES = {
    "speculators_clean": Case("speculators_clean", frozenset()),
    "specforge_clean": Case("specforge_clean", frozenset()),
    "other_data": Case("other_data", frozenset({"vocab_mapping_matches_data"})),
    "stale_token_freq": Case("stale_token_freq", frozenset({"vocab_mapping_matches_data", "token_freq"})),
    "d2t_off_by_one": Case("d2t_off_by_one", frozenset({"vocab_mapping_consistent"})),
    "t2d_other_size": Case("t2d_other_size", frozenset({"vocab_mapping_consistent"})),
    "drops_end_of_turn": Case("drops_end_of_turn", frozenset({"draft_vocab_coverage", "vocab_mapping_matches_data"})),
    "draft_too_large": Case("draft_too_large", frozenset({"vocab_mapping_matches_data"})),
}

_SPECULATORS_SCRIPT = r"""
import json, sys
import numpy as np
import torch
from datasets import load_from_disk
sys.path.append(sys.argv[1])
from speculators.train.vocab_mapping import build_vocab_mappings_from_distribution, save_token_frequency_distribution
for job in json.loads(sys.argv[2]):
    data = job["data"]
    freq_path = data + "/token_freq.pt"
    if job.get("count", True):
        save_token_frequency_distribution(load_from_disk(data).with_format("torch"), freq_path)
    freq = torch.load(freq_path, weights_only=True)
    for i in job.get("drop", []):
        freq.pop(i)
    d2t, t2d = build_vocab_mappings_from_distribution(freq, job["draft"], job["target"])
    n = d2t.shape[0]
    np.save(f"{data}/d2t-{n}.npy", d2t.cpu().numpy())  # as speculators/train/cli.py caches them
    np.save(f"{data}/t2d-{n}.npy", t2d.cpu().numpy())
"""

_SPECFORGE_SCRIPT = r"""
import sys
from datasets import load_from_disk
sys.path.append(sys.argv[1])
from specforge.data.preprocessing import generate_vocab_mapping_file
ds = load_from_disk(sys.argv[2]).with_format("torch")
generate_vocab_mapping_file(ds, int(sys.argv[4]), int(sys.argv[5]), cache_dir=sys.argv[3], cache_key="vocab_mapping")
"""


def unavailable() -> str | None:
    """Why the producers cannot run here (None: both can)."""
    if not (SPECULATORS / "speculators").is_dir():
        return f"no speculators 0.9.0 in {SPECULATORS}; run bash .ci/install-speculators \"\" 0.9.0"
    if not (SPECFORGE / "specforge-0.2.0.dist-info").is_dir():
        return f"no SpecForge 0.2.0 in {SPECFORGE}; run .ci/install-specforge"
    return None


def _run(script: str, *args: str) -> None:
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, timeout=600)
    if done.returncode:
        raise RuntimeError(f"producer subprocess failed:\n{done.stderr[-3000:]}")


def _copy_dataset(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.lock", "cache-*"))
    return dst


def _replace_rows(folder: Path, new_rows: Path) -> None:
    """The dataset re-tokenized in place: new Arrow files, the producer's files of the old data kept."""
    for p in folder.iterdir():
        if p.suffix == ".arrow" or p.name in ("dataset_info.json", "state.json"):
            p.unlink()
    for p in new_rows.iterdir():
        if p.suffix == ".arrow" or p.name in ("dataset_info.json", "state.json"):
            shutil.copy(p, folder / p.name)


def _build(out: Path) -> None:
    clean, other = convention_dataset_dir(CONVENTION, seed=0), convention_dataset_dir(CONVENTION, seed=1)
    out.mkdir(parents=True)
    d = {name: out / name for name in CASES}
    for name in CASES:
        _copy_dataset(other if name in ("stale_token_freq",) else clean, d[name])
    other_copy = _copy_dataset(other, out / "other_source")
    jobs = [{"data": str(d["speculators_clean"]), "draft": DRAFT, "target": TARGET_VOCAB},
            {"data": str(other_copy), "draft": DRAFT, "target": TARGET_VOCAB},
            {"data": str(d["stale_token_freq"]), "draft": DRAFT, "target": TARGET_VOCAB},
            {"data": str(d["t2d_other_size"]), "draft": DRAFT, "target": OTHER_TARGET_VOCAB},
            {"data": str(d["drops_end_of_turn"]), "draft": DRAFT, "target": TARGET_VOCAB, "drop": [IM_END]},
            {"data": str(d["draft_too_large"]), "draft": PADDED_DRAFT, "target": TARGET_VOCAB}]
    _run(_SPECULATORS_SCRIPT, str(SPECULATORS), json.dumps(jobs))
    _run(_SPECFORGE_SCRIPT, str(SPECFORGE), str(d["specforge_clean"]), str(d["specforge_clean"] / "cache"),
         str(TARGET_VOCAB), str(DRAFT))
    # the data moved on after speculators wrote token_freq.pt and the pair: both stale
    _replace_rows(d["stale_token_freq"], clean)
    # a fresh token_freq.pt beside a pair built from the other dataset: only the mapping is stale
    shutil.copy(d["speculators_clean"] / "token_freq.pt", d["other_data"] / "token_freq.pt")
    for kind in ("d2t", "t2d"):
        shutil.copy(other_copy / f"{kind}-{DRAFT}.npy", d["other_data"] / f"{kind}-{DRAFT}.npy")
    # d2t shifted by one against the producer's own t2d
    for kind in ("d2t", "t2d"):
        shutil.copy(d["speculators_clean"] / f"{kind}-{DRAFT}.npy", d["d2t_off_by_one"] / f"{kind}-{DRAFT}.npy")
    shifted = np.load(d["d2t_off_by_one"] / f"d2t-{DRAFT}.npy") + 1
    np.save(d["d2t_off_by_one"] / f"d2t-{DRAFT}.npy", shifted)
    shutil.rmtree(other_copy)
    (out / "complete").write_text("ok")


def mappings_dir() -> Path:
    """The built cases (one folder each, named as in CASES); RuntimeError when a producer is missing."""
    why = unavailable()
    if why:
        raise RuntimeError(why)
    key = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
    return cached_build(cache_root() / "vocab-mappings" / key, "complete", _build)


def case_dir(name: str) -> Path:
    return mappings_dir() / name


def specforge_file(folder: Path) -> Path:
    return folder / "cache" / "vocab_mapping.pt"


_ON_COUNTS_SCRIPT = r"""
import json, sys
from collections import Counter
sys.path.append(sys.argv[1]); sys.path.append(sys.argv[2])
from speculators.train.vocab_mapping import build_vocab_mappings_from_distribution
from specforge.data.preprocessing import process_token_dict_to_mappings
out = []
for pairs, n, target in json.loads(sys.argv[3]):
    freq = {int(i): int(c) for i, c in pairs}  # insertion order as given: SpecForge's tie order
    _, t2d = build_vocab_mappings_from_distribution(dict(freq), n, target)
    _, t2d_forge = process_token_dict_to_mappings(Counter(freq), n, target)
    out.append([t2d.nonzero().flatten().tolist(), t2d_forge.nonzero().flatten().tolist()])
print(json.dumps(out))
"""


def producers_on_counts(draws: list[tuple[list[int], int]], scratch: Path, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """Both producers' selections (ascending target ids) for dense counts and draft sizes; the supervised
    ids reach SpecForge's Counter in a shuffled order, so its ties are not broken by id."""
    rng = np.random.default_rng(seed)
    jobs = []
    for counts, n in draws:
        ids = [i for i, c in enumerate(counts) if c]
        rng.shuffle(ids)
        jobs.append([[[i, counts[i]] for i in ids], n, len(counts)])
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run([sys.executable, "-c", _ON_COUNTS_SCRIPT, str(SPECULATORS), str(SPECFORGE), json.dumps(jobs)],
                          capture_output=True, text=True, env=env, timeout=600, cwd=scratch)
    if done.returncode:
        raise RuntimeError(f"producer subprocess failed:\n{done.stderr[-3000:]}")
    return [tuple(x) for x in json.loads(done.stdout.strip().splitlines()[-1])]
