"""Deeply nested expressions and schemas: helper nonterminals are named without the recursive
``str(expr)`` (a RecursionError on two MaskBench schemas), and nesting past what the recursive
compiler can walk is a typed ``GrammarTooLargeError``, never a RecursionError."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

import grammarsd as gs
from grammarsd.compiler.tables import build_tables
from grammarsd.errors import GrammarTooLargeError
from grammarsd.grammar.ir import Expr, Grammar, Ref, Repeat, choice, lit, seq
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


def test_helper_names_are_the_expression_text_cut_to_80_characters() -> None:
    item = seq(lit("{"), Ref("x"), lit("}"))
    long_item = seq(*(lit(f"word{i} ") for i in range(30)), Ref("x"))
    grammar = Grammar({"start": seq(Repeat(item), Repeat(long_item, 0, 2), Ref("x")),
                       "x": choice(lit("c"), seq(lit("("), Ref("x"), lit(")")))})
    names = build_tables(grammar).nt_names
    assert '("{" x "}")*' in names  # written by hand, not by str()
    cut = [n for n in names if "word0 word1 word2" in n]
    assert {n[n.index("...)") + 4 :] for n in cut} == {"", "{0,1}", "{0,2}"}
    assert all(len(n[1 : n.index("...)") + 3]) == 80 for n in cut)
    deep = build_tables(_nested(150)).nt_names  # too deep for str() on some interpreters
    assert all(n.startswith(("(", "<", "start", "x")) for n in deep)


def test_nesting_past_the_compilers_reach_is_a_typed_error(llama3_info: TokenizerInfo) -> None:
    with pytest.raises(GrammarTooLargeError, match="expression_depth reached 1201") as err:
        gs.compile_ir(_nested(600), llama3_info, cache=False)
    assert err.value.limit == "expression_depth"


def _nested_arrays(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


def test_deep_schemas_compile_until_a_typed_error(llama3_info: TokenizerInfo) -> None:
    # 50 levels compile exactly (jsonschema judges the instances) ...
    schema = _nested_arrays(50)
    compiled = gs.compile_json_schema(schema, llama3_info, cache=False)
    judge = jsonschema.Draft202012Validator(schema)
    for depth, inner in ((50, "1"), (49, "1"), (50, "[1]"), (50, "[]")):
        text = "[" * depth + inner + "]" * depth
        m = compiled.matcher()
        assert (m.accept_string(text) and m.is_accepting()) == judge.is_valid(json.loads(text))
    # ... and nesting, or a chain of $ref, past what the recursive checks, the lowering and the
    # cache key (json.dumps) can walk is refused with a typed error
    chain: dict[str, Any] = {
        f"d{i}": {"type": "array", "items": {"$ref": f"#/$defs/d{i + 1}"}} for i in range(300)
    }
    chain["d300"] = {"type": "integer"}
    combinators: list[dict[str, Any]] = [{"type": "integer"}] * 3
    for _ in range(300):  # nesting without values between: the expansion recurses instead
        all_of, any_of, nots = combinators
        combinators = [{"allOf": [all_of]}, {"anyOf": [any_of, {"type": "string"}]},
                       {"not": {"not": nots}}]
    for deep in (_nested_arrays(300), _nested_arrays(1500), {"$ref": "#/$defs/d0", "$defs": chain},
                 *combinators):
        with pytest.raises(GrammarTooLargeError) as err:  # never referencing's panic
            gs.compile_json_schema(deep, llama3_info, cache=False)
        assert err.value.limit == "schema_recursion"
