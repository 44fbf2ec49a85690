"""The decode loop: KV-cached forward passes, grammar masks, forced-token runs, sampling.

``Decoding`` runs ``B`` sequences in one batch. Its data is one ``Row`` per sequence plus a shared
KV cache, an attention mask and one bitmask row per sequence. The loop is three small steps:

``_advance(row)``  (grammar side) fill the row's mask for its next position; while the mask allows
                   exactly one token, commit that token without sampling (a *forced* token) and
                   fill again. Forced tokens need no logits, so they wait in ``row.pending``.
``_forward()``     (model side) feed every row's pending tokens in ONE forward pass. Rows with
                   fewer pending tokens are left-padded inside the chunk (attention mask 0,
                   positions counted over real tokens only), finished rows feed only padding.
                   Returns the logits at each row's last position: ``[B, V]``.
``_sample(row)``   ``process_logits`` (penalty -> temperature -> mask -> filters) then
                   ``sample`` with Gumbel noise keyed by (seed, the row's absolute position).

The prompt is the first pending chunk (prefill), so a prompt followed by a forced prefix (``{"``
of a JSON object) is one forward pass. With ``batch_forced=False`` each forced token gets its own
forward pass, which must give token-identical output (tested).

Invariants: ``row.ids`` = prompt + committed tokens (the model has seen all but ``row.pending``);
a row's absolute position is ``len(row.ids)``; padding never counts as a position, so a row
decodes exactly as it would alone.
"""

from __future__ import annotations

import inspect
import secrets
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
import torch

from grammarsd.decoding.samplers import SamplingParams, sample
from grammarsd.decoding.transforms import process_logits
from grammarsd.errors import GenerationError
from grammarsd.kernels.bitmask import allocate_token_bitmask

if TYPE_CHECKING:
    from grammarsd.tokenizer.info import TokenizerInfo


class TokenMatcher(Protocol):
    """What the loop needs from a grammar state (``GrammarMatcher`` is one; benchmark adapters
    drive peer engines through the same loop with it)."""

    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0) -> Any:
        """Write the allowed tokens of the next position into row ``index`` of ``bitmask``."""

    def accept_token(self, token_id: int) -> bool:
        """Advance by one allowed token."""

    def is_accepting(self) -> bool:
        """The output so far is complete."""


class Constraint(Protocol):
    """A compiled grammar: a factory of fresh matchers (``CompiledGrammar`` is one)."""

    def matcher(self) -> TokenMatcher:
        """A matcher at the empty prefix."""

FinishReason = Literal["stop", "eos", "length", "grammar"]
"""Why a row ended: a stop string, the model chose EOS, ``max_tokens``, or the grammar allowed
nothing but EOS (or nothing at all, after a complete string)."""


@dataclass(frozen=True)
class DecodeConfig:
    """Loop settings that are not about sampling.

    Attributes
    ----------
    max_tokens : most tokens committed per row, forced tokens and EOS included (>= 1).
    stop : byte strings that end a row when they appear in its output (the output is cut
        before the stop string).
    batch_forced : feed runs of forced tokens in one forward pass (off: one pass per token).
    """

    max_tokens: int = 256
    stop: tuple[bytes, ...] = ()
    batch_forced: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ValueError(f"max_tokens must be an int >= 1, not {self.max_tokens!r}")
        if any(not s for s in self.stop):
            raise ValueError("stop strings must be non-empty")


@dataclass
class Row:
    """One sequence's decoding state.

    Attributes
    ----------
    ids : prompt + committed tokens (EOS included when committed).
    prompt_len : how many of ``ids`` are the prompt.
    matcher : the grammar state, or None for unconstrained text.
    pending : committed tokens the model has not seen yet.
    fed : tokens the model has seen (its next real position).
    output : bytes of the committed tokens (EOS and special tokens add none).
    finish : why the row ended, or None while it runs.
    forced : how many committed tokens were forced.
    stop_at : byte length of ``output`` to keep when a stop string ended the row.
    first_token_at : ``perf_counter()`` when the first token was committed.
    """

    ids: list[int]
    prompt_len: int
    matcher: TokenMatcher | None
    pending: list[int] = field(default_factory=list)
    fed: int = 0
    output: bytearray = field(default_factory=bytearray)
    finish: FinishReason | None = None
    forced: int = 0
    stop_at: int | None = None
    first_token_at: float | None = None

    @property
    def generated(self) -> list[int]:
        """The committed token ids (EOS included)."""
        return self.ids[self.prompt_len :]

    @property
    def text_bytes(self) -> bytes:
        """The output bytes, cut before the stop string if one ended the row."""
        return bytes(self.output if self.stop_at is None else self.output[: self.stop_at])


@dataclass
class DecodeStats:
    """Timings shared by the rows of one ``Decoding`` (seconds, ``perf_counter`` clock)."""

    started_at: float = 0.0
    finished_at: float = 0.0
    forward_seconds: float = 0.0
    forward_passes: int = 0
    mask_seconds: float = 0.0


class Decoding:
    """A batch of prompts decoded together; iterate ``steps()`` to run it.

    Parameters
    ----------
    model : a ``transformers`` causal LM (eval mode).
    info : the tokenizer at the model's logit width.
    prompts : token ids per row (non-empty).
    compiled : the grammar every row must follow, or None for free text.
    params : sampling settings.
    config : loop settings.
    pad_id : token fed as padding (never attended to).
    """

    def __init__(
        self,
        model: Any,
        info: TokenizerInfo,
        prompts: Sequence[Sequence[int]],
        compiled: Constraint | None,
        params: SamplingParams,
        config: DecodeConfig,
        *,
        pad_id: int = 0,
    ) -> None:
        if not prompts or any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        self.model = model
        self.info = info
        self.params = params
        self.config = config
        self.pad_id = pad_id
        self.seed = params.seed if params.seed is not None else secrets.randbits(63)
        self.rows = [
            Row(ids=list(p), prompt_len=len(p), matcher=None if compiled is None else compiled.matcher())
            for p in prompts
        ]
        self.stats = DecodeStats()
        self._eos = frozenset(info.eos_ids)
        self._device = next(model.parameters()).device
        self._bitmask = allocate_token_bitmask(len(prompts), info.vocab_size)  # [B, W] int32, CPU
        self._words = self._bitmask.numpy().view(np.uint32)
        self._free_mask = _free_text_mask(info, self._device)
        self._cache: Any = None
        self._attention = torch.zeros((len(prompts), 0), dtype=torch.long, device=self._device)
        forward_params = inspect.signature(model.forward).parameters
        self._keep_last = "logits_to_keep" in forward_params
        # transformers 5.24 renamed ``past_key_values`` to ``cache`` (the old name warns)
        self._cache_arg = "cache" if "cache" in forward_params else "past_key_values"

    # -- the loop ------------------------------------------------------------------

    def steps(self) -> Iterator[list[Row]]:
        """Run to the end, yielding the rows after every step (tokens may have been committed)."""
        self.stats.started_at = time.perf_counter()
        with torch.inference_mode():
            for i, row in enumerate(self.rows):
                row.pending = row.ids[:]  # the prompt: prefill
                self._advance(i, row)
            yield self.rows
            while any(r.finish is None for r in self.rows):
                logits = self._forward()
                masks = self._bitmask.to(logits.device)  # every row's mask in one copy
                for i, row in enumerate(self.rows):
                    if row.finish is None and not row.pending:
                        token = self._sample(row, logits[i], masks[i])
                        self._commit(row, token, forced=False)
                        self._advance(i, row)
                yield self.rows
        self.stats.finished_at = time.perf_counter()

    # -- grammar side ----------------------------------------------------------------

    def _advance(self, index: int, row: Row) -> None:
        """Fill row ``index``'s next mask; commit forced tokens while exactly one is allowed."""
        while row.finish is None:
            if row.matcher is None:
                return
            start = time.perf_counter()
            row.matcher.fill_next_token_bitmask(self._bitmask, index)
            self.stats.mask_seconds += time.perf_counter() - start
            only = _single_token(self._words[index])
            if only == _NONE:
                if row.matcher.is_accepting():  # complete, and no EOS id to end it with
                    row.finish = "grammar"
                    return
                raise GenerationError(
                    "no token can continue the output: the grammar needs bytes that no token "
                    f"of this vocabulary produces (after {bytes(row.output)!r})"
                )
            if only == _MANY:
                return
            self._commit(row, only, forced=True)
            if only in self._eos:  # the grammar ended the output, not the model
                row.finish = "grammar"

    def _commit(self, row: Row, token: int, *, forced: bool) -> None:
        """Append ``token`` to the row (advancing its matcher) and check the end conditions."""
        if row.first_token_at is None:
            row.first_token_at = time.perf_counter()
        if row.matcher is not None and not row.matcher.accept_token(token):
            raise GenerationError(f"internal error: the mask allowed token {token}, the matcher not")
        row.ids.append(token)
        row.pending.append(token)
        row.forced += forced
        if token in self._eos:
            row.finish = "eos"
            return
        before = len(row.output)
        row.output += self.info.token_bytes[token]
        for stop in self.config.stop:
            at = row.output.find(stop, max(0, before - len(stop) + 1))
            if at >= 0 and (row.stop_at is None or at < row.stop_at):
                row.stop_at = at
        if row.stop_at is not None:
            row.finish = "stop"
        elif len(row.ids) - row.prompt_len >= self.config.max_tokens:
            row.finish = "length"

    # -- model side ------------------------------------------------------------------

    def _chunk(self, row: Row) -> list[int]:
        """The pending tokens of ``row`` that the next forward pass feeds.

        All of them, except with ``batch_forced=False``: then the prompt alone, and after it one
        token per pass. Finished rows feed nothing.
        """
        if row.finish is not None:
            return []
        if self.config.batch_forced:
            return row.pending
        if row.fed < row.prompt_len:
            return row.pending[: row.prompt_len - row.fed]
        return row.pending[:1]

    def _forward(self) -> torch.Tensor:
        """Feed each row's next chunk of pending tokens in one pass; logits ``[B, V]``."""
        chunks = [self._chunk(r) for r in self.rows]
        width = max(len(c) for c in chunks)
        ids = torch.full((len(chunks), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros((len(chunks), width), dtype=torch.long)
        pos = torch.zeros((len(chunks), width), dtype=torch.long)
        for i, (row, chunk) in enumerate(zip(self.rows, chunks, strict=True)):
            n = len(chunk)
            if n:
                ids[i, width - n :] = torch.tensor(chunk)
                attn[i, width - n :] = 1
                pos[i, width - n :] = torch.arange(row.fed, row.fed + n)
            row.fed += n
            del row.pending[:n]
        self._attention = torch.cat([self._attention, attn.to(self._device)], dim=1)
        kwargs: dict[str, Any] = {self._cache_arg: self._cache}
        if self._keep_last:
            kwargs["logits_to_keep"] = 1
        start = time.perf_counter()
        out = self.model(
            input_ids=ids.to(self._device),
            attention_mask=self._attention,
            position_ids=pos.to(self._device),
            use_cache=True,
            **kwargs,
        )
        self.stats.forward_seconds += time.perf_counter() - start
        self.stats.forward_passes += 1
        self._cache = getattr(out, self._cache_arg)
        return out.logits[:, -1, :].float()

    def _sample(self, row: Row, logits: torch.Tensor, grammar_mask: torch.Tensor) -> int:
        """Process one row's raw logits ``[V]`` and draw its next token (``grammar_mask``: the
        row's bitmask, on the logits' device, copied before any row of this step advanced)."""
        vocab = self.info.vocab_size
        logits = logits[:vocab].clone()
        mask = grammar_mask if row.matcher is not None else self._free_mask
        seen = None
        if self.params.repetition_penalty is not None:
            seen = torch.tensor(row.ids, dtype=torch.long, device=logits.device)
        process_logits(logits, self.params, bitmask=mask, seen=seen)
        return sample(logits, self.params, self.seed, len(row.ids))


_NONE = -1
_MANY = -2


def _single_token(words: np.ndarray) -> int:
    """The only set bit's index in a uint32 bitmask row, or ``_NONE`` / ``_MANY``."""
    nz = np.flatnonzero(words)
    if nz.shape[0] == 0:
        return _NONE
    if nz.shape[0] > 1:
        return _MANY
    word = int(words[nz[0]])
    if word & (word - 1):
        return _MANY
    return int(nz[0]) * 32 + word.bit_length() - 1


def _free_text_mask(info: TokenizerInfo, device: torch.device) -> torch.Tensor | None:
    """For unconstrained rows: a bitmask on ``device`` that only drops padding ids (None if none)."""
    if len(info.padding_ids) == 0:
        return None
    mask = allocate_token_bitmask(1, info.vocab_size)[0]
    words = mask.numpy().view(np.uint32)
    for t in info.padding_ids:
        words[t >> 5] &= np.uint32(~(1 << (t & 31)) & 0xFFFFFFFF)
    return mask.to(device)


__all__ = [
    "Constraint",
    "DecodeConfig",
    "DecodeStats",
    "Decoding",
    "FinishReason",
    "Row",
    "TokenMatcher",
]
