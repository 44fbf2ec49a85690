"""generate / stream / generate_batch on the tiny model (fast; its text is noise, so every check
is about structure), plus a couple of SmolLM2 tests marked ``model``.

Oracles: Python ``re``, ``json`` + ``jsonschema``, lark's own Earley parser, pydantic, and the
plain one-token-at-a-time / one-prompt-at-a-time loops for the fast paths.
"""

from __future__ import annotations

import json
import re

import jsonschema
import lark
import pydantic
import pytest

import grammarsd as gs
from grammarsd.api.generate import (
    generate,
    generate_batch,
    generate_result,
    output_spec,
    stream,
    strict_schema,
)
from grammarsd.api.models import LoadedModel

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 6},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
    },
    "required": ["name", "age"],
}
JSON_OPTS = {"whitespace": "compact"}


class Point(pydantic.BaseModel):
    x: int = pydantic.Field(ge=-9, le=9)
    label: bool


LIST_LARK = 'start: "[" NUM ("," NUM)~0..3 "]"\nNUM: /[0-9]{1,2}/\n'
SEEDS = [0, 1, 2]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(
    "pattern", [r"[a-z]{3}-\d{2}", r"(yes|no|maybe)!?", r"(é|京|🎉){2,4}", r"0x[0-9A-F]{1,4}"]
)
def test_regex_outputs_match(tiny_model: LoadedModel, pattern: str, seed: int) -> None:
    text = generate(tiny_model, "x", regex=pattern, temperature=1.0, seed=seed, max_tokens=40)
    assert re.fullmatch(pattern, text)


@pytest.mark.parametrize("seed", SEEDS)
def test_json_schema_outputs_validate(tiny_model: LoadedModel, seed: int) -> None:
    r = generate_result(tiny_model, "x", schema=PERSON, json_options=JSON_OPTS,
                        temperature=1.0, seed=seed, max_tokens=120)
    assert r.value == json.loads(r.text)
    jsonschema.validate(r.value, strict_schema(PERSON))
    assert r.finish_reason in ("eos", "grammar")


@pytest.mark.parametrize("seed", SEEDS)
def test_pydantic_outputs_are_instances(tiny_model: LoadedModel, seed: int) -> None:
    r = generate_result(tiny_model, "x", schema=Point, json_options=JSON_OPTS,
                        temperature=1.0, seed=seed, max_tokens=60)
    assert isinstance(r.value, Point)
    assert r.value == Point.model_validate_json(r.text)


@pytest.mark.parametrize("seed", SEEDS)
def test_lark_grammar_outputs_parse(tiny_model: LoadedModel, seed: int) -> None:
    text = generate(tiny_model, "x", grammar=LIST_LARK, temperature=1.0, seed=seed, max_tokens=40)
    lark.Lark(LIST_LARK, parser="earley", lexer="dynamic").parse(text)  # raises if not


def test_gbnf_and_choices(tiny_model: LoadedModel) -> None:
    gbnf = 'root ::= "ok" | "err(" [0-9] ")"'
    text = generate(tiny_model, "x", grammar=gbnf, temperature=1.0, seed=4)
    assert re.fullmatch(r"ok|err\([0-9]\)", text)
    options = ["red", "green", "blue", "light blue"]
    for seed in SEEDS:
        assert generate(tiny_model, "x", choices=options, temperature=1.0, seed=seed) in options


def test_bundled_grammar_by_name(tiny_model: LoadedModel) -> None:
    complete = 0
    for seed in range(4):  # noise may not close the value within the budget
        try:
            text = generate(tiny_model, "x", grammar="json.lark", temperature=1.0, seed=seed,
                            max_tokens=40)
        except gs.IncompleteOutputError:
            continue
        json.loads(text)
        complete += 1
    assert complete >= 1


def test_seeded_runs_reproduce(tiny_model: LoadedModel) -> None:
    kw = {"temperature": 1.0, "max_tokens": 25, "top_p": 0.95}
    a = generate_result(tiny_model, "Once upon", seed=123, **kw)
    b = generate_result(tiny_model, "Once upon", seed=123, **kw)
    c = generate_result(tiny_model, "Once upon", seed=124, **kw)
    assert a.token_ids == b.token_ids and a.text == b.text
    assert a.token_ids != c.token_ids


FORCED = r"[a-z]{2}\x01\x02\x03[a-z]{1,2}\x04\x05"  # control bytes: one token each, no merges


@pytest.mark.parametrize("seed", SEEDS)
def test_forced_runs_are_token_identical_to_the_plain_loop(
    tiny_model: LoadedModel, seed: int
) -> None:
    kw = {"regex": FORCED, "temperature": 1.0, "seed": seed, "max_tokens": 30}
    fast = generate_result(tiny_model, "x", **kw)
    plain = generate_result(tiny_model, "x", batch_forced=False, **kw)
    assert re.fullmatch(FORCED, fast.text)
    assert fast.token_ids == plain.token_ids
    assert fast.stats.forced_tokens >= 5
    assert fast.stats.forward_passes < plain.stats.forward_passes


PROMPTS = ["Hi", "Hello there, how are you", "a", "The quick brown fox jumps over"]


@pytest.mark.parametrize(
    "kw",
    [
        {"regex": r"[a-z]{2,5}-\d{2}"},
        {"schema": PERSON, "json_options": JSON_OPTS, "max_tokens": 120},
        {"temperature": 0.8, "seed": 5, "max_tokens": 12, "repetition_penalty": 1.2},
        {"regex": FORCED, "temperature": 1.0, "seed": 3},
    ],
    ids=["regex-greedy", "schema-greedy", "free-seeded", "forced-seeded"],
)
def test_batch_equals_one_by_one(tiny_model: LoadedModel, kw: dict) -> None:
    batch = generate_batch(tiny_model, PROMPTS, return_results=True, **kw)
    alone = [generate_result(tiny_model, p, **kw) for p in PROMPTS]
    assert [r.token_ids for r in batch] == [r.token_ids for r in alone]
    assert [r.text for r in batch] == [r.text for r in alone]


def test_stream_never_splits_a_character(tiny_model: LoadedModel) -> None:
    pattern = r"(é|京|🎉|a){6,10}"
    for seed in SEEDS:
        gen = stream(tiny_model, "x", regex=pattern, temperature=1.0, seed=seed, max_tokens=60)
        pieces = []
        while True:
            try:
                pieces.append(next(gen))
            except StopIteration as stop:
                result = stop.value
                break
        assert "".join(pieces) == result.text
        assert re.fullmatch(pattern, result.text)
        for p in pieces:  # each piece is whole characters: no replacement characters
            assert p and "\ufffd" not in p
        assert len(pieces) > 1


def test_stop_string_cuts_free_text(tiny_model: LoadedModel) -> None:
    full = generate_result(tiny_model, "Once upon a time", max_tokens=20)
    stop = full.text[len(full.text) // 2 :][:3]
    cut = generate_result(tiny_model, "Once upon a time", max_tokens=20, stop=stop)
    assert cut.finish_reason == "stop"
    assert cut.text == full.text[: full.text.index(stop)]
    streamed = "".join(stream(tiny_model, "Once upon a time", max_tokens=20, stop=stop))
    assert streamed == cut.text


def test_incomplete_output_carries_the_partial_text(tiny_model: LoadedModel) -> None:
    with pytest.raises(gs.IncompleteOutputError) as err:
        generate(tiny_model, "x", schema=PERSON, max_tokens=2)
    assert err.value.text.startswith("{") and err.value.max_tokens == 2


def test_free_text_length(tiny_model: LoadedModel) -> None:
    r = generate_result(tiny_model, "x", max_tokens=7)
    assert r.finish_reason in ("length", "eos") and len(r.token_ids) <= 7
    assert r.value == r.text and r.stats.tokens == len(r.token_ids)


def test_transformers_model_with_tokenizer(tiny_model: LoadedModel) -> None:
    a = generate(tiny_model.model, "x", tokenizer=tiny_model.tokenizer, regex=r"\d{3}")
    assert a == generate(tiny_model, "x", regex=r"\d{3}")
    with pytest.raises(TypeError):
        generate(tiny_model.model, "x", regex=r"\d{3}")


def test_option_errors(tiny_model: LoadedModel) -> None:
    with pytest.raises(ValueError, match="at most one"):
        generate(tiny_model, "x", regex="a", choices=["a"])
    with pytest.raises(TypeError, match="unknown generate option"):
        generate(tiny_model, "x", max_new_tokens=3)  # type: ignore[call-arg]
    with pytest.raises(gs.GrammarSyntaxError):
        generate(tiny_model, "x", regex="(a")
    with pytest.raises(ValueError, match="chat"):  # the tiny tokenizer has no chat template
        generate(tiny_model, [{"role": "user", "content": "hi"}])


def test_validation_errors_are_typed(tiny_model: LoadedModel) -> None:
    spec = output_spec(tiny_model.tokenizer_info, schema=PERSON)
    with pytest.raises(gs.OutputValidationError) as err:
        spec.parse('{"name": "bob"}')  # 'age' missing: jsonschema says no
    assert err.value.text == '{"name": "bob"}'
    with pytest.raises(gs.OutputValidationError):
        output_spec(tiny_model.tokenizer_info, schema=Point).parse('{"x": 99, "label": true}')


def test_strict_schema_closes_declared_objects() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "object", "properties": {"b": {"type": "integer"}}}},
        "$defs": {"open": {"properties": {"c": {}}, "additionalProperties": True}},
        "allOf": [{"properties": {"x": {}}}],
    }
    strict = strict_schema(schema)
    ok = {"a": {"b": 1}}
    assert jsonschema.Draft202012Validator(strict).is_valid(ok)
    for extra in ({"a": {"b": 1}, "z": 1}, {"a": {"b": 1, "z": 1}}):
        assert jsonschema.Draft202012Validator(schema).is_valid(extra)
        assert not jsonschema.Draft202012Validator(strict).is_valid(extra)
    assert strict["$defs"]["open"]["additionalProperties"] is True
    assert "additionalProperties" not in strict["allOf"][0]
    assert "additionalProperties" not in schema  # the input is not modified


def test_strict_false_is_spec_faithful(tiny_model: LoadedModel) -> None:
    info = tiny_model.tokenizer_info
    loose = output_spec(info, schema={"type": "object", "properties": {"a": {}}}, strict=False)
    m = loose.compiled.matcher()  # type: ignore[union-attr]
    assert m.accept_string('{"a": 1, "b": 2}') and m.is_accepting()
    closed = output_spec(info, schema={"type": "object", "properties": {"a": {}}})
    assert not closed.compiled.matcher().accept_string('{"a": 1, "b"')  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def smollm2() -> LoadedModel:
    return gs.load_model()


class Person(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=20)
    age: int = pydantic.Field(ge=0, le=120)
    city: str = pydantic.Field(max_length=20)


@pytest.mark.model
def test_smollm2_extracts_a_pydantic_model(smollm2: LoadedModel) -> None:
    person = generate(
        smollm2,
        "Extract the person as JSON: Maria Lopez is 34 years old and lives in Madrid.",
        schema=Person,
        max_tokens=60,
    )
    assert isinstance(person, Person)
    assert "Maria" in person.name and person.age == 34 and person.city == "Madrid"


@pytest.mark.model
def test_smollm2_stream_and_choices(smollm2: LoadedModel) -> None:
    options = ["Berlin", "Paris", "London"]
    assert generate(smollm2, "What is the capital of France?", choices=options) in options
    pieces = list(stream(smollm2, "Give a date.", regex=r"\d{4}-\d{2}-\d{2}"))
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", "".join(pieces))
