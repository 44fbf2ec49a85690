"""``canonical_table`` (one numba kernel: column classes, trim, Hopcroft, quotient, breadth-first
numbering) against a plain-Python reference: trim by two searches, Moore's partition refinement,
breadth-first numbering, compared array for array (values, dtypes, layout)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grammarsd.grammar._canonical import column_classes
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
