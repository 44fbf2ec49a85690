"""Apply a token bitmask with one Triton kernel (the CUDA path; runs on CPU under ``TRITON_INTERPRET=1``).

Semantics are those of ``grammarsd.kernels.bitmask.apply_token_bitmask_inplace`` (bit set = allowed,
logits columns past the bitmask's width are disallowed, ``indices`` selects rows). The kernel never
reads logits: each program takes one row and a ``BLOCK``-column tile, unpacks the int32 words of that
tile in registers and stores ``-inf`` only where the token is disallowed.

Grid: ``(num_rows, cdiv(V, BLOCK))``. ``row_ids`` (int64 ``[num_rows]``) names the logits row (and the
bitmask row) each program masks, so ``indices`` costs nothing extra. Strides are passed explicitly;
only the vocabulary axis of ``logits`` must be contiguous.

This module imports ``triton`` at the top: ``bitmask.py`` imports it only when the Triton backend is
used. The kernel is jitted on first call, so ``TRITON_INTERPRET`` is read then.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch
import triton
import triton.language as tl

_BLOCK = 4096  # columns per program: 128 int32 words


def _apply_bitmask(
    logits_ptr,
    bitmask_ptr,
    row_ids_ptr,
    vocab_size,
    bitmask_width,
    logits_row_stride,
    bitmask_row_stride,
    BLOCK: tl.constexpr,
):
    pid_row = tl.program_id(0)
    pid_col = tl.program_id(1)
    row = tl.load(row_ids_ptr + pid_row)
    cols = pid_col * BLOCK + tl.arange(0, BLOCK)
    in_vocab = cols < vocab_size
    words = cols // 32
    # Columns whose word lies past the bitmask's width load 0, i.e. are disallowed.
    packed = tl.load(
        bitmask_ptr + row * bitmask_row_stride + words,
        mask=in_vocab & (words < bitmask_width),
        other=0,
    )
    allowed = ((packed >> (cols % 32)) & 1) != 0
    tl.store(
        logits_ptr + row * logits_row_stride + cols,
        tl.full([BLOCK], float("-inf"), logits_ptr.dtype.element_ty),
        mask=in_vocab & ~allowed,
    )


@functools.cache
def _kernel() -> Any:
    """The jitted kernel, built on first use so ``TRITON_INTERPRET`` is read then, not at import."""
    return triton.jit(_apply_bitmask)


def _checked_row_ids(
    indices: Sequence[int] | torch.Tensor, limit: int, device: torch.device
) -> torch.Tensor:
    """``indices`` as int64 on ``device``, each in ``[0, limit)`` (the kernel does no bounds check).

    Python sequences and CPU tensors are checked; an index tensor already on the GPU is trusted, so
    masking never synchronises with the host.
    """
    if isinstance(indices, torch.Tensor) and indices.device.type != "cpu":
        return indices.to(device=device, dtype=torch.int64).reshape(-1)
    host = torch.as_tensor(indices, dtype=torch.int64).reshape(-1)
    if host.numel() and (int(host.min()) < 0 or int(host.max()) >= limit):
        raise IndexError(f"indices must lie in [0, {limit}); got {host.tolist()}")
    return host.to(device)


def apply_token_bitmask_inplace_triton(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    indices: Sequence[int] | torch.Tensor | None = None,
) -> None:
    """See ``grammarsd.kernels.bitmask.apply_token_bitmask_inplace``.

    ``logits`` is ``(batch, V)`` or ``(V,)`` with a contiguous last axis; ``bitmask`` is int32
    ``(batch, W)`` or ``(W,)`` with a contiguous last axis, on the same device. Any ``V`` and ``W``.
    """
    rows = logits.unsqueeze(0) if logits.dim() == 1 else logits
    masks = bitmask.unsqueeze(0) if bitmask.dim() == 1 else bitmask
    if rows.dim() != 2 or masks.dim() != 2:
        raise ValueError(
            f"logits and bitmask must be 1-D or 2-D, got {logits.dim()}-D and {bitmask.dim()}-D"
        )
    if rows.stride(-1) != 1 or masks.stride(-1) != 1:
        raise ValueError("the last axis of logits and bitmask must be contiguous")
    if indices is None:
        if masks.shape[0] != rows.shape[0]:
            raise ValueError(f"bitmask has {masks.shape[0]} rows, logits {rows.shape[0]}")
        row_ids = torch.arange(rows.shape[0], dtype=torch.int64, device=rows.device)
    else:
        row_ids = _checked_row_ids(indices, min(rows.shape[0], masks.shape[0]), rows.device)
    vocab_size = rows.shape[1]
    if row_ids.numel() == 0 or vocab_size == 0:
        return
    grid = (row_ids.numel(), triton.cdiv(vocab_size, _BLOCK))
    _kernel()[grid](
        rows,
        masks,
        row_ids,
        vocab_size,
        masks.shape[1],
        rows.stride(0),
        masks.stride(0),
        BLOCK=_BLOCK,
    )


__all__ = ["apply_token_bitmask_inplace_triton"]
