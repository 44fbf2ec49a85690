"""The loops of ``automata.canonical_table`` as numba kernels: reachability, Hopcroft's
partition refinement and the breadth-first order. ``automata`` prepares their inputs (CSR
graphs, tables) and documents the contract; these functions only run the loops.

Partition data structures (``refine``; all ``int64`` arrays over states or blocks)::

    elems   [n]   states, each block contiguous: block b is elems[first[b]:end[b]]
    where   [n]   position of state s in elems
    block   [n]   block of state s
    marked  [B]   how many states at the front of block b are marked by the current splitter

A splitter is a whole block with all symbols at once: its incoming transitions are sorted by
symbol, and each symbol's sources mark their blocks; a marked block that is not marked whole is
split, the marked part becoming a new block. Hopcroft's rule puts the new block on the work
list if its parent is there, else the smaller half. The result is the coarsest partition
compatible with acceptance (the minimal DFA), whatever order the work list is processed in.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def refine(accept: np.ndarray, in_ptr: np.ndarray, in_sym: np.ndarray,
           in_src: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """The block of every state in the coarsest partition of a *trimmed* DFA.

    Parameters
    ----------
    accept : bool [n]
    in_ptr : int64 [n + 1]
        CSR by target: the transitions into state t are ``in_ptr[t]:in_ptr[t + 1]``.
    in_sym, in_src : int64 [m]
        Symbol and source state of each transition, grouped by target.

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
    m = in_sym.shape[0]
    syms = np.empty(m, np.int64)
    srcs = np.empty(m, np.int64)
    while num_work:
        num_work -= 1
        splitter = work[num_work]
        in_work[splitter] = False
        # the splitter's incoming transitions, snapshot before any split
        count = 0
        for i in range(first[splitter], end[splitter]):
            t = elems[i]
            for j in range(in_ptr[t], in_ptr[t + 1]):
                syms[count] = in_sym[j]
                srcs[count] = in_src[j]
                count += 1
        order = np.argsort(syms[:count], kind="mergesort")
        lo = 0
        while lo < count:
            sym = syms[order[lo]]
            hi = lo
            num_touched = 0
            while hi < count and syms[order[hi]] == sym:
                s = srcs[order[hi]]
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
                hi += 1
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
            lo = hi
    return block


@njit(cache=True, nogil=True)
def reach(ptr: np.ndarray, nbr: np.ndarray, seen: np.ndarray) -> None:  # pragma: no cover
    """Mark in ``seen`` (bool [n], seeds already marked) every state reachable from a seed in
    the CSR graph ``nbr[ptr[s]:ptr[s + 1]]``."""
    stack = np.empty(seen.shape[0], np.int64)
    top = 0
    for s in range(seen.shape[0]):
        if seen[s]:
            stack[top] = s
            top += 1
    while top:
        top -= 1
        s = stack[top]
        for j in range(ptr[s], ptr[s + 1]):
            t = nbr[j]
            if not seen[t]:
                seen[t] = True
                stack[top] = t
                top += 1


@njit(cache=True, nogil=True)
def bfs_order(trans: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """States reachable from 0 in breadth-first order, columns in order (int64)."""
    n, width = trans.shape
    seen = np.zeros(n, np.bool_)
    order = np.empty(n, np.int64)
    order[0] = 0
    seen[0] = True
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
             stack: np.ndarray, found: np.ndarray) -> int:  # pragma: no cover - compiled
    """The important states of the epsilon closure of ``seeds``, sorted, into
    ``found[:size]``; returns ``size``. ``mark`` holds the generation ``gen`` for every state
    reached (a fresh ``gen`` per call, no clearing)."""
    top = 0
    size = 0
    for s in seeds:
        if mark[s] != gen:
            mark[s] = gen
            stack[top] = s
            top += 1
    while top:
        top -= 1
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
    return size


@njit(cache=True, nogil=True)
def subsets(num_atoms: int, eps_ptr: np.ndarray, eps_nbr: np.ndarray, edge_ptr: np.ndarray,
            edge_lo: np.ndarray, edge_hi: np.ndarray, edge_tgt: np.ndarray,
            important: np.ndarray, start: int, final: int,
            max_states: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Subset construction of a Thompson NFA over atoms (see ``automata._Nfa.determinize``).

    The NFA: epsilon successors ``eps_nbr[eps_ptr[q]:eps_ptr[q + 1]]``; character edges
    ``edge_lo/hi/tgt[edge_ptr[q]:edge_ptr[q + 1]]`` (atom interval, target). A DFA state is the
    set of *important* NFA states (with edges, or ``final``) of an epsilon closure, kept sorted
    in ``elems[set_ptr[d]:set_ptr[d + 1]]`` and found again through an open-addressing hash
    table. States are numbered in order of discovery, each row swept in ascending atom order.

    Returns ``(trans int32 [n, num_atoms], accept bool [n])``, or an empty ``trans`` when the
    DFA would pass ``max_states`` states.
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
            size = _closure(seeds, eps_ptr, eps_nbr, important, mark, gen, stack, found)
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
                    return np.empty((0, num_atoms), np.int32), np.empty(0, np.bool_)
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
    return rows[:num_sets].copy(), accept


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
