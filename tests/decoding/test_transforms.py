"""Logit transforms and the seeded sampler, checked against plain-Python oracles and enumeration."""

from __future__ import annotations

import math

import pytest
import torch

from grammarsd.decoding.samplers import SamplingParams, gumbel_noise, noise_key, sample
from grammarsd.decoding.transforms import (
    apply_min_p,
    apply_repetition_penalty,
    apply_top_k,
    apply_top_p,
    process_logits,
)
from grammarsd.kernels.bitmask import allocate_token_bitmask

LOGITS = [2.0, -1.0, 0.5, 3.0, 0.0, -2.5, 1.0, 0.5]


def _kept(t: torch.Tensor) -> set[int]:
    return {i for i, x in enumerate(t.tolist()) if x != float("-inf")}


def _probs(xs: list[float]) -> list[float]:
    z = sum(math.exp(x) for x in xs)
    return [math.exp(x) / z for x in xs]


@pytest.mark.parametrize("k", [1, 2, 3, 8, 20])
def test_top_k_keeps_the_k_largest(k: int) -> None:
    expected = set(sorted(range(len(LOGITS)), key=lambda i: -LOGITS[i])[:k])
    assert _kept(apply_top_k(torch.tensor(LOGITS), k)) == expected


@pytest.mark.parametrize("p", [0.05, 0.3, 0.6, 0.9, 0.999, 1.0])
def test_top_p_keeps_smallest_prefix_reaching_p(p: float) -> None:
    probs = _probs(LOGITS)
    order = sorted(range(len(LOGITS)), key=lambda i: -probs[i])
    expected, mass = set(), 0.0
    for i in order:  # the oracle: add tokens until the mass reaches p
        if mass >= p:
            break
        expected.add(i)
        mass += probs[i]
    assert _kept(apply_top_p(torch.tensor(LOGITS), p)) == expected


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 1.0])
def test_min_p(p: float) -> None:
    probs = _probs(LOGITS)
    expected = {i for i, q in enumerate(probs) if q >= p * max(probs)}
    assert _kept(apply_min_p(torch.tensor(LOGITS), p)) == expected


def test_repetition_penalty_divides_positive_multiplies_negative() -> None:
    seen = torch.tensor([0, 1, 1, 4], dtype=torch.long)
    out = apply_repetition_penalty(torch.tensor(LOGITS), seen, 2.0).tolist()
    expected = [x / 2 if i in (0, 1, 4) and x > 0 else x * 2 if i in (0, 1, 4) else x
                for i, x in enumerate(LOGITS)]
    assert out == expected


def test_mask_comes_before_top_k() -> None:
    """top-k keeps the k best *allowed* tokens (the canonical order)."""
    mask = allocate_token_bitmask(1, len(LOGITS))[0]
    mask[0] = sum(1 << i for i in (1, 4, 5))  # only tokens 1, 4, 5 allowed
    params = SamplingParams(temperature=1.0, top_k=2)
    out = process_logits(torch.tensor(LOGITS), params, bitmask=mask)
    assert _kept(out) == {1, 4}


def test_greedy_skips_temperature_and_filters() -> None:
    out = process_logits(torch.tensor(LOGITS), SamplingParams(temperature=0.0, top_k=1))
    assert out.tolist() == LOGITS


def test_noise_is_a_pure_function_of_seed_and_position() -> None:
    assert torch.equal(gumbel_noise(7, 3, 100), gumbel_noise(7, 3, 100))
    assert not torch.equal(gumbel_noise(7, 3, 100), gumbel_noise(7, 4, 100))
    assert not torch.equal(gumbel_noise(7, 3, 100), gumbel_noise(8, 3, 100))
    assert len({noise_key(s, p) for s in range(50) for p in range(50)}) == 2500


def test_gumbel_max_samples_the_softmax() -> None:
    """Across positions, argmax(logits + noise) follows softmax(logits) (enumeration oracle)."""
    logits = torch.tensor([1.0, 0.0, -1.0, 2.0, float("-inf")])
    params = SamplingParams(temperature=1.0)
    n = 6000
    counts = [0] * 5
    for pos in range(n):
        counts[sample(logits, params, seed=11, position=pos)] += 1
    probs = _probs([1.0, 0.0, -1.0, 2.0]) + [0.0]
    for c, q in zip(counts, probs, strict=True):
        assert abs(c / n - q) < 4 * math.sqrt(q * (1 - q) / n) + 1e-9


def test_params_validate() -> None:
    for bad in ({"temperature": -1}, {"top_k": 0}, {"top_p": 0}, {"min_p": 2},
                {"repetition_penalty": 0}):
        with pytest.raises(ValueError):
            SamplingParams(**bad)  # type: ignore[arg-type]
