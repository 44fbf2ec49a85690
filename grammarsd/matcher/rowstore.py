"""Mask-cache rows shared across grammars: a process-wide, memory-bounded LRU store per tokenizer.

A row (the accepted and uncertain tokens of a scan in DFA state q, see ``matcher._kernels``) depends
only on the sub-automaton reachable from q — its transitions and accept flags —, on the bytes that
may follow q's terminal and on the vocabulary. ``_kernels.sub_dfa_signature`` writes a canonical
encoding of that sub-automaton; this store maps (tokenizer fingerprint, encoding, FOLLOW bytes) to
the row, so a grammar that reaches a state equivalent to one some earlier grammar computed copies
the row instead of walking the token trie. Most terminal DFAs (JSON string bodies, numbers,
whitespace, literals, common keys) recur across grammars with what follows them, and every JSON
Schema compiles its own grammar.

Invariants: rows hold token ids and class numbers only, never DFA state numbers, so a stored row is
valid for every grammar; keys are the full encodings, compared exactly on lookup (no hash collision
to trust); stored arrays are read-only; the total of keys and arrays stays within ``max_bytes``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

DEFAULT_MAX_BYTES = 256 << 20


class Row(NamedTuple):
    """One mask-cache row in storage form.

    ``accepted`` is a bitset (uint32 [W]) when ``dense``, else a list of token ids (int32);
    ``unc_pos`` / ``unc_lcp`` / ``unc_cls`` are the uncertain tokens (the terminal may end inside
    them before a byte that may follow it) as positions in the tokenizer's trie (``tok_ids[p]``
    is the id) in byte order, their common-prefix lengths with the
    previous one and their suffix classes, ``classes`` of them (see ``_kernels.classify_tokens``).
    """

    dense: bool
    accepted: np.ndarray
    unc_pos: np.ndarray
    unc_lcp: np.ndarray
    unc_cls: np.ndarray
    classes: int

    @property
    def nbytes(self) -> int:
        return (
            self.accepted.nbytes + self.unc_pos.nbytes + self.unc_lcp.nbytes + self.unc_cls.nbytes
        )


def _frozen(a: np.ndarray) -> np.ndarray:
    b = np.array(a, copy=True)
    b.setflags(write=False)
    return b


class RowStore:
    """Thread-safe LRU map (tokenizer fingerprint, sub-automaton signature, FOLLOW bytes) -> ``Row``.

    Parameters
    ----------
    max_bytes:
        Bound on the bytes of stored keys and arrays; least recently used rows are evicted first.
        A row bigger than the bound is not stored; 0 disables sharing.
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._rows: OrderedDict[tuple[str, bytes, bytes], Row] = OrderedDict()
        self._lock = threading.Lock()
        self.nbytes = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._rows)

    @staticmethod
    def _cost(key: tuple[str, bytes, bytes], row: Row) -> int:
        return len(key[1]) + len(key[2]) + row.nbytes

    def get(self, fingerprint: str, signature: bytes, follow: bytes) -> Row | None:
        """The stored row, marked most recently used, or None (counted as a miss)."""
        key = (fingerprint, signature, follow)
        with self._lock:
            row = self._rows.get(key)
            if row is None:
                self.misses += 1
                return None
            self._rows.move_to_end(key)
            self.hits += 1
            return row

    def put(self, fingerprint: str, signature: bytes, follow: bytes, row: Row) -> None:
        """Store a copy of ``row`` (read-only arrays), evicting least recently used rows to fit."""
        key = (fingerprint, signature, follow)
        stored = row._replace(
            accepted=_frozen(row.accepted),
            unc_pos=_frozen(row.unc_pos),
            unc_lcp=_frozen(row.unc_lcp),
            unc_cls=_frozen(row.unc_cls),
        )
        cost = self._cost(key, stored)
        with self._lock:
            if cost > self.max_bytes or key in self._rows:
                return
            while self._rows and self.nbytes + cost > self.max_bytes:
                old_key, old = self._rows.popitem(last=False)
                self.nbytes -= self._cost(old_key, old)
            self._rows[key] = stored
            self.nbytes += cost

    def clear(self) -> None:
        """Drop every row and reset the counters."""
        with self._lock:
            self._rows.clear()
            self.nbytes = self.hits = self.misses = 0


_SHARED = RowStore()


def shared_row_store() -> RowStore:
    """The process-wide store every grammar's mask cache uses by default."""
    return _SHARED


__all__ = ["DEFAULT_MAX_BYTES", "Row", "RowStore", "shared_row_store"]
