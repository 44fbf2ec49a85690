"""Deeply nested expressions: helper nonterminals are named without the recursive ``str(expr)``
(a RecursionError on two MaskBench schemas), and nesting past what the recursive compiler can walk
is a typed ``GrammarTooLargeError``, never a RecursionError."""

from __future__ import annotations

import pytest

import grammarsd as gs
from grammarsd.errors import GrammarTooLargeError
from grammarsd.grammar.ir import Expr, Grammar, Ref, choice, lit, seq
from grammarsd.tokenizer.info import TokenizerInfo


def _nested(depth: int) -> Grammar:
    """a^k b (k < depth) | a^depth x, with x = c | ( x ): not regular, so helpers are named."""
    expr: Expr = Ref("x")
    for _ in range(depth):
        expr = choice(seq(lit("a"), expr), lit("b"))
    return Grammar({"start": expr, "x": choice(lit("c"), seq(lit("("), Ref("x"), lit(")")))})


def test_nesting_deeper_than_str_can_print_compiles(llama3_info: TokenizerInfo) -> None:
    # str() of this expression (the old helper names) hit RecursionError on CPython 3.11; how deep
    # str() can go varies across interpreter releases, so that is not asserted here.
    depth = 150
    compiled = gs.compile_ir(_nested(depth), llama3_info, cache=False)

    def accepts(text: str) -> bool:
        m = compiled.matcher()
        return m.accept_string(text) and m.is_accepting()

    # the language by hand
    assert accepts("b") and accepts("a" * 10 + "b") and accepts("a" * depth + "(c)")
    assert not accepts("a" * depth + "b") and not accepts("a" * 10 + "c") and not accepts("")


def test_nesting_past_the_compilers_reach_is_a_typed_error(llama3_info: TokenizerInfo) -> None:
    with pytest.raises(GrammarTooLargeError, match="expression_depth reached 1201") as err:
        gs.compile_ir(_nested(600), llama3_info, cache=False)
    assert err.value.limit == "expression_depth"
