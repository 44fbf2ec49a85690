"""GrammarMatcher: the per-sequence state of a compiled grammar, fed token by token.

A token ``t`` is allowed iff (bytes so far + bytes of t) is a prefix of some string of the language;
an EOS id is allowed iff the bytes so far are a complete string. Each public call validates its
arguments once and makes one numba call (``matcher._kernels``); arrays grow on demand, so rollback is
unlimited and any output length works.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from grammarsd.errors import LimitExceededError, MatcherError
from grammarsd.matcher import _kernels as K
from grammarsd.matcher.runtime import runtime

if TYPE_CHECKING:
    from grammarsd.compiler.compiled import CompiledGrammar

_INITIAL_POSITIONS = 256
_INITIAL_ITEMS = 4096
_INITIAL_HASH = 1024
_MAX_ITEMS = 1 << 28  # 2 GiB of chart: past this an input is pathological, not useful


def _new_state(num_terminals: int) -> K.State:
    # every per-position array has bounds' length: the kernels check capacity on bounds alone
    return K.State(
        bounds=np.zeros((_INITIAL_POSITIONS + 2, 2), dtype=np.int64),
        acc=np.zeros(_INITIAL_POSITIONS + 2, dtype=np.uint8),
        items=np.zeros((_INITIAL_ITEMS, 2), dtype=np.int32),
        scans=np.zeros((_INITIAL_ITEMS, 2), dtype=np.int32),
        htab=np.zeros((_INITIAL_HASH, 3), dtype=np.int64),
        tstamp=np.zeros(max(num_terminals, 1), dtype=np.int64),
        pend=np.zeros(_INITIAL_POSITIONS + 2, dtype=np.uint8),
        pmask=np.zeros((_INITIAL_POSITIONS + 2, 4), dtype=np.uint64),
        meta=np.zeros(3, dtype=np.int64),
    )


def _grown(s: K.State) -> K.State:
    """A copy of ``s`` with every growable array doubled (contents kept)."""

    def grow(a: np.ndarray) -> np.ndarray:
        b = np.zeros((a.shape[0] * 2, *a.shape[1:]), dtype=a.dtype)
        b[: a.shape[0]] = a
        return b

    return K.State(
        bounds=grow(s.bounds),
        acc=grow(s.acc),
        items=grow(s.items),
        scans=grow(s.scans),
        htab=np.zeros((s.htab.shape[0] * 2, 3), dtype=np.int64),  # scratch: contents not needed
        tstamp=s.tstamp.copy(),
        pend=grow(s.pend),
        pmask=grow(s.pmask),
        meta=s.meta.copy(),
    )


class GrammarMatcher:
    """Matches a token sequence against a ``CompiledGrammar``.

    Parameters
    ----------
    compiled:
        The grammar, compiled for one tokenizer.
    """

    def __init__(self, compiled: CompiledGrammar) -> None:
        self.compiled = compiled
        self._runtime = runtime(compiled)
        self._tables = self._runtime.tables
        self._eos = frozenset(compiled.tokenizer_info.eos_ids)
        self._state = _new_state(compiled.tables.num_terminals)
        self._history: list[int] = []  # position before each accepted step
        self._terminated_at: int | None = None  # history length when EOS was accepted
        self._run(K.init_state)

    # -- internals ---------------------------------------------------------------

    def _run(self, kernel: Any, *args: Any) -> int:
        """``kernel(*tables, *state, *args)``, retried after growing the state until it completes."""
        while True:
            r = int(kernel(*self._tables, *self._state, *args))
            if r != K.OVERFLOW:
                return r
            self._grow()

    def _grow(self) -> None:
        if self._state.items.shape[0] >= _MAX_ITEMS:
            raise LimitExceededError(
                f"the parse chart would exceed {_MAX_ITEMS} items",
                hint="the grammar is highly ambiguous for this input; simplify it",
            )
        self._state = _grown(self._state)

    def _ensure_rows(self) -> None:
        """Build the mask-cache rows of every live scan at the current position (after a
        ``MISSING`` fill, whose settled chart names them), so one retry suffices."""
        s, cache = self._state, self._runtime.cache
        pos = int(s.meta[K.POS])
        for q in s.scans[s.bounds[pos, 1] : s.bounds[pos + 1, 1], 0].tolist():
            if cache.arrays.index[q] < 0:
                cache.ensure(q)

    @property
    def _pos(self) -> int:
        return int(self._state.meta[K.POS])

    # -- queries -----------------------------------------------------------------

    def is_accepting(self) -> bool:
        """The bytes so far form a complete string of the language (EOS would be allowed)."""
        if self._terminated_at is not None:
            return False
        self._run(K.settle)
        return bool(self._state.acc[self._pos])

    def is_terminated(self) -> bool:
        """An EOS token has been accepted."""
        return self._terminated_at is not None

    @property
    def num_tokens(self) -> int:
        """How many steps (tokens or strings) have been accepted and can be rolled back."""
        return len(self._history)

    # -- advancing ---------------------------------------------------------------

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; returns False (and leaves the state unchanged) if not allowed."""
        if self.is_terminated():
            return False
        info = self.compiled.tokenizer_info
        if token_id in self._eos:
            if not self.is_accepting():
                return False
            self._history.append(self._pos)
            self._terminated_at = len(self._history)
            return True
        if not 0 <= token_id < info.vocab_size:
            raise MatcherError(
                f"token id {token_id} is outside the vocabulary (0..{info.vocab_size - 1})"
            )
        data = info.token_bytes[token_id]
        if not data:  # special or padding token
            return False
        return self._accept_bytes(data)

    def accept_string(self, text: str | bytes) -> bool:
        """Advance by a whole string (UTF-8 bytes); all or nothing. Counts as one step."""
        if self.is_terminated():
            return False
        data = text.encode() if isinstance(text, str) else bytes(text)
        return self._accept_bytes(data)

    def _accept_bytes(self, data: bytes) -> bool:
        before = self._pos
        arr = np.frombuffer(data, dtype=np.uint8)
        r = self._run(K.advance, arr)
        if r != K.OK:
            return False
        self._history.append(before)
        return True

    def rollback(self, num_tokens: int = 1) -> None:
        """Undo the last ``num_tokens`` accepted steps (unlimited)."""
        if num_tokens < 0 or num_tokens > len(self._history):
            raise MatcherError(
                f"cannot roll back {num_tokens} steps; {len(self._history)} were accepted"
            )
        if num_tokens == 0:
            return
        target = self._history[-num_tokens]
        del self._history[-num_tokens:]
        if self._terminated_at is not None and self._terminated_at > len(self._history):
            self._terminated_at = None
        self._state.meta[K.POS] = target

    def reset(self) -> None:
        """Back to the empty prefix."""
        self.rollback(len(self._history))

    def fork(self) -> GrammarMatcher:
        """An independent copy sharing the compiled grammar (copies only the used chart)."""
        other = GrammarMatcher.__new__(GrammarMatcher)
        other.compiled = self.compiled
        other._runtime = self._runtime
        other._tables = self._tables
        other._eos = self._eos
        other._state = K.State(*(a.copy() for a in self._state))
        other._history = list(self._history)
        other._terminated_at = self._terminated_at
        return other

    # -- masks -------------------------------------------------------------------

    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0) -> bool:
        """Write the allowed-token bitmask into row ``index`` of ``bitmask``.

        ``bitmask`` is an int32 array or CPU tensor of shape ``(batch, ceil(V / 32))`` (or 1-D for one
        row), bit ``t`` of the row set iff token ``t`` is allowed. Returns True when some token is
        masked out (the mask needs applying). The matcher state is unchanged.
        """
        rt = self._runtime
        row = _bitmask_row(bitmask, index, rt.words)
        if self._terminated_at is not None:
            row[:] = 0
            return True
        while True:  # one kernel call, unless a row is missing or the chart is full
            r = K.fill_mask(*self._tables, *self._state, *rt.cache.arrays, *rt.vocab_args, row)
            if r == K.MASKED:
                return True
            if r == K.UNMASKED:
                return False
            if r == K.MISSING:
                self._ensure_rows()
            else:
                self._grow()

    def allowed_token_ids(self) -> np.ndarray:
        """The allowed token ids as a sorted array (convenience; allocates)."""
        vocab = self.compiled.tokenizer_info.vocab_size
        words = np.zeros((vocab + 31) // 32, dtype=np.int32)
        self.fill_next_token_bitmask(words)
        bits = np.unpackbits(words.view(np.uint8), bitorder="little")[:vocab]
        return np.flatnonzero(bits)


def _bitmask_row(bitmask: Any, index: int, words: int) -> np.ndarray:
    """Validate ``bitmask`` and return row ``index`` as a writable uint32 numpy view."""
    arr = bitmask
    if not isinstance(arr, np.ndarray):
        try:
            import torch
        except ImportError as e:  # pragma: no cover - torch is a dependency
            raise MatcherError(f"unsupported bitmask type {type(bitmask).__name__}") from e
        if not isinstance(arr, torch.Tensor):
            raise MatcherError(f"unsupported bitmask type {type(bitmask).__name__}")
        if arr.device.type != "cpu":
            raise MatcherError("fill the bitmask on a CPU tensor, then copy it to the device")
        arr = arr.numpy()
    if arr.dtype != np.int32:
        raise MatcherError(f"bitmask must be int32, got {arr.dtype}")
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] < words:
        raise MatcherError(f"bitmask must have shape (batch, {words}); got {tuple(arr.shape)}")
    if not 0 <= index < arr.shape[0]:
        raise MatcherError(f"bitmask row {index} out of range for batch {arr.shape[0]}")
    row = arr[index]
    if not row.flags.c_contiguous:
        raise MatcherError("bitmask rows must be contiguous")
    if row.shape[0] > words:  # padding columns (a wider logits dimension): never allowed
        row[words:] = 0
        row = row[:words]
    return row.view(np.uint32)


__all__ = ["GrammarMatcher"]
