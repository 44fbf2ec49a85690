"""The lowering skips crawling the registry where the schema names no resource or anchor.

The oracle is ``referencing`` itself: for every schema of the vendored JSON Schema Test Suite
(its core files, each with its folder's dialect) that ``_names_resources`` clears, crawling adds no resource and no anchor to the
registry holding only the root; and the check does clear most schemas, and flags the ones
with ``$id``, ``$anchor`` and ``$dynamicAnchor``.
"""

from __future__ import annotations

import json
from typing import Any

import referencing

from grammarsd.bench.test_suite import DEFAULT_SUITE, DRAFT_URIS
from grammarsd.errors import SchemaUnsupportedError
from grammarsd.grammar.json_schema import draft_of
from grammarsd.grammar.json_schema.compiler import _names_resources


def _suite_schemas() -> list[tuple[Any, str]]:
    """Every suite schema with its folder's dialect, but those of a dialect the compiler
    refuses (a made-up metaschema)."""
    out = []
    for path in sorted(DEFAULT_SUITE.glob("draft*/*.json")):
        for case in json.loads(path.read_text(encoding="utf-8")):
            try:
                draft_of(case["schema"], DRAFT_URIS[path.parent.name])
            except SchemaUnsupportedError:
                continue
            out.append((case["schema"], DRAFT_URIS[path.parent.name]))
    return out


def _crawled(schema: Any, dialect: str) -> tuple[set[str], set[tuple[str, str]]]:
    draft = draft_of(schema, dialect)
    resource = draft.spec.create_resource(schema)
    base = resource.id() or ""
    crawled = referencing.Registry().with_resource(base, resource).crawl()
    return set(crawled), {key for key in crawled._anchors}  # (no public view of the anchors)


def test_a_cleared_schema_crawls_to_nothing_but_its_root() -> None:
    schemas = _suite_schemas()
    cleared = [(s, dialect) for s, dialect in schemas if not _names_resources(s)]
    assert len(schemas) > 500 and len(cleared) > 0.6 * len(schemas)
    for schema, dialect in cleared:
        resources, anchors = _crawled(schema, dialect)
        assert len(resources) == 1 and not anchors


def test_identifiers_are_flagged_wherever_they_sit() -> None:
    assert _names_resources({"$defs": {"a": {"$anchor": "x"}}})
    assert _names_resources({"items": [{"$dynamicAnchor": "meta"}]})
    assert _names_resources({"allOf": [{"$id": "http://example.com/a"}]})
    assert not _names_resources({"properties": {"a": {"type": "string"}}, "enum": [[1, {}]]})
