"""The matcher's hot loops: a byte-level Earley parser over DFA terminals, in numba.

Everything is flat arrays (see ``compiler.tables`` for the grammar side). The parse state after
``pos`` bytes is the Earley chart, stored as append-only arrays indexed by byte position:

    (every per-position array has the same length P + 2; kernels check capacity on bounds alone)
    bounds   int64 [P + 2, 2]  Earley set p is items[bounds[p, 0]:bounds[p + 1, 0]]; the live terminal
                               scans after p bytes are scans[bounds[p, 1]:bounds[p + 1, 1]]
    acc      uint8 [P + 2]     the first p bytes form a complete string of the language
    items    int32 [C, 2]      (dotted item, origin position) of each Earley item
    scans    int32 [CS, 3]     (DFA state, origin position, characters started) of each terminal
                               being scanned; the count matters to ``Capped`` terminals only
    htab     int64 [H, 3]      (stamp, item, origin): de-duplicates items while one set is built
    tstamp   int64 [T]         de-duplicates the scans one set starts
    pend     uint8 [P + 2]     set p's Earley closure is postponed (its seed items are stored)
    pmask    uint64 [P + 2, 4] bytes that would need that closure (FOLLOW of what completed)
    meta     int64 [3]         [current position, stamp counter, missing cache state]

Stepping a byte only appends above the current position, and the end of set ``p`` is stored in
``bounds[p + 1]``, so **rollback to any earlier position is one assignment** (``meta[POS] = p``) and
a walk over candidate tokens backtracks for free. Inside a terminal (a JSON string body, a number) a
step only advances DFA states; the parser is touched only where a terminal may end — and even
there only lazily: when a terminal completes but another scan continues, the closure of the new set
is postponed until a byte arrives that could start a terminal following the completed one (static
FOLLOW sets, ``compiler.tables``), or until acceptance is asked. Inside a number or a name, digits and
letters then never touch the parser.

Masks use a per-DFA-state cache of *context-independent* tokens (XGrammar's split, computed lazily):
for a scan in DFA state q, a token whose bytes keep q's DFA alive is allowed whatever the parser holds
(``A(q)``); a token that dies inside the DFA without passing an accepting state is rejected whatever
the parser holds; only tokens that pass an accepting state and then leave the terminal (``U(q)``)
need the parser. The mask is the union of ``A(q)`` over live scans plus the tokens of ``U(q)`` that a
real parse accepts; ``U(q)`` is kept in byte order with longest-common-prefix lengths, so checking it
is a trie walk restricted to those tokens. The walk that builds a row keeps in ``U(q)`` only the
tokens in which the terminal may end before a byte that can follow it (a DFA-only test, exact; the
row then depends on the FOLLOW bytes of q's terminal too), and numbers *suffix classes*: tokens that reach the same DFA state where the terminal ends and go on with the
same bytes. Among the tokens on which every other live scan dies without ending its terminal
(always, at a chart position with one live scan) the parser accepts all of a class or none, so
one walk per class decides them (a JSON string body: ~1,150 uncertain Llama-3 tokens, ~150 kept,
~30 classes). At every chart position of a walk the live scans' DFAs alone often decide the rest
of the token (some scan stays alive over all of it, or none can end its terminal before a FOLLOW
byte).

Hot functions take plain arrays: numba increfs every array of a tuple each time the tuple is passed
or bound, which cost ~300 ns per byte when the state was a namedtuple of a dozen arrays.

Return codes: ``OK`` (1), ``FAIL`` (0: not allowed, position unchanged), ``OVERFLOW`` (-1: an array
is full, position unchanged; grow and retry), ``MISSING`` (-2: the cache lacks the row of
index slot ``meta[MISS]``; build it and retry); ``fill_mask`` returns ``MASKED`` (1) or ``UNMASKED`` (2) on
success.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import carray, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

OK = 1
FAIL = 0
MASKED = 1  # fill_mask: some token is not allowed
UNMASKED = 2  # fill_mask: every token is allowed
ALLOWED = 1  # _dfa_verdict
REJECTED = 0
UNKNOWN = -1
OVERFLOW = -1
MISSING = -2
RAD_INF = 0xFFFF  # chain_sets: an unbounded radius (uint16; trie heights saturate here too)
NO_CAP = 2**30  # dfa_info max_count / plain_count of a state without a cap
POS = 0
STAMP = 1
MISS = 2
END = 2**30


class Tables(NamedTuple):
    """Grammar arrays (see ``compiler.tables``) plus ``dfa_info``, int32 [Q, 7] per DFA state:

        0 accept, 1 has_out, 2 terminal
        3 char_start    1 when the next byte starts a decoded character of a capped terminal
        4 max_count     a scan of a capped terminal in this state lives while its count of
                        characters started is at most this (its cap minus the characters it
                        still needs to accept); ``NO_CAP`` elsewhere
        5 plain_count   counts up to this use the state's own mask-cache row; past it the row
        6 slot_end      is ``index[slot_end - count]``, one per characters left (``Cache``)

    The count of a scan is kept in ``scans[:, 2]``; ``runtime.Runtime`` fills columns 3-6."""

    item_next: np.ndarray  # int32 [I]
    item_lhs: np.ndarray  # int32 [I]
    nt_ptr: np.ndarray  # int32 [N + 1]
    nt_items: np.ndarray  # int32 [P]
    nullable: np.ndarray  # uint8 [N]
    dfa_trans: np.ndarray  # int32 [Q, K]: byte b reads column byte_col[b]
    byte_col: np.ndarray  # uint8 [256]
    dfa_info: np.ndarray  # int32 [Q, 3]
    term_start: np.ndarray  # int32 [T]
    follow_bytes: np.ndarray  # uint64 [T, 4]
    start_item: int
    accept_item: int


class State(NamedTuple):
    bounds: np.ndarray
    acc: np.ndarray
    items: np.ndarray
    scans: np.ndarray
    htab: np.ndarray
    tstamp: np.ndarray
    pend: np.ndarray
    pmask: np.ndarray
    meta: np.ndarray


class Cache(NamedTuple):
    """Context-independent masks, one row per cached DFA state.

    index[q] is the row of state q or -1; a scan of a capped terminal near its cap uses the
    index slot ``dfa_info[q, 6] - count`` instead (past the states: a row per characters left,
    see ``Tables``). Row r: rows[r] = (dense, acc_lo, acc_hi, unc_lo, unc_hi,
    classes): accepted tokens are the bitset dense_bits[dense] when dense >= 0, else
    acc_tok[acc_lo:acc_hi]; uncertain tokens are at the trie positions unc_pos[unc_lo:unc_hi] (token
    ``tok_ids[p]``, its bytes read in trie order from ``seq_data``), in byte order, unc_lcp =
    common prefix length with the previous uncertain token of the row, unc_cls = suffix class
    (0 <= unc_cls < classes; see ``classify_tokens``).
    """

    index: np.ndarray  # type: ignore[assignment]  # int32 [Q] (shadows tuple.index)
    rows: np.ndarray  # int64 [R, 6]
    dense_bits: np.ndarray  # uint32 [D, W]
    acc_tok: np.ndarray  # int32 [A]
    unc_pos: np.ndarray  # int32 [U]
    unc_lcp: np.ndarray  # int32 [U]
    unc_cls: np.ndarray  # int32 [U]


# --------------------------------------------------------------------------- the parser step


@njit(cache=True, nogil=True, inline="always")
def _add(items, htab, x, o, base, count, stamp):  # noqa: ANN001, ANN202
    """Add item (x, o) to the set being built at [base, count); new count, or -1 if full."""
    size = htab.shape[0]
    h = ((x * 0x9E3779B1) ^ (o * 0x85EBCA77)) & (size - 1)
    while htab[h, 0] == stamp:
        if htab[h, 1] == x and htab[h, 2] == o:
            return count
        h = (h + 1) & (size - 1)
    if count >= items.shape[0] or 2 * (count - base + 1) > size:
        return -1
    htab[h, 0] = stamp
    htab[h, 1] = x
    htab[h, 2] = o
    items[count, 0] = x
    items[count, 1] = o
    return count + 1


@njit(cache=True, nogil=True)
def _close(  # noqa: ANN202
    item_next,
    item_lhs,
    nt_ptr,
    nt_items,
    nullable,
    term_start,
    accept_item,  # noqa: ANN001
    bounds,
    acc,
    items,
    scans,
    htab,
    tstamp,
    stamp,
    pos,
    base,
    count,
    scount,  # noqa: ANN001
):
    """Predict and complete set ``pos`` (seeded at [base, count)), then start its scans.

    Nullable nonterminals are skipped over at prediction time (Aycock & Horspool 2002), which is
    what makes completions of empty derivations inside one set correct. Returns the new
    (count, scount), or (-1, -1) when an array is full.
    """
    k = base
    while k < count:
        x = items[k, 0]
        o = items[k, 1]
        k += 1
        nxt = item_next[x]
        if nxt == END:
            a = item_lhs[x]
            if o == pos:
                lo, hi = base, count
            else:
                lo, hi = bounds[o, 0], bounds[o + 1, 0]
            for y in range(lo, hi):
                yx = items[y, 0]
                if item_next[yx] == a:
                    count = _add(items, htab, yx + 1, items[y, 1], base, count, stamp)
                    if count < 0:
                        return -1, -1
        elif nxt >= 0:
            for p in range(nt_ptr[nxt], nt_ptr[nxt + 1]):
                count = _add(items, htab, nt_items[p], pos, base, count, stamp)
                if count < 0:
                    return -1, -1
            if nullable[nxt]:
                count = _add(items, htab, x + 1, o, base, count, stamp)
                if count < 0:
                    return -1, -1
    complete = 0
    for k in range(base, count):
        x = items[k, 0]
        nxt = item_next[x]
        if nxt < 0:
            t = -nxt - 1
            if tstamp[t] != stamp:
                tstamp[t] = stamp
                if scount >= scans.shape[0]:
                    return -1, -1
                scans[scount, 0] = term_start[t]
                scans[scount, 1] = pos
                scans[scount, 2] = 0
                scount += 1
        elif x == accept_item and items[k, 1] == 0:
            complete = 1
    acc[pos] = complete
    return count, scount


@njit(cache=True, nogil=True)
def _settle(  # noqa: ANN202
    item_next,
    item_lhs,
    nt_ptr,
    nt_items,
    nullable,
    term_start,
    accept_item,  # noqa: ANN001
    bounds,
    acc,
    items,
    scans,
    htab,
    tstamp,
    pend,
    meta,
    pos,  # noqa: ANN001
):
    """Run the postponed closure of set ``pos`` (the top of the chart); OK or OVERFLOW."""
    meta[STAMP] += 1
    stamp = meta[STAMP]
    base = bounds[pos, 0]
    count = bounds[pos + 1, 0]
    size = htab.shape[0]
    if 2 * (count - base + 1) > size:
        return OVERFLOW
    for k in range(base, count):  # re-register the seeds for de-duplication
        x = items[k, 0]
        o = items[k, 1]
        h = ((x * 0x9E3779B1) ^ (o * 0x85EBCA77)) & (size - 1)
        while htab[h, 0] == stamp:
            h = (h + 1) & (size - 1)
        htab[h, 0] = stamp
        htab[h, 1] = x
        htab[h, 2] = o
    count, scount = _close(
        item_next, item_lhs, nt_ptr, nt_items, nullable, term_start, accept_item,
        bounds, acc, items, scans, htab, tstamp, stamp, pos, base, count, bounds[pos + 1, 1],
    )  # fmt: skip
    if count < 0:
        return OVERFLOW
    bounds[pos + 1, 0] = count
    bounds[pos + 1, 1] = scount
    pend[pos] = 0
    return OK


@njit(cache=True, nogil=True)
def _step(  # noqa: ANN202
    item_next,
    item_lhs,
    nt_ptr,
    nt_items,
    nullable,
    dfa_trans, byte_col,
    dfa_info,
    term_start,  # noqa: ANN001
    follow_bytes,
    accept_item,
    bounds,
    acc,
    items,
    scans,
    htab,
    tstamp,
    pend,
    pmask,  # noqa: ANN001
    meta,
    b,  # noqa: ANN001
):
    """Consume byte ``b`` at position ``meta[POS]``; OK / FAIL / OVERFLOW."""
    pos = meta[POS]
    new = pos + 1
    if new + 1 >= bounds.shape[0]:
        return OVERFLOW
    if pend[pos] and (pmask[pos, b >> 6] >> np.uint64(b & 63)) & np.uint64(1):
        r = _settle(
            item_next, item_lhs, nt_ptr, nt_items, nullable, term_start, accept_item,
            bounds, acc, items, scans, htab, tstamp, pend, meta, pos,
        )  # fmt: skip
        if r != OK:
            return r
    base = bounds[pos + 1, 0]
    count = base
    sbase = bounds[pos + 1, 1]
    scount = sbase
    meta[STAMP] += 1
    stamp = meta[STAMP]
    f0 = f1 = f2 = f3 = np.uint64(0)
    for i in range(bounds[pos, 1], sbase):
        s = scans[i, 0]
        q = dfa_trans[s, byte_col[b]]
        if q < 0:
            continue
        n = scans[i, 2] + dfa_info[s, 3]
        if n > dfa_info[q, 4]:  # a capped terminal that can no longer accept within its cap
            continue
        o = scans[i, 1]
        if dfa_info[q, 1]:
            if scount >= scans.shape[0]:
                return OVERFLOW
            scans[scount, 0] = q
            scans[scount, 1] = o
            scans[scount, 2] = n
            scount += 1
        if dfa_info[q, 0]:
            term = dfa_info[q, 2]
            tsym = -term - 1
            f0 |= follow_bytes[term, 0]
            f1 |= follow_bytes[term, 1]
            f2 |= follow_bytes[term, 2]
            f3 |= follow_bytes[term, 3]
            for y in range(bounds[o, 0], bounds[o + 1, 0]):
                yx = items[y, 0]
                if item_next[yx] == tsym:
                    count = _add(items, htab, yx + 1, items[y, 1], base, count, stamp)
                    if count < 0:
                        return OVERFLOW
    if count == base and scount == sbase:
        return FAIL
    pend[new] = 0
    acc[new] = 0
    if count > base:
        if scount == sbase:  # nothing continues: only the closure can keep the input alive
            count, scount = _close(
                item_next, item_lhs, nt_ptr, nt_items, nullable, term_start, accept_item,
                bounds, acc, items, scans, htab, tstamp, stamp, new, base, count, scount,
            )  # fmt: skip
            if count < 0:
                return OVERFLOW
            if scount == sbase and not acc[new]:
                return FAIL
        else:  # some scan continues, so the input is alive: postpone the closure
            pend[new] = 1
            pmask[new, 0] = f0
            pmask[new, 1] = f1
            pmask[new, 2] = f2
            pmask[new, 3] = f3
    bounds[new + 1, 0] = count
    bounds[new + 1, 1] = scount
    meta[POS] = new
    return OK


# --------------------------------------------------------------------------- flat kernels
#
# These take every array flat, in the field order of ``Tables``, ``State`` and ``Cache``
# (``f(*tables, *state, ...)``): the packed entry points below call them after unpacking a
# context, and tests call them directly.


@njit(cache=True, nogil=True)
def init_state(  # noqa: ANN201
    item_next, item_lhs, nt_ptr, nt_items, nullable, dfa_trans, byte_col, dfa_info, term_start,
    follow_bytes, start_item, accept_item,
    bounds, acc, items, scans, htab, tstamp, pend, pmask, meta,
):  # fmt: skip  # noqa: ANN001
    """Build Earley set 0 from the augmented start item."""
    meta[POS] = 0
    meta[STAMP] += 1
    stamp = meta[STAMP]
    bounds[0, 0] = 0
    bounds[0, 1] = 0
    count = _add(items, htab, start_item, 0, 0, 0, stamp)
    if count < 0:
        return OVERFLOW
    count, scount = _close(
        item_next, item_lhs, nt_ptr, nt_items, nullable, term_start, accept_item,
        bounds, acc, items, scans, htab, tstamp, stamp, 0, 0, count, 0,
    )  # fmt: skip
    if count < 0:
        return OVERFLOW
    bounds[1, 0] = count
    bounds[1, 1] = scount
    pend[0] = 0
    return OK


@njit(cache=True, nogil=True)
def settle(  # noqa: ANN201
    item_next, item_lhs, nt_ptr, nt_items, nullable, dfa_trans, byte_col, dfa_info, term_start,
    follow_bytes, start_item, accept_item,
    bounds, acc, items, scans, htab, tstamp, pend, pmask, meta,
):  # fmt: skip  # noqa: ANN001
    """Run the postponed closure at the current position, if any (before reading ``acc``)."""
    pos = meta[POS]
    if not pend[pos]:
        return OK
    return _settle(
        item_next, item_lhs, nt_ptr, nt_items, nullable, term_start, accept_item,
        bounds, acc, items, scans, htab, tstamp, pend, meta, pos,
    )  # fmt: skip


@njit(cache=True, nogil=True)
def advance(  # noqa: ANN201
    item_next, item_lhs, nt_ptr, nt_items, nullable, dfa_trans, byte_col, dfa_info, term_start,
    follow_bytes, start_item, accept_item,
    bounds, acc, items, scans, htab, tstamp, pend, pmask, meta,
    data,
):  # fmt: skip  # noqa: ANN001
    """Consume all of ``data`` (uint8); on FAIL or OVERFLOW the position is restored."""
    start = meta[POS]
    for i in range(data.shape[0]):
        r = _step(
            item_next, item_lhs, nt_ptr, nt_items, nullable, dfa_trans, byte_col, dfa_info, term_start,
            follow_bytes, accept_item, bounds, acc, items, scans, htab, tstamp, pend, pmask,
            meta, data[i],
        )  # fmt: skip
        if r != OK:
            meta[POS] = start
            return r
    return OK


# --------------------------------------------------------------------------- packed entry points
#
# What the matcher calls. Even flat, 31 array arguments cost the dispatcher ~1.8 µs per call to
# type and unbox, and every nested call then increfs each of them. So a matcher passes one context
# ``ctx`` (int64 [CTX_ROWS, 3]) naming every array it uses by (address, shape[0], shape[1] or 0),
# in the order of ``Tables`` (arrays), the vocabulary, ``Cache`` and ``State``, plus one row of
# scalars; the entry unpacks it into plain arrays (no reference counts) and calls the kernels
# above. A context names memory it does not own: whoever uses it keeps the arrays it names alive,
# and repacks the rows of a part whose arrays were replaced (``pack_cache`` / ``pack_state``).

T_ROW = 0  # rows of the Tables arrays (10)
V_ROW = 10  # token_indptr, token_data, eos_ids, tok_ids, seq_ptr, seq_data
S_ROW = 16  # scalars: (start_item, accept_item, 0)
C_ROW = 17  # rows of the Cache arrays (7)
P_ROW = 24  # rows of the State arrays (9)
CTX_ROWS = 33
BAD_BITMASK = -3  # fill_mask_ctx: the bitmask row is out of range, too narrow or not contiguous

# (dtype, ndim) of every array a context names, in row order from T_ROW, V_ROW, C_ROW, P_ROW
TABLES_LAYOUT = ((np.int32, 1), (np.int32, 1), (np.int32, 1), (np.int32, 1), (np.uint8, 1),
                 (np.int32, 2), (np.uint8, 1), (np.int32, 2), (np.int32, 1),
                 (np.uint64, 2))  # fmt: skip
VOCAB_LAYOUT = ((np.int64, 1), (np.uint8, 1), (np.int64, 1), (np.int32, 1), (np.int64, 1),
                (np.uint8, 1))  # fmt: skip
CACHE_LAYOUT = ((np.int32, 1), (np.int64, 2), (np.uint32, 2), (np.int32, 1), (np.int32, 1),
                (np.int32, 1), (np.int32, 1))  # fmt: skip
STATE_LAYOUT = ((np.int64, 2), (np.uint8, 1), (np.int32, 2), (np.int32, 2), (np.int64, 2),
                (np.int64, 1), (np.uint8, 1), (np.uint64, 2), (np.int64, 1))  # fmt: skip


@intrinsic
def _pointer(typingctx, address):  # noqa: ANN001, ANN202, ARG001
    """The int64 ``address`` as a ``void*`` (for ``numba.carray``)."""

    def codegen(context, builder, signature, args):  # noqa: ANN001, ANN202, ARG001
        return builder.inttoptr(args[0], cgutils.voidptr_t)

    return types.voidptr(types.int64), codegen


@njit(cache=True, nogil=True, inline="always")
def _put(ctx, i, a, cols):  # noqa: ANN001, ANN202
    ctx[i, 0] = a.ctypes.data
    ctx[i, 1] = a.shape[0]
    ctx[i, 2] = cols


@njit(cache=True, nogil=True, inline="always")
def _view1(ctx, i, dtype):  # noqa: ANN001, ANN202
    return carray(_pointer(ctx[i, 0]), ctx[i, 1], dtype)


@njit(cache=True, nogil=True, inline="always")
def _view2(ctx, i, dtype):  # noqa: ANN001, ANN202
    return carray(_pointer(ctx[i, 0]), (ctx[i, 1], ctx[i, 2]), dtype)


@njit(cache=True, nogil=True)
def _pack_tables(  # noqa: ANN202
    item_next, item_lhs, nt_ptr, nt_items, nullable, dfa_trans, byte_col, dfa_info, term_start,
    follow_bytes, start_item, accept_item, token_indptr, token_data, eos_ids, tok_ids, seq_ptr,
    seq_data, ctx,
):  # fmt: skip  # noqa: ANN001
    _put(ctx, T_ROW, item_next, 0)
    _put(ctx, T_ROW + 1, item_lhs, 0)
    _put(ctx, T_ROW + 2, nt_ptr, 0)
    _put(ctx, T_ROW + 3, nt_items, 0)
    _put(ctx, T_ROW + 4, nullable, 0)
    _put(ctx, T_ROW + 5, dfa_trans, dfa_trans.shape[1])
    _put(ctx, T_ROW + 6, byte_col, 0)
    _put(ctx, T_ROW + 7, dfa_info, dfa_info.shape[1])
    _put(ctx, T_ROW + 8, term_start, 0)
    _put(ctx, T_ROW + 9, follow_bytes, follow_bytes.shape[1])
    _put(ctx, V_ROW, token_indptr, 0)
    _put(ctx, V_ROW + 1, token_data, 0)
    _put(ctx, V_ROW + 2, eos_ids, 0)
    _put(ctx, V_ROW + 3, tok_ids, 0)
    _put(ctx, V_ROW + 4, seq_ptr, 0)
    _put(ctx, V_ROW + 5, seq_data, 0)
    ctx[S_ROW, 0] = start_item
    ctx[S_ROW, 1] = accept_item


@njit(cache=True, nogil=True)
def _pack_cache(index, rows, dense_bits, acc_tok, unc_pos, unc_lcp, unc_cls, ctx):  # noqa: ANN001, ANN202
    _put(ctx, C_ROW, index, 0)
    _put(ctx, C_ROW + 1, rows, rows.shape[1])
    _put(ctx, C_ROW + 2, dense_bits, dense_bits.shape[1])
    _put(ctx, C_ROW + 3, acc_tok, 0)
    _put(ctx, C_ROW + 4, unc_pos, 0)
    _put(ctx, C_ROW + 5, unc_lcp, 0)
    _put(ctx, C_ROW + 6, unc_cls, 0)


@njit(cache=True, nogil=True)
def _pack_state(bounds, acc, items, scans, htab, tstamp, pend, pmask, meta, ctx):  # noqa: ANN001, ANN202
    _put(ctx, P_ROW, bounds, bounds.shape[1])
    _put(ctx, P_ROW + 1, acc, 0)
    _put(ctx, P_ROW + 2, items, items.shape[1])
    _put(ctx, P_ROW + 3, scans, scans.shape[1])
    _put(ctx, P_ROW + 4, htab, htab.shape[1])
    _put(ctx, P_ROW + 5, tstamp, 0)
    _put(ctx, P_ROW + 6, pend, 0)
    _put(ctx, P_ROW + 7, pmask, pmask.shape[1])
    _put(ctx, P_ROW + 8, meta, 0)


def _check_layout(arrays: tuple[np.ndarray, ...], layout: tuple[tuple[type, int], ...]) -> None:
    """A context can only name C-contiguous arrays of the dtypes and ranks its entries read."""
    for k, (a, (dtype, ndim)) in enumerate(zip(arrays, layout, strict=True)):
        if a.dtype != dtype or a.ndim != ndim or not a.flags.c_contiguous:
            raise TypeError(
                f"array {k} is {a.dtype}[{a.ndim}-D, contiguous={a.flags.c_contiguous}]; "
                f"a context needs C-contiguous {np.dtype(dtype)}[{ndim}-D]"
            )


Vocab = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def new_context(tables: Tables, vocab: Vocab) -> np.ndarray:
    """A context naming ``tables`` and ``vocab`` = (token_indptr, token_data, eos_ids, and the
    trie's tok_ids, seq_ptr, seq_data: see ``tokenizer.trie``); its Cache and State rows are zero
    until ``pack_cache`` / ``pack_state`` fill them."""
    _check_layout(tuple(tables[:10]), TABLES_LAYOUT)
    _check_layout(vocab, VOCAB_LAYOUT)
    ctx = np.zeros((CTX_ROWS, 3), dtype=np.int64)
    _pack_tables(*tables, *vocab, ctx)
    return ctx


def pack_cache(ctx: np.ndarray, cache: Cache) -> None:
    """Point the Cache rows of ``ctx`` at the arrays of ``cache`` (kept alive by the caller)."""
    _check_layout(tuple(cache), CACHE_LAYOUT)
    _pack_cache(*cache, ctx)


def pack_state(ctx: np.ndarray, state: State) -> None:
    """Point the State rows of ``ctx`` at the arrays of ``state`` (kept alive by the caller)."""
    _check_layout(tuple(state), STATE_LAYOUT)
    _pack_state(*state, ctx)


@njit(cache=True, nogil=True, inline="always")
def _tables(ctx):  # noqa: ANN001, ANN202
    """The Tables fields named by ``ctx``, in order."""
    return (
        _view1(ctx, T_ROW, np.int32), _view1(ctx, T_ROW + 1, np.int32),
        _view1(ctx, T_ROW + 2, np.int32), _view1(ctx, T_ROW + 3, np.int32),
        _view1(ctx, T_ROW + 4, np.uint8), _view2(ctx, T_ROW + 5, np.int32),
        _view1(ctx, T_ROW + 6, np.uint8), _view2(ctx, T_ROW + 7, np.int32),
        _view1(ctx, T_ROW + 8, np.int32), _view2(ctx, T_ROW + 9, np.uint64),
        ctx[S_ROW, 0], ctx[S_ROW, 1],
    )  # fmt: skip


@njit(cache=True, nogil=True, inline="always")
def _vocab(ctx):  # noqa: ANN001, ANN202
    """(token_indptr, token_data, eos_ids, tok_ids, seq_ptr, seq_data) named by ``ctx``."""
    return (
        _view1(ctx, V_ROW, np.int64), _view1(ctx, V_ROW + 1, np.uint8),
        _view1(ctx, V_ROW + 2, np.int64), _view1(ctx, V_ROW + 3, np.int32),
        _view1(ctx, V_ROW + 4, np.int64), _view1(ctx, V_ROW + 5, np.uint8),
    )  # fmt: skip


@njit(cache=True, nogil=True, inline="always")
def _cache(ctx):  # noqa: ANN001, ANN202
    """The Cache fields named by ``ctx``, in order."""
    return (
        _view1(ctx, C_ROW, np.int32), _view2(ctx, C_ROW + 1, np.int64),
        _view2(ctx, C_ROW + 2, np.uint32), _view1(ctx, C_ROW + 3, np.int32),
        _view1(ctx, C_ROW + 4, np.int32), _view1(ctx, C_ROW + 5, np.int32),
        _view1(ctx, C_ROW + 6, np.int32),
    )  # fmt: skip


@njit(cache=True, nogil=True, inline="always")
def _state(ctx):  # noqa: ANN001, ANN202
    """The State fields named by ``ctx``, in order."""
    return (
        _view2(ctx, P_ROW, np.int64), _view1(ctx, P_ROW + 1, np.uint8),
        _view2(ctx, P_ROW + 2, np.int32), _view2(ctx, P_ROW + 3, np.int32),
        _view2(ctx, P_ROW + 4, np.int64), _view1(ctx, P_ROW + 5, np.int64),
        _view1(ctx, P_ROW + 6, np.uint8), _view2(ctx, P_ROW + 7, np.uint64),
        _view1(ctx, P_ROW + 8, np.int64),
    )  # fmt: skip


@njit(cache=True, nogil=True)
def init_state_ctx(ctx):  # noqa: ANN001, ANN201
    """``init_state`` on the arrays ``ctx`` names."""
    return init_state(*_tables(ctx), *_state(ctx))


@njit(cache=True, nogil=True)
def settle_ctx(ctx):  # noqa: ANN001, ANN201
    """``settle`` on the arrays ``ctx`` names."""
    return settle(*_tables(ctx), *_state(ctx))


@njit(cache=True, nogil=True)
def advance_ctx(ctx, data):  # noqa: ANN001, ANN201
    """``advance`` by ``data`` (uint8) on the arrays ``ctx`` names."""
    return advance(*_tables(ctx), *_state(ctx), data)


@njit(cache=True, nogil=True)
def advance_token_ctx(ctx, token):  # noqa: ANN001, ANN201
    """``advance`` by the bytes of vocabulary token ``token`` (0 <= token < V); FAIL when it has
    none (a special token)."""
    token_indptr, token_data, _, _, _, _ = _vocab(ctx)
    lo, hi = token_indptr[token], token_indptr[token + 1]
    if lo == hi:
        return FAIL
    return advance(*_tables(ctx), *_state(ctx), token_data[lo:hi])


@njit(cache=True, nogil=True)
def fill_mask_ctx(ctx, bitmask, index):  # noqa: ANN001, ANN201
    """``fill_mask`` into row ``index`` of ``bitmask`` (int32 [B, W >= ceil(V / 32)], rows
    contiguous; columns past the vocabulary's words are zeroed), or ``BAD_BITMASK`` (nothing
    written) when the row is out of range, too narrow or not contiguous."""
    token_indptr, _, eos_ids, tok_ids, seq_ptr, seq_data = _vocab(ctx)
    words = (token_indptr.shape[0] + 30) // 32  # ceil(V / 32), V = len(token_indptr) - 1
    width = bitmask.shape[1]
    if not 0 <= index < bitmask.shape[0] or width < words:
        return BAD_BITMASK
    if width > 1 and bitmask.strides[1] != bitmask.itemsize:
        return BAD_BITMASK
    row = bitmask[index]
    row[words:] = 0  # padding columns (a wider logits dimension): never allowed
    out = carray(_pointer(row.ctypes.data), words, np.uint32)
    return fill_mask(
        *_tables(ctx), *_state(ctx), *_cache(ctx), token_indptr, tok_ids, seq_ptr, seq_data,
        eos_ids, out,
    )  # fmt: skip


@njit(cache=True, nogil=True)
def fill_mask_within_ctx(ctx, bitmask, index, allowed):  # noqa: ANN001, ANN201
    """``fill_mask_ctx``, then only the tokens also in ``allowed`` (uint32 [ceil(V / 32)]; a
    filter the parser does not see, ``matcher.whitespace``). Returns what ``fill_mask`` did."""
    r = fill_mask_ctx(ctx, bitmask, index)
    if r == MASKED or r == UNMASKED:
        row = bitmask[index]
        out = carray(_pointer(row.ctypes.data), allowed.shape[0], np.uint32)
        for w in range(allowed.shape[0]):
            out[w] &= allowed[w]
    return r


@njit(cache=True, nogil=True, inline="always")
def _in_set(bits, row, b):  # noqa: ANN001, ANN202
    """Byte ``b`` is in the 256-bit set ``bits[row]`` (uint64 [.., 4])."""
    return (bits[row, b >> 6] >> np.uint64(b & 63)) & np.uint64(1) != 0


@njit(cache=True, nogil=True, inline="always")
def _in_bits(bits, b):  # noqa: ANN001, ANN202
    """Byte ``b`` is in the 256-bit set ``bits`` (uint64 [4])."""
    return (bits[b >> 6] >> np.uint64(b & 63)) & np.uint64(1) != 0


@njit(cache=True, nogil=True, inline="always")
def _row_slot(dfa_info, scans, k):  # noqa: ANN001, ANN202
    """The mask-cache index slot of scan ``k``: its state, or near a cap the row for the
    characters it has left (see ``Tables``)."""
    q = scans[k, 0]
    n = scans[k, 2]
    return q if n <= dfa_info[q, 5] else dfa_info[q, 6] - n


@njit(cache=True, nogil=True)
def _dfa_verdict(dfa_trans, byte_col, dfa_info, follow_bytes, scans, lo, hi, data, a, z):  # noqa: ANN001, ANN202
    """Decide ``data[a:z]`` from the live scans ``scans[lo:hi]`` of a closed chart position by
    their DFAs alone: ``ALLOWED`` when some scan stays alive over all of it, ``REJECTED`` when no
    scan can end its terminal inside it before a byte that may follow that terminal (so no parse
    goes on), else ``UNKNOWN`` (the parser must step). Also returns the last index read: a
    rejection holds for every string that shares ``data[a:last + 1]``."""
    verdict = REJECTED
    last = a
    for k in range(lo, hi):
        q = scans[k, 0]
        n = scans[k, 2]
        term = dfa_info[q, 2]
        for i in range(a, z):
            b = data[i]
            if i > a and verdict == REJECTED and dfa_info[q, 0] and _in_set(follow_bytes, term, b):
                verdict = UNKNOWN
            n += dfa_info[q, 3]
            q = dfa_trans[q, byte_col[b]]
            if q < 0 or n > dfa_info[q, 4]:
                q = -1
                last = max(last, i)
                break
        if q >= 0:
            return ALLOWED, z - 1
    return verdict, last


@njit(cache=True, nogil=True)
def _others_dead(dfa_trans, byte_col, dfa_info, follow_bytes, scans, lo, hi, k, data, a, z):  # noqa: ANN001, ANN202
    """No live scan of ``scans[lo:hi]`` but number ``k`` takes part in any parse of ``data[a:z]``:
    each dies inside it without ending its terminal before a byte that may follow it
    (``_dfa_verdict`` of that scan alone is ``REJECTED``). The parse of those bytes is then the
    parse from scan ``k`` alone, so tokens of one suffix class of ``k``'s row share a verdict."""
    for k2 in range(lo, hi):
        if k2 != k:
            verdict, _ = _dfa_verdict(
                dfa_trans, byte_col, dfa_info, follow_bytes, scans, k2, k2 + 1, data, a, z
            )
            if verdict != REJECTED:
                return False
    return True


@njit(cache=True, nogil=True)
def fill_mask(  # noqa: ANN201
    item_next, item_lhs, nt_ptr, nt_items, nullable, dfa_trans, byte_col, dfa_info, term_start,
    follow_bytes, start_item, accept_item,
    bounds, acc, items, scans, htab, tstamp, pend, pmask, meta,
    index, rows, dense_bits, acc_tok, unc_pos, unc_lcp, unc_cls,
    token_indptr, tok_ids, seq_ptr, seq_data, eos_ids, out,
):  # fmt: skip  # noqa: ANN001
    """Write the allowed tokens into ``out`` (uint32 words, overwritten); MASKED or UNMASKED.

    Union of the cached context-independent sets of every live scan, plus the uncertain tokens a
    real parse accepts, plus ``eos_ids`` when the input so far is complete. Returns ``MASKED`` when
    some token of the vocabulary is not allowed, ``UNMASKED`` when all are, or ``OVERFLOW`` /
    ``MISSING`` (retry after growing / building the rows; ``meta[MISS]`` names one missing index
    slot: a DFA state, or past them a capped state's row for the characters it has left). The parse position is unchanged.

    The uncertain tokens of a row (those whose terminal may end inside them, see
    ``classify_tokens``) are walked through the parser in byte order. The walk reuses the chart
    positions of the shared prefix with the previous walked token, and at each of them first asks
    ``_dfa_verdict`` whether the live scans' DFAs alone decide the rest of the token. A token
    rejected on its first ``d`` bytes rejects the tokens after it that share them without any
    work. When the chart position holds one scan, or the other scans die inside the token without
    ending their terminals (``_others_dead``), the parse is the same for every such token of a
    suffix class up to its split and from there on depends only on the bytes after it: one walk
    per class decides all of them.
    """
    out[:] = 0
    pos0 = meta[POS]
    if pend[pos0]:
        r = _settle(
            item_next, item_lhs, nt_ptr, nt_items, nullable, term_start, accept_item,
            bounds, acc, items, scans, htab, tstamp, pend, meta, pos0,
        )  # fmt: skip
        if r != OK:
            return r
    lo, hi = bounds[pos0, 1], bounds[pos0 + 1, 1]
    for k in range(lo, hi):
        slot = _row_slot(dfa_info, scans, k)
        if index[slot] < 0:
            meta[MISS] = slot
            return MISSING
    words = out.shape[0]
    for k in range(lo, hi):
        r = index[_row_slot(dfa_info, scans, k)]
        dense = rows[r, 0]
        if dense >= 0:
            for w in range(words):
                out[w] |= dense_bits[dense, w]
        else:
            for j in range(rows[r, 1], rows[r, 2]):
                t = acc_tok[j]
                out[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
    single = hi - lo == 1  # no other scan: suffix classes share their verdicts
    for k in range(lo, hi):
        r = index[_row_slot(dfa_info, scans, k)]
        memo = np.full(rows[r, 5], UNKNOWN, dtype=np.int8)  # verdict per class
        rejected = False  # the previous walked token was rejected on its bytes 0..dead alone
        dead = 0
        alive = 0  # leading bytes of the previous stepped token whose chart positions are valid
        failed = False  # the previous stepped token's byte number `alive` failed
        for j in range(rows[r, 3], rows[r, 4]):
            p = unc_pos[j]
            t = tok_ids[p]
            shared = unc_lcp[j]
            if shared <= dead:
                rejected = False
            if shared <= alive:
                alive = shared
                failed = False
            if rejected or failed:
                continue  # this token starts with the prefix that was just rejected
            if (out[t >> 5] >> np.uint32(t & 31)) & np.uint32(1):
                continue  # already allowed by another scan
            t_lo = seq_ptr[p]
            n = seq_ptr[p + 1] - t_lo
            alone = single or _others_dead(
                dfa_trans, byte_col, dfa_info, follow_bytes, scans, lo, hi, k, seq_data, t_lo, t_lo + n
            )
            if alone and memo[unc_cls[j]] != UNKNOWN:
                if memo[unc_cls[j]] == ALLOWED:
                    out[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
                continue
            meta[POS] = pos0 + alive
            verdict = UNKNOWN
            while alive < n:
                if alive > 0:  # a chart position the DFAs alone may decide the rest from
                    p = pos0 + alive
                    b = seq_data[t_lo + alive]
                    if pend[p] and _in_set(pmask, p, b):
                        res = _settle(
                            item_next, item_lhs, nt_ptr, nt_items, nullable, term_start,
                            accept_item, bounds, acc, items, scans, htab, tstamp, pend, meta, p,
                        )  # fmt: skip
                        if res != OK:
                            meta[POS] = pos0
                            return res
                    verdict, last = _dfa_verdict(
                        dfa_trans, byte_col, dfa_info, follow_bytes, scans, bounds[p, 1], bounds[p + 1, 1],
                        seq_data, t_lo + alive, t_lo + n,
                    )  # fmt: skip
                    if verdict == REJECTED:
                        rejected = True
                        dead = last - t_lo
                    if verdict != UNKNOWN:
                        break
                res = _step(
                    item_next, item_lhs, nt_ptr, nt_items, nullable, dfa_trans, byte_col, dfa_info,
                    term_start, follow_bytes, accept_item, bounds, acc, items, scans, htab,
                    tstamp, pend, pmask, meta, seq_data[t_lo + alive],
                )  # fmt: skip
                if res == OVERFLOW:
                    meta[POS] = pos0
                    return OVERFLOW
                if res != OK:
                    failed = True
                    break
                alive += 1
            allowed = verdict == ALLOWED or alive == n
            if allowed:
                out[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
            if alone:
                memo[unc_cls[j]] = ALLOWED if allowed else REJECTED
    meta[POS] = pos0
    if acc[pos0]:
        for t in eos_ids:
            out[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
    vocab = token_indptr.shape[0] - 1
    full = vocab >> 5
    for w in range(full):
        if out[w] != np.uint32(0xFFFFFFFF):
            return MASKED
    rest = vocab & 31
    if rest:
        need = (np.uint32(1) << np.uint32(rest)) - np.uint32(1)
        if out[full] & need != need:
            return MASKED
    return UNMASKED


# --------------------------------------------------------------------------- cache building


@njit(cache=True, nogil=True)
def chain_sets(
    dfa_trans: np.ndarray,
    byte_col: np.ndarray,
    utf8_dfa: np.ndarray,
    steps: np.ndarray,
    rad: np.ndarray,
    rad_utf8: np.ndarray,
) -> None:
    """``chain_sets_between`` of every state."""
    chain_sets_between(dfa_trans, byte_col, utf8_dfa, steps, rad, rad_utf8, 0, dfa_trans.shape[0])


@njit(cache=True, nogil=True)
def chain_sets_between(
    dfa_trans: np.ndarray,
    byte_col: np.ndarray,
    utf8_dfa: np.ndarray,
    steps: np.ndarray,
    rad: np.ndarray,
    rad_utf8: np.ndarray,
    lo: int,
    hi: int,
) -> None:
    """Per DFA state ``s`` of ``lo .. hi - 1``, what lets ``classify_tokens`` take a trie
    subtree whole; the other states are left as they are. No transition may leave the range
    (it holds whole terminals: ``runtime.MaskCache`` asks for a terminal's states when the
    first row of one of them is built).

    The *successor* ``succ(s)`` is ``s`` itself when some byte loops on ``s``, else the live
    target that the most ASCII bytes lead to (then the most bytes; ties go to the target that
    reaches the top count first): a length-counting state k of a bounded string goes to k + 1. ``steps[s]`` (uint64 [Q, 4], zero
    on entry) is the 256-bit set of bytes ``b`` with ``dfa_trans[s, b] == succ(s)``; ``rad[s]`` and
    ``rad_utf8[s]`` (uint16 [Q]) are *radii*:

    * every byte string over ``steps[s]`` of at most ``rad[s]`` bytes keeps the DFA alive from
      ``s``;
    * every string of at most ``rad_utf8[s]`` bytes whose ASCII bytes are in ``steps[s]`` and whose
      other bytes are well-formed multi-byte UTF-8 characters (the last one possibly cut short)
      keeps the DFA alive from ``s``.

    Both are sound lower bounds from a recurrence along successors: ``rad[s] = 1 + rad[succ(s)]``
    when ``steps[succ(s)]`` contains ``steps[s]`` (the first byte leads to ``succ(s)``, and the rest
    is a string over ``steps[succ(s)]``), else 1, or 0 when ``s`` has no live byte. ``rad_utf8`` is
    the same over the ASCII parts of the step sets, for *UTF-8 steps* only (0 elsewhere): states
    where every multi-byte character keeps the DFA alive on each proper prefix and ends in
    ``succ(s)`` (checked exactly by a search over (DFA state, UTF-8 state) pairs; ``utf8_dfa`` is
    ``tokenizer.trie.UTF8_DFA``, state 0 = character boundary); a successor continues the chain
    only if it is a UTF-8 step too. A chain that closes a cycle (a self-loop) has ``RAD_INF``
    everywhere it reaches; finite radii are capped at ``RAD_INF - 1``, so a trie height saturated
    at ``RAD_INF`` only passes an infinite radius. O(256 Q).
    """
    n_states = hi - lo  # the local arrays number state s as s - lo
    n_utf = utf8_dfa.shape[0]
    succ = np.full(n_states, -1, dtype=np.int64)
    utf8_step = np.zeros(n_states, dtype=np.uint8)
    weight = np.zeros(n_states, dtype=np.int64)  # per target of s: 256 per ASCII byte, 1 per other
    stamp = np.full(n_states, -1, dtype=np.int64)  # weight[t] is for the s being read
    seen = np.full((n_states, n_utf), -1, dtype=np.int64)  # stamp: the s being checked
    stack = np.empty((n_states * n_utf, 2), dtype=np.int64)
    for s in range(lo, hi):
        best = -1
        for b in range(256):
            t = dfa_trans[s, byte_col[b]]
            if t < 0:
                continue
            if stamp[t - lo] != s:
                stamp[t - lo] = s
                weight[t - lo] = 0
            weight[t - lo] += 256 if b < 0x80 else 1
            if best < 0 or weight[t - lo] > weight[best - lo]:
                best = t
        if best >= 0 and stamp[s - lo] == s:
            best = s
        succ[s - lo] = best
        if best < 0:
            continue
        for b in range(256):
            if dfa_trans[s, byte_col[b]] == best:
                steps[s, b >> 6] |= np.uint64(1) << np.uint64(b & 63)
        utf8_step[s - lo] = _utf8_step(dfa_trans, byte_col, utf8_dfa, s, best, lo, seen, stack)
    link = np.full(n_states, -1, dtype=np.int64)  # local numbers, like succ
    base = np.zeros(n_states, dtype=np.int64)
    for s in range(lo, hi):
        t = succ[s - lo]
        if t >= 0:
            base[s - lo] = 1
            if _contains(steps, t, s, 4):
                link[s - lo] = t - lo
    _chain_radii(link, base, rad, lo)
    for s in range(lo, hi):
        t = succ[s - lo]
        link[s - lo] = -1
        base[s - lo] = utf8_step[s - lo]
        if utf8_step[s - lo] and t >= 0 and utf8_step[t - lo] and _contains(steps, t, s, 2):
            link[s - lo] = t - lo
    _chain_radii(link, base, rad_utf8, lo)


@njit(cache=True, nogil=True)
def plain_info(dfa_accept, dfa_has_out, state_term, state_cap):  # noqa: ANN001, ANN201
    """``Tables.dfa_info`` with every cap column at ``NO_CAP`` and column 6 zero: a capped
    terminal's states get theirs from ``runtime._kernel_info``. One pass, one allocation."""
    n = dfa_accept.shape[0]
    info = np.empty((n, 7), np.int32)
    for q in range(n):
        info[q, 0] = dfa_accept[q]
        info[q, 1] = dfa_has_out[q]
        info[q, 2] = state_term[q]
        info[q, 3] = 1 if state_cap[q] > 0 else 0
        info[q, 4] = NO_CAP
        info[q, 5] = NO_CAP
        info[q, 6] = 0
    return info


@njit(cache=True, nogil=True)
def small_terminal(state_term, bound):  # noqa: ANN001, ANN201
    """Per state: whether its terminal has at most ``bound`` states."""
    counts = np.zeros(state_term.max() + 1 if state_term.shape[0] else 1, np.int64)
    for q in range(state_term.shape[0]):
        counts[state_term[q]] += 1
    out = np.empty(state_term.shape[0], np.bool_)
    for q in range(state_term.shape[0]):
        out[q] = counts[state_term[q]] <= bound
    return out


@njit(cache=True, nogil=True)
def chars_needed(dfa_trans, byte_col, dfa_accept, char_start, lo, hi, out):  # noqa: ANN001, ANN201
    """``out[q - lo]`` = the fewest characters started on a path from state ``q`` to an
    accepting state, for the states ``lo <= q < hi`` of one terminal (a step from ``q`` starts
    one when ``char_start[q]``): a 0-1 breadth-first search backwards from the accepting states.
    Unreachable acceptance (never, in a trimmed DFA) is left at ``NO_CAP``."""
    n = hi - lo
    deg = np.zeros(n + 1, dtype=np.int64)
    for q in range(lo, hi):
        for b in range(256):
            t = dfa_trans[q, byte_col[b]]
            if t >= 0:
                deg[t - lo + 1] += 1
    for i in range(n):
        deg[i + 1] += deg[i]
    preds = np.empty(deg[n], dtype=np.int64)
    fill = deg[:n].copy()
    for q in range(lo, hi):
        for b in range(256):
            t = dfa_trans[q, byte_col[b]]
            if t >= 0 and (b == 0 or dfa_trans[q, byte_col[b - 1]] != t):  # one edge per run is enough
                preds[fill[t - lo]] = q - lo
                fill[t - lo] += 1
    out[:n] = NO_CAP
    pushes = n + deg[n] + 1  # at most one per accepting state and one per relaxed edge
    queue = np.empty(2 * pushes, dtype=np.int64)  # a deque: 0-edges in front, 1-edges at the back
    head = tail = pushes
    for i in range(n):
        if dfa_accept[lo + i]:
            out[i] = 0
            queue[tail] = i
            tail += 1
    while head < tail:
        v = queue[head]
        head += 1
        for j in range(deg[v], fill[v]):
            u = preds[j]
            w = out[v] + (1 if char_start[lo + u] else 0)
            if w < out[u]:
                out[u] = w
                if w == out[v]:
                    head -= 1
                    queue[head] = u
                else:
                    queue[tail] = u
                    tail += 1


@njit(cache=True, nogil=True, inline="always")
def _contains(steps, t, s, words):  # noqa: ANN001, ANN202
    """The first ``words`` 64-bit words of ``steps[t]`` contain those of ``steps[s]`` (2: ASCII)."""
    for w in range(words):
        if steps[s, w] & ~steps[t, w]:
            return False
    return True


@njit(cache=True, nogil=True)
def _utf8_step(dfa_trans, byte_col, utf8_dfa, s, target, lo, seen, stack):  # noqa: ANN001, ANN202
    """Every well-formed multi-byte character read from ``s`` keeps the DFA alive on each proper
    prefix and ends in ``target``: a depth-first search over the (DFA state, UTF-8 state) pairs
    that lead bytes reach (``seen`` stamped with ``s``, its rows the states from ``lo`` on,
    ``stack`` sized for every pair)."""
    if dfa_trans[s, byte_col[0xC2]] < 0:  # a lead byte dies (cheap, common reject)
        return 0
    top = 0
    for b in range(0x80, 256):
        u = utf8_dfa[0, b]
        if u < 0:
            continue
        t = dfa_trans[s, byte_col[b]]
        if t < 0:
            return 0
        if seen[t - lo, u] != s:
            seen[t - lo, u] = s
            stack[top, 0] = t
            stack[top, 1] = u
            top += 1
    while top > 0:
        top -= 1
        t = stack[top, 0]
        u = stack[top, 1]
        for b in range(0x80, 0xC0):  # only continuation bytes leave a non-boundary state
            u2 = utf8_dfa[u, b]
            if u2 < 0:
                continue
            t2 = dfa_trans[t, byte_col[b]]
            if t2 < 0 or (u2 == 0 and t2 != target):
                return 0
            if u2 != 0 and seen[t2 - lo, u2] != s:
                seen[t2 - lo, u2] = s
                stack[top, 0] = t2
                stack[top, 1] = u2
                top += 1
    return 1


@njit(cache=True, nogil=True)
def _chain_radii(link, base, out, lo):  # noqa: ANN001, ANN202
    """``out[lo + s] = base[s]`` where ``link[s] < 0``, else ``1 + out[lo + link[s]]`` capped
    at ``RAD_INF - 1``, and ``RAD_INF`` on every chain that reaches a cycle of links. Each
    state is resolved once, by following its links to a resolved state, a chain end or a
    cycle."""
    n = link.shape[0]
    mark = np.zeros(n, dtype=np.uint8)  # 0: not seen, 1: on the current path, 2: resolved
    path = np.empty(n, dtype=np.int64)
    for s0 in range(n):
        top = 0
        s = s0
        while s >= 0 and mark[s] == 0:
            mark[s] = 1
            path[top] = s
            top += 1
            s = link[s]
        if s >= 0 and mark[s] == 1:  # the path closed a cycle at s: it and what follows on it
            while True:
                top -= 1
                out[lo + path[top]] = RAD_INF
                mark[path[top]] = 2
                if path[top] == s:
                    break
        for i in range(top - 1, -1, -1):
            p = path[i]
            t = link[p]
            if t < 0:
                out[lo + p] = base[p]
            elif out[lo + t] == RAD_INF:
                out[lo + p] = RAD_INF
            else:
                out[lo + p] = min(np.int64(out[lo + t]) + 1, RAD_INF - 1)
            mark[p] = 2


@njit(cache=True, nogil=True, inline="always")
def _subtree_stays(steps, rad, rad_utf8, s, below, below_utf8, h, k):  # noqa: ANN001, ANN202
    """Every token below trie node ``k`` (of height ``h``) keeps a DFA that is in state ``s`` at
    ``k`` alive.

    Sufficient, exact condition (see ``chain_sets``): the ASCII bytes below ``k`` are all in
    ``steps[s]`` and either the other bytes below ``k`` are too and ``h <= rad[s]``, or every path
    below ``k`` is well-formed UTF-8 (a prefix of it) and ``h <= rad_utf8[s]``. Evaluated without
    branches: the outcome varies from node to node, and mispredicted branches cost more than the
    few loads."""
    ascii_out = (below[k, 0] & ~steps[s, 0]) | (below[k, 1] & ~steps[s, 1])
    high_out = (below[k, 2] & ~steps[s, 2]) | (below[k, 3] & ~steps[s, 3])
    plain = (high_out == 0) & (h <= rad[s])
    utf8 = (below_utf8[k] != 0) & (h <= rad_utf8[s])
    return (ascii_out == 0) & (plain | utf8)


@njit(cache=True, nogil=True)
def classify_tokens(
    dfa_trans: np.ndarray,
    byte_col: np.ndarray,
    dfa_info: np.ndarray,
    steps: np.ndarray,
    rad: np.ndarray,
    rad_utf8: np.ndarray,
    q: int,
    follow: np.ndarray,
    count: int,
    room: int,
    budget: int,
    max_depth: int,
    byte: np.ndarray,
    depth: np.ndarray,
    nxt: np.ndarray,
    tok_ptr: np.ndarray,
    tok_ids: np.ndarray,
    tok_lcp: np.ndarray,
    below: np.ndarray,
    below_utf8: np.ndarray,
    height: np.ndarray,
    tok_bits: np.ndarray,
    seq_ptr: np.ndarray,
    seq_data: np.ndarray,
    flips: np.ndarray,
    accepted: np.ndarray,
    bits: np.ndarray,
    kept: np.ndarray,
    lcp: np.ndarray,
    cls: np.ndarray,
) -> tuple[int, int, int, int]:
    """The mask-cache row of a scan in DFA state ``q`` whose terminal may be followed by the bytes
    of ``follow`` (uint64 [4]), by one DFA-only walk of the token trie.

    *Accepted* tokens keep the DFA alive over all their bytes: their bits are set in ``bits``
    (uint32 words, overwritten) and, when there are at most ``len(accepted)`` of them, their ids
    are written to ``accepted`` in byte order (when there are more, the bitset is the smaller row).
    The walk itself touches no token of a subtree it accepts: it notes where, in trie order
    (``tok_ids``), accepted runs of tokens begin and end (``flips``, int32 [num_nodes + 2]), and
    the bitset is written from those runs at the end, by setting the accepted tokens' bits or by
    clearing the others' from ``tok_bits`` (the trie's tokens), whichever is fewer: a string
    body's ~120k accepted Llama-3 ids are never read one by one. The others
    are rejected whatever the parser holds unless the terminal may end inside them: after ``j >= 1``
    bytes the DFA accepts and byte ``j`` is in ``follow`` (the first such ``j``, while the DFA is
    alive, is the token's *split*). Those *uncertain* tokens are written to ``kept`` in byte order,
    as trie positions (``tok_ids[j]`` is the id: the mask walk reads their bytes in trie order),
    with ``lcp`` = common prefix length with the previous one and ``cls`` = a suffix class: two
    tokens share a class iff they reach the same DFA state at their splits and have the same bytes
    from there on. From a chart position where no other scan takes part in the parse of a token
    (``_others_dead``), the parse is then in the same state at both splits (an earlier end of the
    terminal, before a byte outside ``follow``, leads nowhere), so the parser accepts both or
    neither. Every token below a node where the DFA dies shares the node's split, so the test
    costs nothing per token.

    Where ``_subtree_stays`` holds at a live node (``steps`` / ``rad`` / ``rad_utf8`` from
    ``chain_sets``, ``below`` / ``below_utf8`` / ``height`` from the trie), the node's whole
    subtree is accepted at once, one id range, and the walk jumps past it: inside a JSON string
    body (a loop) or a ``maxLength`` string (a chain of counting states) most of the trie is never
    visited. The output is the same as without the jumps (all-zero radii turn them off).

    A scan of a capped terminal near its cap walks with its ``count`` of characters started: a
    token dies where the count passes ``dfa_info[s, 4]`` (``Tables``), and a subtree is taken whole
    only if ``count`` plus its height stays within ``room`` (the cap minus the most characters any
    state of the terminal still needs); suffix classes then also agree on the count at the split.
    Other walks pass ``count = -NO_CAP`` (never limited) and ``room = NO_CAP``. Covers at
    most ``budget`` trie nodes (a subtree taken whole counts all its nodes, so the bound means what
    it means without the jumps). Returns the numbers of accepted tokens, uncertain tokens and
    classes and of subtrees taken whole, or (-1, -1, -1, -1) when the budget runs out first.
    """
    stack = np.empty(max_depth + 2, dtype=np.int64)  # DFA state after the node at each depth
    split = np.empty(stack.shape[0], dtype=np.int64)  # split on the path to it (-1: none yet)
    counts = np.empty(stack.shape[0], dtype=np.int64)  # characters started on the path to it
    stack[0] = q
    split[0] = -1
    counts[0] = count
    done, n_acc, n_unc, n_flips, skipped = _walk_nodes(
        0, byte.shape[0], 0, budget, 0, 0, 0, 0, stack, split, counts, dfa_trans, byte_col, dfa_info,
        steps, rad, rad_utf8, follow, room, byte, depth, nxt, tok_ptr, tok_lcp, below,
        below_utf8, height, seq_ptr, seq_data, flips, kept, lcp, cls,
    )  # fmt: skip
    if not done:
        return -1, -1, -1, -1
    _write_accepted(tok_ids, tok_bits, flips, n_flips, n_acc, accepted, bits)
    counted = count > -NO_CAP
    n_cls = _number_classes(dfa_trans, byte_col, dfa_info, q, counted, seq_ptr, seq_data, kept, cls, n_unc)
    return n_acc, n_unc, n_cls, skipped


@njit(cache=True, nogil=True)
def _walk_nodes(  # noqa: ANN202
    k, stop, visited, budget, n_acc, n_unc, n_flips, skipped, stack, split, counts,  # noqa: ANN001
    dfa_trans, byte_col, dfa_info, steps, rad, rad_utf8, follow, room, byte, depth, nxt,  # noqa: ANN001
    tok_ptr, tok_lcp, below, below_utf8, height, seq_ptr, seq_data, flips, kept, lcp, cls,  # noqa: ANN001
):
    """``classify_tokens``' walk over the trie nodes ``k .. stop - 1`` (whole subtrees), the
    states, splits and counts of their parents' depths already on ``stack`` / ``split`` /
    ``counts``; appends accepted runs to ``flips`` and uncertain tokens to ``kept`` / ``lcp`` /
    ``cls``. Returns (completed within ``budget``, n_acc, n_unc, n_flips, skipped)."""
    while k < stop:
        visited += 1
        if visited > budget:
            return False, n_acc, n_unc, n_flips, skipped
        d = depth[k]
        b = byte[k]
        parent = stack[d - 1]
        at = split[d - 1]
        if at < 0 and d >= 2 and dfa_info[parent, 0] != 0 and _in_bits(follow, b):
            at = d - 1  # the terminal may end before this byte
        s2 = dfa_trans[parent, byte_col[b]]
        c = counts[d - 1] + dfa_info[parent, 3]
        if s2 >= 0 and c > dfa_info[s2, 4]:
            s2 = -1  # past the cap of a capped terminal
        if s2 >= 0:
            end = nxt[k]
            h = height[k]
            whole = (h > 0) & (c + h <= room)
            if whole & _subtree_stays(steps, rad, rad_utf8, s2, below, below_utf8, h, k):
                skipped += 1
                visited += end - k - 1
                if visited > budget:
                    return False, n_acc, n_unc, n_flips, skipped
            else:
                stack[d] = s2
                split[d] = at
                counts[d] = c
                end = k + 1
            lo, hi = tok_ptr[k], tok_ptr[end]
            if lo < hi:
                if n_flips > 0 and flips[n_flips - 1] == lo:  # extends the open run
                    flips[n_flips - 1] = hi
                else:
                    flips[n_flips] = lo
                    flips[n_flips + 1] = hi
                    n_flips += 2
                n_acc += hi - lo
            k = end
        else:
            if at >= 0:
                lo, hi = tok_ptr[k], tok_ptr[nxt[k]]
                for j in range(lo, hi):
                    kept[n_unc] = j
                    cls[n_unc] = at  # the split, until then too
                    if j > lo:  # the previous uncertain token is the previous one in the trie
                        lcp[n_unc] = tok_lcp[j]
                    elif n_unc > 0:
                        lcp[n_unc] = _common_prefix(seq_ptr, seq_data, kept[n_unc - 1], j)
                    else:
                        lcp[n_unc] = 0
                    n_unc += 1
            k = nxt[k]
    return True, n_acc, n_unc, n_flips, skipped


@njit(cache=True, nogil=True)
def loop_plan(steps, rad, rad_utf8, q, utf8, utf8_dfa, max_depth, byte, depth, nxt, tok_ptr,  # noqa: ANN001, ANN201
              tok_ids, below, below_utf8, height, bits, exits):  # noqa: ANN001
    """The part of ``classify_tokens``' walk from a self-looping state ``q`` that depends only on
    ``q``'s step set and radii: the *spine* and its *exits*. A node is on the spine when the DFA
    is in ``q`` below it (its byte loops on ``q``) or, with ``utf8`` (``q`` reads every
    multi-byte character back to ``q`` without accepting on the way: ``loops_through_utf8``),
    inside or at the end of a well-formed character read from ``q`` (``utf8_dfa`` = the trie's
    ``UTF8_DFA``). An exit is the first node off the spine on a path. Every token that ends on
    the spine or in a subtree taken whole from it (in ``q``, as ``_subtree_stays`` allows) is
    accepted: they are set in ``bits`` (uint32 words, overwritten). ``exits`` (int32 [num_nodes,
    3]) gets each exit, the depth where its character began (the DFA was in ``q`` there) and the
    steps before that depth (bytes, or with ``utf8`` characters), in trie order. Returns the
    numbers of exits, of accepted tokens and of subtrees taken whole. Every state with the same
    step set, radii and ``utf8`` has the same plan (``classify_loop_tokens``), whatever it does
    past the exits."""
    bits[:] = 0
    n = byte.shape[0]
    u = np.zeros(max_depth + 2, dtype=np.int64)  # UTF-8 state after each depth of the path
    started = np.zeros(max_depth + 2, dtype=np.int64)  # steps started up to each depth
    n_exits = 0
    n_acc = 0
    n_whole = 0
    k = 0
    while k < n:
        d = depth[k]
        b = byte[k]
        inside = u[d - 1]  # > 0: the node's parent is inside a character read from q
        end = k + 1
        if inside == 0 and _in_bits(steps[q], b):
            u[d] = 0
        elif utf8 and utf8_dfa[inside, b] >= 0 and (inside > 0 or b >= 0xC0):
            u[d] = utf8_dfa[inside, b]  # 0: the character is whole, the DFA is back in q
        else:
            exits[n_exits, 0] = k
            start = d - 1
            while u[start] > 0:
                start -= 1
            exits[n_exits, 1] = start
            exits[n_exits, 2] = started[start]
            n_exits += 1
            k = nxt[k]
            continue
        started[d] = started[d - 1] + (inside == 0)
        h = height[k]
        if u[d] == 0 and h > 0 and _subtree_stays(steps, rad, rad_utf8, q, below, below_utf8, h, k):
            end = nxt[k]
            n_whole += 1
        for j in range(tok_ptr[k], tok_ptr[end]):
            t = tok_ids[j]
            bits[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
        n_acc += tok_ptr[end] - tok_ptr[k]
        k = end
    return n_exits, n_acc, n_whole


_UTF8_PAIRS = 1024  # loops_through_utf8: (DFA state, UTF-8 state) pairs it may track


@njit(cache=True, nogil=True, inline="always")
def _utf8_visit(dfa_trans, byte_col, dfa_info, q, s, u, b, utf8_dfa, table, stack, top):  # noqa: ANN001, ANN202
    """One byte ``b`` from pair (``s``, ``u``) for ``loops_through_utf8``: the new stack top, or
    -1 when the byte breaks the loop (or the table is full)."""
    u2 = utf8_dfa[u, b]
    if u2 < 0:
        return top  # not a character: the loop promises nothing about it
    t = dfa_trans[s, byte_col[b]]
    if u2 == 0:
        return top if t == q else -1
    if t < 0 or dfa_info[t, 0] != 0:
        return -1
    key = t * 8 + u2
    mask = table.shape[0] - 1
    slot = (key * 0x9E3779B1) & mask
    while table[slot] >= 0 and table[slot] != key:
        slot = (slot + 1) & mask
    if table[slot] < 0:
        if top == stack.shape[0]:
            return -1
        table[slot] = key
        stack[top, 0] = t
        stack[top, 1] = u2
        top += 1
    return top


@njit(cache=True, nogil=True)
def loops_through_utf8(dfa_trans, byte_col, dfa_info, utf8_dfa, q):  # noqa: ANN001, ANN201
    """Every well-formed multi-byte character read from ``q`` stays alive, passes no accepting
    state and ends in ``q``: a depth-first search over the (DFA state, UTF-8 state) pairs lead
    bytes reach, in a table of ``_UTF8_PAIRS`` (False, the safe answer, past that; a JSON string
    reaches ~10)."""
    table = np.full(2 * _UTF8_PAIRS, -1, dtype=np.int64)  # open addressing: the pairs pushed
    stack = np.empty((_UTF8_PAIRS, 2), dtype=np.int64)
    top = 0
    for b in range(0xC0, 0x100):
        top = _utf8_visit(dfa_trans, byte_col, dfa_info, q, q, 0, b, utf8_dfa, table, stack, top)
        if top < 0:
            return False
    done = 0  # pairs are expanded in push order; each is pushed once
    while done < top:
        s, u = stack[done, 0], stack[done, 1]
        done += 1
        for b in range(0x80, 0xC0):  # only continuation bytes leave a started character
            top = _utf8_visit(dfa_trans, byte_col, dfa_info, q, s, u, b, utf8_dfa, table, stack, top)
            if top < 0:
                return False
    return True


@njit(cache=True, nogil=True)
def _walk_below(k, p, n_unc, skipped, stack, split, counts, dfa_trans, byte_col, dfa_info, steps, rad,  # noqa: ANN001, ANN202
                rad_utf8, follow, byte, depth, nxt, tok_ptr, tok_ids, tok_lcp, below, below_utf8,  # noqa: ANN001
                height, seq_ptr, seq_data, flips, bits, kept, lcp, cls):  # noqa: ANN001
    """``classify_tokens``' walk of node ``k``'s subtree, its parent in state ``p`` with no split
    on the way, setting the accepted tokens in ``bits``: (accepted, n_unc, skipped)."""
    d = depth[k]
    stack[d - 1] = p
    split[d - 1] = -1
    counts[d - 1] = -NO_CAP
    _, n_sub, n_unc, n_flips, skipped = _walk_nodes(
        k, nxt[k], 0, NO_CAP, 0, n_unc, 0, skipped, stack, split, counts, dfa_trans, byte_col, dfa_info,
        steps, rad, rad_utf8, follow, NO_CAP, byte, depth, nxt, tok_ptr, tok_lcp, below,
        below_utf8, height, seq_ptr, seq_data, flips, kept, lcp, cls,
    )  # fmt: skip
    for r in range(0, n_flips, 2):
        for j in range(flips[r], flips[r + 1]):
            t = tok_ids[j]
            bits[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
    return n_sub, n_unc, skipped


@njit(cache=True, nogil=True)
def classify_loop_tokens(
    plan_exits: np.ndarray,
    plan_bits: np.ndarray,
    plan_acc: int,
    plan_whole: int,
    dfa_trans: np.ndarray,
    byte_col: np.ndarray,
    dfa_info: np.ndarray,
    steps: np.ndarray,
    rad: np.ndarray,
    rad_utf8: np.ndarray,
    q: int,
    loop: int,
    follow: np.ndarray,
    max_depth: int,
    byte: np.ndarray,
    depth: np.ndarray,
    nxt: np.ndarray,
    tok_ptr: np.ndarray,
    tok_ids: np.ndarray,
    tok_lcp: np.ndarray,
    below: np.ndarray,
    below_utf8: np.ndarray,
    height: np.ndarray,
    seq_ptr: np.ndarray,
    seq_data: np.ndarray,
    flips: np.ndarray,
    bits: np.ndarray,
    kept: np.ndarray,
    lcp: np.ndarray,
    cls: np.ndarray,
) -> tuple[int, int, int, int]:
    """``classify_tokens``' row of state ``q`` (uncapped, no budget) from the ``loop_plan`` of
    ``loop``, a self-looping, non-accepting state that ``q`` is or steps to on its step bytes.

    The row is the spine's accepted tokens (``plan_bits``, ``plan_acc`` of them, ``plan_whole``
    subtrees taken whole) plus a walk below each exit that keeps the DFA alive, from the state
    its path reaches (``loop`` stepped over the bytes since its character began). No state on
    the spine accepts, so the spine never splits, and an exit whose byte kills the DFA rejects
    its whole subtree. Below a first byte ``b``, ``q``'s walk is ``loop``'s where both step to
    the same state on ``b`` (``q``'s own accept flag never matters: a split needs a byte
    before it); the other first bytes' subtrees lose the plan's tokens and are walked from
    ``q``. A JSON string body's walk reads its exits (~1.5k for Llama-3, most of them dead at
    once) instead of ~13k nodes. Writes the bitset only (the plan is used when the accepted
    tokens outnumber its words); returns as ``classify_tokens``."""
    stack = np.empty(max_depth + 2, dtype=np.int64)
    split = np.empty(stack.shape[0], dtype=np.int64)
    counts = np.empty(stack.shape[0], dtype=np.int64)
    bits[:] = plan_bits
    n_acc = plan_acc
    n_unc = 0
    skipped = plan_whole
    n_exits = plan_exits.shape[0]
    e = 0
    k1 = 0  # the first-byte nodes, in order
    while k1 < byte.shape[0]:
        end1 = nxt[k1]
        b = byte[k1]
        if dfa_trans[q, byte_col[b]] == dfa_trans[loop, byte_col[b]]:
            while e < n_exits and plan_exits[e, 0] < end1:
                k = plan_exits[e, 0]
                first = seq_ptr[tok_ptr[k]]  # the path to k: a token below k starts with it
                p = _read(dfa_trans, byte_col, loop, seq_data, first + plan_exits[e, 1], first + depth[k] - 1)
                e += 1
                if dfa_trans[p, byte_col[byte[k]]] >= 0:
                    n_sub, n_unc, skipped = _walk_below(
                        k, p, n_unc, skipped, stack, split, counts, dfa_trans, byte_col, dfa_info, steps,
                        rad, rad_utf8, follow, byte, depth, nxt, tok_ptr, tok_ids, tok_lcp, below,
                        below_utf8, height, seq_ptr, seq_data, flips, bits, kept, lcp, cls,
                    )  # fmt: skip
                    n_acc += n_sub
        else:
            for j in range(tok_ptr[k1], tok_ptr[end1]):
                t = tok_ids[j]
                m = np.uint32(1) << np.uint32(t & 31)
                if bits[t >> 5] & m:
                    bits[t >> 5] &= ~m
                    n_acc -= 1
            while e < n_exits and plan_exits[e, 0] < end1:
                e += 1
            if dfa_trans[q, byte_col[b]] >= 0:
                n_sub, n_unc, skipped = _walk_below(
                    k1, q, n_unc, skipped, stack, split, counts, dfa_trans, byte_col, dfa_info, steps, rad,
                    rad_utf8, follow, byte, depth, nxt, tok_ptr, tok_ids, tok_lcp, below,
                    below_utf8, height, seq_ptr, seq_data, flips, bits, kept, lcp, cls,
                )  # fmt: skip
                n_acc += n_sub
        k1 = end1
    n_cls = _number_classes(dfa_trans, byte_col, dfa_info, q, False, seq_ptr, seq_data, kept, cls, n_unc)
    return n_acc, n_unc, n_cls, skipped


@njit(cache=True, nogil=True, inline="always")
def _read(dfa_trans, byte_col, s, data, lo, hi):  # noqa: ANN001, ANN202
    """The state ``s`` steps to over ``data[lo:hi]`` (-1 once dead)."""
    for i in range(lo, hi):
        if s < 0:
            break
        s = dfa_trans[s, byte_col[data[i]]]
    return s


@njit(cache=True, nogil=True)
def spine_by_steps(bits, utf8, tok_ids, seq_ptr, seq_data, ids, ptr):  # noqa: ANN001, ANN201
    """A ``loop_plan``'s accepted tokens (``bits``) ordered by the steps their bytes start: one per
    byte, or with ``utf8`` one per byte that is not a UTF-8 continuation byte (a character).
    ``ids[ptr[c]:ptr[c + 1]]`` are the ids that start ``c`` steps (``ptr``: int64 [max_depth +
    2]); returns how many there are. ``classify_chain_tokens`` keeps those a counter has room for."""
    n = tok_ids.shape[0]
    steps_of = np.full(n, -1, dtype=np.int64)
    ptr[:] = 0
    for j in range(n):
        t = tok_ids[j]
        if (bits[t >> 5] >> np.uint32(t & 31)) & np.uint32(1):
            c = seq_ptr[j + 1] - seq_ptr[j]
            if utf8:
                c = 0
                for i in range(seq_ptr[j], seq_ptr[j + 1]):
                    c += (seq_data[i] & 0xC0) != 0x80
            steps_of[j] = c
            ptr[c + 1] += 1
    for c in range(1, ptr.shape[0]):
        ptr[c] += ptr[c - 1]
    fill = ptr[:-1].copy()
    for j in range(n):
        c = steps_of[j]
        if c >= 0:
            ids[fill[c]] = tok_ids[j]
            fill[c] += 1
    return ptr[-1]


@njit(cache=True, nogil=True)
def chain_states(dfa_trans, byte_col, dfa_info, steps, rad_utf8, follow, q, chain):  # noqa: ANN001, ANN201
    """Whether ``classify_chain_tokens`` can build ``q``'s row from the ``loop_plan`` of ``q``'s
    step set, as if ``q`` looped on it, and the chain it then reads.

    The *chain* is ``chain[0] = q`` and each next state the successor of the one before
    (``chain_sets``), as long as the states have ``q``'s step set: a counter (``maxLength``
    string) steps from k characters left to k - 1 on any character. Its *end* ``chain[m]`` is
    the first state with another step set (``m`` = the room: characters the counter still
    reads), or the state after ``len(chain) - 1`` steps when no token reads further. With
    ``utf8`` (every chain state steps to the next on every multi-byte character:
    ``rad_utf8 > 0``) a step is a character, else a byte. The plan's spine describes the chain
    up to its end when:

    * the end is *closed*: it dies on every step byte (and, with ``utf8``, every lead byte), so
      a token that starts more than ``m`` steps is rejected;
    * no token on the spine may end the terminal before a spine byte: where a chain state after
      the first accepts, no step byte follows the terminal, and with ``utf8`` no byte >= 0x80.

    Returns (m, utf8), or (-1, False) where the plan does not apply."""
    limit = chain.shape[0] - 1
    if not (steps[q, 0] | steps[q, 1] | steps[q, 2] | steps[q, 3]):
        return -1, False
    utf8 = True
    accepting = False
    s = q
    m = 0
    while m < limit:
        chain[m] = s
        if not (steps[s, 0] == steps[q, 0] and steps[s, 1] == steps[q, 1]
                and steps[s, 2] == steps[q, 2] and steps[s, 3] == steps[q, 3]):
            break
        utf8 = utf8 and rad_utf8[s] > 0
        for b in range(256):  # the successor: where any step byte leads
            if _in_set(steps, q, b):
                s = dfa_trans[s, byte_col[b]]
                break
        m += 1
        accepting = accepting or dfa_info[s, 0] != 0
    chain[m] = s
    if m == 0:
        return -1, False
    if accepting:
        for w in range(4):
            if follow[w] & steps[q, w]:
                return -1, False
    if utf8 and (follow[2] | follow[3]):
        return -1, False
    if m < limit:
        for b in range(256):
            lead = utf8 and 0xC2 <= b <= 0xF4
            if (lead or _in_set(steps, q, b)) and dfa_trans[s, byte_col[b]] >= 0:
                return -1, False
    return m, utf8


@njit(cache=True, nogil=True)
def classify_chain_tokens(
    plan_exits: np.ndarray,
    plan_bits: np.ndarray,
    spine_ids: np.ndarray,
    spine_ptr: np.ndarray,
    plan_whole: int,
    chain: np.ndarray,
    m: int,
    utf8: bool,
    dfa_trans: np.ndarray,
    byte_col: np.ndarray,
    dfa_info: np.ndarray,
    steps: np.ndarray,
    rad: np.ndarray,
    rad_utf8: np.ndarray,
    follow: np.ndarray,
    max_depth: int,
    byte: np.ndarray,
    depth: np.ndarray,
    nxt: np.ndarray,
    tok_ptr: np.ndarray,
    tok_ids: np.ndarray,
    tok_lcp: np.ndarray,
    below: np.ndarray,
    below_utf8: np.ndarray,
    height: np.ndarray,
    seq_ptr: np.ndarray,
    seq_data: np.ndarray,
    flips: np.ndarray,
    accepted: np.ndarray,
    bits: np.ndarray,
    kept: np.ndarray,
    lcp: np.ndarray,
    cls: np.ndarray,
) -> tuple[int, int, int, int]:
    """``classify_tokens``' row of ``chain[0]`` (uncapped, no budget) from the ``loop_plan`` of its
    step set (``utf8`` as the plan's), where ``chain_states`` found the chain ``chain[:m + 1]``.

    A token that stays on the spine and starts ``c`` steps is in ``chain[c]`` (inside the
    character it started, with ``utf8``) where it ends: it is accepted when ``c <= m``
    (``spine_by_steps`` lists them by ``c``, so the bits are set from the few kept or cleared
    from the plan's for the few dropped), and rejected past the closed end. Below each exit
    whose character began after ``j <= m`` steps, the walk goes on from ``chain[j]`` stepped over
    the bytes since; exits later on a path are rejected with it. A maxLength string with a few
    characters left reads ~1.5k exits (Llama-3) instead of the ~100k trie nodes within its reach
    that a walk could not take whole. Writes the bitset, and the accepted ids in id order when
    they fit in ``accepted``; returns as ``classify_tokens``."""
    stack = np.empty(max_depth + 2, dtype=np.int64)
    split = np.empty(stack.shape[0], dtype=np.int64)
    counts = np.empty(stack.shape[0], dtype=np.int64)
    keep = spine_ptr[m + 1]
    total = spine_ids.shape[0]
    if 2 * keep <= total:
        bits[:] = 0
        for i in range(keep):
            t = spine_ids[i]
            bits[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
    else:
        bits[:] = plan_bits
        for i in range(keep, total):
            t = spine_ids[i]
            bits[t >> 5] &= ~(np.uint32(1) << np.uint32(t & 31))
    n_acc = keep
    n_unc = 0
    skipped = plan_whole
    for e in range(plan_exits.shape[0]):
        k = plan_exits[e, 0]
        start = plan_exits[e, 1]
        j = plan_exits[e, 2]
        if j > m:
            continue
        p = chain[j]
        if start < depth[k] - 1:  # k is inside a character: read its first bytes
            first = seq_ptr[tok_ptr[k]]  # the path to k: a token below k starts with it
            p = _read(dfa_trans, byte_col, p, seq_data, first + start, first + depth[k] - 1)
            if p < 0:
                continue
        b = byte[k]
        ends = depth[k] >= 2 and dfa_info[p, 0] != 0 and _in_bits(follow, b)  # a split at k
        if dfa_trans[p, byte_col[b]] >= 0 or ends:  # (most exits die at once)
            n_sub, n_unc, skipped = _walk_below(
                k, p, n_unc, skipped, stack, split, counts, dfa_trans, byte_col, dfa_info, steps, rad,
                rad_utf8, follow, byte, depth, nxt, tok_ptr, tok_ids, tok_lcp, below,
                below_utf8, height, seq_ptr, seq_data, flips, bits, kept, lcp, cls,
            )  # fmt: skip
            n_acc += n_sub
    if n_acc <= accepted.shape[0]:
        i = 0
        for w in range(bits.shape[0]):
            word = bits[w]
            while word:
                low = word & (~word + np.uint32(1))  # the lowest set bit
                accepted[i] = 32 * w + _bit_index(low)
                i += 1
                word ^= low
    n_cls = _number_classes(
        dfa_trans, byte_col, dfa_info, chain[0], False, seq_ptr, seq_data, kept, cls, n_unc
    )
    return n_acc, n_unc, n_cls, skipped


@njit(cache=True, nogil=True, inline="always")
def _bit_index(low):  # noqa: ANN001, ANN202
    """The index of the one set bit of ``low`` (uint32)."""
    i = 0
    while low > np.uint32(1):
        low >>= np.uint32(1)
        i += 1
    return i


@njit(cache=True, nogil=True)
def _write_accepted(tok_ids, tok_bits, flips, n_flips, n_acc, accepted, bits):  # noqa: ANN001, ANN202
    """``bits`` (and ``accepted`` when the ids fit) from the accepted runs of ``classify_tokens``:
    set the bits of the ``n_acc`` run tokens, or, when the tokens outside the runs are fewer,
    start from every trie token (``tok_bits``) and clear theirs."""
    if n_acc <= accepted.shape[0]:
        i = 0
        for r in range(0, n_flips, 2):
            for j in range(flips[r], flips[r + 1]):
                accepted[i] = tok_ids[j]
                i += 1
    if 2 * n_acc <= tok_ids.shape[0]:
        bits[:] = 0
        for r in range(0, n_flips, 2):
            for j in range(flips[r], flips[r + 1]):
                t = tok_ids[j]
                bits[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
        return
    m = min(bits.shape[0], tok_bits.shape[0])
    bits[:] = 0
    bits[:m] = tok_bits[:m]
    prev = 0
    for r in range(0, n_flips + 1, 2):
        stop = flips[r] if r < n_flips else tok_ids.shape[0]
        for j in range(prev, stop):
            t = tok_ids[j]
            bits[t >> 5] &= ~(np.uint32(1) << np.uint32(t & 31))
        if r < n_flips:
            prev = flips[r + 1]


@njit(cache=True, nogil=True, inline="always")
def _common_prefix(seq_ptr, seq_data, a, b):  # noqa: ANN001, ANN202
    """Bytes the tokens at trie positions ``a`` and ``b`` share at the start."""
    a0, a1 = seq_ptr[a], seq_ptr[a + 1]
    b0, b1 = seq_ptr[b], seq_ptr[b + 1]
    shared = 0
    while a0 + shared < a1 and b0 + shared < b1:
        if seq_data[a0 + shared] != seq_data[b0 + shared]:
            break
        shared += 1
    return shared


@njit(cache=True, nogil=True)
def _number_classes(dfa_trans, byte_col, dfa_info, q, counted, seq_ptr, seq_data, tokens, cls, n):  # noqa: ANN001, ANN202
    """Number the suffix classes of the tokens at trie positions ``tokens[:n]`` (their bytes are
    ``seq_data[seq_ptr[j]:seq_ptr[j + 1]]``, read in trie order): on entry ``cls[i]`` is token
    i's split, on exit its class (equal DFA state from ``q`` at the split, with ``counted`` also
    equal characters started before it, and equal bytes from there on), compared exactly
    through an open-addressing table. Returns the number of classes."""
    size = 16
    while size < 2 * n:
        size *= 2
    slot_rep = np.full(size, -1, dtype=np.int64)  # a representative (index i) per slot ...
    slot_state = np.empty(size, dtype=np.int64)  # ... its state and split at the split
    slot_split = np.empty(size, dtype=np.int64)
    slot_count = np.empty(size, dtype=np.int64)
    slot_cls = np.empty(size, dtype=np.int64)
    n_cls = 0
    for i in range(n):
        t = tokens[i]
        split = cls[i]
        lo = seq_ptr[t] + split
        hi = seq_ptr[t + 1]
        state = q
        chars = 0
        for p in range(seq_ptr[t], lo):
            chars += dfa_info[state, 3]
            state = dfa_trans[state, byte_col[seq_data[p]]]
        if not counted:
            chars = 0
        h = np.uint64(state * 1024 + chars) * np.uint64(0x9E3779B97F4A7C15)
        for p in range(lo, hi):
            h = (h ^ np.uint64(seq_data[p])) * np.uint64(0x100000001B3)
        h ^= h >> np.uint64(33)  # finalizer (MurmurHash3's fmix64): spread into the low bits
        h *= np.uint64(0xFF51AFD7ED558CCD)
        h ^= h >> np.uint64(33)
        slot = np.int64(h & np.uint64(size - 1))
        while True:
            r = slot_rep[slot]
            if r < 0:
                slot_rep[slot] = i
                slot_state[slot] = state
                slot_split[slot] = split
                slot_count[slot] = chars
                slot_cls[slot] = n_cls
                cls[i] = n_cls
                n_cls += 1
                break
            r_lo = seq_ptr[tokens[r]] + slot_split[slot]
            same = (slot_state[slot] == state and slot_count[slot] == chars
                    and seq_ptr[tokens[r] + 1] - r_lo == hi - lo)
            if same:
                for p in range(hi - lo):
                    if seq_data[r_lo + p] != seq_data[lo + p]:
                        same = False
                        break
            if same:
                cls[i] = slot_cls[slot]
                break
            slot = (slot + 1) & (size - 1)
    return n_cls


@njit(cache=True, nogil=True)
def sub_dfa_signature(
    dfa_trans: np.ndarray,
    byte_col: np.ndarray,
    dfa_info: np.ndarray,
    q: int,
    order: np.ndarray,
    label: np.ndarray,
    out: np.ndarray,
) -> int:
    """Canonical encoding of the sub-automaton reachable from DFA state ``q`` into ``out``.

    States are renumbered in breadth-first order from ``q`` (0), visiting bytes in increasing order;
    each state is written as ``-1 - accept`` followed by one ``(first byte, run length, target)``
    triple per maximal run of bytes with the same live target. Two states get equal encodings iff
    their reachable sub-automata (transitions and accept flags, all ``classify_tokens`` reads) are
    isomorphic, so equal encodings mean equal mask-cache rows for any vocabulary.

    ``order`` (int32, its length bounds the number of states) is scratch; ``label`` (int32 [Q]) must
    be all -1 and is all -1 again on return. Returns the encoding length, or -1 when the
    sub-automaton has more states than ``order`` or its encoding does not fit ``out``.
    """
    cap = out.shape[0]
    label[q] = 0
    order[0] = q
    n_states = 1
    n = 0
    i = 0
    ok = True
    while ok and i < n_states:
        s = order[i]
        i += 1
        if n >= cap:
            ok = False
            break
        out[n] = -1 - (dfa_info[s, 0] != 0)
        n += 1
        b = 0
        while b < 256:
            t = dfa_trans[s, byte_col[b]]
            e = b + 1
            while e < 256 and dfa_trans[s, byte_col[e]] == t:
                e += 1
            if t >= 0:
                if label[t] < 0:
                    if n_states >= order.shape[0]:
                        ok = False
                        break
                    label[t] = n_states
                    order[n_states] = t
                    n_states += 1
                if n + 3 > cap:
                    ok = False
                    break
                out[n] = b
                out[n + 1] = e - b
                out[n + 2] = label[t]
                n += 3
            b = e
    for j in range(n_states):
        label[order[j]] = -1
    return n if ok else -1
