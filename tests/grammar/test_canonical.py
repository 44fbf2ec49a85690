"""The compiled loops of DFA construction against brute-force oracles.

``canonical_table`` (trim, Hopcroft, breadth-first numbering) is checked on random partial
tables against languages enumerated word by word; the byte lowering of classes whose edges sit
on UTF-8 block boundaries is checked code point by code point against Python's encoder."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from grammarsd.compiler.lexer import build_byte_dfa
from grammarsd.grammar.automata import canonical_table
from grammarsd.grammar.ir import CharClass, chars


def _words(width: int, length: int) -> list[tuple[int, ...]]:
    return [w for n in range(length + 1) for w in itertools.product(range(width), repeat=n)]


def _accepts(trans: np.ndarray, accept: np.ndarray, state: int, word: tuple[int, ...]) -> bool:
    for sym in word:
        state = int(trans[state, sym])
        if state < 0:
            return False
    return bool(accept[state])


def _signature(trans: np.ndarray, accept: np.ndarray, state: int,
               words: list[tuple[int, ...]]) -> tuple[bool, ...]:
    return tuple(_accepts(trans, accept, state, w) for w in words)


@pytest.mark.parametrize("seed", range(60))
def test_canonical_table_is_the_minimal_trimmed_bfs_dfa(seed: int) -> None:
    rng = random.Random(seed)
    n, width = rng.randint(1, 9), rng.randint(1, 3)
    trans = np.array([[rng.choice([-1, *range(n)]) for _ in range(width)] for _ in range(n)],
                     np.int32)
    accept = np.array([rng.random() < 0.3 for _ in range(n)], bool)
    out, out_accept = canonical_table(trans, accept)
    # words shorter than n tell any two of n states apart; longer ones check the language
    words = _words(width, n)
    assert _signature(out, out_accept, 0, words) == _signature(trans, accept, 0, words)
    # minimal: one state per distinct non-empty residual language reachable from the start
    reachable = {0}
    frontier = [0]
    while frontier:
        s = frontier.pop()
        for t in trans[s].tolist():
            if t >= 0 and t not in reachable:
                reachable.add(t)
                frontier.append(t)
    dead = tuple(False for _ in words)
    classes = {_signature(trans, accept, s, words) for s in reachable} - {dead}
    if not classes:  # the empty language: one state, no transitions
        assert out.shape == (1, width) and (out < 0).all() and not out_accept[0]
        return
    assert out.shape[0] == len(classes)
    assert {_signature(out, out_accept, s, words) for s in range(out.shape[0])} == classes
    # numbered breadth-first, symbols in order
    order = [0]
    for s in order:
        for t in out[s].tolist():
            if t >= 0 and t not in order:
                order.append(t)
    assert order == list(range(out.shape[0]))


# classes whose ends sit on (or next to) the edges of UTF-8 lead-byte and continuation blocks
EDGE_CLASSES = {
    "two_byte_edges": chars([(0x7F, 0x80), (0x7FF, 0x800)]),
    "inside_one_lead_block": chars([(0x101, 0x13E)]),
    "whole_lead_blocks": chars([(0x100, 0x17F), (0x1000, 0x1FFF)]),
    "around_surrogates": chars([(0xD7FF, 0xD7FF), (0xE000, 0xE001)]),
    "bmp_astral_edge": chars([(0xFFFF, 0x10000), (0x3FFFF, 0x40001)]),
    "last_code_points": chars([(0x10FFFE, 0x10FFFF)]),
    "scattered": chars([(0xE9, 0xE9), (0x20AC, 0x20AC), (0x1F600, 0x1F64F), (0x41, 0x5A)]),
}


def _probes(cc: CharClass) -> list[int]:
    points = {0, 0x7F, 0x80, 0x7FF, 0x800, 0xFFF, 0x1000, 0xD7FF, 0xE000, 0xFFFF, 0x10000,
              0x3FFFF, 0x40000, 0x10FFFF}
    for a, b in cc.ranges:
        points.update(range(max(0, a - 70), min(0x10FFFF, b + 70) + 1))
    return sorted(p for p in points if not 0xD800 <= p <= 0xDFFF)


@pytest.mark.parametrize("name", list(EDGE_CLASSES))
def test_class_edges_on_utf8_blocks(name: str) -> None:
    cc = EDGE_CLASSES[name]
    dfa = build_byte_dfa(cc)
    for cp in _probes(cc):
        inside = any(a <= cp <= b for a, b in cc.ranges)
        assert dfa.matches(chr(cp).encode()) == inside, hex(cp)
