"""Pydantic front end: a model class (or any type ``TypeAdapter`` accepts) to a JSON Schema.

Owns only the hand-off to Pydantic; the schema then goes through ``grammarsd.grammar.json_schema``
like any other. Pydantic writes draft 2020-12 with ``$defs`` and local ``$ref``.
"""

from __future__ import annotations

from typing import Any

from grammarsd.errors import InvalidSchemaError


def pydantic_schema(spec: Any) -> dict[str, Any]:
    """The validation-mode JSON Schema Pydantic generates for ``spec``.

    Raises ``InvalidSchemaError`` when Pydantic cannot describe ``spec``.
    """
    import pydantic

    try:
        if isinstance(spec, type) and issubclass(spec, pydantic.BaseModel):
            return spec.model_json_schema()
        return pydantic.TypeAdapter(spec).json_schema()
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError) as exc:
        raise InvalidSchemaError(f"cannot build a JSON Schema for {spec!r}: {exc}") from None


def model_to_grammar(model: Any, **kwargs: Any) -> Any:
    """``schema_to_grammar(model, **kwargs)`` for a Pydantic model or type."""
    from grammarsd.grammar.json_schema import schema_to_grammar

    return schema_to_grammar(pydantic_schema(model), **kwargs)


__all__ = ["model_to_grammar", "pydantic_schema"]
