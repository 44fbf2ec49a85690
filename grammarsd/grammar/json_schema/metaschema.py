"""The metaschema check of an input schema, with the vocabularies of 2019-09 and 2020-12 merged.

Those drafts split their metaschema into vocabulary documents that refer back to "whatever
schema the dialect is" by ``$dynamicRef: "#meta"`` (2020-12) or ``$recursiveRef: "#"``
(2019-09). ``jsonschema`` resolves such a reference by walking the dynamic scope at every
subschema, which makes checking a schema cost ~5 ms. For the drafts' own metaschemas the
dynamic reference always lands on the root, so here each vocabulary's ``properties`` and
``$defs`` are merged into one document whose references are plain ``$ref: "#"``: the same
verdicts at ~1 ms. Drafts 4, 6 and 7 are single documents and are checked as they are.
"""

from __future__ import annotations

import functools
from typing import Any

import jsonschema
from jsonschema_specifications import REGISTRY

_DYNAMIC_ROOT = ({"$dynamicRef": "#meta"}, {"$recursiveRef": "#"})


def check_schema(schema: Any, validator: Any) -> jsonschema.ValidationError | None:
    """The most relevant error of ``schema`` against the metaschema of ``validator`` (a
    ``jsonschema`` validator class), or None if it is valid."""
    return jsonschema.exceptions.best_match(_metaschema_validator(validator).iter_errors(schema))


@functools.cache
def _metaschema_validator(validator: Any) -> Any:
    """A validator of ``validator``'s metaschema, made once per class."""
    return validator(_merged(validator.META_SCHEMA))


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
