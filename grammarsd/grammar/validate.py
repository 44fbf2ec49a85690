"""Output validation: parse generated JSON text and check it against the spec it was made for.

Owns the last step of structured generation. The grammar already constrains decoding, so this
is the independent check (and the conversion to the caller's type):

    dict / bool schema   ``jsonschema``, the validator of the schema's own draft (``$schema``,
                         default 2020-12) with that draft's ``FormatChecker``
    Pydantic model       ``Model.model_validate_json`` (returns the model instance)
    any other type       ``pydantic.TypeAdapter(spec).validate_json``

Everything that fails becomes ``OutputValidationError(text, errors)`` whose ``errors`` is a
list of ``ValidationFinding`` (JSON pointer, keyword, message). The JSON text itself is read
strictly: ``NaN``/``Infinity`` and duplicate object keys are findings, not silently accepted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import referencing

from grammarsd.errors import OutputValidationError
from grammarsd.grammar.json_schema import DEFAULT_DRAFT_URI, draft_of, resolve_schema


@dataclass(frozen=True)
class ValidationFinding:
    """One reason the text is invalid.

    Attributes
    ----------
    pointer : RFC 6901 JSON pointer into the *instance* ("" = the whole value).
    keyword : what failed: a JSON Schema keyword (``"type"``, ``"format"``, ...), a Pydantic
        error type (``"int_parsing"``, ...), ``"json"`` for unparsable text or
        ``"duplicateKey"``.
    message : the validator's own message.
    """

    pointer: str
    keyword: str
    message: str

    def __str__(self) -> str:
        return f"{self.pointer or '#'}: {self.message} ({self.keyword})"


class _StrictJsonError(ValueError):
    def __init__(self, finding: ValidationFinding) -> None:
        super().__init__(finding.message)
        self.finding = finding


def _pointer(path: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _reject_constant(name: str) -> Any:
    raise _StrictJsonError(ValidationFinding("", "json", f"{name} is not valid JSON"))


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _StrictJsonError(ValidationFinding("", "duplicateKey",
                                                     f"duplicate object key {key!r}"))
        out[key] = value
    return out


def parse_json_strict(text: str) -> Any:
    """``json.loads`` that rejects ``NaN``/``Infinity`` and duplicate keys.

    Raises ``OutputValidationError`` with one finding (keyword ``json`` or ``duplicateKey``;
    nesting deeper than Python's recursion limit is a ``json`` finding too).
    """
    try:
        return json.loads(text, parse_constant=_reject_constant,
                          object_pairs_hook=_no_duplicates)
    except _StrictJsonError as exc:
        raise OutputValidationError(text, [exc.finding]) from None
    except json.JSONDecodeError as exc:
        finding = ValidationFinding("", "json", f"{exc.msg} at line {exc.lineno}, column "
                                    f"{exc.colno}")
        raise OutputValidationError(text, [finding]) from None
    except RecursionError:
        finding = ValidationFinding("", "json", "nested too deeply for the JSON reader")
        raise OutputValidationError(text, [finding]) from None


def _validate_schema(text: str, schema: dict[str, Any] | bool, default_draft: str,
                     registry: referencing.Registry[Any] | None) -> Any:
    value = parse_json_strict(text)
    cls = draft_of(schema, default_draft).validator
    kwargs: dict[str, Any] = {"format_checker": cls.FORMAT_CHECKER}
    if registry is not None:
        kwargs["registry"] = registry
    validator = cls(schema, **kwargs)
    errors = sorted(validator.iter_errors(value), key=lambda e: (list(e.absolute_path),
                                                                 str(e.validator)))
    if errors:
        raise OutputValidationError(text, [
            ValidationFinding(_pointer(e.absolute_path), str(e.validator), e.message)
            for e in errors])
    return value


def _validate_pydantic(text: str, spec: Any) -> Any:
    import pydantic

    parse_json_strict(text)  # same strictness as for schemas (pydantic keeps the last duplicate)
    try:
        if isinstance(spec, type) and issubclass(spec, pydantic.BaseModel):
            return spec.model_validate_json(text)
        return pydantic.TypeAdapter(spec).validate_json(text)
    except pydantic.ValidationError as exc:
        raise OutputValidationError(text, [
            ValidationFinding(_pointer(err["loc"]), err["type"], err["msg"])
            for err in exc.errors()]) from None


def validate_json(
    text: str,
    spec: Any,
    *,
    default_draft: str = DEFAULT_DRAFT_URI,
    registry: referencing.Registry[Any] | None = None,
) -> Any:
    """Parse ``text`` as JSON and validate it against ``spec``.

    Parameters
    ----------
    text : the generated JSON text.
    spec : a JSON Schema (``dict``/``bool``, or its JSON text), a Pydantic model class, or any
        type ``pydantic.TypeAdapter`` accepts — what ``schema_to_grammar`` accepts.
    default_draft : the dialect for schemas without ``$schema`` (as in ``JsonSchemaOptions``).
    registry : remote documents for ``$ref`` (as in ``schema_to_grammar``).

    Returns
    -------
    The parsed value for a schema; the model instance (or the adapted value) for a type.

    Raises
    ------
    OutputValidationError : ``errors`` lists every ``ValidationFinding`` (all of them, not only
        the first), sorted by instance pointer for schemas.
    InvalidSchemaError : ``spec`` is a string that is not JSON schema text.
    SchemaUnsupportedError : a ``$schema`` that names no known draft.
    """
    if isinstance(spec, str):
        spec = resolve_schema(spec)
    if isinstance(spec, (dict, bool)):
        return _validate_schema(text, spec, default_draft, registry)
    return _validate_pydantic(text, spec)


__all__ = ["ValidationFinding", "parse_json_strict", "validate_json"]
