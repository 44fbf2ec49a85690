"""``canonical_table`` (one numba kernel: column classes, trim, Hopcroft, quotient, breadth-first
numbering) against a plain-Python reference: trim by two searches, Moore's partition refinement,
breadth-first numbering, compared array for array (values, dtypes, layout)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grammarsd.compiler.dfa_cache import PackedDfa, _end_to_end
from grammarsd.grammar._canonical import (
    _EACH_BYTE,
    canonical_packed,
    canonical_packed_dag,
    column_classes,
    concatenation,
    sequence,
    union,
)
from grammarsd.grammar.automata import canonical_table

Table = tuple[list[list[int]], list[bool]]


def _search(succ: list[set[int]], seeds: set[int]) -> set[int]:
    found, stack = set(seeds), list(seeds)
    while stack:
        for t in succ[stack.pop()] - found:
            found.add(t)
            stack.append(t)
    return found


def reference(trans: list[list[int]], accept: list[bool]) -> Table:
    """The minimal trimmed partial DFA, numbered breadth-first with columns in order."""
    n, width = len(trans), len(trans[0])
    succ = [{t for t in row if t >= 0} for row in trans]
    reachable = _search(succ, {0})
    pred: list[set[int]] = [set() for _ in range(n)]
    for s in reachable:
        for t in succ[s]:
            pred[t].add(s)
    live = _search(pred, {s for s in reachable if accept[s]})
    if 0 not in live:
        return [[-1] * width], [False]
    # Moore: split by acceptance, then by the classes of the successors, until stable
    cls = {s: int(accept[s]) for s in live}
    while True:
        sig = {s: (cls[s], *(cls[t] if t in live else -1 for t in trans[s])) for s in live}
        ids: dict[tuple[int, ...], int] = {}
        new = {s: ids.setdefault(sig[s], len(ids)) for s in sorted(live)}
        if len(ids) == len(set(cls.values())):
            break
        cls = new
    member = {c: s for s, c in sorted(cls.items(), reverse=True)}  # any member of each class
    order = [cls[0]]
    for c in order:
        for t in trans[member[c]]:
            if t in live and cls[t] not in order:
                order.append(cls[t])
    number = {c: i for i, c in enumerate(order)}
    out = [[number[cls[t]] if t in live else -1 for t in trans[member[c]]] for c in order]
    return out, [accept[member[c]] for c in order]


def check(trans: list[list[int]], accept: list[bool]) -> None:
    out, out_accept = canonical_table(np.array(trans, np.int32).reshape(len(trans), -1),
                                      np.array(accept, bool))
    want, want_accept = reference(trans, accept)
    assert out.dtype == np.int32 and out_accept.dtype == np.bool_
    assert out.flags.c_contiguous and out_accept.flags.c_contiguous
    assert out.tolist() == want and out_accept.tolist() == want_accept


@st.composite
def tables(draw: st.DrawFn) -> Table:
    """Partial tables; columns drawn from a few shapes, so that equal columns (in runs and
    apart) are common."""
    n, width = draw(st.integers(1, 10)), draw(st.integers(1, 7))
    target = st.integers(-1, n - 1)
    shapes = draw(st.lists(st.lists(target, min_size=n, max_size=n), min_size=1, max_size=4))
    picks = draw(st.lists(st.integers(0, len(shapes) - 1), min_size=width, max_size=width))
    trans = [[shapes[p][s] for p in picks] for s in range(n)]
    return trans, draw(st.lists(st.booleans(), min_size=n, max_size=n))


@settings(max_examples=400, deadline=None)
@given(table=tables())
def test_canonical_table_matches_the_reference(table: Table) -> None:
    check(*table)


@pytest.mark.parametrize("seed", range(40))
def test_canonical_table_on_bigger_random_tables(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, width = int(rng.integers(20, 120)), int(rng.integers(1, 40))
    trans = rng.integers(-1, n, size=(n, width))
    trans[rng.random((n, width)) < rng.random()] = -1
    # few distinct target sets per column: many equivalent states, many equal columns
    trans = np.where(trans >= 0, trans % max(1, n // int(rng.integers(1, 6))), -1)
    trans[:, rng.random(width) < 0.5] = trans[:, :1]
    check(trans.tolist(), (rng.random(n) < 0.3).tolist())


def test_canonical_table_on_many_small_tables() -> None:
    """Dense coverage where work-list bugs of Hopcroft's refinement show (about 1 table in 600
    of these catches a parent block left off the work list)."""
    rng = np.random.default_rng(0)
    for _ in range(5000):
        n, width = int(rng.integers(1, 9)), int(rng.integers(1, 4))
        trans = rng.integers(-1, n, size=(n, width))
        trans[rng.random((n, width)) < rng.random() * 0.5] = -1
        check(trans.tolist(), (rng.random(n) < rng.random()).tolist())


CASES: dict[str, Table] = {
    "single_accepting": ([[-1]], [True]),
    "single_rejecting": ([[-1, -1]], [False]),
    "single_loop": ([[0, -1, 0]], [True]),
    "empty_language_with_cycles": ([[1, 0], [0, 1]], [False, False]),
    "accepting_only_unreachable": ([[0, -1], [-1, 0]], [False, True]),
    "dead_branch": ([[1, 2], [1, 1], [-1, -1]], [False, False, True]),
    "unreachable_equivalent": ([[1], [1], [1]], [False, True, True]),
    "equal_tails": ([[1, 2, 1], [3, 3, 3], [3, 3, 3], [-1, -1, -1]], [False, False, False, True]),
    "reverse_order": ([[-1, 2], [0, -1], [-1, 1]], [False, True, False]),
    # a split whose parent is still on the work list must put the new block there too
    "split_parent_on_work_list": ([[-1, 1], [-1, 2], [3, 0], [1, 2]], [True, True, False, True]),
    "split_parent_on_work_list_2": ([[1, 3], [-1, 3], [-1, -1], [2, 3]],
                                    [True, True, True, False]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_canonical_table_edge_cases(name: str) -> None:
    check(*CASES[name])


def test_no_columns() -> None:
    for accept in ([True], [False, True]):
        out, out_accept = canonical_table(np.zeros((len(accept), 0), np.int32),
                                          np.array(accept, bool))
        assert out.shape == (1, 0) and out_accept.tolist() == [accept[0]]


@settings(max_examples=200, deadline=None)
@given(table=tables())
def test_column_classes_are_numbered_by_first_occurrence(table: Table) -> None:
    trans = np.array(table[0], np.int32)
    starts, run_class, first = column_classes(trans)
    ids: dict[tuple[int, ...], int] = {}
    want = [ids.setdefault(tuple(col), len(ids)) for col in trans.T.tolist()]
    got = np.repeat(run_class, np.diff(starts)).tolist()
    assert got == want
    assert first.tolist() == [want.index(c) for c in range(len(ids))]
    assert all(want[a] != want[b] for a, b in zip(starts[:-2], starts[1:-1], strict=True))


def test_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError):
        canonical_table(np.zeros((0, 2), np.int32), np.zeros(0, bool))
    with pytest.raises(ValueError):
        canonical_table(np.zeros((2, 2), np.int32), np.zeros(3, bool))


# ``canonical_packed_dag``: a DAG of open rows in front of closed rows (a trie before a string
# body), minimised bottom-up; the oracle is the reference above and the Hopcroft kernel


def dag_table(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A random 256-column table whose closed rows lead only to closed rows and whose open rows
    lead to closed rows or to open rows later in a random order; few distinct columns and few
    target values, so that equal rows (to merge) and equal columns are common."""
    num_closed, num_open = int(rng.integers(0, 8)), int(rng.integers(1, 30))
    n = num_closed + num_open
    ids = rng.permutation(n)  # row of each node: closed nodes first, then the open ones in order
    closed = np.zeros(n, bool)
    closed[ids[:num_closed]] = True
    shapes = int(rng.integers(1, 5))
    node_trans = np.full((n, shapes), -1, np.int64)
    spread = int(rng.integers(1, 4))
    for node in range(n):
        if node < num_closed:
            pool = np.arange(num_closed)
        else:  # later open nodes, or closed ones
            pool = np.concatenate([np.arange(num_closed), np.arange(node + 1, n)])
        if pool.size:
            pool = pool[: max(1, pool.size // spread)] if rng.random() < 0.5 else pool
            node_trans[node] = rng.choice(pool, shapes)
        node_trans[node, rng.random(shapes) < rng.random() * 0.6] = -1
    picks = rng.integers(0, shapes, 256)
    trans = np.full((n, 256), -1, np.int32)
    for node in range(n):
        row = node_trans[node, picks]
        trans[ids[node]] = np.where(row >= 0, ids[np.maximum(row, 0)], -1)
    accept = rng.random(n) < rng.random()
    return trans, accept, closed


@pytest.mark.parametrize("seed", range(300))
def test_canonical_packed_dag_equals_the_general_minimisation(seed: int) -> None:
    trans, accept, closed = dag_table(np.random.default_rng(seed))
    got = canonical_packed_dag(trans, accept, closed, _EACH_BYTE)
    assert got is not None
    want = canonical_packed(trans, accept)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    out_accept, classes, table = got
    ref, ref_accept = reference(trans.tolist(), accept.tolist())
    assert table[:, classes].tolist() == ref and out_accept.tolist() == ref_accept


def test_canonical_packed_dag_merges_equal_subtries() -> None:
    """Two open rows that differ only in targets that are equivalent merge: the words "ab" and
    "cb" over a loop, whose leaves and ``b`` nodes are one state each once minimised."""
    trans = np.full((6, 256), -1, np.int32)
    trans[5, ord("x")] = 5  # closed: x*, accepting
    trans[0, ord("a")], trans[0, ord("c")] = 1, 2
    trans[1, ord("b")], trans[2, ord("b")] = 3, 4
    trans[3, ord("x")] = trans[4, ord("x")] = 5
    accept = np.array([False, False, False, False, False, True])
    closed = np.array([False] * 5 + [True])
    out_accept, _, minimal = canonical_packed_dag(trans, accept, closed, _EACH_BYTE)
    assert minimal.shape[0] == 4 and out_accept.tolist() == [False, False, False, True]


def test_canonical_packed_dag_refuses_a_cycle_and_a_closed_row_leading_out() -> None:
    trans = np.full((3, 256), -1, np.int32)
    trans[0, 0], trans[1, 1], trans[1, 2] = 1, 0, 2
    accept = np.array([False, False, True])
    assert canonical_packed_dag(trans, accept, np.array([False, False, True]), _EACH_BYTE) is None
    with pytest.raises(ValueError, match="closed"):
        canonical_packed_dag(trans, accept, np.array([False, True, True]), _EACH_BYTE)


# ``concatenation`` and ``sequence``: pieces one after another, each packed; a chain head (a
# member's key and colon between whitespace loops) before one tail skips the minimisation where
# it provably has nothing to do. The oracle: the byte tables glued by hand and minimised by the
# Hopcroft kernel


def _glued(pieces: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray] | None:
    """The pieces' languages one after another as one byte table (None where it would not be
    deterministic, or a piece takes the empty string)."""
    offsets = np.cumsum([0] + [t.shape[0] for t, _ in pieces])
    trans = np.vstack([np.where(t >= 0, t + off, -1)
                       for (t, _), off in zip(pieces, offsets, strict=False)]).astype(np.int32)
    if any(a[0] for _, a in pieces):
        return None
    for p in range(len(pieces) - 1):
        start = trans[offsets[p + 1]]
        for s in offsets[p] + np.flatnonzero(pieces[p][1]):
            if ((start >= 0) & (trans[s] >= 0)).any():
                return None
            trans[s] = np.where(start >= 0, start, trans[s])
    accept = np.zeros(offsets[-1], bool)
    accept[offsets[-2]:] = pieces[-1][1]
    return trans, accept


def _random_chain(rng: np.random.Generator, alphabet: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = int(rng.integers(2, 7))
    trans = np.full((n, 256), -1, np.int32)
    for i in range(n):
        if i < n - 1:
            trans[i, rng.choice(alphabet)] = i + 1
        if rng.random() < 0.4:
            loop = rng.choice(alphabet, int(rng.integers(1, 3)))
            trans[i, loop[trans[i, loop] < 0]] = i
    accept = np.zeros(n, bool)
    accept[-1] = True
    return trans, accept


def _random_tail(rng: np.random.Generator, alphabet: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    m = int(rng.integers(1, 6))
    trans = np.full((m, 256), -1, np.int32)
    for s in range(m):
        for b in rng.choice(alphabet, int(rng.integers(1, 4))):
            trans[s, b] = rng.integers(0, m)
    accept = rng.random(m) < 0.4
    accept[rng.integers(0, m)] = True
    return trans, accept


def _flat(packed: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, ...]:
    """(classes, table, accept) per piece, laid end to end as ``sequence`` and ``union`` take
    them (``dfa_cache._end_to_end``)."""
    flat = _end_to_end([PackedDfa(c, t, a, None, 0, None) for c, t, a in packed])
    assert flat is not None
    return flat


def _sequenced(*pieces: tuple[np.ndarray, np.ndarray]) -> np.ndarray | None:
    """``concatenation`` of two pieces, ``sequence`` of more (the first as a byte table, the
    others minimised and packed as the cache keeps them) against the minimised glue; its
    table, or None."""
    head, *rest = pieces
    packed = [(np.arange(256).astype(np.uint8), *head)]
    minimal = [head]
    for trans, acc in rest:
        tail_acc, tail_classes, tail_table = canonical_packed(trans, acc)
        packed.append((tail_classes, tail_table, tail_acc))
        minimal.append((np.ascontiguousarray(tail_table[:, tail_classes]), tail_acc))
    if len(packed) == 2:
        (hc, ht, ha), (tc, tt, ta) = packed
        ok, classes, table, accept = concatenation(ht, hc, ha, tt, tc, ta)
    else:
        ok, classes, table, accept = sequence(*_flat(packed))
    glued = _glued(minimal)
    assert ok == (glued is not None)
    if not ok:
        return None
    want = canonical_packed(*glued)
    assert np.array_equal(accept, want[0]) and np.array_equal(classes, want[1])
    assert np.array_equal(table, want[2])
    return table


@pytest.mark.parametrize("seed", range(300))
def test_concatenation_after_a_chain_equals_the_minimised_glue(seed: int) -> None:
    rng = np.random.default_rng(seed)
    alphabet = rng.choice(np.arange(32, 40), int(rng.integers(2, 5)), replace=False)
    _sequenced(_random_chain(rng, alphabet), _random_tail(rng, alphabet))


@pytest.mark.parametrize("seed", range(100))
def test_concatenation_after_any_head_equals_the_minimised_glue(seed: int) -> None:
    """Heads that are no chain (a canonical random DFA) take the general minimisation."""
    rng = np.random.default_rng(seed)
    alphabet = rng.choice(np.arange(32, 40), int(rng.integers(2, 5)), replace=False)
    head_acc, head_classes, head_table = canonical_packed(*_random_tail(rng, alphabet))
    if not head_acc[0]:
        head = np.ascontiguousarray(head_table[:, head_classes])
        _sequenced((head, head_acc), _random_tail(rng, alphabet))


@pytest.mark.parametrize("seed", range(200))
def test_sequence_of_many_pieces_equals_the_minimised_glue(seed: int) -> None:
    """Chains and random pieces alternating, three to seven of them (an object's keys and
    values)."""
    rng = np.random.default_rng(seed)
    alphabet = rng.choice(np.arange(32, 40), int(rng.integers(2, 5)), replace=False)
    pieces = [_random_chain(rng, alphabet) if p % 2 == 0 or rng.random() < 0.3
              else _random_tail(rng, alphabet) for p in range(int(rng.integers(3, 8)))]
    _sequenced(*pieces)


def test_sequence_refuses_a_piece_with_the_empty_string() -> None:
    x = ord("x")
    head = np.full((2, 256), -1, np.int32)
    head[0, x] = 1
    assert _sequenced((head, np.array([False, True])), (head, np.array([True, True])),
                      (head, np.array([False, True]))) is None


def test_concatenation_merges_a_chain_end_with_its_twin_in_the_tail() -> None:
    """``k x*`` then ``b (x* b)*``: the chain's last state (loop on x, then b) is the tail's
    state after ``b x``, so the glue is not minimal as it stands."""
    x, b, k = ord("x"), ord("b"), ord("k")
    head = np.full((2, 256), -1, np.int32)
    head[0, k], head[1, x] = 1, 1
    tail = np.full((3, 256), -1, np.int32)
    tail[0, b], tail[1, x], tail[2, x], tail[2, b] = 1, 2, 2, 1
    table = _sequenced((head, np.array([False, True])), (tail, np.array([False, True, False])))
    assert table is not None and table.shape[0] == 3  # k, then {the twins}, then after b


def test_concatenation_after_a_loop_back_is_minimised() -> None:
    """``a (b c)*`` then ``z (w (b c)* z)*``: after the glue the head's state after ``a`` is
    the tail's state after ``z w`` and the one after ``a b`` the one after ``z w b``; the
    head is no chain (``c`` leads back), so the general minimisation finds them."""
    a, b, c, w, z = map(ord, "abcwz")
    head = np.full((3, 256), -1, np.int32)
    head[0, a], head[1, b], head[2, c] = 1, 2, 1
    tail = np.full((4, 256), -1, np.int32)
    tail[0, z], tail[1, w], tail[2, z], tail[2, b], tail[3, c] = 1, 2, 1, 3, 2
    table = _sequenced((head, np.array([False, True, False])),
                          (tail, np.array([False, True, False, False])))
    assert table is not None and table.shape[0] == 4  # 0, {1, t}, {2, t2}, F; no start


# ``union``: the pieces' product, one at a time, minimised. The oracle: a plain-Python search
# over tuples of the pieces' states (one per piece, -1 once a piece is dead), minimised by the
# Hopcroft kernel


def _united_by_hand(pieces: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    start = tuple(0 for _ in pieces)
    index, order, rows = {start: 0}, [start], []
    while len(rows) < len(order):
        here = order[len(rows)]
        row = np.full(256, -1, np.int32)
        for b in range(256):
            nxt = tuple(-1 if q < 0 else int(t[q, b]) for q, (t, _) in zip(here, pieces, strict=True))
            if any(q >= 0 for q in nxt):
                if nxt not in index:
                    index[nxt] = len(order)
                    order.append(nxt)
                row[b] = index[nxt]
        rows.append(row)
    accept = np.array([any(q >= 0 and a[q] for q, (_, a) in zip(here, pieces, strict=True))
                       for here in order])
    return np.array(rows, np.int32), accept


@pytest.mark.parametrize("seed", range(200))
def test_union_equals_the_minimised_product(seed: int) -> None:
    rng = np.random.default_rng(seed)
    alphabet = rng.choice(np.arange(32, 40), int(rng.integers(2, 5)), replace=False)
    pieces = [_random_chain(rng, alphabet) if rng.random() < 0.4 else _random_tail(rng, alphabet)
              for _ in range(int(rng.integers(2, 5)))]
    packed = [canonical_packed(t, a) for t, a in pieces]  # (accept, classes, table)
    ok, classes, table, accept = union(*_flat([(c, t, a) for a, c, t in packed]))
    want = canonical_packed(*_united_by_hand(pieces))
    assert ok
    assert np.array_equal(accept, want[0]) and np.array_equal(classes, want[1])
    assert np.array_equal(table, want[2])

