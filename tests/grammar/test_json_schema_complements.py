"""Complements of object/array keywords and the formats added later, against ``jsonschema``.

Each schema needs a complement the front end once refused (``not``/``oneOf`` over
``additionalProperties``, ``patternProperties``, ``items``, ``prefixItems``). A grammar must
accept ``json.dumps(x)`` exactly when ``jsonschema`` (the schema's draft) says ``x`` is valid,
over a brute-force enumeration of small instances; membership is decided by the reference
recognizer. Formats are judged by hand-labelled cases (RFC 5321, RFC 6901 drafts).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import jsonschema
import pytest

from grammarsd.errors import SchemaUnsupportedError
from grammarsd.grammar.json_schema import JsonSchemaOptions, schema_to_grammar
from grammarsd.matcher.reference import ReferenceRecognizer

DRAFT7 = "http://json-schema.org/draft-07/schema#"
SCALARS: list[Any] = [1, "s", None, 2.5]


def objects(keys: list[str], values: list[Any], max_keys: int = 2) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{}]
    for n in range(1, max_keys + 1):
        for ks in itertools.permutations(keys, n):
            for vs in itertools.product(values, repeat=n):
                out.append(dict(zip(ks, vs, strict=True)))
    return out


def arrays(values: list[Any], max_len: int = 3) -> list[list[Any]]:
    return [list(p) for n in range(max_len + 1) for p in itertools.product(values, repeat=n)]


def assert_exact(schema: dict[str, Any], instances: list[Any]) -> None:
    grammar = schema_to_grammar(schema, options=JsonSchemaOptions(any_order=True))
    rec = ReferenceRecognizer(grammar)
    validator = jsonschema.validators.validator_for(schema)(schema)
    valid_seen = invalid_seen = 0
    for x in instances + SCALARS:
        expected = validator.is_valid(x)
        valid_seen += expected
        invalid_seen += not expected
        assert rec.accepts(json.dumps(x)) == expected, (x, expected)
    assert valid_seen and invalid_seen  # the enumeration exercises both sides


OBJECT_CASES = {
    "not additionalProperties false": {
        "not": {"properties": {"a": {}}, "patternProperties": {"^x": {}},
                "additionalProperties": False}},
    "not additionalProperties schema": {
        "type": "object",
        "not": {"properties": {"a": {}}, "additionalProperties": {"type": "integer"}}},
    "not patternProperties": {"not": {"patternProperties": {"^x": {"type": "integer"},
                                                            "b$": {"type": "string"}}}},
    "oneOf closed objects": {
        "type": "object",
        "oneOf": [{"properties": {"a": {"type": "integer"}}, "additionalProperties": False},
                  {"properties": {"b": {}}, "additionalProperties": False}]},
    "not many patternProperties": {"not": {"patternProperties": {
        f"^{c}": False for c in "abcx"}}},
    "anyOf under not": {"not": {"anyOf": [{"additionalProperties": False},
                                          {"patternProperties": {"b": False}}]}},
}


@pytest.mark.parametrize("schema", OBJECT_CASES.values(), ids=OBJECT_CASES.keys())
def test_object_complements_match_jsonschema(schema: dict[str, Any]) -> None:
    assert_exact(schema, objects(["a", "b", "x1", "xb"], [1, "s", None]))


ARRAY_CASES = {
    "not items": {"not": {"items": {"type": "integer"}}},
    "not not items": {"not": {"not": {"items": {"type": "integer"}}}},
    "not prefixItems": {"not": {"prefixItems": [{"type": "integer"}, {"type": "string"}]}},
    "draft7 not tuple items": {"$schema": DRAFT7,
                               "not": {"items": [{"type": "integer"}, {"type": "string"}]}},
    "draft7 not additionalItems without tuple": {
        "$schema": DRAFT7, "not": {"type": "array", "additionalItems": False}},
    "oneOf items": {"type": "array", "oneOf": [{"items": {"type": "integer"}},
                                               {"items": {"type": "string"}}]},
}


@pytest.mark.parametrize("schema", ARRAY_CASES.values(), ids=ARRAY_CASES.keys())
def test_array_complements_match_jsonschema(schema: dict[str, Any]) -> None:
    assert_exact(schema, arrays([1, "s", 2.5]))


@pytest.mark.parametrize("schema,keyword", [
    ({"not": {"prefixItems": [True], "items": {"type": "integer"}}}, "items"),
    ({"$schema": DRAFT7, "not": {"items": [True], "additionalItems": False}}, "additionalItems"),
    ({"not": {"anyOf": [{"patternProperties": {f"^{c}": False}} for c in "abcd"]}},
     "patternProperties"),
])
def test_complements_still_refused(schema: dict[str, Any], keyword: str) -> None:
    with pytest.raises(SchemaUnsupportedError) as info:
        schema_to_grammar(schema)
    assert info.value.keyword == keyword


# --------------------------------------------------------------------------- formats

EMAILS = {  # RFC 5321 Mailbox (ASCII); True = valid
    "joe.bloggs@example.com": True, "te~st@example.com": True, "a.b.c.d@x.io": True,
    '"joe bloggs"@example.com': True, '"a\\"b"@example.com': True, "x@[127.0.0.1]": True,
    "x@[IPv6:::1]": True, "x@a-b.c--d.com": True, "x@localhost": True, "a" * 64 + "@x.com": True,
    "2962": False, ".test@example.com": False, "test.@example.com": False,
    "te..st@example.com": False, "joe.bloggs@invalid=domain.com": False,
    "x@[127.0.0.300]": False, "@example.com": False, "joe@": False, "jo e@example.com": False,
    "a" * 65 + "@x.com": False, "x@-a.com": False, "x@a-.com": False, "x@example.com.": False,
    "x@xn--a.com": False, "x@y@z.com": False, "x@" + "a" * 64 + ".com": False,
}


@pytest.mark.parametrize("text,valid", EMAILS.items(), ids=range(len(EMAILS)))
def test_email_is_a_sound_subset(text: str, valid: bool) -> None:
    rec = ReferenceRecognizer(schema_to_grammar({"type": "string", "format": "email"}))
    assert rec.accepts(json.dumps(text)) == valid
    if valid:  # escapes decode to the same address: the \u0040 spelling of @ is rejected only
        assert rec.accepts(json.dumps(text, ensure_ascii=True))


def test_email_accepts_only_what_jsonschema_accepts() -> None:
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    rec = ReferenceRecognizer(schema_to_grammar({"format": "email"}))
    for text, valid in EMAILS.items():
        if rec.accepts(json.dumps(text)):
            assert valid and checker.conforms(text, "email")


RJP = {"1": True, "0/foo/bar": True, "0#": True, "120/a~1b": True, "0//": True, "/foo": False,
       "-1/a": False, "+1": False, "01/a": False, "0##": False, "1#/a": False, "0/~2": False,
       "": False, "1\n": False}


@pytest.mark.parametrize("text,valid", RJP.items(), ids=range(len(RJP)))
def test_relative_json_pointer(text: str, valid: bool) -> None:
    rec = ReferenceRecognizer(schema_to_grammar({"format": "relative-json-pointer",
                                                 "type": "string"}))
    assert rec.accepts(json.dumps(text)) == valid


IRIS = {  # RFC 3987; (iri valid, iri-reference valid)
    "http://ƒøø.ßår/?∂éœ=πîx#πîüx": (True, True), "http://[V1.fe]": (True, True),
    "urn:example:resource": (True, True), "http://ƒøø.ßår/?q=\U000f0000": (True, True),
    "http://ƒøø.ßår/\U000f0000": (False, False),  # private use only in the query
    "âππ": (False, True), "//ƒøø.ßår/x": (False, True), "#ƒrägmênt": (False, True),
    "#ƒräg\\mênt": (False, False), "http://[::ffff:192.168.0.01]": (False, False),
    "http://2001:db8::1/": (False, False), "http://a b/": (False, False),
}


@pytest.mark.parametrize("text,valid", IRIS.items(), ids=range(len(IRIS)))
def test_iri_formats(text: str, valid: tuple[bool, bool]) -> None:
    for fmt, expected in zip(("iri", "iri-reference"), valid, strict=True):
        rec = ReferenceRecognizer(schema_to_grammar({"type": "string", "format": fmt}))
        assert rec.accepts(json.dumps(text, ensure_ascii=False)) == expected, fmt
        assert rec.accepts(json.dumps(text)) == expected, fmt  # \uXXXX and surrogate pairs


NOT_ONE_OF = {"not": {"oneOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                                {"properties": {"b": {"type": "string"}}, "required": ["b"]},
                                {"maxProperties": 1}]}}


def test_not_one_of_means_none_or_several() -> None:
    assert_exact(NOT_ONE_OF, objects(["a", "b", "c"], [1, "s"]))


def test_email_with_a_redundant_max_length_stays_exact() -> None:
    rec = ReferenceRecognizer(schema_to_grammar({"type": "string", "format": "email",
                                                 "maxLength": 1024}))
    for text, valid in EMAILS.items():
        assert rec.accepts(json.dumps(text)) == valid, text
