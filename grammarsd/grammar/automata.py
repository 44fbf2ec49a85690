"""Character-level DFAs over Unicode scalar values, and their language algebra.

This module owns regular languages *as sets of strings of code points*: building a DFA from
regular IR (``Expr`` without ``Ref``), the Boolean algebra (intersection, union, complement,
difference), emptiness, and the way back to IR. It knows nothing of bytes or tokens; the
compiler lowers a ``CharDFA`` to UTF-8 bytes (``grammarsd.compiler.lexer``).

Alphabet. Symbols are Unicode scalar values (0..0x10FFFF minus the surrogates U+D800..U+DFFF),
handled symbolically: the code-point line is cut into *atoms*, maximal intervals on which every
transition of the automaton behaves the same. Subset and product constructions then run over a
small atom alphabet instead of 1.1 million code points.

Layout of a ``CharDFA`` (all arrays read-only)::

    bounds  int64 [A]     atom starts; bounds[0] == 0; atom i covers
                          bounds[i] .. bounds[i+1]-1 (the last atom ends at 0x10FFFF)
    trans   int32 [n, A]  next state, or -1 for the implicit dead state (a *partial* DFA)
    accept  bool  [n]

Canonical form (every public constructor returns it): start state 0; every state reachable and
co-reachable, except the empty language, which is the single non-accepting state with no
transitions; minimal; states numbered breadth-first with atoms in ascending order; adjacent
atoms with identical columns merged; no surrogate has a live transition. Two ``CharDFA`` are
therefore ``==`` iff they accept the same language.

Back to IR: ``to_expr`` (state elimination; compact for small automata, but can grow
exponentially, so it is size- and depth-limited) and ``to_rules`` (one right-linear rule per
state; always linear, for big automata such as a pattern intersected with a length bound).

Algorithms: Thompson NFA + subset construction (bounded repeats unrolled as nested options,
so ``[a-z]{1,1000}`` stays linear), Hopcroft's partition refinement on the table with columns
grouped into classes, product construction for the Boolean operations, and state elimination
for ``to_expr``. The table-level helpers (``canonical_table``) are shared with the byte lexer.
The hot loops (subset construction, products, and the whole of ``canonical_table``) run as
numba kernels in ``grammar._canonical``; this module builds their flat inputs.
"""

from __future__ import annotations

import functools
import heapq
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Literal as TypingLiteral

import numpy as np

from grammarsd.errors import GrammarError, GrammarTooLargeError
from grammarsd.grammar._canonical import canonical, product, subset_construction
from grammarsd.grammar.encodings import encode_class, expand_excluding, leaving_class, one_char
from grammarsd.grammar.ir import (
    EMPTY,
    MAX_CODE_POINT,
    NOTHING,
    SURROGATES,
    Capped,
    CharClass,
    Choice,
    Decoding,
    Excluding,
    Expr,
    Literal,
    Ref,
    Repeat,
    Seq,
    chars,
    children,
    choice,
    lit,
    repeat,
    seq,
)

_SURROGATE_BOUNDS = (SURROGATES[0], SURROGATES[1] + 1)
_ProductOp = TypingLiteral["and", "or", "diff"]

TAG_OFFSET = MAX_CODE_POINT + 1
"""Symbol ``TAG_OFFSET + c`` of a tagged table stands for one *tagged* character ``c``."""


@dataclass(frozen=True, eq=False)
class TaggedOutside:
    """What ``tagged_table`` reads a recognised sub-expression as: the strings of tagged symbols
    from ``every`` that are not among a finite set of words (``tagged_outside``), given by the
    set's trie. ``nodes[0]`` is the root; each node is ``(final, other, kids)``: whether its
    prefix is a word, the class whose symbols leave the trie there, and ``(class, node)`` per
    child (the child's one-character class).

    Its fragment is one state per trie node and one for "left the trie", so it costs no walk of
    an expression spelling the trie (``ir.Excluding`` is one leaf)."""

    every: CharClass
    nodes: tuple[tuple[bool, CharClass, tuple[tuple[CharClass, int], ...]], ...]

    def classes(self) -> Iterator[CharClass]:
        """Every class the fragment reads (for the atom cuts)."""
        yield self.every
        for _, other, kids in self.nodes:
            yield other
            for kid, _ in kids:
                yield kid


@functools.lru_cache(maxsize=1024)
def tagged_outside(words: tuple[str, ...], every: CharClass) -> TaggedOutside:
    """The strings over ``every`` but the sorted, distinct ``words``, as a ``TaggedOutside``.

    Nodes are numbered breadth-first (``trie_nodes``)."""
    nodes = tuple((final, leaving_class(every, firsts), tuple((one_char(ch), k) for ch, k in kids))
                  for final, firsts, kids in trie_nodes(words, every))
    return TaggedOutside(every, nodes)


def trie_nodes(words: tuple[str, ...],
               every: CharClass) -> Iterator[tuple[bool, str, list[tuple[str, int]]]]:
    """The trie of the sorted, distinct ``words``, node by node breadth-first: whether the
    node's prefix is a word, the characters its children start with, and ``(character,
    node)`` for each child whose character is in ``every``.

    A node is a run ``words[lo:hi]`` sharing a prefix of ``depth`` characters; sorted, the
    prefix itself (if it is a word) comes first and the children are the runs of equal next
    characters."""
    runs = [(0, len(words), 0)]
    for lo, hi, depth in runs:  # grows as children are found
        final = len(words[lo]) == depth
        firsts = []
        kids = []
        i = lo + 1 if final else lo
        while i < hi:
            ch = words[i][depth]
            j = i + 1
            while j < hi and words[j][depth] == ch:
                j += 1
            firsts.append(ch)
            if ord(ch) in every:
                kids.append((ch, len(runs)))
                runs.append((i, j, depth + 1))
            i = j
        yield final, "".join(firsts), kids


@dataclass(frozen=True, eq=False)
class TaggedStates:
    """What ``tagged_table`` reads a recognised sub-expression as: the strings of tagged
    symbols spelling a word of a character automaton (``tagged_states``). ``nodes[0]`` is the
    start; each node is ``(final, edges)`` with ``(class, node)`` per edge."""

    nodes: tuple[tuple[bool, tuple[tuple[CharClass, int], ...]], ...]

    def classes(self) -> Iterator[CharClass]:
        """Every class the fragment reads (for the atom cuts)."""
        for _, edges in self.nodes:
            for cc, _ in edges:
                yield cc


@functools.lru_cache(maxsize=1024)
def tagged_states(dfa: CharDFA) -> TaggedStates:
    """``dfa``'s states and edges as a ``TaggedStates`` (the lexer reads ``ir.Decoding`` so)."""
    return TaggedStates(tuple((bool(final), tuple((cc, t) for t, cc in edges))
                              for final, edges in zip(dfa.accept.tolist(), _edge_classes(dfa),
                                                      strict=True)))


Tagged = CharClass | TaggedOutside | TaggedStates
Tagger = Callable[[Expr], Tagged | None]
"""Recognises sub-expressions that stand for one tagged character of a class, for the tagged
strings outside a set of words, or for the tagged strings of an automaton (else None)."""


# --------------------------------------------------------------------------- the automaton


class CharDFA:
    """An immutable, canonical (minimal, trimmed, partial) DFA over Unicode scalar values.

    See the module docstring for the array layout and the canonical-form invariants. Build one
    with ``CharDFA.from_expr``; every operation returns a new canonical ``CharDFA``.
    """

    __slots__ = ("bounds", "trans", "accept")

    bounds: np.ndarray  # int64 [A]
    trans: np.ndarray  # int32 [n, A]
    accept: np.ndarray  # bool [n]

    def __init__(self, bounds: np.ndarray, trans: np.ndarray, accept: np.ndarray) -> None:
        """Canonicalise any partial table over atoms (``bounds``, ``trans``, ``accept`` as in
        the module docstring; start 0). Transitions on surrogates are dropped. Prefer the
        named builders."""
        old_bounds = np.asarray(bounds, np.int64)
        trans = np.asarray(trans)
        if old_bounds.ndim != 1 or old_bounds[0] != 0 or (np.diff(old_bounds) <= 0).any():
            raise ValueError("bounds must be strictly increasing atom starts from 0")
        if trans.ndim != 2 or trans.shape[1] != len(old_bounds) or not len(trans):
            raise ValueError("trans must be [num_states >= 1, num_atoms]")
        if np.shape(accept) != (len(trans),) or (trans < -1).any() or (trans >= len(trans)).any():
            raise ValueError("accept must be [num_states] and targets in -1..num_states-1")
        bounds = np.union1d(old_bounds, np.array(_SURROGATE_BOUNDS, np.int64))
        trans = np.array(trans, np.int32)[:, _atom_map(old_bounds, bounds)]
        trans[:, _surrogate_atoms(bounds)] = -1
        trans, accept = canonical_table(trans, np.asarray(accept, bool))
        bounds, trans = _merge_atoms(bounds, trans)
        for arr in (bounds, trans, accept):
            arr.setflags(write=False)
        object.__setattr__(self, "bounds", bounds)
        object.__setattr__(self, "trans", trans)
        object.__setattr__(self, "accept", accept)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("CharDFA is immutable")

    # ---------------------------------------------------------------- construction

    @classmethod
    def from_expr(cls, expr: Expr, *, max_states: int = 10_000) -> CharDFA:
        """The DFA of a regular expression.

        Parameters
        ----------
        expr : Expr
            Regular IR: no ``Ref`` or ``Capped`` anywhere inside (raises ``GrammarError``
            otherwise). Literal characters that are lone surrogates match nothing (no scalar
            string contains one).
        max_states : int
            Limit on DFA states during subset construction; the NFA may hold at most
            ``max(100_000, 20 * max_states)`` states.

        Raises
        ------
        GrammarTooLargeError
            ``"dfa_states"`` or ``"nfa_states"`` when a limit is exceeded.
        """
        bounds = _atom_bounds(expr)
        nfa = _Nfa(bounds, max(100_000, 20 * max_states))
        nfa.share(expr)
        start, final = nfa.new(), nfa.new()
        nfa.build(expr, start, final)
        trans, accept = nfa.determinize(start, final, max_states)
        return cls(bounds, trans, accept)

    @classmethod
    def empty_language(cls) -> CharDFA:
        """The DFA accepting no string."""
        return cls(np.zeros(1, np.int64), np.full((1, 1), -1, np.int32), np.zeros(1, bool))

    # ---------------------------------------------------------------- properties

    @property
    def num_states(self) -> int:
        """Number of states (the minimal partial DFA; the dead state is not counted)."""
        return int(self.trans.shape[0])

    @property
    def num_atoms(self) -> int:
        return int(self.bounds.shape[0])

    def atom_ranges(self) -> list[tuple[int, int]]:
        """The inclusive code-point interval of every atom, in order."""
        ends = np.append(self.bounds[1:] - 1, MAX_CODE_POINT)
        return list(zip(self.bounds.tolist(), ends.tolist(), strict=True))

    def is_empty(self) -> bool:
        """True iff the language is empty."""
        return not bool(self.accept[0]) and bool((self.trans[0] < 0).all())

    def accepts_empty(self) -> bool:
        """True iff the empty string is in the language."""
        return bool(self.accept[0])

    def depth(self) -> int:
        """The most edges on a shortest path from the start to a state: how many characters the
        automaton keeps apart, as a counted repeat does (``[a-z]{1,200}`` 200; a loop one)."""
        seen = np.zeros(self.num_states, np.bool_)
        seen[0] = True
        frontier, depth = np.zeros(1, np.int64), 0
        while True:
            targets = np.unique(self.trans[frontier])
            targets = targets[targets >= 0]
            targets = targets[~seen[targets]]
            if not len(targets):
                return depth
            seen[targets] = True
            frontier, depth = targets, depth + 1

    def word_lengths(self) -> tuple[int, int | None] | None:
        """``(shortest, longest)`` word length, ``longest`` None when words are arbitrarily
        long; None for the empty language. The canonical table is trimmed, so the language
        is finite iff the table is acyclic: the longest distances are taken in a topological
        order (Kahn), the shortest breadth-first."""
        if self.is_empty():
            return None
        n = self.num_states
        src, atom = np.nonzero(self.trans >= 0)
        edges = np.unique(src * n + self.trans[src, atom])  # distinct (source, target) pairs
        ptr = np.searchsorted(edges // n, np.arange(n + 1)).tolist()
        dst = (edges % n).tolist()
        shortest = [-1] * n
        shortest[0] = 0
        queue = [0]
        for q in queue:
            for t in dst[ptr[q] : ptr[q + 1]]:
                if shortest[t] < 0:
                    shortest[t] = shortest[q] + 1
                    queue.append(t)
        final = np.flatnonzero(self.accept).tolist()
        first = min(shortest[q] for q in final)
        indegree = np.bincount(edges % n, minlength=n).tolist()
        longest = [0] * n
        ready, peeled = [0], 0
        while ready:
            q = ready.pop()
            peeled += 1
            for t in dst[ptr[q] : ptr[q + 1]]:
                longest[t] = max(longest[t], longest[q] + 1)
                indegree[t] -= 1
                if not indegree[t]:
                    ready.append(t)
        return first, (max(longest[q] for q in final) if peeled == n else None)

    def matches(self, text: str) -> bool:
        """True iff ``text`` is in the language (strings with surrogates never are)."""
        if not text:
            return bool(self.accept[0])
        cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        atoms = (np.searchsorted(self.bounds, cps, side="right") - 1).tolist()
        state = 0
        trans = self.trans
        for a in atoms:
            state = int(trans[state, a])
            if state < 0:
                return False
        return bool(self.accept[state])

    def __eq__(self, other: object) -> bool:
        """Language equality (canonical forms are unique)."""
        if not isinstance(other, CharDFA):
            return NotImplemented
        return (
            np.array_equal(self.bounds, other.bounds)
            and np.array_equal(self.trans, other.trans)
            and np.array_equal(self.accept, other.accept)
        )

    def __hash__(self) -> int:
        return hash((self.bounds.tobytes(), self.trans.tobytes(), self.accept.tobytes()))

    def __repr__(self) -> str:
        return f"CharDFA(num_states={self.num_states}, num_atoms={self.num_atoms})"

    # ---------------------------------------------------------------- algebra

    def minimize(self) -> CharDFA:
        """The minimal DFA; instances are always minimal, so this returns ``self``."""
        return self

    def intersect(self, other: CharDFA) -> CharDFA:
        """Strings in both languages."""
        return _product(self, other, "and")

    def union(self, other: CharDFA) -> CharDFA:
        """Strings in either language."""
        return _product(self, other, "or")

    def difference(self, other: CharDFA) -> CharDFA:
        """Strings in ``self`` but not in ``other``."""
        return _product(self, other, "diff")

    def complement(self) -> CharDFA:
        """All strings of Unicode scalar values not in the language."""
        sink = self.num_states  # completes the table; the constructor re-kills surrogates
        full = np.where(self.trans < 0, sink, self.trans)
        full = np.vstack([full, np.full((1, full.shape[1]), sink, np.int32)])
        return CharDFA(self.bounds, full, np.append(~self.accept, True))

    # ---------------------------------------------------------------- back to IR

    def to_expr(self, *, max_size: int = 100_000, max_depth: int = 200) -> Expr:
        """An IR expression for the language, by state elimination.

        The result uses ``Literal``, ``CharClass``, ``Seq``, ``Choice`` and ``Repeat`` only, and
        ``CharDFA.from_expr(d.to_expr()) == d``. ``NOTHING`` for the empty language.

        Raises
        ------
        GrammarTooLargeError
            ``"regex_size"`` when an intermediate expression exceeds ``max_size`` IR nodes, or
            ``"regex_depth"`` when it nests deeper than ``max_depth`` (deep IR would overflow
            the recursive passes downstream).
        """
        if self.is_empty():
            return NOTHING
        return _eliminate_states(self, max_size, max_depth)

    def to_rules(self, prefix: str) -> dict[str, Expr]:
        """A right-linear grammar for the language, linear in the number of states.

        Rule ``f"{prefix}{s}"`` derives exactly the strings accepted from state ``s``; the
        start rule is ``f"{prefix}0"`` and comes first. Each rule is a choice of
        ``class Ref(next)`` items, plus ``EMPTY`` for accepting states. Use it where
        ``to_expr`` would be too large (e.g. a pattern intersected with a length bound).
        The empty language gives ``{f"{prefix}0": NOTHING}``.
        """
        rules: dict[str, Expr] = {}
        for s, edges in enumerate(_labelled_edges(self)):
            items = [seq(label, Ref(f"{prefix}{t}")) for t, label in edges]
            if self.accept[s]:
                items.append(EMPTY)
            rules[f"{prefix}{s}"] = choice(*items) if items else NOTHING
        return rules


def tagged_table(
    expr: Expr, tag: Tagger, *, raw: CharClass | None = None, max_states: int = 10_000
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The minimal DFA of ``expr`` where each sub-expression ``e`` with ``tag(e) == cc`` is read
    as ONE symbol: a tagged character from ``cc``, or a plain one from ``cc & raw``.

    ``raw`` holds the characters a tagged symbol may also spell as themselves (a JSON string
    character spelled unescaped): those are read as plain characters, so they meet the plain
    characters of the rest of ``expr`` in one state, and a consumer spells tagged symbols only
    in their other ways.

    A sub-expression ``tag`` reads as a ``TaggedOutside`` is the strings of such symbols
    outside its words. The alphabet is two copies of the code points: ``c`` (plain) and
    ``TAG_OFFSET + c`` (tagged); ``tag`` is not consulted inside a recognised sub-expression.
    A consumer that knows what the tag means (say, "one JSON-encoded character") can then
    expand tagged symbols itself, without building an automaton for the expanded
    sub-expressions.

    Returns
    -------
    (bounds int64 [A], trans int32 [n, A], accept bool [n])
        Atoms over ``0 .. 2 * TAG_OFFSET - 1`` as in ``CharDFA`` (start 0, trimmed, minimal,
        breadth-first); no surrogate, plain or tagged, has a live transition.

    Raises
    ------
    GrammarTooLargeError
        ``"dfa_states"`` or ``"nfa_states"`` as in ``CharDFA.from_expr``.
    """
    bounds = _atom_bounds(expr, tag, raw=raw)
    nfa = _Nfa(bounds, max(100_000, 20 * max_states), tag, raw)
    nfa.share(expr)
    start, final = nfa.new(), nfa.new()
    nfa.build(expr, start, final)
    trans, accept = nfa.determinize(start, final, max_states)
    trans[:, _surrogate_atoms(bounds)] = -1
    shifted = np.flatnonzero((bounds >= TAG_OFFSET + SURROGATES[0])
                             & (bounds <= TAG_OFFSET + SURROGATES[1]))
    trans[:, shifted] = -1
    trans, accept = canonical_table(trans, accept)
    return bounds, trans, accept


# --------------------------------------------------------------------------- table helpers


def canonical_table(trans: np.ndarray, accept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Trim, minimise and renumber a partial DFA table.

    Parameters
    ----------
    trans : int32 [n, k], n >= 1
        Next state (0 .. n-1) or -1 (dead); start state 0. Any alphabet (atoms, bytes).
    accept : bool [n]

    Returns
    -------
    (trans int32 [m, k], accept bool [m]), C-contiguous
        The minimal equivalent partial DFA with every state reachable and co-reachable,
        numbered breadth-first (columns visited in order of first occurrence); the empty
        language comes back as one non-accepting state with no transitions. One call to
        ``_canonical.canonical`` (trim, Hopcroft, renumbering on the distinct columns).
    """
    if not len(trans) or np.shape(accept) != (len(trans),):
        raise ValueError("canonical_table needs trans [n >= 1, k] and accept [n]")
    return canonical(np.ascontiguousarray(trans, np.int32), np.ascontiguousarray(accept, bool))


def _merge_atoms(bounds: np.ndarray, trans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge adjacent atoms whose columns are identical."""
    if trans.shape[1] <= 1:
        return bounds[:1].copy(), np.ascontiguousarray(trans[:, :1])
    keep = np.ones(trans.shape[1], bool)
    keep[1:] = (trans[:, 1:] != trans[:, :-1]).any(axis=0)
    return bounds[keep], np.ascontiguousarray(trans[:, keep])


def _atom_map(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """For each atom of the refinement ``new``, the atom of ``old`` containing it."""
    return np.searchsorted(old, new, side="right") - 1


def _surrogate_atoms(bounds: np.ndarray) -> np.ndarray:
    """Indices of atoms inside the surrogate block (``bounds`` must cut at its edges)."""
    return np.flatnonzero((bounds >= SURROGATES[0]) & (bounds <= SURROGATES[1]))


# --------------------------------------------------------------------------- Thompson NFA


_NO_CHARS = CharClass(())


@functools.lru_cache(maxsize=1024)
def _raw_part(tagged: CharClass, raw: CharClass | None) -> CharClass:
    """The characters of a tagged class also read as plain ones (``tagged_table``)."""
    return _NO_CHARS if raw is None else tagged.intersect(raw)


def _atom_bounds(expr: Expr, tag: Tagger | None = None, *, refs: bool = False,
                 raw: CharClass | None = None) -> np.ndarray:
    """Atom starts: every class/literal boundary in ``expr``, plus 0 and the surrogate block
    (with ``tag``: also every boundary of a tagged class, shifted by ``TAG_OFFSET``, and of its
    part in ``raw``, not shifted). A ``Ref`` raises ``GrammarError`` unless ``refs`` (the
    caller then passes the referenced bodies inside ``expr`` too). Shared subexpressions are
    walked once."""
    cuts = {0, *_SURROGATE_BOUNDS}
    if tag is not None:
        cuts.update(TAG_OFFSET + b for b in (0, *_SURROGATE_BOUNDS))
    seen: set[int] = set()  # ids of walked subexpressions (all alive inside ``expr``)
    stack = [expr]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        tagged = tag(e) if tag is not None else None
        if tagged is not None:
            for cc in (tagged,) if isinstance(tagged, CharClass) else tagged.classes():
                for a, b in cc.ranges:
                    cuts.update((TAG_OFFSET + a, TAG_OFFSET + b + 1))
                for a, b in _raw_part(cc, raw).ranges:
                    cuts.update((a, b + 1))
        elif isinstance(e, Literal):
            for ch in e.text:
                cuts.update((ord(ch), ord(ch) + 1))
        elif isinstance(e, CharClass):
            for a, b in e.ranges:
                cuts.update((a, b + 1))
        elif isinstance(e, (Seq, Choice)):
            stack.extend(e.items)
        elif isinstance(e, Repeat):
            stack.append(e.item)
        elif isinstance(e, Excluding):  # not read as one symbol: its plain spelling
            stack.append(expand_excluding(e))
        elif isinstance(e, Decoding):  # not read as one symbol: its edges' plain spellings
            stack.extend(encode_class(cc) for cc in tagged_states(e.dfa).classes())
        elif isinstance(e, Ref) and not refs:
            raise GrammarError(
                f"rule reference {e.name!r} inside a regular expression",
                hint="CharDFA.from_expr takes regular IR only; inline or lex the rule first",
            )
        elif isinstance(e, Capped):
            raise GrammarError(
                f"a Capped node (at most {e.max} characters) inside a regular expression",
                hint="a Capped length bound is counted by the matcher, so it has no character "
                     "automaton here; the compiler lexes it as a terminal of its own",
            )
    cuts.discard(2 * TAG_OFFSET if tag is not None else TAG_OFFSET)
    return np.array(sorted(cuts), np.int64)


def _compound_nodes(roots: Iterable[Expr], tag: Tagger | None, shared: set[int],
                   met: AbstractSet[int] = frozenset()) -> set[int]:
    """The ids of the compound sub-expressions of ``roots`` (``Seq``, ``Choice``, ``Repeat``;
    not inside a node ``tag`` recognises); adds to ``shared`` those occurring more than once,
    counting an occurrence in other roots, which ``met`` holds the compound nodes of. A node
    counts once per parent that holds it (and per root), whatever the order of the walk."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        e = stack.pop()
        if not isinstance(e, (Seq, Choice, Repeat)):
            continue
        if id(e) in seen or id(e) in met:
            shared.add(id(e))
            continue
        seen.add(id(e))
        if tag is None or tag(e) is None:
            stack.extend(e.items if isinstance(e, (Seq, Choice)) else (e.item,))
    return seen


class _Nfa:
    """A Thompson NFA whose character edges are atom-index intervals.

    States are ``0 .. size-1``. Edges are kept flat, in no particular order (``determinize``
    sorts them by source): ``eps`` holds epsilon edges as ``source, target`` pairs and
    ``edges`` character edges as ``source, atom_lo, atom_hi, target``; the stamped copies of
    a repeat (``_copies``) come as arrays, ``eps_blocks`` int64 [k, 2] and ``edge_blocks``
    int64 [k, 4].
    No construction adds an edge into the ``start`` or out of the ``end`` it is given, so
    fragments can share endpoints (``Choice``) without creating spurious loops.

    Shared sub-expressions (``share``) are spelled once per ``end``: the first use builds the
    fragment from a fresh entry state, later uses with the same ``end`` add an epsilon edge to
    that entry. Nothing but those edges enters the fragment and it leaves only into ``end``, so
    the language is unchanged; a DAG such as "the rest of an object after property i" (shared
    by every earlier property) costs one copy instead of one per path to it.
    """

    STAMP_MIN = 64  # stamp a repeat's copies with numpy from this much work (states + edges)

    def __init__(self, bounds: np.ndarray, limit: int, tag: Tagger | None = None,
                 raw: CharClass | None = None) -> None:
        self.bounds = bounds
        self.starts = bounds.tolist()  # for ``bisect``: far cheaper than numpy per code point
        self.limit = limit
        self.tag = tag
        self.raw = raw  # see ``tagged_table``
        self.size = 0
        self.eps: list[int] = []
        self.edges: list[int] = []
        self.eps_blocks: list[np.ndarray] = []
        self.edge_blocks: list[np.ndarray] = []
        # id -> (the class or tagged expression, kept alive; its atom intervals)
        self.spans: dict[int, tuple[Expr, list[tuple[int, int]]]] = {}
        self.shared: set[int] = set()  # ids of compound nodes met more than once (``share``)
        self.entries: dict[tuple[int, int], int] = {}  # (id, end) -> entry of its fragment

    def share(self, *roots: Expr, met: AbstractSet[int] = frozenset(),
              shared: AbstractSet[int] = frozenset()) -> None:
        """Mark the compound sub-expressions of ``roots`` that occur more than once. ``met``
        and ``shared``: what ``_compound_nodes`` found in other roots of the same NFA (walked
        once for many NFAs), so that a node of ``roots`` met there is shared too."""
        self.shared.update(shared)
        _compound_nodes(roots, self.tag, self.shared, met)

    def new(self) -> int:
        q = self.size
        if q >= self.limit:
            raise GrammarTooLargeError("nfa_states", q + 1, self.limit)
        self.size = q + 1
        return q

    def atom(self, cp: int) -> int:
        return bisect_right(self.starts, cp) - 1

    def build(self, expr: Expr, start: int, end: int) -> None:
        """Add states and edges so that the paths ``start`` -> ``end`` spell ``expr``."""
        if id(expr) in self.shared:
            key = (id(expr), end)
            entry = self.entries.get(key)
            if entry is None:
                entry = self.entries[key] = self.new()
                self._spell(expr, entry, end)
            self.eps += (start, entry)
            return
        spans = self.spans.get(id(expr))
        if spans is not None:  # a class met before (a repeat builds its item once per copy)
            self._span(start, spans[1], end)
        else:
            self._spell(expr, start, end)

    def _spell(self, expr: Expr, start: int, end: int) -> None:
        tagged = self.tag(expr) if self.tag is not None else None
        if isinstance(tagged, TaggedOutside):
            self._outside(tagged, start, end)
        elif isinstance(tagged, TaggedStates):
            self._states(tagged, start, end, self._tagged_ranges)
        elif tagged is not None:  # one symbol of the tagged alphabet, or a raw plain one
            ranges = self._tagged_ranges(tagged)
            self.spans[id(expr)] = (expr, ranges)
            self._span(start, ranges, end)
        elif isinstance(expr, Literal):
            self._literal(expr.text, start, end)
        elif isinstance(expr, CharClass):
            ranges = [(self.atom(a), self.atom(b)) for a, b in expr.ranges]
            self.spans[id(expr)] = (expr, ranges)
            self._span(start, ranges, end)
        elif isinstance(expr, Seq):
            self._seq(expr.items, start, end)
        elif isinstance(expr, Choice):
            for item in expr.items:
                self.build(item, start, end)
        elif isinstance(expr, Repeat):
            self._repeat(expr, start, end)
        elif isinstance(expr, Excluding):  # not read as one symbol: its plain spelling
            self.build(expand_excluding(expr), start, end)
        elif isinstance(expr, Decoding):  # not read as one symbol: each edge spelled plainly
            self._states(tagged_states(expr.dfa), start, end, None)
        else:
            raise GrammarError(f"not regular IR: {expr!r}")

    def _tagged_ranges(self, tagged: CharClass) -> list[tuple[int, int]]:
        """The atom intervals of one tagged symbol from ``tagged``, or of its raw plain one."""
        ranges = [(self.atom(TAG_OFFSET + a), self.atom(TAG_OFFSET + b)) for a, b in tagged.ranges]
        ranges += [(self.atom(a), self.atom(b)) for a, b in _raw_part(tagged, self.raw).ranges]
        return ranges

    def _outside(self, words: TaggedOutside, start: int, end: int) -> None:
        """``start -> end`` over the tagged strings ``words`` stands for: a state per trie node
        (the root is ``start``), an epsilon edge to ``end`` from each that is not a word, and
        from each an edge on its ``other`` class to one state that loops on every symbol."""
        left = self.new()
        self._span(left, self._tagged_ranges(words.every), left)
        self.eps += (left, end)
        states = [start] + [self.new() for _ in words.nodes[1:]]
        for state, (final, other, kids) in zip(states, words.nodes, strict=True):
            if not final:
                self.eps += (state, end)
            if not other.is_empty:
                self._span(state, self._tagged_ranges(other), left)
            for kid, node in kids:
                self._span(state, self._tagged_ranges(kid), states[node])

    def _states(self, states: TaggedStates, start: int, end: int,
                tagged_ranges: Callable[[CharClass], list[tuple[int, int]]] | None) -> None:
        """``start -> end`` over the strings of an automaton's ``states``: a fresh NFA state per
        state (an edge may lead back to the first, and nothing may enter ``start``), an epsilon
        edge to ``end`` from each final one; each edge read as one tagged symbol of its class
        (``tagged_ranges``) or, with None, spelled as plain IR (``encode_class``)."""
        nodes = [self.new() for _ in states.nodes]
        self.eps += (start, nodes[0])
        for node, (final, edges) in zip(nodes, states.nodes, strict=True):
            if final:
                self.eps += (node, end)
            for cc, target in edges:
                if tagged_ranges is None:
                    self.build(encode_class(cc), node, nodes[target])
                else:
                    self._span(node, tagged_ranges(cc), nodes[target])

    def _span(self, start: int, ranges: list[tuple[int, int]], end: int) -> None:
        """Edges ``start -> end`` on the atom intervals ``ranges``."""
        edges = self.edges
        for a, b in ranges:
            edges += (start, a, b, end)

    def _literal(self, text: str, start: int, end: int) -> None:
        """A chain of fresh states ``start -> end`` spelling ``text``."""
        if not text:
            self.eps += (start, end)
            return
        lo, hi = SURROGATES
        cps = [ord(ch) for ch in text]
        if any(lo <= cp <= hi for cp in cps):
            return  # no scalar-value string contains a surrogate: empty language
        starts, edges = self.starts, self.edges
        cur = start
        for cp in cps[:-1]:
            a = bisect_right(starts, cp) - 1
            nxt = self.new()
            edges += (cur, a, a, nxt)
            cur = nxt
        a = bisect_right(starts, cps[-1]) - 1
        edges += (cur, a, a, end)

    def _seq(self, items: tuple[Expr, ...], start: int, end: int) -> None:
        """The items one after another, through fresh states."""
        if not items:
            self.eps += (start, end)
            return
        cur = start
        for item in items[:-1]:
            nxt = self.new()
            self.build(item, cur, nxt)
            cur = nxt
        self.build(items[-1], cur, end)

    def _repeat(self, expr: Repeat, start: int, end: int) -> None:
        # item{m} then either a loop (max=None) or (max-m) *nested* options, so that every
        # epsilon closure stays small: x{2,4} = x x (x (x)?)?
        item = expr.item
        cur = self.new()
        self.eps += (start, cur)
        cur = self._copies(item, cur, expr.min, None)
        if expr.max is None:
            body_start, body_end = self.new(), self.new()
            self.build(item, body_start, body_end)
            self.eps += (cur, body_start, body_end, cur)
        else:
            cur = self._copies(item, cur, expr.max - expr.min, end)
        self.eps += (cur, end)

    def _copies(self, item: Expr, cur: int, count: int, out: int | None) -> int:
        """``count`` copies of ``item`` one after another from ``cur``, each through a fresh
        end state, which is returned; with ``out``, an epsilon edge to ``out`` from the start of
        every copy. The first copy is built; the others are stamped from it (``_stamp``) when
        that saves work, else built too."""
        for done in range(count):
            mark = (self.size, len(self.eps), len(self.edges), len(self.eps_blocks),
                    len(self.edge_blocks))
            if out is not None:
                self.eps += (cur, out)
            nxt = self.new()
            self.build(item, cur, nxt)
            left = count - done - 1
            if left and self._stampable() and left * (
                    self.size - mark[0] + len(self.edges) - mark[2]) >= self.STAMP_MIN:
                return self._stamp(mark, cur, left)
            cur = nxt
        return cur

    def _stampable(self) -> bool:
        """Whether a copy reaches no state outside itself but its start and ``out``."""
        return True

    def _stamp(self, mark: tuple[int, int, int, int, int], cur: int, left: int) -> int:
        """Append ``left`` more copies of what was added since ``mark`` (one copy, from
        ``cur``; its states are ``mark[0] ..``): copy ``j`` has its states shifted by ``j``
        copies and starts where copy ``j - 1`` ends. Returns the last copy's end."""
        first, stride = mark[0], self.size - mark[0]
        if self.size + left * stride > self.limit:
            raise GrammarTooLargeError("nfa_states", self.limit + 1, self.limit)
        shift = np.arange(1, left + 1, dtype=np.int64)[:, None, None] * stride
        for flat, start, blocks, since, width in (
                (self.eps, mark[1], self.eps_blocks, mark[3], 2),
                (self.edges, mark[2], self.edge_blocks, mark[4], 4)):
            made = np.concatenate([np.array(flat[start:], np.int64).reshape(-1, width),
                                   *blocks[since:]])
            ends = made[:, :: width - 1]  # source and target columns
            copies = np.broadcast_to(made, (left, *made.shape)).copy()
            copies[:, :, :: width - 1] = np.where(
                ends >= first, ends + shift, np.where(ends == cur, first - stride + shift, ends))
            blocks.append(copies.reshape(-1, width))
        self.size += left * stride
        return first + left * stride

    def determinize(self, start: int, final: int, max_states: int) -> tuple[np.ndarray, np.ndarray]:
        """Subset construction over atoms; returns (trans int32 [n, A], accept bool [n]).

        DFA states are the sets of *important* NFA states (with character edges, or
        ``final``) of epsilon closures; the construction runs in ``_canonical.subsets``, whose
        bounds raise ``GrammarTooLargeError`` (``_canonical.subset_construction``)."""
        n = self.size
        eps = np.concatenate([np.array(self.eps, np.int64).reshape(-1, 2), *self.eps_blocks])
        eps_ptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(eps[:, 0], minlength=n), out=eps_ptr[1:])
        eps_nbr = eps[np.argsort(eps[:, 0], kind="stable"), 1]
        edges = np.concatenate([np.array(self.edges, np.int64).reshape(-1, 4),
                                *self.edge_blocks])
        edge_ptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(edges[:, 0], minlength=n), out=edge_ptr[1:])
        important = edge_ptr[1:] > edge_ptr[:-1]
        important[final] = True
        by_source = edges[np.argsort(edges[:, 0], kind="stable")].T  # each state's in order
        return subset_construction(len(self.bounds), eps_ptr, eps_nbr, edge_ptr,
                                   np.ascontiguousarray(by_source[1]),
                                   np.ascontiguousarray(by_source[2]),
                                   np.ascontiguousarray(by_source[3]), important, start, final,
                                   max_states)


# --------------------------------------------------------------------------- products


def _product(left: CharDFA, right: CharDFA, op: _ProductOp) -> CharDFA:
    """Product construction over the common refinement of both atom partitions."""
    bounds = np.union1d(left.bounds, right.bounds)
    t1 = left.trans[:, _atom_map(left.bounds, bounds)]
    t2 = right.trans[:, _atom_map(right.bounds, bounds)]
    trans, accept = product(np.ascontiguousarray(t1), np.ascontiguousarray(t2), left.accept,
                            right.accept, ("and", "or", "diff").index(op))
    return CharDFA(bounds, trans, accept)


# --------------------------------------------------------------------------- state elimination


def _edge_classes(dfa: CharDFA) -> list[list[tuple[int, CharClass]]]:
    """For every state, ``(target, class)`` per target: one class per edge."""
    ranges = dfa.atom_ranges()
    out: list[list[tuple[int, CharClass]]] = []
    for row in dfa.trans.tolist():
        by_target: dict[int, list[tuple[int, int]]] = {}
        for atom, t in enumerate(row):
            if t >= 0:
                by_target.setdefault(t, []).append(ranges[atom])
        out.append([(t, chars(rs)) for t, rs in by_target.items()])
    return out


def _labelled_edges(dfa: CharDFA) -> list[list[tuple[int, Expr]]]:
    """For every state, ``(target, label)`` per target: one class (or literal) per edge."""
    return [[(t, lit(chr(cc.ranges[0][0])) if len(cc.ranges) == 1
              and cc.ranges[0][0] == cc.ranges[0][1] else cc) for t, cc in edges]
            for edges in _edge_classes(dfa)]


class _Measure:
    """Size (IR nodes; a literal counts one per character) and nesting depth of expressions.

    Memoised by identity (the expression is kept alive so its id stays unique); every
    expression state elimination builds has memoised children, so recursion stays shallow.
    """

    def __init__(self) -> None:
        self.memo: dict[int, tuple[int, int, Expr]] = {}

    def __call__(self, expr: Expr) -> tuple[int, int]:
        hit = self.memo.get(id(expr))
        if hit is None:
            kids = [self(k) for k in children(expr)]
            own = max(1, len(expr.text)) if isinstance(expr, Literal) else 1
            hit = (own + sum(s for s, _ in kids), 1 + max((d for _, d in kids), default=0), expr)
            self.memo[id(expr)] = hit
        return hit[0], hit[1]


def _cat(left: Expr, right: Expr) -> Expr:
    """``left right``, folding ``x x{m,n}`` and ``x{m,n} x`` into ``x{m+1,n+1}``."""
    for one, rep in ((left, right), (right, left)):
        if isinstance(rep, Repeat) and rep.item == one:
            return Repeat(one, rep.min + 1, None if rep.max is None else rep.max + 1)
    return seq(left, right)


def _alt(a: Expr, b: Expr) -> Expr:
    """``a | b`` with the empty string folded into an option (``x{1,n} | ""`` is ``x{0,n}``)."""
    if a == EMPTY:
        a, b = b, a
    if b != EMPTY:
        return choice(a, b)
    if isinstance(a, Repeat) and a.min <= 1:
        return Repeat(a.item, 0, a.max)
    return repeat(a, 0, 1)


def _eliminate_states(dfa: CharDFA, max_size: int, max_depth: int) -> Expr:
    """Brzozowski-McCluskey state elimination on the generalised NFA of ``dfa``."""
    measure = _Measure()
    n = dfa.num_states
    start, final = n, n + 1
    out: list[dict[int, Expr]] = [{} for _ in range(n + 2)]
    inn: list[dict[int, Expr]] = [{} for _ in range(n + 2)]

    def put(p: int, q: int, e: Expr) -> None:
        if q in out[p]:
            e = _alt(out[p][q], e)
        size, depth = measure(e)
        if size > max_size:
            raise GrammarTooLargeError("regex_size", size, max_size)
        if depth > max_depth:
            raise GrammarTooLargeError("regex_depth", depth, max_depth)
        out[p][q] = inn[q][p] = e

    for s, edges in enumerate(_labelled_edges(dfa)):
        for t, label in edges:
            put(s, t, label)
    put(start, 0, EMPTY)
    for s in np.flatnonzero(dfa.accept).tolist():
        put(s, final, EMPTY)

    def key(s: int) -> tuple[int, int]:
        return len(inn[s]) * len(out[s]), s

    # the state of least key next: a heap whose stale entries (keys since changed) are skipped;
    # only the neighbours of an eliminated state change keys, and they are pushed again
    remaining = set(range(n))
    heap = [key(s) for s in range(n)]
    heapq.heapify(heap)
    while remaining:
        entry = heapq.heappop(heap)
        k = entry[1]
        if k not in remaining or entry != key(k):
            continue
        remaining.discard(k)
        loop = out[k].pop(k, None)
        inn[k].pop(k, None)
        mid = repeat(loop, 0, None) if loop is not None else EMPTY
        for p, e_pk in list(inn[k].items()):
            del out[p][k]
            for q, e_kq in out[k].items():
                put(p, q, _cat(_cat(e_pk, mid), e_kq))
        for q in out[k]:
            del inn[q][k]
        for s in {*inn[k], *out[k]} & remaining:
            heapq.heappush(heap, key(s))
        out[k].clear()
        inn[k].clear()
    return out[start].get(final, NOTHING)


__all__ = ["TAG_OFFSET", "CharDFA", "Tagged", "TaggedOutside", "TaggedStates", "Tagger",
           "canonical_table", "tagged_outside", "tagged_states", "tagged_table", "trie_nodes"]
