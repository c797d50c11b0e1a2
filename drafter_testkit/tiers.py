"""Which templates of the real corpora the default tier checks; the slow tier checks all of them.

Each corpus test runs per template, and each template's vendor tokenizer costs seconds to build and
load, so the default tier takes one or two templates per layout the oracle must handle (ChatML with
and without thinking, harmony, GLM, Gemma 3/4, Llama 3/4, Mistral (v3 and tekken), DeepSeek, Phi,
LFM, Nemotron, Command A, EXAONE, a text-marked template that must be refused) and the slow tier
(``pytest -m slow``, ``.ci/run --slow``) every other template of the same layouts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest

TRL_DEFAULT = frozenset({
    "qwen3_6", "qwen3_6_training", "qwen3", "gptoss_training", "glm4moe", "gemma3_training", "gemma4_v5",
    "llama3_1", "deepseekv3_training", "phi3_5_training", "lfm2_2_5", "nemotron_3_nano_training", "cohere2",
})
AXOLOTL_DEFAULT = frozenset({"mistral_v2v3", "mistral_v7_tekken", "llama4", "exaone4", "command_a", "alpaca"})


def tiered(names: Iterable[str], default: frozenset[str], marks: Callable[[str], tuple] = lambda name: ()) -> list:
    """``names`` as parameters: those outside ``default`` marked ``slow``, each with its own ``marks(name)``."""
    return [pytest.param(n, marks=(*marks(n), *(() if n in default else (pytest.mark.slow,)))) for n in names]


def default_vendors(default: frozenset[str], vendor_of: Callable[[str], object]) -> frozenset[str]:
    """The vendors whose tokenizers the default tier's templates use."""
    return frozenset(vendor_of(n).name for n in default)
