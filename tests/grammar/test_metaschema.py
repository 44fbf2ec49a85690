"""The merged metaschemas judge schemas exactly as ``jsonschema``'s own metaschema validators.

Oracle: ``Validator(Validator.META_SCHEMA)``, which resolves the drafts' dynamic references
itself. The corpus is every schema of the vendored JSON Schema Test Suite plus mutations that
put a wrongly typed value under each keyword, so every vocabulary gets invalid input.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest

from grammarsd.bench import test_suite as judge
from grammarsd.grammar.json_schema.metaschema import (
    _fast_check,
    _merged,
    check_schema,
    vocabulary_documents,
)

MERGED_DRAFTS = [jsonschema.Draft201909Validator, jsonschema.Draft202012Validator]
_METADATA = {"$schema", "$id", "$vocabulary", "$dynamicAnchor", "$recursiveAnchor", "title",
             "$comment", "allOf"}
_WRONG: list[Any] = [5, -1, "x", [], [1], {"type": 3}, True, None, {"a": 1}]


def _suite_schemas(draft: str = "draft2020-12") -> list[Any]:
    found = []
    for path in judge.suite_files(judge.DEFAULT_SUITE, draft):
        found.extend(case["schema"] for case in json.loads(path.read_text()))
    return found


def _mutations(schema: Any, rng: random.Random, wrong: list[Any] = _WRONG) -> Iterator[Any]:
    """``schema`` with one value somewhere in it replaced by a wrongly typed one."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            yield {**schema, key: rng.choice(wrong)}
            for inner in _mutations(value, rng, wrong):
                yield {**schema, key: inner}
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            for inner in _mutations(value, rng, wrong):
                yield [*schema[:i], inner, *schema[i + 1:]]


def _corpus() -> list[Any]:
    rng = random.Random(0)
    schemas = _suite_schemas()
    mutated = [m for s in schemas for m in _mutations(s, rng)]
    return schemas + rng.sample(mutated, 700)


CORPUS = _corpus()


def _paths(errors: Iterator[jsonschema.ValidationError]) -> set[tuple[str, ...]]:
    """Instance locations of ``errors`` and of all the errors under them."""
    found = set()
    for error in errors:
        found.add(tuple(map(str, error.absolute_path)))
        found |= _paths(iter(error.context or ()))
    return found


@pytest.mark.parametrize("validator", MERGED_DRAFTS, ids=lambda v: v.__name__)
def test_vocabularies_merge_without_loss(validator: Any) -> None:
    """Merging is sound only if the vocabularies constrain nothing but through ``properties``
    and ``$defs``, of the root's ``type``, and never give one key two meanings."""
    root = validator.META_SCHEMA
    docs = vocabulary_documents(root)
    assert len(docs) >= 6
    seen: dict[str, Any] = {}
    for doc in [root, *docs]:
        assert set(doc) <= _METADATA | {"properties", "$defs", "type"}, set(doc)
        assert doc.get("type", root["type"]) == root["type"]
        for part in ("properties", "$defs"):
            for key, value in doc.get(part, {}).items():
                assert seen.setdefault(f"{part}/{key}", value) == value, key
    text = json.dumps(_merged(root))
    assert '"$dynamicRef": "#meta"' not in text and '"$recursiveRef": "#"' not in text


@pytest.mark.parametrize("validator", MERGED_DRAFTS, ids=lambda v: v.__name__)
def test_same_verdicts_as_jsonschema(validator: Any) -> None:
    oracle = validator(validator.META_SCHEMA)
    invalid = 0
    for schema in CORPUS:
        expected = _paths(oracle.iter_errors(schema))
        error = check_schema(schema, validator)
        assert (error is None) == (not expected), schema
        if error is not None:  # the error shown is one the oracle finds too (the best of
            # them may differ: best_match weighs how many alternatives fail alike)
            assert tuple(map(str, error.absolute_path)) in expected, schema
            invalid += 1
    assert 200 < invalid < len(CORPUS) - 200  # the corpus holds both kinds


def test_a_dropped_vocabulary_is_noticed() -> None:
    """Negative control: a merge that loses the validation vocabulary disagrees on the corpus."""
    validator = jsonschema.Draft202012Validator
    root = dict(validator.META_SCHEMA)
    root["allOf"] = [r for r in root["allOf"] if r["$ref"] != "meta/validation"]
    lossy = validator(_merged(root))
    oracle = validator(validator.META_SCHEMA)
    disagree = sum(
        bool(list(lossy.iter_errors(s))) != bool(list(oracle.iter_errors(s))) for s in CORPUS)
    assert disagree > 20


ALL_DRAFTS = [jsonschema.Draft4Validator, jsonschema.Draft6Validator, jsonschema.Draft7Validator,
              *MERGED_DRAFTS]
# values whose verdict turns on a draft's semantics: integers written 1.0, bool versus number,
# uniqueness with True beside 1, a list where a schema goes
_EDGES: list[Any] = [1.0, 2.5, 0, [1, True], ["a", "a"], [{}], {"a": [1]}, {"a": ["b", "b"]}]


def _edge_corpus() -> list[Any]:
    rng = random.Random(1)
    schemas = _suite_schemas() + _suite_schemas("draft7")
    mutated = [m for s in schemas for m in _mutations(s, rng, _WRONG + _EDGES)]
    return schemas + rng.sample(mutated, 1000)


EDGE_CORPUS = _edge_corpus()
DRAFT_SENSITIVE: list[Any] = [
    {"minLength": 1.0},  # an integer from draft 6 on
    {"minimum": 0, "exclusiveMinimum": True},  # a flag in draft 4, a number after
    {"items": [{}]},  # a list of schemas up to 2019-09
    {"enum": [1, 1]},  # distinct values in draft 4
    {"required": []},  # at least one name in draft 4
    {"$anchor": "1a"},  # a name by pattern from 2019-09 on, unknown before
    {"exclusiveMinimum": 1},  # a number from draft 6 on
]
# and where the drafts agree, but draft 4 says why through its ``dependencies``
EDGE_CORPUS += [*DRAFT_SENSITIVE, {"exclusiveMinimum": True}, {"exclusiveMaximum": True}]


@pytest.mark.parametrize("validator", ALL_DRAFTS, ids=lambda v: v.__name__)
def test_the_compiled_metaschema_judges_as_jsonschema(validator: Any) -> None:
    """``check_schema``'s fast verdict (the metaschema compiled to closures) against the
    draft's own ``jsonschema`` metaschema validator, over suite schemas of two drafts and
    mutations of them."""
    fast = _fast_check(validator)
    assert fast is not None  # every draft's metaschema compiles
    oracle = validator(validator.META_SCHEMA)
    wrong = [s for s in EDGE_CORPUS if fast(s) != oracle.is_valid(s)]
    assert not wrong, wrong[:3]
    invalid = sum(not oracle.is_valid(s) for s in EDGE_CORPUS)
    assert 300 < invalid < len(EDGE_CORPUS) - 300  # the corpus holds both kinds


@pytest.mark.parametrize("schema", DRAFT_SENSITIVE, ids=json.dumps)
def test_draft_sensitive_verdicts(schema: Any) -> None:
    verdicts = [validator(validator.META_SCHEMA).is_valid(schema) for validator in ALL_DRAFTS]
    assert len(set(verdicts)) == 2  # the drafts disagree: each one's semantics is exercised
    fast = [_fast_check(validator)(schema) for validator in ALL_DRAFTS]  # type: ignore[misc]
    assert fast == verdicts
