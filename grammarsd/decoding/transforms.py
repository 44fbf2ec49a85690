"""Logit transforms in the canonical order: penalties -> temperature -> grammar mask -> filters.

``process_logits`` is the one function both the plain decode loop and a future speculative
verifier call to turn raw model logits into the distribution a token is drawn from. Each step is a
small pure function on one row ``[V]`` (they modify and return their argument):

1. ``apply_repetition_penalty`` (CTRL, Keskar et al. 2019): logits of tokens already in the
   sequence are divided by the penalty when positive, multiplied when negative;
2. ``apply_temperature``: divide by the temperature (skipped for greedy, where it cannot change
   the argmax);
3. the grammar mask (``grammarsd.apply_token_bitmask_inplace``): disallowed tokens -> ``-inf``;
4. ``apply_top_k``, ``apply_top_p`` (nucleus, Holtzman et al. 2020), ``apply_min_p`` (Nguyen et
   al. 2024) over what the mask left, skipped for greedy (none of them removes the argmax).

Filtering after the mask means "top-k among the allowed tokens", which is what a user asking for
top-k inside a structure means.
"""

from __future__ import annotations

import torch

from grammarsd.decoding.samplers import SamplingParams
from grammarsd.kernels.bitmask import apply_token_bitmask_inplace


def apply_repetition_penalty(
    logits: torch.Tensor, seen: torch.Tensor, penalty: float
) -> torch.Tensor:
    """Penalise the ids in ``seen`` (int64 ``[n]``, duplicates allowed) in ``logits`` ``[V]``."""
    if seen.numel() == 0:
        return logits
    picked = logits.gather(0, seen)
    picked = torch.where(picked > 0, picked / penalty, picked * penalty)
    return logits.scatter_(0, seen, picked)


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Divide ``logits`` by ``temperature`` (> 0)."""
    return logits.div_(temperature)


def apply_top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the ``k`` largest logits (ties at the k-th value are all kept); others -> ``-inf``."""
    if k >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, k).values[-1]
    return logits.masked_fill_(logits < kth, float("-inf"))


def apply_top_p(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Keep the smallest prefix of tokens, most likely first, whose probability mass reaches ``p``."""
    if p >= 1:
        return logits
    ordered, order = torch.sort(logits, descending=True)
    probs = torch.softmax(ordered.float(), dim=-1)
    mass_before = torch.cumsum(probs, dim=-1) - probs
    drop = mass_before >= p  # the first token always stays (mass before it is 0)
    return logits.scatter_(0, order[drop], float("-inf"))


def apply_min_p(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Drop tokens whose probability is below ``p`` times the largest probability."""
    if p <= 0:
        return logits
    probs = torch.softmax(logits.float(), dim=-1)
    return logits.masked_fill_(probs < p * probs.max(), float("-inf"))


def process_logits(
    logits: torch.Tensor,
    params: SamplingParams,
    *,
    bitmask: torch.Tensor | None = None,
    seen: torch.Tensor | None = None,
) -> torch.Tensor:
    """Apply the canonical transform pipeline to one row of raw logits, in place.

    Parameters
    ----------
    logits : float ``[V]`` for one position (modified and returned).
    params : the sampling settings.
    bitmask : int32 ``[ceil(V / 32)]`` grammar mask on the logits' device, or None for no mask.
    seen : int64 ``[n]`` token ids already in the sequence (for the repetition penalty).

    Returns
    -------
    The processed logits: sampling ``softmax`` of them (or their argmax when greedy) is the
    decoding rule. Every token outside ``bitmask`` is ``-inf``.
    """
    if params.repetition_penalty is not None and seen is not None:
        apply_repetition_penalty(logits, seen, params.repetition_penalty)
    if not params.greedy:
        apply_temperature(logits, params.temperature)
    if bitmask is not None:
        apply_token_bitmask_inplace(logits, bitmask)
    if params.greedy:
        return logits
    if params.top_k is not None:
        apply_top_k(logits, params.top_k)
    if params.top_p is not None:
        apply_top_p(logits, params.top_p)
    if params.min_p is not None:
        apply_min_p(logits, params.min_p)
    return logits


__all__ = [
    "apply_min_p",
    "apply_repetition_penalty",
    "apply_temperature",
    "apply_top_k",
    "apply_top_p",
    "process_logits",
]
