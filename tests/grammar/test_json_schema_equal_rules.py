"""Equal subschemas lower to one rule (``_Lowering.rule``; a subschema without subschema
objects or references once, ``_Lowering._flat_key``), and the language stays exact.

Oracle for the language: ``jsonschema`` validity of instances whose keys come in schema order;
membership by the reference recognizer.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import jsonschema
import pytest

from grammarsd.grammar.json_schema import schema_to_grammar
from grammarsd.matcher.reference import ReferenceRecognizer

# ``list_a``/``list_b`` are equal and recursive (each refers to itself), ``x``/``y`` equal and
# not; ``z`` and ``m`` differ from them, and from each other, only in a bound, ``w`` only in a
# key
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "p": {"$ref": "#/$defs/list_a"},
        "q": {"$ref": "#/$defs/list_b"},
        "x": {"type": "object", "properties": {"v": {"type": "integer", "description": "one"}},
              "required": ["v"]},
        "y": {"type": "object", "properties": {"v": {"type": "integer", "description": "two"}},
              "required": ["v"]},
        "z": {"type": "object", "properties": {"v": {"type": "integer", "minimum": 0}},
              "required": ["v"]},
        "m": {"type": "object", "properties": {"v": {"type": "integer", "minimum": 5}},
              "required": ["v"]},
        "w": {"type": "object", "properties": {"u": {"type": "integer"}}, "required": ["u"]},
    },
    "additionalProperties": False,
    "$defs": {
        "list_a": {"type": "object", "properties": {"v": {"type": "integer"},
                                                    "next": {"$ref": "#/$defs/list_a"}}},
        "list_b": {"type": "object", "properties": {"v": {"type": "integer"},
                                                    "next": {"$ref": "#/$defs/list_b"}}},
    },
}

VALUES: list[Any] = [
    None, 1, -1, "s", {}, {"v": 1}, {"v": -2}, {"v": 7}, {"v": "s"}, {"u": 3},
    {"v": 1, "next": {"v": 2}}, {"v": 1, "next": {"v": "s"}}, {"next": {"next": {}}},
    {"v": 1, "next": {"next": {"v": -1}}},
]


def test_equal_bodies_share_one_rule() -> None:
    """No two value or member rules have equal bodies (before, each schema object had its
    own), so the six objects with a member ``v`` need three such members: an integer, and for
    ``z`` and ``m`` two bounded ones; objects of the same members are one automaton."""
    rules = schema_to_grammar(SCHEMA).rules
    for kind in ("value", "member"):
        bodies = [body for name, body in rules.items() if name.startswith(kind)]
        assert len(set(bodies)) == len(bodies), kind
    assert sum(str(body).startswith('"\\"v\\""') for body in rules.values()) == 3
    # and ``x``, ``y`` (one automaton over the same members) one value rule
    x, y = (str(body).split()[-1] for body in rules.values()
            if str(body).startswith(('"\\"x\\""', '"\\"y\\""')))
    assert x == y


@pytest.fixture(scope="module")
def recognizer() -> ReferenceRecognizer:
    return ReferenceRecognizer(schema_to_grammar(SCHEMA))


@pytest.mark.parametrize("key", ["p", "q", "x", "y", "z", "m", "w"])
def test_each_member_keeps_its_language(recognizer: ReferenceRecognizer, key: str) -> None:
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for value in VALUES:
        instance = {key: value}
        assert recognizer.accepts(json.dumps(instance)) == validator.is_valid(instance), instance


def test_pairs_of_members(recognizer: ReferenceRecognizer) -> None:
    """Two members in schema order, values from both an equal pair and a differing one."""
    validator = jsonschema.Draft202012Validator(SCHEMA)
    keys = list(SCHEMA["properties"])
    for (i, j), (a, b) in itertools.product(itertools.combinations(range(len(keys)), 2),
                                             itertools.product(VALUES[4:10], repeat=2)):
        instance = {keys[i]: a, keys[j]: b}
        assert recognizer.accepts(json.dumps(instance)) == validator.is_valid(instance), instance


# the same ``$ref`` beside the same keyword, in two resources where it means different things
REFS: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"$ref": "http://a.example/"}, "b": {"$ref": "http://b.example/"}},
    "$defs": {
        "A": {"$id": "http://a.example/", "$defs": {"n": {"type": "integer"}},
              "properties": {"v": {"$ref": "#/$defs/n", "minimum": 0}}},
        "B": {"$id": "http://b.example/", "$defs": {"n": {"type": "string"}},
              "properties": {"v": {"$ref": "#/$defs/n", "minimum": 0}}},
    },
}


def test_a_reference_is_read_where_it_sits() -> None:
    recognizer = ReferenceRecognizer(schema_to_grammar(REFS))
    validator = jsonschema.Draft202012Validator(REFS)
    for key, value in itertools.product("ab", [1, -1, "s", None]):
        instance = {key: {"v": value}}
        assert recognizer.accepts(json.dumps(instance)) == validator.is_valid(instance), instance
