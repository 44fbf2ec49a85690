"""What a generation call returns: ``Result`` (value, text, tokens, finish reason) and its stats."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from grammarsd.decoding.loop import FinishReason

T = TypeVar("T")


@dataclass(frozen=True)
class GenerationStats:
    """Timings of one generated sequence (seconds).

    Attributes
    ----------
    ttft : from the call to the first committed token (prefill included).
    tpot : mean time per output token after the first (0 for a single token).
    tokens : committed tokens, forced ones and EOS included.
    forced_tokens : tokens committed without sampling (the mask allowed exactly one).
    mask_seconds : time spent filling grammar masks (the whole batch, for ``generate_batch``).
    forward_passes : model forward passes (the whole batch).
    """

    ttft: float
    tpot: float
    tokens: int
    forced_tokens: int
    mask_seconds: float
    forward_passes: int


@dataclass(frozen=True)
class Result(Generic[T]):
    """One generated output.

    Attributes
    ----------
    value : the parsed value: a Pydantic instance (``schema=`` a model), a JSON value (``schema=``
        a dict), else the text.
    text : the decoded output (EOS and special tokens excluded; cut before a stop string).
    token_ids : the committed token ids, EOS included when one ended the output.
    finish_reason : ``"stop"`` (a stop string), ``"eos"`` (the model chose EOS), ``"length"``
        (``max_tokens``), ``"grammar"`` (the grammar allowed nothing but the end).
    stats : timings and counts.
    """

    value: T
    text: str
    token_ids: list[int]
    finish_reason: FinishReason
    stats: GenerationStats

    def __repr__(self) -> str:
        return (
            f"Result(value={self.value!r}, finish_reason={self.finish_reason!r}, "
            f"tokens={self.stats.tokens})"
        )


__all__ = ["GenerationStats", "Result"]
