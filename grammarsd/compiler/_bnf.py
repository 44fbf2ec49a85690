"""The BNF's last steps, compiled (numba) over flat arrays: trimming it, numbering what survives
into the Earley item arrays (``tables.EarleyTables``), and each terminal's FOLLOW byte set.

A production ``p`` is ``lhs[p] -> syms[ptr[p]:ptr[p + 1]]``, where ``sym >= 0`` is a
nonterminal and ``sym < 0`` is terminal ``-sym - 1``. Each pass is a worklist over dependency
edges, so long chains of helper rules (unrolled repeats) cost linear time.
"""

from __future__ import annotations

import numpy as np
from numba import njit

END = np.int32(2**30)  # ``item_next`` of a complete item (``tables.END``)


@njit(cache=True, nogil=True)
def _grouped(keys: np.ndarray, values: np.ndarray, count: int,
             num_keys: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The first ``count`` pairs ``keys[i] -> values[i]`` grouped by key (CSR): the values of
    key ``k`` are ``out[ptr[k]:ptr[k + 1]]``, in their order."""
    ptr = np.zeros(num_keys + 1, np.int64)
    for i in range(count):
        ptr[keys[i] + 1] += 1
    for k in range(num_keys):
        ptr[k + 1] += ptr[k]
    out = np.empty(count, np.int64)
    fill = ptr[:-1].copy()
    for i in range(count):
        out[fill[keys[i]]] = values[i]
        fill[keys[i]] += 1
    return ptr, out


@njit(cache=True, nogil=True)
def _derivable(num_nt: int, lhs: np.ndarray, ptr: np.ndarray, syms: np.ndarray,
               keep: np.ndarray, terminals: bool) -> np.ndarray:  # pragma: no cover - compiled
    """uint8 [num_nt]: the least set of nonterminals with a kept production whose every symbol
    is in the set or a terminal (``terminals``: productive) or in the set alone (nullable).
    Each production counts the symbols it still misses; a nonterminal entering the set
    decrements the counts of the productions that use it."""
    num_prods = lhs.shape[0]
    missing = np.zeros(num_prods, np.int64)
    used = np.empty(syms.shape[0], np.int64)  # (nonterminal used, production using it) pairs
    user = np.empty(syms.shape[0], np.int64)
    num_uses = 0
    for p in range(num_prods):
        if keep[p]:
            for i in range(ptr[p], ptr[p + 1]):
                s = syms[i]
                if s >= 0:
                    used[num_uses] = s
                    user[num_uses] = p
                    num_uses += 1
                    missing[p] += 1
                elif not terminals:
                    missing[p] += 1  # never found: a terminal is not empty
    users_ptr, users = _grouped(used, user, num_uses, num_nt)
    found = np.zeros(num_nt, np.uint8)
    ready = np.empty(num_prods + users.shape[0], np.int64)
    top = 0
    for p in range(num_prods):
        if keep[p] and missing[p] == 0:
            ready[top] = lhs[p]
            top += 1
    while top:
        top -= 1
        nt = ready[top]
        if found[nt]:
            continue
        found[nt] = 1
        for k in range(users_ptr[nt], users_ptr[nt + 1]):
            p = users[k]
            missing[p] -= 1
            if missing[p] == 0:
                ready[top] = lhs[p]
                top += 1
    return found


@njit(cache=True, nogil=True)
def trim_and_number(
    num_nt: int, num_terms: int, lhs: np.ndarray, ptr: np.ndarray, syms: np.ndarray, start: int
) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int,
           np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Keep the productive and reachable productions and number them for the Earley tables.

    Returns ``(ok, item_next, item_lhs, nt_ptr, nt_items, nullable, start_item, accept_item,
    used_nt, used_t)``: ``ok`` is False (the rest empty) when ``start`` derives nothing; the
    surviving nonterminals and terminals are renumbered in the order of their old numbers
    (``used_nt``, ``used_t``: old numbers by new), and the productions ordered by their new
    left-hand side, stably. ``start`` must have exactly one production."""
    num_prods = lhs.shape[0]
    keep = np.ones(num_prods, np.uint8)
    productive = _derivable(num_nt, lhs, ptr, syms, keep, True)
    empty = np.zeros(0, np.int32)
    if not productive[start]:
        return (False, empty, empty, empty, empty, np.zeros(0, np.uint8), -1, -1, empty, empty)
    for p in range(num_prods):
        for i in range(ptr[p], ptr[p + 1]):
            if syms[i] >= 0 and not productive[syms[i]]:
                keep[p] = 0
                break
    # reachable from ``start`` over the kept productions, grouped by left-hand side
    kept = np.flatnonzero(keep)
    by_lhs_ptr, by_lhs = _grouped(lhs[kept], kept, kept.shape[0], num_nt)
    reachable = np.zeros(num_nt, np.uint8)
    stack = np.empty(num_nt, np.int64)
    reachable[start] = 1
    stack[0] = start
    top = 1
    while top:
        top -= 1
        n = stack[top]
        for k in range(by_lhs_ptr[n], by_lhs_ptr[n + 1]):
            p = by_lhs[k]
            for i in range(ptr[p], ptr[p + 1]):
                s = syms[i]
                if s >= 0 and not reachable[s]:
                    reachable[s] = 1
                    stack[top] = s
                    top += 1
    for p in range(num_prods):
        if keep[p] and not reachable[lhs[p]]:
            keep[p] = 0
    nullable_old = _derivable(num_nt, lhs, ptr, syms, keep, False)

    used_nt_mask = np.zeros(num_nt, np.uint8)
    used_t_mask = np.zeros(num_terms, np.uint8)
    num_items = 0
    for p in range(num_prods):
        if keep[p]:
            used_nt_mask[lhs[p]] = 1
            num_items += ptr[p + 1] - ptr[p] + 1
            for i in range(ptr[p], ptr[p + 1]):
                s = syms[i]
                if s >= 0:
                    used_nt_mask[s] = 1
                else:
                    used_t_mask[-s - 1] = 1
    nt_map, used_nt = _renumber(used_nt_mask)
    t_map, used_t = _renumber(used_t_mask)
    new_nt = used_nt.shape[0]

    nt_ptr = np.zeros(new_nt + 1, np.int32)
    for p in range(num_prods):
        if keep[p]:
            nt_ptr[nt_map[lhs[p]] + 1] += 1
    for n in range(new_nt):
        nt_ptr[n + 1] += nt_ptr[n]
    order = np.empty(nt_ptr[new_nt], np.int64)
    slot = nt_ptr[:-1].astype(np.int64)
    for p in range(num_prods):
        if keep[p]:
            n = nt_map[lhs[p]]
            order[slot[n]] = p
            slot[n] += 1
    item_next = np.empty(num_items, np.int32)
    item_lhs = np.empty(num_items, np.int32)
    nt_items = np.empty(order.shape[0], np.int32)
    start_item = accept_item = -1
    cur = 0
    for k in range(order.shape[0]):
        p = order[k]
        n = nt_map[lhs[p]]
        nt_items[k] = cur
        if lhs[p] == start:
            start_item = cur
        for i in range(ptr[p], ptr[p + 1]):
            s = syms[i]
            item_next[cur] = nt_map[s] if s >= 0 else -t_map[-s - 1] - 1
            item_lhs[cur] = n
            cur += 1
        item_next[cur] = END
        item_lhs[cur] = n
        if lhs[p] == start:
            accept_item = cur
        cur += 1
    nullable = np.empty(new_nt, np.uint8)
    for n in range(new_nt):
        nullable[n] = nullable_old[used_nt[n]]
    return (True, item_next, item_lhs, nt_ptr, nt_items, nullable, start_item, accept_item,
            used_nt, used_t)


@njit(cache=True, nogil=True)
def _renumber(used: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The new number of each old one marked ``used`` (-1 for the others), in the old order,
    and the old numbers by new."""
    new_of = np.full(used.shape[0], -1, np.int32)
    old_of = np.empty(used.shape[0], np.int32)
    count = 0
    for old in range(used.shape[0]):
        if used[old]:
            new_of[old] = count
            old_of[count] = old
            count += 1
    return new_of, old_of[:count].copy()


@njit(cache=True, nogil=True)
def _propagate(sets: np.ndarray, src: np.ndarray, dst: np.ndarray,
               num_edges: int) -> None:  # pragma: no cover - compiled
    """Close the bitsets ``sets`` (uint64 [M, 4]) under ``sets[b] |= sets[a]`` for each of the
    first ``num_edges`` edges ``src -> dst``."""
    m = sets.shape[0]
    edge_ptr, edges = _grouped(src, dst, num_edges, m)
    work = np.arange(m)
    queued = np.ones(m, np.uint8)
    top = m
    while top:
        top -= 1
        a = work[top]
        queued[a] = 0
        for k in range(edge_ptr[a], edge_ptr[a + 1]):
            b = edges[k]
            changed = False
            for w in range(4):
                merged = sets[b, w] | sets[a, w]
                if merged != sets[b, w]:
                    sets[b, w] = merged
                    changed = True
            if changed and not queued[b]:
                queued[b] = 1
                work[top] = b
                top += 1


@njit(cache=True, nogil=True)
def follow_bytes(nt_ptr: np.ndarray, nt_items: np.ndarray, item_next: np.ndarray,
                 nullable: np.ndarray, dfa_trans: np.ndarray, byte_col: np.ndarray,
                 term_start: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """uint64 [T, 4]: per terminal, the bytes that can start a terminal following it (256-bit
    sets; bit ``b`` of word ``b >> 6`` is byte ``b``), over the numbered tables.

    FIRST/FOLLOW over the BNF, a terminal's FIRST being the live bytes of its start state:

    * ``first(A) ⊇ first(X)`` for every ``A -> α X β`` with ``α`` nullable;
    * ``follow(X) ⊇ first(β')`` for the symbols ``β'`` after ``X`` up to the first
      non-nullable one, and ``follow(X) ⊇ follow(A)`` when all of ``β`` is nullable.
    """
    num_nt = nt_ptr.shape[0] - 1
    num_t = term_start.shape[0]
    t_first = np.zeros((num_t, 4), np.uint64)
    for t in range(num_t):
        row = term_start[t]
        for b in range(256):
            if dfa_trans[row, byte_col[b]] >= 0:
                t_first[t, b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    num_items = item_next.shape[0]
    src = np.empty(num_items, np.int64)
    dst = np.empty(num_items, np.int64)
    first = np.zeros((num_nt, 4), np.uint64)
    num_edges = 0
    for n in range(num_nt):
        for k in range(nt_ptr[n], nt_ptr[n + 1]):
            i = nt_items[k]
            while item_next[i] != END:
                s = item_next[i]
                if s < 0:
                    for w in range(4):
                        first[n, w] |= t_first[-s - 1, w]
                    break
                src[num_edges] = s
                dst[num_edges] = n
                num_edges += 1
                if not nullable[s]:
                    break
                i += 1
    _propagate(first, src, dst, num_edges)

    follow = np.zeros((num_nt + num_t, 4), np.uint64)
    after = np.zeros(4, np.uint64)
    num_edges = 0
    for n in range(num_nt):
        for k in range(nt_ptr[n], nt_ptr[n + 1]):
            begin = nt_items[k]
            end = begin
            while item_next[end] != END:
                end += 1
            after[:] = 0
            rest_nullable = True
            for i in range(end - 1, begin - 1, -1):
                s = int(item_next[i])
                x = s if s >= 0 else num_nt - s - 1
                for w in range(4):
                    follow[x, w] |= after[w]
                if rest_nullable:
                    src[num_edges] = n
                    dst[num_edges] = x
                    num_edges += 1
                nullable_s = s >= 0 and nullable[s]
                for w in range(4):
                    f = first[s, w] if s >= 0 else t_first[-s - 1, w]
                    after[w] = f | after[w] if nullable_s else f
                rest_nullable = rest_nullable and nullable_s
    _propagate(follow, src, dst, num_edges)
    return follow[num_nt:].copy()


__all__ = ["END", "follow_bytes", "trim_and_number"]
