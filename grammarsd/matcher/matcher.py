"""GrammarMatcher: the per-sequence state of a compiled grammar, fed token by token.

A token ``t`` is allowed iff (bytes so far + bytes of t) is a prefix of some string of the language;
an EOS id is allowed iff the bytes so far are a complete string. Each public call validates its
arguments once and makes one numba call (``matcher._kernels``); arrays grow on demand, so rollback is
unlimited and any output length works.

The calls pass one packed context (``_kernels.new_context``) instead of some thirty arrays: each
matcher owns a copy of its runtime's context and points its State rows at its own arrays, and its
Cache rows at the mask cache's arrays as last seen (the cache publishes new arrays as it grows; the
matcher keeps that snapshot alive and repacks when another is published).
"""

from __future__ import annotations

from operator import index as as_int
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
_INT32 = np.dtype(np.int32)


def _new_state(num_terminals: int) -> K.State:
    # every per-position array has bounds' length: the kernels check capacity on bounds alone
    return K.State(
        bounds=np.zeros((_INITIAL_POSITIONS + 2, 2), dtype=np.int64),
        acc=np.zeros(_INITIAL_POSITIONS + 2, dtype=np.uint8),
        items=np.zeros((_INITIAL_ITEMS, 2), dtype=np.int32),
        scans=np.zeros((_INITIAL_ITEMS, 3), dtype=np.int32),
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
        self._eos = frozenset(compiled.tokenizer_info.eos_ids)
        self._vocab_size = compiled.tokenizer_info.vocab_size
        self._state = _new_state(compiled.tables.num_terminals)
        # the kernels' context: names self._state and the cache arrays self._ctx_cache
        self._ctx = self._runtime.context.copy()
        self._ctx_cache: K.Cache | None = None  # None: the Cache rows are not packed yet
        K.pack_state(self._ctx, self._state)
        self._history: list[int] = []  # position before each accepted step
        # bounded whitespace runs (``matcher.whitespace``): the state after each accepted step
        self._ws = self._runtime.whitespace
        self._ws_after: list[int] = []
        self._terminated_at: int | None = None  # history length when EOS was accepted
        self._tensor_view: tuple[Any, tuple[Any, ...], np.ndarray] | None = None  # _bitmask_of
        self._run(K.init_state_ctx)

    # -- internals ---------------------------------------------------------------

    def _run(self, kernel: Any, *args: Any) -> int:
        """``kernel(ctx, *args)``, retried after growing the state until it completes."""
        while True:
            r: int = kernel(self._ctx, *args)
            if r != K.OVERFLOW:
                return r
            self._grow()

    def _context(self) -> np.ndarray:
        """The context, its Cache rows first repacked if the mask cache published new arrays."""
        arrays = self._runtime.cache.arrays
        if arrays is not self._ctx_cache:
            K.pack_cache(self._ctx, arrays)
            self._ctx_cache = arrays  # keeps the arrays the context names alive
        return self._ctx

    def _grow(self) -> None:
        if self._state.items.shape[0] >= _MAX_ITEMS:
            raise LimitExceededError(
                f"the parse chart would exceed {_MAX_ITEMS} items",
                hint="the grammar is highly ambiguous for this input; simplify it",
            )
        self._state = _grown(self._state)
        K.pack_state(self._ctx, self._state)

    def _ensure_rows(self) -> None:
        """Build the mask-cache rows of every live scan at the current position (after a
        ``MISSING`` fill, whose settled chart names them), so one retry suffices."""
        s, cache = self._state, self._runtime.cache
        pos = int(s.meta[K.POS])
        for q, _, count in s.scans[s.bounds[pos, 1] : s.bounds[pos + 1, 1]].tolist():
            slot = cache.slot(q, count)
            if cache.arrays.index[slot] < 0:
                cache.ensure(slot)

    @property
    def _pos(self) -> int:
        return int(self._state.meta[K.POS])

    @property
    def _ws_state(self) -> int:
        return self._ws_after[-1] if self._ws_after else 0

    # -- queries -----------------------------------------------------------------

    def is_accepting(self) -> bool:
        """The bytes so far form a complete string of the language (EOS would be allowed)."""
        if self._terminated_at is not None:
            return False
        self._run(K.settle_ctx)
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
        if self._terminated_at is not None:
            return False
        if token_id in self._eos:
            if not self.is_accepting():
                return False
            self._history.append(self._pos)
            self._ws_after.append(self._ws_state)
            self._terminated_at = len(self._history)
            return True
        if not 0 <= token_id < self._vocab_size:
            raise MatcherError(
                f"token id {token_id} is outside the vocabulary (0..{self._vocab_size - 1})"
            )
        ws = 0
        if self._ws is not None:
            ws = self._ws.next(self._ws_state, token_id)
            if ws < 0:
                return False
        before = self._pos
        # a special or padding token (no bytes) fails
        if self._run(K.advance_token_ctx, as_int(token_id)) != K.OK:
            return False
        self._history.append(before)
        self._ws_after.append(ws)
        return True

    def accept_string(self, text: str | bytes) -> bool:
        """Advance by a whole string (UTF-8 bytes); all or nothing. Counts as one step."""
        if self.is_terminated():
            return False
        data = text.encode() if isinstance(text, str) else bytes(text)
        return self._accept_bytes(data)

    def _accept_bytes(self, data: bytes) -> bool:
        ws = 0
        if self._ws is not None:
            ws = self._ws.run(self._ws_state, data)
            if ws < 0:
                return False
        before = self._pos
        arr = np.frombuffer(data, dtype=np.uint8)
        r = self._run(K.advance_ctx, arr)
        if r != K.OK:
            return False
        self._history.append(before)
        self._ws_after.append(ws)
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
        del self._ws_after[-num_tokens:]
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
        other._eos = self._eos
        other._vocab_size = self._vocab_size
        other._state = K.State(*(a.copy() for a in self._state))
        other._ctx = self._ctx.copy()
        other._ctx_cache = self._ctx_cache
        other._tensor_view = None
        K.pack_state(other._ctx, other._state)
        other._history = list(self._history)
        other._ws = self._ws
        other._ws_after = list(self._ws_after)
        other._terminated_at = self._terminated_at
        return other

    # -- masks -------------------------------------------------------------------

    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0) -> bool:
        """Write the allowed-token bitmask into row ``index`` of ``bitmask``.

        ``bitmask`` is an int32 array or CPU tensor of shape ``(batch, ceil(V / 32))`` (or 1-D for one
        row), bit ``t`` of the row set iff token ``t`` is allowed. Returns True when some token is
        masked out (the mask needs applying). The matcher state is unchanged.
        """
        if self._terminated_at is not None:
            _bitmask_row(bitmask, index, self._runtime.words)[:] = 0
            return True
        arr = self._bitmask_of(bitmask)
        if type(index) is not int:
            index = as_int(index)
        every = True  # the whitespace filter, if any, allows every token
        if self._ws is not None:
            allowed, every = self._ws.allowed(self._ws_state)
        missing = -1  # the index slot whose row the last MISSING fill lacked
        while True:  # one kernel call, unless a row is missing or the chart is full
            if self._ws is None:
                r = K.fill_mask_ctx(self._context(), arr, index)
            else:
                r = K.fill_mask_within_ctx(self._context(), arr, index, allowed)
            if r == K.MASKED:
                return True
            if r == K.UNMASKED:
                return not every
            if r == K.MISSING:
                slot = int(self._state.meta[K.MISS])
                if slot == missing:  # built the last time round: the context missed the new arrays
                    raise AssertionError(f"the mask cache row of index slot {slot} is not seen")
                missing = slot
                self._ensure_rows()
            elif r == K.OVERFLOW:
                self._grow()
            else:  # BAD_BITMASK: let the validation name the problem
                _bitmask_row(arr, index, self._runtime.words)
                raise AssertionError(f"fill_mask_ctx rejected a valid bitmask ({r})")

    def _bitmask_of(self, bitmask: Any) -> np.ndarray:
        """``_bitmask_array(bitmask)``, cheaply in the common cases: a writable 2-D int32 numpy
        array is used as is, and the numpy view of a tensor is reused while the same tensor comes
        back with the same data pointer, shape, strides, dtype and device (``_tensor_key``)."""
        if (
            type(bitmask) is np.ndarray
            and bitmask.dtype is _INT32
            and bitmask.ndim == 2
            and bitmask.flags.writeable
        ):
            return bitmask
        seen = self._tensor_view
        if seen is not None and seen[0] is bitmask and seen[1] == _tensor_key(bitmask):
            return seen[2]
        arr = _bitmask_array(bitmask)
        if not isinstance(bitmask, np.ndarray):  # a tensor (checked): remember its view
            self._tensor_view = (bitmask, _tensor_key(bitmask), arr)
        return arr

    def allowed_token_ids(self) -> np.ndarray:
        """The allowed token ids as a sorted array (convenience; allocates)."""
        vocab = self.compiled.tokenizer_info.vocab_size
        words = np.zeros((vocab + 31) // 32, dtype=np.int32)
        self.fill_next_token_bitmask(words)
        bits = np.unpackbits(words.view(np.uint8), bitorder="little")[:vocab]
        return np.flatnonzero(bits)


def _bitmask_array(bitmask: Any) -> np.ndarray:
    """``bitmask`` (int32 numpy array or CPU tensor, 1-D or 2-D) as a 2-D writable numpy view."""
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
    if not arr.flags.writeable:
        raise MatcherError("bitmask is read-only")
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise MatcherError(f"bitmask must have 1 or 2 dimensions; got shape {tuple(arr.shape)}")
    return arr


def _tensor_key(t: Any) -> tuple[Any, ...]:
    """What a torch tensor may change in place (``set_``, ``resize_``, ``.data =``) that would
    make an earlier numpy view of it stale or no longer allowed."""
    return (t.data_ptr(), t.shape, t.stride(), t.dtype, t.is_cpu, t.requires_grad)


def _bitmask_row(bitmask: Any, index: int, words: int) -> np.ndarray:
    """Validate ``bitmask`` and return row ``index`` as a writable uint32 numpy view."""
    arr = _bitmask_array(bitmask)
    if arr.shape[1] < words:
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
