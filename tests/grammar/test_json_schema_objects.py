"""Objects in schema order: the member automaton's language, and objects of many keys.

Oracle for the language: ``jsonschema`` validity plus the schema-order rule (named keys in the
order the schema declares them, other keys after every named one); membership by the reference
recognizer.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grammarsd.errors import SchemaUnsupportedError
from grammarsd.grammar.ir import Choice, Seq
from grammarsd.grammar.json_schema import JsonSchemaOptions, schema_to_grammar
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


@pytest.fixture(scope="module")
def recognizers() -> dict[str, ReferenceRecognizer]:
    return {name: ReferenceRecognizer(schema_to_grammar(s)) for name, s in SCHEMAS.items()}


def _in_schema_order(keys: list[str]) -> bool:
    """Named keys in declaration order, every other key after them."""
    places = [NAMES.index(k) if k in NAMES else len(NAMES) for k in keys]
    return places == sorted(places)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(SCHEMAS)),
       keys=st.lists(st.sampled_from(NAMES + EXTRA), unique=True, max_size=8),
       values=st.lists(st.sampled_from([1, 2, "s", None]), min_size=8, max_size=8),
       shuffle=st.randoms(use_true_random=False))
def test_schema_order_language_is_exact(recognizers: dict[str, ReferenceRecognizer], name: str,
                                        keys: list[str], values: list[Any],
                                        shuffle: Any) -> None:
    if shuffle.random() < 0.5:  # half the time the keys come in schema order
        keys = sorted(keys, key=lambda k: NAMES.index(k) if k in NAMES else len(NAMES))
    instance = dict(zip(keys, values, strict=False))
    text = json.dumps(instance)
    expected = (jsonschema.Draft202012Validator(SCHEMAS[name]).is_valid(instance)
                and _in_schema_order(keys))
    assert recognizers[name].accepts(text) == expected, (name, text)


def test_five_hundred_keys_lower_without_deep_recursion() -> None:
    """The member automaton is written from a worklist: 500 keys once overflowed Python's
    stack (RecursionError), and past ``max_object_states`` the refusal is typed."""
    schema = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(500)}}
    assert schema_to_grammar(schema).rules
    with pytest.raises(SchemaUnsupportedError, match="more than 400 object states"):
        schema_to_grammar(schema, options=JsonSchemaOptions(max_object_states=400))


def test_every_state_offers_one_shared_step_per_key() -> None:
    """In schema order every state before optional key ``j`` offers the step to ``j`` (and each
    may close the object): written once and shared, so the analyses after the lowering walk n
    steps, not n**2 / 2."""
    n = 40
    schema = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(n)}}
    rules = schema_to_grammar(schema, options=JsonSchemaOptions(any_order=False)).rules
    steps = [alt for name, body in rules.items() if name.startswith("obj")
             and isinstance(body, Choice) for alt in body.items if isinstance(alt, Seq)]
    assert len(steps) > n * (n - 1) // 2  # every state's own list of steps ...
    # ... over one object per step: to each key (and to another key) with a comma and without,
    # the close, and the few of the other keys' value (any JSON, objects included)
    assert len({id(step) for step in steps}) <= 2 * (n + 1) + 5


def test_hand_picked_orders(recognizers: dict[str, ReferenceRecognizer]) -> None:
    r = recognizers["required-inside"]
    assert r.accepts('{"a": 1, "b": 2, "e": 3, "x": "s"}')
    assert r.accepts('{"b": 2, "c": 1, "d": 1, "e": 3, "f": 4}')
    assert not r.accepts('{"b": 2, "a": 1, "e": 3}')  # valid for jsonschema, out of order
    assert not r.accepts('{"a": 1, "e": 3}')  # b missing
    assert not r.accepts('{"b": 2, "x": "s", "e": 3}')  # another key before a named one
