"""What every matcher of one compiled grammar shares: kernel tables and the lazy mask cache.

``runtime(compiled)`` builds both on first use and keeps them on the ``CompiledGrammar``. The mask
cache holds, per terminal DFA state, the tokens that state accepts or rejects whatever the parser holds
and the uncertain rest (see ``matcher._kernels``). Rows are computed on first visit by one DFA-only
walk of the token trie, so compiling stays cheap and only states that decoding reaches cost anything.
Sets with more accepted tokens than a bitset has words are stored as bitsets, smaller ones as id lists
(XGrammar's adaptive storage).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import numpy as np

from grammarsd.matcher import _kernels as K

if TYPE_CHECKING:
    from grammarsd.compiler.compiled import CompiledGrammar


def _grow(a: np.ndarray, need: int) -> np.ndarray:
    if need <= a.shape[0]:
        return a
    size = max(need, 2 * a.shape[0], 16)
    b = np.zeros((size, *a.shape[1:]), dtype=a.dtype)
    b[: a.shape[0]] = a
    return b


class MaskCache:
    """Growable arrays behind ``_kernels.Cache``; ``ensure(q)`` adds the row of DFA state q."""

    def __init__(self, compiled: CompiledGrammar, tables: K.Tables) -> None:
        info = compiled.tokenizer_info
        self._tables = tables
        self._trie = compiled.trie
        self._indptr = info.token_indptr
        self._data = info.token_data
        self.words = (info.vocab_size + 31) // 32
        self._lock = threading.Lock()
        self._n_rows = self._n_dense = self._n_acc = self._n_unc = 0
        self.arrays = K.Cache(
            index=np.full(tables.dfa_trans.shape[0], -1, dtype=np.int32),
            rows=np.zeros((16, 5), dtype=np.int64),
            dense_bits=np.zeros((0, self.words), dtype=np.uint32),
            acc_tok=np.zeros(1024, dtype=np.int32),
            unc_tok=np.zeros(1024, dtype=np.int32),
            unc_lcp=np.zeros(1024, dtype=np.int32),
        )
        vocab = info.vocab_size
        self._scratch_acc = np.empty(vocab, dtype=np.int32)
        self._scratch_unc = np.empty(vocab, dtype=np.int32)
        self._scratch_lcp = np.empty(vocab, dtype=np.int32)

    @property
    def num_states(self) -> int:
        return self._n_rows

    def ensure(self, q: int) -> None:
        """Compute and store the row of DFA state ``q`` (no-op if present)."""
        with self._lock:
            if self.arrays.index[q] >= 0:
                return
            trie = self._trie
            n_acc, n_unc = K.classify_tokens(
                self._tables.dfa_trans,
                self._tables.dfa_info,
                q,
                trie.max_depth,
                trie.byte,
                trie.depth,
                trie.next,
                trie.tok_ptr,
                trie.tok_ids,
                self._indptr,
                self._data,
                self._scratch_acc,
                self._scratch_unc,
                self._scratch_lcp,
            )
            c = self.arrays
            rows = _grow(c.rows, self._n_rows + 1)
            dense_bits, acc_tok = c.dense_bits, c.acc_tok
            dense = -1
            acc_lo = self._n_acc
            if n_acc > self.words:  # a bitset is smaller than the id list
                dense = self._n_dense
                dense_bits = _grow(dense_bits, dense + 1)
                row = np.zeros(self.words, dtype=np.uint32)
                ids = self._scratch_acc[:n_acc]
                np.bitwise_or.at(row, ids >> 5, np.left_shift(1, ids & 31).astype(np.uint32))
                dense_bits[dense] = row
                self._n_dense += 1
            else:
                acc_tok = _grow(acc_tok, acc_lo + n_acc)
                acc_tok[acc_lo : acc_lo + n_acc] = self._scratch_acc[:n_acc]
                self._n_acc += n_acc
            unc_lo = self._n_unc
            unc_tok = _grow(c.unc_tok, unc_lo + n_unc)
            unc_lcp = _grow(c.unc_lcp, unc_lo + n_unc)
            unc_tok[unc_lo : unc_lo + n_unc] = self._scratch_unc[:n_unc]
            unc_lcp[unc_lo : unc_lo + n_unc] = self._scratch_lcp[:n_unc]
            self._n_unc += n_unc
            acc_hi = acc_lo + (0 if dense >= 0 else n_acc)
            rows[self._n_rows] = (dense, acc_lo, acc_hi, unc_lo, unc_lo + n_unc)
            grown = any(
                a is not b
                for a, b in zip(
                    (rows, dense_bits, acc_tok, unc_tok, unc_lcp),
                    (c.rows, c.dense_bits, c.acc_tok, c.unc_tok, c.unc_lcp),
                    strict=True,
                )
            )
            # a kernel running on the old snapshot must never see an index entry pointing past
            # its arrays: publish into a fresh index whenever an array was reallocated
            index = c.index.copy() if grown else c.index
            index[q] = self._n_rows
            self._n_rows += 1
            self.arrays = K.Cache(index, rows, dense_bits, acc_tok, unc_tok, unc_lcp)


class Runtime:
    """Kernel tables plus the mask cache of one compiled grammar."""

    def __init__(self, compiled: CompiledGrammar) -> None:
        t = compiled.tables
        dfa_info = np.stack(
            [t.dfa_accept.astype(np.int32), t.dfa_has_out.astype(np.int32), t.state_term], axis=1
        )
        self.tables = K.Tables(
            item_next=t.item_next,
            item_lhs=t.item_lhs,
            nt_ptr=t.nt_ptr,
            nt_items=t.nt_items,
            nullable=t.nullable,
            dfa_trans=t.dfa_trans,
            dfa_info=np.ascontiguousarray(dfa_info),
            term_start=t.term_start,
            follow_bytes=t.follow_bytes,
            start_item=t.start_item,
            accept_item=t.accept_item,
        )
        self.cache = MaskCache(compiled, self.tables)


_LOCK = threading.Lock()


def runtime(compiled: CompiledGrammar) -> Runtime:
    """The shared runtime of ``compiled`` (built once, thread-safe)."""
    rt = compiled.runtime_slot.get("runtime")
    if rt is None:
        with _LOCK:
            rt = compiled.runtime_slot.get("runtime")
            if rt is None:
                rt = compiled.runtime_slot["runtime"] = Runtime(compiled)
    return rt  # type: ignore[no-any-return]
