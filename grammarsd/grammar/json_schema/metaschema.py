"""The metaschema check of an input schema, with the vocabularies of 2019-09 and 2020-12 merged.

Those drafts split their metaschema into vocabulary documents that refer back to "whatever
schema the dialect is" by ``$dynamicRef: "#meta"`` (2020-12) or ``$recursiveRef: "#"``
(2019-09). ``jsonschema`` resolves such a reference by walking the dynamic scope at every
subschema, which makes checking a schema cost ~5 ms. For the drafts' own metaschemas the
dynamic reference always lands on the root, so here each vocabulary's ``properties`` and
``$defs`` are merged into one document whose references are plain ``$ref: "#"``: the same
verdicts at ~1 ms. Drafts 4, 6 and 7 are single documents and are checked as they are.

Most schemas are valid, and ``jsonschema`` builds its verdict from error generators and scoped
validators at every subschema. So each metaschema is also compiled into plain closures with the
same verdict (``_Compiler``: only the keywords the drafts' metaschemas use, with each draft's
semantics), ~10x faster; ``jsonschema`` runs only where that says invalid, to name the error.
"""

from __future__ import annotations

import functools
import json
import numbers
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote, urljoin

import jsonschema
from jsonschema_specifications import REGISTRY

_DYNAMIC_ROOT = ({"$dynamicRef": "#meta"}, {"$recursiveRef": "#"})


def check_schema(schema: Any, validator: Any) -> jsonschema.ValidationError | None:
    """The most relevant error of ``schema`` against the metaschema of ``validator`` (a
    ``jsonschema`` validator class), or None if it is valid. A valid schema (the common case)
    is passed by the metaschema's compiled predicate (``_fast_check``); ``jsonschema`` runs only
    to name the error of an invalid one. A schema nested past the stack raises
    ``RecursionError`` here, before ``jsonschema`` could meet it inside ``referencing``'s
    extension code, which turns it into a panic."""
    fast = _fast_check(validator)
    if fast is not None and fast(schema):
        return None
    return jsonschema.exceptions.best_match(_metaschema_validator(validator).iter_errors(schema))


@functools.cache
def _metaschema_validator(validator: Any) -> Any:
    """A validator of ``validator``'s metaschema, made once per class."""
    return validator(_merged(validator.META_SCHEMA))


# --------------------------------------------------------------------------- the fast verdict

Check = Callable[[Any], bool]


class _Unsupported(Exception):
    """The metaschema uses a keyword (or form) ``_Compiler`` does not implement."""


@functools.cache
def _fast_check(validator: Any) -> Check | None:
    """A predicate with ``jsonschema``'s verdict on ``validator``'s (merged) metaschema, ~10x
    faster (plain closures, no error objects); None where the metaschema uses something the
    compiler does not implement (then ``jsonschema`` alone decides)."""
    try:
        return _Compiler(_merged(validator.META_SCHEMA), validator).root
    except _Unsupported:
        return None


class _Compiler:
    """Compiles a metaschema into closures, keyword by keyword, with ``jsonschema``'s semantics
    for the draft of ``validator`` (its keyword set, type checker, legacy forms). Only what the
    drafts' metaschemas use is implemented: any other keyword the draft knows raises
    ``_Unsupported``; keywords it does not know are ignored, as ``jsonschema`` ignores them.
    ``format`` asserts nothing: no format checker is given (``check_schema``)."""

    def __init__(self, root: dict[str, Any], validator: Any) -> None:
        self.keywords = set(validator.VALIDATORS)
        # drafts 4 to 7: a ``$ref`` hides the keywords beside it
        self.legacy = not {"$dynamicRef", "$recursiveRef"} & self.keywords
        float_int = validator.TYPE_CHECKER.is_type(1.0, "integer")
        self.types: dict[str, Check] = {
            "array": lambda x: isinstance(x, list),
            "boolean": lambda x: isinstance(x, bool),
            "integer": (lambda x: (isinstance(x, int) and not isinstance(x, bool))
                        or (isinstance(x, float) and x.is_integer())) if float_int
            else (lambda x: isinstance(x, int) and not isinstance(x, bool)),
            "null": lambda x: x is None,
            "number": lambda x: isinstance(x, numbers.Number) and not isinstance(x, bool),
            "object": lambda x: isinstance(x, dict),
            "string": lambda x: isinstance(x, str),
        }
        self.doc = root
        self.base = root.get("$id", root.get("id", ""))
        self.home = self.base.partition("#")[0]  # the metaschema's own URI
        self.by_uri: dict[str, Check] = {}  # the compiled target of each reference
        self.pending: list[tuple[str, Any]] = []
        self.queued: set[str] = set()
        self.root = self.ref("#")
        while self.pending:  # compiled here, not on first use: nothing _Unsupported later
            uri, target = self.pending.pop()
            self.by_uri[uri] = self.schema(target)

    def ref(self, ref: str) -> Check:
        """The check of the subschema ``ref`` names: a JSON pointer into the metaschema or, for
        the vocabularies of 2019-09 and 2020-12, into a sibling document of the registry."""
        uri, _, pointer = urljoin(self.base, ref).partition("#")
        elsewhere = uri not in ("", self.home)
        if not elsewhere:
            target: Any = self.doc
        else:
            try:
                target = REGISTRY.contents(uri)
            except Exception as error:  # noqa: BLE001 - any lookup failure: not compiled
                raise _Unsupported(f"$ref {ref}") from error
        for part in pointer.split("/")[1:]:
            key = unquote(part).replace("~1", "/").replace("~0", "~")
            target = target[int(key)] if isinstance(target, list) else target[key]
        if elsewhere and '"$ref"' in json.dumps(target):
            raise _Unsupported(f"$ref {ref}")  # references there are relative to its document
        key = f"{uri}#{pointer}"
        if key not in self.queued:
            self.queued.add(key)
            self.pending.append((key, target))
        compiled = self.by_uri
        return lambda x: compiled[key](x)

    def schema(self, schema: Any) -> Check:
        if schema is True or schema == {}:
            return _always
        if schema is False:
            return _never
        if not isinstance(schema, dict) or (schema is not self.doc and (
                "$id" in schema or "id" in schema)):
            raise _Unsupported(f"schema {schema!r}")
        names = ["$ref"] if self.legacy and "$ref" in schema else list(schema)
        checks = [self.keyword(name, schema[name], schema) for name in names
                  if name in self.keywords and name != "format"]
        checks = [c for c in checks if c is not _always]
        if not checks:
            return _always
        if len(checks) == 1:
            return checks[0]
        return lambda x: all(c(x) for c in checks)

    def keyword(self, name: str, value: Any, schema: dict[str, Any]) -> Check:
        if name == "$ref":
            return self.ref(value)
        if name == "type":
            tests = [self.types[t] for t in ([value] if isinstance(value, str) else value)]
            return tests[0] if len(tests) == 1 else lambda x: any(t(x) for t in tests)
        if name == "enum":
            return lambda x: any(_equal(x, v) for v in value)
        if name in ("allOf", "anyOf"):
            parts = [self.schema(s) for s in value]
            if name == "allOf":
                return lambda x: all(p(x) for p in parts)
            return lambda x: any(p(x) for p in parts)
        if name == "properties":
            subs = [(key, self.schema(s)) for key, s in value.items()]
            return lambda x: not isinstance(x, dict) or all(
                c(x[key]) for key, c in subs if key in x)
        if name == "additionalProperties":  # as the metaschemas use it: every value
            if "properties" in schema or "patternProperties" in schema:
                raise _Unsupported("additionalProperties beside properties")
            each = self.schema(value)
            return lambda x: not isinstance(x, dict) or all(each(v) for v in x.values())
        if name == "propertyNames":
            names = self.schema(value)
            return lambda x: not isinstance(x, dict) or all(names(key) for key in x)
        if name == "dependencies":
            deps = [(key, list(d) if isinstance(d, list) else self.schema(d))
                    for key, d in value.items()]
            return lambda x: not isinstance(x, dict) or all(
                (all(k in x for k in d) if isinstance(d, list) else d(x))
                for key, d in deps if key in x)
        if name == "items":
            if not isinstance(value, (dict, bool)) or "prefixItems" in schema:
                raise _Unsupported("items as a list of schemas")
            each = self.schema(value)
            return lambda x: not isinstance(x, list) or all(each(item) for item in x)
        if name == "minItems":
            return lambda x: not isinstance(x, list) or len(x) >= value
        if name == "uniqueItems":
            return (lambda x: not isinstance(x, list) or _unique(x)) if value else _always
        if name in ("minimum", "exclusiveMinimum"):
            number = self.types["number"]
            # before draft 6 ``exclusiveMinimum`` is no keyword but a flag ``minimum`` reads
            flag = "exclusiveMinimum" not in self.keywords and schema.get("exclusiveMinimum")
            if name == "exclusiveMinimum" or flag:
                return lambda x: not number(x) or x > value
            return lambda x: not number(x) or x >= value
        if name == "pattern":
            regex = re.compile(value)
            return lambda x: not isinstance(x, str) or regex.search(x) is not None
        raise _Unsupported(name)


def _always(_: Any) -> bool:
    return True


def _never(_: Any) -> bool:
    return False


def _equal(one: Any, two: Any) -> bool:
    """JSON equality as ``jsonschema`` judges it: ``True`` is not ``1``, inside containers too."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(_equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(
            key in two and _equal(value, two[key]) for key, value in one.items())
    return bool(_unbool(one) == _unbool(two))


_TRUE, _FALSE = object(), object()


def _unbool(x: Any) -> Any:
    return _TRUE if x is True else _FALSE if x is False else x


def _unique(items: list[Any]) -> bool:
    """No two items ``_equal`` (``uniqueItems``): neighbours once sorted, or every pair where
    the items do not sort (mixed types, containers), as ``jsonschema`` decides."""
    try:
        ordered = sorted(_unbool(x) for x in items)
        return not any(_equal(a, b) for a, b in zip(ordered, ordered[1:], strict=False))
    except (NotImplementedError, TypeError):
        seen: list[Any] = []
        for x in map(_unbool, items):
            if any(_equal(s, x) for s in seen):
                return False
            seen.append(x)
        return True


def _merged(root: dict[str, Any]) -> dict[str, Any]:
    """``root`` with the vocabularies its ``allOf`` names merged in and dynamic references to
    the root made plain (``root`` itself where it names none)."""
    if "allOf" not in root:
        return root
    properties: dict[str, Any] = {}
    defs: dict[str, Any] = {}
    for doc in [root, *vocabulary_documents(root)]:  # their keys never clash (tested)
        properties.update(doc.get("properties", {}))
        defs.update(doc.get("$defs", {}))
    return {"$schema": root["$schema"], "$id": root["$id"], "type": root["type"],
            "properties": _plain(properties), "$defs": _plain(defs)}


def vocabulary_documents(root: dict[str, Any]) -> list[dict[str, Any]]:
    """The vocabulary metaschemas the ``allOf`` of a metaschema ``root`` names."""
    base = root["$id"].rsplit("/", 1)[0]
    return [REGISTRY.contents(f"{base}/{ref['$ref']}") for ref in root.get("allOf", ())]


def _plain(value: Any) -> Any:
    """``value`` with every dynamic reference to the root replaced by ``$ref: "#"``."""
    if isinstance(value, dict):
        if value in _DYNAMIC_ROOT:
            return {"$ref": "#"}
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value
