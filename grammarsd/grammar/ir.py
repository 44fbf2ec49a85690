"""Grammar IR: the one representation every front end lowers to.

Everything is over Unicode code points (the compiler lowers to UTF-8 bytes). Expressions are
frozen, hashable dataclasses:

    Literal(text)              the exact string ``text`` ("" is allowed and means epsilon)
    CharClass(ranges)          one code point from sorted, disjoint, non-adjacent inclusive
                               ``ranges``; surrogates (U+D800..U+DFFF) are never members,
                               because they have no UTF-8 encoding
    Seq(items)                 concatenation; ``Seq(())`` is the empty string (EMPTY)
    Choice(items)              alternation; ``Choice(())`` is the empty language (NOTHING)
    Repeat(item, min, max)     ``item{min,max}``; ``max=None`` is unbounded
    Ref(name)                  a reference to a rule; recursion (also left recursion) is fine
    Capped(item, max)          the strings of ``item`` -- JSON string bodies -- that decode to
                               at most ``max`` characters (a length bound kept apart from a
                               pattern: their product automaton can be huge)
    Excluding(words, chars)    the JSON string bodies that decode to a string over ``chars``
                               other than ``words`` (an object's "any key but the named ones"),
                               kept whole: as plain IR it is a trie of every escape spelling
    Decoding(dfa)              the JSON string bodies that decode to a word of the character
                               automaton ``dfa`` (a ``pattern`` or ``format`` string), kept
                               whole: as plain IR it is a regex or a rule per state

A ``Grammar`` maps rule names to expressions and names its ``start`` rule. ``str(grammar)``
prints it in a Lark-like EBNF so users can see what their schema or regex became.

Use the smart constructors (``seq``, ``choice``, ``repeat``, ``lit``, ``chars``, ...) in front
ends: they flatten and drop trivial pieces, so IR stays small without a separate pass.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple, TypeVar

if TYPE_CHECKING:
    from grammarsd.grammar.automata import CharDFA

MAX_CODE_POINT = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)


# --------------------------------------------------------------------------- expressions


class _CachedHash:
    """Composite expressions hash their whole tree; the compiler keys dicts by big expressions
    again and again, so the hash is computed once per object (never pickled: string hashes
    differ between processes). Each class names ``__hash__ = _CachedHash.__hash__`` in its body,
    or ``dataclass`` would put its own in place."""

    __slots__ = ()

    def __hash__(self) -> int:
        kept = self.__dict__
        h = kept.get("_hash")
        if h is None:
            kind = type(self)
            fields = kind.__dataclass_fields__  # type: ignore[attr-defined]
            h = hash((kind.__name__, *map(kept.__getitem__, fields)))
            kept["_hash"] = h
        return h

    def __getstate__(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}


@dataclass(frozen=True)
class Literal:
    """An exact string."""

    text: str

    def __str__(self) -> str:
        return json.dumps(self.text, ensure_ascii=False)


@dataclass(frozen=True)
class CharClass:
    """One code point from ``ranges`` (normalised: sorted, merged, no surrogates)."""

    ranges: tuple[tuple[int, int], ...]

    def __post_init__(self) -> None:
        if self.ranges != _normalize_ranges(self.ranges):
            raise ValueError(f"CharClass ranges are not normalised: {self.ranges!r}; use chars()")

    def __contains__(self, cp: int) -> bool:
        lo, hi = 0, len(self.ranges)
        while lo < hi:
            mid = (lo + hi) // 2
            a, b = self.ranges[mid]
            if cp < a:
                hi = mid
            elif cp > b:
                lo = mid + 1
            else:
                return True
        return False

    def negate(self) -> CharClass:
        """All code points (minus surrogates) not in this class."""
        out: list[tuple[int, int]] = []
        prev = 0
        for a, b in self.ranges:
            if a > prev:
                out.append((prev, a - 1))
            prev = b + 1
        if prev <= MAX_CODE_POINT:
            out.append((prev, MAX_CODE_POINT))
        return chars(out)

    def union(self, other: CharClass) -> CharClass:
        return chars(self.ranges + other.ranges)

    def intersect(self, other: CharClass) -> CharClass:
        return self.negate().union(other.negate()).negate()

    @property
    def is_empty(self) -> bool:
        return not self.ranges

    def __str__(self) -> str:
        if self.ranges == ANY_CHAR.ranges:
            return "/./s"
        parts = []
        for a, b in self.ranges:
            parts.append(_class_char(a) if a == b else f"{_class_char(a)}-{_class_char(b)}")
        return "[" + "".join(parts) + "]"


@dataclass(frozen=True)
class Seq(_CachedHash):
    """Concatenation of ``items``; the empty tuple is the empty string."""

    __hash__ = _CachedHash.__hash__

    items: tuple[Expr, ...]

    def __str__(self) -> str:
        if not self.items:
            return '""'
        return " ".join(_paren(i, (Choice,)) for i in self.items)


@dataclass(frozen=True)
class Choice(_CachedHash):
    """Alternation of ``items``; the empty tuple is the empty language."""

    __hash__ = _CachedHash.__hash__

    items: tuple[Expr, ...]

    def __str__(self) -> str:
        if not self.items:
            return "<nothing>"
        return " | ".join(str(i) for i in self.items)


@dataclass(frozen=True)
class Repeat(_CachedHash):
    """``item`` repeated between ``min`` and ``max`` times (``max=None``: unbounded)."""

    __hash__ = _CachedHash.__hash__

    item: Expr
    min: int = 0
    max: int | None = None

    def __post_init__(self) -> None:
        if self.min < 0 or (self.max is not None and self.max < self.min):
            raise ValueError(f"bad repeat bounds {{{self.min},{self.max}}}")

    def __str__(self) -> str:
        inner = _paren(self.item, (Choice, Seq, Repeat))
        m, n = self.min, self.max
        if (m, n) == (0, None):
            return inner + "*"
        if (m, n) == (1, None):
            return inner + "+"
        if (m, n) == (0, 1):
            return inner + "?"
        if n is None:
            return f"{inner}{{{m},}}"
        if m == n:
            return f"{inner}{{{m}}}"
        return f"{inner}{{{m},{n}}}"


@dataclass(frozen=True)
class Ref:
    """A reference to the rule ``name``."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Capped(_CachedHash):
    """The strings of ``item`` whose JSON string decoding has at most ``max`` characters.

    ``item`` must be regular and match JSON string bodies only (the text between the quotes:
    no raw ``"``, ``\\`` or control character outside a well-formed escape), so a string
    decodes unambiguously: a raw code point, a short escape (``\\n``) and a ``\\uXXXX`` each
    count one character, and a surrogate pair ``\\uD8xx\\uDCxx`` counts one. It is what a
    ``maxLength`` beside a ``pattern`` becomes when their product automaton would be large:
    the matcher counts the characters of the one terminal it is (``compiler.lexer``)."""

    __hash__ = _CachedHash.__hash__

    item: Expr
    max: int

    def __post_init__(self) -> None:
        if self.max < 0:
            raise ValueError(f"bad cap {self.max}")

    def __str__(self) -> str:
        return f"capped({self.item}, {self.max})"


@dataclass(frozen=True)
class Excluding(_CachedHash):
    """The JSON string bodies (the text between the quotes, each character spelled any way
    ``encodings.encode_class`` allows) that decode to a string over ``chars`` other than the
    ``words`` (sorted, distinct, at least one).

    A leaf, so the analyses do not walk the trie it stands for (hundreds of IR nodes per key
    set, met once: every object has its own keys). The lexer reads it from the words' trie
    (``automata.TaggedOutside``); anything else that needs its structure expands it
    (``encodings.expand_excluding``)."""

    __hash__ = _CachedHash.__hash__

    words: tuple[str, ...]
    chars: CharClass

    def __post_init__(self) -> None:
        if not self.words or list(self.words) != sorted(set(self.words)):
            raise ValueError(f"Excluding needs sorted, distinct words: {self.words!r}")

    @property
    def is_empty(self) -> bool:
        """No string at all: over the empty class only ``""`` is a string, and it is a word
        (over any other class there are infinitely many strings, and finitely many words)."""
        return self.chars.is_empty and "" in self.words

    def __str__(self) -> str:
        listed = ", ".join(json.dumps(w, ensure_ascii=False) for w in self.words)
        return f"excluding({listed}; {self.chars})"


@dataclass(frozen=True)
class Decoding(_CachedHash):
    """The JSON string bodies (each character spelled any way ``encodings.encode_class``
    allows) that decode to a word of the character automaton ``dfa`` (``automata.CharDFA``,
    canonical: equal leaves mean equal languages).

    A leaf, as ``Excluding`` is: a string ``pattern`` is an automaton already, and spelled as
    IR (state elimination, or one rule per state) it costs thousands of nodes that every pass
    walks and the lexer reads back into the same automaton. The lexer reads the automaton
    itself (``automata.tagged_states``); a plain Thompson NFA spells each of its edges
    (``encodings.encode_class``), the reference recognizer makes a nonterminal per state."""

    __hash__ = _CachedHash.__hash__

    dfa: CharDFA

    @property
    def is_empty(self) -> bool:
        return self.dfa.is_empty()

    def __str__(self) -> str:
        d = self.dfa
        digest = hashlib.blake2b(d.bounds.tobytes() + d.trans.tobytes() + d.accept.tobytes(),
                                 digest_size=8).hexdigest()
        return f"decoding({d.num_states} states #{digest})"


Expr = Literal | CharClass | Seq | Choice | Repeat | Ref | Capped | Excluding | Decoding

EMPTY = Seq(())
NOTHING = Choice(())


def is_empty(e: Expr) -> bool:
    """``e == EMPTY``, as a type test (no call of ``__eq__`` on the way: it runs per node)."""
    return type(e) is Seq and not e.items


def is_nothing(e: Expr) -> bool:
    """``e == NOTHING``, as a type test."""
    return type(e) is Choice and not e.items


# --------------------------------------------------------------------------- grammar


@dataclass(frozen=True)
class Grammar:
    """Named rules plus the start rule. ``rules`` is read-only; insertion order is kept.

    ``shared`` names rules a front end makes as per-process constants: the same body objects,
    referencing only each other and the same other rules, in every grammar that holds them
    (JSON Schema's any-value rules). The compiler may then lower them once per process and
    reuse the result (``compiler.tables``); it checks the bodies, so a wrong promise costs
    only the reuse. The language never depends on it."""

    rules: Mapping[str, Expr]
    start: str = "start"
    shared: frozenset[str] = field(default=frozenset(), repr=False, compare=False)
    _frozen: tuple[tuple[str, Expr], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        frozen = tuple(self.rules.items())
        object.__setattr__(self, "rules", MappingProxyType(dict(frozen)))
        object.__setattr__(self, "_frozen", frozen)
        if self.start not in self.rules:
            raise ValueError(f"start rule {self.start!r} is not defined")
        undefined = sorted(self.shared - self.rules.keys())
        if undefined:
            raise ValueError(f"shared rules not defined: {', '.join(undefined)}")
        missing = sorted(ref_names(*(e for _, e in frozen)) - set(self.rules))
        if missing:
            raise ValueError(f"undefined rules referenced: {', '.join(missing)}")

    def __hash__(self) -> int:
        return hash((self._frozen, self.start))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Grammar)
            and self.start == other.start
            and self._frozen == other._frozen
        )

    def __str__(self) -> str:
        order = [self.start] + [n for n in self.rules if n != self.start]
        return "\n".join(f"{name}: {self.rules[name]}" for name in order)

    def fingerprint(self) -> str:
        """A stable hex digest of the grammar (cache keys)."""
        return hashlib.sha256(str(self).encode()).hexdigest()

    @classmethod
    def single(cls, expr: Expr, name: str = "start") -> Grammar:
        """A grammar with one rule."""
        return cls({name: expr}, start=name)


@dataclass(frozen=True)
class WhitespaceGaps:
    """A front end's promise about a grammar of JSON text: its rule ``rule`` is
    ``[\t\n\r ]{0,bound}``, used once per gap between two tokens (never two gaps side by side),
    and is the only whitespace outside strings. The compiler may then leave the gaps unbounded
    and have the matcher bound each run of whitespace outside strings instead, which is the same
    language (``matcher.whitespace``)."""

    rule: str
    bound: int


# --------------------------------------------------------------------------- constructors


def lit(text: str) -> Expr:
    """A literal; the empty string is EMPTY."""
    return Literal(text) if text else EMPTY


def chars(ranges: Iterable[tuple[int, int]]) -> CharClass:
    """A character class from any (possibly overlapping, unsorted) inclusive ranges."""
    out = object.__new__(CharClass)  # normalised here: no second pass to check it
    object.__setattr__(out, "ranges", _normalize_ranges(tuple(ranges)))
    return out


def char_set(text: str) -> CharClass:
    """A class of exactly the characters in ``text``."""
    return chars((ord(c), ord(c)) for c in text)


def seq(*items: Expr) -> Expr:
    """Concatenation, flattened; literals merged; EMPTY dropped; NOTHING absorbs."""
    out: list[Expr] = []
    for item in items:
        for part in item.items if type(item) is Seq else (item,):
            # equality with NOTHING / EMPTY, spelled as type tests (this runs per IR node built)
            kind = type(part)
            if kind is Choice and not part.items:  # type: ignore[union-attr]
                return NOTHING
            if kind is Literal and out and type(out[-1]) is Literal:
                out[-1] = Literal(out[-1].text + part.text)  # type: ignore[union-attr]
            elif kind is not Seq or part.items:  # type: ignore[union-attr]
                out.append(part)
    return out[0] if len(out) == 1 else Seq(tuple(out))


def choice(*items: Expr) -> Expr:
    """Alternation, flattened, duplicates removed (first kept); NOTHING dropped."""
    parts: list[Expr] = []
    for item in items:
        parts.extend(item.items if isinstance(item, Choice) else (item,))
    if len(parts) > 16:  # hash each part once instead of comparing all pairs
        out = list(dict.fromkeys(parts))
    else:
        out = []
        for part in parts:
            if part not in out:
                out.append(part)
    return out[0] if len(out) == 1 else Choice(tuple(out))


def repeat(item: Expr, min: int = 0, max: int | None = None) -> Expr:
    """``item{min,max}`` with the trivial cases folded."""
    if max == 0 or item == EMPTY:
        return EMPTY
    if item == NOTHING:
        return EMPTY if min == 0 else NOTHING
    if min == 1 and max == 1:
        return item
    return Repeat(item, min, max)


def optional(item: Expr) -> Expr:
    return repeat(item, 0, 1)


def capped(item: Expr, max: int) -> Expr:
    """``Capped(item, max)`` with the trivial items folded: NOTHING and EMPTY need no count.
    (A cap of 0 leaves the empty string if ``item`` derives it: the compiler folds that, as
    only it knows which rules are nullable.)"""
    if item == NOTHING or item == EMPTY:
        return item
    return Capped(item, max)


# --------------------------------------------------------------------------- traversal


def children(expr: Expr) -> tuple[Expr, ...]:
    return _CHILDREN[type(expr)](expr)


def _items(expr: Seq | Choice) -> tuple[Expr, ...]:
    return expr.items


def _item(expr: Repeat | Capped) -> tuple[Expr, ...]:
    return (expr.item,)


def _no_children(_: Expr) -> tuple[Expr, ...]:
    return ()


# by exact type: the walks below ask this of every node, and a lookup costs a third of an
# ``isinstance`` chain (the expression classes are final)
_CHILDREN: dict[type, Callable[[Expr], tuple[Expr, ...]]] = {
    Seq: _items, Choice: _items, Repeat: _item, Capped: _item,  # type: ignore[dict-item]
    Literal: _no_children, CharClass: _no_children, Ref: _no_children,
    Excluding: _no_children, Decoding: _no_children,
}


def iter_refs(expr: Expr) -> Iterable[Ref]:
    """Every ``Ref`` inside ``expr`` (with repeats: once per path to it)."""
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, Ref):
            yield e
        stack.extend(children(e))


def ref_names(*exprs: Expr) -> frozenset[str]:
    """The names of the rules referenced inside ``exprs`` (``node_facts``)."""
    if len(exprs) == 1:
        return node_facts(exprs[0]).refs
    return frozenset().union(*(node_facts(e).refs for e in exprs))


def known_ref_names(expr: Expr) -> frozenset[str] | None:
    """``ref_names(expr)`` if some walk has already found it (kept on the node), else None:
    for callers that only want the answer where it costs nothing."""
    if isinstance(expr, _FACT_LEAVES):
        return _NO_REFS
    facts = expr.__dict__.get("_facts")
    return None if facts is None else facts.refs


DEAD_CLASS, DEAD_CHOICE = 1, 2  # bits of ``NodeFacts.dead``


class NodeFacts(NamedTuple):
    """What the compile passes ask of every rule body, found in one walk (``node_facts``)."""

    refs: frozenset[str]  # the names of the rules referenced inside
    size: int  # nodes as the lexer reads them: as a tree, where a reference (its rule is not
    # inlined) and a node marked ``one_symbol`` (a JSON-encoded character) count one each
    dead: int  # parts that derive nothing whatever the rules: an empty ``CharClass`` or
    # ``Excluding`` inside (``DEAD_CLASS``), a ``NOTHING`` inside (``DEAD_CHOICE``)
    expansion: int  # the product of the repeat bounds along the most deeply counted path
    # (``x{0,5}{0,4}`` 20; ``x{m,}`` counts ``m + 1``; a ``one_symbol`` node 1; a ``Decoding``
    # as many characters as its automaton keeps apart): how many copies of a piece a DFA of
    # this expression keeps apart
    big: int  # the largest expansion of a repeat inside (0: none; ``CAPPED_EXPANSION`` with
    # a ``Capped`` inside, which is bigger than any bound)
    gaps: frozenset[int]  # the bounds ``b`` of the whitespace gaps ``[ \t\n\r]{0,b}`` inside
    # (``WhitespaceGaps``), not counting a ``one_symbol`` node's (a string's characters)


CAPPED_EXPANSION = 1 << 62  # ``NodeFacts.big`` of a ``Capped`` node
_NO_REFS: frozenset[str] = frozenset()
_FACT_LEAVES = (Literal, CharClass, Excluding)  # answered on the spot, keeping nothing
_NO_GAPS: frozenset[int] = frozenset()
_LEAF_FACTS = NodeFacts(_NO_REFS, 1, 0, 1, 0, _NO_GAPS)
_EMPTY_LEAF_FACTS = NodeFacts(_NO_REFS, 1, DEAD_CLASS, 1, 0, _NO_GAPS)


def node_facts(root: Expr) -> NodeFacts:
    """``root``'s ``NodeFacts``. Each composite node (and ``Ref``) keeps its answer, as
    ``_CachedHash`` keeps its hash, so a sub-expression shared by many rules and grammars (a
    JSON character's encodings) is walked once in its life, not once per path to it
    (``kept_on_nodes``)."""
    kept = root.__dict__.get("_facts")  # (the common case, without the walk's set-up call)
    if kept is not None:
        return kept
    return kept_on_nodes(root, "_facts", _FACT_LEAVES, _leaf_facts, _facts_here)


def one_symbol(expr: Expr) -> None:
    """Read ``expr`` as one symbol in its ``NodeFacts`` wherever it stands (size 1, no counted
    repeat, no whitespace gap): a front end's one symbol spelled by many nodes (a JSON-encoded
    character, ``encodings.encode_class``), so a string's size grows with its structure, not
    with the ~20 spellings of each character, and the counted hex digits of its ``\\uXXXX``
    spellings are no counted repeat of the string."""
    if not isinstance(expr, _FACT_LEAVES):
        facts = node_facts(expr)._replace(size=1, expansion=1, big=0, gaps=_NO_GAPS)
        object.__setattr__(expr, "_facts", facts)


def _leaf_facts(e: Expr) -> NodeFacts:
    """The facts of a ``_FACT_LEAVES`` node, kept nowhere."""
    if isinstance(e, (CharClass, Excluding)) and e.is_empty:
        return _EMPTY_LEAF_FACTS
    return _LEAF_FACTS


def _facts_here(e: Expr, kids: list[NodeFacts]) -> NodeFacts:
    """``e``'s facts from its children's."""
    if isinstance(e, Ref):
        return NodeFacts(frozenset((e.name,)), 1, 0, 1, 0, _NO_GAPS)
    if isinstance(e, Decoding):  # kept on the node: its depth is a walk of its automaton
        depth = e.dfa.depth()
        dead = DEAD_CLASS if e.is_empty else 0
        return NodeFacts(_NO_REFS, 1, dead, *((depth, depth) if depth > 1 else (1, 0)),
                         _NO_GAPS)
    size = 1
    dead = DEAD_CHOICE if not kids and isinstance(e, Choice) else 0
    expansion, big = 1, 0
    gaps = _NO_GAPS
    refs = _NO_REFS
    more_refs: list[frozenset[str]] = []  # of other children: one union at the end, not one
    # per child (an object state's choice of n members, each with its own rule, is O(n))
    # each child's facts unpacked at once (an object state's choice of n steps reads no field
    # by name)
    for f_refs, f_size, f_dead, f_expansion, f_big, f_gaps in kids:
        size += f_size
        dead |= f_dead
        if f_expansion > expansion:
            expansion = f_expansion
        if f_big > big:
            big = f_big
        if f_gaps and f_gaps is not gaps:
            gaps = f_gaps | gaps if gaps else f_gaps
        if f_refs and f_refs is not refs:
            if refs:
                more_refs.append(f_refs)
            else:
                refs = f_refs
    if more_refs:
        refs = refs.union(*more_refs)
    if isinstance(e, Repeat):
        expansion *= e.min + 1 if e.max is None else max(e.max, 1)
        big = max(big, expansion)
        if e.min == 0 and e.max is not None and e.item == JSON_WHITESPACE:
            gaps = frozenset((e.max,))
    elif isinstance(e, Capped):
        big = CAPPED_EXPANSION
    return NodeFacts(refs, size, dead, expansion, big, gaps)


def ref_counts(root: Expr) -> Mapping[str, int]:
    """How many times ``root`` references each rule, per path (a shared node counts once per
    path to it). Kept on the nodes like ``node_facts``, but a walk of its own, asked only of
    the rule bodies whose inlined size the regular analysis adds up: an object state's
    choice of n steps would cost a dict of n names, n**2 entries in all, that nobody reads.
    The answer is shared: never mutate it."""
    return kept_on_nodes(root, "_ref_counts", _FACT_LEAVES, _no_counts, _counts_here)


def _no_counts(_: Expr) -> Mapping[str, int]:
    return _NO_COUNTS


def _counts_here(e: Expr, kids: list[Mapping[str, int]]) -> Mapping[str, int]:
    if isinstance(e, Ref):
        return {e.name: 1}
    counts = _NO_COUNTS
    own: dict[str, int] | None = None  # this node's own dict, once two children have counts
    for k in kids:
        if not k:
            continue
        if own is None:
            if not counts:
                counts = k  # shared with the child
                continue
            counts = own = dict(counts)
        for name, c in k.items():
            own[name] = own.get(name, 0) + c
    return counts


_NO_COUNTS: Mapping[str, int] = MappingProxyType({})

_T = TypeVar("_T")


def kept_on_nodes(root: Expr, attr: str, leaves: tuple[type[Expr], ...],
                  leaf: Callable[[Expr], _T], answer: Callable[[Expr, list[_T]], _T]) -> _T:
    """``answer(root, its children's answers)``, kept on each composite node under ``attr``: a
    sub-expression shared by many rules and grammars (a JSON character's encodings, a format's
    spellings) is answered once in its life, each node after its children, whose answers are
    read off them (no call per child). ``leaf`` answers the ``leaves`` types, which keep
    nothing. The walk is iterative, so deep expressions cost no stack."""
    if isinstance(root, leaves):
        return leaf(root)
    hit = root.__dict__.get(attr)
    if hit is not None:  # the common case: no walk to set up
        return hit
    stack = [root]
    while stack:
        e = stack[-1]
        if attr in e.__dict__:
            stack.pop()
            continue
        answers: list[_T] = []
        pending: list[Expr] = []
        for k in _CHILDREN[type(e)](e):  # one pass: answers, or the children still to answer
            if isinstance(k, leaves):
                if not pending:
                    answers.append(leaf(k))
                continue
            kept = k.__dict__.get(attr)
            if kept is None:
                pending.append(k)
            elif not pending:
                answers.append(kept)
        if pending:
            stack += pending
            continue
        stack.pop()
        object.__setattr__(e, attr, answer(e, answers))
    result: _T = root.__dict__[attr]
    return result


# --------------------------------------------------------------------------- helpers


def _normalize_ranges(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    cut: list[tuple[int, int]] = []
    for a, b in ranges:
        a, b = max(0, a), min(MAX_CODE_POINT, b)
        if a > b:
            continue
        # remove the surrogate block
        if a < SURROGATES[0] and b > SURROGATES[1]:
            cut += [(a, SURROGATES[0] - 1), (SURROGATES[1] + 1, b)]
        elif SURROGATES[0] <= a <= SURROGATES[1] and b > SURROGATES[1]:
            cut.append((SURROGATES[1] + 1, b))
        elif a < SURROGATES[0] <= b <= SURROGATES[1]:
            cut.append((a, SURROGATES[0] - 1))
        elif not (SURROGATES[0] <= a and b <= SURROGATES[1]):
            cut.append((a, b))
    cut.sort()
    merged: list[tuple[int, int]] = []
    for a, b in cut:
        if merged and a <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return tuple(merged)


def _class_char(cp: int) -> str:
    c = chr(cp)
    if c in "]\\-^[":
        return "\\" + c
    if cp < 0x20 or cp == 0x7F or (0x80 <= cp < 0xA0) or not c.isprintable():
        return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"
    return c


def _paren(expr: Expr, kinds: tuple[type, ...]) -> str:
    text = str(expr)
    if isinstance(expr, kinds) and not (isinstance(expr, Seq) and not expr.items):
        if isinstance(expr, Repeat) and Repeat not in kinds:
            return text
        return f"({text})"
    return text


ANY_CHAR = CharClass(((0, SURROGATES[0] - 1), (SURROGATES[1] + 1, MAX_CODE_POINT)))
JSON_WHITESPACE = char_set(" \t\n\r")
"""The characters of a gap between JSON tokens (``WhitespaceGaps``, ``NodeFacts.gaps``)."""


__all__ = [
    "ANY_CHAR",
    "CAPPED_EXPANSION",
    "DEAD_CHOICE",
    "DEAD_CLASS",
    "EMPTY",
    "NOTHING",
    "Capped",
    "CharClass",
    "Choice",
    "Decoding",
    "Expr",
    "Excluding",
    "Grammar",
    "JSON_WHITESPACE",
    "Literal",
    "NodeFacts",
    "Ref",
    "Repeat",
    "Seq",
    "WhitespaceGaps",
    "capped",
    "char_set",
    "chars",
    "children",
    "choice",
    "is_empty",
    "is_nothing",
    "iter_refs",
    "kept_on_nodes",
    "known_ref_names",
    "node_facts",
    "one_symbol",
    "ref_counts",
    "ref_names",
    "lit",
    "optional",
    "repeat",
    "seq",
]
