"""Sampling settings and the sampler: greedy, or Gumbel-max with noise keyed by (seed, position).

``SamplingParams`` is the one typed bundle of sampling options. ``sample`` turns processed logits
(see ``grammarsd.decoding.transforms``) into a token id.

Seeded sampling draws ``argmax(logits + g)`` where ``g`` is standard Gumbel noise generated from a
``torch.Generator`` seeded with ``noise_key(seed, position)``: ``position`` is the token's absolute
index in its sequence (prompt tokens included, padding excluded). The noise therefore depends only
on (seed, position), never on how many draws came before, so

* the same seed gives the same text, alone or inside a batch (rows share the seed, each row uses
  its own positions);
* forced tokens (committed without sampling) consume no randomness;
* a speculative decoder that scores position ``p`` with the same noise reproduces the plain loop
  token for token.

``argmax(logits + Gumbel)`` is an exact sample from ``softmax(logits)`` (the Gumbel-max trick);
``-inf`` logits stay ``-inf`` and are never drawn.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

_MASK64 = (1 << 64) - 1


@dataclass(frozen=True)
class SamplingParams:
    """How the next token is chosen. All fields are validated on construction.

    Attributes
    ----------
    temperature : 0 means greedy (argmax); > 0 divides the logits before sampling.
    top_k : keep the ``top_k`` most likely tokens (>= 1), or ``None``.
    top_p : keep the smallest set of most likely tokens whose mass reaches ``top_p`` (0 < p <= 1).
    min_p : drop tokens less likely than ``min_p`` times the most likely one (0 <= p <= 1).
    repetition_penalty : CTRL-style penalty (> 0) on every token already in the sequence
        (prompt included): positive logits are divided by it, negative ones multiplied.
    seed : the noise key; ``None`` draws a fresh one per call (only used when temperature > 0).
    """

    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        if not self.temperature >= 0:
            raise ValueError(f"temperature must be >= 0, not {self.temperature!r}")
        if self.top_k is not None and (not isinstance(self.top_k, int) or self.top_k < 1):
            raise ValueError(f"top_k must be an int >= 1, not {self.top_k!r}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], not {self.top_p!r}")
        if self.min_p is not None and not 0 <= self.min_p <= 1:
            raise ValueError(f"min_p must be in [0, 1], not {self.min_p!r}")
        if self.repetition_penalty is not None and not self.repetition_penalty > 0:
            raise ValueError(f"repetition_penalty must be > 0, not {self.repetition_penalty!r}")
        if self.seed is not None and not isinstance(self.seed, int):
            raise ValueError(f"seed must be an int, not {self.seed!r}")

    @property
    def greedy(self) -> bool:
        """True when the next token is the argmax (temperature 0)."""
        return self.temperature == 0


def noise_key(seed: int, position: int) -> int:
    """A 63-bit generator seed for (``seed``, ``position``): splitmix64 of both, stable across runs."""
    x = (seed * 0x9E3779B97F4A7C15 + position + 1) & _MASK64
    for _ in range(2):
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & _MASK64
        x = (x ^ (x >> 27)) * 0x94D049BB133111EB & _MASK64
        x ^= x >> 31
    return x >> 1


def gumbel_noise(seed: int, position: int, size: int) -> torch.Tensor:
    """Float32 ``[size]`` standard Gumbel noise, a pure function of (seed, position, size)."""
    gen = torch.Generator().manual_seed(noise_key(seed, position))
    u = torch.rand(size, generator=gen, dtype=torch.float32)
    tiny = torch.finfo(torch.float32).tiny
    return -torch.log(-torch.log(u.clamp_(min=tiny)))


def sample(logits: torch.Tensor, params: SamplingParams, seed: int, position: int) -> int:
    """Pick a token from processed ``logits`` ``[V]`` (float; ``-inf`` = not allowed).

    Greedy: the first argmax. Otherwise ``argmax(logits + gumbel_noise(seed, position, V))``.
    The caller guarantees some logit is finite.
    """
    if params.greedy:
        return int(torch.argmax(logits))
    noise = gumbel_noise(seed, position, logits.shape[-1]).to(logits.device)
    return int(torch.argmax(logits.float() + noise))


__all__ = ["SamplingParams", "gumbel_noise", "noise_key", "sample"]
