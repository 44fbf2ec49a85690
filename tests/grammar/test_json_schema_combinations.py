"""Recursion under complements and large combinations of alternatives (issue #4), exactly.

* A recursive ``$ref`` under a complement (``not``, exact ``oneOf``) once expanded forever
  (``RecursionError``): every level built fresh synthetic schema objects, so the memo keyed by
  schema identity never hit. Reduced from MaskBench ``Github_hard---o76745``.
* Combinations of alternatives are judged on brute-force enumerations of small instances.

The oracle is ``jsonschema`` (the schema's draft); membership in the grammar is decided by the
reference recognizer (``assert_exact``, any key order).
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from test_json_schema_complements import arrays, assert_exact, objects

from grammarsd.errors import SchemaUnsupportedError
from grammarsd.grammar.json_schema import JsonSchemaOptions, schema_to_grammar
from grammarsd.matcher.reference import ReferenceRecognizer

DRAFT7 = "http://json-schema.org/draft-07/schema#"


def nested(keys: list[str], leaves: list[Any], depth: int) -> list[Any]:
    """Leaves, and objects/arrays of earlier values up to ``depth`` levels (at most 2 members)."""
    out = list(leaves)
    for _ in range(depth):
        inner = out[: 2 * len(leaves) + 6]  # keep the enumeration small: shallow values first
        out = out + arrays(inner, 1)[1:] + objects(keys, inner, 2)[1:]
        out = list({json.dumps(x): x for x in out}.values())
    return out


# --------------------------------------------------------------------------- recursion

ACTION_LIKE = {  # o76745 reduced: oneOf whose branches overlap, one of them recursive
    "$schema": DRAFT7,
    "oneOf": [{"$ref": "#/definitions/a"}, {"type": "object", "required": ["x"]}],
    "definitions": {"a": {"type": "object", "properties": {
        "args": {"type": "array", "items": {"oneOf": [{"type": "null"}, {
            "$ref": "#/definitions/a"}]}}}}},
}
NOT_RECURSIVE = {  # not over a recursive schema through properties, then through items
    "not": {"$ref": "#/definitions/b"},
    "definitions": {"b": {"type": "object", "properties": {
        "p": {"anyOf": [{"type": "integer"}, {"$ref": "#/definitions/b"}]},
        "q": {"type": "array", "items": {"$ref": "#/definitions/b"}}}}},
    "$schema": DRAFT7,
}


@pytest.mark.parametrize("schema", [ACTION_LIKE, NOT_RECURSIVE], ids=["oneOf", "not"])
def test_recursive_ref_under_a_complement_is_exact(schema: dict[str, Any]) -> None:
    keys = ["args", "x"] if schema is ACTION_LIKE else ["p", "q"]
    values = nested(keys, [None, 1, "s"], 3)
    assert_exact(schema, values)


@pytest.mark.parametrize("keyword", ["properties", "items"])
def test_complement_of_a_schema_every_value_meets_is_empty(keyword: str) -> None:
    # b = {properties: {p: b}} holds for every finite value, so ``not b`` has no instance
    # (a witness would have to nest forever): the lowering must close, with no string.
    inner = {"items": {"$ref": "#/definitions/b"}} if keyword == "items" else {
        "properties": {"p": {"$ref": "#/definitions/b"}}}
    schema = {"$schema": DRAFT7, "not": {"$ref": "#/definitions/b"},
              "definitions": {"b": inner}}
    rec = ReferenceRecognizer(schema_to_grammar(schema, options=JsonSchemaOptions()))
    validator = jsonschema.Draft7Validator(schema)
    for x in nested(["p"], [None, 1, "s"], 3):
        assert not validator.is_valid(x)
        assert not rec.accepts(json.dumps(x)), x


# --------------------------------------------------------------------------- combinations

KINDS = ["a", "b", "c", "d", "e", "f"]
TAGGED_BY_PARENT = {  # o69635: the tag is required by the parent, each branch narrows its enum
    "$schema": DRAFT7, "type": "object", "required": ["kind"],
    "properties": {"kind": {"enum": KINDS}},
    "oneOf": [{"properties": {"kind": {"enum": [k]}, k: {"type": "integer"}}, "required": [k]}
              for k in KINDS],
}
NULLED_BY_PATTERN = {  # o88605: each branch requires a key the others' patterns force to null
    "$schema": DRAFT7,
    "oneOf": [{"type": "object", "properties": {k: {"type": "string"}},
               "patternProperties": {"^(" + "|".join(o for o in KINDS[:4] if o != k) + ")$": {
                   "type": "null"}}, "required": [k]} for k in KINDS[:4]],
}
PROMO = {"oneOf": [{"type": "object", "required": ["type", "v"],
                    "properties": {"type": {"type": "string"}}},
                   {"type": "object", "required": ["type"], "additionalProperties": False,
                    "properties": {"type": {"enum": ["ref"]}, "id": {}}},
                   {"type": "object", "required": ["type"], "additionalProperties": False,
                    "properties": {"type": {"enum": ["html"]}, "html": {"type": "string"}}}]}
SAME_SCHEMA_TWICE = {  # wp_53: one value schema reached twice (properties and .*), twice over
    "$schema": DRAFT7,
    "allOf": [{"$ref": "#/definitions/items"}, {"$ref": "#/definitions/items"}],
    "definitions": {"items": {"type": "object", "properties": {"basic": PROMO},
                              "patternProperties": {".*": PROMO}}},
}
MODES = ["x", "y", "z", "w"]
IF_THEN_BY_MODE = {  # semgrep: allOf of if/then keyed on one property's const
    "$schema": DRAFT7, "type": "object",
    "allOf": [{"if": {"properties": {"mode": {"const": m}}, "required": ["mode"]},
               "then": {"required": [m], "properties": {o: False for o in MODES if o != m}}}
              for m in MODES],
}
ONE_OVERLAP = {  # o37788: only two of five branches overlap; only they need complements
    "$schema": DRAFT7,
    "oneOf": [{"type": "object", "required": ["a"], "additionalProperties": False,
               "properties": {"a": {}}},
              {"type": "object", "required": ["b"], "additionalProperties": False,
               "properties": {"b": {"type": "string"}}},
              {"type": "object", "required": ["c"], "additionalProperties": False,
               "properties": {"c": {"enum": [True]}}},
              {"type": "object", "minProperties": 1, "additionalProperties": False,
               "patternProperties": {"^[0-9]x$": {}}},
              {"type": "object", "minProperties": 1, "additionalProperties": False,
               "patternProperties": {"^[a-z]$": {"type": ["string", "integer"]}},
               "not": {"required": ["a"]}}],
}
COMBINATIONS = {
    "tag required by the parent": (TAGGED_BY_PARENT, ["kind", *KINDS[:3]], ["a", "b", 1]),
    "keys nulled by patterns": (NULLED_BY_PATTERN, KINDS[:4], ["s", None]),
    "same schema twice": (SAME_SCHEMA_TWICE, ["basic", "q"], [
        {"type": "ref"}, {"type": "ref", "v": 1}, {"type": "html", "html": "s"},
        {"type": "s", "v": 1}, {"type": 1, "v": 1}, {"type": "html", "v": 1}, None]),
    "if/then by mode": (IF_THEN_BY_MODE, ["mode", *MODES[:3]], ["x", "y", 1]),
    "one overlapping pair": (ONE_OVERLAP, ["a", "b", "c", "1x", "q"], ["s", 1, True]),
}


@pytest.mark.parametrize("case", COMBINATIONS.values(), ids=COMBINATIONS.keys())
def test_combinations_are_lowered_exactly(case: tuple[dict[str, Any], list[str], list[Any]]
                                          ) -> None:
    schema, keys, values = case
    # each was refused before: "too many combinations of alternatives (> 64)"
    assert_exact(schema, objects(keys, values, 3))


def test_the_limit_still_refuses_with_a_typed_error() -> None:
    # every pair of branches overlaps: a & not b & .. is 2**4 object alternatives and more
    schema = {"oneOf": [{"required": [k], "properties": {k: {"type": "integer"}}}
                        for k in "abcde"]}
    with pytest.raises(SchemaUnsupportedError) as info:
        schema_to_grammar(schema, options=JsonSchemaOptions(max_alternatives=8))
    assert info.value.keyword == "oneOf"
    four = {"oneOf": schema["oneOf"][:4]}  # 4 * (1 + 2**3) alternatives: within the default
    assert_exact(four, objects(list("abcd"), [1, "s"], 3))


FINITE_OVERLAP = {  # a finite branch overlapping an infinite one: its values hold twice
    "enum beside integers": {"oneOf": [{"enum": [1, 2, "x"]}, {"type": "integer"}]},
    "const among bounded": {"oneOf": [{"type": "integer", "maximum": 5},
                                      {"enum": [1, 7, "x"]}, {"const": 3}]},
}


@pytest.mark.parametrize("schema", FINITE_OVERLAP.values(), ids=FINITE_OVERLAP.keys())
def test_finite_branch_values_are_excluded_from_overlapping_branches(
        schema: dict[str, Any]) -> None:
    # once accepted 1 (valid against both branches, so invalid against oneOf)
    assert_exact(schema, [*range(-3, 10), "x", "y", True])


def test_enum_values_are_checked_against_everything_beside_the_enum() -> None:
    # The listed values skip the re-check of their own enum (they are its members by
    # construction); every other keyword beside it, a nested enum and a $ref'd const still
    # filter them.
    values = [f"v{i}" for i in range(40)] + ["long-value", 1, 2.5, None, [1], {"a": 1}]
    schema = {
        "$defs": {"ten": {"not": {"const": "v10"}}},
        "enum": values,
        "maxLength": 3,
        "allOf": [{"enum": values[::2] + [1, None, "v7"]}, {"$ref": "#/$defs/ten"}],
    }
    assert_exact(schema, [*values, "v41", "v", 3])


def _tools(n: int) -> list[dict[str, Any]]:
    return [{"type": "object", "required": ["name", "args"],
             "properties": {"name": {"const": f"tool_{i}"},
                            "args": {"type": "object", "required": ["x"],
                                     "properties": {"x": {"type": "integer"}}}}}
            for i in range(n)]


@pytest.mark.parametrize("keyword", ["anyOf", "oneOf"])
def test_a_wide_union_compiles_and_past_the_limit_names_its_keyword(keyword: str) -> None:
    # a union is as many alternatives as branches: 200 tools fit the default limit, exactly
    schema = {keyword: _tools(200)}
    rec = ReferenceRecognizer(schema_to_grammar(schema))
    judge = jsonschema.Draft202012Validator(schema)
    for name in ("tool_0", "tool_199", "tool_200", "tool_"):
        for args in ({"x": 1}, {"x": "1"}, {}):
            x = {"name": name, "args": args}
            assert rec.accepts(json.dumps(x)) == judge.is_valid(x), x
    # past it, the refusal names the union (not the allOf its product is taken as) and where
    with pytest.raises(SchemaUnsupportedError) as info:
        schema_to_grammar({"properties": {"call": {keyword: _tools(300)}}})
    assert info.value.keyword == keyword and info.value.pointer == f"/properties/call/{keyword}"


def test_one_of_negates_exactly_the_branches_its_signatures_cannot_separate() -> None:
    # tools told apart by their ``name`` const (the pairwise shortcut), beside branches it must
    # not separate from them: a name enum overlapping tool_3, and a name of any string
    schema = {"oneOf": [
        *_tools(6),
        {"type": "object", "required": ["name"],
         "properties": {"name": {"enum": ["tool_3", "other"]}}},
        {"required": ["name"], "properties": {"name": {"type": "string"}}},
    ]}
    instances = [{"name": name, "args": args}
                 for name in ("tool_3", "tool_5", "other", "zzz")
                 for args in ({"x": 1}, {"x": "1"})]
    assert_exact(schema, [*instances, {"name": "other"}, {"name": 5}, {}, "s"])
