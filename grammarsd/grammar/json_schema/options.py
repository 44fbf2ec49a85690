"""Options of the JSON Schema front end (one frozen, typed dataclass; unknown keys raise)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

Whitespace = Literal["flexible", "compact", "indent"]
PropertyOrder = bool | Literal["auto"]


@dataclass(frozen=True)
class JsonSchemaOptions:
    """How a schema becomes a grammar.

    Attributes
    ----------
    whitespace : ``"flexible"`` allows any JSON whitespace between tokens, at most
        ``max_whitespace`` characters per gap (so ``json.dumps`` output with ``", "`` and
        ``": "`` and compact output both match); ``"compact"`` allows none; ``"indent"``
        is exactly the layout of ``json.dumps(x, indent=indent)``.
    max_whitespace : bound per gap for ``"flexible"`` (>= 0; None: unbounded). The grammar
        says ``[ \\t\\n\\r]{0,max_whitespace}``; ``compile_json_schema`` has the matcher count it
        (``whitespace_gaps``) rather than spell it out in every terminal's DFA.
    indent : spaces per level for ``"indent"`` (required there, forbidden elsewhere).
    any_order : ``False``: object properties appear in schema order (declared properties first,
        then other keys); ``True``: any order, each key at most once (the key-set automaton
        of an object is refused past ``max_object_states``); ``"auto"``: per object, any
        order where its automaton fits ``max_object_states``, schema order otherwise (never
        refused for that reason).
    max_depth : for ``"indent"`` only: nesting deeper than this is rejected (the layout
        depends on depth, so recursive schemas are unrolled up to it).
    max_alternatives : limit on the disjunctive normal form of ``anyOf``/``oneOf``/``allOf``
        combinations at one schema location (refused beyond it).
    max_object_states : limit on the states of one object's property automaton (``any_order``
        tracks the set of keys seen); refused beyond it (``"auto"``: schema order instead).
    max_number_states : limit on the states of one number automaton (``multipleOf`` and its
        complement are residue automata over decimal digits, intersected with the bounds);
        refused beyond it.
    max_length_product : a string's ``maxLength`` beside a ``pattern`` or ``format`` is folded
        into the string's automaton (their product) while ``(maxLength + 1)`` times the
        automaton's states stays within this, or ``maxLength`` is below 32; beyond it the
        string is one *capped* terminal whose decoded characters the matcher counts
        (``ir.Capped``), which keeps ``maxLength: 500`` from costing 500 copies of the pattern.
        0 caps every such bound from 32 up.
    default_draft : the dialect URI used when the schema has no ``$schema``.
    formats : ``"assert"`` enforces ``format`` (refusing formats that cannot be enforced);
        ``"ignore"`` treats it as the annotation drafts 2019-09 and 2020-12 make it by default.
    """

    whitespace: Whitespace = "flexible"
    max_whitespace: int | None = 32
    indent: int | None = None
    any_order: PropertyOrder = False
    max_depth: int = 12
    max_alternatives: int = 256
    max_object_states: int = 2048
    max_number_states: int = 4096
    max_length_product: int = 256
    default_draft: str = "https://json-schema.org/draft/2020-12/schema"
    formats: Literal["assert", "ignore"] = "assert"

    def __post_init__(self) -> None:
        if self.whitespace not in ("flexible", "compact", "indent"):
            raise ValueError(f"whitespace must be flexible, compact or indent, not "
                             f"{self.whitespace!r}")
        if self.formats not in ("assert", "ignore"):
            raise ValueError(f"formats must be assert or ignore, not {self.formats!r}")
        if not isinstance(self.any_order, bool) and self.any_order != "auto":
            raise ValueError(f"any_order must be True, False or 'auto', not {self.any_order!r}")
        if (self.whitespace == "indent") != (self.indent is not None):
            raise ValueError("indent= is required with whitespace='indent' and only there")
        for name in ("max_whitespace", "indent", "max_depth", "max_alternatives",
                     "max_object_states", "max_number_states", "max_length_product"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ValueError(f"{name} must be a non-negative int, not {value!r}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JsonSchemaOptions:
        """Build from a plain dict; unknown keys raise ``ValueError`` naming them."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown JsonSchemaOptions keys: {', '.join(unknown)}")
        return cls(**data)
