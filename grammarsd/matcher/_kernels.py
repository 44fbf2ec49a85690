"""The matcher's hot loops: a byte-level Earley parser over DFA terminals, in numba.

Everything is flat arrays (see ``compiler.tables`` for the grammar side). The parse state after
``pos`` bytes is the Earley chart, stored as append-only arrays indexed by byte position:

    set_start  int64 [P + 2]  items of Earley set p are it_item/it_origin[set_start[p]:set_start[p+1]]
    scan_start int64 [P + 2]  live terminal scans after p bytes are sc_*[scan_start[p]:scan_start[p+1]]
    acc        uint8 [P + 1]  the first p bytes form a complete string of the language
    it_item    int32 [C]      dotted item of each Earley item
    it_origin  int32 [C]      origin position of each Earley item
    sc_state   int32 [CS]     DFA state of a terminal being scanned
    sc_origin  int32 [CS]     position where that terminal started
    h_x, h_o, h_stamp         open-addressing set used to de-duplicate items while a set is built
    term_stamp int64 [T]      de-duplicates scans started in one set
    meta       int64 [2]      [current position, stamp counter]

Stepping a byte only appends above the current position, and the end of set ``p`` is stored in
``set_start[p + 1]``, so **rollback to any earlier position is one assignment** (``meta[POS] = p``)
and a trie walk backtracks for free. Inside a terminal (a JSON string body, a number) a step only
advances DFA states; the parser is touched only where a terminal may end.

Return codes: ``OK`` (1), ``FAIL`` (0: the byte is not allowed, state unchanged), ``OVERFLOW``
(-1: an array is full, state unchanged; the caller grows the arrays and retries).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

OK = 1
FAIL = 0
OVERFLOW = -1
POS = 0
STAMP = 1
END = 2**30


class Tables(NamedTuple):
    item_next: np.ndarray
    item_lhs: np.ndarray
    nt_ptr: np.ndarray
    nt_items: np.ndarray
    nullable: np.ndarray
    dfa_trans: np.ndarray
    dfa_accept: np.ndarray
    dfa_has_out: np.ndarray
    state_term: np.ndarray
    term_start: np.ndarray
    start_item: int
    accept_item: int


class State(NamedTuple):
    set_start: np.ndarray
    scan_start: np.ndarray
    acc: np.ndarray
    it_item: np.ndarray
    it_origin: np.ndarray
    sc_state: np.ndarray
    sc_origin: np.ndarray
    h_x: np.ndarray
    h_o: np.ndarray
    h_stamp: np.ndarray
    term_stamp: np.ndarray
    meta: np.ndarray


@njit(cache=True, nogil=True, inline="always")
def _add(s: State, x: int, o: int, base: int, count: int, stamp: int) -> int:
    """Add item (x, o) to the set being built at [base, count); new count, or -1 if full."""
    size = s.h_stamp.shape[0]
    h = ((x * 0x9E3779B1) ^ (o * 0x85EBCA77)) & (size - 1)
    while s.h_stamp[h] == stamp:
        if s.h_x[h] == x and s.h_o[h] == o:
            return count
        h = (h + 1) & (size - 1)
    if count >= s.it_item.shape[0] or 2 * (count - base + 1) > size:
        return -1
    s.h_stamp[h] = stamp
    s.h_x[h] = x
    s.h_o[h] = o
    s.it_item[count] = x
    s.it_origin[count] = o
    return count + 1


@njit(cache=True, nogil=True, inline="always")
def _close(g: Tables, s: State, pos: int, base: int, count: int, scount: int) -> tuple[int, int]:
    """Predict and complete set ``pos`` (seeded at [base, count)), then start its scans.

    Nullable nonterminals are skipped over at prediction time (Aycock & Horspool 2002), which is
    what makes completions of empty derivations inside one set correct.
    """
    stamp = s.meta[STAMP]
    k = base
    while k < count:
        x = s.it_item[k]
        o = s.it_origin[k]
        k += 1
        nxt = g.item_next[x]
        if nxt == END:
            a = g.item_lhs[x]
            if o == pos:
                lo, hi = base, count
            else:
                lo, hi = s.set_start[o], s.set_start[o + 1]
            for y in range(lo, hi):
                yx = s.it_item[y]
                if g.item_next[yx] == a:
                    count = _add(s, yx + 1, s.it_origin[y], base, count, stamp)
                    if count < 0:
                        return -1, -1
        elif nxt >= 0:
            for p in range(g.nt_ptr[nxt], g.nt_ptr[nxt + 1]):
                count = _add(s, g.nt_items[p], pos, base, count, stamp)
                if count < 0:
                    return -1, -1
            if g.nullable[nxt]:
                count = _add(s, x + 1, o, base, count, stamp)
                if count < 0:
                    return -1, -1
    acc = 0
    for k in range(base, count):
        x = s.it_item[k]
        nxt = g.item_next[x]
        if nxt < 0:
            t = -nxt - 1
            if s.term_stamp[t] != stamp:
                s.term_stamp[t] = stamp
                if scount >= s.sc_state.shape[0]:
                    return -1, -1
                s.sc_state[scount] = g.term_start[t]
                s.sc_origin[scount] = pos
                scount += 1
        elif x == g.accept_item and s.it_origin[k] == 0:
            acc = 1
    s.acc[pos] = acc
    return count, scount


@njit(cache=True, nogil=True)
def init_state(g: Tables, s: State) -> int:
    """Build Earley set 0 from the augmented start item."""
    s.meta[POS] = 0
    s.meta[STAMP] += 1
    s.set_start[0] = 0
    s.scan_start[0] = 0
    count = _add(s, g.start_item, 0, 0, 0, s.meta[STAMP])
    if count < 0:
        return OVERFLOW
    count, scount = _close(g, s, 0, 0, count, 0)
    if count < 0:
        return OVERFLOW
    s.set_start[1] = count
    s.scan_start[1] = scount
    return OK


@njit(cache=True, nogil=True, inline="always")
def step(g: Tables, s: State, b: int) -> int:
    """Consume byte ``b`` at the current position."""
    pos = s.meta[POS]
    new = pos + 1
    if new + 1 >= s.set_start.shape[0]:
        return OVERFLOW
    base = s.set_start[pos + 1]
    count = base
    sbase = s.scan_start[pos + 1]
    scount = sbase
    s.meta[STAMP] += 1
    stamp = s.meta[STAMP]
    for i in range(s.scan_start[pos], s.scan_start[pos + 1]):
        q = g.dfa_trans[s.sc_state[i], b]
        if q < 0:
            continue
        o = s.sc_origin[i]
        if g.dfa_has_out[q]:
            if scount >= s.sc_state.shape[0]:
                return OVERFLOW
            s.sc_state[scount] = q
            s.sc_origin[scount] = o
            scount += 1
        if g.dfa_accept[q]:
            tsym = -g.state_term[q] - 1
            for y in range(s.set_start[o], s.set_start[o + 1]):
                yx = s.it_item[y]
                if g.item_next[yx] == tsym:
                    count = _add(s, yx + 1, s.it_origin[y], base, count, stamp)
                    if count < 0:
                        return OVERFLOW
    if count == base and scount == sbase:
        return FAIL
    count, scount = _close(g, s, new, base, count, scount)
    if count < 0:
        return OVERFLOW
    if scount == sbase and not s.acc[new]:
        return FAIL
    s.set_start[new + 1] = count
    s.scan_start[new + 1] = scount
    s.meta[POS] = new
    return OK


@njit(cache=True, nogil=True)
def advance(g: Tables, s: State, data: np.ndarray) -> int:
    """Consume all of ``data``; on FAIL or OVERFLOW the position is restored."""
    start = s.meta[POS]
    for i in range(data.shape[0]):
        r = step(g, s, data[i])
        if r != OK:
            s.meta[POS] = start
            return r
    return OK


@njit(cache=True, nogil=True)
def fill_mask(
    g: Tables,
    s: State,
    byte: np.ndarray,
    depth: np.ndarray,
    nxt: np.ndarray,
    tok_ptr: np.ndarray,
    tok_ids: np.ndarray,
    out: np.ndarray,
) -> int:
    """Set the bit of every token whose bytes the grammar allows next (``out`` is uint32 words).

    One depth-first walk of the token trie: a node whose byte fails prunes its whole subtree.
    ``out`` must be zeroed by the caller; the parse state is unchanged afterwards.
    """
    pos0 = s.meta[POS]
    k = 0
    n = byte.shape[0]
    while k < n:
        s.meta[POS] = pos0 + depth[k] - 1
        r = step(g, s, byte[k])
        if r == OVERFLOW:
            s.meta[POS] = pos0
            return OVERFLOW
        if r == OK:
            for j in range(tok_ptr[k], tok_ptr[k + 1]):
                t = tok_ids[j]
                out[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
            k += 1
        else:
            k = nxt[k]
    s.meta[POS] = pos0
    return OK
