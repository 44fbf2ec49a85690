"""Arrays whose items interact: ``contains`` counts and ``uniqueItems`` value sets.

The plain array (prefix then repeated items) is emitted by ``compiler._Lowering._array``; this
module owns the small automaton used when items must be counted or kept distinct.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grammarsd.grammar.ir import EMPTY, NOTHING, Expr, Ref, choice, is_nothing, seq
from grammarsd.grammar.json_schema.model import _Merged, _Node, _type_of, _value_key

if TYPE_CHECKING:
    from grammarsd.grammar.json_schema.compiler import _Lowering

#: uniqueItems tracks the set of values used: 2**n states.
_MAX_UNIQUE_VALUES = 8




class _CountingArray:
    """Arrays with ``contains`` (counted matches) or ``uniqueItems`` (finite item values).

    State: (index, capped; matches of the one ``contains`` schema, capped; values used so far
    for ``uniqueItems``). Each item is either a member of ``items & contains`` (count + 1) or of
    ``items & not contains``. With ``uniqueItems`` every position must admit only finitely many
    values (enum/const/boolean/null), listed and tracked as a set.
    """

    def __init__(self, low: _Lowering, m: _Merged, level: int) -> None:
        self.low, self.m, self.level = low, m, level
        self.layout = low.layout
        if len(m.contains) > 1:
            node = m.contains[1][0]
            raise low.refuse("contains", node.pointer, "more than one contains in one schema")
        if m.contains and m.unique:
            raise low.refuse("uniqueItems", m.unique[0], "uniqueItems together with contains")
        self.width = max((len(s.prefix) for s in m.arrays), default=0)
        self.top = max(self.width, m.min_items, m.max_items or 0, 1)
        self.child = self.layout.child_level(level)
        self.contains = m.contains[0] if m.contains else None
        if self.contains is not None:
            node, lo, hi = self.contains
            self.yes_node = node
            self.no_node = low.negation(node)
            self.cap = max(lo, hi if hi is not None else 0) + 1
        self.states: dict[tuple[Any, ...], str] = {}
        self.prefix = low._name("arr")

    def _nodes(self, index: int) -> tuple[_Node, ...]:
        nodes: list[_Node] = []
        for spec in self.m.arrays:
            if index < len(spec.prefix):
                nodes.append(spec.prefix[index])
            elif spec.items is not None:
                nodes.append(spec.items)
        return nodes and tuple(nodes) or ()

    def _finite_values(self, index: int) -> list[Any]:
        """Values allowed at ``index`` when finitely many; refuses uniqueItems otherwise."""
        low = self.low
        nodes = tuple(low.peel(n) for n in self._nodes(index))
        alternatives = low._product([low._expand(n, ()) for n in nodes], self.m.unique[0],
                                    "uniqueItems") if nodes else [()]
        values: list[Any] = []
        for alt in alternatives:
            merged = low._merge(alt)
            if merged.values is not None:
                values += merged.values
            elif merged.types <= {"null", "boolean"}:
                values += [v for v in (None, True, False) if _type_of(v) in merged.types]
            else:
                raise low.refuse("uniqueItems", self.m.unique[0], "uniqueItems is enforced only "
                                 "when items take finitely many values")
        out: dict[Any, Any] = {}
        for v in values:
            if _value_key(v) not in out and low.is_valid(v, nodes):
                out[_value_key(v)] = v
        if len(out) > _MAX_UNIQUE_VALUES:
            raise low.refuse("uniqueItems", self.m.unique[0], f"more than {_MAX_UNIQUE_VALUES} "
                             "possible item values")
        return list(out.values())

    def _items(self, index: int) -> list[tuple[Expr, Any]]:
        """(item expression, effect) pairs at ``index``: effect is a value key or a count step."""
        if self.m.unique:
            return [(self.low.literal(v, self.child), _value_key(v))
                    for v in self._finite_values(index)]
        nodes = self._nodes(index)
        out = []
        yes = self.low.value(nodes + (self.yes_node,), self.child)
        no = self.low.value(nodes + (self.no_node,), self.child)
        out = [(yes, 1), (no, 0)]
        return [(e, k) for e, k in out if not is_nothing(e)]

    def _can_end(self, index: int, count: int) -> bool:
        if index < self.m.min_items:
            return False
        if self.contains is None:
            return True
        _, lo, hi = self.contains
        return count >= lo and (hi is None or count <= hi)

    def build(self) -> Expr:
        empty = self.layout.empty("[]") if self._can_end(0, 0) else NOTHING
        if self.m.max_items == 0:
            return empty
        return choice(empty, seq(self.layout.open("[", self.level),
                                 self._state(0, 0, frozenset())))

    def _state(self, index: int, count: int, used: frozenset[Any]) -> Expr:
        key = (index, count, used)
        if key in self.states:
            return Ref(self.states[key])
        if len(self.states) >= self.low.options.max_object_states:
            at = self.m.unique[0] if self.m.unique else self.m.contains[0][0].pointer
            raise self.low.refuse("uniqueItems" if self.m.unique else "contains", at,
                                  "too many array states")
        name = f"{self.prefix}_{len(self.states)}"
        self.states[key] = name
        self.low.rules[name] = NOTHING
        alts: list[Expr] = []
        if index > 0 and self._can_end(index, count):
            alts.append(self.layout.close("]", self.level))
        lead = self.layout.comma(self.level) if index > 0 else EMPTY
        hi_items = self.m.max_items
        if hi_items is None or index < hi_items:
            nxt = min(index + 1, self.top)
            for item, effect in self._items(index):
                if self.m.unique:
                    if effect in used:
                        continue
                    alts.append(seq(lead, item, self._state(nxt, 0, used | {effect})))
                else:
                    c = min(count + effect, self.cap)
                    alts.append(seq(lead, item, self._state(nxt, c, used)))
        self.low.rules[name] = choice(*alts)
        return Ref(name)
