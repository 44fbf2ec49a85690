"""Every bitmask backend against the reference loop: ``torch.where`` on a bool mask built bit by bit.

The Triton backend runs on CPU through Triton's interpreter (``TRITON_INTERPRET=1``, set here before
the kernel is first jitted).
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # before grammarsd.kernels.triton jits its kernel

import random
from collections.abc import Sequence

import pytest
import torch

from grammarsd import allocate_token_bitmask, apply_token_bitmask_inplace
from grammarsd.kernels.bitmask import bitmask_width

try:
    import triton  # noqa: F401

    _TRITON_SKIP = ""
except ImportError as e:  # pragma: no cover - triton is a dev dependency on Linux x86-64
    _TRITON_SKIP = f"triton cannot be imported: {e}"

BACKENDS = [
    pytest.param("torch", id="torch"),
    pytest.param("auto", id="auto"),
    pytest.param(
        "triton", id="triton", marks=pytest.mark.skipif(bool(_TRITON_SKIP), reason=_TRITON_SKIP)
    ),
]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def reference_apply(
    logits: torch.Tensor, bitmask: torch.Tensor, indices: Sequence[int] | None
) -> torch.Tensor:
    """The semantics loop of ``bitmask.py``, written out: a bool mask from Python bit tests."""
    rows = logits.reshape(-1, logits.shape[-1]) if logits.dim() == 1 else logits
    masks = bitmask.reshape(-1, bitmask.shape[-1]) if bitmask.dim() == 1 else bitmask
    words = masks.tolist()
    vocab = rows.shape[-1]
    allowed = torch.zeros(rows.shape, dtype=torch.bool)
    selected = range(rows.shape[0]) if indices is None else indices
    for r in range(rows.shape[0]):
        if r not in selected:
            allowed[r, :] = True  # untouched row
            continue
        for t in range(vocab):
            if t < 32 * len(words[r]) and (words[r][t // 32] >> (t % 32)) & 1:
                allowed[r, t] = True
    out = torch.where(allowed, rows, torch.full_like(rows, float("-inf")))
    return out.reshape(logits.shape)


def _random_case(
    rng: random.Random, batch: int, vocab: int, width: int, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(rng.randrange(1 << 30))
    logits = torch.randn(batch, vocab, generator=gen).to(dtype)
    bitmask = torch.randint(-(2**31), 2**31 - 1, (batch, width), dtype=torch.int32, generator=gen)
    return logits, bitmask


# (batch, vocab, width delta vs ceil(V/32)): V not a multiple of 32, narrower and wider masks.
SHAPES = {
    "exact-32": (2, 64, 0),
    "ragged": (3, 77, 0),
    "one-token": (1, 1, 0),
    "narrow-mask": (2, 100, -2),
    "wide-mask": (2, 45, 3),
    "multi-tile": (2, 4096 * 2 + 5, 0),
    "multi-tile-narrow": (1, 4096 + 300, -20),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_matches_reference(backend: str, dtype: torch.dtype, shape: tuple[int, int, int]) -> None:
    batch, vocab, delta = shape
    width = max(0, bitmask_width(vocab) + delta)
    logits, bitmask = _random_case(random.Random(hash(shape) & 0xFFFF), batch, vocab, width, dtype)
    expected = reference_apply(logits, bitmask, None)
    apply_token_bitmask_inplace(logits, bitmask, backend=backend)  # type: ignore[arg-type]
    assert torch.equal(logits, expected)
    assert logits.isneginf().any()  # the case masks something


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("as_tensor", [False, True], ids=["list", "tensor"])
def test_indices_select_rows(backend: str, as_tensor: bool) -> None:
    rng = random.Random(7)
    for _ in range(4):
        batch, vocab = rng.randint(2, 5), rng.randint(1, 200)
        logits, bitmask = _random_case(rng, batch, vocab, bitmask_width(vocab), torch.float32)
        chosen = sorted(rng.sample(range(batch), rng.randint(1, batch - 1)))
        expected = reference_apply(logits, bitmask, chosen)
        indices = torch.tensor(chosen) if as_tensor else chosen
        apply_token_bitmask_inplace(logits, bitmask, indices=indices, backend=backend)  # type: ignore[arg-type]
        assert torch.equal(logits, expected)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_one_dimensional(backend: str, dtype: torch.dtype) -> None:
    logits, bitmask = _random_case(random.Random(3), 1, 70, 3, dtype)
    logits, bitmask = logits[0].clone(), bitmask[0].clone()
    expected = reference_apply(logits, bitmask, None)
    apply_token_bitmask_inplace(logits, bitmask, backend=backend)  # type: ignore[arg-type]
    assert torch.equal(logits, expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_strided_logits_rows(backend: str) -> None:
    """Rows of a wider buffer (row stride > V) are masked in place, the rest left alone."""
    big = torch.randn(3, 96)
    view = big[:, :50]
    bitmask = torch.randint(-(2**31), 2**31 - 1, (3, 2), dtype=torch.int32)
    expected = reference_apply(view.clone(), bitmask, None)
    tail = big[:, 50:].clone()
    apply_token_bitmask_inplace(view, bitmask, backend=backend)  # type: ignore[arg-type]
    assert torch.equal(big[:, :50], expected)
    assert torch.equal(big[:, 50:], tail)


@pytest.mark.parametrize("backend", BACKENDS)
def test_all_allowed_mask_changes_nothing(backend: str) -> None:
    logits = torch.randn(2, 70)
    before = logits.clone()
    apply_token_bitmask_inplace(logits, allocate_token_bitmask(2, 70), backend=backend)  # type: ignore[arg-type]
    assert torch.equal(logits, before)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rejects_bad_input(backend: str) -> None:
    logits = torch.randn(2, 64)
    with pytest.raises(TypeError, match="int32"):
        apply_token_bitmask_inplace(logits, torch.zeros(2, 2, dtype=torch.int64), backend=backend)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rows"):
        apply_token_bitmask_inplace(logits, torch.zeros(3, 2, dtype=torch.int32), backend=backend)  # type: ignore[arg-type]
    with pytest.raises(IndexError):
        apply_token_bitmask_inplace(
            logits, torch.zeros(2, 2, dtype=torch.int32), indices=[2], backend=backend  # type: ignore[arg-type]
        )


def test_unknown_backend() -> None:
    with pytest.raises(ValueError, match="unknown backend"):
        apply_token_bitmask_inplace(
            torch.randn(1, 32), torch.zeros(1, 1, dtype=torch.int32), backend="cuda"  # type: ignore[arg-type]
        )
