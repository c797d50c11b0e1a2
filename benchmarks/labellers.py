"""The span labeller per token, against a plain pass over the same ids, on ChatML and non-ChatML shards.

    python benchmarks/labellers.py [--rounds 9] [--calls 15] [--out benchmarks/labellers-DATE.json]

Shards: the demo dataset (``fixtures.generate.demo_dataset_dir()``: 2,000 rows the real Qwen3.6
template rendered, one shard of ~640 K tokens, as the engine reads it) labelled with

- the profile the suite resolves for its tokenizer (``make_oracle``: the chatml built-in, verified
  against the template's renderings), through ``SpanOracle.label``, the runtime's one door;
- the profile derived from the same tokenizer's chat template (``derive.cached_derivation``);
- the resolved profile again with the ids as int64 (how a dataset straight out of speculators holds
  them);

and the llama3 family's dataset (``fixtures.families``, 400 rows its template rendered, tiled to a
shard of the same size) with its built-in profile: a layout with a two-token opener, a role word,
an end-of-header id and a ``\\n\\n`` tail. When the library still exports the ChatML-only kernel
(``kernels.label_chatml``, retired since), it is timed on the demo shard too, int32 and int64: run
this script with ``PYTHONPATH=<checkout>/src`` on a built checkout from before the retirement to
compare (commit 702fc3c has both labellers, measured as 4ef8ea9 before a rebase; eb762cd has the
labeller from before this work).

The floor is ``np.bincount`` over the same ids (one read of every id, one scattered write). The
machine is shared, so each round times every labeller and the floor back to back (``--calls`` pairs of
floor and labeller calls, order of the cases rotated per round) and the figures are the medians over rounds of
each round's own ratios, never walls taken minutes apart. The numpy reference (``generic.label``)
is timed in three pairs per round, for scale.
"""

from __future__ import annotations

import testkit_path  # noqa: F401  (drafter_testkit is imported from the checkout)
import argparse
import datetime as dt
import json
import os
import platform
import time
from pathlib import Path
from statistics import median
from typing import Any, Callable

import numpy as np

from drafter_contracts.kernels import compiled as kernels
from drafter_contracts.run.allocator import keep_freed_memory
from drafter_contracts.dataset.reader import open_dataset
from drafter_contracts.dataset.columns import Shard
from drafter_testkit.families import family_dataset_dir, family_tokenizer_dir
from drafter_contracts.demo.dataset import demo_dataset_dir
from drafter_testkit.tokenizer import qwen36_tokenizer_dir
from drafter_contracts.spans import generic
from drafter_contracts.spans.learn.builtin import builtin_profile
from drafter_contracts.spans.learn.derive import DerivationFailed, cached_derivation
from drafter_contracts.spans.profile import CompiledProfile
from drafter_contracts.spans import SpanOracle, make_oracle, oracle_for_profile
from drafter_contracts.tokenizer.vocabulary import load_vocabulary

MAX_LEN = 4096


def shard_of(path: Path, tile_to: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """ids and row offsets of the whole dataset as one shard (rows repeated up to ``tile_to`` tokens)."""
    ds = open_dataset(path)
    arrays = ds.read(Shard(0, 0, ds.num_rows))
    ids = np.ascontiguousarray(arrays.input_ids.values)
    offsets = np.asarray(arrays.input_ids.offsets, dtype=np.int64)
    if tile_to and len(ids) < tile_to:
        k = -(-tile_to // len(ids))
        lengths = np.tile(np.diff(offsets), k)
        ids = np.tile(ids, k)
        offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    return ids, offsets


def paired(fn: Callable[[], Any], floor: Callable[[], Any], calls: int) -> dict[str, float]:
    """``calls`` pairs of (floor, fn) calls back to back, after a warm-up of each: the median and the
    fastest of each side, and the median of the pairs' own ratios (the two calls of a pair see the
    same load, so their ratio is steadier than either wall)."""
    fn()
    floor()
    t_fn, t_floor, ratios = [], [], []
    for _ in range(calls):
        t0 = time.perf_counter()
        floor()
        t1 = time.perf_counter()
        fn()
        t2 = time.perf_counter()
        t_floor.append(t1 - t0)
        t_fn.append(t2 - t1)
        ratios.append((t2 - t1) / (t1 - t0))
    return {"seconds": median(t_fn), "fastest_seconds": min(t_fn), "floor_seconds": median(t_floor),
            "fastest_floor_seconds": min(t_floor), "over_floor": median(ratios),
            "fastest_over_fastest_floor": min(t_fn) / min(t_floor)}


def cases() -> dict[str, dict[str, Any]]:
    """Each timed case: its shard, what it runs, and the floor over the same ids."""
    qwen = load_vocabulary(str(qwen36_tokenizer_dir()))
    demo_ids, demo_offsets = shard_of(demo_dataset_dir())
    out: dict[str, dict[str, Any]] = {}

    def add(name: str, ids: np.ndarray, offsets: np.ndarray, fn: Callable[[], Any], what: str) -> None:
        out[name] = {"ids": ids, "offsets": offsets, "fn": fn, "what": what}

    oracle = make_oracle(qwen)
    add("chatml-resolved", demo_ids, demo_offsets, lambda: oracle.label(demo_ids, demo_offsets, MAX_LEN),
        f"demo shard, SpanOracle.label with the resolved profile ({oracle.how})")
    ids64 = demo_ids.astype(np.int64)  # as a dataset straight out of speculators stores them
    add("chatml-resolved-int64", ids64, demo_offsets, lambda: oracle.label(ids64, demo_offsets, MAX_LEN),
        "the demo shard's ids as int64, SpanOracle.label with the resolved profile")
    try:
        derived = oracle_for_profile(cached_derivation(qwen), qwen, "derived")
    except DerivationFailed as exc:
        print(f"the Qwen3.6 template's profile cannot be derived ({exc}); that case is left out")
    else:
        add("chatml-derived", demo_ids, demo_offsets, lambda: derived.label(demo_ids, demo_offsets, MAX_LEN),
            "demo shard, SpanOracle.label with the profile derived from the Qwen3.6 template")
    if hasattr(kernels, "label_chatml"):
        from drafter_contracts.spans import chatml

        chatml_profile = chatml.ChatMLProfile.from_vocabulary(qwen)
        add("chatml-kernel", demo_ids, demo_offsets, lambda: chatml.label(demo_ids, demo_offsets, chatml_profile, MAX_LEN),
            "demo shard, the ChatML-only kernel (kernels.label_chatml)")
        add("chatml-kernel-int64", ids64, demo_offsets,
            lambda: chatml.label(ids64, demo_offsets, chatml_profile, MAX_LEN),
            "the demo shard's ids as int64, the ChatML-only kernel")
    llama = load_vocabulary(str(family_tokenizer_dir("llama3")))
    l_ids, l_offsets = shard_of(family_dataset_dir("llama3"), tile_to=len(demo_ids))
    l_oracle = SpanOracle(builtin_profile("llama3", llama), "built-in llama3",
                          CompiledProfile(builtin_profile("llama3", llama), llama.newline_lead))
    add("llama3-builtin", l_ids, l_offsets, lambda: l_oracle.label(l_ids, l_offsets, MAX_LEN),
        "llama3 family dataset tiled to the demo shard's size, SpanOracle.label with the llama3 built-in")
    cp = oracle.compiled
    add("chatml-numpy-reference", demo_ids, demo_offsets, lambda: generic.label(demo_ids, demo_offsets, cp, MAX_LEN),
        "demo shard, the numpy reference generic.label (resolved profile)")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=15)
    parser.add_argument("--out", type=Path, default=Path("reports/labellers.json"))
    parser.add_argument("--label", default="", help="a word for this run (before/after), stored in the JSON")
    args = parser.parse_args()
    assert kernels.backend()["backend"] == "c", "the benchmark times the compiled labeller"
    keep_freed_memory()  # as the suite does (run/allocator.py): each call's outputs reuse the last call's pages
    found = cases()
    floors: dict[int, Callable[[], Any]] = {}
    rounds: list[dict[str, Any]] = []
    names = list(found)
    for r in range(args.rounds):
        load = os.getloadavg()[0]
        order = names[r % len(names):] + names[:r % len(names)]
        got: dict[str, Any] = {}
        for name in order:
            case = found[name]
            ids = case["ids"]
            floor = floors.setdefault(id(ids), lambda ids=ids: np.bincount(ids))
            calls = 3 if name.endswith("numpy-reference") else args.calls
            g = paired(case["fn"], floor, calls)
            g["ns_per_token"] = g["seconds"] / len(ids) * 1e9
            got[name] = g
        # Labeller against labeller: the quotient of their floor ratios (each against the floor over its own
        # shard, timed beside it), so a load change between the two cases cancels out.
        base = got.get("chatml-kernel")
        for name, g in got.items():
            if base is not None:
                g["over_chatml_kernel"] = g["over_floor"] / base["over_floor"]
            if name != "chatml-resolved":
                g["over_chatml_resolved"] = g["over_floor"] / got["chatml-resolved"]["over_floor"]
        rounds.append({"load_average": load, "cases": got})
        print(f"round {r + 1}/{args.rounds} (load {load:.1f}): "
              + ", ".join(f"{n} {g['seconds'] * 1e3:.2f} ms ({g['over_floor']:.2f}x floor)" for n, g in got.items()))
    summary: dict[str, Any] = {}
    for name in names:
        per = [rd["cases"][name] for rd in rounds]
        summary[name] = {"what": found[name]["what"], "tokens": int(len(found[name]["ids"])),
                         "rows": int(len(found[name]["offsets"]) - 1)}
        for key in ("seconds", "fastest_seconds", "floor_seconds", "over_floor", "fastest_over_fastest_floor",
                    "ns_per_token", "over_chatml_kernel", "over_chatml_resolved"):
            vals = [p[key] for p in per if key in p]
            if vals:
                summary[name][f"median_{key}"] = round(median(vals), 6 if key.endswith("seconds") else 3)
                summary[name][f"range_{key}"] = [round(min(vals), 6 if key.endswith("seconds") else 3),
                                                 round(max(vals), 6 if key.endswith("seconds") else 3)]
    result = {"label": args.label, "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine(),
                          "cores": os.cpu_count()},
              "floor": "np.bincount over the same ids", "rounds_n": args.rounds, "calls_per_timing": args.calls,
              "summary": summary, "rounds": rounds}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
