"""Runs of whitespace outside JSON strings, bounded while matching instead of in the DFAs.

A JSON grammar with ``max_whitespace=N`` has gaps ``[\\t\\n\\r ]{0,N}``; as DFA states each gap
costs N + 1 states in every terminal holding it (most of a typical schema's states at N = 32).
``compile_json_schema`` compiles the gaps unbounded instead (``compiler.tables.build_tables``,
``whitespace=``) and the matcher intersects that language with *no run of more than N whitespace
bytes outside a string*, tracked by a small byte automaton whose state is a function of the bytes
so far (so one state per accepted step suffices, and rollback and fork are free):

    0 .. N   outside a string, after that many whitespace bytes in a row
    N + 1    inside a string
    N + 2    inside a string, after a backslash

The intersection is the bounded grammar's language because the JSON compiler emits one gap between
two tokens, never two side by side, and no other whitespace outside strings. Its masks are the
unbounded grammar's masks AND the tokens the automaton allows from its state: every gap of an
unbounded completion can be shortened, so the automaton never rejects a prefix the grammar keeps
alive for a reason the masks cannot see.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np
from numba import njit

if TYPE_CHECKING:
    from grammarsd.tokenizer.info import TokenizerInfo

_WS = np.zeros(256, np.bool_)
_WS[[0x09, 0x0A, 0x0D, 0x20]] = True
_QUOTE, _BACKSLASH = 0x22, 0x5C


@njit(cache=True, nogil=True)
def _step(state: int, byte: int, bound: int, ws: np.ndarray) -> int:  # pragma: no cover
    """The automaton's next state (-1: a run longer than ``bound``)."""
    if state <= bound:  # outside a string
        if ws[byte]:
            return state + 1 if state < bound else -1
        return bound + 1 if byte == _QUOTE else 0
    if state == bound + 1:
        if byte == _QUOTE:
            return 0
        return bound + 2 if byte == _BACKSLASH else bound + 1
    return bound + 1  # the escaped byte


@njit(cache=True, nogil=True)
def _summaries(indptr: np.ndarray, data: np.ndarray, bound: int,
               ws: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """int32 [5, V]: per token, its leading whitespace bytes, whether it is all whitespace (and
    not empty), and the end state from states 0, ``bound + 1`` and ``bound + 2`` (-1: dead)."""
    n = indptr.shape[0] - 1
    out = np.empty((5, n), np.int32)
    for t in range(n):
        lo, hi = indptr[t], indptr[t + 1]
        lead = 0
        while lo + lead < hi and ws[data[lo + lead]]:
            lead += 1
        out[0, t] = lead
        out[1, t] = 1 if hi > lo and lead == hi - lo else 0
        for row, start in ((2, 0), (3, bound + 1), (4, bound + 2)):
            s = start
            for k in range(lo, hi):
                s = _step(s, data[k], bound, ws)
                if s < 0:
                    break
            out[row, t] = s
    return out


class WhitespaceRuns:
    """The automaton above for one tokenizer and bound: token steps and allowed-token rows.

    ``next(state, token)`` is the state after a token (-1: not allowed); ``allowed(state)`` the
    uint32 bitmask row of the tokens allowed from ``state`` (made on first use and kept).
    State 0 is the start: JSON text begins outside a string.
    """

    def __init__(self, info: TokenizerInfo, bound: int) -> None:
        if bound < 1:
            raise ValueError(f"a whitespace bound must be at least 1, not {bound}")
        self.bound = bound
        self.inside = bound + 1
        s = _summaries(info.token_indptr, info.token_data, bound, _WS)
        self._lead, self._all_ws = s[0], s[1].astype(np.bool_)
        self._length = np.diff(info.token_indptr).astype(np.int32)
        self._from_out, self._from_in, self._from_esc = s[2], s[3], s[4]
        # plain lists: one step per accepted token reads a handful of entries
        self._lists = tuple(a.tolist() for a in (s[0], s[1], self._length, s[2], s[3], s[4]))
        self._words = (info.vocab_size + 31) // 32
        # below this many whitespace bytes in a row no token can overrun: one shared row
        self._free = bound - int(s[0].max(initial=0))
        self._rows: dict[int, tuple[np.ndarray, bool]] = {}
        self._lock = threading.Lock()

    def next(self, state: int, token: int) -> int:
        lead, all_ws, length, from_out, from_in, from_esc = self._lists
        if length[token] == 0:  # special tokens: no bytes
            return state
        if state <= self.bound:
            if all_ws[token]:
                after = state + length[token]
                return after if after <= self.bound else -1
            return from_out[token] if state + lead[token] <= self.bound else -1
        return from_in[token] if state == self.inside else from_esc[token]

    def run(self, state: int, data: bytes) -> int:
        """The state after ``data`` (-1: not allowed)."""
        for byte in data:
            state = _step(state, byte, self.bound, _WS)
            if state < 0:
                break
        return state

    def allowed(self, state: int) -> tuple[np.ndarray, bool]:
        """The row of tokens allowed from ``state`` and whether it allows every token."""
        key = 0 if state <= self._free else state
        row = self._rows.get(key)
        if row is None:
            if key <= self.bound:
                ok = np.where(self._all_ws, key + self._length <= self.bound,
                              (key + self._lead <= self.bound) & (self._from_out >= 0))
            else:
                ok = (self._from_in if key == self.inside else self._from_esc) >= 0
            ok |= self._length == 0
            packed = np.zeros(self._words * 4, np.uint8)
            bits = np.packbits(ok, bitorder="little")
            packed[: bits.shape[0]] = bits
            made = (packed.view("<u4").astype(np.uint32), bool(ok.all()))
            with self._lock:
                row = self._rows.setdefault(key, made)
        return row


_CACHE: OrderedDict[tuple[str, int], WhitespaceRuns] = OrderedDict()
_CACHE_LOCK = threading.Lock()
CACHE_SIZE = 8  # (tokenizer, bound) pairs kept: each holds ~10 MB of per-token tables for 128k ids


def whitespace_runs(info: TokenizerInfo, bound: int) -> WhitespaceRuns:
    """The shared ``WhitespaceRuns`` of ``info`` and ``bound`` (the ``CACHE_SIZE`` most recently
    used pairs are kept; a grammar keeps its own alive through its runtime)."""
    key = (info.fingerprint, bound)
    with _CACHE_LOCK:
        runs = _CACHE.get(key)
        if runs is not None:
            _CACHE.move_to_end(key)
            return runs
    runs = WhitespaceRuns(info, bound)
    with _CACHE_LOCK:
        runs = _CACHE.setdefault(key, runs)
        _CACHE.move_to_end(key)
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return runs


__all__ = ["WhitespaceRuns", "whitespace_runs"]
