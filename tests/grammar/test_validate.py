"""``validate_json``: the post-generation check, judged by hand-labelled cases.

The oracle is the specification of each validator (``jsonschema`` for the schema's own draft,
Pydantic for models), fixed here as literal expectations, not by calling our code twice.
"""

from __future__ import annotations

import pydantic
import pytest

from grammarsd.errors import InvalidSchemaError, OutputValidationError, SchemaUnsupportedError
from grammarsd.grammar.validate import ValidationFinding, parse_json_strict, validate_json

DRAFT4 = "http://json-schema.org/draft-04/schema#"
DRAFT7 = "http://json-schema.org/draft-07/schema#"


class City(pydantic.BaseModel):
    name: str
    population: int


def findings(text: str, spec: object) -> list[ValidationFinding]:
    with pytest.raises(OutputValidationError) as info:
        validate_json(text, spec)
    assert info.value.text == text
    return info.value.errors


def test_valid_schema_instance_returns_the_parsed_value() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    assert validate_json('{"a": 1, "b": [true, null]}', schema) == {"a": 1, "b": [True, None]}
    assert validate_json('"x"', True) == "x"
    assert validate_json('{"type": "string"}', {"type": "object"}) == {"type": "string"}


def test_every_finding_is_reported_with_pointer_and_keyword() -> None:
    schema = {"properties": {"a": {"type": "integer"}, "b": {"items": {"maximum": 3}}},
              "required": ["c"]}
    got = findings('{"a": "x", "b": [1, 5], "d/e": 0}', schema)
    assert {(f.pointer, f.keyword) for f in got} == {("", "required"), ("/a", "type"),
                                                     ("/b/1", "maximum")}
    assert all(f.message for f in got)


@pytest.mark.parametrize("draft,valid", [(DRAFT4, False), (DRAFT7, True), (None, True)])
def test_the_schema_draft_decides_semantics(draft: str | None, valid: bool) -> None:
    schema: dict[str, object] = {"type": "integer"}  # 1.0 is an integer from draft 6 on
    if draft is not None:
        schema["$schema"] = draft
    if valid:
        assert validate_json("1.0", schema) == 1.0
    else:
        assert [f.keyword for f in findings("1.0", schema)] == ["type"]


@pytest.mark.parametrize("fmt,good,bad", [("ipv4", "10.0.0.1", "999.0.0.1"),
                                          ("date", "2024-02-29", "2023-02-29"),
                                          ("email", "a@example.com", "example.com")])
def test_formats_are_asserted(fmt: str, good: str, bad: str) -> None:
    schema = {"type": "string", "format": fmt}
    assert validate_json(f'"{good}"', schema) == good
    assert [f.keyword for f in findings(f'"{bad}"', schema)] == ["format"]


@pytest.mark.parametrize("text,keyword", [("[1, 2", "json"), ("NaN", "json"),
                                          ("[Infinity]", "json"), ('{"a": 1, "a": 2}',
                                                                   "duplicateKey"),
                                          ("", "json"), ("1 2", "json"),
                                          ("[" * 100_000 + "]" * 100_000, "json")])
def test_json_text_is_read_strictly(text: str, keyword: str) -> None:
    assert [f.keyword for f in findings(text, {})] == [keyword]
    with pytest.raises(OutputValidationError):
        parse_json_strict(text)


def test_pydantic_model_returns_an_instance() -> None:
    city = validate_json('{"name": "Paris", "population": 2100000}', City)
    assert isinstance(city, City) and city.population == 2100000
    got = findings('{"name": "Paris", "population": "many"}', City)
    assert [(f.pointer, f.keyword) for f in got] == [("/population", "int_parsing")]
    assert [f.pointer for f in findings('{"name": "Paris"}', City)] == ["/population"]


def test_pydantic_rejects_duplicate_keys_it_would_merge() -> None:
    text = '{"name": "Paris", "name": "Lyon", "population": 1}'
    assert [f.keyword for f in findings(text, City)] == ["duplicateKey"]


def test_types_go_through_type_adapter() -> None:
    assert validate_json("[1, 2]", list[int]) == [1, 2]
    assert [f.pointer for f in findings('[1, "x"]', list[int])] == ["/1"]


def test_schema_given_as_json_text() -> None:
    assert validate_json("3", '{"minimum": 2}') == 3
    assert [f.keyword for f in findings("1", '{"minimum": 2}')] == ["minimum"]
    with pytest.raises(InvalidSchemaError):
        validate_json("1", "{not json")


def test_unknown_dialect_is_refused() -> None:
    with pytest.raises(SchemaUnsupportedError) as info:
        validate_json("1", {"$schema": "https://example.com/my-dialect"})
    assert info.value.keyword == "$schema"


def test_error_message_lists_findings() -> None:
    with pytest.raises(OutputValidationError) as info:
        validate_json('{"a": "x"}', {"properties": {"a": {"type": "integer"}}})
    assert "/a" in str(info.value) and "integer" in str(info.value)
