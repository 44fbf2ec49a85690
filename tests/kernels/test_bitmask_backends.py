"""Every bitmask backend against the reference loop: ``torch.where`` on a bool mask built bit by bit.

With a CUDA device the backends run there (the compiled Triton kernel); without one, on CPU, where the
Triton backend runs through Triton's interpreter (``TRITON_INTERPRET=1``, set here before the kernel is
first jitted). The reference always runs on CPU.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence

import pytest
import torch

from grammarsd import allocate_token_bitmask, apply_token_bitmask_inplace
from grammarsd.kernels.bitmask import bitmask_width

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"  # read when the kernel is first jitted, not at import

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
    rng: random.Random, batch: int, vocab: int, width: int, dtype: torch.dtype, density: str = "half"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random logits and a random bitmask allowing 1/16 ("sparse"), 1/2 or 15/16 ("dense") of tokens."""
    gen = torch.Generator().manual_seed(rng.randrange(1 << 30))
    logits = torch.randn(batch, vocab, generator=gen).to(dtype)

    def words() -> torch.Tensor:
        return torch.randint(-(2**31), 2**31 - 1, (batch, width), dtype=torch.int32, generator=gen)

    bitmask = words()
    for _ in range(3):
        if density == "sparse":
            bitmask &= words()
        elif density == "dense":
            bitmask |= words()
    return logits, bitmask


def apply_on_device(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    backend: str,
    indices: Sequence[int] | torch.Tensor | None = None,
) -> torch.Tensor:
    """Copies of CPU ``logits`` and ``bitmask`` masked on ``DEVICE`` by ``backend``; back on CPU."""
    out = logits.to(DEVICE)
    if isinstance(indices, torch.Tensor):
        indices = indices.to(DEVICE)
    apply_token_bitmask_inplace(out, bitmask.to(DEVICE), indices=indices, backend=backend)  # type: ignore[arg-type]
    return out.cpu()


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
@pytest.mark.parametrize("density", ["sparse", "half", "dense"])
def test_matches_reference(
    backend: str, dtype: torch.dtype, shape: tuple[int, int, int], density: str
) -> None:
    batch, vocab, delta = shape
    width = max(0, bitmask_width(vocab) + delta)
    rng = random.Random(hash(shape) & 0xFFFF)
    logits, bitmask = _random_case(rng, batch, vocab, width, dtype, density)
    expected = reference_apply(logits, bitmask, None)
    assert torch.equal(apply_on_device(logits, bitmask, backend), expected)
    assert expected.isneginf().any() or vocab == 1  # the case masks something


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
        assert torch.equal(apply_on_device(logits, bitmask, backend, indices), expected)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_one_dimensional(backend: str, dtype: torch.dtype) -> None:
    logits, bitmask = _random_case(random.Random(3), 1, 70, 3, dtype)
    logits, bitmask = logits[0].clone(), bitmask[0].clone()
    expected = reference_apply(logits, bitmask, None)
    assert torch.equal(apply_on_device(logits, bitmask, backend), expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_strided_logits_rows(backend: str) -> None:
    """Rows of a wider buffer (row stride > V) are masked in place, the rest left alone."""
    big = torch.randn(3, 96)
    bitmask = torch.randint(-(2**31), 2**31 - 1, (3, 2), dtype=torch.int32)
    expected = reference_apply(big[:, :50].clone(), bitmask, None)
    on_device = big.to(DEVICE)
    apply_token_bitmask_inplace(on_device[:, :50], bitmask.to(DEVICE), backend=backend)  # type: ignore[arg-type]
    assert torch.equal(on_device[:, :50].cpu(), expected)
    assert torch.equal(on_device[:, 50:].cpu(), big[:, 50:])


@pytest.mark.parametrize("backend", BACKENDS)
def test_all_allowed_mask_changes_nothing(backend: str) -> None:
    logits = torch.randn(2, 70)
    assert torch.equal(apply_on_device(logits, allocate_token_bitmask(2, 70), backend), logits)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rejects_bad_input(backend: str) -> None:
    logits = torch.randn(2, 64, device=DEVICE)
    good = torch.zeros(2, 2, dtype=torch.int32, device=DEVICE)
    with pytest.raises(TypeError, match="int32"):
        apply_token_bitmask_inplace(logits, good.long(), backend=backend)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rows"):
        apply_token_bitmask_inplace(logits, good[:1], backend=backend)  # type: ignore[arg-type]
    for indices in ([2], [-1], torch.tensor([0, 2])):  # checked on the host, never a device fault
        with pytest.raises(IndexError, match=r"\[0, 2\)"):
            apply_token_bitmask_inplace(logits, good, indices=indices, backend=backend)  # type: ignore[arg-type]


def test_unknown_backend() -> None:
    with pytest.raises(ValueError, match="unknown backend"):
        apply_token_bitmask_inplace(
            torch.randn(1, 32), torch.zeros(1, 1, dtype=torch.int32), backend="cuda"  # type: ignore[arg-type]
        )
