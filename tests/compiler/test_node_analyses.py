"""The lowering's per-node analyses (lexer sizes, repeat expansions and whitespace gaps, all in
``node_facts``), kept on IR nodes so a sub-expression shared across grammars is read once:
checked against plain recursive oracles."""

from __future__ import annotations

import random

import pytest

from grammarsd.compiler.tables import _OpenGaps
from grammarsd.grammar.automata import CharDFA
from grammarsd.grammar.encodings import decoded_class, encode_class
from grammarsd.grammar.ir import (
    Capped,
    CharClass,
    Choice,
    Decoding,
    Expr,
    Grammar,
    Literal,
    Ref,
    Repeat,
    WhitespaceGaps,
    char_set,
    children,
    lit,
    node_facts,
    repeat,
    seq,
)

WS = char_set(" \t\n\r")


def _oracle_expansions(e: Expr) -> tuple[int, int]:
    """The definition, by plain recursion: (expansion, largest repeat expansion inside)."""
    if isinstance(e, (Literal, CharClass, Ref)) or decoded_class(e) is not None:
        return 1, 0
    kids = [_oracle_expansions(k) for k in children(e)]
    exp = max((k[0] for k in kids), default=1)
    inner = max((k[1] for k in kids), default=0)
    if isinstance(e, Repeat):
        exp *= e.min + 1 if e.max is None else max(e.max, 1)
        inner = max(inner, exp)
    if isinstance(e, Capped):
        inner = 1 << 62
    return exp, inner


def _oracle_nodes(e: Expr) -> int:
    """Tree nodes, a JSON-encoded character one."""
    if decoded_class(e) is not None:
        return 1
    return 1 + sum(_oracle_nodes(k) for k in children(e))


def _oracle_gaps(e: Expr) -> set[int]:
    if isinstance(e, Repeat) and e.min == 0 and e.max is not None and e.item == WS:
        return {e.max}
    if isinstance(e, (Literal, CharClass, Ref)) or decoded_class(e) is not None:
        return set()
    return set().union(*(_oracle_gaps(k) for k in children(e)))


def _random_expr(rng: random.Random, depth: int) -> Expr:
    """Fresh nodes (no cached answers) mixing counted repeats, gaps, JSON characters, a cap."""
    if depth == 0 or rng.random() < 0.25:
        return rng.choice([lit("ab"), char_set("xyz"), Ref("r"), encode_class(char_set("a-c")),
                           repeat(WS, 0, rng.choice([2, 3]))])
    kind = rng.randrange(4)
    if kind == 0:
        return seq(*(_random_expr(rng, depth - 1) for _ in range(rng.randint(2, 3))))
    if kind == 1:  # a Choice built directly: ``choice`` would merge character classes
        return Choice(tuple(_random_expr(rng, depth - 1) for _ in range(rng.randint(2, 3))))
    if kind == 2:
        lo = rng.randint(0, 3)
        return Repeat(_random_expr(rng, depth - 1), lo, rng.choice([None, lo + rng.randint(1, 9)]))
    return Capped(_random_expr(rng, depth - 1), 50)


@pytest.mark.parametrize("seed", range(40))
def test_node_answers_match_the_definitions(seed: int) -> None:
    rng = random.Random(seed)
    e = _random_expr(rng, 5)
    shared = seq(e, lit(","), e)  # a shared child, answered once
    for root in (e, shared, e):  # the second time from the kept answers
        facts = node_facts(root)
        assert (facts.expansion, facts.big) == _oracle_expansions(root)
        assert facts.gaps == _oracle_gaps(root)
        assert node_facts(root).size == _oracle_nodes(root)


def test_gap_free_lexemes_are_left_as_they_are() -> None:
    grammar = Grammar({"start": lit("x"), "ws": repeat(WS, 0, 3)})
    open_gaps = _OpenGaps(grammar, WhitespaceGaps("ws", 3))
    text = seq(lit('"'), repeat(encode_class(char_set("0-9")), 4, 4), lit('"'))
    assert open_gaps(text) is text  # answered from the node, no rebuild
    other_bound = seq(lit("["), repeat(WS, 0, 2), lit("]"))
    assert open_gaps(other_bound) is other_bound
    gap = seq(lit("["), repeat(WS, 0, 3), lit("]"))
    assert open_gaps(gap) == seq(lit("["), repeat(WS, 0, None), lit("]"))


@pytest.mark.parametrize(("pattern", "expected"), [
    (repeat(char_set("abc"), 0, 7), (7, 7)),  # keeps seven characters apart
    (repeat(char_set("abc"), 2, None), (2, 2)),  # two apart, then a loop
    (repeat(char_set("abc"), 0, None), (1, 0)),  # a loop alone: one state
    (seq(lit("x"), repeat(char_set("abc"), 3, 3)), (4, 4)),
])
def test_a_pattern_leaf_counts_what_its_automaton_keeps_apart(pattern: Expr,
                                                             expected: tuple[int, int]) -> None:
    leaf = Decoding(CharDFA.from_expr(pattern))
    assert (node_facts(leaf).expansion, node_facts(leaf).big) == expected
    inside = seq(lit('"'), leaf, lit('"'))
    assert (node_facts(inside).expansion, node_facts(inside).big) == expected
