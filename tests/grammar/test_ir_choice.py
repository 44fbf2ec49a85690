"""``choice`` flattens and removes duplicates, first kept, whatever the number of alternatives
(a hash-based path serves long lists). Oracle: a plain quadratic first-occurrence filter. The
type tests for the empty language and the empty string agree with equality."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grammarsd.grammar.ir import (
    EMPTY,
    NOTHING,
    Choice,
    Expr,
    Literal,
    Ref,
    Repeat,
    Seq,
    chars,
    choice,
    is_empty,
    is_nothing,
    lit,
    repeat,
    seq,
)

ATOMS = [lit("a"), lit("b"), seq(lit("a"), repeat(lit("b"))), repeat(lit("c"), 1, 3),
         choice(lit("x"), lit("y")), lit("y")]


def flat_unique(items: list[Expr]) -> list[Expr]:
    out: list[Expr] = []
    for item in items:
        for part in item.items if isinstance(item, Choice) else (item,):
            if part not in out:
                out.append(part)
    return out


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(ATOMS), min_size=1, max_size=60))
def test_choice_keeps_first_occurrences_in_order(items: list[Expr]) -> None:
    expected = flat_unique(items)
    got = choice(*items)
    assert (list(got.items) if isinstance(got, Choice) else [got]) == expected


def test_many_distinct_alternatives_stay_in_order() -> None:
    items = [lit(f"w{i}") for i in range(3000)]
    assert choice(*items, *items).items == tuple(items)


@pytest.mark.parametrize("expr", [NOTHING, EMPTY, Choice(()), Seq(()), choice(), seq(), Literal("a"),
                                  Choice((Literal("a"),)), Seq((Literal("a"),)), Ref("r"),
                                  chars([]), Repeat(Literal("a"), 0, 1)])
def test_the_empty_type_tests_agree_with_equality(expr: Expr) -> None:
    """``is_empty`` / ``is_nothing`` are ``== EMPTY`` / ``== NOTHING`` without ``__eq__``."""
    assert is_empty(expr) == (expr == EMPTY)
    assert is_nothing(expr) == (expr == NOTHING)
