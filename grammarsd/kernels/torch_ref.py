"""Apply a token bitmask with plain torch ops (the CPU path and the reference for other backends)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from grammarsd.kernels.bitmask import checked_row_ids

_BIT = torch.arange(32, dtype=torch.int32)


def unpack_bitmask(bitmask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Bool ``(..., vocab_size)``: True where the token is allowed (columns past the mask: False)."""
    bits = (bitmask.unsqueeze(-1) >> _BIT.to(bitmask.device)) & 1
    allowed = bits.reshape(*bitmask.shape[:-1], -1).bool()
    width = allowed.shape[-1]
    if width >= vocab_size:
        return allowed[..., :vocab_size]
    pad = torch.zeros(
        *allowed.shape[:-1], vocab_size - width, dtype=torch.bool, device=allowed.device
    )
    return torch.cat([allowed, pad], dim=-1)


def apply_token_bitmask_inplace_torch(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    indices: Sequence[int] | torch.Tensor | None = None,
) -> None:
    """See ``grammarsd.kernels.bitmask.apply_token_bitmask_inplace``."""
    squeeze = logits.dim() == 1
    rows = logits.unsqueeze(0) if squeeze else logits
    masks = bitmask.unsqueeze(0) if bitmask.dim() == 1 else bitmask
    if indices is None:
        if masks.shape[0] != rows.shape[0]:
            raise ValueError(f"bitmask has {masks.shape[0]} rows, logits {rows.shape[0]}")
        allowed = unpack_bitmask(masks, rows.shape[-1])
        rows.masked_fill_(~allowed, float("-inf"))
        return
    idx = checked_row_ids(indices, min(rows.shape[0], masks.shape[0]), rows.device)
    allowed = unpack_bitmask(masks[idx], rows.shape[-1])
    rows[idx] = rows[idx].masked_fill(~allowed, float("-inf"))
