"""Lowering a JSON Schema (drafts 4 to 2020-12) to the grammar IR, exactly or not at all.

Owns the schema semantics. The pipeline for one schema location:

1. **Expand** (``_Lowering._expand``): the applicators ``$ref``, ``allOf``, ``anyOf``,
   ``oneOf``, ``not``, ``if/then/else`` and ``dependentSchemas`` are rewritten into a
   disjunctive normal form: a list of *alternatives*, each a conjunction of atoms. An atom is a
   schema object read only for its own assertion keywords (``_Node``). The language is the
   union over alternatives of the intersection of atoms. Complements (``not``, the ``else``
   side of ``if``, exact ``oneOf``) are pushed down keyword by keyword (``_negate``): the
   complement of ``minimum: 5`` is "a number below 5", of ``required: [a]`` "an object without
   ``a``", of ``properties: {a: S}`` "an object whose ``a`` is not ``S``", of
   ``additionalProperties``/``patternProperties`` "some member with such a key fails the value
   schema" (a ``_Witness`` the object automaton must see), of ``items: S`` "some item fails
   ``S``" (a counted ``contains``). These become small synthetic schema objects, some with
   private keywords (``_TYPES_KW`` ...) for what JSON Schema cannot say directly (say, a type set
   containing only non-integral numbers).
2. **Merge** (``_merge``): one alternative's atoms are intersected keyword by keyword into a
   ``_Merged`` record (type set, numeric interval, string limits, array and object specs).
   Every keyword of the draft's vocabulary is either folded in exactly or refused with
   ``SchemaUnsupportedError``; annotations and keywords outside the vocabulary are ignored.
3. **Emit** (``_emit``): each ``_Merged`` becomes IR per JSON type. Subschemas (items,
   property values) are lowered lazily into named rules keyed by the identity of the schema
   objects they intersect, so recursive ``$ref`` becomes a recursive grammar. A finished rule
   that does not refer to itself and whose body equals an earlier rule's is that rule
   (``_Lowering.rule``): subschemas that differ only in annotations share their rules, and
   so, bottom-up, do the members and values above them. A subschema without subschema objects
   or references is looked up by its vocabulary's keywords before it is lowered at all
   (``_Lowering._flat_key``).

Finite alternatives (``enum``/``const``) are emitted as the listed values that validate
against the *whole* conjunction at that location, checked with ``jsonschema`` itself; so they
are exact whatever other keywords sit beside them.

``oneOf`` is emitted as ``U_i U_{a in B_i} (a and not B_j for j != i)``, where only the
alternatives of ``B_j`` that may overlap ``a`` are negated (through ``_negate``, or refused
there): the others are provably disjoint from it (``emptiness``: type sets, numeric intervals,
counts, a required property whose value schemas cannot meet, say a ``const`` tag or a key that
another branch forbids or patterns force to ``null``). So a discriminated union is a plain
union. Finite alternatives are checked against the whole schema when emitted; in other branches
their values are excluded.

Products of DNFs drop provably empty alternatives and refuse past ``max_alternatives``.
Synthetic schema objects (complements, dependencies) are interned by content
(``_Lowering.interned``), so the identity memo also closes recursion under complements.

Arrays with ``contains``/``uniqueItems`` and all objects are small automata over members
(``arrays._CountingArray``, ``objects._ObjectBuilder``; the records they share are in
``model``); a string constraint beyond plain length is a
``CharDFA`` emitted as one ``Decoding`` leaf (the compiler makes the whole string one DFA
terminal, read from the automaton itself), or for a very large automaton as a regular
expression over JSON character encodings or one right-linear rule per state
(``_dfa_rules``). A large ``maxLength`` beside such a constraint is not folded into the automaton (the product keeps ``maxLength + 1``
copies of it) but wraps its rule in ``Capped``: one terminal whose characters the matcher
counts (``_string``, ``JsonSchemaOptions.max_length_product``).
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from types import FrameType, MappingProxyType
from typing import Any

import jsonschema
import referencing
import referencing.exceptions
import referencing.jsonschema

from grammarsd.errors import (
    GrammarError,
    GrammarSyntaxError,
    GrammarTooLargeError,
    SchemaUnsupportedError,
)
from grammarsd.grammar.automata import CharDFA
from grammarsd.grammar.ir import (
    ANY_CHAR,
    DEAD_CLASS,
    EMPTY,
    NOTHING,
    Capped,
    CharClass,
    Choice,
    Decoding,
    Excluding,
    Expr,
    Grammar,
    Literal,
    Ref,
    Repeat,
    Seq,
    WhitespaceGaps,
    capped,
    char_set,
    choice,
    lit,
    node_facts,
    ref_names,
    repeat,
    seq,
)
from grammarsd.grammar.json_schema import numbers as num
from grammarsd.grammar.json_schema.arrays import _CountingArray
from grammarsd.grammar.json_schema.emptiness import Signature, _Emptiness, disjoint
from grammarsd.grammar.json_schema.formats import (
    KNOWN_FORMATS,
    SUBSET_FORMATS,
    format_dfa,
    format_expr,
    format_lengths,
)
from grammarsd.grammar.json_schema.model import (
    _TYPE_NAMES,
    _TYPES,
    _Alt,
    _ArraySpec,
    _escape_pointer,
    _Merged,
    _Node,
    _ObjectSpec,
    _type_of,
    _value_key,
    _Witness,
)
from grammarsd.grammar.json_schema.objects import _ObjectBuilder
from grammarsd.grammar.json_schema.options import JsonSchemaOptions
from grammarsd.grammar.json_schema.strings import (
    encode_chars,
    encode_class,
    encode_text,
    string_literal,
    strings_excluding,
)
from grammarsd.grammar.regex import parse_regex_search

# --------------------------------------------------------------------------- vocabulary

_BASE4 = {
    "type", "enum", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "items", "additionalItems", "maxItems", "minItems",
    "uniqueItems", "maxProperties", "minProperties", "required", "properties",
    "patternProperties", "additionalProperties", "dependencies", "allOf", "anyOf", "oneOf", "not",
    "format", "$ref",
}
_DRAFT6 = _BASE4 | {"const", "contains", "propertyNames"}
_DRAFT7 = _DRAFT6 | {"if", "then", "else"}
_DRAFT2019 = (_DRAFT7 - {"dependencies"}) | {
    "dependentRequired", "dependentSchemas", "maxContains", "minContains", "unevaluatedItems",
    "unevaluatedProperties", "$recursiveRef",
}
_DRAFT2020 = (_DRAFT2019 - {"additionalItems", "$recursiveRef"}) | {"prefixItems", "$dynamicRef"}


@dataclass(frozen=True)
class Draft:
    """One JSON Schema dialect: its vocabulary, validator and referencing specification."""

    name: str
    year: int  # 4, 6, 7, 2019, 2020
    vocabulary: frozenset[str]
    validator: Any  # the jsonschema Validator class
    spec: referencing.Specification[Any]


def _schema_subresources(spec: referencing.Specification[Any]) -> referencing.Specification[Any]:
    """``spec`` crawling only subresources that are schemas: ``referencing`` reads every value of
    draft 4-7 ``dependencies`` as one, and fails on the array form (``{"a": ["b"]}``)."""
    def subresources_of(contents: Any) -> Iterator[Any]:
        return (sub for sub in spec.subresources_of(contents) if isinstance(sub, (dict, bool)))

    return referencing.Specification(  # type: ignore[call-arg]  # attrs-made __init__
        name=spec.name, id_of=spec.id_of, subresources_of=subresources_of,
        anchors_in=lambda _, contents: spec.anchors_in(contents),
        maybe_in_subresource=spec.maybe_in_subresource)


DRAFTS: dict[str, Draft] = {
    "http://json-schema.org/draft-04/schema": Draft(
        "draft4", 4, frozenset(_BASE4), jsonschema.Draft4Validator, _schema_subresources(referencing.jsonschema.DRAFT4)),
    "http://json-schema.org/draft-06/schema": Draft(
        "draft6", 6, frozenset(_DRAFT6), jsonschema.Draft6Validator,
        _schema_subresources(referencing.jsonschema.DRAFT6)),
    "http://json-schema.org/draft-07/schema": Draft(
        "draft7", 7, frozenset(_DRAFT7), jsonschema.Draft7Validator,
        _schema_subresources(referencing.jsonschema.DRAFT7)),
    "https://json-schema.org/draft/2019-09/schema": Draft(
        "draft2019-09", 2019, frozenset(_DRAFT2019), jsonschema.Draft201909Validator,
        referencing.jsonschema.DRAFT201909),
    "https://json-schema.org/draft/2020-12/schema": Draft(
        "draft2020-12", 2020, frozenset(_DRAFT2020), jsonschema.Draft202012Validator,
        referencing.jsonschema.DRAFT202012),
}

_REFERENCES = {"$ref", "$dynamicRef", "$recursiveRef"}
# Applicators handled by expansion; everything else in a vocabulary is an assertion for _merge.
_APPLICATORS = _REFERENCES | {"allOf", "anyOf", "oneOf", "not", "if", "then", "else",
                              "dependentSchemas"}
_WS = char_set(" \t\n\r")
_WS_RULE = "ws"
_CHAR = Ref("char")  # the rule for one JSON-encoded character of a string
#: Up to this many keys, an object in enum/const is accepted in any key order (any_order=True
#: or "auto").
_MAX_PERMUTED_KEYS = 5
_MAX_REF_CHAIN = 100  # schemas that are only a ``$ref``, followed in a row
# A string constraint's automaton becomes a regular expression (one terminal) while state
# elimination stays within these bounds (IR nodes before JSON encoding, nesting depth);
# otherwise right-linear rules (see ``_Lowering._dfa_rules``).
_REGEX_SIZE = 400
_REGEX_DEPTH = 60
# A string constraint's automaton up to this many states is one ``Decoding`` leaf (one
# terminal, read from the automaton); a bigger one is spelled as IR, which the compiler may
# keep in the parser rather than build a DFA of hundreds of thousands of byte states.
_DECODING_STATES = 4096
# A maxLength below this is always folded into the string automaton (a small cap is close to
# every token's length, so the matcher would count at every step).
_CAP_MIN_LENGTH = 32
# Number automata (residues) are strongly connected: state elimination beyond this many states
# only spends time before hitting the bounds above.
_REGEX_NUMBER_STATES = 48
_PRUNE_PAST = 64  # products past this many alternatives drop the provably empty ones (``_empty``)
# Private keywords of synthetic schemas (NUL-prefixed: no user schema can collide).
_TYPES_KW = "\x00types"  # the internal type set, e.g. ["frac"]
_EXCLUDED_KW = "\x00excluded"  # values removed
_LO_KW, _HI_KW = "\x00lo", "\x00hi"  # (Decimal bound, strict)
_NOT_PATTERN_KW = "\x00notPattern"  # strings the pattern does not match
_NOT_FORMAT_KW = "\x00notFormat"  # strings not of the (enforced) format
_NOT_MULTIPLE_KW = "\x00notMultipleOf"  # numbers that are not multiples of the value
_SOME_ITEM_KW = "\x00someItemFails"  # a _Node: some item is not valid against it
_WITNESS_KW = "\x00witness"  # a _Witness: some member has such a key and such a value
_PRIVATE_KEYWORDS = (_TYPES_KW, _EXCLUDED_KW, _LO_KW, _HI_KW, _NOT_PATTERN_KW, _NOT_FORMAT_KW,
                     _NOT_MULTIPLE_KW, _SOME_ITEM_KW, _WITNESS_KW)
_COUNTS = {"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"}
_ITEM_KEYWORDS = ("items", "prefixItems", "additionalItems")
_OBJECT_KEYWORDS = ("properties", "patternProperties", "additionalProperties")


# --------------------------------------------------------------------------- layout


class _Layout:
    """Punctuation with whitespace, per nesting level (levels matter only for ``indent``).
    Each piece is made once per compilation and handed out again (every member asks for the
    colon; a piece's node then keeps its hash and facts for all of them)."""

    def __init__(self, options: JsonSchemaOptions) -> None:
        self.options = options
        self.ws: Expr = EMPTY
        if options.whitespace == "flexible" and options.max_whitespace != 0:
            self.ws = Ref(_WS_RULE)
        self._colon = lit(": ") if options.whitespace == "indent" else seq(
            self.ws, lit(":"), self.ws)
        self._made: dict[tuple[str, str, int], Expr] = {}

    def _once(self, kind: str, text: str, level: int, make: Callable[[], Expr]) -> Expr:
        key = (kind, text, level)
        made = self._made.get(key)
        if made is None:
            made = self._made[key] = make()
        return made

    def rules(self) -> dict[str, Expr]:
        if self.ws == EMPTY:
            return {}
        return {_WS_RULE: repeat(_WS, 0, self.options.max_whitespace)}

    def child_level(self, level: int) -> int:
        return level + 1 if self.options.whitespace == "indent" else 0

    def _newline(self, level: int) -> Expr:
        return lit("\n" + " " * ((self.options.indent or 0) * level))

    def open(self, bracket: str, level: int) -> Expr:
        if self.options.whitespace == "indent":
            return self._once("open", bracket, level,
                              lambda: seq(lit(bracket), self._newline(level + 1)))
        return self._once("open", bracket, 0, lambda: seq(lit(bracket), self.ws))

    def close(self, bracket: str, level: int) -> Expr:
        if self.options.whitespace == "indent":
            return self._once("close", bracket, level,
                              lambda: seq(self._newline(level), lit(bracket)))
        return self._once("close", bracket, 0, lambda: seq(self.ws, lit(bracket)))

    def empty(self, brackets: str) -> Expr:
        if self.options.whitespace == "indent":
            return lit(brackets)
        return self._once("empty", brackets, 0,
                          lambda: seq(lit(brackets[0]), self.ws, lit(brackets[1])))

    def comma(self, level: int) -> Expr:
        if self.options.whitespace == "indent":
            return self._once("comma", ",", level,
                              lambda: seq(lit(","), self._newline(level + 1)))
        return self._once("comma", ",", 0, lambda: seq(self.ws, lit(","), self.ws))

    def colon(self) -> Expr:
        return self._colon


def whitespace_gaps(options: JsonSchemaOptions) -> WhitespaceGaps | None:
    """The ``WhitespaceGaps`` of the grammars ``options`` lay out, if their gaps are bounded.

    ``_Layout`` keeps the promise: a gap sits between two tokens (``empty`` spells ``[ ]`` with
    one gap, not ``open`` then ``close``), and values start and end with a token."""
    bound = options.max_whitespace
    if options.whitespace != "flexible" or not bound:
        return None
    return WhitespaceGaps(_WS_RULE, bound)


# --------------------------------------------------------------------------- lowering


_FRAMES_PER_LEVEL = 12  # Python frames between a value's ``_Lowering.value`` and a member's (9)
# and the calls a level makes: subschemas nested past the stack this leaves are refused
# (``recursion_refused``) before the stack runs out inside ``referencing``'s extension code,
# which turns a ``RecursionError`` into a panic


def _stack_depth() -> int:
    depth = 0
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    return depth


class _Lowering:
    """One compilation: rules so far, memo of lowered conjunctions, the draft and registry."""

    def __init__(self, root: Any, draft: Draft, options: JsonSchemaOptions,
                 registry: referencing.Registry[Any], names: str = "") -> None:
        self.draft = draft
        self.options = options
        self.layout = _Layout(options)
        resource = draft.spec.create_resource(root)
        base = resource.id() or ""
        self.registry = registry.with_resource(base, resource)
        if len(registry) or _names_resources(root):  # (else crawling would find nothing)
            self.registry = self.registry.crawl()
        self.root = _Node(root, self.registry.resolver(base_uri=base), "")
        self.rules: dict[str, Expr] = dict(self.layout.rules())
        self.rules[_CHAR.name] = encode_class(ANY_CHAR)
        # The reference to the rule of each lowered conjunction, automaton or format: one
        # ``Ref`` object per rule, so walks that keep answers on nodes look at it once.
        self._memo: dict[tuple[Any, ...], Ref] = {}
        # Finished rules by body (``rule``), and the value rules being written, each with
        # whether it was met again while being written (then its body may refer to itself).
        self._by_body: dict[Expr, Ref] = {}
        self._open: dict[str, bool] = {}
        self._flat: dict[tuple[Any, int], Ref] = {}  # value rules by ``_flat_key``
        self.objects: dict[tuple[Any, ...], Expr] = {}  # ``objects._ObjectBuilder.build``
        # Memo keys hold ids of schema objects; synthetic ones must outlive the compilation
        # so an id is never reused by another object.
        self._keepalive: list[tuple[_Node, ...]] = []
        # Synthetic schema objects by content (see ``interned``).
        self._interned: dict[tuple[Any, ...], dict[str, Any]] = {}
        # ``deref``'s targets by (resolver, keyword, reference): a resolver's answer is a
        # function of it and the reference, and nodes below one resource share its resolver
        self._targets: dict[tuple[int, str, str], tuple[Any, _Node]] = {}
        self._counter = 0
        self._names = names  # prefix of rule names: set only by ``_anything``'s own lowering
        self.shared: set[str] = set()  # the rules ``_anything`` gave (``Grammar.shared``)
        self.emptiness = _Emptiness(self)
        self._levels_left = (sys.getrecursionlimit() - _stack_depth()) // _FRAMES_PER_LEVEL

    # ------------------------------------------------------------------ helpers

    def refuse(self, keyword: str, pointer: str, reason: str) -> SchemaUnsupportedError:
        return SchemaUnsupportedError(keyword, pointer=pointer, reason=reason)

    def _name(self, prefix: str) -> str:
        self._counter += 1
        return f"{self._names}{prefix}{self._counter}"

    def child(self, node: _Node, *path: str | int) -> _Node:
        """The subschema at ``path`` under ``node``, entering its base URI if it has ``$id``."""
        schema = node.schema
        pointer = node.pointer
        for step in path:
            schema = schema[step]
            pointer += "/" + _escape_pointer(str(step))
        resolver = node.resolver
        if isinstance(schema, dict) and ("$id" in schema or "id" in schema):  # (draft 4: id)
            resource = self.draft.spec.create_resource(schema)
            if resource.id() is not None:
                resolver = resolver.in_subresource(resource)
        return _Node(schema, resolver, pointer)

    def deref(self, node: _Node, keyword: str = "$ref") -> _Node:
        ref = node.schema[keyword]
        key = (id(node.resolver), keyword, ref)
        hit = self._targets.get(key)
        if hit is not None:
            return hit[1]
        try:
            resolved = node.resolver.lookup(ref)
        except referencing.exceptions.Unresolvable as exc:
            raise self.refuse(keyword, node.pointer + "/" + keyword,
                              f"cannot resolve {ref!r} (remote references need a registry): "
                              f"{exc}") from None
        pointer = ref if ref.startswith("#") else f"{ref}"
        target = _Node(resolved.contents, resolved.resolver, pointer.lstrip("#"))
        self._targets[key] = (node.resolver, target)  # (the resolver kept: its id stays its)
        return target

    def peel(self, node: _Node) -> _Node:
        """Follow ``$ref`` through schemas that are nothing else (so memo keys are shared)."""
        seen = {id(node.schema)}
        vocab = self.draft.vocabulary
        while isinstance(node.schema, dict) and "$ref" in node.schema and (
            self.draft.year <= 7 or not (set(node.schema) & vocab) - {"$ref"}
        ):
            node = self.deref(node)
            if id(node.schema) in seen:
                raise self.refuse("$ref", node.pointer, "a cycle of $ref with no schema on it")
            seen.add(id(node.schema))
            if len(seen) > _MAX_REF_CHAIN:
                raise self.refuse("$ref", node.pointer,
                                  f"a chain of more than {_MAX_REF_CHAIN} $ref")
        return node

    def interned(self, schema: dict[str, Any]) -> dict[str, Any]:
        """The one object of this compilation with the content of the synthetic ``schema``.

        Complements and dependencies build schema objects (and property maps) on the fly, and
        memo keys are schema identities: without interning, a recursive ``$ref`` under a
        complement would be lowered anew at every level and never close. Invariant: dicts
        nested in ``schema`` are user schema objects or were interned first (both are compared
        by identity); lists are compared by content.
        """
        return self._interned.setdefault(_structure(schema), schema)

    def negation(self, node: _Node) -> _Node:
        """The complement of ``node``'s schema, at its place (interned)."""
        return _Node(self.interned({"not": node.schema}), node.resolver, node.pointer)

    def validator(self, node: _Node, schema: Any = None) -> Any:
        """A validator of ``node``'s schema (or of ``schema`` in its place)."""
        # ``_resolver`` keeps the node's base URI for relative $ref (private in jsonschema).
        return self.draft.validator(
            node.schema if schema is None else schema, registry=self.registry,
            _resolver=node.resolver, format_checker=self.draft.validator.FORMAT_CHECKER)

    def is_valid(self, value: Any, nodes: tuple[_Node, ...]) -> bool:
        return all(self.validator(n).is_valid(value) for n in nodes)

    def listed(self, values: list[Any], nodes: tuple[_Node, ...]) -> list[Any]:
        """Those of ``values`` valid against every node, where ``values`` come from ``_merge``
        of every node's expansion: members of each node's own ``enum``/``const`` already. The
        check leaves those two out, as ``jsonschema`` would scan the whole enum for each value
        (20k values: 20 s); nested ones (``allOf``, ``$ref``) are checked as they are."""
        own = ("enum", "const")
        checks = [self.validator(n, {k: v for k, v in n.schema.items() if k not in own})
                  for n in nodes]
        return [v for v in values if all(c.is_valid(v) for c in checks)]

    # ------------------------------------------------------------------ entry points

    def grammar(self) -> Grammar:
        start = self.value((self.root,), 0)
        rules = _prune({"start": start, **self.rules})
        return Grammar(rules, start="start", shared=frozenset(self.shared.intersection(rules)))

    def value(self, nodes: tuple[_Node, ...], level: int) -> Expr:
        """A rule for JSON values valid against every schema in ``nodes`` (at ``level``)."""
        nodes = tuple(self.peel(n) for n in nodes)
        nodes = tuple({id(n.schema): n for n in nodes  # a conjunction: each schema once
                       if n.schema is not True and n.schema != {}}.values())
        if any(n.schema is False for n in nodes):
            return NOTHING
        if self.options.whitespace == "indent" and level > self.options.max_depth:
            return NOTHING
        # A schema object's base URI is fixed by where it sits, so its identity is the key.
        key = (tuple(sorted({id(n.schema) for n in nodes})), level)
        hit = self._memo.get(key)
        if hit is not None:
            if hit.name in self._open:
                self._open[hit.name] = True
            return hit
        flat = self._flat_key(nodes, level)
        if flat is not None:
            hit = self._flat.get(flat)
            if hit is not None:
                self._memo[key] = hit
                return hit
        if not nodes and not self._names:  # any value: its rules are shared (``_anything``)
            hit, rules, shared = _anything(self.options, level)
            self.rules.update(rules)
            self.shared.update(shared)
            self._memo[key] = hit
            return hit
        if self._levels_left == 0:  # out of stack before any call (into ``referencing``'s
            raise RecursionError  # extension code, say) meets it: see ``_FRAMES_PER_LEVEL``
        name = self._name("value")
        ref = self._memo[key] = Ref(name)
        self._keepalive.append(nodes)
        self.rules[name] = NOTHING  # placeholder while recursing
        self._open[name] = False
        self._levels_left -= 1
        try:
            alternatives = [()] if not nodes else self._product(
                [self._expand(n, ()) for n in nodes], nodes[0].pointer, "allOf")
            body = choice(*(self._emit(self._merge(alt), nodes, level) for alt in alternatives))
        finally:
            self._levels_left += 1
            recursive = self._open.pop(name)
        if recursive:
            self.rules[name] = body
            return ref
        del self.rules[name]
        ref = self._memo[key] = self.rule("value", body, name)
        if flat is not None:
            self._flat[flat] = ref
        return ref

    def _flat_key(self, nodes: tuple[_Node, ...], level: int) -> tuple[Any, int] | None:
        """A key by content for one schema without subschema objects or references: it means
        its vocabulary's keywords wherever it sits, so equal ones (which differ in annotations,
        say) are lowered once. ``None`` for any other conjunction."""
        if len(nodes) != 1 or not isinstance(nodes[0].schema, dict):
            return None
        vocabulary = self.draft.vocabulary
        kept = {}
        for keyword, value in nodes[0].schema.items():
            if keyword in vocabulary:
                if keyword in _REFERENCES or isinstance(value, dict) or (
                        isinstance(value, list)
                        and any(isinstance(v, (dict, list)) for v in value)):
                    return None
                kept[keyword] = value
            elif isinstance(keyword, str) and keyword.startswith("\x00"):  # a synthetic
                # schema's private keyword
                return None
        key = _structure(kept)  # (scalars tagged by type: 1, 1.0 and true stay apart)
        try:
            hash(key)
        except TypeError:  # a value that is no JSON (an unhashable object): no key
            return None
        return key, level

    def rule(self, prefix: str, body: Expr, name: str | None = None) -> Ref:
        """The rule ``name`` (by default a new ``prefix<n>``) for the finished ``body``, or
        the rule of an equal body made before: equal subschemas (which differ in annotations,
        say) then lower to one rule, and so do the members and values above them, bottom-up."""
        hit = self._by_body.get(body)
        if hit is None:
            hit = self._by_body[body] = Ref(self._name(prefix) if name is None else name)
            self.rules[hit.name] = body
        return hit

    # ------------------------------------------------------------------ expansion

    def _product(self, factors: list[list[_Alt]], pointer: str, keyword: str,
                 names: list[str] | None = None) -> list[_Alt]:
        """The DNF of a conjunction of DNFs. Past ``_PRUNE_PAST`` (or ``max_alternatives``),
        provably empty alternatives are dropped (``_empty``); if still past ``max_alternatives``,
        refused, naming ``keyword`` at ``pointer``, or with ``names`` (one per factor: the
        keyword it comes from) the factor that took it past, at ``pointer/name``."""
        out: list[_Alt] = [()]
        prune_past = min(self.options.max_alternatives, _PRUNE_PAST)
        for i, factor in enumerate(factors):
            out = [_conjoin(a, b) for a in out for b in factor]
            if len(out) > prune_past:
                out = [alt for alt in out if not self._empty(alt)]
            if len(out) > self.options.max_alternatives:
                if names is not None:
                    keyword, pointer = names[i], f"{pointer}/{names[i]}"
                raise self.refuse(keyword, pointer, "too many combinations of alternatives "
                                  f"(> {self.options.max_alternatives})")
        return out

    def _signature(self, merged: _Merged) -> Signature | None:
        """The ``emptiness.Signature`` of a merged conjunction (None: not found here)."""
        try:
            return self.emptiness.signature(merged)
        except SchemaUnsupportedError:  # raised again if the alternative is ever emitted
            return None

    @staticmethod
    def _disjoint(a: Signature | None, b: Signature | None) -> bool:
        return a is not None and b is not None and disjoint(a, b)

    def _empty(self, alt: _Alt) -> bool:
        """Whether the conjunction ``alt`` provably has no instance (``emptiness``)."""
        if any(node.schema is False for node in alt):
            return True
        try:
            return self.emptiness.empty(self._merge(alt))
        except SchemaUnsupportedError:  # raised again if the alternative is ever emitted
            return False

    def _expand(self, node: _Node, stack: tuple[int, ...]) -> list[_Alt]:
        """The DNF of ``node``: a list of conjunctions of atoms (see the module docstring)."""
        s = node.schema
        if s is True:
            return [()]
        if s is False:
            return []
        if id(s) in stack:
            raise self.refuse("$ref", node.pointer, "a schema applies itself without consuming "
                              "input (infinite loop)")
        stack = stack + (id(s),)
        vocab = self.draft.vocabulary
        if "$ref" in s and self.draft.year <= 7:
            return self._expand(self.deref(node), stack)
        factors: list[list[_Alt]] = [[(node,)]]
        names = [""]  # per factor, the keyword it comes from (the node's own: never past)
        for kw in ("$dynamicRef", "$recursiveRef"):
            if kw in s and kw in vocab:
                raise self.refuse(kw, node.pointer + "/" + kw, "dynamic scope is not supported")
        if "$ref" in s:
            factors.append(self._expand(self.deref(node), stack))
            names.append("$ref")
        if "allOf" in s:
            factors += [self._expand(self.child(node, "allOf", i), stack)
                        for i in range(len(s["allOf"]))]
            names += ["allOf"] * len(s["allOf"])
        if "anyOf" in s:
            factors.append([a for i in range(len(s["anyOf"]))
                            for a in self._expand(self.child(node, "anyOf", i), stack)])
            names.append("anyOf")
        if "oneOf" in s:
            factors.append(self._one_of(node, stack))
            names.append("oneOf")
        if "not" in s:
            inner = self.child(node, "not")
            own = set(inner.schema) & vocab if isinstance(inner.schema, dict) else set()
            if own == {"not"}:
                factors.append(self._expand(self.child(inner, "not"), stack))  # not not S = S
            elif own == {"oneOf"}:
                factors.append(self._not_one_of(inner, stack))
            else:
                factors.append(self._negate(self._expand(inner, stack), "not"))
            names.append("not")
        if "if" in s and "if" in vocab and ("then" in s or "else" in s):
            cond = self._expand(self.child(node, "if"), stack)
            then: list[_Alt] = (self._expand(self.child(node, "then"), stack) if "then" in s
                                else [()])
            other: list[_Alt] = (self._expand(self.child(node, "else"), stack) if "else" in s
                                 else [()])
            factors.append(self._product([cond, then], node.pointer, "then")
                           + self._product([self._negate(cond, "if"), other], node.pointer,
                                           "else"))
            names.append("if")
        dependent = []
        if "dependentSchemas" in s and "dependentSchemas" in vocab:
            dependent = [(k, ("dependentSchemas", k)) for k in s["dependentSchemas"]]
        if "dependencies" in s and "dependencies" in vocab:
            dependent = [(k, ("dependencies", k)) for k, v in s["dependencies"].items()
                         if not isinstance(v, list)]
        for key, path in dependent:
            absent = _Node(self.interned({"properties": self.interned({key: False})}),
                           node.resolver, node.pointer)
            present = _Node(self.interned({"required": [key]}), node.resolver, node.pointer)
            sub = self._expand(self.child(node, *path), stack)
            factors.append([(absent,)] + self._product([[(present,)], sub], node.pointer,
                                                       path[0]))
            names.append(path[0])
        return self._product(factors, node.pointer, "allOf", names)

    def _one_of(self, node: _Node, stack: tuple[int, ...]) -> list[_Alt]:
        """``oneOf``: ``U_i U_{a in B_i} (a & not B_j for j != i)``, complements pushed down (or
        refused). Only alternatives ``b`` of ``B_j`` that may overlap ``a`` are negated: for
        the others (``_empty(node & a & b)``) ``a`` implies ``not b``, so a discriminated
        union is a plain union. Pairs their signatures already separate (``emptiness.disjoint``:
        a tool union's ``name`` consts) skip that merge: n tools take n merges, not n^2. A
        finite alternative ``a`` needs no complement (its values are checked against the whole
        schema by ``jsonschema`` when emitted); a finite ``b`` is negated by excluding the
        values of ``B_j``'s finite alternatives that satisfy ``B_j``."""
        count = len(node.schema["oneOf"])
        branches = [self._expand(self.child(node, "oneOf", i), stack) for i in range(count)]
        values: list[list[Any]] = []  # per branch: its finite alternatives' members
        finite: set[int] = set()
        merged: dict[int, _Merged] = {}  # each alternative with ``node``, merged once
        for i, branch in enumerate(branches):
            values.append([])
            for alt in branch:
                merged[id(alt)] = self._merge((node, *alt))
                listed = merged[id(alt)].values
                if listed is not None:
                    finite.add(id(alt))
                    values[i] += self.listed(listed, (self.child(node, "oneOf", i),))
        signatures = {id(alt): self._signature(merged[id(alt)])
                      for branch in branches for alt in branch if id(alt) not in finite}
        out: list[_Alt] = []
        for i, branch in enumerate(branches):
            for a in branch:
                if id(a) in finite:
                    out += self._product([[a]], node.pointer + "/oneOf", "oneOf")
                    continue
                factors = [[a]]
                types = merged[id(a)].types
                mine = signatures[id(a)]
                for j in range(count):
                    others = [b for b in branches[j] if j != i and id(b) not in finite
                              and not self._disjoint(mine, signatures[id(b)])
                              and not self._empty(_conjoin((node, *a), b))]
                    if others:
                        factors.append(self._negate(others, "oneOf"))
                    gone = [v for v in values[j] if j != i and _type_of(v) in types]
                    if gone:
                        factors.append([(_Node(self.interned({_EXCLUDED_KW: gone}),
                                               node.resolver, f"{node.pointer}/oneOf/{j}"),)])
                out += self._product(factors, node.pointer + "/oneOf", "oneOf")
        return out

    def _not_one_of(self, node: _Node, stack: tuple[int, ...]) -> list[_Alt]:
        """``not: {oneOf: [B_1..B_n]}`` as ``(not B_1 and .. and not B_n) or U_i<j (B_i and B_j)``
        (none or at least two branches hold), much smaller than negating the ``oneOf`` DNF."""
        branches = [self._expand(self.child(node, "oneOf", i), stack)
                    for i in range(len(node.schema["oneOf"]))]
        pointer = node.pointer + "/oneOf"
        out = self._product([self._negate(b, "not") for b in branches], pointer, "not")
        for a, b in itertools.combinations(branches, 2):
            out += self._product([a, b], pointer, "not")
        return out

    # ------------------------------------------------------------------ complements

    def _negate(self, alternatives: list[_Alt], context: str) -> list[_Alt]:
        """The DNF of the complement of a DNF: ``and`` over alternatives of ``or`` over atoms."""
        out: list[_Alt] = [()]
        for alt in alternatives:
            union = [neg for atom in alt for neg in self._negate_atom(atom, context)]
            out = self._product([out, union], alt[0].pointer if alt else "", context)
        return out

    def _negate_atom(self, node: _Node, context: str) -> list[_Alt]:
        """Instances failing some assertion keyword of ``node`` (applicators are other atoms)."""
        s = node.schema
        if s is True or s is False:
            return [] if s is True else [()]
        out: list[_Alt] = []
        for kw, value in s.items():
            # a private keyword stands for the public one at the end of its node's pointer
            at = node.pointer.rsplit("/", 1)[0] if kw in _PRIVATE_KEYWORDS else (
                f"{node.pointer}/{kw}")
            for synthetic in self._negate_keyword(node, kw, value, context):
                out.append((_Node(self.interned(synthetic), node.resolver, at),))
        return out

    def _negate_keyword(self, node: _Node, kw: str, value: Any, context: str
                        ) -> list[dict[str, Any]]:
        """Synthetic schemas whose union is the complement of the single keyword ``kw``."""
        s = node.schema
        numbers, strings = {_TYPES_KW: ["int", "frac"]}, {_TYPES_KW: ["string"]}
        arrays, objects = {_TYPES_KW: ["array"]}, {_TYPES_KW: ["object"]}
        if kw == _TYPES_KW:
            return [{_TYPES_KW: sorted(_TYPES - set(value))}]
        if kw == _EXCLUDED_KW:
            return [{"enum": value}]
        if kw in (_LO_KW, _HI_KW):
            flip = _HI_KW if kw == _LO_KW else _LO_KW
            return [{**numbers, flip: (value[0], not value[1])}]
        if kw == _NOT_PATTERN_KW:
            return [{**strings, "pattern": value}]
        if kw == _NOT_FORMAT_KW:
            return [{**strings, "format": value}]
        if kw == _NOT_MULTIPLE_KW:
            return [{**numbers, "multipleOf": value}]
        if kw in (_SOME_ITEM_KW, _WITNESS_KW):
            keyword = "items" if kw == _SOME_ITEM_KW else value.keyword
            raise self.refuse(keyword, node.pointer, f"cannot take the complement of the "
                              f"complement of {keyword!r} (needed by {context})")
        if kw not in self.draft.vocabulary or kw in _APPLICATORS or kw in (
                "minContains", "maxContains"):
            return []
        if kw == "format" and (self.options.formats == "ignore" or value not in KNOWN_FORMATS):
            return []
        at = f"{node.pointer}/{kw}"
        if kw == "format":
            if format_expr(value) is None or value in SUBSET_FORMATS:
                raise self.refuse(kw, at, f"format {value!r} is not enforced exactly, so its "
                                  f"complement (needed by {context}) cannot be")
            return [{**strings, _NOT_FORMAT_KW: value}]
        if kw == "multipleOf":
            return [{**numbers, _NOT_MULTIPLE_KW: value}]
        if kw == "type":
            names = [value] if isinstance(value, str) else value
            allowed = set().union(*(_TYPE_NAMES[t] for t in names)) if names else set()
            return [{_TYPES_KW: sorted(_TYPES - allowed)}]
        if kw in ("enum", "const"):
            return [{_EXCLUDED_KW: list(value) if kw == "enum" else [value]}]
        if kw in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
            if isinstance(value, bool):
                return []  # draft 4 flag: negated together with its minimum/maximum
            strict = kw.startswith("exclusive") or s.get(
                "exclusive" + kw[0].upper() + kw[1:]) is True
            if kw in ("minimum", "exclusiveMinimum"):
                return [{**numbers, _HI_KW: (Decimal(str(value)), not strict)}]
            return [{**numbers, _LO_KW: (Decimal(str(value)), not strict)}]
        if kw in _COUNTS:
            n = int(value)
            kind = {"Length": strings, "Items": arrays, "Properties": objects}[
                kw[3:]]
            if kw.startswith("min"):
                return [] if n == 0 else [{**kind, "max" + kw[3:]: n - 1}]
            return [{**kind, "min" + kw[3:]: n + 1}]
        if kw == "pattern":
            return [{**strings, _NOT_PATTERN_KW: value}]
        if kw == "required":
            return [{**objects, "properties": self.interned({k: False})} for k in value]
        if kw == "properties":
            return [{**objects, "required": [k],
                     "properties": self.interned({k: self.interned({"not": sub})})}
                    for k, sub in value.items() if sub is not True and sub != {}]
        if kw == "additionalProperties":
            if value is True or value == {}:
                return []
            keys = _lengths_dfa(0, None)
            for pat in s.get("patternProperties", {}):
                keys = keys.difference(self.pattern_dfa(pat, f"{node.pointer}/patternProperties",
                                                        "patternProperties"))
            return [{**objects, _WITNESS_KW: _Witness(
                keys, frozenset(s.get("properties", {})), self.negation(self.child(node, kw)), kw)}]
        if kw == "patternProperties":
            return [{**objects, _WITNESS_KW: _Witness(
                self.pattern_dfa(pat, at, kw), frozenset(),
                self.negation(self.child(node, kw, pat)), kw)}
                for pat, sub in value.items() if sub is not True and sub != {}]
        if kw in _ITEM_KEYWORDS:
            return self._negate_items(node, kw, value, context)
        if kw == "uniqueItems" and not value:
            return []
        raise self.refuse(kw, at, f"cannot take the complement of {kw!r} (needed by "
                          f"{context})")

    def _negate_items(self, node: _Node, kw: str, value: Any, context: str
                      ) -> list[dict[str, Any]]:
        """The complement of ``items``/``prefixItems``: some item fails its schema."""
        s = node.schema
        arrays = {_TYPES_KW: ["array"]}
        tuple_kw = "prefixItems" if self.draft.year >= 2020 else "items"
        if kw == tuple_kw and isinstance(value, list):  # item i exists and fails value[i]
            return [{**arrays, "minItems": i + 1,
                     tuple_kw: [True] * i + [self.interned({"not": sub})]}
                    for i, sub in enumerate(value) if sub is not True and sub != {}]
        if kw == "items" and not (self.draft.year >= 2020 and s.get("prefixItems")):
            if value is True or value == {}:
                return []
            return [{**arrays, _SOME_ITEM_KW: self.child(node, "items")}]
        if kw == "additionalItems" and not isinstance(s.get("items"), list):
            return []  # without tuple items, additionalItems does nothing
        raise self.refuse(kw, f"{node.pointer}/{kw}", f"cannot take the complement of {kw!r} "
                          f"after tuple items (needed by {context})")

    # ------------------------------------------------------------------ merging

    def _merge(self, alt: _Alt) -> _Merged:
        m = _Merged()
        for atom in alt:
            self._merge_node(m, atom)
        return m

    def _merge_node(self, m: _Merged, node: _Node) -> None:
        s = node.schema
        if s is True:
            return
        if s is False:
            m.types = set()
            return
        vocab = self.draft.vocabulary
        p = node.pointer
        for kw, value in s.items():
            if kw in _PRIVATE_KEYWORDS:
                self._merge_private(m, kw, value, node)
                continue
            if kw not in vocab or kw in _APPLICATORS:
                continue
            if kw in _COUNTS:
                value = int(value)  # drafts allow 2.0 for 2
            at = f"{p}/{kw}"
            if kw == "type":
                names = [value] if isinstance(value, str) else value
                allowed = set().union(*(_TYPE_NAMES[t] for t in names)) if names else set()
                m.types &= allowed
            elif kw in ("enum", "const"):
                new = list(value) if kw == "enum" else [value]
                if m.values is not None:
                    keys = {_value_key(v) for v in m.values}
                    new = [v for v in new if _value_key(v) in keys]
                m.values = new
            elif kw in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
                self._merge_bound(m, s, kw, value)
            elif kw == "multipleOf":
                q = Fraction(Decimal(str(value)))
                m.multiple_of = q if m.multiple_of is None else _lcm(m.multiple_of, q)
                m.multiple_at = at
            elif kw == "minLength":
                m.min_len = max(m.min_len, value)
            elif kw == "maxLength":
                m.max_len = value if m.max_len is None else min(m.max_len, value)
            elif kw == "pattern":
                m.patterns.append((value, at))
            elif kw == "format":
                if self.options.formats == "assert":
                    m.formats.append((value, at))
            elif kw in ("items", "prefixItems", "additionalItems"):
                if kw == next(k for k in s if k in _ITEM_KEYWORDS and k in vocab):
                    self._merge_items(m, node)  # once per schema, for the whole group
            elif kw == "minItems":
                m.min_items = max(m.min_items, value)
            elif kw == "maxItems":
                m.max_items = value if m.max_items is None else min(m.max_items, value)
            elif kw == "uniqueItems":
                if value:
                    m.unique += (at,)
            elif kw == "contains":
                lo = int(s.get("minContains", 1)) if "minContains" in vocab else 1
                hi = s.get("maxContains") if "maxContains" in vocab else None
                hi = None if hi is None else int(hi)
                m.contains.append((self.child(node, "contains"), lo, hi))
            elif kw in ("minContains", "maxContains"):
                continue  # read with "contains"; without it they do nothing
            elif kw in _OBJECT_KEYWORDS:
                if kw == next(k for k in s if k in _OBJECT_KEYWORDS):
                    self._merge_object(m, node)  # once per schema, for the whole group
            elif kw == "required":
                m.required += [k for k in value if k not in m.required]
            elif kw == "minProperties":
                m.min_props = max(m.min_props, value)
            elif kw == "maxProperties":
                m.max_props = value if m.max_props is None else min(m.max_props, value)
            elif kw in ("dependentRequired", "dependencies"):
                m.dep_required += [(k, list(v)) for k, v in value.items() if isinstance(v, list)]
            elif kw == "propertyNames":
                m.property_names.append(self.child(node, "propertyNames"))
            elif kw in ("unevaluatedItems", "unevaluatedProperties"):
                if value is True or value == {}:
                    continue
                # Without applicators beside it, "unevaluated" means "not matched by the
                # adjacent properties/patternProperties/additionalProperties (prefixItems/items)".
                blockers = set(s) & _APPLICATORS & vocab
                if kw == "unevaluatedItems":
                    blockers |= set(s) & {"contains"}
                if blockers:
                    raise self.refuse(kw, at, "unevaluated* beside " + ", ".join(sorted(
                        blockers)) + " needs annotation tracking across applicators")
                if kw == "unevaluatedProperties" and not set(s) & set(_OBJECT_KEYWORDS):
                    self._merge_object(m, node)
                if kw == "unevaluatedItems" and not set(s) & set(_ITEM_KEYWORDS) & vocab:
                    self._merge_items(m, node)
            else:  # pragma: no cover - the vocabulary tables and this dispatch must agree
                raise self.refuse(kw, at, "keyword not implemented")

    def _merge_private(self, m: _Merged, kw: str, value: Any, node: _Node) -> None:
        """Keywords only synthetic schemas (from complements) carry."""
        if kw == _SOME_ITEM_KW:
            m.contains.append((self.negation(value), 1, None))
        elif kw == _WITNESS_KW:
            m.witnesses.append(value)
        elif kw == _TYPES_KW:
            m.types &= set(value)
        elif kw == _EXCLUDED_KW:
            m.excluded += value
        elif kw == _NOT_PATTERN_KW:
            m.not_patterns.append((value, node.pointer))
        elif kw == _NOT_FORMAT_KW:
            m.not_formats.append((value, node.pointer))
        elif kw == _NOT_MULTIPLE_KW:
            m.not_multiples.append((Fraction(Decimal(str(value))), node.pointer))
        else:
            bound, strict = value
            self._merge_bound(m, {}, "exclusiveMinimum" if kw == _LO_KW and strict else
                              "minimum" if kw == _LO_KW else
                              "exclusiveMaximum" if strict else "maximum", bound)

    def _merge_bound(self, m: _Merged, s: dict[str, Any], kw: str, value: Any) -> None:
        if isinstance(value, bool):  # draft 4: a flag on minimum/maximum
            return
        bound = Decimal(str(value))
        strict = kw.startswith("exclusive")
        if kw in ("minimum", "exclusiveMinimum"):
            if kw == "minimum" and s.get("exclusiveMinimum") is True:
                strict = True
            if m.lo is None or bound > m.lo or (bound == m.lo and strict):
                m.lo, m.lo_strict = bound, strict
        else:
            if kw == "maximum" and s.get("exclusiveMaximum") is True:
                strict = True
            if m.hi is None or bound < m.hi or (bound == m.hi and strict):
                m.hi, m.hi_strict = bound, strict

    def _merge_items(self, m: _Merged, node: _Node) -> None:
        s = node.schema
        if self.draft.year >= 2020:
            prefix = [self.child(node, "prefixItems", i) for i in range(len(s.get("prefixItems",
                                                                                   [])))]
            rest = self.child(node, "items") if "items" in s else None
        elif isinstance(s.get("items"), list):
            prefix = [self.child(node, "items", i) for i in range(len(s["items"]))]
            rest = self.child(node, "additionalItems") if "additionalItems" in s else None
        else:
            prefix = []
            rest = self.child(node, "items") if "items" in s else None
        if rest is None and "unevaluatedItems" in s and "unevaluatedItems" in self.draft.vocabulary:
            rest = self.child(node, "unevaluatedItems")  # applicators beside it are refused
        m.arrays.append(_ArraySpec(prefix, rest))

    def _merge_object(self, m: _Merged, node: _Node) -> None:
        s = node.schema
        props = {k: self.child(node, "properties", k) for k in s.get("properties", {})}
        patterns = [(pat, self.child(node, "patternProperties", pat))
                    for pat in s.get("patternProperties", {})]
        extra = self.child(node, "additionalProperties") if "additionalProperties" in s else None
        if extra is None and "unevaluatedProperties" in s and (
                "unevaluatedProperties" in self.draft.vocabulary):
            extra = self.child(node, "unevaluatedProperties")  # applicators beside it refused
        m.objects.append(_ObjectSpec(props, patterns, extra))

    # ------------------------------------------------------------------ emission

    def _emit(self, m: _Merged, nodes: tuple[_Node, ...], level: int) -> Expr:
        if not m.types:
            return NOTHING
        if m.values is not None:
            excluded = {_value_key(v) for v in m.excluded}
            kept = [v for v in m.values if _type_of(v) in m.types and _value_key(v) not in excluded]
            return choice(*(self.literal(v, level) for v in self.listed(kept, nodes)))
        parts: list[Expr] = []
        excluded_types = {_type_of(v) for v in m.excluded}
        for t in ("null", "boolean"):
            if t in m.types:
                words = ["null"] if t == "null" else ["true", "false"]
                gone = {json.dumps(v) for v in m.excluded if _type_of(v) == t}
                parts += [lit(w) for w in words if w not in gone]
        if m.types & {"int", "frac"}:
            parts.append(self._number(m))
        if "string" in m.types:
            parts.append(self._string(m))
        if "array" in m.types:
            if "array" in excluded_types:
                raise self.refuse("not", "", "excluding array values is not supported")
            parts.append(self._array(m, level))
        if "object" in m.types:
            if "object" in excluded_types:
                raise self.refuse("not", "", "excluding object values is not supported")
            parts.append(self._object(m, level, nodes[0].pointer if nodes else ""))
        return choice(*parts)

    # numbers --------------------------------------------------------------

    def _number(self, m: _Merged) -> Expr:
        ints = self._integers
        ints_only = "frac" not in m.types
        excluded = sorted(Decimal(str(v)) for v in m.excluded if _type_of(v) in ("int", "frac"))
        bounded = m.lo is not None or m.hi is not None or excluded
        if m.multiple_of is not None or m.not_multiples:
            return self._divisible(m, excluded)
        if "int" not in m.types:  # non-integral numbers only
            if not bounded:
                return ints.nonintegral
            pieces = _split_interval(m.lo, m.lo_strict, m.hi, m.hi_strict, excluded)
            inside = choice(*(num.number_in(lo, ls, hi, hs) for lo, ls, hi, hs in pieces))
            return CharDFA.from_expr(inside).intersect(
                CharDFA.from_expr(ints.nonintegral)).to_expr()
        if not bounded:
            return ints.integer if ints_only else num.NUMBER
        pieces = _split_interval(m.lo, m.lo_strict, m.hi, m.hi_strict, excluded)
        if ints_only:
            return choice(*(num.integer_in(_ceil(lo, ls), _floor(hi, hs), ints.suffix)
                            for lo, ls, hi, hs in pieces))
        return choice(*(num.number_in(lo, ls, hi, hs) for lo, ls, hi, hs in pieces))

    @property
    def _integers(self) -> num.Integers:
        """What ``integer`` means in this draft (``numbers.BY_SPELLING`` for draft 4)."""
        return num.BY_SPELLING if self.draft.year == 4 else num.BY_VALUE

    def _divisible(self, m: _Merged, excluded: list[Decimal]) -> Expr:
        """Numbers of ``m`` with ``multipleOf`` or its complement: the exponent-free numbers
        of its type set and interval (minus excluded values), intersected with one residue
        automaton per divisor (``num.divisibility_dfa``), as one automaton."""
        ints_only, fracs_only = "frac" not in m.types, "int" not in m.types
        q0 = m.multiple_of
        if q0 is not None and any((q0 / q).denominator == 1 for q, _ in m.not_multiples):
            return NOTHING  # every multiple of q0 is a multiple of q
        ints = self._integers
        form = ints.integer if ints_only else (ints.nonintegral if fracs_only
                                               else num.EXPONENT_FREE)
        dfa = CharDFA.from_expr(form)
        if m.lo is not None or m.hi is not None or excluded:
            pieces = _split_interval(m.lo, m.lo_strict, m.hi, m.hi_strict, excluded)
            dfa = dfa.intersect(CharDFA.from_expr(
                choice(*(num.number_in(lo, ls, hi, hs) for lo, ls, hi, hs in pieces))))
        divisors = [(q, at, False) for q, at in m.not_multiples]
        if m.multiple_of is not None:
            divisors.insert(0, (m.multiple_of, m.multiple_at, True))
        limit = self.options.max_number_states
        for q, at, multiple in divisors:
            p, k = num.decimal_step(q)
            if ints_only:  # an integer is a multiple of p / 10**k iff of p / gcd(p, 10**k)
                p, k = p // math.gcd(p, 10**k), 0
            if p * (k + 2) > 8 * limit:  # the construction's size, before minimisation
                raise self.refuse("multipleOf", at, f"multipleOf {float(q)}: its residue "
                                  f"automaton would exceed max_number_states={limit}")
            dfa = dfa.intersect(num.divisibility_dfa(p, k, multiple))
            if dfa.is_empty():
                return NOTHING
            if dfa.num_states > limit:
                raise self.refuse("multipleOf", at, f"multipleOf {float(q)} with the other "
                                  f"number constraints exceeds max_number_states={limit}")
        return self._dfa_rules(dfa, encoded=False)

    # strings --------------------------------------------------------------

    def _string(self, m: _Merged, extra: CharDFA | None = None) -> Expr:
        """Quoted JSON strings whose decoded value meets ``m`` (and is in ``extra``)."""
        excluded = [v for v in m.excluded if isinstance(v, str)]
        formats = self._formats(m)
        if not (m.patterns or m.not_patterns or formats or m.not_formats) and extra is None:
            return seq(lit('"'), strings_excluding(excluded, _CHAR, ANY_CHAR,
                                                   m.min_len, m.max_len), lit('"'))
        if len(formats) == 1 and extra is None and not (m.patterns or m.not_patterns
                                                        or m.not_formats or excluded):
            shortest, longest = format_lengths(formats[0][0])
            if m.min_len <= shortest and (m.max_len is None or (
                    longest is not None and longest <= m.max_len)):  # lengths add nothing
                return seq(lit('"'), self._format_rule(formats[0][0]), lit('"'))
        for pattern, at in m.patterns + m.not_patterns:  # refused here, with its pointer
            self.pattern_dfa(pattern, at, "pattern")
        try:
            dfa, cap = _constrained_dfa(
                m.min_len, m.max_len, tuple(p for p, _ in m.patterns),
                tuple(p for p, _ in m.not_patterns), tuple(name for name, _ in formats),
                tuple(name for name, _ in m.not_formats), tuple(excluded), extra,
                self.options.max_length_product)
        except GrammarTooLargeError as exc:
            keyword, at = next(((kw, at) for kw, items in (
                ("pattern", m.patterns), ("pattern", m.not_patterns), ("format", m.formats),
                ("format", m.not_formats)) for _, at in items), ("pattern", ""))
            raise self.refuse(keyword, at, f"string constraints too large: {exc}") from None
        if cap is not None:
            return seq(lit('"'), capped(self._dfa_rules(dfa), cap), lit('"'))
        return self._dfa_rules(dfa, quoted=True)

    def _dfa_rules(self, dfa: CharDFA, *, encoded: bool = True, quoted: bool = False) -> Expr:
        """The language of ``dfa`` as one shared rule: with ``encoded``, the JSON string
        bodies decoding to its words (between quotes with ``quoted``: the quotes then belong to
        the rule, one terminal with it however big); otherwise its words themselves (say,
        number text).

        Encoded, the rule is one ``Decoding`` leaf, which the compiler lowers to one DFA
        terminal for the whole string, read from the automaton itself. Otherwise (and for an
        automaton past ``_DECODING_STATES``) preferably a regular expression (``CharDFA.to_expr``);
        where state elimination grows past ``_REGEX_SIZE`` or ``_REGEX_DEPTH``, one
        right-linear rule per state instead: ``q: "" (if accepting) | enc(C1) q1 | enc(C2) q2
        ...`` where ``Ci`` is the union of atoms leading to ``qi`` and ``enc`` gives every JSON
        spelling. That is recursive, so the compiler lexes it as a group of rules where it
        fits, else keeps it in the parser (a loop over one-character terminals: slow masks).
        """
        if dfa.is_empty():
            return NOTHING
        key = ("dfa", dfa, encoded, quoted)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        prefix = self._name("str" if encoded else "num")
        if encoded and dfa.num_states <= _DECODING_STATES:
            body = _decoding(dfa, quoted)
        else:
            inner = (_regex_of(dfa, encoded)
                     if encoded or dfa.num_states <= _REGEX_NUMBER_STATES else None)
            if inner is None:
                encode = encode_chars if encoded else _unchanged
                for name, rule in dfa.to_rules(f"{prefix}_").items():
                    self.rules[name] = encode(rule)
                if not quoted:
                    first = self._memo[key] = Ref(f"{prefix}_0")
                    return first
                inner = Ref(f"{prefix}_0")
            body = seq(lit('"'), inner, lit('"')) if quoted else inner
        ref = self._memo[key] = Ref(prefix)
        self.rules[prefix] = body
        return ref

    def _format_rule(self, name: str) -> Expr:
        """A shared rule for the JSON spellings of format ``name`` alone (no DFA needed)."""
        key = ("format", name)
        if key not in self._memo:
            self._memo[key] = Ref(self._name("format"))
            self.rules[self._memo[key].name] = _encoded_format(name)
        return self._memo[key]

    def _formats(self, m: _Merged) -> list[tuple[str, str]]:
        """The enforced formats of ``m`` as (name, pointer) (unknown names skipped)."""
        out = []
        for name, at in m.formats:
            if name not in KNOWN_FORMATS:
                continue  # unknown formats are annotations
            if format_expr(name) is None:
                raise self.refuse("format", at, f"format {name!r} is not enforced")
            out.append((name, at))
        return out

    def pattern_dfa(self, pattern: str, at: str, keyword: str) -> CharDFA:
        """The strings an ECMA-262 ``pattern`` matches somewhere in (search semantics)."""
        try:
            return _search_dfa(pattern)
        except GrammarSyntaxError as exc:  # includes unsupported constructs
            raise self.refuse(keyword, at, f"cannot compile {pattern!r}: "
                              f"{exc.message}") from None
        except GrammarTooLargeError as exc:
            raise self.refuse(keyword, at, f"{pattern!r} is too large: {exc}") from None

    # arrays ----------------------------------------------------------------

    def _item(self, m: _Merged, index: int | None, level: int) -> Expr:
        """Values allowed at ``index`` (``None``: beyond every prefix)."""
        nodes: list[_Node] = []
        for spec in m.arrays:
            if index is not None and index < len(spec.prefix):
                nodes.append(spec.prefix[index])
            elif spec.items is not None:
                nodes.append(spec.items)
        return self.value(tuple(nodes), self.layout.child_level(level))

    def _array(self, m: _Merged, level: int) -> Expr:
        if m.unique and (m.max_items is None or m.max_items > 1) or m.contains:
            return _CountingArray(self, m, level).build()
        lo, hi = m.min_items, m.max_items
        if hi is not None and hi < lo:
            return NOTHING
        width = max((len(s.prefix) for s in m.arrays), default=0)
        comma = self.layout.comma(level)
        tail_item = self._item(m, None, level)
        first = self._item(m, 0, level) if width else tail_item
        # ``rest``: the items from index i on, each preceded by a comma, built from the back
        i = max(1, width if hi is None else min(width, hi))
        listed = [self._item(m, j, level) for j in range(1, i)]
        rest = EMPTY if hi is not None and i >= hi else repeat(
            seq(comma, tail_item), max(0, lo - i), None if hi is None else hi - i)
        while i > 1:
            i -= 1
            more = seq(comma, listed[i - 1], rest)
            rest = more if i < lo else choice(EMPTY, more)
        items = seq(first, rest)
        body = seq(self.layout.open("[", level), items, self.layout.close("]", level))
        if hi == 0:
            body = NOTHING
        return choice(self.layout.empty("[]") if lo == 0 else NOTHING, body)

    # objects ---------------------------------------------------------------

    def _object(self, m: _Merged, level: int, pointer: str) -> Expr:
        return _ObjectBuilder(self, m, level, pointer).build()

    # literals --------------------------------------------------------------

    def literal(self, value: Any, level: int) -> Expr:
        """Every usual spelling of the JSON ``value`` in this layout."""
        lay = self.layout
        if value is None or isinstance(value, bool):
            return lit(json.dumps(value))
        if isinstance(value, (int, float)):
            exact = Decimal(str(value)) if isinstance(value, float) else Decimal(value)
            if exact == exact.to_integral_value():
                spelled = num.integer_in(int(exact), int(exact))
            else:
                spelled = num.number_in(exact, False, exact, False)
            return choice(spelled, lit(json.dumps(value)))
        if isinstance(value, str):
            return string_literal(value)
        inner = lay.child_level(level)
        if isinstance(value, list):
            if not value:
                return lay.empty("[]")
            items = [self.literal(v, inner) for v in value]
            body = [items[0]] + [seq(lay.comma(level), i) for i in items[1:]]
            return seq(lay.open("[", level), *body, lay.close("]", level))
        if not value:
            return lay.empty("{}")
        members = [seq(string_literal(k), lay.colon(), self.literal(v, inner))
                   for k, v in value.items()]
        orders = [members]
        if self.options.any_order is not False and len(members) <= _MAX_PERMUTED_KEYS:
            orders = [list(p) for p in itertools.permutations(members)]
        return choice(*(seq(lay.open("{", level), order[0],
                            *(seq(lay.comma(level), x) for x in order[1:]),
                            lay.close("}", level)) for order in orders))


# --------------------------------------------------------------------------- helpers


@functools.lru_cache(maxsize=64)
def _anything(options: JsonSchemaOptions,
              level: int) -> tuple[Ref, Mapping[str, Expr], frozenset[str]]:
    """The rule for any JSON value at ``level``, the rules it needs, and the names of its own
    among them, lowered once per process and options, as the same expression objects for every
    compile (whose walks keep their answers on the nodes): most objects are open, and lowering
    these rules anew took ~15 % of a small open object's compile. Its own rules are
    ``Grammar.shared``: the compiler lowers them once per process too. The ``any{level}_``
    prefix keeps these names apart from a compile's own (``_name``) and from each level's
    (``indent`` layouts)."""
    draft = DRAFTS["https://json-schema.org/draft/2020-12/schema"]  # reads no keyword
    low = _Lowering(True, draft, options, referencing.Registry(), names=f"any{level}_")
    ref = low.value((), level)
    assert isinstance(ref, Ref)  # (``value`` refuses levels past ``max_depth`` before asking)
    own = frozenset(name for name in low.rules if name.startswith(low._names))
    return ref, MappingProxyType(low.rules), own


@functools.cache
def _encoded_format(name: str) -> Expr:
    """The JSON spellings of format ``name`` (cached: the time formats are large)."""
    expr = format_expr(name)
    assert expr is not None
    return _encode(expr)


@functools.cache  # formats share parts (``date-time`` holds ``time``'s object): encoded once
def _encode(expr: Expr) -> Expr:
    """Map a regular expression over decoded characters to the JSON spellings of its words."""
    if isinstance(expr, CharClass):
        return encode_class(expr)
    if isinstance(expr, Literal):  # the json.dumps spellings (conservative, like named keys)
        return encode_text(expr.text)
    if isinstance(expr, Seq):
        return seq(*map(_encode, expr.items))
    if isinstance(expr, Choice):  # not ``choice``: it would flatten an encoded class (a Choice
        # of its spellings) into this one, and the lexer would no longer read it as one
        # character (a plain ``\\u`` beside tagged characters: the slow, expanding fallback)
        return Choice(tuple(map(_encode, expr.items)))
    if isinstance(expr, Repeat):
        return repeat(_encode(expr.item), expr.min, expr.max)
    raise GrammarError(f"unexpected rule reference in a string language: {expr}")


def _unchanged(expr: Expr) -> Expr:
    return expr


# String constraints recur across schemas (a third of MaskBench-dev's pattern uses repeat one
# met in another schema; ``minLength: 1`` is everywhere), so their automata and expressions are
# kept per process. One expression object also keeps its walks' answers (``ir.kept_on_nodes``,
# ``dfa_cache.fingerprint``) for every grammar holding it.


@functools.lru_cache(maxsize=256)
def _constrained_dfa(min_len: int, max_len: int | None, patterns: tuple[str, ...],
                     not_patterns: tuple[str, ...], formats: tuple[str, ...],
                     not_formats: tuple[str, ...], excluded: tuple[str, ...],
                     extra: CharDFA | None, max_length_product: int
                     ) -> tuple[CharDFA, int | None]:
    """The decoded strings meeting these constraints, as ``(dfa, cap)``: kept per process,
    since a string schema's constraints recur across schemas (a third of MaskBench's
    patterns are met in another schema) and each product of automata is a subset
    construction. ``max_len`` is folded into the automaton (``cap`` None) unless it adds
    nothing or empties it, or it is at least ``_CAP_MIN_LENGTH`` and the product could pass
    ``max_length_product`` states: then the automaton comes back without it and ``cap`` set,
    for the matcher to count (``Capped``). The patterns must compile (``pattern_dfa``)."""
    dfa = _lengths_dfa(min_len, None)
    for pattern in patterns:
        dfa = dfa.intersect(_search_dfa(pattern))
    for pattern in not_patterns:
        dfa = dfa.difference(_search_dfa(pattern))
    for name in formats:
        dfa = dfa.intersect(format_dfa(name))
    for name in not_formats:
        dfa = dfa.difference(format_dfa(name))
    if extra is not None:
        dfa = dfa.intersect(extra)
    if excluded:
        dfa = dfa.difference(CharDFA.from_expr(choice(*(lit(v) for v in excluded))))
    if max_len is None:
        return dfa, None
    lengths = dfa.word_lengths()
    if lengths is None or lengths[0] > max_len:  # no word is short enough
        return CharDFA.empty_language(), None
    if lengths[1] is not None and lengths[1] <= max_len:  # the bound adds nothing
        return dfa, None
    if max_len >= _CAP_MIN_LENGTH and (max_len + 1) * dfa.num_states > max_length_product:
        return dfa, max_len
    return dfa.intersect(_lengths_dfa(0, max_len)), None


@functools.lru_cache(maxsize=256)
def _lengths_dfa(lo: int, hi: int | None) -> CharDFA:
    """The strings of ``lo`` to ``hi`` characters (kept: the same few bounds recur)."""
    return CharDFA.from_expr(repeat(ANY_CHAR, lo, hi))


@functools.lru_cache(maxsize=256)
def _search_dfa(pattern: str) -> CharDFA:
    """The strings an ECMA-262 ``pattern`` matches somewhere in (errors are not kept)."""
    return CharDFA.from_expr(parse_regex_search(pattern, flavor="ecma"))


@functools.lru_cache(maxsize=256)
def _decoding(dfa: CharDFA, quoted: bool) -> Expr:
    """The leaf for ``dfa`` (between quotes if ``quoted``), one object per automaton met again
    (a pattern in many schemas), so the answers of the walks over it are kept on it
    (``ir.kept_on_nodes``)."""
    leaf = Decoding(dfa)
    return seq(lit('"'), leaf, lit('"')) if quoted else leaf


@functools.lru_cache(maxsize=256)
def _regex_of(dfa: CharDFA, encoded: bool) -> Expr | None:
    """``dfa``'s language as one regular expression by state elimination (its JSON spellings
    with ``encoded``), or None past ``_REGEX_SIZE`` or ``_REGEX_DEPTH``: a failed elimination
    costs as much as one that succeeds, so it is kept too."""
    try:
        body = dfa.to_expr(max_size=_REGEX_SIZE, max_depth=_REGEX_DEPTH)
    except GrammarTooLargeError:
        return None
    return encode_chars(body) if encoded else body


def _conjoin(a: _Alt, b: _Alt) -> _Alt:
    """The conjunction of two alternatives, each schema object once."""
    seen = {id(node.schema) for node in a}
    return a + tuple(node for node in b if id(node.schema) not in seen)


_IDENTIFYING = frozenset(("$id", "id", "$anchor", "$dynamicAnchor", "$recursiveAnchor"))


def _names_resources(schema: Any) -> bool:
    """Whether some object inside ``schema`` has a key that may name a resource or an anchor
    (conservative: any object, even an enum value or a property map, counts). Only then does
    crawling the registry find anything beyond the root: a walk of every subschema through the
    drafts' specifications, where this looks at the keys alone."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if not _IDENTIFYING.isdisjoint(node):
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _structure(schema: dict[str, Any]) -> tuple[Any, ...]:
    """A hashable key for the content of a synthetic schema (see ``_Lowering.interned``)."""
    return tuple(sorted((k, _structure_part(v)) for k, v in schema.items()))


def _structure_part(value: Any) -> Any:
    if isinstance(value, dict):  # a user schema object or an interned one
        return ("id", id(value))
    if isinstance(value, list):
        return ("list", tuple(_structure_part(v) for v in value))
    if isinstance(value, _Node):  # its resolver is fixed by the schema object's place
        return ("node", id(value.schema))
    if isinstance(value, _Witness):
        return ("witness", value.keys, value.names, id(value.value.schema), value.keyword)
    return (type(value).__name__, value)  # scalars, (Decimal, bool) bounds: 1 != True


def _lcm(a: Fraction, b: Fraction) -> Fraction:
    """Least common multiple of two positive rationals."""
    num_ = a.numerator * b.numerator // math.gcd(a.numerator, b.numerator)
    den = math.gcd(a.denominator, b.denominator)
    return Fraction(num_, den)


def _ceil(bound: Decimal | None, strict: bool) -> int | None:
    if bound is None:
        return None
    c = math.ceil(bound)
    return c + 1 if strict and c == bound else c


def _floor(bound: Decimal | None, strict: bool) -> int | None:
    if bound is None:
        return None
    f = math.floor(bound)
    return f - 1 if strict and f == bound else f


def _split_interval(lo: Decimal | None, lo_s: bool, hi: Decimal | None, hi_s: bool,
                    holes: list[Decimal]
                    ) -> list[tuple[Decimal | None, bool, Decimal | None, bool]]:
    """The interval minus the points ``holes``, as open-at-holes pieces."""
    pieces = [(lo, lo_s, hi, hi_s)]
    for h in holes:
        nxt = []
        for a, a_s, b, b_s in pieces:
            inside = (a is None or h > a or (h == a and not a_s)) and (
                b is None or h < b or (h == b and not b_s))
            if inside:
                nxt += [(a, a_s, h, True), (h, True, b, b_s)]
            else:
                nxt.append((a, a_s, b, b_s))
        pieces = nxt
    return pieces


def _has_empty_class(root: Expr) -> bool:
    """True iff an empty ``CharClass``, ``Excluding`` or ``Decoding`` occurs inside ``root``."""
    return bool(node_facts(root).dead & DEAD_CLASS)


def _prune(rules: dict[str, Expr]) -> dict[str, Expr]:
    """Drop unproductive rules (replaced by NOTHING) and rules unreachable from ``start``.

    An Earley-style prefix test is exact only when every symbol derives some string, so no
    placeholder or dead object state may survive.
    """
    productive = _Productive(rules)
    out = productive.rewritten()
    refs = productive.refs
    reachable = {"start"}
    stack = ["start"]
    while stack:  # over the references each node keeps (``ref_names``): no expression walk
        name = stack.pop()
        body = out[name]
        for callee in refs[name] if body is rules[name] else ref_names(body):
            if callee not in reachable:
                reachable.add(callee)
                stack.append(callee)
    return {name: e for name, e in out.items() if name in reachable}


class _Productive:
    """Which rules derive some string, and the rules rewritten without the others.

    A class rather than nested recursive functions: closures that call each other form
    reference cycles, which would keep every compile's IR alive until the cyclic collector
    runs (and make each of its runs walk them)."""

    def __init__(self, rules: dict[str, Expr]) -> None:
        self.rules = rules
        self.refs = {name: ref_names(e) for name, e in rules.items()}  # asked of each rule
        # by every step below: found once
        self.productive: set[str] = set()
        self.known: dict[int, Expr] = {}  # subexpressions found productive (stays true)
        self.memo: dict[int, Expr] = {}  # rewrites by identity: subexpressions are shared
        users: dict[str, list[str]] | None = None  # rule -> the rules that reference it, made
        # at the first failure (most grammars have none)
        failed: set[str] = set()  # rules judged unproductive so far
        work = self._callers_first()
        while work:  # a failed rule is judged again once a rule it references turns productive
            name = work.pop()
            if name in self.productive:
                continue
            body = rules[name]
            if (self.productive.issuperset(self.refs[name]) and not node_facts(body).dead) \
                    or self.derives(body):
                self.productive.add(name)
                self.known[id(body)] = body
                if failed:
                    if users is None:
                        users = {}
                        for user, callees in self.refs.items():
                            for callee in callees:
                                users.setdefault(callee, []).append(user)
                    work += [user for user in users.get(name, ()) if user in failed]
            else:
                failed.add(name)

    def _callers_first(self) -> list[str]:
        """The rule names in reverse postorder of references: popped, a rule comes after the
        rules it references (but along cycles), so most are judged once, without a walk."""
        order: list[str] = []
        seen: set[str] = set()
        refs = self.refs
        for root in self.rules:
            if root in seen:
                continue
            seen.add(root)
            stack = [(root, iter(refs[root]))]
            while stack:
                name, callees = stack[-1]
                for callee in callees:
                    if callee not in seen and callee in refs:
                        seen.add(callee)
                        stack.append((callee, iter(refs[callee])))
                        break
                else:
                    stack.pop()
                    order.append(name)
        order.reverse()
        return order

    def derives(self, e: Expr) -> bool:
        """True iff ``e`` derives some string with the rules known productive so far."""
        if id(e) in self.known:
            return True
        if self._derives(e):
            self.known[id(e)] = e
            return True
        return False

    def _derives(self, e: Expr) -> bool:
        if isinstance(e, Literal):
            return True
        if isinstance(e, CharClass):
            return not e.is_empty
        if isinstance(e, Ref):
            return e.name in self.productive
        if not node_facts(e).dead and self.productive.issuperset(ref_names(e)):
            return True  # every part derives: no walk (most rules, once their callees do)
        if isinstance(e, Seq):
            return all(self.derives(i) for i in e.items)
        if isinstance(e, Choice):
            return any(self.derives(i) for i in e.items)
        if isinstance(e, Capped):  # ``_constrained_dfa`` caps only where a word is short enough
            return self.derives(e.item)
        if isinstance(e, (Excluding, Decoding)):
            return not e.is_empty
        assert isinstance(e, Repeat)
        return e.min == 0 or self.derives(e.item)

    def rewritten(self) -> dict[str, Expr]:
        """The rules rewritten; a productive rule whose references all are, with no dead part
        inside, comes back as it is without a look inside."""
        productive = self.productive
        return {name: e if name in productive and productive.issuperset(self.refs[name])
                and not node_facts(e).dead else self.rewrite(e)
                for name, e in self.rules.items()}

    def rewrite(self, e: Expr) -> Expr:
        """``e`` with unproductive parts removed. Unchanged subtrees come back as the same
        object, so the lexer still recognises JSON character encodings by identity
        (grammar.encodings.decoded_class)."""
        hit = self.memo.get(id(e))
        if hit is not None:
            return hit
        if self.productive.issuperset(ref_names(e)) and not _has_empty_class(e):
            return e  # nothing to rewrite inside (a JSON character's encodings, most lexemes)
        out = e
        if isinstance(e, Ref):
            out = e if e.name in self.productive else NOTHING
        elif isinstance(e, (CharClass, Excluding, Decoding)):
            out = e if not e.is_empty else NOTHING
        elif isinstance(e, (Seq, Choice)):
            items = [self.rewrite(i) for i in e.items]
            if any(a is not b for a, b in zip(items, e.items, strict=True)):
                out = seq(*items) if isinstance(e, Seq) else choice(*items)
        elif isinstance(e, Repeat):
            item = self.rewrite(e.item)
            if item is not e.item:
                out = repeat(item, e.min, e.max)
        elif isinstance(e, Capped):
            item = self.rewrite(e.item)
            if item is not e.item:
                out = capped(item, e.max)
        self.memo[id(e)] = out
        return out
