"""Unstable helpers shared by tests and benchmarks: cached built-in tokenizers and their infos.

Nothing here is public API; names and behaviour may change with the tests that use them.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Literal

from grammarsd.tokenizer import TokenizerInfo

TokenizerName = Literal["llama3", "smollm2", "llama2"]
TOKENIZER_NAMES: tuple[TokenizerName, ...] = ("llama3", "smollm2", "llama2")
"""Built-in vocabularies: Llama-3 (128,256, byte-level), SmolLM2 (49,152, byte-level) and
Llama-2 (32,000, SentencePiece with byte fallback; the ``"tiny"`` model's)."""


@cache
def hf_tokenizer(name: TokenizerName) -> Any:
    """The Hugging Face tokenizer of a built-in vocabulary, loaded once per process.

    Shared between callers: do not mutate it (``add_tokens`` & co.); load a fresh one with
    :func:`grammarsd.api.models.load_tokenizer` instead.
    """
    from grammarsd.api.models import load_tokenizer

    return load_tokenizer(name)


@cache
def tokenizer_info(name: TokenizerName) -> TokenizerInfo:
    """The :class:`TokenizerInfo` of a built-in vocabulary (logit width = tokenizer size)."""
    return TokenizerInfo.from_huggingface(hf_tokenizer(name))


__all__ = ["TOKENIZER_NAMES", "TokenizerName", "hf_tokenizer", "tokenizer_info"]
