"""What every matcher of one compiled grammar shares: kernel tables and the lazy mask cache.

``runtime(compiled)`` builds both on first use and keeps them on the ``CompiledGrammar``. The mask
cache holds, per terminal DFA state, the tokens that state accepts or rejects whatever the parser holds
and the uncertain rest (see ``matcher._kernels``). Rows are made on first visit, so compiling stays
cheap and only states that decoding reaches cost anything: a row depends only on the sub-automaton
reachable from its state, so it is copied from the process-wide ``rowstore`` when any grammar of the
same tokenizer already reached an equivalent state, and otherwise computed by one DFA-only walk of
the token trie (then stored there). Sets with more accepted tokens than a bitset has words are stored
as bitsets, smaller ones as id lists (XGrammar's adaptive storage)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import numpy as np

from grammarsd.matcher import _kernels as K
from grammarsd.matcher.rowstore import Row, RowStore, shared_row_store

if TYPE_CHECKING:
    from grammarsd.compiler.compiled import CompiledGrammar


_SIG_MAX_STATES = 4096  # bigger sub-automata are not shared: a signature costs ~256 reads per state
_SIG_MAX_INTS = 1 << 16  # bound on one signature (4 ints per byte run, 1 per state)


def _grow(a: np.ndarray, need: int) -> np.ndarray:
    if need <= a.shape[0]:
        return a
    size = max(need, 2 * a.shape[0], 16)
    b = np.zeros((size, *a.shape[1:]), dtype=a.dtype)
    b[: a.shape[0]] = a
    return b


class MaskCache:
    """Growable arrays behind ``_kernels.Cache``; ``ensure(q)`` adds the row of DFA state q.

    Rows come from, in order: another state of this grammar with the same sub-automaton signature
    (the index points both at one row), the shared ``RowStore``, or a trie walk (then stored).
    """

    def __init__(
        self, compiled: CompiledGrammar, tables: K.Tables, store: RowStore | None = None
    ) -> None:
        info = compiled.tokenizer_info
        self._tables = tables
        self._trie = compiled.trie
        self._indptr = info.token_indptr
        self._data = info.token_data
        self._fingerprint = info.fingerprint
        self._store = shared_row_store() if store is None else store
        self.words = (info.vocab_size + 31) // 32
        self._lock = threading.Lock()
        self._n_states = self._n_rows = self._n_dense = self._n_acc = self._n_unc = 0
        self.walks = 0  # rows computed by a trie walk (the rest were copied or pointed to)
        self.arrays = K.Cache(
            index=np.full(tables.dfa_trans.shape[0], -1, dtype=np.int32),
            rows=np.zeros((16, 5), dtype=np.int64),
            dense_bits=np.zeros((0, self.words), dtype=np.uint32),
            acc_tok=np.zeros(1024, dtype=np.int32),
            unc_tok=np.zeros(1024, dtype=np.int32),
            unc_lcp=np.zeros(1024, dtype=np.int32),
        )
        self._row_of_signature: dict[bytes, int] = {}
        self._sig_label = np.full(tables.dfa_trans.shape[0], -1, dtype=np.int32)
        self._sig_order = np.empty(_SIG_MAX_STATES, dtype=np.int32)
        self._sig_out = np.empty(_SIG_MAX_INTS, dtype=np.int32)
        vocab = info.vocab_size
        self._scratch_acc = np.empty(vocab, dtype=np.int32)
        self._scratch_unc = np.empty(vocab, dtype=np.int32)
        self._scratch_lcp = np.empty(vocab, dtype=np.int32)

    @property
    def num_states(self) -> int:
        """DFA states that have a row."""
        return self._n_states

    def ensure(self, q: int) -> None:
        """Give DFA state ``q`` its row (no-op if present)."""
        with self._lock:
            if self.arrays.index[q] >= 0:
                return
            t = self._tables
            n = K.sub_dfa_signature(
                t.dfa_trans, t.dfa_info, q, self._sig_order, self._sig_label, self._sig_out
            )
            signature = self._sig_out[:n].tobytes() if n >= 0 else None
            r = None if signature is None else self._row_of_signature.get(signature)
            if r is None:
                row = None if signature is None else self._store.get(self._fingerprint, signature)
                if row is None:
                    row = self._walk(q)
                    if signature is not None:
                        self._store.put(self._fingerprint, signature, row)
                r = self._append(row)
                if signature is not None:
                    self._row_of_signature[signature] = r
            self.arrays.index[q] = r  # after _append: the published index covers row r
            self._n_states += 1

    def _walk(self, q: int) -> Row:
        """The row of ``q`` by one DFA-only walk of the token trie (views of scratch buffers)."""
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
        self.walks += 1
        ids = self._scratch_acc[:n_acc]
        if n_acc > self.words:  # a bitset is smaller than the id list
            bits = np.zeros(self.words, dtype=np.uint32)
            np.bitwise_or.at(bits, ids >> 5, np.left_shift(1, ids & 31).astype(np.uint32))
            return Row(True, bits, self._scratch_unc[:n_unc], self._scratch_lcp[:n_unc])
        return Row(False, ids, self._scratch_unc[:n_unc], self._scratch_lcp[:n_unc])

    def _append(self, row: Row) -> int:
        """Copy ``row`` into the cache arrays and publish them; returns its row number."""
        c = self.arrays
        rows = _grow(c.rows, self._n_rows + 1)
        dense_bits, acc_tok = c.dense_bits, c.acc_tok
        dense = -1
        acc_lo = acc_hi = self._n_acc
        if row.dense:
            dense = self._n_dense
            dense_bits = _grow(dense_bits, dense + 1)
            dense_bits[dense] = row.accepted
            self._n_dense += 1
        else:
            acc_hi = acc_lo + row.accepted.shape[0]
            acc_tok = _grow(acc_tok, acc_hi)
            acc_tok[acc_lo:acc_hi] = row.accepted
            self._n_acc = acc_hi
        unc_lo = self._n_unc
        unc_hi = unc_lo + row.unc_tok.shape[0]
        unc_tok = _grow(c.unc_tok, unc_hi)
        unc_lcp = _grow(c.unc_lcp, unc_hi)
        unc_tok[unc_lo:unc_hi] = row.unc_tok
        unc_lcp[unc_lo:unc_hi] = row.unc_lcp
        self._n_unc = unc_hi
        rows[self._n_rows] = (dense, acc_lo, acc_hi, unc_lo, unc_hi)
        grown = any(
            a is not b
            for a, b in zip(
                (rows, dense_bits, acc_tok, unc_tok, unc_lcp),
                (c.rows, c.dense_bits, c.acc_tok, c.unc_tok, c.unc_lcp),
                strict=True,
            )
        )
        if grown:
            # a kernel running on the old snapshot must never see an index entry pointing past
            # its arrays: publish the new arrays with a fresh index
            self.arrays = K.Cache(c.index.copy(), rows, dense_bits, acc_tok, unc_tok, unc_lcp)
        self._n_rows += 1
        return self._n_rows - 1


class Runtime:
    """Kernel tables plus the mask cache of one compiled grammar.

    ``tables`` and ``vocab_args`` are built once and passed flat to every kernel call (see
    ``_kernels``); ``vocab_args`` = (token_indptr, token_data, longest token in bytes, EOS ids).
    """

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
        info = compiled.tokenizer_info
        self.words = self.cache.words
        self.vocab_args = (
            info.token_indptr,
            info.token_data,
            int(np.diff(info.token_indptr).max(initial=0)),
            np.asarray(info.eos_ids, dtype=np.int64),
        )


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
