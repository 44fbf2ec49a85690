"""The loops of DFA construction as numba kernels: ``canonical`` (all of
``automata.canonical_table`` in one call: column classes, trim, Hopcroft's partition refinement,
quotient, breadth-first numbering), the subset construction (``subset_construction``: the kernel
with its bounds as errors) and the product construction. ``automata`` documents the contracts and
builds the flat inputs; these functions run the loops.

Partition data structures (``refine``; all ``int64`` arrays over states or blocks)::

    elems   [n]   states, each block contiguous: block b is elems[first[b]:end[b]]
    where   [n]   position of state s in elems
    block   [n]   block of state s
    marked  [B]   how many states at the front of block b are marked by the current splitter

A splitter is a whole block with all symbols at once: its incoming transitions are bucketed by
symbol (``_bucket``), and each symbol's sources mark their blocks; a marked block that is not
marked whole is split, the marked part becoming a new block. Hopcroft's rule puts the new block
on the work list if its parent is there, else the smaller half. The result is the coarsest
partition compatible with acceptance (the minimal DFA), whatever order the work list is
processed in.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from grammarsd.errors import GrammarTooLargeError

SUBSET_WORK_LIMIT = 1 << 24
"""Bound on one subset construction's work: NFA states its epsilon closures visit plus the edge
events its row sweeps sort. Over all 4,691 MaskBench schemas the most any construction takes is
~3.3M (a 5.9k-state pattern; a 27k-state terminal takes 0.7M); ``((a{1,20}){1,20}){1,20}`` takes
~100M (14 s) for 8k states, each a set of thousands of NFA states, so the bound on states alone
would let such a pattern run for minutes (now refused after ~1-3 s)."""


@njit(cache=True, nogil=True)
def canonical(trans: np.ndarray,
              accept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """``automata.canonical_table`` on a C-contiguous int32 table and a bool vector.

    The passes run on the distinct columns only (``column_classes``) and the result is
    expanded back at the end, run by run; the output does not depend on that grouping."""
    starts, run_class, minimal, accepting = _minimal_by_columns(trans, accept)
    return _expanded(minimal, starts, run_class, trans.shape[1]), accepting


@njit(cache=True, nogil=True)
def canonical_packed(trans: np.ndarray, accept: np.ndarray) -> tuple[
        np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """``canonical`` of a byte table (256 columns) packed by byte class, as
    ``dfa_cache.PackedDfa.pack`` would pack it (classes uint8 [256] numbered by first
    occurrence, one column per class): ``(accept, classes, table)``, where
    ``table[:, classes]`` is ``canonical``'s table. The classes come from the minimal table's
    distinct columns over the input's few classes, not from another pass over 256 columns;
    the byte table is not written (the DFA cache keeps the packed one only: 1.1 GB of byte
    rows over MaskBench's paired schemas that nobody read)."""
    starts, run_class, minimal, accepting = _minimal_by_columns(trans, accept)
    classes, table = _packed(minimal, _class_of_column(starts, run_class))
    return accepting, classes, table


_EACH_BYTE = np.arange(256, dtype=np.int64)


@njit(cache=True, nogil=True)
def canonical_packed_dag(trans: np.ndarray, accept: np.ndarray, closed: np.ndarray,
                         column_of_byte: np.ndarray) -> tuple[
        np.ndarray, np.ndarray, np.ndarray] | None:  # pragma: no cover - compiled
    """``canonical_packed`` of a table over byte columns (``column_of_byte``: int64 [256], the
    columns numbered by first byte; ``np.arange(256)`` for a byte table) whose rows outside
    ``closed`` (bool [n]) form a DAG over the closed rows, which lead only to closed rows: a
    trie in front of a loop. None where the open rows reachable from 0 hold a cycle.

    The closed part is minimised by partition refinement; every open state is then merged
    bottom-up, in postorder, with the state whose row it equals once its targets are replaced
    by their classes (an acyclic DFA's minimisation, Revuz 1992): two states are equivalent iff
    they accept alike and their targets are, which by induction is iff those rows are equal.
    A trie's rows are walked once and hashed once instead of refined: linear in the table."""
    starts, run_class, first = column_classes(trans)
    reduced = np.empty((trans.shape[0], first.shape[0]), np.int32)
    for r in range(trans.shape[0]):
        for j in range(first.shape[0]):
            reduced[r, j] = trans[r, first[j]]
    found = _minimal_dag(reduced, accept, closed)
    if found is None:
        return None
    minimal, accepting = found
    class_of_column = _class_of_column(starts, run_class)
    classes, table = _packed(minimal, class_of_column[column_of_byte])
    return accepting, classes, table


@njit(cache=True, nogil=True)
def _minimal_dag(trans: np.ndarray, accept: np.ndarray, closed: np.ndarray) -> tuple[
        np.ndarray, np.ndarray] | None:  # pragma: no cover - compiled
    """The minimal DFA of ``canonical_packed_dag``'s table (over any columns), numbered
    breadth-first; None where the open part has a cycle."""
    n, width = trans.shape
    # the closed part: trimmed, refined; rep[s] its class (-1 dead), -2 open and not yet seen
    members = np.flatnonzero(closed)
    sub_id = np.full(n, -1, np.int64)
    for i in range(members.shape[0]):
        sub_id[members[i]] = i
    sub = np.empty((members.shape[0], width), np.int32)
    for i in range(members.shape[0]):
        for c in range(width):
            t = trans[members[i], c]
            if t >= 0 and sub_id[t] < 0:
                raise ValueError("a closed row leads out of the closed rows")
            sub[i, c] = sub_id[t] if t >= 0 else -1
    sub_accept = accept[members]
    live = _coreachable(sub, sub_accept)
    kept = _restrict(sub, live)
    block = _hopcroft(kept, sub_accept[live])
    rep = np.full(n, -2, np.int64)
    rows = np.empty((n, width), np.int32)  # a row per class so far (at most one per state)
    row_accept = np.empty(n, np.bool_)
    num = 0
    k = 0
    first_of = np.full(members.shape[0], -1, np.int64)  # a member of each block
    for i in range(members.shape[0]):
        if live[i]:
            b = block[k]
            k += 1
            rep[members[i]] = b
            num = max(num, b + 1)
            if first_of[b] < 0:
                first_of[b] = members[i]
        else:
            rep[members[i]] = -1
    cap = 2
    while cap < 2 * (num + n):
        cap *= 2
    slots = np.full(cap, -1, np.int64)
    hashes = np.empty(n, np.int64)
    for b in range(num):
        s = first_of[b]
        for c in range(width):
            t = trans[s, c]
            rows[b, c] = rep[t] if t >= 0 else -1
        row_accept[b] = accept[s]
        _insert_row(rows, row_accept, hashes, slots, b)
    # the open part, in postorder from 0
    state = np.zeros(n, np.int8)  # 1 on the stack, 2 done
    stack = np.empty(n, np.int64)
    next_col = np.empty(n, np.int64)
    top = 0
    if not closed[0]:
        stack[0] = 0
        next_col[0] = 0
        state[0] = 1
        top = 1
    while top:
        u = stack[top - 1]
        c = next_col[top - 1]
        pushed = False
        while c < width:
            t = trans[u, c]
            c += 1
            if t >= 0 and not closed[t] and state[t] != 2:
                if state[t] == 1:
                    return None
                next_col[top - 1] = c
                stack[top] = t
                next_col[top] = 0
                state[t] = 1
                top += 1
                pushed = True
                break
        if pushed:
            continue
        top -= 1
        state[u] = 2
        dead = not accept[u]
        for c in range(width):
            t = trans[u, c]
            rows[num, c] = rep[t] if t >= 0 else -1
            dead = dead and rows[num, c] < 0
        if dead:
            rep[u] = -1
            continue
        row_accept[num] = accept[u]
        rep[u] = _insert_row(rows, row_accept, hashes, slots, num)
        if rep[u] == num:
            num += 1
    if rep[0] < 0:  # the empty language: one state, no way out
        return np.full((1, width), -1, np.int32), np.zeros(1, np.bool_)
    return _numbered(rows[:num], row_accept[:num], rep[0])


@njit(cache=True, nogil=True)
def _insert_row(rows: np.ndarray, row_accept: np.ndarray, hashes: np.ndarray, slots: np.ndarray,
                r: int) -> int:  # pragma: no cover - compiled
    """The first of ``rows`` equal to row ``r`` (with its acceptance), ``r`` itself (then
    entered in the open-addressing table ``slots``) if none is."""
    h = np.int64(1469598103934665603) ^ np.int64(row_accept[r])
    for c in range(rows.shape[1]):
        h = (h ^ rows[r, c]) * np.int64(1099511628211)
    hashes[r] = h
    cap = slots.shape[0]
    i = (h ^ (h >> 31)) & (cap - 1)
    while slots[i] >= 0:
        o = slots[i]
        if hashes[o] == h and row_accept[o] == row_accept[r]:
            c = 0
            while c < rows.shape[1] and rows[o, c] == rows[r, c]:
                c += 1
            if c == rows.shape[1]:
                return o
        i = (i + 1) & (cap - 1)
    slots[i] = r
    return r


@njit(cache=True, nogil=True)
def _coreachable(trans: np.ndarray, accept: np.ndarray) -> np.ndarray:  # pragma: no cover
    """The states that can reach an accepting state (bool [n]), reachable from 0 or not."""
    n = trans.shape[0]
    ptr, _, src = _in_edges(trans)
    live = accept.copy()
    stack = np.flatnonzero(accept)
    stack = np.concatenate((stack, np.empty(n - stack.shape[0], np.int64)))
    top = int(accept.sum())
    while top:
        top -= 1
        t = stack[top]
        for j in range(ptr[t], ptr[t + 1]):
            s = src[j]
            if not live[s]:
                live[s] = True
                stack[top] = s
                top += 1
    return live


@njit(cache=True, nogil=True)
def byte_packing(trans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """A byte table (256 columns) packed as ``dfa_cache.PackedDfa`` stores it:
    ``(classes uint8 [256], table)``, one column per distinct column, numbered by first
    occurrence."""
    return _packed(trans, _EACH_BYTE)


@njit(cache=True, nogil=True)
def _class_of_column(starts: np.ndarray, run_class: np.ndarray) -> np.ndarray:  # pragma: no cover
    """``column_classes``' runs written out: the class of each column (int64)."""
    out = np.empty(starts[-1], np.int64)
    for u in range(run_class.shape[0]):
        out[starts[u]:starts[u + 1]] = run_class[u]
    return out


@njit(cache=True, nogil=True)
def _packed(minimal: np.ndarray, column_of_byte: np.ndarray) -> tuple[
        np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """A minimal table over some grouping of the bytes (``column_of_byte``: byte -> column)
    packed as ``dfa_cache.PackedDfa`` stores it: ``(classes uint8 [256], table)``, one column
    per distinct column (the quotient may have made two columns equal), numbered by first
    occurrence."""
    starts, run_class, first = column_classes(minimal)
    merged = _class_of_column(starts, run_class)
    classes = np.empty(256, np.uint8)
    for b in range(256):
        classes[b] = merged[column_of_byte[b]]
    return classes, np.ascontiguousarray(minimal[:, first])


@njit(cache=True, nogil=True)
def _minimal_by_columns(trans: np.ndarray, accept: np.ndarray) -> tuple[
        np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The minimal DFA over ``trans``'s distinct columns, numbered breadth-first: the runs of
    equal columns (``starts``), each run's class, the table over the classes and acceptance."""
    starts, run_class, first = column_classes(trans)
    reduced = np.empty((trans.shape[0], first.shape[0]), np.int32)
    for r in range(trans.shape[0]):
        for j in range(first.shape[0]):
            reduced[r, j] = trans[r, first[j]]
    live = _live(reduced, accept)
    if not live[0]:  # the empty language: one state, no way out
        return starts, run_class, np.full((1, first.shape[0]), -1, np.int32), np.zeros(1, np.bool_)
    kept = _restrict(reduced, live)
    kept_accept = accept[live]
    quot, quot_accept = _quotient(kept, kept_accept, _hopcroft(kept, kept_accept))
    minimal, accepting = _numbered(quot, quot_accept)
    return starts, run_class, minimal, accepting


@njit(cache=True, nogil=True)
def _expanded(minimal: np.ndarray, starts: np.ndarray, run_class: np.ndarray,
              width: int) -> np.ndarray:  # pragma: no cover - compiled
    """``minimal`` (over classes) written back over ``width`` columns, run by run."""
    out = np.empty((minimal.shape[0], width), np.int32)
    for i in range(minimal.shape[0]):
        for u in range(run_class.shape[0]):
            out[i, starts[u]:starts[u + 1]] = minimal[i, run_class[u]]
    return out


@njit(cache=True, nogil=True)
def column_classes(
    trans: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Identical columns grouped, classes numbered by first occurrence: the runs of equal
    adjacent columns (run u is ``starts[u]:starts[u + 1]``, int64 [R + 1]), the class of each
    run (int64 [R]) and the first column of each class (int64 [C]).

    The runs are found in one pass over the rows; only the first column of each run is then
    hash-consed (a hash per column taken row by row, contents compared when hashes meet)."""
    n, width = trans.shape
    differs = np.zeros(width, np.int32)  # nonzero: column c differs from column c - 1
    for r in range(n):
        for c in range(1, width):
            differs[c] |= trans[r, c] ^ trans[r, c - 1]
    starts = np.empty(width + 1, np.int64)
    num_runs = 0
    for c in range(width):
        if c == 0 or differs[c]:
            starts[num_runs] = c
            num_runs += 1
    starts[num_runs] = width
    hashes = np.full(num_runs, n, np.int64)
    for r in range(n):
        for u in range(num_runs):
            hashes[u] = (hashes[u] ^ trans[r, starts[u]]) * np.int64(-7046029254386353131)
    run_class, first = _hash_cons(trans, starts[:num_runs], hashes)
    return starts[: num_runs + 1].copy(), run_class, first


@njit(cache=True, nogil=True)
def _hash_cons(trans: np.ndarray, columns: np.ndarray,
               hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """The given columns numbered by first occurrence of their contents (``hashes`` their
    hashes), through an open-addressing table: ``(class of each, first column of each class)``."""
    num = columns.shape[0]
    classes = np.empty(num, np.int64)
    first = np.empty(num, np.int64)  # the index into ``columns`` of each class's first one
    cap = 2
    while cap < 2 * num:
        cap *= 2
    table = np.full(cap, -1, np.int64)
    num_classes = 0
    for u in range(num):
        h = hashes[u]
        i = (h ^ (h >> 29)) & (cap - 1)
        while table[i] >= 0 and not (hashes[first[table[i]]] == h and (
                trans[:, columns[first[table[i]]]] == trans[:, columns[u]]).all()):
            i = (i + 1) & (cap - 1)
        if table[i] < 0:
            table[i] = num_classes
            first[num_classes] = u
            num_classes += 1
        classes[u] = table[i]
    return classes, columns[first[:num_classes]]


@njit(cache=True, nogil=True)
def _live(trans: np.ndarray, accept: np.ndarray) -> np.ndarray:  # pragma: no cover
    """The states reachable from 0 that can reach an accepting state (bool [n]). (A state's
    predecessors are unreachable if it is, so the backward search stays among the reachable
    ones.)"""
    seen = np.zeros(trans.shape[0], np.bool_)
    seen[bfs_order(trans)] = True  # forwards from 0
    return _coreachable(trans, accept & seen) & seen


@njit(cache=True, nogil=True)
def _restrict(trans: np.ndarray, live: np.ndarray) -> np.ndarray:  # pragma: no cover
    """The rows of ``live`` states, renumbered in order; edges to other states become -1."""
    n, width = trans.shape
    new_id = np.empty(n, np.int64)
    num = 0
    for s in range(n):
        new_id[s] = num
        num += live[s]
    out = np.empty((num, width), np.int32)
    for s in range(n):
        if live[s]:
            for c in range(width):
                t = trans[s, c]
                out[new_id[s], c] = new_id[t] if t >= 0 and live[t] else -1
    return out


@njit(cache=True, nogil=True)
def _hopcroft(trans: np.ndarray, accept: np.ndarray) -> np.ndarray:  # pragma: no cover
    """``refine`` on a trimmed table: its transitions grouped by target, each group in row-major
    order. Only real transitions are scanned: the implicit dead state would be a block of its
    own that never splits, and by Hopcroft's "all blocks but one" rule it need never be a
    splitter (trimmed, no real state is equivalent to it). Cost O(m log n) in the number m of
    transitions."""
    ptr, sym, src = _in_edges(trans)
    return refine(accept, ptr, sym, src, trans.shape[1])


@njit(cache=True, nogil=True)
def _in_edges(trans: np.ndarray) -> tuple[
        np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The transitions by target, as CSR: those into t are ``ptr[t]:ptr[t + 1]`` of ``(sym,
    src)``, each group in row-major order."""
    n, width = trans.shape
    ptr = np.zeros(n + 1, np.int64)
    for s in range(n):
        for c in range(width):
            if trans[s, c] >= 0:
                ptr[trans[s, c] + 1] += 1
    for s in range(n):
        ptr[s + 1] += ptr[s]
    fill = ptr[:-1].copy()
    sym = np.empty(ptr[n], np.int64)
    src = np.empty(ptr[n], np.int64)
    for s in range(n):
        for c in range(width):
            t = trans[s, c]
            if t >= 0:
                sym[fill[t]] = c
                src[fill[t]] = s
                fill[t] += 1
    return ptr, sym, src


@njit(cache=True, nogil=True)
def refine(accept: np.ndarray, in_ptr: np.ndarray, in_sym: np.ndarray, in_src: np.ndarray,
           num_syms: int) -> np.ndarray:  # pragma: no cover - compiled
    """The block of every state in the coarsest partition of a *trimmed* DFA.

    Parameters
    ----------
    accept : bool [n]
    in_ptr : int64 [n + 1]
        CSR by target: the transitions into state t are ``in_ptr[t]:in_ptr[t + 1]``.
    in_sym, in_src : int64 [m]
        Symbol (``0 .. num_syms - 1``) and source state of each transition, grouped by target.

    Returns
    -------
    int64 [n]: equal values iff the states are equivalent.
    """
    n = accept.shape[0]
    elems = np.empty(n, np.int64)
    where = np.empty(n, np.int64)
    block = np.empty(n, np.int64)
    first = np.empty(n + 1, np.int64)
    end = np.empty(n + 1, np.int64)
    marked = np.zeros(n + 1, np.int64)
    in_work = np.zeros(n + 1, np.bool_)
    work = np.empty(n + 1, np.int64)
    touched = np.empty(n + 1, np.int64)
    # initial blocks: accepting states, then the others (empty blocks are not made)
    k = 0
    num_blocks = 0
    for want in (True, False):
        start = k
        for s in range(n):
            if accept[s] == want:
                elems[k] = s
                where[s] = k
                block[s] = num_blocks
                k += 1
        if k > start:
            first[num_blocks] = start
            end[num_blocks] = k
            num_blocks += 1
    num_work = 0
    for b in range(num_blocks):
        work[num_work] = b
        num_work += 1
        in_work[b] = True
    srcs = np.empty(in_sym.shape[0], np.int64)  # the splitter's sources, bucketed by symbol
    sym_list = np.empty(num_syms, np.int64)  # the symbols in the buckets
    sym_start = np.empty(num_syms, np.int64)
    sym_size = np.zeros(num_syms, np.int64)
    while num_work:
        num_work -= 1
        splitter = work[num_work]
        in_work[splitter] = False
        num_syms_in = _bucket(splitter, first, end, elems, in_ptr, in_sym, in_src, srcs,
                              sym_list, sym_start, sym_size)
        for u in range(num_syms_in):
            sym = sym_list[u]
            lo = sym_start[sym]
            hi = lo + sym_size[sym]
            sym_size[sym] = 0
            num_touched = 0
            for i in range(lo, hi):
                s = srcs[i]
                b = block[s]
                if marked[b] == 0:
                    touched[num_touched] = b
                    num_touched += 1
                # move s to the front part of its block
                p = first[b] + marked[b]
                other = elems[p]
                q = where[s]
                elems[p] = s
                where[s] = p
                elems[q] = other
                where[other] = q
                marked[b] += 1
            for i in range(num_touched):
                y = touched[i]
                size = end[y] - first[y]
                mk = marked[y]
                marked[y] = 0
                if mk == size:
                    continue
                new = num_blocks
                num_blocks += 1
                first[new] = first[y]
                end[new] = first[y] + mk
                first[y] = first[y] + mk
                for p in range(first[new], end[new]):
                    block[elems[p]] = new
                if in_work[y] or mk <= size - mk:
                    work[num_work] = new
                    num_work += 1
                    in_work[new] = True
                else:
                    work[num_work] = y
                    num_work += 1
                    in_work[y] = True
    return block


@njit(cache=True, nogil=True)
def _bucket(splitter: int, first: np.ndarray, end: np.ndarray, elems: np.ndarray,
            in_ptr: np.ndarray, in_sym: np.ndarray, in_src: np.ndarray, srcs: np.ndarray,
            sym_list: np.ndarray, sym_start: np.ndarray,
            sym_size: np.ndarray) -> int:  # pragma: no cover - compiled
    """The sources of the transitions into block ``splitter``, bucketed by symbol (a counting
    sort, snapshot before any split): symbol ``sym_list[u]`` for ``u`` below the returned
    count has its sources in ``srcs[sym_start[sym]:][:sym_size[sym]]``."""
    num = 0
    for i in range(first[splitter], end[splitter]):
        t = elems[i]
        for j in range(in_ptr[t], in_ptr[t + 1]):
            sym = in_sym[j]
            if sym_size[sym] == 0:
                sym_list[num] = sym
                num += 1
            sym_size[sym] += 1
    pos = 0
    for u in range(num):
        sym = sym_list[u]
        sym_start[sym] = pos
        pos += sym_size[sym]
        sym_size[sym] = 0
    for i in range(first[splitter], end[splitter]):
        t = elems[i]
        for j in range(in_ptr[t], in_ptr[t + 1]):
            sym = in_sym[j]
            srcs[sym_start[sym] + sym_size[sym]] = in_src[j]
            sym_size[sym] += 1
    return num


@njit(cache=True, nogil=True)
def _quotient(trans: np.ndarray, accept: np.ndarray,
              block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """The table of the blocks, numbered by first member, each row that member's."""
    n, width = trans.shape
    rank = np.full(n, -1, np.int64)
    rep = np.empty(n, np.int64)
    num = 0
    for s in range(n):
        if rank[block[s]] < 0:
            rank[block[s]] = num
            rep[num] = s
            num += 1
    out = np.empty((num, width), np.int32)
    out_accept = np.empty(num, np.bool_)
    for q in range(num):
        out_accept[q] = accept[rep[q]]
        for c in range(width):
            t = trans[rep[q], c]
            out[q, c] = rank[block[t]] if t >= 0 else -1
    return out, out_accept


@njit(cache=True, nogil=True)
def bfs_order(trans: np.ndarray, start: int = 0) -> np.ndarray:  # pragma: no cover - compiled
    """States reachable from ``start`` in breadth-first order, columns in order (int64)."""
    n, width = trans.shape
    seen = np.zeros(n, np.bool_)
    order = np.empty(n, np.int64)
    order[0] = start
    seen[start] = True
    size = 1
    i = 0
    while i < size:
        s = order[i]
        i += 1
        for c in range(width):
            t = trans[s, c]
            if t >= 0 and not seen[t]:
                seen[t] = True
                order[size] = t
                size += 1
    return order[:size]


@njit(cache=True, nogil=True)
def _grow(arr: np.ndarray, need: int) -> np.ndarray:  # pragma: no cover - compiled
    """``arr`` (1-d) with room for at least ``need`` elements, doubling."""
    if need <= arr.shape[0]:
        return arr
    out = np.empty(max(need, 2 * arr.shape[0]), arr.dtype)
    out[: arr.shape[0]] = arr
    return out


@njit(cache=True, nogil=True)
def _closure(seeds: np.ndarray, eps_ptr: np.ndarray, eps_nbr: np.ndarray,
             important: np.ndarray, mark: np.ndarray, gen: int,
             stack: np.ndarray, found: np.ndarray) -> tuple[int, int]:  # pragma: no cover
    """The important states of the epsilon closure of ``seeds``, sorted, into
    ``found[:size]``; returns ``size`` and the number of states visited. ``mark`` holds the
    generation ``gen`` for every state reached (a fresh ``gen`` per call, no clearing)."""
    top = 0
    size = 0
    visited = 0
    for s in seeds:
        if mark[s] != gen:
            mark[s] = gen
            stack[top] = s
            top += 1
    while top:
        top -= 1
        visited += 1
        s = stack[top]
        if important[s]:
            found[size] = s
            size += 1
        for j in range(eps_ptr[s], eps_ptr[s + 1]):
            t = eps_nbr[j]
            if mark[t] != gen:
                mark[t] = gen
                stack[top] = t
                top += 1
    found[:size].sort()
    return size, visited


@njit(cache=True, nogil=True)
def subsets(num_atoms: int, eps_ptr: np.ndarray, eps_nbr: np.ndarray, edge_ptr: np.ndarray,
            edge_lo: np.ndarray, edge_hi: np.ndarray, edge_tgt: np.ndarray,
            important: np.ndarray, start: int, final: int, max_states: int,
            max_work: int) -> tuple[np.ndarray, np.ndarray, int]:  # pragma: no cover - compiled
    """Subset construction of a Thompson NFA over atoms (see ``automata._Nfa.determinize``).

    The NFA: epsilon successors ``eps_nbr[eps_ptr[q]:eps_ptr[q + 1]]``; character edges
    ``edge_lo/hi/tgt[edge_ptr[q]:edge_ptr[q + 1]]`` (atom interval, target). A DFA state is the
    set of *important* NFA states (with edges, or ``final``) of an epsilon closure, kept sorted
    in ``elems[set_ptr[d]:set_ptr[d + 1]]`` and found again through an open-addressing hash
    table. States are numbered in order of discovery, each row swept in ascending atom order.

    Returns ``(trans int32 [n, num_atoms], accept bool [n], work)``, with an empty ``trans``
    when the DFA would pass ``max_states`` states or ``work`` (``SUBSET_WORK_LIMIT``) passes
    ``max_work``.
    """
    n_nfa = important.shape[0]
    mark = np.zeros(n_nfa, np.int64)
    stack = np.empty(n_nfa, np.int64)
    found = np.empty(n_nfa, np.int64)  # the closure being looked up
    count = np.zeros(n_nfa, np.int64)  # sweep: live edges per target
    active = np.empty(n_nfa, np.int64)
    slot = np.empty(n_nfa, np.int64)  # position of a target in ``active``
    set_ptr = np.zeros(65, np.int64)
    elems = np.empty(256, np.int64)
    hashes = np.empty(64, np.int64)
    cap = 256
    table = np.full(cap, -1, np.int64)
    rows = np.full((64, num_atoms), -1, np.int32)
    num_sets = 0
    ev_pos = np.empty(64, np.int64)
    ev_tgt = np.empty(64, np.int64)
    ev_delta = np.empty(64, np.int64)
    seeds = np.full(1, start, np.int64)
    work = 0
    d = -1  # the DFA state whose row is being swept (-1: the start closure)
    lo = hi = 0
    gen = 0
    while d < num_sets:
        if d >= 0:  # the row of state d: sweep the atom line over its members' edges
            num_events = 0
            for k in range(set_ptr[d], set_ptr[d + 1]):
                q = elems[k]
                for j in range(edge_ptr[q], edge_ptr[q + 1]):
                    ev_pos = _grow(ev_pos, num_events + 2)
                    ev_tgt = _grow(ev_tgt, num_events + 2)
                    ev_delta = _grow(ev_delta, num_events + 2)
                    ev_pos[num_events] = edge_lo[j]
                    ev_pos[num_events + 1] = edge_hi[j] + 1
                    ev_tgt[num_events] = ev_tgt[num_events + 1] = edge_tgt[j]
                    ev_delta[num_events] = 1
                    ev_delta[num_events + 1] = -1
                    num_events += 2
            order = np.argsort(ev_pos[:num_events], kind="mergesort")
            work += num_events
        else:
            num_events = 0
            order = np.empty(0, np.int64)
        cut = 0
        num_active = 0
        while True:
            if d >= 0:  # advance to the next interval with live targets
                if cut >= num_events:
                    break
                lo = ev_pos[order[cut]]
                while cut < num_events and ev_pos[order[cut]] == lo:
                    e = order[cut]
                    t = ev_tgt[e]
                    count[t] += ev_delta[e]
                    if count[t] == 1 and ev_delta[e] == 1:
                        slot[t] = num_active
                        active[num_active] = t
                        num_active += 1
                    elif count[t] == 0:
                        num_active -= 1
                        last = active[num_active]
                        active[slot[t]] = last
                        slot[last] = slot[t]
                    cut += 1
                if num_active == 0 or cut >= num_events:
                    continue
                hi = ev_pos[order[cut]]
                seeds = active[:num_active]
            gen += 1
            size, visited = _closure(seeds, eps_ptr, eps_nbr, important, mark, gen, stack, found)
            work += visited
            if work > max_work:
                return np.empty((0, num_atoms), np.int32), np.empty(0, np.bool_), work
            members = found[:size]
            h = np.int64(size)
            for m in members:
                h = h * np.int64(1000003) ^ m
            i = h & (cap - 1)
            sid = -1
            while table[i] >= 0:
                c = table[i]
                if hashes[c] == h and set_ptr[c + 1] - set_ptr[c] == size:
                    base = set_ptr[c]
                    same = True
                    for k in range(size):
                        if elems[base + k] != members[k]:
                            same = False
                            break
                    if same:
                        sid = c
                        break
                i = (i + 1) & (cap - 1)
            if sid < 0:
                if num_sets >= max_states:
                    return np.empty((0, num_atoms), np.int32), np.empty(0, np.bool_), work
                sid = num_sets
                num_sets += 1
                set_ptr = _grow(set_ptr, num_sets + 1)
                hashes = _grow(hashes, num_sets)
                elems = _grow(elems, set_ptr[sid] + size)
                elems[set_ptr[sid] : set_ptr[sid] + size] = members
                set_ptr[sid + 1] = set_ptr[sid] + size
                hashes[sid] = h
                table[i] = sid
                if 2 * num_sets > cap:  # rehash at half load
                    cap *= 2
                    table = np.full(cap, -1, np.int64)
                    for c in range(num_sets):
                        k = hashes[c] & (cap - 1)
                        while table[k] >= 0:
                            k = (k + 1) & (cap - 1)
                        table[k] = c
                if num_sets > rows.shape[0]:
                    more = np.full((2 * rows.shape[0], num_atoms), -1, np.int32)
                    more[: rows.shape[0]] = rows
                    rows = more
            if d < 0:
                break
            rows[d, lo:hi] = sid
        d += 1
    accept = np.zeros(num_sets, np.bool_)
    for c in range(num_sets):
        for k in range(set_ptr[c], set_ptr[c + 1]):
            if elems[k] == final:
                accept[c] = True
    return rows[:num_sets].copy(), accept, work


def subset_construction(num_atoms: int, eps_ptr: np.ndarray, eps_nbr: np.ndarray,
                        edge_ptr: np.ndarray, edge_lo: np.ndarray, edge_hi: np.ndarray,
                        edge_tgt: np.ndarray, important: np.ndarray, start: int, final: int,
                        max_states: int) -> tuple[np.ndarray, np.ndarray]:
    """``subsets`` (same arguments) with its bounds as errors.

    Raises
    ------
    GrammarTooLargeError
        ``"dfa_states"`` past ``max_states`` states, ``"subset_work"`` past
        ``SUBSET_WORK_LIMIT``.
    """
    trans, accept, work = subsets(num_atoms, eps_ptr, eps_nbr, edge_ptr, edge_lo, edge_hi,
                                  edge_tgt, important, start, final, max_states,
                                  SUBSET_WORK_LIMIT)
    if work > SUBSET_WORK_LIMIT:
        raise GrammarTooLargeError(
            "subset_work", work, SUBSET_WORK_LIMIT,
            hint="its states are large sets of NFA states, as nested counted repeats such as "
                 "((a{1,20}){1,20}){1,20} make them; spell the repetition with one count")
    if not trans.shape[0]:
        raise GrammarTooLargeError("dfa_states", max_states + 1, max_states)
    return trans, accept


@njit(cache=True, nogil=True)
def product(t1: np.ndarray, t2: np.ndarray, acc1: np.ndarray, acc2: np.ndarray,
            op: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The reachable part of the product of two DFAs over the same atoms (``automata._product``).

    ``op``: 0 intersection, 1 union, 2 difference. A side may be dead (-1) while the other
    lives (union, difference); the pair ``(p, q)`` is keyed ``(p + 1) * n2 + q + 1`` and found
    again through an open-addressing hash table. Returns ``(trans int32 [n, A], accept)``.
    """
    num_atoms = t1.shape[1]
    n2 = t2.shape[0] + 1
    cap = 1024
    table = np.full(cap, -1, np.int64)  # slot -> pair id
    keys = np.empty(64, np.int64)  # pair id -> key
    rows = np.full((64, num_atoms), -1, np.int32)
    keys[0] = n2 + 1  # the start pair (0, 0)
    table[(keys[0] * np.int64(-7046029254386353131)) & (cap - 1)] = 0
    count = 1
    d = 0
    while d < count:
        p = keys[d] // n2 - 1
        q = keys[d] % n2 - 1
        if count + num_atoms > rows.shape[0]:
            more = np.full((2 * rows.shape[0] + num_atoms, num_atoms), -1, np.int32)
            more[: rows.shape[0]] = rows
            rows = more
            keys = _grow(keys, more.shape[0])
        for c in range(num_atoms):
            a = t1[p, c] if p >= 0 else -1
            b = t2[q, c] if q >= 0 else -1
            if op == 0:
                dead = a < 0 or b < 0
            elif op == 1:
                dead = a < 0 and b < 0
            else:
                dead = a < 0
            if dead:
                continue
            key = np.int64(a + 1) * n2 + np.int64(b + 1)
            i = (key * np.int64(-7046029254386353131)) & (cap - 1)
            while table[i] >= 0 and keys[table[i]] != key:
                i = (i + 1) & (cap - 1)
            if table[i] < 0:
                table[i] = count
                keys[count] = key
                count += 1
                if 2 * count > cap:  # rehash at half load
                    cap *= 2
                    table = np.full(cap, -1, np.int64)
                    for k in range(count):
                        j = (keys[k] * np.int64(-7046029254386353131)) & (cap - 1)
                        while table[j] >= 0:
                            j = (j + 1) & (cap - 1)
                        table[j] = k
                    i = (key * np.int64(-7046029254386353131)) & (cap - 1)
                    while keys[table[i]] != key:
                        i = (i + 1) & (cap - 1)
            rows[d, c] = table[i]
        d += 1
    accept = np.zeros(count, np.bool_)
    for k in range(count):
        p = keys[k] // n2 - 1
        q = keys[k] % n2 - 1
        a = p >= 0 and acc1[p]
        b = q >= 0 and acc2[q]
        accept[k] = (a and b) if op == 0 else (a or b) if op == 1 else (a and not b)
    return rows[:count].copy(), accept


@njit(cache=True, nogil=True)
def joint_classes(a: np.ndarray, b: np.ndarray) -> tuple[
        np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The bytes grouped by their pair of classes ``(a[x], b[x])`` under two byte -> class maps
    ([256] each), numbered by first occurrence: ``(joint int64 [256], a_of int64 [K], b_of
    int64 [K])``, joint class ``c`` being the pair ``(a_of[c], b_of[c])``."""
    pair = np.full((a.max() + 1, b.max() + 1), -1, np.int64)
    joint = np.empty(256, np.int64)
    a_of = np.empty(256, np.int64)
    b_of = np.empty(256, np.int64)
    k = 0
    for x in range(256):
        h, t = a[x], b[x]
        if pair[h, t] < 0:
            pair[h, t] = k
            a_of[k] = h
            b_of[k] = t
            k += 1
        joint[x] = pair[h, t]
    return joint, a_of[:k], b_of[:k]


@njit(cache=True, nogil=True)
def concatenation(head_table: np.ndarray, head_classes: np.ndarray, head_accept: np.ndarray,
                  tail_table: np.ndarray, tail_classes: np.ndarray, tail_accept: np.ndarray,
                  ) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """The canonical DFA of ``L(head) L(tail)``, both given and returned packed by byte classes
    (``table[:, classes]`` is the byte table; classes numbered by first occurrence): ``sequence``
    of the two, except that after a chain head (a member's key) the glue is minimal as it
    stands where ``_chain_before_minimal`` says so, and is only numbered. A head given as a
    byte table (256 columns) is packed first, so the work runs over the few classes its bytes
    fall into."""
    if head_table.shape[1] == 256:
        starts, run_class, first = column_classes(head_table)
        head_classes = _class_of_column(starts, run_class).astype(np.uint8)
        head_table = np.ascontiguousarray(head_table[:, first])
    n, m = head_table.shape[0], tail_table.shape[0]
    classes = np.concatenate((head_classes, tail_classes))
    cells = np.concatenate((head_table.ravel(), tail_table.ravel()))
    cell_base = np.array([0, n * head_table.shape[1]], np.int64)
    widths = np.array([head_table.shape[1], tail_table.shape[1]], np.int64)
    offsets = np.array([0, n, n + m], np.int64)
    accept = np.concatenate((head_accept, tail_accept))
    ok, trans, glued_accept, joint = _glued(classes, cells, cell_base, widths, offsets, accept)
    if ok and _chain_before_minimal(head_table, head_accept, trans, tail_accept):
        minimal, minimal_accept = _numbered(trans, glued_accept)
        packed_classes, table = _packed(minimal, joint)
        return True, packed_classes, table, minimal_accept
    return _minimised(ok, trans, glued_accept, joint, _all_live(offsets, accept))


@njit(cache=True, nogil=True)
def sequence(classes: np.ndarray, cells: np.ndarray, cell_base: np.ndarray, widths: np.ndarray,
             offsets: np.ndarray, accept: np.ndarray,
             ) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """The canonical DFA of ``L(piece 0) L(piece 1) ... L(piece P - 1)``, each piece packed
    (``concatenation``'s form) and all of them flat: piece p's classes are
    ``classes[256 p:256 (p + 1)]``, its table (``widths[p]`` columns, row-major) starts at
    ``cells[cell_base[p]]``, its states (targets local to it) are
    ``offsets[p]:offsets[p + 1]`` of ``accept``. Each piece's start row is copied onto the
    accepting states of the piece before, over the classes all pieces split the bytes into;
    the glue is minimised as ``canonical`` does and packed (``_packed``). Returns ``(ok,
    classes uint8 [256], table, accept)``; not ``ok`` where a piece's start accepts or an
    accepting state already leaves on a byte the next piece starts with (the result would
    not be deterministic)."""
    return _minimised(*_glued(classes, cells, cell_base, widths, offsets, accept),
                      _all_live(offsets, accept))


@njit(cache=True, nogil=True)
def _glued(classes: np.ndarray, cells: np.ndarray, cell_base: np.ndarray, widths: np.ndarray,
           offsets: np.ndarray, accept: np.ndarray) -> tuple[
               bool, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """``sequence``'s glue before minimisation: ``(ok, table over the joint classes, its
    accepting states, byte -> joint class)``."""
    num = offsets.shape[0] - 1
    trans, joint = _joint_rows(classes, cells, cell_base, widths, offsets)
    k = trans.shape[1]
    out_accept = np.zeros(trans.shape[0], np.bool_)
    out_accept[offsets[num - 1]:] = accept[offsets[num - 1]:]
    for p in range(num):
        if accept[offsets[p]]:
            return False, trans, out_accept, joint
    for p in range(num - 1):
        start = offsets[p + 1]
        for s in range(offsets[p], start):
            if accept[s]:
                for c in range(k):
                    t = trans[start, c]
                    if t >= 0:
                        if trans[s, c] >= 0:
                            return False, trans, out_accept, joint
                        trans[s, c] = t
    return True, trans, out_accept, joint


@njit(cache=True, nogil=True)
def _joint_rows(classes: np.ndarray, cells: np.ndarray, cell_base: np.ndarray,
                widths: np.ndarray, offsets: np.ndarray) -> tuple[
                    np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The pieces of ``sequence``'s flat form as one table over the classes all of them
    split the bytes into, each piece's targets moved to its rows: ``(table, byte -> joint
    class)``."""
    num = offsets.shape[0] - 1
    joint = np.zeros(256, np.int64)
    for p in range(num):
        joint = joint_classes(joint, classes[256 * p:256 * (p + 1)])[0]
    k = joint.max() + 1
    rep = np.empty(k, np.int64)  # a byte of each joint class
    for x in range(255, -1, -1):
        rep[joint[x]] = x
    trans = np.empty((offsets[num], k), np.int32)
    for p in range(num):
        off, base, width = offsets[p], cell_base[p], widths[p]
        for s in range(off, offsets[p + 1]):
            row = base + (s - off) * width
            for c in range(k):
                t = cells[row + classes[256 * p + rep[c]]]
                trans[s, c] = t + off if t >= 0 else -1
    return trans, joint


@njit(cache=True, nogil=True)
def union(classes: np.ndarray, cells: np.ndarray, cell_base: np.ndarray, widths: np.ndarray,
          offsets: np.ndarray, accept: np.ndarray,
          ) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """The canonical DFA of the union of the pieces' languages, given as ``sequence`` takes
    them: their product over the joint classes (``product``, one piece at a time),
    minimised and packed. Returns ``sequence``'s tuple, always ``ok``."""
    num = offsets.shape[0] - 1
    trans, joint = _joint_rows(classes, cells, cell_base, widths, offsets)
    rows = trans[:offsets[1]].copy()
    rows_accept = accept[:offsets[1]].copy()
    for p in range(1, num):
        off = offsets[p]
        local = trans[off:offsets[p + 1]].copy()
        for s in range(local.shape[0]):
            for c in range(local.shape[1]):
                if local[s, c] >= 0:
                    local[s, c] -= off
        rows, rows_accept = product(rows, local, rows_accept, accept[off:offsets[p + 1]], 1)
    return _minimised(True, rows, rows_accept, joint, _all_live(offsets, accept))


@njit(cache=True, nogil=True)
def _minimised(ok: bool, trans: np.ndarray, accept: np.ndarray, joint: np.ndarray,
               live: bool) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """A glue (``_glued``) or product minimised and packed as ``sequence`` returns it.
    ``live``: every piece accepts some word (``_all_live``), so every state of ``trans`` can
    reach acceptance and there is nothing to trim: the partition refinement runs on it as it
    stands (unreachable states, a piece's start no longer entered, are left out by the
    numbering), over its columns as they are (``_packed`` merges equal ones)."""
    if not ok:
        return False, np.empty(0, np.uint8), np.empty((0, 0), np.int32), accept[:0]
    if live:
        quotient, quotient_accept = _quotient(trans, accept, _hopcroft(trans, accept))
        minimal, minimal_accept = _numbered(quotient, quotient_accept)
        classes, table = _packed(minimal, joint)
        return True, classes, table, minimal_accept
    starts, run_class, minimal, minimal_accept = _minimal_by_columns(trans, accept)
    classes, table = _packed(minimal, _class_of_column(starts, run_class)[joint])
    return True, classes, table, minimal_accept


@njit(cache=True, nogil=True)
def _all_live(offsets: np.ndarray, accept: np.ndarray) -> bool:  # pragma: no cover - compiled
    """Whether every piece (canonical: trimmed) has an accepting state, so that all its states
    can reach one."""
    for p in range(offsets.shape[0] - 1):
        if not accept[offsets[p]:offsets[p + 1]].any():
            return False
    return True


@njit(cache=True, nogil=True)
def _chain_before_minimal(head_table: np.ndarray, head_accept: np.ndarray, glued: np.ndarray,
                          tail_accept: np.ndarray) -> bool:  # pragma: no cover - compiled
    """Whether ``concatenation``'s glued table is minimal as it stands (but for the tail's
    start, which it may no longer reach): the head is a chain (state i leads only to itself
    and to i + 1, and only the last one accepts and leads only to itself: a member's key and
    colon between whitespace loops), the tail is live and does not take the empty string (so
    no state is dead) and the chain's last state is equivalent to no tail state.

    The head's states are then pairwise apart (the shortest word to acceptance from i is one
    byte longer than from i + 1), so are the tail's (a minimal DFA, its rows untouched), and
    a head state i equivalent to a tail state t would make i + 1 equivalent to t's successor
    on the chain's byte, and so on to the last: it is the only one to compare. It is
    equivalent to a tail state iff that state rejects, loops where it loops and leads where
    the tail's start leads elsewhere (the tail is minimal: equivalent tail states are one)."""
    n, k = head_table.shape
    if tail_accept[0] or not tail_accept.any():  # (a tail without the empty string, live)
        return False
    for i in range(n):
        if head_accept[i] != (i == n - 1):
            return False
        forward = False
        for c in range(k):
            t = head_table[i, c]
            if t == i + 1 and i < n - 1:
                forward = True
            elif t >= 0 and t != i:
                return False
        if i < n - 1 and not forward:
            return False
    last = n - 1
    for t in range(tail_accept.shape[0]):
        if tail_accept[t]:
            continue
        same = True
        for c in range(k):
            mine = glued[last, c]
            theirs = glued[n + t, c]
            if not (theirs == n + t if mine == last else theirs == mine):
                same = False
                break
        if same:
            return False
    return True


@njit(cache=True, nogil=True)
def _numbered(trans: np.ndarray, accept: np.ndarray, start: int = 0) -> tuple[
        np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """A minimal table's states reachable from ``start``, numbered breadth-first."""
    order = bfs_order(trans, start)
    new_id = np.full(trans.shape[0] + 1, -1, np.int32)  # the last slot maps -1 to -1
    for i in range(order.shape[0]):
        new_id[order[i]] = i
    minimal = np.empty((order.shape[0], trans.shape[1]), np.int32)
    for i in range(order.shape[0]):
        for c in range(trans.shape[1]):
            minimal[i, c] = new_id[trans[order[i], c]]
    return minimal, accept[order]
