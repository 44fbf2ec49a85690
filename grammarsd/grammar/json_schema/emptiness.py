"""Provably empty conjunctions: a sound, incomplete test used to keep DNFs small.

Owns ``_Emptiness``, which answers "has this merged conjunction no instance?" from cheap facts:
contradictory type sets, numeric intervals, lengths and counts; finite ``enum``/``const`` sets
that no type allows; and, for objects, a required key whose value schemas (from every
``properties``/``patternProperties``/``additionalProperties`` of the conjunction) cannot meet.
Value schemas are over-approximated by an *outline* (a superset of their types and, where known,
a finite superset of their values: ``_Outline``), and finite candidates are then checked against
every value schema with ``jsonschema``, as the lowering checks ``enum`` values.

"Yes" is a proof; "no" means "not shown". The lowering uses it to drop alternatives of a
product (``_Lowering._product``), to treat ``oneOf`` branches as disjoint, and to negate only
the branches that may overlap a given alternative (``_Lowering._one_of``, which first compares
each pair's ``Signature``: ``disjoint``). Any refusal met while looking (an unsupported pattern,
an unresolvable ``$ref``) means "not shown": the refusal is raised where the lowering itself
needs that schema.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from grammarsd.errors import SchemaUnsupportedError
from grammarsd.grammar.json_schema.model import (
    _TYPE_NAMES,
    _TYPES,
    _Merged,
    _Node,
    _type_of,
    _value_key,
)

if TYPE_CHECKING:
    from grammarsd.grammar.json_schema.compiler import _Lowering

#: How many applicator levels an outline looks through (``$ref``, ``allOf``, ``anyOf``, ...).
_OUTLINE_DEPTH = 6


@dataclass(frozen=True)
class _Outline:
    """A superset of a schema's language: ``types`` (grammar type names) and, unless ``None``,
    a finite list ``values`` containing every instance. Invariant: every listed value has a type
    in ``types``."""

    types: frozenset[str]
    values: tuple[Any, ...] | None = None

    @property
    def empty(self) -> bool:
        return not self.types

    def meet(self, other: _Outline) -> _Outline:
        values = self.values
        if other.values is not None:
            keys = None if values is None else {_value_key(v) for v in values}
            values = tuple(v for v in other.values if keys is None or _value_key(v) in keys)
        return _Outline.of(self.types & other.types, values)

    def join(self, other: _Outline) -> _Outline:
        values = None
        if self.values is not None and other.values is not None:
            values = self.values + other.values
        return _Outline.of(self.types | other.types, values)

    @staticmethod
    def of(types: frozenset[str], values: tuple[Any, ...] | None) -> _Outline:
        if values is not None:
            values = tuple(v for v in values if _type_of(v) in types)
            types = frozenset(_type_of(v) for v in values)
        return _Outline(types, values)


_ANYTHING = _Outline(_TYPES)
_NOTHING = _Outline(frozenset())


@dataclass(frozen=True)
class Signature:
    """What ``disjoint`` compares of one merged alternative: a superset of its types and, per
    required key, a finite superset of the values every object instance has there (only keys
    where one is known)."""

    types: frozenset[str]
    keys: dict[str, frozenset[Any]]


def disjoint(a: Signature, b: Signature) -> bool:
    """Whether two alternatives provably share no instance: no common type, or objects only
    and a key both require with no common value (a ``name: {const: ...}`` tool union). Cheap
    enough to try on every pair of a ``oneOf``'s alternatives before merging the pair."""
    shared = a.types & b.types
    if shared != {"object"}:
        return not shared
    return any(key in b.keys and not values & b.keys[key] for key, values in a.keys.items())


class _Emptiness:
    """Sound emptiness checks for one compilation (outlines memoised by schema identity)."""

    def __init__(self, low: _Lowering) -> None:
        # a weak back-reference: a cycle would keep each compilation's IR alive until the
        # cyclic collector runs
        self.low = weakref.proxy(low)
        self._outlines: dict[int, _Outline] = {}

    # ------------------------------------------------------------------ conjunctions

    def empty(self, m: _Merged) -> bool:
        """Whether the merged conjunction ``m`` provably has no instance."""
        types = set(m.types)
        if m.values is not None:
            gone = {_value_key(v) for v in m.excluded}
            types &= {_type_of(v) for v in m.values if _value_key(v) not in gone}
        if types & {"int", "frac"} and _empty_interval(m):
            types -= {"int", "frac"}
        if "string" in types and m.max_len is not None and m.max_len < m.min_len:
            types.discard("string")
        if "array" in types and m.max_items is not None and m.max_items < m.min_items:
            types.discard("array")
        if "object" in types and self._no_object(m):
            types.discard("object")
        return not types

    def signature(self, m: _Merged) -> Signature:
        """``m``'s ``Signature`` (the outlines of its required keys, as ``_no_object`` meets
        them, without the ``jsonschema`` check of their values: a superset)."""
        keys: dict[str, frozenset[Any]] = {}
        for key in m.required:
            nodes = self._key_nodes(m, key)
            if nodes is None:
                continue
            outline = self._meet(nodes)
            if outline.values is not None:
                keys[key] = frozenset(_value_key(v) for v in outline.values)
        return Signature(frozenset(m.types), keys)

    def _no_object(self, m: _Merged) -> bool:
        if m.max_props is not None and (m.max_props < max(m.min_props, len(m.required))):
            return True
        for key in m.required:
            nodes = self._key_nodes(m, key)
            if nodes is None:
                continue
            outline = self._meet(nodes)
            if outline.empty:
                return True
            if outline.values is not None and not any(
                    self._plausible(v, nodes) for v in outline.values):
                return True
        return False

    def _meet(self, nodes: list[_Node]) -> _Outline:
        """The outline of the conjunction of ``nodes``."""
        outline = _ANYTHING
        for node in nodes:
            outline = outline.meet(self.outline(node))
        return outline

    def _key_nodes(self, m: _Merged, key: str) -> list[_Node] | None:
        """Schemas every value of member ``key`` meets (``None``: unknown, a pattern refused)."""
        nodes: list[_Node] = []
        for spec in m.objects:
            if key in spec.properties:
                nodes.append(spec.properties[key])
                continue
            try:
                hits = [node for pat, node in spec.patterns if self.low.pattern_dfa(
                    pat, node.pointer, "patternProperties").matches(key)]
            except SchemaUnsupportedError:
                return None
            nodes += hits
            if not hits and spec.additional is not None:
                nodes.append(spec.additional)
        return nodes

    def _plausible(self, value: Any, nodes: list[_Node]) -> bool:
        """Whether ``value`` meets every schema in ``nodes``, judged by ``jsonschema`` as the
        lowering judges ``enum`` values (formats as ``options.formats`` says). Value schemas
        are user schemas or ``{"not": user schema}``: no private keywords."""
        low = self.low
        if low.options.formats == "assert":
            return low.is_valid(value, tuple(nodes))
        return all(low.draft.validator(n.schema, registry=low.registry,
                                       _resolver=n.resolver).is_valid(value) for n in nodes)

    # ------------------------------------------------------------------ outlines

    def outline(self, node: _Node, depth: int = _OUTLINE_DEPTH) -> _Outline:
        """A superset of the language of ``node`` (see ``_Outline``)."""
        s = node.schema
        if s is True or depth == 0 or not isinstance(s, (dict, bool)):
            return _ANYTHING
        if s is False:
            return _NOTHING
        key = id(s)
        if key not in self._outlines:
            self._outlines[key] = _ANYTHING  # while recursing through $ref
            try:
                self._outlines[key] = self._outline(node, depth)
            except SchemaUnsupportedError:
                pass  # an unresolvable $ref proves nothing here; the lowering refuses it itself
        return self._outlines[key]

    def _outline(self, node: _Node, depth: int) -> _Outline:
        low = self.low
        s = node.schema
        vocab = low.draft.vocabulary
        if "$ref" in s and low.draft.year <= 7:  # siblings of $ref are ignored there
            return self.outline(low.deref(node), depth - 1)
        out = _ANYTHING
        if "type" in vocab and "type" in s:
            names = [s["type"]] if isinstance(s["type"], str) else s["type"]
            out = out.meet(_Outline(frozenset().union(*(_TYPE_NAMES[t] for t in names))))
        if "enum" in vocab and "enum" in s:
            out = out.meet(_Outline.of(_TYPES, tuple(s["enum"])))
        if "const" in vocab and "const" in s:
            out = out.meet(_Outline.of(_TYPES, (s["const"],)))
        if "$ref" in s:
            out = out.meet(self.outline(low.deref(node), depth - 1))
        for i in range(len(s.get("allOf", []))):
            out = out.meet(self.outline(low.child(node, "allOf", i), depth - 1))
        for kw in ("anyOf", "oneOf"):
            if kw in s:
                union = _NOTHING
                for i in range(len(s[kw])):
                    union = union.join(self.outline(low.child(node, kw, i), depth - 1))
                out = out.meet(union)
        return out


def _empty_interval(m: _Merged) -> bool:
    if m.lo is None or m.hi is None:
        return False
    return m.lo > m.hi or (m.lo == m.hi and (m.lo_strict or m.hi_strict))
