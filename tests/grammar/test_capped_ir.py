"""``Capped`` in the IR passes, and the word lengths of character automata (which decide when
the JSON Schema compiler caps a ``maxLength`` instead of building the product)."""

from __future__ import annotations

import pytest

from grammarsd.grammar.automata import CharDFA
from grammarsd.grammar.ir import (
    EMPTY,
    NOTHING,
    Capped,
    Grammar,
    Ref,
    capped,
    lit,
    repeat,
    seq,
)
from grammarsd.grammar.passes import (
    normalize,
    nullable,
    nullable_rules,
    productive_rules,
    remove_unproductive,
)
from grammarsd.grammar.regex import parse_regex_search


def test_capped_smart_constructor() -> None:
    assert capped(NOTHING, 4) == NOTHING
    assert capped(EMPTY, 4) == EMPTY
    assert capped(lit("ab"), 4) == Capped(lit("ab"), 4)
    assert str(Capped(lit("ab"), 4)) == 'capped("ab", 4)'
    with pytest.raises(ValueError):
        Capped(lit("a"), -1)


def test_nullable_and_productive_follow_the_item() -> None:
    g = Grammar({"start": seq(Ref("a"), Ref("b")), "a": Capped(repeat(lit("x")), 3),
                 "b": Capped(Ref("never"), 3), "never": seq(lit("y"), Ref("never"))})
    assert nullable(g.rules["a"]) and not nullable(g.rules["b"])
    assert nullable_rules(g) == {"a"}
    assert productive_rules(g) == {"a"}


def test_passes_rebuild_capped_items() -> None:
    g = Grammar({"start": seq(lit("<"), Capped(Ref("body"), 9), lit(">")),
                 "body": repeat(Ref("char"), 1), "char": lit("z")})
    assert normalize(g).rules == {"start": seq(lit("<"), Capped(repeat(lit("z"), 1), 9),
                                               lit(">"))}
    dead = Grammar({"start": seq(lit("<"), Ref("opt"), lit(">")),
                    "opt": repeat(Capped(Ref("never"), 3), 0, 1),
                    "never": seq(lit("y"), Ref("never"))})
    assert remove_unproductive(dead).rules["opt"] == EMPTY  # capped(NOTHING) folds away


@pytest.mark.parametrize(("pattern", "lengths"), [
    (r"^(?:\S+\s+){0,49}\S+$", (1, None)),
    (r"^\d{1,15}(?:\.\d{1,5})?$", (1, 21)),
    (r"^$|^a{3,7}$", (0, 7)),
    (r"^(ab|c){2,4}$", (2, 8)),
    (r"^a*b{2}$", (2, None)),
])
def test_word_lengths(pattern: str, lengths: tuple[int, int | None]) -> None:
    assert CharDFA.from_expr(parse_regex_search(pattern, flavor="ecma")).word_lengths() == lengths


def test_word_lengths_of_the_empty_language() -> None:
    assert CharDFA.empty_language().word_lengths() is None
    assert CharDFA.from_expr(EMPTY).word_lengths() == (0, 0)
