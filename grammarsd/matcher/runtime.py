"""What every matcher of one compiled grammar shares: kernel tables and the lazy mask cache.

``runtime(compiled)`` builds both on first use and keeps them on the ``CompiledGrammar``. The mask
cache holds, per terminal DFA state, the tokens that state accepts or rejects whatever the parser holds
and the uncertain rest (see ``matcher._kernels``). Rows are made on first visit, so compiling stays
cheap and only states that decoding reaches cost anything. A row comes from one DFA-only walk of the
token trie; most states (inside a literal or a key) reach only a few hundred trie nodes, so a walk
bounded by ``CHEAP_WALK_NODES`` is tried first and its row is used as is. Past that bound the state
is costly to walk (a string body reaches most of the vocabulary), and since a row depends only on
the sub-automaton reachable from its state and the bytes that may follow its terminal, it is copied
from the process-wide ``rowstore`` when any grammar of the same tokenizer already reached an
equivalent state, and otherwise walked in full (then stored there). Either walk takes a trie subtree
whole where the state provably stays alive on everything below it (``SKIP_SUBTREES``): a JSON string
body then visits ~1/30 of the trie's nodes. A full walk from a state that loops on its step bytes,
or steps into such a loop (a string body), follows the loop's ``LoopPlan`` instead: the nodes where
the DFA stays in the loop are the same in every grammar, so they are read once per tokenizer and a
walk reads only where paths leave the loop (``_kernels.classify_loop_tokens``). A counting state
(a ``maxLength`` string with a few characters left, where tall subtrees cannot be taken whole)
follows the plan of its step set too: it keeps the spine's tokens that start no more characters
than it has room for, and walks below the exits its room reaches
(``_kernels.classify_chain_tokens``). Sets with more
accepted tokens than a bitset has words are stored as bitsets, smaller ones as id lists
(XGrammar's adaptive storage)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from grammarsd.errors import GrammarError
from grammarsd.matcher import _kernels as K
from grammarsd.matcher.rowstore import Row, RowStore, shared_row_store
from grammarsd.matcher.whitespace import whitespace_runs
from grammarsd.tokenizer.trie import UTF8_DFA

if TYPE_CHECKING:
    from grammarsd.compiler.compiled import CompiledGrammar
    from grammarsd.compiler.dfa_cache import PackedDfa
    from grammarsd.compiler.tables import EarleyTables
    from grammarsd.tokenizer.trie import TokenTrie


CHEAP_WALK_NODES = 2048  # trie nodes a walk may visit before the row is looked up by signature
# States of bigger terminals are not named: a signature costs ~256 reads per state, and on MaskBench
# (390 schemas) those of 1,024-4,096-state terminals hit 10 % of the time at ~140 us each, against
# ~235 us for the full walk they save (512-1,024 states: 23 %, 61 us; 256-512: 42 %, 31 us).
_SIG_MAX_STATES = 1024
_SIG_MAX_INTS = 1 << 16  # bound on one signature (4 ints per byte run, 1 per state)
SKIP_SUBTREES = True  # walks take whole trie subtrees (``_kernels.chain_sets``); read per MaskCache


class _Scratch(NamedTuple):
    """``classify_tokens``' outputs and run buffer for one vocabulary size; a row's arrays are
    views of them until it is copied (``MaskCache._append``, ``RowStore.put``)."""

    acc: np.ndarray  # int32 [W]: accepted ids, when they fit
    pos: np.ndarray  # int32 [V]: uncertain tokens' trie positions ...
    lcp: np.ndarray  # ... their common prefixes ...
    cls: np.ndarray  # ... and suffix classes
    flips: np.ndarray  # int32 [num_nodes + 2]: accepted runs in trie order


_THREAD = threading.local()


def _scratch(words: int, vocab: int, nodes: int) -> _Scratch:
    """This thread's row-building scratch for a vocabulary (kept across grammars: 2-3 MB for
    Llama-3, written afresh by every walk)."""
    key = (words, vocab, nodes)
    kept = getattr(_THREAD, "scratch", None)
    if kept is None or kept[0] != key:
        sizes = (words, vocab, vocab, vocab, nodes + 2)
        buffers = _Scratch(*(np.empty(n, dtype=np.int32) for n in sizes))
        kept = _THREAD.scratch = (key, buffers)
    return kept[1]


def _signature_scratch() -> tuple[np.ndarray, np.ndarray]:
    """This thread's buffers for ``_kernels.sub_dfa_signature`` (its state order and output),
    read back before the next call: one pair per thread, not per grammar."""
    kept = getattr(_THREAD, "signature", None)
    if kept is None:
        kept = _THREAD.signature = (np.empty(_SIG_MAX_STATES, dtype=np.int32),
                                    np.empty(_SIG_MAX_INTS, dtype=np.int32))
    return kept


def _grow(a: np.ndarray, need: int) -> np.ndarray:
    if need <= a.shape[0]:
        return a
    size = max(need, 2 * a.shape[0], 16)
    b = np.zeros((size, *a.shape[1:]), dtype=a.dtype)
    b[: a.shape[0]] = a
    return b


class LoopPlan(NamedTuple):
    """``_kernels.loop_plan`` of one step set, radii and UTF-8 flag over one trie (read-only)."""

    exits: np.ndarray  # int32 [E, 3]: the spine's exits in trie order, where their characters
    # began and the steps before that
    bits: np.ndarray  # uint32 [W]: the tokens the spine accepts ...
    accepted: int  # ... and how many
    whole: int  # subtrees the spine takes whole
    spine_ids: np.ndarray  # int32 [accepted]: the accepted ids by steps started ...
    spine_ptr: np.ndarray  # int64 [max_depth + 2]: ... (``_kernels.spine_by_steps``)


class LoopPlans:
    """Thread-safe LRU of ``LoopPlan`` by (tokenizer fingerprint, step set, radii, UTF-8 flag):
    every JSON string body of every grammar of a tokenizer has the same one. A plan is ~16 KB of
    bits, 4 bytes per accepted id (~0.5 MB for a string body on Llama-3) and 12 bytes per exit
    (~1.5k); ``max_plans`` bounds them."""

    def __init__(self, max_plans: int = 64) -> None:
        self.max_plans = max_plans
        self._plans: OrderedDict[tuple[str, bytes, int, int, bool], LoopPlan] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, fingerprint: str, trie: TokenTrie, step_set: np.ndarray, rad: int,
            rad_utf8: int, utf8: bool, words: int) -> LoopPlan:
        """The plan of a state looping on ``step_set`` (uint64 [4]) with these radii (made on
        first use)."""
        key = (fingerprint, step_set.tobytes(), rad, rad_utf8, utf8)
        with self._lock:
            plan = self._plans.get(key)
            if plan is not None:
                self._plans.move_to_end(key)
                return plan
        bits = np.empty(words, dtype=np.uint32)
        exits = np.empty((trie.num_nodes, 3), dtype=np.int32)
        n_exits, accepted, whole = K.loop_plan(
            step_set.reshape(1, 4), np.array([rad], dtype=np.uint16),
            np.array([rad_utf8], dtype=np.uint16), 0, utf8, UTF8_DFA, trie.max_depth, trie.byte,
            trie.depth, trie.next, trie.tok_ptr, trie.tok_ids, trie.below, trie.below_utf8,
            trie.height, bits, exits,
        )  # fmt: skip
        spine_ids = np.empty(accepted, dtype=np.int32)
        spine_ptr = np.empty(trie.max_depth + 2, dtype=np.int64)
        K.spine_by_steps(bits, utf8, trie.tok_ids, trie.seq_ptr, trie.seq_data, spine_ids,
                         spine_ptr)  # fmt: skip
        plan = LoopPlan(exits[:n_exits].copy(), bits, accepted, whole, spine_ids, spine_ptr)
        for a in (plan.exits, plan.bits, spine_ids, spine_ptr):
            a.setflags(write=False)
        with self._lock:
            plan = self._plans.setdefault(key, plan)
            while len(self._plans) > self.max_plans:
                self._plans.popitem(last=False)
        return plan


_LOOP_PLANS = LoopPlans()


def _successor(dfa_trans: np.ndarray, byte_col: np.ndarray, steps: np.ndarray, s: int) -> int:
    """``_kernels.chain_sets``' successor of ``s``: where its step bytes lead (-1: none)."""
    row = steps[s]
    if not row.any():
        return -1
    word = int(np.flatnonzero(row)[0])
    lowest = int(row[word]) & -int(row[word])
    return int(dfa_trans[s, byte_col[64 * word + lowest.bit_length() - 1]])


def loop_state(dfa_trans: np.ndarray, byte_col: np.ndarray, dfa_info: np.ndarray,
               steps: np.ndarray, q: int) -> int:
    """The state whose ``LoopPlan`` ``q``'s walk can follow (``_kernels.classify_loop_tokens``):
    ``q``'s successor (``q`` itself, or the loop a string's first character leads to), when it
    is its own successor and does not accept; else -1."""
    loop = _successor(dfa_trans, byte_col, steps, q)
    if loop < 0 or _successor(dfa_trans, byte_col, steps, loop) != loop or dfa_info[loop, 0]:
        return -1
    return loop


class TerminalChains:
    """``_kernels.chain_sets`` of terminal DFAs of ``min_states`` states or more, kept across
    grammars (thread-safe LRU, bounded in bytes). A state's successor chain never leaves its
    terminal, so a terminal's arrays are the same wherever it is placed: a ``format:
    date-time`` string (~18k states, ~5 ms) is read once per process, not once per grammar.
    Reading costs ~0.25 us a state and a copy a few us a terminal, so terminals below 64
    states are read each time. Keyed by the terminal's ``PackedDfa``, which the DFA cache
    shares among the grammars that hold it (and kept alive here, so its ``id`` names nothing
    else; counted in the bound)."""

    def __init__(self, min_states: int = 64, max_bytes: int = 32 << 20) -> None:
        self.min_states = min_states
        self.max_bytes = max_bytes
        self._items: OrderedDict[int, tuple[PackedDfa, tuple[np.ndarray, ...]]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def fill(self, t: EarleyTables, term: int, steps: np.ndarray, rad: np.ndarray,
             rad_utf8: np.ndarray) -> None:
        """``chain_sets`` of terminal ``term``'s states of ``t`` into the (zeroed) arrays:
        copied in where kept, else computed (and kept if the terminal is big)."""
        packed = t.term_dfas[term]
        lo = int(t.term_start[term])
        hi = lo + packed.num_states
        big = packed.num_states >= self.min_states
        if big:
            with self._lock:
                hit = self._items.get(id(packed))
                if hit is not None:
                    self._items.move_to_end(id(packed))
            if hit is not None:
                for out, part in zip((steps, rad, rad_utf8), hit[1], strict=True):
                    out[lo:hi] = part
                return
        K.chain_sets_between(t.dfa_trans, t.byte_col, UTF8_DFA, steps, rad, rad_utf8, lo, hi)
        if big:
            self._keep(packed, (steps[lo:hi].copy(), rad[lo:hi].copy(), rad_utf8[lo:hi].copy()))

    def _keep(self, packed: PackedDfa, arrays: tuple[np.ndarray, ...]) -> None:
        with self._lock:
            if id(packed) in self._items:
                return
            self._items[id(packed)] = (packed, arrays)
            self._bytes += _kept_bytes(packed, arrays)
            while self._bytes > self.max_bytes and len(self._items) > 1:
                _, (old, kept) = self._items.popitem(last=False)
                self._bytes -= _kept_bytes(old, kept)


def _kept_bytes(packed: PackedDfa, arrays: tuple[np.ndarray, ...]) -> int:
    """What a ``TerminalChains`` entry holds: its arrays, and the DFA it keeps alive."""
    return packed.nbytes + sum(a.nbytes for a in arrays)


_TERMINAL_CHAINS = TerminalChains()


class MaskCache:
    """Growable arrays behind ``_kernels.Cache``; ``ensure(q)`` adds the row of DFA state q.

    Rows come from, in order: a trie walk bounded by ``CHEAP_WALK_NODES`` (skipped for tiled
    states, which are named for free), another state of this grammar with the same sub-automaton
    signature and FOLLOW bytes (the index points both at one row), the shared ``RowStore``, or a
    full trie walk (then stored). A row depends on the state's sub-automaton and on the bytes that
    may follow its terminal (``_kernels.classify_tokens``).
    """

    def __init__(
        self,
        compiled: CompiledGrammar,
        tables: K.Tables,
        caps: CapSlots,
        store: RowStore | None = None,
    ) -> None:
        info = compiled.tokenizer_info
        self._tables = tables
        self._trie = compiled.trie
        self._vocab_size = info.vocab_size
        self._fingerprint = info.fingerprint
        self._store = shared_row_store() if store is None else store
        self.words = (info.vocab_size + 31) // 32
        self._lock = threading.Lock()
        self._n_states = self._n_rows = self._n_dense = self._n_acc = self._n_unc = 0
        self.walks = 0  # rows computed by a full trie walk (the rest were cheap, copied or shared)
        self.skipped_subtrees = 0  # trie subtrees taken whole by this cache's walks
        n_states = tables.dfa_trans.shape[0]
        # per-state step sets and radii (``_kernels.chain_sets``); radii all zero: no subtree is
        # taken whole
        self._steps = np.zeros((n_states, 4), dtype=np.uint64)
        self._rad = np.zeros(n_states, dtype=np.uint16)
        self._rad_utf8 = np.zeros(n_states, dtype=np.uint16)
        # a terminal's step sets and radii are filled in when a row of one of its states is
        # first asked for: most terminals never get one
        self._chained = np.zeros(len(compiled.tables.term_dfas), dtype=np.bool_)
        self._earley = compiled.tables
        self.arrays = K.Cache(
            index=np.full(tables.dfa_trans.shape[0] + caps.size, -1, dtype=np.int32),
            rows=np.zeros((16, 6), dtype=np.int64),
            dense_bits=np.zeros((0, self.words), dtype=np.uint32),
            acc_tok=np.zeros(1024, dtype=np.int32),
            unc_pos=np.zeros(1024, dtype=np.int32),
            unc_lcp=np.zeros(1024, dtype=np.int32),
            unc_cls=np.zeros(1024, dtype=np.int32),
        )
        self._row_of_signature: dict[bytes, int] = {}
        # states whose terminal is small enough to be named by a signature (``_signature``)
        self._sig_ok = K.small_terminal(compiled.tables.state_term, _SIG_MAX_STATES)
        self._tile = compiled.tables.state_tile
        self._caps = caps
        self._sig_label = np.full(tables.dfa_trans.shape[0], -1, dtype=np.int32)
        owned = (self._steps, self._rad, self._rad_utf8, self._sig_ok, self._sig_label)
        self._owned_nbytes = sum(a.nbytes for a in owned)
        self._arrays_nbytes = sum(a.nbytes for a in self.arrays)

    @property
    def nbytes(self) -> int:
        """Bytes the cache holds: its rows (``arrays``, counted as they are published), per-state
        step sets, radii and signature labels (the row builders' vocabulary-sized scratch and
        the signature buffers are per thread: ``_scratch``, ``_signature_scratch``). A sum kept
        up to date, not a walk: ``CompileCache`` asks every entry on every insertion."""
        return self._owned_nbytes + self._arrays_nbytes

    @property
    def num_states(self) -> int:
        """DFA states that have a row."""
        return self._n_states

    def slot(self, q: int, count: int) -> int:
        """The index slot of a scan in state ``q`` with ``count`` characters started (the
        kernels' ``_row_slot``)."""
        info = self._tables.dfa_info[q]
        return q if count <= info[5] else int(info[6]) - count

    def ensure(self, slot: int) -> None:
        """Give index slot ``slot`` its row (no-op if present): a DFA state, or past them a
        capped state's row for the characters it has left."""
        with self._lock:
            if self.arrays.index[slot] >= 0:
                return
            n_states = self._tables.dfa_trans.shape[0]
            q = slot if slot < n_states else int(self._caps.state[self._capped_block(slot)])
            term = int(self._tables.dfa_info[q, 2])
            if SKIP_SUBTREES and not self._chained[term]:
                _TERMINAL_CHAINS.fill(self._earley, term, self._steps, self._rad, self._rad_utf8)
                self._chained[term] = True
            r = self._row_of(slot) if slot < n_states else self._capped_row_of(slot)
            self.arrays.index[slot] = r  # after _append: the published index covers row r
            self._n_states += 1

    def _capped_row_of(self, slot: int) -> int:
        """The row of a capped terminal's state with few characters left: one walk that counts
        them (rare, near the end of a long string, so neither named nor stored)."""
        caps = self._caps
        block = self._capped_block(slot)
        q = int(caps.state[block])
        base = int(caps.base[block])
        info = self._tables.dfa_info[q]
        cap = int(info[6]) - base  # slot_end = base + cap
        room = cap - int(caps.most_needed[block])
        row = self._walk(q, self._tables.follow_bytes[info[2]], -1, cap - (slot - base), room)
        assert row is not None  # no budget: the walk always completes
        self.walks += 1
        return self._append(row)

    def _capped_block(self, slot: int) -> int:
        """The capped state's block of slots that ``slot`` (past the DFA states) is in."""
        return int(np.searchsorted(self._caps.base, slot, side="right")) - 1

    def _row_of(self, q: int) -> int:
        """The number of ``q``'s row, appended unless an equivalent state of this grammar has one.

        Tiled states are named for free, so the store is asked first; so are states that stay
        alive on many bytes (``_roomy``), whose walks pass the cheap bound. Other states first
        try a cheap walk, since most are answered by one before a signature is worth reading."""
        t = self._tables
        follow = t.follow_bytes[t.dfa_info[q, 2]]
        if self._tile[q, 0] < 0 and not self._roomy(q):
            row = self._walk(q, follow, CHEAP_WALK_NODES)
            if row is not None:
                return self._append(row)
        signature = self._signature(q)
        if signature is None:
            self.walks += 1
            return self._append(self._full_walk(q, follow))
        # rows also depend on the FOLLOW bytes of the state's terminal
        follow_key = follow.tobytes()
        r = self._row_of_signature.get(signature + follow_key)
        if r is not None:
            return r
        store, fp = self._store, self._fingerprint
        row = store.get(fp, signature, follow_key)
        if row is None:
            row = self._full_walk(q, follow)
            self.walks += 1
            store.put(fp, signature, follow_key, row)
        r = self._row_of_signature[signature + follow_key] = self._append(row)
        return r

    def _roomy(self, q: int) -> bool:
        """``q`` steps to its successor on 32 bytes or more and stays alive over 4 or more of them
        (``_kernels.chain_sets``): its walk reaches a large part of the trie (on MaskBench no such
        state had a row within ``CHEAP_WALK_NODES``)."""
        return bool(self._rad[q] >= 4) and sum(int(w).bit_count() for w in self._steps[q]) >= 32

    def _signature(self, q: int) -> bytes | None:
        """A key naming the sub-automaton reachable from ``q`` as far as tokens can tell
        (equal keys: equal rows), or None when it is too big to name. A state of a tiled
        counted repeat is named by its tile (unit automaton, place in it, copies left and
        needed) without reading anything; since no token is longer than the trie is deep, counts
        past that depth are cut to it, so the counter states of long strings share rows. Other
        states are named by ``_kernels.sub_dfa_signature``, unless their terminal has more
        states than a signature may cover (it would read thousands of them before giving up)."""
        tile = self._tile[q]
        if tile[0] >= 0:  # a token reads at most max_depth copies: larger counts look alike
            cap = self._trie.max_depth + 1
            return b"tile" + np.minimum(tile, (tile[0], tile[1], cap, cap)).tobytes()
        if not self._sig_ok[q]:
            return None
        t = self._tables
        order, out = _signature_scratch()
        n = K.sub_dfa_signature(t.dfa_trans, t.byte_col, t.dfa_info, q, order, self._sig_label,
                                out)
        return out[:n].tobytes() if n >= 0 else None

    def _full_walk(self, q: int, follow: np.ndarray) -> Row:
        row = self._walk(q, follow, -1)
        assert row is not None  # no budget: the walk always completes
        return row

    def _walk(
        self, q: int, follow: np.ndarray, budget: int, count: int = -K.NO_CAP,
        room: int = K.NO_CAP,
    ) -> Row | None:
        """The row of ``q`` (its terminal followed by the bytes of ``follow``, uint64 [4]) by one
        DFA-only walk of the token trie (views of scratch buffers), or None when the walk would
        visit more than ``budget`` trie nodes (-1: no bound). ``count`` and ``room``: see
        ``_kernels.classify_tokens`` (a capped state near its cap)."""
        trie = self._trie
        scratch = _scratch(self.words, self._vocab_size, trie.num_nodes)
        bits = np.empty(self.words, dtype=np.uint32)
        t = self._tables
        if budget < 0 and count == -K.NO_CAP:
            loop = loop_state(t.dfa_trans, t.byte_col, t.dfa_info, self._steps, q)
            if loop >= 0:
                return self._loop_walk(q, loop, follow, scratch, bits)
            row = self._chain_walk(q, follow, scratch, bits)
            if row is not None:
                return row
        n_acc, n_unc, n_cls, skipped = K.classify_tokens(
            t.dfa_trans,
            t.byte_col,
            t.dfa_info,
            self._steps,
            self._rad,
            self._rad_utf8,
            q,
            follow,
            count,
            room,
            budget if budget >= 0 else trie.num_nodes,
            trie.max_depth,
            trie.byte,
            trie.depth,
            trie.next,
            trie.tok_ptr,
            trie.tok_ids,
            trie.tok_lcp,
            trie.below,
            trie.below_utf8,
            trie.height,
            trie.tok_bits,
            trie.seq_ptr,
            trie.seq_data,
            scratch.flips,
            scratch.acc,
            bits,
            scratch.pos,
            scratch.lcp,
            scratch.cls,
        )
        if n_acc < 0:
            return None
        self.skipped_subtrees += skipped
        unc = (scratch.pos[:n_unc], scratch.lcp[:n_unc], scratch.cls[:n_unc])
        if n_acc > self.words:  # a bitset is smaller than the id list
            return Row(True, bits, *unc, n_cls)
        return Row(False, scratch.acc[:n_acc], *unc, n_cls)

    def _loop_walk(self, q: int, loop: int, follow: np.ndarray, scratch: _Scratch,
                   bits: np.ndarray) -> Row:
        """``_walk``'s row of ``q`` from the shared ``LoopPlan`` of its ``loop_state``, when its
        spine accepts more tokens than a bitset has words (else the plain walk, which also
        writes the id list)."""
        trie, t = self._trie, self._tables
        utf8 = bool(K.loops_through_utf8(t.dfa_trans, t.byte_col, t.dfa_info, UTF8_DFA, loop))
        plan = _LOOP_PLANS.get(self._fingerprint, trie, self._steps[loop], int(self._rad[loop]),
                               int(self._rad_utf8[loop]), utf8, self.words)  # fmt: skip
        if plan.accepted <= self.words:
            row = self._walk(q, follow, trie.num_nodes)
            assert row is not None
            return row
        n_acc, n_unc, n_cls, skipped = K.classify_loop_tokens(
            plan.exits, plan.bits, plan.accepted, plan.whole, t.dfa_trans, t.byte_col, t.dfa_info,
            self._steps, self._rad, self._rad_utf8, q, loop, follow,
            trie.max_depth, trie.byte, trie.depth, trie.next, trie.tok_ptr, trie.tok_ids,
            trie.tok_lcp, trie.below, trie.below_utf8, trie.height, trie.seq_ptr, trie.seq_data,
            scratch.flips, bits, scratch.pos, scratch.lcp, scratch.cls,
        )  # fmt: skip
        self.skipped_subtrees += skipped
        return Row(True, bits, scratch.pos[:n_unc], scratch.lcp[:n_unc], scratch.cls[:n_unc], n_cls)

    def _chain_walk(self, q: int, follow: np.ndarray, scratch: _Scratch,
                    bits: np.ndarray) -> Row | None:
        """``_walk``'s row of ``q`` from the ``LoopPlan`` of its step set when ``q`` starts a
        chain of counting states (``_kernels.chain_states``) whose plan accepts more tokens than
        a bitset has words; None where it does not apply."""
        trie, t = self._trie, self._tables
        chain = np.empty(trie.max_depth + 1, dtype=np.int64)
        m, utf8 = K.chain_states(t.dfa_trans, t.byte_col, t.dfa_info, self._steps, self._rad_utf8,
                                 follow, q, chain)  # fmt: skip
        if m < 0:
            return None
        plan = _LOOP_PLANS.get(self._fingerprint, trie, self._steps[q], K.RAD_INF,
                               K.RAD_INF if utf8 else 0, bool(utf8), self.words)  # fmt: skip
        if plan.accepted <= self.words:
            return None
        n_acc, n_unc, n_cls, skipped = K.classify_chain_tokens(
            plan.exits, plan.bits, plan.spine_ids, plan.spine_ptr, plan.whole, chain, m, utf8,
            t.dfa_trans, t.byte_col, t.dfa_info, self._steps, self._rad, self._rad_utf8, follow,
            trie.max_depth, trie.byte, trie.depth, trie.next, trie.tok_ptr, trie.tok_ids,
            trie.tok_lcp, trie.below, trie.below_utf8, trie.height, trie.seq_ptr, trie.seq_data,
            scratch.flips, scratch.acc, bits, scratch.pos, scratch.lcp, scratch.cls,
        )  # fmt: skip
        self.skipped_subtrees += skipped
        unc = (scratch.pos[:n_unc], scratch.lcp[:n_unc], scratch.cls[:n_unc])
        if n_acc <= self.words:  # the id list is smaller than the bitset
            return Row(False, scratch.acc[:n_acc], *unc, n_cls)
        return Row(True, bits, *unc, n_cls)

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
        unc_hi = unc_lo + row.unc_pos.shape[0]
        unc = [_grow(a, unc_hi) for a in (c.unc_pos, c.unc_lcp, c.unc_cls)]
        for a, part in zip(unc, (row.unc_pos, row.unc_lcp, row.unc_cls), strict=True):
            a[unc_lo:unc_hi] = part
        self._n_unc = unc_hi
        rows[self._n_rows] = (dense, acc_lo, acc_hi, unc_lo, unc_hi, row.classes)
        new = K.Cache(c.index, rows, dense_bits, acc_tok, *unc)
        if any(a is not b for a, b in zip(new[1:], c[1:], strict=True)):
            # a kernel running on the old snapshot must never see an index entry pointing past
            # its arrays: publish the new arrays with a fresh index
            self.arrays = new._replace(index=c.index.copy())
            self._arrays_nbytes = sum(a.nbytes for a in self.arrays)
        self._n_rows += 1
        return self._n_rows - 1


class CapSlots(NamedTuple):
    """Where the rows of capped terminals' states near their caps live in the cache index: a
    block of slots per state (``base``, ascending, past the DFA states), one per characters
    left below ``plain_count`` (``_kernels.Tables``)."""

    size: int  # slots in all blocks
    base: np.ndarray  # int64 [B]: first slot of each block
    state: np.ndarray  # int64 [B]: its DFA state
    most_needed: np.ndarray  # int64 [B]: the most characters any state of its terminal needs


def _kernel_info(t: EarleyTables, max_depth: int) -> tuple[np.ndarray, CapSlots]:
    """``dfa_info`` (int32 [Q, 7], see ``_kernels.Tables``) and the cap slots of ``t``: a
    capped terminal's state ``q`` lives while its count is at most ``cap - needed(q)``
    (``chars_needed``), and its own row serves counts up to ``cap - max_depth - most`` (no token
    can then reach the cap: it starts at most ``max_depth`` characters)."""
    n_states = t.dfa_trans.shape[0]
    info = K.plain_info(t.dfa_accept, t.dfa_has_out, t.state_term, t.state_cap)
    if not t.term_cap.any():
        return info, _NO_CAPS
    bases: list[np.ndarray] = []
    states: list[np.ndarray] = []
    most: list[np.ndarray] = []
    size = 0
    ends = np.append(t.term_start[1:], n_states)
    for term in np.flatnonzero(t.term_cap > 0).tolist():
        cap = int(t.term_cap[term])
        lo, hi = int(t.term_start[term]), int(ends[term])
        needed = np.empty(hi - lo, dtype=np.int64)
        K.chars_needed(t.dfa_trans, t.byte_col, t.dfa_accept, info[:, 3], lo, hi, needed)
        if needed[0] > cap:  # a scan would start alive but never accept: fail closed
            raise GrammarError(
                f"capped terminal {term} needs {needed[0]} characters, cap {cap}",
                hint="no string fits the cap: use NOTHING there (the JSON Schema compiler does); "
                     "build_tables(compiled.grammar).term_exprs names the terminals")
        width = max_depth + int(needed.max())  # slots per state: characters left below it
        base = n_states + size + width * np.arange(hi - lo, dtype=np.int64)
        info[lo:hi, 4] = cap - needed
        info[lo:hi, 5] = cap - width
        info[lo:hi, 6] = base + cap
        bases.append(base)
        states.append(np.arange(lo, hi, dtype=np.int64))
        most.append(np.full(hi - lo, needed.max(), dtype=np.int64))
        size += width * (hi - lo)
    return info, CapSlots(size, _joined(bases), _joined(states), _joined(most))


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


_NO_CAPS = CapSlots(0, _joined([]), _joined([]), _joined([]))  # a grammar with no capped terminal


class Runtime:
    """Kernel tables plus the mask cache of one compiled grammar.

    ``tables`` and ``vocab_args`` = (token_indptr, token_data, EOS ids, and the trie's tok_ids,
    seq_ptr, seq_data) are built once; ``context`` is a packed kernel context (``_kernels.new_context``) naming them, whose Cache and
    State rows each matcher fills in its own copy. ``whitespace`` bounds whitespace runs where the
    tables leave JSON gaps unbounded (``matcher.whitespace``; None elsewhere).
    """

    def __init__(self, compiled: CompiledGrammar) -> None:
        t = compiled.tables
        dfa_info, caps = _kernel_info(t, compiled.trie.max_depth)
        self.tables = K.Tables(
            item_next=t.item_next,
            item_lhs=t.item_lhs,
            nt_ptr=t.nt_ptr,
            nt_items=t.nt_items,
            nullable=t.nullable,
            dfa_trans=t.dfa_trans,
            byte_col=t.byte_col,
            dfa_info=dfa_info,
            term_start=t.term_start,
            follow_bytes=t.follow_bytes,
            start_item=t.start_item,
            accept_item=t.accept_item,
        )
        self.cache = MaskCache(compiled, self.tables, caps)
        info = compiled.tokenizer_info
        self.words = self.cache.words
        trie = compiled.trie
        self.vocab_args = (
            info.token_indptr,
            info.token_data,
            np.asarray(info.eos_ids, dtype=np.int64),
            trie.tok_ids,
            trie.seq_ptr,
            trie.seq_data,
        )
        self.context = K.new_context(self.tables, self.vocab_args)
        self.whitespace = whitespace_runs(info, t.ws_bound) if t.ws_bound else None

    @property
    def nbytes(self) -> int:
        """Bytes this runtime adds to its compiled grammar: the mask cache, and ``dfa_info``
        (the kernel tables' other arrays are the grammar's own)."""
        return self.tables.dfa_info.nbytes + self.cache.nbytes


_LOCK = threading.Lock()


def runtime(compiled: CompiledGrammar) -> Runtime:
    """The shared runtime of ``compiled`` (built once, thread-safe)."""
    rt = compiled.runtime_slot.get("runtime")
    if rt is None:
        with _LOCK:
            rt = compiled.runtime_slot.get("runtime")
            if rt is None:
                rt = compiled.runtime_slot["runtime"] = Runtime(compiled)
    return rt
