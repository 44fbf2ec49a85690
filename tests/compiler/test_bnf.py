"""The compiled BNF passes (``compiler._bnf``) against textbook fixpoints on random grammars: which
productions survive trimming and in what order, nullability, and each terminal's FOLLOW bytes
(FIRST/FOLLOW iterated until nothing changes, over Python sets)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from grammarsd.compiler._bnf import END, follow_bytes, trim_and_number

Prod = tuple[int, tuple[int, ...]]


@st.composite
def grammars(draw: st.DrawFn) -> tuple[int, int, list[Prod], list[set[int]]]:
    """(nonterminals, terminals, productions, each terminal's first bytes); the start symbol
    0 has the one production ``0 -> 1`` (``build_tables``' augmented start)."""
    num_nt = draw(st.integers(2, 7))
    num_t = draw(st.integers(1, 4))
    symbol = st.one_of(st.integers(1, num_nt - 1), st.integers(-num_t, -1))
    prods = [(0, (1,))] + draw(st.lists(
        st.tuples(st.integers(1, num_nt - 1), st.lists(symbol, max_size=4).map(tuple)),
        max_size=12))
    firsts = draw(st.lists(st.sets(st.integers(0, 255), min_size=1, max_size=4),
                           min_size=num_t, max_size=num_t))
    return num_nt, num_t, prods, firsts


def _least(prods: list[Prod], ok: Callable[[int], bool]) -> set[int]:
    found: set[int] = set()
    changed = True
    while changed:
        changed = False
        for lhs, body in prods:
            if lhs not in found and all(ok(s) or s in found for s in body):
                found.add(lhs)
                changed = True
    return found


def _oracle(prods: list[Prod]) -> tuple[list[Prod], set[int]] | None:
    productive = _least(prods, lambda s: s < 0)
    if 0 not in productive:
        return None
    kept = [(a, b) for a, b in prods if all(s < 0 or s in productive for s in b)]
    reachable = {0}
    changed = True
    while changed:
        changed = False
        for a, b in kept:
            if a in reachable:
                for s in b:
                    if s >= 0 and s not in reachable:
                        reachable.add(s)
                        changed = True
    kept = [(a, b) for a, b in kept if a in reachable]
    return kept, _least(kept, lambda s: False)


def _follow(prods: list[Prod], nullable: set[int], firsts: list[set[int]]) -> dict[int, set[int]]:
    first: dict[int, set[int]] = {a: set() for a, _ in prods}

    def first_of(s: int) -> set[int]:
        return firsts[-s - 1] if s < 0 else first.get(s, set())

    changed = True
    while changed:
        changed = False
        for a, body in prods:
            for s in body:
                if not first_of(s) <= first[a]:
                    first[a] |= first_of(s)
                    changed = True
                if s < 0 or s not in nullable:
                    break
    follow: dict[int, set[int]] = {}
    changed = True
    while changed:
        changed = False
        for a, body in prods:
            for i, s in enumerate(body):
                new = set()
                for r in body[i + 1:]:
                    new |= first_of(r)
                    if r < 0 or r not in nullable:
                        break
                else:
                    new |= follow.get(a, set())
                if not new <= follow.setdefault(s, set()):
                    follow[s] |= new
                    changed = True
    return follow


@settings(max_examples=300, deadline=None)
@given(grammars())
def test_trimming_numbering_and_follow_bytes_match_the_fixpoints(
        g: tuple[int, int, list[Prod], list[set[int]]]) -> None:
    num_nt, num_t, prods, firsts = g
    lhs = np.array([a for a, _ in prods], np.int32)
    ptr = np.cumsum([0] + [len(b) for _, b in prods]).astype(np.int64)
    syms = np.array([s for _, b in prods for s in b], np.int32)
    (ok, item_next, item_lhs, nt_ptr, nt_items, nullable, start_item, accept_item, used_nt,
     used_t) = trim_and_number(num_nt, num_t, lhs, ptr, syms, 0)
    expected = _oracle(prods)
    assert ok == (expected is not None)
    if expected is None:
        return
    kept, nullable_old = expected
    old_nt = [int(n) for n in used_nt]
    old_t = [int(t) for t in used_t]
    assert old_nt == sorted({a for a, _ in kept} | {s for _, b in kept for s in b if s >= 0})
    assert old_t == sorted({-s - 1 for _, b in kept for s in b if s < 0})

    def old(s: int) -> int:
        return old_nt[s] if s >= 0 else -old_t[-s - 1] - 1

    got: list[Prod] = []  # productions read back from the item arrays
    for n in range(len(old_nt)):
        for k in range(nt_ptr[n], nt_ptr[n + 1]):
            i, body = int(nt_items[k]), []
            while item_next[i] != END:
                assert item_lhs[i] == n
                body.append(old(int(item_next[i])))
                i += 1
            assert item_lhs[i] == n
            got.append((old_nt[n], tuple(body)))
    assert got == sorted(kept, key=lambda p: p[0])  # stable: same-lhs productions keep order
    assert item_next[start_item] == old_nt.index(1) and item_next[accept_item] == END
    assert {old_nt[n] for n in np.flatnonzero(nullable)} == nullable_old

    term_start = np.arange(len(old_t), dtype=np.int32)
    trans = np.full((max(len(old_t), 1), 256), -1, np.int32)
    for t, o in enumerate(old_t):
        trans[t, sorted(firsts[o])] = 0
    bits = follow_bytes(nt_ptr, nt_items, item_next, nullable, trans,
                        np.arange(256, dtype=np.uint8), term_start)
    follow = _follow(kept, nullable_old, firsts)
    for t, o in enumerate(old_t):
        words = [int(w) for w in bits[t]]
        got_bytes = {b for b in range(256) if words[b >> 6] >> (b & 63) & 1}
        assert got_bytes == follow.get(-o - 1, set()), (t, o)


def test_a_start_that_derives_nothing_is_reported() -> None:
    # 0 -> 1 ; 1 -> 1 "a": no finite derivation
    lhs = np.array([0, 1], np.int32)
    ptr = np.array([0, 1, 3], np.int64)
    syms = np.array([1, 1, -1], np.int32)
    assert not trim_and_number(2, 1, lhs, ptr, syms, 0)[0]
