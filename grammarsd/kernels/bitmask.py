"""Token bitmasks: allocation, shape rules, and the backend dispatch for applying them to logits.

A bitmask is ``int32[batch, ceil(vocab_size / 32)]``; bit ``t % 32`` of word ``t // 32`` is set iff
token ``t`` is allowed. Applying it sets the logits of disallowed tokens to ``-inf``; logits columns
past the bitmask's width (a model's padded vocabulary) count as disallowed.

Reference semantics (the loop every backend is tested against)::

    for row, mask_row in zip(rows, range(len(rows))):
        for t in range(logits.shape[-1]):
            allowed = t < 32 * bitmask.shape[1] and (bitmask[mask_row, t // 32] >> (t % 32)) & 1
            if not allowed:
                logits[row, t] = -inf
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Literal

import torch

Backend = Literal["auto", "torch", "triton"]


def bitmask_width(vocab_size: int) -> int:
    """Number of int32 words per row for ``vocab_size`` tokens."""
    return (vocab_size + 31) // 32


def allocate_token_bitmask(batch_size: int, vocab_size: int) -> torch.Tensor:
    """A CPU int32 bitmask of shape ``(batch_size, ceil(vocab_size / 32))``, all tokens allowed."""
    return torch.full((batch_size, bitmask_width(vocab_size)), -1, dtype=torch.int32)


def checked_row_ids(
    indices: Sequence[int] | torch.Tensor, limit: int, device: torch.device
) -> torch.Tensor:
    """``indices`` as int64 on ``device``, each in ``[0, limit)``.

    Python sequences and CPU tensors are checked (an out-of-range row on a GPU would be a device
    fault, not an exception); an index tensor already on the GPU is trusted, so masking never
    synchronises with the host.
    """
    if isinstance(indices, torch.Tensor) and indices.device.type != "cpu":
        return indices.to(device=device, dtype=torch.int64).reshape(-1)
    host = torch.as_tensor(indices, dtype=torch.int64).reshape(-1)
    if host.numel() and (int(host.min()) < 0 or int(host.max()) >= limit):
        raise IndexError(f"indices must lie in [0, {limit}); got {host.tolist()}")
    return host.to(device)


def apply_token_bitmask_inplace(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    *,
    indices: Sequence[int] | torch.Tensor | None = None,
    backend: Backend = "auto",
) -> None:
    """Set disallowed logits to ``-inf`` in place.

    ``logits`` is ``(batch, V)`` or ``(V,)``; ``bitmask`` is ``(batch, W)`` or ``(W,)`` int32 on the same
    device. With ``indices``, row ``indices[i]`` of ``logits`` is masked by row ``indices[i]`` of the
    bitmask and other rows are left alone.

    ``backend="auto"`` uses the Triton kernel for CUDA tensors when ``triton`` imports and torch ops
    otherwise; ``"triton"`` forces the kernel (on CPU it needs ``TRITON_INTERPRET=1``), ``"torch"``
    the plain ops. Triton is imported only when the Triton backend is chosen.
    """
    if bitmask.dtype != torch.int32:
        raise TypeError(f"bitmask must be int32, got {bitmask.dtype}")
    if logits.device != bitmask.device:
        raise ValueError(f"logits on {logits.device} but bitmask on {bitmask.device}")
    if backend == "auto":
        backend = "triton" if logits.device.type == "cuda" and _triton_available() else "torch"
    if backend == "torch":
        from grammarsd.kernels.torch_ref import apply_token_bitmask_inplace_torch

        apply_token_bitmask_inplace_torch(logits, bitmask, indices)
    elif backend == "triton":
        from grammarsd.kernels.triton import apply_token_bitmask_inplace_triton

        apply_token_bitmask_inplace_triton(logits, bitmask, indices)
    else:
        raise ValueError(f"unknown backend {backend!r}; expected 'auto', 'torch' or 'triton'")


@functools.cache
def _triton_available() -> bool:
    """Whether the Triton backend imports (checked once per process)."""
    try:
        import grammarsd.kernels.triton  # noqa: F401
    except ImportError:
        return False
    return True


__all__ = [
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "bitmask_width",
    "checked_row_ids",
]
