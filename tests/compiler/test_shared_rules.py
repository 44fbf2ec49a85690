"""Shared rules (``Grammar.shared``) are lowered once per process and spliced into each grammar.

JSON Schema's open objects make most grammars hold the same any-value rules; the compiler lowers
them apart once (``tables._Fragment``) and reuses that. Oracles: ``json`` plus ``jsonschema``
for what a schema accepts, and hand-written word lists for grammars built by hand.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

import grammarsd as gs
from grammarsd.compiler import tables
from grammarsd.compiler.tables import CompileLimits, build_tables
from grammarsd.errors import GrammarTooLargeError
from grammarsd.grammar.ir import Grammar, Ref, choice, lit, seq
from grammarsd.grammar.json_schema import JsonSchemaOptions, schema_to_grammar
from grammarsd.tokenizer.info import TokenizerInfo

BYTES = TokenizerInfo.from_token_bytes([b""] + [bytes([b]) for b in range(256)], eos_ids=[0],
                                       special_ids=[0])

OPEN = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
NESTED = {
    "type": "object",
    "properties": {
        "tags": {"type": "array", "items": {"type": "object", "properties": {
            "k": {"type": "string"}}}},
        "meta": {"additionalProperties": {"type": ["number", "null"]}},
        "free": {},
    },
}
VALUES = [
    {"id": 1}, {"id": 1, "x": None}, {"id": -2, "x": [1, "a", {"y": [True, False]}]},
    {"id": 3, "x": {"a": {"b": {"c": [[], {}]}}}, "z": "q\\\"\n"}, {"x": 1}, {"id": "1"},
    {"tags": [{"k": "v", "other": [1.5e3]}, {}]}, {"tags": [{"k": 1}]},
    {"meta": {"a": 1, "b": None}}, {"meta": {"a": "s"}}, {"free": {"deep": [1, [2, [3]]]}},
    {"id": 0, "é": "ü€"}, [], "x", 1, None,
]


def _accepts(compiled: gs.CompiledGrammar, text: str) -> bool:
    m = compiled.matcher()
    return m.accept_string(text) and m.is_accepting()


def _is_valid(schema: dict, text: str) -> bool:
    try:
        jsonschema.validate(json.loads(text), schema)
    except (json.JSONDecodeError, jsonschema.ValidationError):
        return False
    return True


def _texts() -> list[str]:
    out = []
    for v in VALUES:
        out += [json.dumps(v), json.dumps(v, separators=(",", ":")), json.dumps(v, indent=2)]
    return out + ['{"id": 1,}', '{"id": 1 "x": 2}', '{"id": 1, "x": [1,]}', '{"id": 1, "x": tru}',
                  '{"id": 1, "x": {"a" 1}}', '{"id": 1, "x": "\\q"}']


@pytest.mark.parametrize("schema", [OPEN, NESTED], ids=["open", "nested"])
def test_grammars_with_shared_rules_accept_what_the_schema_does(schema: dict) -> None:
    gs.compile_json_schema({"type": "object"}, BYTES, cache=False)  # the shared rules lowered
    compiled = gs.compile_json_schema(schema, BYTES, cache=False)
    for text in _texts():
        assert _accepts(compiled, text) == _is_valid(schema, text), text


def test_shared_rules_are_lowered_once_and_spliced_into_each_grammar(
        monkeypatch: pytest.MonkeyPatch) -> None:
    lowered, spliced = [], []
    lower, splice = tables._Fragment.lower.__func__, tables._Lowering.splice  # type: ignore[attr-defined]
    monkeypatch.setattr(tables._Fragment, "lower",
                        classmethod(lambda cls, *a: lowered.append(1) or lower(cls, *a)))
    monkeypatch.setattr(tables._Lowering, "splice",
                        lambda self, f: spliced.append(1) or splice(self, f))
    monkeypatch.setattr(tables, "_FRAGMENTS", type(tables._FRAGMENTS)())
    options = JsonSchemaOptions()
    first = schema_to_grammar(OPEN, options=options)
    second = schema_to_grammar(NESTED, options=options)
    assert first.shared and first.shared == second.shared
    build_tables(first)
    build_tables(second)
    assert (len(lowered), len(spliced)) == (1, 2)
    # control: the same rules without the promise are lowered in place, every time
    build_tables(Grammar(second.rules, start=second.start))
    assert (len(lowered), len(spliced)) == (1, 2)


def test_shared_rules_with_other_bodies_are_not_taken_for_those_lowered_before() -> None:
    def grammar(open_: str, close: str, leaf: str) -> Grammar:  # start: "<" a ">", a recursive
        a = choice(seq(lit(open_), Ref("a"), lit(close)), lit(leaf))
        return Grammar({"start": seq(lit("<"), Ref("a"), lit(">")), "a": a}, shared=frozenset("a"))

    parens = gs.compile_ir(grammar("(", ")", "x"), BYTES, cache=False)
    brackets = gs.compile_ir(grammar("[", "]", "y"), BYTES, cache=False)
    for compiled, good, bad in [(parens, ["<x>", "<((x))>"], ["<[y]>", "<y>", "<(x>"]),
                                (brackets, ["<y>", "<[[y]]>"], ["<(x)>", "<x>", "<[y>"])]:
        assert all(_accepts(compiled, w) for w in good)
        assert not any(_accepts(compiled, w) for w in bad)


def test_shared_names_must_be_rules() -> None:
    with pytest.raises(ValueError, match="shared rules not defined: b"):
        Grammar({"start": lit("a")}, shared=frozenset("b"))


def test_shared_rules_past_the_limits_count_only_where_the_grammar_reaches_them() -> None:
    many = choice(*(seq(lit(f"w{i}("), Ref("many"), lit(")")) for i in range(8)), lit("x"))
    rules = {"start": lit("a"), "many": many}  # ``many`` unreachable: never lowered in place
    limits = CompileLimits(max_productions=4)
    compiled = gs.compile_ir(Grammar(rules, shared=frozenset({"many"})), BYTES, limits=limits,
                             cache=False)
    assert _accepts(compiled, "a") and not _accepts(compiled, "x")
    with pytest.raises(GrammarTooLargeError, match="productions"):  # reached: refused
        gs.compile_ir(Grammar({**rules, "start": Ref("many")}, shared=frozenset({"many"})),
                      BYTES, limits=limits, cache=False)
