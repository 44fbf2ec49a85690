"""JSON Schema and Pydantic front end: a schema becomes a grammar IR, exactly or not at all.

Public API::

    schema_to_grammar(schema, *, options=JsonSchemaOptions(), registry=None) -> Grammar
    resolve_schema(spec) -> dict
    JsonSchemaOptions
    whitespace_gaps(options) -> WhitespaceGaps | None   (how the grammars' whitespace is laid out)

Every keyword is either enforced exactly or refused with ``SchemaUnsupportedError`` (keyword,
JSON pointer, reason); see ``compiler`` for the method and ``docs/json-schema.md`` for the
coverage table judged by the JSON Schema Test Suite.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import referencing

from grammarsd.errors import GrammarTooLargeError, InvalidSchemaError, SchemaUnsupportedError
from grammarsd.grammar.ir import Grammar
from grammarsd.grammar.json_schema.compiler import DRAFTS, Draft, _Lowering, whitespace_gaps
from grammarsd.grammar.json_schema.metaschema import check_schema
from grammarsd.grammar.json_schema.options import JsonSchemaOptions

DEFAULT_OPTIONS = JsonSchemaOptions()
DEFAULT_DRAFT_URI = "https://json-schema.org/draft/2020-12/schema"


def resolve_schema(spec: Any) -> dict[str, Any] | bool:
    """Turn ``spec`` into a JSON Schema value.

    Parameters
    ----------
    spec : a schema ``dict`` or ``bool``; a JSON string; a Pydantic model class; or any type
        ``pydantic.TypeAdapter`` accepts (``list[int]``, a ``TypedDict``, a dataclass, ...).

    Raises
    ------
    InvalidSchemaError : a string that is not JSON, or a type Pydantic cannot describe.
    """
    if isinstance(spec, (dict, bool)):
        return spec
    if isinstance(spec, str):
        try:
            value = json.loads(spec)
        except json.JSONDecodeError as exc:
            raise InvalidSchemaError(f"schema is not JSON: {exc.msg}",
                                     pointer="") from None
        if not isinstance(value, (dict, bool)):
            raise InvalidSchemaError("a schema must be a JSON object or boolean")
        return value
    from grammarsd.grammar.pydantic import pydantic_schema

    return pydantic_schema(spec)


def draft_of(schema: Any, default: str = DEFAULT_DRAFT_URI) -> Draft:
    """The dialect named by ``$schema`` (``default`` when absent).

    Raises ``SchemaUnsupportedError`` for a dialect that is none of drafts 4 .. 2020-12.
    """
    named = schema.get("$schema", default) if isinstance(schema, dict) else default
    uri = str(named).rstrip("#")
    if uri not in DRAFTS:
        raise SchemaUnsupportedError("$schema", pointer="/$schema",
                                     reason=f"unknown dialect {named!r}")
    return DRAFTS[uri]


def schema_to_grammar(
    schema: Any,
    *,
    options: JsonSchemaOptions = DEFAULT_OPTIONS,
    registry: referencing.Registry[Any] | None = None,
) -> Grammar:
    """Compile a JSON Schema to a grammar whose language is the valid instances' JSON text.

    Parameters
    ----------
    schema : anything ``resolve_schema`` accepts.
    options : layout and limits (``JsonSchemaOptions``).
    registry : a ``referencing.Registry`` holding remote documents ``$ref`` may point to;
        without it, any reference outside the schema is refused.

    Returns
    -------
    Grammar : start rule ``start``. Invariant: every string it accepts is JSON text of an
        instance valid against ``schema`` (formats asserted); the JSON text of valid instances
        is accepted in the layout of ``options`` with the conservative exceptions listed in
        ``docs/json-schema.md`` (exponent spellings of bounded numbers, ...).

    Raises
    ------
    InvalidSchemaError : not valid against its draft's metaschema.
    SchemaUnsupportedError : a keyword that cannot be enforced exactly (keyword, pointer).
    GrammarTooLargeError : ``"schema_recursion"`` (``recursion_refused``).
    """
    with recursion_refused():
        value = resolve_schema(schema)
        draft = draft_of(value, options.default_draft)
        # No format checker here: "regex" would judge ECMA patterns with Python's re; patterns
        # are compiled (or refused) by the ECMA parser when they are lowered.
        error = check_schema(value, draft.validator)
        if error is not None:
            pointer = "".join(f"/{p}" for p in error.absolute_path)
            raise InvalidSchemaError(f"invalid {draft.name} schema: {error.message}",
                                     pointer=pointer)
        base = registry if registry is not None else referencing.Registry()
        return _Lowering(value, draft, options, base).grammar()


@contextmanager
def recursion_refused() -> Iterator[None]:
    """Turn a ``RecursionError`` into ``GrammarTooLargeError("schema_recursion")``: subschemas
    nested, or chained through ``$ref``, past what the recursive checks and lowering can walk
    (~75 levels at Python's default recursion limit: ``compiler._FRAMES_PER_LEVEL``)."""
    try:
        yield
    except RecursionError:
        limit = sys.getrecursionlimit()
        raise GrammarTooLargeError(
            "schema_recursion", limit, limit,
            hint="subschemas nest (or chain through $ref) too deep to walk; flatten the schema "
                 "or raise sys.setrecursionlimit") from None


__all__ = ["JsonSchemaOptions", "draft_of", "recursion_refused", "resolve_schema",
           "schema_to_grammar", "whitespace_gaps"]
