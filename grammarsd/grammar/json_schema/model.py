"""The records the JSON Schema lowering passes around (data first; no behaviour).

``_Node`` is one schema location; an alternative (``_Alt``) is a conjunction of nodes; ``_Merged``
is one conjunction intersected keyword by keyword; ``_ArraySpec``/``_ObjectSpec`` keep the item
and member schemas of each merged atom; a ``_Witness`` is an existential member requirement
(from the complement of ``additionalProperties``/``patternProperties``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any

from grammarsd.grammar.automata import CharDFA

#: JSON types as the grammar splits them: "int" = integral numbers, "frac" = the others.
_TYPES = frozenset({"null", "boolean", "int", "frac", "string", "array", "object"})
_TYPE_NAMES = {"null": {"null"}, "boolean": {"boolean"}, "integer": {"int"},
               "number": {"int", "frac"}, "string": {"string"}, "array": {"array"},
               "object": {"object"}}



@dataclass(frozen=True, eq=False)
class _Node:
    """A schema (bool or dict) with the resolver of its base URI and its JSON pointer."""

    schema: Any
    resolver: Any  # referencing's Resolver at this schema's base URI
    pointer: str


_Alt = tuple[_Node, ...]


@dataclass
class _ArraySpec:
    prefix: list[_Node]
    items: _Node | None  # applies after the prefix; None = anything


@dataclass(frozen=True, eq=False)
class _Witness:
    """"Some member's key is in ``keys`` but not in ``names``, and its value is in ``value``".

    The complement of ``additionalProperties`` (keys matching no sibling pattern nor sibling
    property name, value failing the schema) and of one ``patternProperties`` entry.
    """

    keys: CharDFA  # decoded key strings
    names: frozenset[str]  # removed from ``keys``
    value: _Node
    keyword: str  # for refusals: the keyword whose complement this is

    def admits(self, key: str) -> bool:
        return key not in self.names and self.keys.matches(key)


@dataclass
class _ObjectSpec:
    properties: dict[str, _Node]
    patterns: list[tuple[str, _Node]]
    additional: _Node | None  # None = anything


@dataclass
class _Merged:
    """The intersection of one alternative's atoms, keyword by keyword."""

    types: set[str] = field(default_factory=lambda: set(_TYPES))
    values: list[Any] | None = None  # enum/const intersection; None = unrestricted
    excluded: list[Any] = field(default_factory=list)  # values removed by ``not``
    # numbers
    lo: Decimal | None = None
    lo_strict: bool = False
    hi: Decimal | None = None
    hi_strict: bool = False
    multiple_of: Fraction | None = None
    multiple_at: str = ""  # pointer of the last multipleOf folded in
    not_multiples: list[tuple[Fraction, str]] = field(default_factory=list)  # (q, pointer)
    # strings
    min_len: int = 0
    max_len: int | None = None
    patterns: list[tuple[str, str]] = field(default_factory=list)  # (pattern, pointer)
    not_patterns: list[tuple[str, str]] = field(default_factory=list)
    formats: list[tuple[str, str]] = field(default_factory=list)  # (name, pointer)
    not_formats: list[tuple[str, str]] = field(default_factory=list)  # from complements
    # arrays
    arrays: list[_ArraySpec] = field(default_factory=list)
    min_items: int = 0
    max_items: int | None = None
    unique: tuple[str, ...] = ()  # pointers of uniqueItems: true
    contains: list[tuple[_Node, int, int | None]] = field(default_factory=list)
    # objects
    objects: list[_ObjectSpec] = field(default_factory=list)
    required: list[str] = field(default_factory=list)
    min_props: int = 0
    max_props: int | None = None
    dep_required: list[tuple[str, list[str]]] = field(default_factory=list)
    property_names: list[_Node] = field(default_factory=list)
    witnesses: list[_Witness] = field(default_factory=list)

    def excluding(self, values: list[Any]) -> _Merged:
        """A copy with ``values`` excluded too; the other fields shared, as ``dataclasses.replace``
        shares them, without its call through ``__init__`` (26 fields, once per object's other
        keys)."""
        out = object.__new__(_Merged)
        out.__dict__.update(self.__dict__)
        out.excluded = self.excluded + values
        return out


def _value_key(value: Any) -> Any:
    """A hashable key with JSON Schema equality (``1 == 1.0``, ``True != 1``)."""
    if isinstance(value, bool) or value is None:
        return ("v", value)
    if isinstance(value, (int, float)):
        return ("n", Fraction(value))
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, list):
        return ("l", tuple(_value_key(v) for v in value))
    return ("o", frozenset((k, _value_key(v)) for k, v in value.items()))


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "int" if float(value).is_integer() else "frac"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _escape_pointer(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")
