"""Objects: the member automaton of one merged object schema (``_ObjectBuilder``).

Owns key order (schema order, any order, or ``"auto"``: any order where the key-set automaton
fits ``max_object_states``), required and dependent keys, property counts, ``patternProperties``
regions, ``propertyNames`` and witness requirements.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from grammarsd.grammar.automata import CharDFA
from grammarsd.grammar.ir import EMPTY, NOTHING, Choice, Expr, Ref, choice, is_nothing, seq
from grammarsd.grammar.json_schema.model import _Merged, _Node
from grammarsd.grammar.json_schema.strings import string_literal

if TYPE_CHECKING:
    from grammarsd.grammar.json_schema.compiler import _Lowering

#: Other keys are split by the subset of patterns they match: 2**n regions.
_MAX_PATTERN_PROPERTIES = 4
#: An object may have to show this many witness members (2**n member variants per key).
_MAX_WITNESSES = 3
#: In schema order, a state offers up to this many named keys written out; more go through
#: the ranges of a tree over the keys (``_ObjectBuilder._key_range``).
_DIRECT_KEYS = 64


_PLAIN_ONLY: list[frozenset[int]] = [frozenset()]  # a member that shows no witness (read only)


class _TooManyStates(Exception):
    """The member automaton outgrew ``max_object_states`` (internal: refused, or with
    ``any_order="auto"`` rebuilt in schema order)."""


class _ObjectBuilder:
    """The member automaton of one merged object schema.

    Keys split into the *named* keys (declared in some ``properties``, ``required`` or
    ``dependentRequired``), each with its own member expression, and *other* keys, split by the
    subset of ``patternProperties`` patterns they match (each subset has its own value schema:
    those patterns' schemas, or ``additionalProperties`` for the empty subset).

    State: (named keys seen, index of the last named key, other keys started, members so far,
    capped, witnesses shown). With ``any_order`` every named key is tracked (each at most once,
    in any order); in schema order only required/dependency keys are tracked, named keys come
    in order and other keys after them. ``any_order="auto"`` builds the any-order automaton and,
    if it outgrows ``max_object_states``, discards it and builds the schema-order one.

    Witnesses (``_Witness``, from complements of ``additionalProperties``/``patternProperties``)
    are "some member has a key in K and a value in V" requirements: each member is offered
    plainly and, for every non-empty set R of witnesses its key may serve, with its value also
    in every V of R, marking R shown. The object may close once every witness is shown. (The
    plain and witness variants overlap; the union is still exactly the language.)
    """

    def __init__(self, low: _Lowering, m: _Merged, level: int, pointer: str) -> None:
        self.low, self.m, self.level, self.pointer = low, m, level, pointer
        self.layout = low.layout
        names: list[str] = []
        for spec in m.objects:
            names += [k for k in spec.properties if k not in names]
        names += [k for k in m.required if k not in names]
        for key, deps in m.dep_required:
            names += [k for k in [key, *deps] if k not in names]
        self.names = names
        self.required = set(m.required)
        # next_required[j]: index of the first required name at j or later (len(names): none);
        # j runs to len(names) + 1, one past the last state after other keys
        self.next_required = [len(names)] * (len(names) + 2)
        for j in range(len(names) - 1, -1, -1):
            self.next_required[j] = j if names[j] in self.required else self.next_required[j + 1]
        self.patterns = [(pat, spec_i, node) for spec_i, spec in enumerate(m.objects)
                         for pat, node in spec.patterns]
        if len({p for p, _, _ in self.patterns}) > _MAX_PATTERN_PROPERTIES:
            raise low.refuse("patternProperties", self.patterns[0][2].pointer,
                             f"more than {_MAX_PATTERN_PROPERTIES} patterns")
        if len(m.witnesses) > _MAX_WITNESSES:
            w = m.witnesses[_MAX_WITNESSES]
            raise low.refuse(w.keyword, w.value.pointer, f"more than {_MAX_WITNESSES} "
                             "complements of additionalProperties/patternProperties at once")
        self.all_witnesses = frozenset(range(len(m.witnesses)))
        self.key_names = self._property_name_filter()
        self.values = [self._named_members(k) for k in names]
        self.others = self._other_members()
        self.cap = max(m.min_props, m.max_props or 0, 1)
        # in schema order only keys that matter later (required / dependencies) are tracked
        self.tracked = self.required | {k for key, deps in m.dep_required for k in [key, *deps]}
        self.comma = self.layout.comma(level)
        self.close = self.layout.close("}", level)  # one object, shared by the states
        self.states: dict[tuple[Any, ...], Ref] = {}  # one Ref per state, however often used
        self.steps: dict[tuple[Expr, Expr, Ref], Expr] = {}  # see ``_step``
        self.ranges: dict[tuple[Any, ...], Expr] = {}  # see ``_key_range``
        self.todo: list[tuple[Ref, Callable[[], Expr]]] = []  # named, body still to write
        self.prefix = low._name("obj")
        self.any_order = False  # of the automaton being built

    def _matches(self, pattern: str, key: str, node: _Node) -> bool:
        return self.low.pattern_dfa(pattern, node.pointer, "patternProperties").matches(key)

    def _value_nodes(self, key: str | None, matched: set[int]) -> tuple[_Node, ...]:
        """Schemas for the value of ``key`` (``None``: an other key matching ``matched``)."""
        nodes: list[_Node] = []
        for spec_i, spec in enumerate(self.m.objects):
            hits = [node for i, (_, si, node) in enumerate(self.patterns)
                    if si == spec_i and i in matched]
            nodes += hits
            if key is not None and key in spec.properties:
                nodes.append(spec.properties[key])
            elif not hits and spec.additional is not None:
                nodes.append(spec.additional)
        return tuple(nodes)

    def _member(self, key: Expr, nodes: tuple[_Node, ...]) -> Expr:
        value = self.low.value(nodes, self.layout.child_level(self.level))
        if is_nothing(key) or is_nothing(value):
            return NOTHING
        return self.low.rule("member", seq(key, self.layout.colon(), value))

    def _witness_sets(self, usable: list[int]) -> list[frozenset[int]]:
        """Every set of witnesses one member may show, the empty set (plain member) first."""
        if not usable:  # (most objects have no witness)
            return _PLAIN_ONLY
        return [frozenset(c) for r in range(len(usable) + 1)
                for c in itertools.combinations(usable, r)]

    def _witness_nodes(self, shown: frozenset[int]) -> tuple[_Node, ...]:
        if not shown:
            return ()
        return tuple(self.m.witnesses[i].value for i in sorted(shown))

    def _named_members(self, key: str) -> list[tuple[Expr, frozenset[int]]]:
        """(member expression, witnesses it shows) for the named ``key``."""
        if self.key_names is not None and not all(
                self.low.is_valid(key, (n,)) for n in self.m.property_names):
            return []
        matched = {i for i, (pat, _, node) in enumerate(self.patterns)
                   if self._matches(pat, key, node)}
        nodes = self._value_nodes(key, matched)
        usable = [i for i, w in enumerate(self.m.witnesses) if w.admits(key)]
        out = [(self._member(string_literal(key), nodes + self._witness_nodes(shown)), shown)
               for shown in self._witness_sets(usable)]
        return [(e, shown) for e, shown in out if not is_nothing(e)]

    def _property_name_filter(self) -> _Merged | None:
        """``propertyNames`` merged into one string constraint (``None``: no such keyword)."""
        low, m = self.low, self.m
        if not m.property_names:
            return None
        alternatives = low._product([low._expand(n, ()) for n in m.property_names],
                                    m.property_names[0].pointer, "propertyNames")
        if not alternatives:
            return _Merged(types=set())
        if len(alternatives) != 1:
            raise low.refuse("propertyNames", m.property_names[0].pointer,
                             "propertyNames with anyOf/oneOf alternatives")
        return low._merge(alternatives[0])

    def _other_members(self) -> list[tuple[Expr, frozenset[int]]]:
        """(member expression, witnesses shown) per subset of patterns an other key may match
        and set of witnesses it may show."""
        low = self.low
        f = self.key_names
        if f is not None and "string" not in f.types:
            return []
        base = f if f is not None else _Merged()
        base = base.excluding(list(self.names))
        if base.values is not None:  # finite propertyNames: list the keys
            keys = [v for v in base.values if isinstance(v, str) and v not in self.names
                    and low.is_valid(v, tuple(self.m.property_names))]
            return [member for k in keys for member in self._named_members(k)]
        out: list[tuple[Expr, frozenset[int]]] = []
        dfas = [self.low.pattern_dfa(p, n.pointer, "patternProperties")
                for p, _, n in self.patterns]
        witnesses = self.m.witnesses
        for bits in itertools.product((False, True), repeat=len(self.patterns)):
            region: CharDFA | None = None
            for hit, dfa in zip(bits, dfas, strict=True):
                part = dfa if hit else dfa.complement()
                region = part if region is None else region.intersect(part)
            if region is not None and region.is_empty():
                continue
            nodes = self._value_nodes(None, {i for i, hit in enumerate(bits) if hit})
            for shown in self._witness_sets(list(range(len(witnesses)))):
                language = region
                for i in shown:
                    language = witnesses[i].keys if language is None else language.intersect(
                        witnesses[i].keys)
                if language is not None and language.is_empty():
                    continue
                names = [k for i in shown for k in witnesses[i].names]
                key = low._string(base.excluding(names), extra=language)
                out.append((self._member(key, nodes + self._witness_nodes(shown)), shown))
        return [(e, shown) for e, shown in out if not is_nothing(e)]

    def build(self) -> Expr:
        """The object's expression; the one made before for an object of the same members
        (``low.objects``): the automaton is a function of what ``__init__`` found, and
        members are rules shared by content (``_Lowering.rule``), so objects that differ only
        in annotations, or an object inlined twice, get one automaton."""
        m = self.m
        key = (tuple(self.names), tuple(map(tuple, self.values)), tuple(self.others),
               frozenset(self.required), frozenset(self.tracked),
               tuple((k, tuple(deps)) for k, deps in m.dep_required), m.min_props,
               m.max_props, len(m.witnesses), self.level)
        made = self.low.objects.get(key)
        if made is None:
            made = self.low.objects[key] = self._build()
        return made

    def _build(self) -> Expr:
        order = self.low.options.any_order
        start = self._automaton(True, order is True) if order is not False else None
        if start is None:  # schema order, or "auto" that outgrew the limit
            start = self._automaton(False, True)
            assert start is not None  # refuse=True raises instead
        m = self.m
        empty_ok = m.min_props == 0 and not self.required and not m.witnesses
        body = seq(self.layout.open("{", self.level), start)
        return choice(self.layout.empty("{}") if empty_ok else NOTHING, body)

    def _automaton(self, any_order: bool, refuse: bool) -> Expr | None:
        """The start state of the member automaton in the given key order; past
        ``max_object_states`` a refusal (``refuse``) or ``None`` with nothing left behind.
        States are named when first reached and their bodies written from a worklist, so
        objects with thousands of keys need no deep recursion."""
        self.any_order = any_order
        try:
            start = self._state(frozenset(), -1, False, 0, frozenset())
            while self.todo:
                ref, body = self.todo.pop()
                self.low.rules[ref.name] = body()
            return start
        except _TooManyStates:
            limit = self.low.options.max_object_states
            if refuse:
                why = " (any_order tracks the set of keys seen)" if any_order else ""
                raise self.low.refuse("properties", self.pointer,
                                      f"more than {limit} object states{why}") from None
        # only states refer to states: drop them all (key ranges are made in schema order
        # only, which refuses rather than starting again)
        for ref in self.states.values():
            del self.low.rules[ref.name]
        self.states.clear()
        self.steps.clear()
        self.todo.clear()
        return None

    def _can_end(self, seen: frozenset[str], count: int, shown: frozenset[int]) -> bool:
        m = self.m
        if count < m.min_props or not self.required <= seen or shown != self.all_witnesses:
            return False
        return all(key not in seen or set(deps) <= seen for key, deps in m.dep_required)

    def _state(self, seen: frozenset[str], last: int, other_started: bool, count: int,
               shown: frozenset[int]) -> Ref:
        """Members after ``count`` so far (``count == 0``: none yet, so no comma first)."""
        key = (seen, last, other_started, count, shown)
        hit = self.states.get(key)
        if hit is not None:
            return hit
        if len(self.states) >= self.low.options.max_object_states:
            raise _TooManyStates
        ref = self.states[key] = Ref(f"{self.prefix}_{len(self.states)}")
        self.low.rules[ref.name] = NOTHING  # until the worklist writes the body
        self.todo.append((ref, lambda: self._state_body(*key)))
        return ref

    def _state_body(self, seen: frozenset[str], last: int, other_started: bool, count: int,
                    shown: frozenset[int]) -> Expr:
        """One alternative per member that may come next (schema order: a named key after
        ``last`` up to the next required one, or another key once none is left). In schema
        order, where more than ``_DIRECT_KEYS`` named keys may come next, they are offered
        through the ranges of a tree over the key indices (``_key_range``): O(log n)
        alternatives per state and O(n log n) in all, where writing every key out is O(n**2)
        for n optional keys. Not a chain of "the next key is i or later" rules: that is O(n)
        in all, but where the object stays in the parser every closing token's completions
        climb the whole chain (masks up to 7x slower on objects of hundreds of keys); through
        the tree they climb O(log n), and objects of up to ``_DIRECT_KEYS`` keys keep every
        key written out (on MaskBench, 16 slowed masks by ~7 % where it applied; 64 does not)."""
        m = self.m
        alts: list[Expr] = []
        if count > 0 and self._can_end(seen, count, shown):
            alts.append(self.close)
        if m.max_props is not None and count >= m.max_props:
            return _union(alts)  # full: no member may follow
        lead = self.comma if count > 0 else EMPTY
        nxt = min(count + 1, self.cap)
        any_order = self.any_order
        names = self.names
        if any_order:
            first, stop = 0, len(names)
        else:  # a named key after ``last``, up to the next required one, before any other
            first = last + 1
            stop = first if other_started else min(self.next_required[first] + 1, len(names))
        if not any_order and stop - first > _DIRECT_KEYS:
            context = (seen, lead, nxt, shown)
            alts += self._cover(first, stop, context)
        else:
            for i in range(first, stop):
                alts += self._steps_to(i, seen, lead, nxt, shown)
        if self.others and (any_order or self.next_required[last + 1] == len(self.names)):
            last_other = len(self.names) if not any_order else -1
            alts += [self._step(lead, member, self._state(seen, last_other, not any_order, nxt,
                                                          shown | more))
                     for member, more in self.others]
        return _union(alts)

    def _steps_to(self, i: int, seen: frozenset[str], lead: Expr, nxt: int,
                  shown: frozenset[int]) -> list[Expr]:
        """The steps to named key ``i`` as the next member (none where it cannot come)."""
        k = self.names[i]
        if k in seen or not self.values[i]:
            return []
        if self.any_order:
            new_seen, last = seen | {k}, -1
        else:  # only tracked keys are kept (``seen`` holds no other): most keys leave it alone
            new_seen, last = (seen | {k} if k in self.tracked else seen), i
        return [self._step(lead, member, self._state(new_seen, last, False, nxt,
                                                     shown | more if more else shown))
                for member, more in self.values[i]]

    def _cover(self, first: int, stop: int, context: tuple[Any, ...]) -> list[Expr]:
        """The key ranges that together offer the named keys ``[first, stop)``."""
        ranges = (self._key_range(lo, hi, context)
                  for lo, hi in tree_ranges(first, stop, 0, len(self.names)))
        return [r for r in ranges if not is_nothing(r)]

    def _key_range(self, lo: int, hi: int, context: tuple[Any, ...]) -> Expr:
        """The rule "the next member has a named key in ``[lo, hi)``" in ``context`` (keys
        seen, lead, count, witnesses shown), or NOTHING where none may come: one rule per range
        and context, whose body is its two halves (or, for a few keys, their steps), shared by
        every state that offers the whole range."""
        key = (lo, hi, *context)
        hit = self.ranges.get(key)
        if hit is not None:
            return hit
        if hi - lo <= _DIRECT_KEYS // 2:
            alts = [step for i in range(lo, hi) for step in self._steps_to(i, *context)]
        else:
            mid = (lo + hi) // 2
            alts = [self._key_range(lo, mid, context), self._key_range(mid, hi, context)]
        body = _union(alts)
        if not is_nothing(body):
            ref = Ref(f"{self.prefix}_keys{len(self.ranges)}")
            self.low.rules[ref.name] = body
            body = ref
        self.ranges[key] = body
        return body

    def _step(self, lead: Expr, member: Expr, state: Ref) -> Expr:
        """``seq(lead, member, state)``, one object per distinct triple: in schema order every
        state before optional key ``j`` offers the same step to ``j``, and the analyses after
        this keep their answers on each node (one walk, not one per state)."""
        key = (lead, member, state)
        hit = self.steps.get(key)
        if hit is None:
            hit = self.steps[key] = seq(lead, member, state)
        return hit


def tree_ranges(first: int, stop: int, lo: int, hi: int) -> list[tuple[int, int]]:
    """The ranges of the tree that halves ``[lo, hi)`` at its middle, down to single indices,
    that together make ``[first, stop)`` (inside ``[lo, hi)``): the widest ones, at most two
    per level, in order."""
    if first <= lo and hi <= stop:
        return [(lo, hi)]
    mid = (lo + hi) // 2
    out = []
    if first < mid:
        out += tree_ranges(first, stop, lo, mid)
    if stop > mid:
        out += tree_ranges(first, stop, mid, hi)
    return out


def _union(alts: list[Expr]) -> Expr:
    """``choice(*alts)`` for a state's alternatives, without its pairwise comparisons: they are
    distinct (each holds a member rule of its own, or closes the object) and none is a
    ``Choice`` but NOTHING (a member that cannot occur), which is dropped as ``choice`` drops
    it."""
    kept = [a for a in alts if not is_nothing(a)]
    return NOTHING if not kept else kept[0] if len(kept) == 1 else Choice(tuple(kept))
