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
    _merged,
    check_schema,
    vocabulary_documents,
)

MERGED_DRAFTS = [jsonschema.Draft201909Validator, jsonschema.Draft202012Validator]
_METADATA = {"$schema", "$id", "$vocabulary", "$dynamicAnchor", "$recursiveAnchor", "title",
             "$comment", "allOf"}
_WRONG: list[Any] = [5, -1, "x", [], [1], {"type": 3}, True, None, {"a": 1}]


def _suite_schemas() -> list[Any]:
    found = []
    for path in judge.suite_files(judge.DEFAULT_SUITE, "draft2020-12"):
        found.extend(case["schema"] for case in json.loads(path.read_text()))
    return found


def _mutations(schema: Any, rng: random.Random) -> Iterator[Any]:
    """``schema`` with one value somewhere in it replaced by a wrongly typed one."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            yield {**schema, key: rng.choice(_WRONG)}
            for inner in _mutations(value, rng):
                yield {**schema, key: inner}
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            for inner in _mutations(value, rng):
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
