"""Refusal classes turned into exact support (issue #4), against independent oracles.

* ``multipleOf`` beside bounds, and its complement (``not``/``oneOf``): ``jsonschema`` judges
  integral divisors; decimal divisors are judged by ``fractions.Fraction`` arithmetic on the JSON
  text, because ``jsonschema`` divides floats (it calls ``0.07`` no multiple of ``0.01``) while
  the specification means exact division.
* the complement of an exactly enforced ``format``: ``jsonschema`` with its ``FormatChecker``
  (formats it checks in this environment: date, ipv4, ipv6, uuid).
* ``any_order="auto"``: valid instances (``jsonschema``) in any key order where the object's
  key-set automaton fits ``max_object_states``, in schema order elsewhere; never refused for
  that, and never accepting an invalid instance.
* draft 4's ``integer`` (by spelling: ``1.0`` is not one): ``jsonschema``'s Draft4Validator.

Membership is decided by the reference recognizer, never by the front end.
"""

from __future__ import annotations

import itertools
import json
import re
from decimal import Decimal
from fractions import Fraction
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grammarsd.errors import SchemaUnsupportedError
from grammarsd.grammar import _canonical
from grammarsd.grammar.json_schema import JsonSchemaOptions, schema_to_grammar
from grammarsd.matcher.reference import ReferenceRecognizer

NUMBERS: list[Any] = [*range(-45, 46), -0.0, 0.5, -2.5, 7.5, 12.5, 2.25, 3.0, 10.0, -30.0, 1.5,
                      33.75, 100, 120, -120, 1001, 429, 858]
OTHERS: list[Any] = ["x", None, True, [], {}]


def recognizer(schema: Any, **options: Any) -> ReferenceRecognizer:
    return ReferenceRecognizer(schema_to_grammar(schema, options=JsonSchemaOptions(**options)))


def validator(schema: Any) -> Any:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def assert_matches_jsonschema(schema: Any, instances: list[Any], **options: Any) -> None:
    """The grammar accepts ``json.dumps(x)`` iff ``jsonschema`` says ``x`` is valid."""
    rec, judge = recognizer(schema, **options), validator(schema)
    verdicts = {True: 0, False: 0}
    for x in instances:
        expected = judge.is_valid(x)
        verdicts[expected] += 1
        assert rec.accepts(json.dumps(x)) == expected, (schema, x, expected)
    assert verdicts[True] and verdicts[False]  # both sides exercised


# --------------------------------------------------------------------------- multipleOf

BOUNDED_MULTIPLES = {
    "multiple below a bound (oneOf1_2)": {"multipleOf": 10, "maximum": 35},
    "integer multiple above a bound (o2312)": {"type": "number", "minimum": 9, "multipleOf": 1},
    "exclusive bounds": {"type": "integer", "multipleOf": 7, "exclusiveMinimum": -21,
                         "exclusiveMaximum": 1000},
    "decimal divisor with a bound (pp4)": {"type": "number", "multipleOf": 2.5, "minimum": 2},
    "non-integral numbers only": {"multipleOf": 0.5, "not": {"type": "integer"},
                                  "maximum": 20},
    "bound and excluded values": {"multipleOf": 3, "minimum": -10, "not": {"enum": [0, 9]}},
    "lcm of two divisors": {"allOf": [{"multipleOf": 4}, {"multipleOf": 6}], "minimum": -30},
}


@pytest.mark.parametrize("schema", BOUNDED_MULTIPLES.values(), ids=BOUNDED_MULTIPLES.keys())
def test_bounded_multiple_of_is_exact(schema: dict[str, Any]) -> None:
    assert_matches_jsonschema(schema, NUMBERS + OTHERS)


COMPLEMENTS = {
    "not multipleOf": {"not": {"multipleOf": 3}},
    "not multipleOf, integers in a range": {"type": "integer", "minimum": -7, "maximum": 30,
                                            "not": {"multipleOf": 2}},
    "oneOf over divisors": {"oneOf": [{"multipleOf": 3}, {"multipleOf": 5}]},
    "oneOf beside a bound": {"oneOf": [{"multipleOf": 3}, {"maximum": 1}]},
    "multiple but not of its double (allOfPProp8)": {"multipleOf": 10,
                                                     "not": {"multipleOf": 20}},
    "anyOf/oneOf/not mix (allany8, smaller)": {
        "type": "number",
        "allOf": [{"oneOf": [{"multipleOf": 3}, {"multipleOf": 4}]},
                  {"oneOf": [{"not": {"multipleOf": 2}}, {"multipleOf": 5}]},
                  {"not": {"multipleOf": 9}}]},
    "not of allOf/anyOf/oneOf (draft2019_09 allOf id27)": {
        "$schema": "https://json-schema.org/draft/2019-09/schema",
        "not": {"allOf": [{"multipleOf": 2}], "anyOf": [{"multipleOf": 3}],
                "oneOf": [{"multipleOf": 5}]}},
    "double complement": {"not": {"not": {"multipleOf": 4}, "minimum": 10}},
    "not a decimal multiple": {"type": "number", "not": {"multipleOf": 2.5}},
}


@pytest.mark.parametrize("schema", COMPLEMENTS.values(), ids=COMPLEMENTS.keys())
def test_complement_of_multiple_of_is_exact(schema: dict[str, Any]) -> None:
    assert_matches_jsonschema(schema, NUMBERS + OTHERS)


JSON_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
NUMBER_TEXTS = ["".join(p) for n in range(1, 5) for p in itertools.product("-0157.", repeat=n)]
NUMBER_TEXTS += ["0.07", "0.070", "1.01", "-3.14", "2.005", "100.10", "12.3456", "-0.01"]


@pytest.mark.parametrize("divisor,lo,hi", [("0.01", None, None), ("0.01", "-1", "2"),
                                           ("0.75", "0", None), ("1.5", None, "10.5")])
@pytest.mark.parametrize("negated", [False, True])
def test_decimal_multiple_of_is_exact_division(divisor: str, lo: str | None, hi: str | None,
                                               negated: bool) -> None:
    """Oracle: ``Fraction`` division of the JSON text's exact value (see the module docstring).
    Exponent spellings are never accepted (conservative)."""
    inner: dict[str, Any] = {"multipleOf": float(divisor)}
    schema: dict[str, Any] = {"type": "number", **({"not": inner} if negated else inner)}
    if lo is not None:
        schema["minimum"] = float(lo)
    if hi is not None:
        schema["maximum"] = float(hi)
    rec = recognizer(schema)
    q = Fraction(Decimal(divisor))
    for text in NUMBER_TEXTS + ["1e2", "5E-1"]:
        syntax = bool(JSON_NUMBER.fullmatch(text)) and "e" not in text.lower()
        value = Fraction(Decimal(text)) if syntax else Fraction(0)
        in_range = (lo is None or value >= Fraction(Decimal(lo))) and (
            hi is None or value <= Fraction(Decimal(hi)))
        expected = syntax and in_range and ((value / q).denominator == 1) != negated
        assert rec.accepts(text) == expected, (schema, text)


@settings(max_examples=40, deadline=None)
@given(k=st.integers(2, 30), lo=st.integers(-200, 200), width=st.integers(0, 400),
       negated=st.booleans())
def test_random_divisor_and_interval(k: int, lo: int, width: int, negated: bool) -> None:
    inner = {"multipleOf": k}
    schema = {"type": "integer", "minimum": lo, "maximum": lo + width,
              **({"not": inner} if negated else inner)}
    rec, judge = recognizer(schema), validator(schema)
    for x in range(lo - 2 * k, lo + width + 2 * k + 1, max(1, width // 40)):
        assert rec.accepts(str(x)) == judge.is_valid(x), (schema, x)
        assert rec.accepts(f"{x}.0") == judge.is_valid(float(x)), (schema, x)


def test_huge_divisor_is_refused_with_its_pointer() -> None:
    with pytest.raises(SchemaUnsupportedError) as exc:
        schema_to_grammar({"properties": {"a": {"not": {"multipleOf": 0.123456789}}}})
    assert exc.value.keyword == "multipleOf"
    assert exc.value.pointer == "/properties/a/not/multipleOf"
    with pytest.raises(SchemaUnsupportedError) as small:
        schema_to_grammar({"multipleOf": 999, "minimum": 5},
                          options=JsonSchemaOptions(max_number_states=100))
    assert small.value.keyword == "multipleOf" and small.value.pointer == "/multipleOf"


def test_pattern_too_costly_to_determinise_is_refused_with_its_pointer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_canonical, "SUBSET_WORK_LIMIT", 1 << 20)  # ~1.6M needed: see automata
    with pytest.raises(SchemaUnsupportedError) as exc:
        schema_to_grammar({"properties": {"a": {"pattern": "^((a{1,10}){1,10}){1,10}$"}}})
    assert exc.value.keyword == "pattern" and exc.value.pointer == "/properties/a/pattern"
    assert "subset_work" in str(exc.value)


# --------------------------------------------------------------------------- format complements

FORMAT_STRINGS = {
    "uuid": ["123e4567-e89b-12d3-a456-426614174000", "123e4567-e89b-12d3-a456-42661417400",
             "123E4567-E89B-12D3-A456-426614174000", "not-a-uuid", "$ABC-1", "$", "", "$x"],
    "date": ["2024-02-29", "2023-02-29", "2023-13-01", "2023-1-01", "2023", "2020-12-31x"],
    "ipv4": ["1.2.3.4", "255.255.255.255", "256.1.1.1", "01.2.3.4", "1.2.3", "a.b.c.d", "1.2"],
    "ipv6": ["::1", "1::", "1:2:3:4:5:6:7:8", "1::2::3", "::ffff:1.2.3.4", "12345::", "ab"],
}
FORMAT_SCHEMAS = {
    "not uuid": {"type": "string", "not": {"format": "uuid"}},
    "oneOf uuid or pattern (sp_209)": {"oneOf": [{"format": "uuid"},
                                                 {"pattern": "^\\$[A-Z0-9-_]+"}]},
    "oneOf date or short": {"oneOf": [{"type": "string", "format": "date"},
                                      {"type": "string", "maxLength": 4}]},
    "not ipv4 but ipv6-ish length": {"not": {"format": "ipv4"}, "maxLength": 9},
    "ipv6 and not ipv4": {"format": "ipv6", "not": {"format": "ipv4"}},
}


@pytest.mark.parametrize("schema", FORMAT_SCHEMAS.values(), ids=FORMAT_SCHEMAS.keys())
def test_complement_of_format_is_exact(schema: dict[str, Any]) -> None:
    strings = [s for group in FORMAT_STRINGS.values() for s in group]
    assert_matches_jsonschema(schema, strings + [1, None, ["x"]])


@settings(max_examples=60, deadline=None)
@given(text=st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3}){0,4}", fullmatch=True)
       | st.text(alphabet="0123456789.:-abcdef", max_size=12))
def test_not_ipv4_on_generated_strings(text: str) -> None:
    schema = {"type": "string", "not": {"format": "ipv4"}}
    assert _not_ipv4.accepts(json.dumps(text)) == validator(schema).is_valid(text), text


_not_ipv4 = recognizer({"type": "string", "not": {"format": "ipv4"}})


@pytest.mark.parametrize("schema", [{"not": {"format": "email"}},  # enforced as a subset only
                                    {"oneOf": [{"format": "hostname"}, {"maxLength": 3}]},
                                    {"format": "hostname"}])  # A-labels need IDNA
def test_formats_not_enforced_exactly_have_no_complement(schema: dict[str, Any]) -> None:
    with pytest.raises(SchemaUnsupportedError) as exc:
        schema_to_grammar(schema)
    assert exc.value.keyword == "format" and exc.value.pointer.endswith("format")


# --------------------------------------------------------------------------- property order

WIDE = {f"k{i}": {"type": "integer"} for i in range(12)}
NESTED = {"type": "object", "properties": {
    "small": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
              "required": ["a"]},
    "wide": {"type": "object", "properties": WIDE, "additionalProperties": False}}}


def _orders(value: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(p) for p in itertools.permutations(value.items())]


def test_auto_order_is_any_order_where_it_fits_and_schema_order_elsewhere() -> None:
    rec = recognizer(NESTED, any_order="auto", max_object_states=256)
    judge = validator(NESTED)
    small = [{"a": 1}, {"a": 1, "b": "x"}, {"b": "x"}, {"a": "1"}, {"a": 1, "c": 2}]
    for inner in [p for s in small for p in _orders(s)]:
        for value in _orders({"small": inner, "wide": {"k1": 1, "k7": 2}}):
            assert rec.accepts(json.dumps(value)) == judge.is_valid(value), value
    assert rec.accepts(json.dumps({"wide": {"k1": 1, "k7": 2}}))
    assert not rec.accepts(json.dumps({"wide": {"k7": 2, "k1": 1}}))  # too wide: schema order
    assert not rec.accepts('{"wide": {"k1": 1, "k1": 2}}')
    assert not rec.accepts(json.dumps({"wide": {"k1": "1"}}))
    with pytest.raises(SchemaUnsupportedError) as exc:  # any_order=True refuses, and says where
        schema_to_grammar(NESTED, options=JsonSchemaOptions(any_order=True,
                                                            max_object_states=256))
    assert exc.value.keyword == "properties" and exc.value.pointer == "/properties/wide"


@settings(max_examples=40, deadline=None)
@given(value=st.dictionaries(st.sampled_from(["name", "age", "tags", "x"]),
                             st.one_of(st.integers(-2, 2), st.text("ab", max_size=2),
                                       st.lists(st.sampled_from(["a", "b", 1]), max_size=2)),
                             max_size=4))
def test_auto_order_agrees_with_jsonschema(value: dict[str, Any]) -> None:
    assert _person_auto.accepts(json.dumps(value)) == validator(PERSON).is_valid(value), value


PERSON = {"type": "object", "required": ["name"], "additionalProperties": False,
          "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0},
                         "tags": {"type": "array", "items": {"enum": ["a", "b"]}}}}
_person_auto = recognizer(PERSON, any_order="auto")


def test_any_order_option_is_typed() -> None:
    for bad in ("yes", 1, None, "Auto"):
        with pytest.raises(ValueError, match="any_order"):
            JsonSchemaOptions(any_order=bad)  # type: ignore[arg-type]
    assert JsonSchemaOptions.from_dict({"any_order": "auto"}).any_order == "auto"


# --------------------------------------------------------------------------- draft 4 integers

DRAFT4 = "http://json-schema.org/draft-04/schema#"


@pytest.mark.parametrize("extra", [
    {"type": "integer"},
    {"type": "integer", "minimum": -3, "maximum": 40},
    {"type": "integer", "multipleOf": 3},
    {"type": "number", "not": {"type": "integer"}},
    {"type": "number", "not": {"type": "integer"}, "minimum": 2},
    {"type": "number", "not": {"type": "integer"}, "multipleOf": 0.5},
    {"properties": {"id": {"type": "integer"}}},  # MaskBench Github_easy---o24544
], ids=repr)
def test_draft4_integer_is_decided_by_spelling(extra: dict[str, Any]) -> None:
    """Draft 4 (``jsonschema``'s Draft4Validator): ``1.0`` is a number, not an integer."""
    schema = {"$schema": DRAFT4, **extra}
    wrapped = [{"id": x} for x in NUMBERS] if "properties" in extra else NUMBERS
    assert_matches_jsonschema(schema, wrapped)
    judge = validator(schema)  # negative control: the draft really changes the verdict
    later = validator({**schema, "$schema": "http://json-schema.org/draft-07/schema#"})
    assert any(judge.is_valid(x) != later.is_valid(x) for x in wrapped)


@pytest.mark.parametrize("draft", ["draft-04", "draft-06", "draft-07"])
def test_array_dependencies_below_definitions_compile(draft: str) -> None:
    """``referencing`` crawls draft 4-7 ``dependencies`` arrays as schemas and fails on them
    (MaskBench JsonSchemaStore---tmlanguage; once a schema-valued entry came first): they must
    compile, and exactly."""
    schema = {"$schema": f"http://json-schema.org/{draft}/schema#", "$ref": "#/definitions/p",
              "definitions": {"p": {"type": "object",
                                    "dependencies": {"b": {"required": ["a"]}, "a": ["b"]},
                                    "properties": {"a": {"type": "integer"},
                                                   "b": {"type": "integer"}}}}}
    assert_matches_jsonschema(schema, [{}, {"a": 1}, {"a": 1, "b": 2}, {"b": 2}, {"a": "x"}, 3,
                                       {"c": 1}])


def test_contradictory_lengths_beside_excluded_values_are_an_empty_string_set() -> None:
    """``minLength > maxLength`` next to a ``not: {enum}`` (MaskBench Github_ultra---o65975 crashed
    with "bad repeat bounds"): no string is valid; the other types still are."""
    schema = {"anyOf": [{"type": "string", "minLength": 5, "maxLength": 3,
                         "not": {"enum": ["abcd"]}}, {"type": "integer"}]}
    assert_matches_jsonschema(schema, ["", "abc", "abcd", "abcde", 1, 7])


@pytest.mark.parametrize(("length", "cycle", "why"), [
    (3, True, "a cycle of \\$ref"), (150, False, "a chain of more than 100 \\$ref")])
def test_ref_cycles_and_overlong_chains_are_refused_by_name(length: int, cycle: bool,
                                                            why: str) -> None:
    defs: dict[str, Any] = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(length)}
    defs[f"d{length}"] = {"$ref": "#/$defs/d0"} if cycle else {"type": "string"}
    with pytest.raises(SchemaUnsupportedError, match=why) as exc:
        schema_to_grammar({"$defs": defs, "$ref": "#/$defs/d0"})
    assert exc.value.keyword == "$ref" and exc.value.pointer.startswith("/$defs/d")
    # a long chain that ends is fine
    defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(60)} | {"d60": {"type": "null"}}
    assert ReferenceRecognizer(schema_to_grammar({"$defs": defs, "$ref": "#/$defs/d0"})).accepts(
        "null")
