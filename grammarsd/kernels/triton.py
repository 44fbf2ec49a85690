"""Apply a token bitmask with one Triton kernel (the CUDA path; runs on CPU under ``TRITON_INTERPRET=1``).

Semantics are those of ``grammarsd.kernels.bitmask.apply_token_bitmask_inplace`` (bit set = allowed,
logits columns past the bitmask's width are disallowed, ``indices`` selects rows). Each program takes
one row and a tile of ``WORDS`` int32 mask words (``32 * WORDS`` columns), loads each word once and
unpacks it against the 32 bit positions as a ``[WORDS, 32]`` tile in registers. A tile that drops few
tokens stores ``-inf`` at just those; one that drops many reads the kept logits and writes the whole
tile, since per-element predicated stores over most of a row run at less than half the bandwidth of
whole-tile stores (H100, 4,096 x 128,256 float32: 2.3 ms against 0.95 ms; see docs/benchmarks.md).

Grid: ``(num_rows, cdiv(V, 32 * WORDS))``. With ``indices``, ``row_ids`` (int64 ``[num_rows]``) names
the logits row (and the bitmask row) each program masks; without, the program's row is its own
index, so the common call allocates nothing. Strides are passed explicitly; only the vocabulary axis
of ``logits`` must be contiguous.

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

from grammarsd.kernels.bitmask import checked_row_ids

_WORDS = 128  # mask words per program: 4,096 columns
_SPARSE_WRITES = 4  # a tile that drops at most 1 / _SPARSE_WRITES of its tokens writes only those


def _apply_bitmask(
    logits_ptr,
    bitmask_ptr,
    row_ids_ptr,
    vocab_size,
    bitmask_width,
    logits_row_stride,
    bitmask_row_stride,
    WORDS: tl.constexpr,
    HAS_ROW_IDS: tl.constexpr,
    SPARSE_WRITES: tl.constexpr,
):
    if HAS_ROW_IDS:
        row = tl.load(row_ids_ptr + tl.program_id(0))
    else:
        row = tl.program_id(0).to(tl.int64)  # rows * stride can pass 2**31
    words = tl.program_id(1) * WORDS + tl.arange(0, WORDS)
    # Words past the bitmask's width load 0: their columns are disallowed.
    packed = tl.load(
        bitmask_ptr + row * bitmask_row_stride + words, mask=words < bitmask_width, other=0
    )
    bits = tl.arange(0, 32)
    cols = words[:, None] * 32 + bits[None, :]
    in_vocab = cols < vocab_size
    allowed = ((packed[:, None] >> bits[None, :]) & 1) != 0
    ptrs = logits_ptr + row * logits_row_stride + cols
    drop = in_vocab & ~allowed
    if tl.sum(drop.to(tl.int32)) * SPARSE_WRITES <= WORDS * 32:
        # Few tokens to drop: write only those (per-element predicated stores).
        tl.store(ptrs, tl.full([WORDS, 32], float("-inf"), logits_ptr.dtype.element_ty), mask=drop)
    else:
        # Many: read the kept logits and write the whole tile, which streams at full bandwidth.
        kept = tl.load(ptrs, mask=in_vocab & allowed, other=float("-inf"))
        tl.store(ptrs, kept, mask=in_vocab)


@functools.cache
def _kernel() -> Any:
    """The jitted kernel, built on first use so ``TRITON_INTERPRET`` is read then, not at import."""
    return triton.jit(_apply_bitmask)


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
        row_ids, num_rows = masks, rows.shape[0]  # the pointer is unused without row ids
    else:
        row_ids = checked_row_ids(indices, min(rows.shape[0], masks.shape[0]), rows.device)
        num_rows = row_ids.numel()
    vocab_size = rows.shape[1]
    if num_rows == 0 or vocab_size == 0:
        return
    grid = (num_rows, triton.cdiv(vocab_size, 32 * _WORDS))
    _kernel()[grid](
        rows,
        masks,
        row_ids,
        vocab_size,
        masks.shape[1],
        rows.stride(0),
        masks.stride(0),
        WORDS=_WORDS,
        HAS_ROW_IDS=indices is not None,
        SPARSE_WRITES=_SPARSE_WRITES,
    )


__all__ = ["apply_token_bitmask_inplace_triton"]
