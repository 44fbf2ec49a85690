"""Unit tests of the JSON Schema front end against independent oracles.

Oracles: ``decimal.Decimal`` arithmetic for numeric bounds and divisibility, ``json.loads`` and
``json.dumps`` for string encodings and layouts, ``jsonschema`` for instance validity, Pydantic
for model schemas. Grammar membership is decided by the reference recognizer.
"""

from __future__ import annotations

import datetime
import itertools
import json
import random
import re
from decimal import Decimal
from fractions import Fraction

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grammarsd.errors import InvalidSchemaError, SchemaUnsupportedError
from grammarsd.grammar.ir import Grammar, chars
from grammarsd.grammar.json_schema import JsonSchemaOptions, resolve_schema, schema_to_grammar
from grammarsd.grammar.json_schema import numbers as num
from grammarsd.grammar.json_schema.strings import encode_class, strings_excluding
from grammarsd.matcher.reference import ReferenceRecognizer

JSON_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")


def recognizer(expr_or_grammar: object) -> ReferenceRecognizer:
    grammar = expr_or_grammar if isinstance(expr_or_grammar, Grammar) else Grammar.single(
        expr_or_grammar)  # type: ignore[arg-type]
    return ReferenceRecognizer(grammar)


def short_strings(alphabet: str, max_len: int) -> list[str]:
    return ["".join(p) for n in range(max_len + 1) for p in itertools.product(alphabet, repeat=n)]


# --------------------------------------------------------------------------- numbers

CANDIDATES = short_strings("-015.", 4) + ["10.5", "1.50", "2.25", "0.251", "-1.5", "-1.49", "1e1"]
BOUNDS = [(None, False, Decimal("1.5"), False), (Decimal("-1.5"), True, None, False),
          (Decimal("0"), True, Decimal("1"), False), (Decimal("0.25"), False, Decimal("10.5"), True),
          (Decimal("-1"), False, Decimal("0"), True), (Decimal("1"), False, Decimal("1"), False),
          (Decimal("0.5"), True, Decimal("0.5"), False), (Decimal("-0.5"), False, None, False)]


@pytest.mark.parametrize("lo,lo_s,hi,hi_s", BOUNDS)
def test_number_in_matches_decimal_comparison(lo, lo_s, hi, hi_s) -> None:
    rec = recognizer(num.number_in(lo, lo_s, hi, hi_s))
    for text in CANDIDATES:
        expected = bool(JSON_NUMBER.fullmatch(text)) and "e" not in text.lower()
        if expected:
            v = Decimal(text)
            expected = (lo is None or v > lo or (v == lo and not lo_s)) and (
                hi is None or v < hi or (v == hi and not hi_s))
        assert rec.accepts(text) == expected, (text, lo, lo_s, hi, hi_s)


@pytest.mark.parametrize("lo,hi", [(None, None), (-15, None), (None, 10), (-5, 105), (0, 0),
                                   (11, 1000), (-100, -10)])
def test_integer_in_matches_range(lo, hi) -> None:
    rec = recognizer(num.integer_in(lo, hi))
    for v in range(-1200, 1200, 7):
        for text in (str(v), f"{v}.0", f"{v}.5"):
            expected = text.endswith(".5") is False and (lo is None or v >= lo) and (
                hi is None or v <= hi)
            assert rec.accepts(text) == expected, (text, lo, hi)
    assert not rec.accepts("01") and not rec.accepts("1.") and not rec.accepts("+1")


@pytest.mark.parametrize("q", ["3", "7", "10", "1", "2.5", "0.01", "0.75", "1.5", "12"])
@pytest.mark.parametrize("multiple", [True, False])
def test_divisibility_dfa_matches_exact_division(q: str, multiple: bool) -> None:
    divisor = Fraction(Decimal(q))
    dfa = num.divisibility_dfa(*num.decimal_step(divisor), multiple)
    texts = CANDIDATES + ["4.5", "-7.50", "0.75", "1.25", "0.3", "0.30", "0.31", "35", "45.0",
                          "0.125", "3.10", "-2.01", "-0", "-0.0", "100", "-150.000", "7.0001"]
    texts += [str(v) for v in range(-160, 161, 3)]
    for text in texts:
        ok = bool(JSON_NUMBER.fullmatch(text)) and "e" not in text and (
            (Fraction(Decimal(text)) / divisor).denominator == 1) == multiple
        assert dfa.matches(text) == ok, (text, q, multiple)


@pytest.mark.parametrize("q,step", [("2.5", (25, 1)), ("0.01", (1, 2)), ("12", (12, 0)),
                                    ("1/3", (1, 0)), ("7/6", (35, 1)), ("3/40", (75, 3))])
def test_decimal_step_keeps_the_decimal_multiples(q: str, step: tuple[int, int]) -> None:
    divisor = Fraction(q)
    assert num.decimal_step(divisor) == step
    p, k = step
    for text in ("0", "1", "3.5", "7", "0.35", "1.75", "0.075", "2.1", "10.5", "0.15", "14"):
        x = Fraction(Decimal(text))  # a decimal is a multiple of q iff of p / 10**k
        assert ((x / divisor).denominator == 1) == ((x / Fraction(p, 10**k)).denominator == 1)


# --------------------------------------------------------------------------- strings

CODE_POINTS = [0, 9, 10, 0x1F, 0x20, 0x22, 0x2F, 0x41, 0x5C, 0x61, 0x7F, 0xE9, 0x2028, 0xD7FF,
               0xE000, 0xFFFF, 0x10000, 0x1F600, 0x10FFFF]


@pytest.mark.parametrize("ranges", [[(0x61, 0x63)], [(0, 0x21)], [(0x22, 0x22), (0x5C, 0x5C)],
                                    [(0xE9, 0x1F600)], [(0x10000, 0x10FFFF)], [(0, 0x10FFFF)]])
def test_encode_class_accepts_every_spelling_of_members_only(ranges) -> None:
    cls = chars(ranges)
    rec = recognizer(encode_class(cls))
    for cp in CODE_POINTS:
        c = chr(cp)
        spellings = {json.dumps(c)[1:-1], json.dumps(c, ensure_ascii=False)[1:-1]}
        if cp <= 0xFFFF:
            spellings |= {f"\\u{cp:04x}", f"\\u{cp:04X}"}
        for s in spellings:
            assert json.loads(f'"{s}"') == c  # the oracle agrees on what it decodes to
            assert rec.accepts(s) == (cp in cls), (hex(cp), s)
    assert not rec.accepts("\\ud800")  # a lone surrogate decodes to no character
    assert not rec.accepts("\\x41") and not rec.accepts("\\U0041")


def test_strings_excluding_is_exact_set_difference() -> None:
    excluded = ["", "a", "ab", "ba"]
    for lo, hi in [(0, None), (1, 3), (2, 2)]:
        rec = recognizer(strings_excluding(excluded, encode_class(chars([(0x61, 0x62)])),
                                           chars([(0x61, 0x62)]), lo, hi))
        for s in short_strings("abc", 4):
            ok = s not in excluded and set(s) <= {"a", "b"} and lo <= len(s) <= (hi or 99)
            assert rec.accepts(s) == ok, (s, lo, hi)


# --------------------------------------------------------------------------- schemas

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "minLength": 1}, "age": {"type": "integer",
                                                                       "minimum": 0},
                   "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2}},
    "required": ["name"],
    "additionalProperties": False,
}


def accepts(schema: object, text: str, **options: object) -> bool:
    grammar = schema_to_grammar(schema, options=JsonSchemaOptions(**options))  # type: ignore
    return ReferenceRecognizer(grammar).accepts(text)


def test_layouts_follow_json_dumps() -> None:
    value = {"name": "Ann", "age": 3, "tags": ["a", "b"]}
    assert accepts(PERSON, json.dumps(value))
    assert accepts(PERSON, json.dumps(value, separators=(",", ":")))
    assert accepts(PERSON, json.dumps(value, indent=2))  # flexible allows newlines
    assert accepts(PERSON, json.dumps(value, separators=(",", ":")), whitespace="compact")
    assert not accepts(PERSON, json.dumps(value), whitespace="compact")
    assert accepts(PERSON, json.dumps(value, indent=2), whitespace="indent", indent=2)
    assert accepts(PERSON, json.dumps({"name": "x", "tags": []}, indent=4),
                   whitespace="indent", indent=4)
    assert not accepts(PERSON, json.dumps(value, indent=3), whitespace="indent", indent=2)
    assert not accepts(PERSON, json.dumps(value), whitespace="indent", indent=2)


def test_whitespace_is_bounded() -> None:
    assert accepts(PERSON, '{' + " " * 4 + '"name": "x"}', max_whitespace=4)
    assert not accepts(PERSON, '{' + " " * 5 + '"name": "x"}', max_whitespace=4)


def test_property_order_follows_schema_unless_any_order() -> None:
    text = json.dumps({"age": 3, "name": "Ann"})
    assert not accepts(PERSON, text)
    assert accepts(PERSON, text, any_order=True)
    assert not accepts(PERSON, json.dumps({"age": 3, "name": "Ann", "age2": 1}), any_order=True)
    assert not accepts(PERSON, '{"name": "a", "name": "b"}', any_order=True)  # no duplicates


def test_pydantic_model() -> None:
    pydantic = pytest.importorskip("pydantic")

    class City(pydantic.BaseModel):
        name: str
        population: int
        tags: list[str] = []

    schema = resolve_schema(City)
    assert schema == City.model_json_schema()
    ok = City(name="Paris", population=2_100_000).model_dump_json()
    assert accepts(City, json.dumps(json.loads(ok)))
    assert not accepts(City, json.dumps({"name": "Paris"}))
    assert accepts(list[int], "[1, 2, 3]") and not accepts(list[int], '["1"]')


def test_errors_carry_keyword_and_pointer() -> None:
    with pytest.raises(InvalidSchemaError) as bad:
        schema_to_grammar({"type": "strin"})
    assert bad.value.pointer == "/type"
    with pytest.raises(InvalidSchemaError) as nested:  # the error is found inside an anyOf
        schema_to_grammar({"$schema": "https://json-schema.org/draft/2019-09/schema",
                           "properties": {"a": {"items": [1]}}})
    assert nested.value.pointer.startswith("/properties/a/items")
    with pytest.raises(SchemaUnsupportedError) as refused:
        schema_to_grammar({"properties": {"a": {"type": "array", "uniqueItems": True}}})
    assert refused.value.keyword == "uniqueItems"
    assert refused.value.pointer == "/properties/a/uniqueItems"
    with pytest.raises(SchemaUnsupportedError) as remote:
        schema_to_grammar({"$ref": "http://example.com/schema.json"})
    assert remote.value.keyword == "$ref"
    with pytest.raises(InvalidSchemaError):
        resolve_schema("{not json")
    with pytest.raises(ValueError, match="unknown JsonSchemaOptions keys: colour"):
        JsonSchemaOptions.from_dict({"colour": "red"})
    with pytest.raises(ValueError):
        JsonSchemaOptions(whitespace="indent")  # indent= missing


def test_annotations_and_unknown_keywords_are_ignored() -> None:
    schema = {"type": "integer", "title": "t", "description": "d", "default": 1, "examples": [2],
              "deprecated": True, "$comment": "c", "x-vendor": {"anything": 1}}
    assert accepts(schema, "5") and not accepts(schema, '"5"')


def test_recursive_ref() -> None:
    tree = {"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        "required": ["v"], "additionalProperties": False}}, "$ref": "#/$defs/node"}
    assert accepts(tree, json.dumps({"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}]}))
    assert not accepts(tree, json.dumps({"v": 1, "kids": [{"kids": []}]}))


@pytest.mark.parametrize(("draft", "id_keyword"), [
    ("http://json-schema.org/draft-04/schema#", "id"),
    ("https://json-schema.org/draft/2020-12/schema", "$id"),
])
def test_a_subschema_with_an_id_is_the_base_of_its_refs(draft: str, id_keyword: str) -> None:
    """``#/definitions/x`` inside ``a`` is ``a``'s own definition, an integer (the root's is a
    string): jsonschema is the oracle."""
    schema = {"$schema": draft, id_keyword: "http://example.com/root.json",
              "definitions": {"x": {"type": "string"}},
              "properties": {"a": {id_keyword: "http://example.com/a.json",
                                   "definitions": {"x": {"type": "integer"}},
                                   "properties": {"b": {"$ref": "#/definitions/x"}}}}}
    judge = jsonschema.validators.validator_for(schema)(schema)
    for text in ('{"a": {"b": 1}}', '{"a": {"b": "s"}}'):
        assert accepts(schema, text) == judge.is_valid(json.loads(text))


def test_oneof_with_discriminator_is_exact_and_overlap_is_refused() -> None:
    cat = {"type": "object", "properties": {"kind": {"const": "cat"}, "lives": {"type": "integer"}},
           "required": ["kind"]}
    dog = {"type": "object", "properties": {"kind": {"const": "dog"}}, "required": ["kind"]}
    assert accepts({"oneOf": [cat, dog]}, '{"kind": "dog"}')
    assert not accepts({"oneOf": [cat, dog]}, '{"kind": "cow"}')
    closed = {"type": "object", "oneOf": [
        {"properties": {"a": {}}, "required": ["a"], "additionalProperties": False},
        {"properties": {"b": {}}, "required": ["b"], "additionalProperties": False}]}
    assert accepts(closed, '{"a": 1}') and not accepts(closed, '{"a": 1, "b": 2}')
    overlapping = {"oneOf": [{"type": "integer"}, {"minimum": 2}]}  # exact via complements
    for value in [1, 2, 3, 2.5, 1.5, -4, "x", None]:
        valid = jsonschema.Draft202012Validator(overlapping).is_valid(value)
        assert accepts(overlapping, json.dumps(value)) == valid, value
    items_or_short = {"oneOf": [{"items": {"type": "integer"}}, {"maxItems": 1}]}
    for value in [[], [1], ["x"], [1, 2], [1, "x"], ["x", "y"], 3]:
        valid = jsonschema.Draft202012Validator(items_or_short).is_valid(value)
        assert accepts(items_or_short, json.dumps(value)) == valid, value
    multiple_or_small = {"oneOf": [{"multipleOf": 3}, {"maximum": 1}]}  # needs "not multipleOf"
    for value in [-3, -2, 0, 1, 1.5, 2, 3, 4.5, 6, 7, 9.0, "x"]:
        valid = jsonschema.Draft202012Validator(multiple_or_small).is_valid(value)
        assert accepts(multiple_or_small, json.dumps(value)) == valid, value
    with pytest.raises(SchemaUnsupportedError) as exc:  # residue automaton over the limit
        schema_to_grammar({"oneOf": [{"multipleOf": 0.123456789}, {"maximum": 1}]})
    assert exc.value.keyword == "multipleOf" and exc.value.pointer == "/oneOf/0/multipleOf"


# --------------------------------------------------------------------------- random instances

SCHEMAS = [
    PERSON,
    {"type": ["integer", "string"], "minimum": -3, "exclusiveMaximum": 7, "maxLength": 2},
    {"type": "number", "minimum": -1.25, "maximum": 3},
    {"type": "integer", "multipleOf": 3, "minimum": -20, "maximum": 40},
    {"type": "array", "prefixItems": [{"type": "boolean"}, {"type": "null"}],
     "items": {"type": "integer"}, "minItems": 1, "maxItems": 4},
    {"type": "object", "minProperties": 1, "maxProperties": 2,
     "additionalProperties": {"type": "integer"}, "dependentRequired": {"a": ["b"]}},
    {"anyOf": [{"type": "string", "maxLength": 1}, {"type": "array", "items": {"const": 1}}]},
    {"not": {"type": ["object", "array", "null"]}},
    {"not": {"anyOf": [{"type": "integer", "minimum": 3}, {"required": ["a"]},
                       {"type": "string", "pattern": "a"}]}},
    {"if": {"type": "integer"}, "then": {"maximum": 4}, "else": {"type": ["string", "number"]}},
    {"oneOf": [{"type": "number", "maximum": 2}, {"type": "integer"}, {"maxLength": 1}]},
    {"type": "string", "pattern": "^a+b?$"},
    {"type": "string", "format": "date"},
    {"enum": [1, "1", [1], {"a": 1}, None, True]},
    {"type": "array", "contains": {"type": "integer", "minimum": 2}, "minContains": 1,
     "maxContains": 2},
    {"type": "array", "items": {"enum": [1, "a", None, [1]]}, "uniqueItems": True},
    {"type": "object", "patternProperties": {"^a": {"type": "integer"}, "b$": {"minimum": 3}},
     "additionalProperties": {"type": "string"}},
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-30, 50) | st.sampled_from([-1.25, 0.5, 2.0, 3.5])
    | st.text(alphabet="ab1-", max_size=3) | st.sampled_from(["2024-02-29", "2023-02-29"]),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(["name", "age", "tags", "a", "b", "c", "ab", "xb"]), inner,
                      max_size=3),
    max_leaves=6,
)


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=json_values)
def test_random_instances_agree_with_jsonschema(index: int, value: object) -> None:
    schema = SCHEMAS[index]
    rec = _recognizers(index)
    valid = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER).is_valid(value)
    assert rec.accepts(json.dumps(value)) == valid, (schema, value)


_cache: dict[int, ReferenceRecognizer] = {}


def _recognizers(index: int) -> ReferenceRecognizer:
    if index not in _cache:
        options = JsonSchemaOptions(any_order=True)
        _cache[index] = ReferenceRecognizer(schema_to_grammar(SCHEMAS[index], options=options))
    return _cache[index]


FORMAT_CASES = {
    "time": ["23:59:60Z", "00:29:60-23:30", "23:59:60+01:00", "12:00:00.5+05:45", "24:00:00Z",
             "08:30:06z", "12:00:00"],
    "date-time": ["2024-02-29T00:00:00Z", "2023-02-29T00:00:00Z", "1998-12-31T15:59:60.1-08:00",
                  "1998-12-31t23:59:60z"],
    "ipv6": ["::1", "1::", "::", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", "::ffff:1.2.3.4",
             "::ffff:1.2.3.256", "1::2::3", "fe80::1%eth0"],
    "uri": ["http://a.b/c?d#e", "mailto:x@y", "//a/b", "a b:c", "h://[::1]:80/", "h://%zz"],
    "duration": ["P1Y2M", "PT1H", "P1W", "P1Y1W", "PT", "P", "P1DT2H3M4S", "PT1H2S"],
}
_EXPECTED = {  # hand-checked against RFC 3339 / RFC 3986 / RFC 4291
    "time": [True, True, False, True, False, True, False],
    "date-time": [True, False, True, True],
    "ipv6": [True, True, True, True, False, True, False, False, False],
    "uri": [True, True, False, False, True, False],
    "duration": [True, True, True, False, False, False, True, False],
}


@pytest.mark.parametrize("name", sorted(FORMAT_CASES))
def test_formats_match_their_rfc(name: str) -> None:
    rec = ReferenceRecognizer(schema_to_grammar({"type": "string", "format": name}))
    for text, ok in zip(FORMAT_CASES[name], _EXPECTED[name], strict=True):
        assert rec.accepts(json.dumps(text)) == ok, (name, text)


def _leap_second_cases(n: int) -> list[tuple[str, bool]]:
    """``HH:MM:60`` with offsets, valid iff the time is 23:59 in UTC (``datetime`` decides);
    every other case has the one offset that makes it so, the rest a random one."""
    rng = random.Random(5)
    cases = []
    for i in range(n):
        local = datetime.datetime(2000, 1, 2, rng.randrange(24), rng.randrange(60))
        minutes = rng.randrange(24 * 60)
        sign = rng.choice("+-")
        if i % 2:  # solve local - offset = 23:59 for this sign
            utc_gap = (local - datetime.datetime(2000, 1, 1, 23, 59)).seconds // 60
            minutes = utc_gap if sign == "+" else (24 * 60 - utc_gap) % (24 * 60)
        offset = datetime.timedelta(minutes=minutes) * (1 if sign == "+" else -1)
        utc = local - offset
        text = f"{local:%H:%M}:60{sign}{minutes // 60:02}:{minutes % 60:02}"
        cases.append((text, (utc.hour, utc.minute) == (23, 59)))
    return cases


def test_leap_seconds_at_every_offset() -> None:
    cases = _leap_second_cases(120)
    assert 40 < sum(ok for _, ok in cases) < 80  # both answers are exercised
    for name, prefix in (("time", ""), ("date-time", "1998-12-31T")):
        rec = ReferenceRecognizer(schema_to_grammar({"type": "string", "format": name}))
        for text, ok in cases:
            assert rec.accepts(json.dumps(prefix + text)) == ok, (name, text)
            assert rec.accepts(json.dumps(prefix + text[:8] + ".25" + text[8:])) == ok


def test_unevaluated_properties_without_applicators_acts_as_additional() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}},
              "unevaluatedProperties": False}
    assert accepts(schema, '{"a": 1}') and not accepts(schema, '{"a": 1, "b": 2}')
    with pytest.raises(SchemaUnsupportedError) as exc:
        schema_to_grammar({"allOf": [{"properties": {"a": True}}],
                           "unevaluatedProperties": False})
    assert exc.value.keyword == "unevaluatedProperties"


def test_indent_layout_is_unrolled_to_max_depth() -> None:
    nested = {"type": "array", "items": {"$ref": "#"}}
    options = {"whitespace": "indent", "indent": 1, "max_depth": 3}
    assert accepts(nested, json.dumps([[[]]], indent=1), **options)
    assert not accepts(nested, json.dumps([[[[[]]]]], indent=1), **options)


OPEN_NESTED = {"type": "object", "properties": {"a": {"type": "object"}}}
FREE_VALUES = [{"a": {"b": [1, {"c": None}]}, "d": "x"}, {"z": [[{}], True]}, {"a": {}, "y": 2.5}]


def test_free_values_at_every_indent_level_in_one_grammar() -> None:
    """Open members at levels 1, 2 and deeper share one grammar (the lowering lowers any value
    once per level and options): each keeps its own indentation."""
    options = {"whitespace": "indent", "indent": 2, "max_depth": 5}
    rec = ReferenceRecognizer(schema_to_grammar(OPEN_NESTED,
                                                options=JsonSchemaOptions(**options)))
    for value in FREE_VALUES:
        jsonschema.validate(value, OPEN_NESTED)
        text = json.dumps(value, indent=2)
        assert rec.accepts(text), text
        assert not rec.accepts(json.dumps(value, indent=1)), value  # one level's step is wrong
        assert not rec.accepts(json.dumps(value)), value
    too_deep = {"a": {"b": [[[[1]]]]}}
    assert not rec.accepts(json.dumps(too_deep, indent=2))
    assert not rec.accepts(json.dumps({"a": 1}, indent=2))  # "a" must still be an object


def test_free_values_follow_each_compiles_whitespace() -> None:
    """Any value is lowered once per options: a compact compile must not hand its layout to a
    flexible one made after it, nor the reverse."""
    for first, second in (("compact", "flexible"), ("flexible", "compact")):
        grammars = {w: ReferenceRecognizer(schema_to_grammar(
            OPEN_NESTED, options=JsonSchemaOptions(whitespace=w))) for w in (first, second)}
        for value in FREE_VALUES:
            spaced = json.dumps(value, indent=1)
            tight = json.dumps(value, separators=(",", ":"))
            assert grammars["flexible"].accepts(spaced) and grammars["flexible"].accepts(tight)
            assert grammars["compact"].accepts(tight)
            assert not grammars["compact"].accepts(spaced), spaced


def test_any_order_refuses_when_the_key_set_automaton_is_too_large() -> None:
    wide = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(16)}}
    assert accepts(wide, json.dumps({"k1": 1, "k3": 2}))  # schema order: linear states
    assert not accepts(wide, json.dumps({"k3": 1, "k1": 2}))
    with pytest.raises(SchemaUnsupportedError) as exc:
        schema_to_grammar(wide, options=JsonSchemaOptions(any_order=True, max_object_states=64))
    assert exc.value.keyword == "properties"


def test_default_and_unbounded_whitespace() -> None:
    deep = "\n" + " " * 31  # 7 levels of 4-space indentation fit the default bound of 32
    assert accepts(PERSON, "{" + deep + '"name": "x"}')
    gap = "\n" + " " * 40
    assert not accepts(PERSON, "{" + gap + '"name": "x"}')
    assert accepts(PERSON, "{" + gap + '"name": "x"}', max_whitespace=None)


def test_string_constraints_met_again_reuse_one_expression() -> None:
    """A pattern (with its length bounds) met in another schema gives the same expression
    object, whose walks' answers are kept on it; a pattern that cannot be compiled is refused
    each time with the pointer of the schema at hand (failures are not kept)."""

    def body(schema: dict[str, object]) -> object:
        g = schema_to_grammar(schema)
        (name,) = [n for n in g.rules if n.startswith("str")]
        return g.rules[name]

    string = {"type": "string", "pattern": "^[a-z]+-[0-9]{2,4}$", "maxLength": 9}
    first = body({"type": "object", "properties": {"a": string}})
    again = body({"type": "array", "items": string})
    assert first is again
    assert body({**string, "pattern": "^[a-z]+-[0-9]{2,5}$"}) != first  # the control
    bad = {"type": "string", "pattern": "(?<=a)b"}
    for schema, pointer in (({"properties": {"x": bad}}, "/properties/x/pattern"),
                            ({"items": bad}, "/items/pattern")):
        with pytest.raises(SchemaUnsupportedError) as refused:
            schema_to_grammar(schema)
        assert refused.value.keyword == "pattern" and refused.value.pointer == pointer
