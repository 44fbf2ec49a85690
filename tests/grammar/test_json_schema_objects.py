"""Objects in schema order: the member automaton's language, and objects of many keys.

Oracle for the language: ``jsonschema`` validity plus the schema-order rule (named keys in the
order the schema declares them, other keys after every named one); membership by the reference
recognizer.
"""

from __future__ import annotations

import json
import math
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grammarsd.errors import SchemaUnsupportedError
from grammarsd.grammar.ir import Choice, Expr, Literal, Seq
from grammarsd.grammar.json_schema import JsonSchemaOptions, schema_to_grammar
from grammarsd.grammar.json_schema.objects import _DIRECT_KEYS, tree_ranges
from grammarsd.grammar.json_schema.strings import string_literal
from grammarsd.matcher.reference import ReferenceRecognizer

NAMES = ["a", "b", "c", "d", "e", "f"]
EXTRA = ["x", "y"]
SCHEMAS: dict[str, dict[str, Any]] = {
    "optional": {"type": "object", "properties": {k: {"type": "integer"} for k in NAMES}},
    "required-inside": {"type": "object", "properties": {k: {"type": "integer"} for k in NAMES},
                        "required": ["b", "e"], "additionalProperties": {"type": "string"}},
    "closed-counted": {"type": "object", "properties": {k: {"type": "integer"} for k in NAMES},
                       "required": ["c"], "additionalProperties": False, "minProperties": 2,
                       "maxProperties": 4},
    "dependent": {"type": "object", "properties": {k: {"type": "integer"} for k in NAMES},
                  "dependentRequired": {"a": ["f"]}, "additionalProperties": {"type": "null"}},
}


# more optional keys in a row than a state writes out: they go through the key-range tree
MANY = [f"k{i}" for i in range(2 * _DIRECT_KEYS + 8)]
_LATE = len(MANY) - 10
MANY_SCHEMAS: dict[str, dict[str, Any]] = {
    "many-optional": {"type": "object", "properties": {k: {"type": "integer"} for k in MANY}},
    "many-required-inside": {"type": "object",
                             "properties": {k: {"type": "integer"} for k in MANY},
                             "required": ["k3", f"k{_LATE}"],
                             "additionalProperties": {"type": "string"}},
    "many-counted": {"type": "object", "properties": {k: {"type": "integer"} for k in MANY},
                     "required": [f"k{_DIRECT_KEYS + 5}"], "additionalProperties": False,
                     "minProperties": 2, "maxProperties": 4},
    "many-dependent": {"type": "object", "properties": {k: {"type": "integer"} for k in MANY},
                       "dependentRequired": {"k2": [f"k{_LATE + 7}"]},
                       "additionalProperties": {"type": "null"}},
}


@pytest.fixture(scope="module")
def recognizers() -> dict[str, ReferenceRecognizer]:
    return {name: ReferenceRecognizer(schema_to_grammar(s))
            for name, s in {**SCHEMAS, **MANY_SCHEMAS}.items()}


def _in_schema_order(keys: list[str], names: list[str] = NAMES) -> bool:
    """Named keys in declaration order, every other key after them."""
    places = [names.index(k) if k in names else len(names) for k in keys]
    return places == sorted(places)


def _check_order(recognizers: dict[str, ReferenceRecognizer], schemas: dict[str, Any],
                 names: list[str], name: str, keys: list[str], values: list[Any]) -> None:
    """The recognizer accepts the object of ``keys`` (with ``values``) iff ``jsonschema``
    finds it valid and its keys come in schema order."""
    instance = dict(zip(keys, values, strict=False))
    expected = (jsonschema.Draft202012Validator(schemas[name]).is_valid(instance)
                and _in_schema_order(list(instance), names))
    assert recognizers[name].accepts(json.dumps(instance)) == expected, (name, instance)


def _schema_ordered(keys: list[str], names: list[str]) -> list[str]:
    return sorted(keys, key=lambda k: names.index(k) if k in names else len(names))


@settings(max_examples=600, deadline=None)
@given(data=st.data())
def test_schema_order_language_is_exact(recognizers: dict[str, ReferenceRecognizer],
                                        data: st.DataObject) -> None:
    """Few keys (each state writes them out) and many (states offer them through key ranges,
    ``_key_range``); half the time the keys come in schema order."""
    schemas, names = data.draw(st.sampled_from([(SCHEMAS, NAMES), (MANY_SCHEMAS, MANY)]))
    name = data.draw(st.sampled_from(sorted(schemas)))
    keys = data.draw(st.lists(st.sampled_from(names + EXTRA), unique=True, max_size=8))
    values = data.draw(st.lists(st.sampled_from([1, 2, "s", None]), min_size=8, max_size=8))
    if data.draw(st.booleans()):
        keys = _schema_ordered(keys, names)
    _check_order(recognizers, schemas, names, name, keys, values)


@pytest.mark.parametrize("name", ["many-optional", "many-required-inside"])
def test_many_keys_every_key_is_offered(recognizers: dict[str, ReferenceRecognizer],
                                        name: str) -> None:
    """Every key alone, every two neighbours and every key before the last: each state's
    ranges cover exactly the keys it may go on with (same oracle as above)."""
    last = len(MANY) - 1
    pairs = ([(i,) for i in range(len(MANY))] + [(i, i + 1) for i in range(last)]
             + [(i, last) for i in range(last)] + [(i + 1, i) for i in range(0, last, 7)])
    for keys in pairs:
        _check_order(recognizers, MANY_SCHEMAS, MANY, name, [MANY[i] for i in keys], list(keys))


def test_tree_ranges_cover_exactly() -> None:
    """Oracle: set arithmetic. Every ``[first, stop)`` inside ``[0, n)`` is the disjoint union
    of the ranges, in order, each a node of the halving tree, at most two per level."""
    def nodes(lo: int, hi: int) -> set[tuple[int, int]]:
        if hi - lo <= 1:
            return {(lo, hi)}
        mid = (lo + hi) // 2
        return {(lo, hi)} | nodes(lo, mid) | nodes(mid, hi)

    for n in range(1, 70):
        tree = nodes(0, n)
        for first in range(n):
            for stop in range(first + 1, n + 1):
                ranges = tree_ranges(first, stop, 0, n)
                assert [i for lo, hi in ranges for i in range(lo, hi)] == list(range(first, stop))
                assert set(ranges) <= tree
                assert len(ranges) <= 2 * max(1, math.ceil(math.log2(n)))


def test_five_hundred_keys_lower_without_deep_recursion() -> None:
    """The member automaton is written from a worklist: 500 keys once overflowed Python's
    stack (RecursionError), and past ``max_object_states`` the refusal is typed."""
    schema = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(500)}}
    assert schema_to_grammar(schema).rules
    with pytest.raises(SchemaUnsupportedError, match="more than 400 object states"):
        schema_to_grammar(schema, options=JsonSchemaOptions(max_object_states=400))


def _state_alternatives(n: int) -> list[Expr]:
    schema = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(n)}}
    rules = schema_to_grammar(schema, options=JsonSchemaOptions(any_order=False)).rules
    return [alt for name, body in rules.items() if name.startswith("obj")
            and isinstance(body, Choice) for alt in body.items]


def test_states_offer_optional_keys_through_shared_ranges() -> None:
    """In schema order a state before optional key ``j`` offers it through O(log n) shared
    key ranges (``_key_range``), not one alternative per key: n**2 / 2 alternatives in all
    would make every analysis after the lowering quadratic in the keys. The steps to each key
    are still one object each, shared by the ranges that hold it."""
    n = 400
    alts = _state_alternatives(n)
    assert len(alts) < 2.5 * len(_state_alternatives(n // 2))  # written out: 4x
    steps = [alt for alt in alts if isinstance(alt, Seq)]
    # to each key (and to another key) with a comma and without, the close, and the few of
    # the other keys' value (any JSON, objects included)
    assert len({id(step) for step in steps}) <= 2 * (n + 1) + 5


def test_hand_picked_orders(recognizers: dict[str, ReferenceRecognizer]) -> None:
    r = recognizers["required-inside"]
    assert r.accepts('{"a": 1, "b": 2, "e": 3, "x": "s"}')
    assert r.accepts('{"b": 2, "c": 1, "d": 1, "e": 3, "f": 4}')
    assert not r.accepts('{"b": 2, "a": 1, "e": 3}')  # valid for jsonschema, out of order
    assert not r.accepts('{"a": 1, "e": 3}')  # b missing
    assert not r.accepts('{"b": 2, "x": "s", "e": 3}')  # another key before a named one


def _words(e: Expr) -> set[str]:
    """The finite language of a literal, sequence or choice, word by word."""
    if isinstance(e, Literal):
        return {e.text}
    if isinstance(e, Choice):
        return set().union(*(_words(a) for a in e.items))
    assert isinstance(e, Seq)
    out = {""}
    for item in e.items:
        out = {w + x for w in out for x in _words(item)}
    return out


@pytest.mark.parametrize("text", ["", "name", "a b~!", "\x7f", "é", 'q"uote', "back\\slash",
                                  "tab\there", "line\n", "\u2028", "😀", "\x00"])
def test_a_key_literal_is_the_spellings_json_dumps_writes(text: str) -> None:
    """The oracle is ``json.dumps``, with ``ensure_ascii`` on and off."""
    assert _words(string_literal(text)) == {json.dumps(text, ensure_ascii=a)
                                            for a in (True, False)}
