"""The reference recognizer: the slow, obviously correct oracle every fast path is tested against.

It owns the *definition* of exactness for token masks. It interprets the grammar IR directly over
Unicode code points and shares no code with the compiler or the fast matcher: no bytes-level
automata, no DFAs, no token trie.

How it works
------------
1. **Lowering.** The IR is rewritten into plain BNF (``_Bnf``): nonterminals, and productions whose
   symbols are nonterminals or ``CharClass`` terminals. A literal becomes one single-character
   terminal per character; ``Choice`` and ``Repeat`` get helper nonterminals; ``item{m,n}`` is
   unrolled into ``m`` copies of ``item`` followed by a chain of ``n - m`` nested optionals, and
   ``item{m,}`` into ``m`` copies followed by a left-recursive star ``S -> ε | S item``.
   ``Capped(item, max)`` becomes a nonterminal without productions, plus a goal ``G -> item``.
   ``Excluding`` is read as its plain IR (``encodings.expand_excluding``), ``Decoding`` as one
   nonterminal per state of its automaton.
2. **Trimming.** Productions that mention an unproductive symbol (a nonterminal deriving no
   terminal string, an empty class, or a capped symbol whose item has no string decoding to at
   most ``max`` characters) are dropped. Afterwards every symbol that occurs derives some string,
   which is what makes "non-empty Earley set" mean "viable prefix" (see ``_Chart``).
3. **Earley.** A textbook Earley recognizer over code points, with nullable nonterminals handled
   as in Aycock & Horspool, "Practical Earley Parsing" (2002): when predicting a nullable
   nonterminal, the predicting item is also advanced past it.
4. **Capped regions.** Predicting a capped symbol at set ``i`` starts a ``_Run``: a nested Earley
   chart for ``G`` over the text since ``i``, beside a JSON string-body decoder (``_DECODER``)
   counting the characters begun. The run is one multi-character "scan": it completes the
   symbol wherever the nested chart accepts at a character boundary, and it dies unless its
   count plus the fewest characters that can still finish the item (``_Chart.rest``, a
   shortest-path computation over the nested chart in the (min, +) semiring) is at most ``max``.
   So a prefix is viable iff it extends to a string of the language, even where the item
   still needs characters (``"ab "`` cannot finish ``(\\S+ ){0,3}\\S+`` with ``max = 3``).

Bytes are decoded strictly as UTF-8. A prefix may end inside a multi-byte character; the code
points whose encoding starts with those bytes form one contiguous range (minus surrogates), and
the prefix is viable iff some code point of that range can come next (so inside a capped region
the character counts as begun).

Speed, only as much as the tests need: an Earley chart is a function of the *signature* of the
characters (which terminals each matched, and what each run's decoder and nested chart did), not
of the characters themselves, so charts are memoised by ``(parent chart, signature)``. Inside a
JSON string, every ordinary character has the same signature, so a 128k-token mask touches few
distinct charts. ``allowed_tokens`` walks the vocabulary in sorted byte order so consecutive
tokens share their chart path.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from grammarsd.errors import GrammarError, GrammarTooLargeError
from grammarsd.grammar.encodings import encode_class, expand_excluding
from grammarsd.grammar.ir import (
    ANY_CHAR,
    MAX_CODE_POINT,
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
    chars,
)

# The BNF may hold at most this many symbols (summed over productions); bounded repeats are
# unrolled, so ``x{0,100000000}`` must fail loudly instead of exhausting memory.
MAX_BNF_SYMBOLS = 2_000_000

# Charts memoised across calls (``accepts``, ``is_prefix``, ...) are dropped wholesale past this
# many entries; a mask computation keeps its own memo, dropped when it returns.
_MEMO_LIMIT = 50_000

# A chart keeps direct references to at most this many recent ancestors before it copies them
# into a shared list (see ``_Chart.at``).
_RECENT_LIMIT = 32

# An Earley item ``(production, dot, origin)``.
Item = tuple[int, int, int]

# What a step from a chart depends on: the pending terminals the code point is in, and per run
# ``(decoder state, characters begun, nested signature)``, or None where the run dies.
_Sig = tuple[tuple[int, ...], tuple["_Move | None", ...]]
_Move = tuple[int, int, "_Sig"]


# --------------------------------------------------------------------------- JSON string bodies

# The decoder of a capped region's text: a deterministic automaton over code points whose
# transitions say how many decoded characters they begin. A character is counted at its first
# code point, except that after a high surrogate escape (state _H) the next "\\" may open the
# low half, which json.loads joins to the high one: it is counted once the escape is known not
# to be that (states _HE, _HU, _HUD). "In \\uXXXX, k digits read" is _Uk; _U1D has read "d",
# _U2H and _U3H are inside a high surrogate; _L2 and _L3 are inside the low half of a pair.
_B, _H, _E, _U0, _U1D, _U1, _U2H, _U2, _U3H, _U3, _HE, _HU, _HUD, _L2, _L3 = range(15)
_HEX = "0123456789abcdefABCDEF"
_SHORT = '"\\/bfnrt'
# state -> (code points, next state, characters begun), first match wins; None stands for every
# code point JSON allows unescaped (>= U+0020, not '"' or '\\')
_DECODER: dict[int, tuple[tuple[str | None, int, int], ...]] = {
    _B: (("\\", _E, 1), (None, _B, 1)),
    _H: (("\\", _HE, 0), (None, _B, 1)),
    _E: ((_SHORT, _B, 0), ("u", _U0, 0)),
    _U0: (("dD", _U1D, 0), (_HEX, _U1, 0)),
    _U1D: (("89abAB", _U2H, 0), (_HEX, _U2, 0)),
    _U1: ((_HEX, _U2, 0),),
    _U2H: ((_HEX, _U3H, 0),),
    _U2: ((_HEX, _U3, 0),),
    _U3H: ((_HEX, _H, 0),),
    _U3: ((_HEX, _B, 0),),
    _HE: ((_SHORT, _B, 1), ("u", _HU, 0)),
    _HU: (("dD", _HUD, 0), (_HEX, _U1, 1)),
    _HUD: (("cdefCDEF", _L2, 0), ("89abAB", _U2H, 1), (_HEX, _U2, 1)),
    _L2: ((_HEX, _L3, 0),),
    _L3: ((_HEX, _B, 0),),
}
_FINAL = (_B, _H)  # where a string body may end
_STATES = len(_DECODER)
# The decoder tells ASCII code points apart and nothing past them: edges where its behaviour
# may change (see ``ReferenceRecognizer._pieces``).
_DECODER_CUTS = frozenset(range(0x81))

# Costs are decoded-character counts in the (min, +) semiring; _INF is "no way" (larger than any
# count, and a sum of two stays far from overflow).
_INF = 1 << 40
_IDENTITY = np.where(np.eye(_STATES, dtype=bool), 0, _INF)  # int64 [S, S]: the empty string
_NEVER = np.full(_STATES, _INF)  # int64 [S]
_DONE = np.where(np.isin(np.arange(_STATES), _FINAL), 0, _INF)  # int64 [S]: may end here


def _decode(state: int, cp: int) -> tuple[int, int] | None:
    """``(next state, characters begun)`` after ``cp``; None: no string body goes on so."""
    for allowed, target, begun in _DECODER[state]:
        if (cp >= 0x20 and cp not in (0x22, 0x5C)) if allowed is None else chr(cp) in allowed:
            return target, begun
    return None


def _then(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Costs of ``a``'s strings followed by ``b``'s: the (min, +) product of [S, S] matrices."""
    return np.minimum((a[:, :, None] + b[None, :, :]).min(axis=1), _INF)


def _apply(m: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``m``'s strings, then whatever ``v`` [S] prices: the (min, +) matrix-vector product."""
    return np.minimum((m + v[None, :]).min(axis=1), _INF)


@lru_cache(maxsize=4096)
def _class_costs(cls: CharClass) -> np.ndarray:
    """``m[q, r]``: the fewest characters one code point of ``cls`` begins, from state q to r."""
    m = np.full((_STATES, _STATES), _INF)
    samples = [cp for cp in range(0x80) if cp in cls]
    wide = cls.intersect(chars([(0x80, MAX_CODE_POINT)]))  # all decode alike
    samples += [wide.ranges[0][0]] if not wide.is_empty else []
    for q in range(_STATES):
        for cp in samples:
            step = _decode(q, cp)
            if step is not None:
                m[q, step[0]] = min(m[q, step[0]], step[1])
    return m


# --------------------------------------------------------------------------- data structures


@dataclass
class _Bnf:
    """Plain BNF over code-point classes.

    Symbols are ints: ``s >= 0`` is nonterminal ``s``; ``s < 0`` is terminal ``~s`` (an index
    into ``classes``). Production ``p`` is ``lhs[p] -> rhs[p]``; ``prods_of[a]`` lists the
    productions of nonterminal ``a``. ``start`` is an augmented start symbol with the single
    production ``start -> <grammar start rule>``, so acceptance is one item lookup.
    ``capped[c] = (goal, max)`` marks a capped nonterminal ``c`` (no productions): it derives
    the strings of ``goal`` (an augmented start with the single production ``goal -> item``)
    decoding to at most ``max`` characters.
    """

    lhs: list[int] = field(default_factory=list)  # [P]
    rhs: list[tuple[int, ...]] = field(default_factory=list)  # [P]
    prods_of: list[list[int]] = field(default_factory=list)  # [N]
    classes: list[CharClass] = field(default_factory=list)  # [T]
    start: int = -1
    capped: dict[int, tuple[int, int]] = field(default_factory=dict)

    def add_nonterminal(self) -> int:
        self.prods_of.append([])
        return len(self.prods_of) - 1

    def add_production(self, lhs: int, rhs: tuple[int, ...]) -> None:
        self.prods_of[lhs].append(len(self.lhs))
        self.lhs.append(lhs)
        self.rhs.append(rhs)


class _Run(NamedTuple):
    """A capped ``symbol`` being read since set ``origin``: ``chart`` is the nested chart of its
    goal over the text since then, which the decoder read into ``state``, beginning ``begun``
    characters."""

    symbol: int
    origin: int
    chart: _Chart
    state: int
    begun: int


class _Chart:
    """One Earley set, plus access to every earlier set of the same input.

    The items are those of set ``depth`` (after ``depth`` code points) of a parse of ``goal``.
    ``waiting[a]`` lists the items with the dot before nonterminal ``a`` (the completer looks
    them up); ``scans[t]`` lists the items with the dot before terminal ``t``; ``pending`` is
    ``sorted(scans)``; ``runs`` are the capped symbols being read (see ``_Run``).

    Invariant (because the grammar is trimmed, and runs that cannot finish are dropped): every
    item derives from the start item and its remaining symbols, and those of every item it was
    predicted from, derive some string; every run can still finish. Hence the input so far is
    a viable prefix iff there is an item or a run; a chart is only built then, and a dead input
    is represented by ``None``.

    In a nested chart (of a capped symbol's goal), ``up[a][q]`` is the fewest characters that
    finish the goal once ``a`` completes here, from decoder state q, and ``rest[q]`` the fewest
    that finish it from here; both are None in charts of the grammar's start.

    Earlier sets are reached through ``at(j)``: ``frozen`` is a list of the charts for depths
    ``0 .. len(frozen) - 1`` shared by many descendants, and ``recent`` holds the ones after it.
    Every ``_RECENT_LIMIT`` steps ``recent`` is folded into a fresh ``frozen`` list, so a step
    costs O(1) amortised copying even when charts branch at every depth.
    """

    __slots__ = (
        "depth",
        "goal",
        "waiting",
        "scans",
        "pending",
        "accepting",
        "runs",
        "up",
        "rest",
        "frozen",
        "recent",
    )

    def __init__(
        self,
        depth: int,
        goal: int,
        waiting: dict[int, list[Item]],
        scans: dict[int, list[Item]],
        accepting: bool,
        runs: tuple[_Run, ...],
        parent: _Chart | None,
    ) -> None:
        self.depth = depth
        self.goal = goal
        self.waiting = waiting
        self.scans = scans
        self.pending = tuple(sorted(scans))
        self.accepting = accepting
        self.runs = runs
        self.up: dict[int, np.ndarray] | None = None
        self.rest: np.ndarray | None = None
        if parent is None:
            self.frozen: list[_Chart] = []
            self.recent: tuple[_Chart, ...] = ()
        elif len(parent.recent) < _RECENT_LIMIT:
            self.frozen = parent.frozen
            self.recent = parent.recent + (parent,)
        else:
            self.frozen = parent.frozen + list(parent.recent) + [parent]
            self.recent = ()

    def at(self, j: int) -> _Chart:
        """The chart after the first ``j`` code points (``0 <= j <= depth``)."""
        if j == self.depth:
            return self
        if j < len(self.frozen):
            return self.frozen[j]
        return self.recent[j - len(self.frozen)]


_Memo = dict[tuple[_Chart, _Sig], "_Chart | None"]


# --------------------------------------------------------------------------- lowering


class _Lowering:
    """IR -> ``_Bnf``. Helper nonterminals are shared between structurally equal expressions."""

    def __init__(self, grammar: Grammar) -> None:
        self.bnf = _Bnf()
        self._class_ids: dict[CharClass, int] = {}
        self._helpers: dict[Expr, int] = {}
        self._size = 0
        self._rules = {name: self.bnf.add_nonterminal() for name in grammar.rules}
        for name, body in grammar.rules.items():
            for alt in body.items if isinstance(body, Choice) else (body,):
                self._produce(self._rules[name], self._symbols(alt))
        self.bnf.start = self.bnf.add_nonterminal()
        self._produce(self.bnf.start, (self._rules[grammar.start],))

    def _check_room(self, symbols: int) -> None:
        """Raise if ``symbols`` more BNF symbols would pass ``MAX_BNF_SYMBOLS``."""
        if self._size + symbols > MAX_BNF_SYMBOLS:
            raise GrammarTooLargeError(
                "reference BNF symbols",
                self._size + symbols,
                MAX_BNF_SYMBOLS,
                hint="bounded repeats are unrolled; lower the repeat bounds",
            )

    def _produce(self, lhs: int, rhs: tuple[int, ...]) -> None:
        self._check_room(len(rhs) + 1)
        self._size += len(rhs) + 1
        self.bnf.add_production(lhs, rhs)

    def _terminal(self, cls: CharClass) -> int:
        if cls not in self._class_ids:
            self._class_ids[cls] = len(self.bnf.classes)
            self.bnf.classes.append(cls)
        return ~self._class_ids[cls]

    def _symbols(self, expr: Expr) -> tuple[int, ...]:
        """The symbol string deriving exactly the language of ``expr``."""
        if isinstance(expr, Literal):
            return tuple(self._terminal(chars([(ord(c), ord(c))])) for c in expr.text)
        if isinstance(expr, CharClass):
            return (self._terminal(expr),)
        if isinstance(expr, Seq):
            return tuple(s for item in expr.items for s in self._symbols(item))
        if isinstance(expr, Ref):
            return (self._rules[expr.name],)
        if isinstance(expr, Capped):
            return (self._capped(expr),)
        if isinstance(expr, Excluding):  # read as plain IR: the trie of its words' spellings
            return self._symbols(expand_excluding(expr))
        if isinstance(expr, Decoding):
            return (self._decoding(expr),)
        return (self._helper(expr),)

    def _decoding(self, expr: Decoding) -> int:
        """The symbol of ``expr``: a nonterminal per state of its automaton, ``q -> ""`` where
        ``q`` accepts and ``q -> enc(atom) q'`` per live transition, ``enc`` every JSON
        spelling of a character of the atom (``encodings.encode_class``)."""
        if expr not in self._helpers:
            dfa = expr.dfa
            states = [self.bnf.add_nonterminal() for _ in range(dfa.num_states)]
            self._helpers[expr] = states[0]
            atoms = [chars([r]) for r in dfa.atom_ranges()]
            for q, (row, final) in enumerate(zip(dfa.trans.tolist(), dfa.accept.tolist(),
                                                 strict=True)):
                if final:
                    self._produce(states[q], ())
                for atom, target in enumerate(row):
                    if target >= 0:
                        self._produce(states[q], (*self._symbols(encode_class(atoms[atom])),
                                                  states[target]))
        return self._helpers[expr]

    def _capped(self, expr: Capped) -> int:
        """The capped symbol of ``expr``, with its goal ``goal -> item`` (see ``_Bnf``)."""
        if expr in self._helpers:
            return self._helpers[expr]
        symbol = self.bnf.add_nonterminal()
        self._helpers[expr] = symbol
        goal = self.bnf.add_nonterminal()
        self._produce(goal, self._symbols(expr.item))
        self.bnf.capped[symbol] = (goal, expr.max)
        return symbol

    def _helper(self, expr: Choice | Repeat) -> int:
        if expr in self._helpers:
            return self._helpers[expr]
        nt = self.bnf.add_nonterminal()
        self._helpers[expr] = nt
        if isinstance(expr, Choice):
            for alt in expr.items:
                self._produce(nt, self._symbols(alt))
            return nt
        body = self._symbols(expr.item)
        # fail before unrolling a repeat that cannot fit, not after minutes of unrolling
        self._check_room(len(body) * (expr.min if expr.max is None else expr.max))
        head = body * expr.min
        if expr.max is None:
            star = self.bnf.add_nonterminal()  # star -> ε | star body
            self._produce(star, ())
            self._produce(star, (star,) + body)
            self._produce(nt, head + (star,))
            return nt
        rest: tuple[int, ...] = ()
        for _ in range(expr.max - expr.min):  # opt_k -> ε | body opt_{k-1}: up to k copies
            opt = self.bnf.add_nonterminal()
            self._produce(opt, ())
            self._produce(opt, body + rest)
            rest = (opt,)
        self._produce(nt, head + rest)
        return nt


def _costs(bnf: _Bnf) -> dict[int, np.ndarray]:
    """Decoding costs of the nonterminals that capped goals reach.

    ``costs[a][q, r]`` (int64 [S, S]) is the fewest characters that a string of ``a`` begins
    when the decoder reads it from state q to state r (``_INF``: none). A least fixpoint of the
    productions, computed with a worklist.

    Raises
    ------
    GrammarError
        If a capped goal reaches another capped symbol (items are regular string bodies).
    """
    reach = {goal for goal, _ in bnf.capped.values()}
    stack = list(reach)
    users: dict[int, list[int]] = {}  # nonterminal -> reached productions that mention it
    while stack:
        for p in bnf.prods_of[stack.pop()]:
            for s in bnf.rhs[p]:
                if s in bnf.capped:
                    raise GrammarError(
                        "a Capped item contains another Capped",
                        hint="a capped item is a regular JSON string body; cap it once",
                    )
                if s >= 0:
                    users.setdefault(s, []).append(p)
                    if s not in reach:
                        reach.add(s)
                        stack.append(s)
    costs = {a: np.full((_STATES, _STATES), _INF) for a in reach}
    # productions in creation order: unrolled repeats are built innermost first
    agenda = deque(sorted(p for a in reach for p in bnf.prods_of[a]))
    queued = set(agenda)
    while agenda:
        p = agenda.popleft()
        queued.discard(p)
        m = _IDENTITY
        for s in bnf.rhs[p]:
            m = _then(m, costs[s] if s >= 0 else _class_costs(bnf.classes[~s]))
        lhs = bnf.lhs[p]
        if (m < costs[lhs]).any():
            costs[lhs] = np.minimum(costs[lhs], m)
            for q in users.get(lhs, ()):
                if q not in queued:
                    queued.add(q)
                    agenda.append(q)
    return costs


def _trim(bnf: _Bnf, fitting: set[int]) -> _Bnf:
    """Drop every production that mentions an unproductive symbol (same symbol numbering).

    ``fitting`` are the capped symbols with some string within their cap (productive).
    """
    productive = [a in fitting for a in range(len(bnf.prods_of))]

    def ok(sym: int) -> bool:
        return productive[sym] if sym >= 0 else not bnf.classes[~sym].is_empty

    changed = True
    while changed:
        changed = False
        for p, rhs in enumerate(bnf.rhs):
            if not productive[bnf.lhs[p]] and all(ok(s) for s in rhs):
                productive[bnf.lhs[p]] = changed = True
    out = _Bnf(classes=bnf.classes, start=bnf.start, capped=bnf.capped)
    out.prods_of = [[] for _ in bnf.prods_of]
    for lhs, rhs in zip(bnf.lhs, bnf.rhs, strict=True):
        if all(ok(s) for s in rhs):
            out.add_production(lhs, rhs)
    return out


def _nullable(bnf: _Bnf) -> list[bool]:
    """``nullable[a]``: nonterminal ``a`` derives the empty string (a capped one: its goal does;
    the empty string decodes to no character)."""
    nullable = [False] * len(bnf.prods_of)
    changed = True
    while changed:
        changed = False
        for p, rhs in enumerate(bnf.rhs):
            if not nullable[bnf.lhs[p]] and all(s >= 0 and nullable[s] for s in rhs):
                nullable[bnf.lhs[p]] = changed = True
        for c, (goal, _) in bnf.capped.items():
            if nullable[goal] and not nullable[c]:
                nullable[c] = changed = True
    return nullable


# --------------------------------------------------------------------------- UTF-8


def _utf8_length(lead: int) -> int:
    """Length of the UTF-8 sequence a lead byte starts; 0 if it cannot start one."""
    if lead < 0x80:
        return 1
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0


def _split_utf8(data: bytes) -> tuple[str, bytes] | None:
    """Split ``data`` into its decoded complete characters and an unfinished trailing sequence.

    Returns ``None`` if ``data`` is not a prefix of valid UTF-8 as far as the complete part goes
    (the trailing part is checked by ``_partial_range``).
    """
    start = len(data)
    while start > 0 and len(data) - start < 4 and 0x80 <= data[start - 1] <= 0xBF:
        start -= 1  # step back over continuation bytes
    cut = len(data)
    if start > 0 and len(data) - start < 3:
        lead = start - 1
        if len(data) - lead < _utf8_length(data[lead]):
            cut = lead
    try:
        return data[:cut].decode("utf-8", "strict"), data[cut:]
    except UnicodeDecodeError:
        return None


@lru_cache(maxsize=4096)
def _partial_range(tail: bytes) -> CharClass:
    """All code points whose UTF-8 encoding starts with ``tail`` (1-3 bytes of one character).

    Empty when no valid character starts so (bad lead or continuation byte, overlong forms,
    surrogates, beyond U+10FFFF).
    """
    n = _utf8_length(tail[0])
    if n < 2 or not all(0x80 <= b <= 0xBF for b in tail[1:]):
        return chars(())
    value = tail[0] & (0x7F >> n)
    for b in tail[1:]:
        value = (value << 6) | (b & 0x3F)
    free = 6 * (n - len(tail))  # payload bits still to come
    lo, hi = value << free, (value << free) | ((1 << free) - 1)
    shortest = {2: (0x80, 0x7FF), 3: (0x800, 0xFFFF), 4: (0x10000, 0x10FFFF)}[n]
    return chars([(max(lo, shortest[0]), min(hi, shortest[1]))])  # chars() drops surrogates


# --------------------------------------------------------------------------- recognizer


class ReferenceRecognizer:
    """Exact membership and prefix tests for the language of a ``Grammar``.

    ``L(G)`` is the set of strings of code points that the start rule derives (plain CFG
    semantics; recursion, left recursion, ambiguity and empty languages are all fine; a
    ``Capped`` keeps the strings of its item that are JSON string bodies decoding, as
    ``json.loads`` does, to at most ``max`` characters).

    Parameters
    ----------
    grammar
        Any well-formed IR grammar.

    Raises
    ------
    GrammarTooLargeError
        If unrolling bounded repeats would exceed ``MAX_BNF_SYMBOLS``.
    GrammarError
        If a ``Capped`` item reaches another ``Capped``.
    """

    def __init__(self, grammar: Grammar) -> None:
        lowered = _Lowering(grammar).bnf
        costs = _costs(lowered)
        fitting = {
            c
            for c, (goal, cap) in lowered.capped.items()
            if min(costs[goal][_B, f] for f in _FINAL) <= cap
        }
        self._bnf = bnf = _trim(lowered, fitting)
        self._nullable = _nullable(bnf)
        # terminal t -> starts / ends of its ranges, for bisect membership tests
        self._starts = [[a for a, _ in c.ranges] for c in bnf.classes]
        self._ends = [[b for _, b in c.ranges] for c in bnf.classes]
        # production p of a nonterminal capped goals reach -> costs of rhs[p][k:] for each k
        self._suffix: dict[int, list[np.ndarray]] = {}
        for a in costs:
            for p in bnf.prods_of[a]:
                tails = [_IDENTITY]
                for s in reversed(bnf.rhs[p]):
                    head = costs[s] if s >= 0 else _class_costs(bnf.classes[~s])
                    tails.append(_then(head, tails[-1]))
                self._suffix[p] = tails[::-1]
        # goal -> its completed item (absent: the goal derives nothing)
        self._accept: dict[int, Item] = {
            g: (bnf.prods_of[g][0], len(bnf.rhs[bnf.prods_of[g][0]]), 0)
            for g in [bnf.start] + [goal for goal, _ in bnf.capped.values()]
            if bnf.prods_of[g]
        }
        # capped symbol -> the nested chart its runs start from
        self._roots: dict[int, _Chart] = {}
        for c in sorted(fitting):
            goal = bnf.capped[c][0]
            root = self._closure([(p, 0, 0) for p in bnf.prods_of[goal]], None, [], goal)
            assert root is not None  # the goal is productive
            self._roots[c] = root
        initial = [(p, 0, 0) for p in bnf.prods_of[bnf.start]]
        # None: the language is empty, no input is viable
        self._root = self._closure(initial, None, [], bnf.start)
        self._memo: _Memo = {}
        # callers usually query growing prefixes: each walk starts where the last one ended
        self._last_walk: tuple[str, _Chart | None] = ("", self._root)

    # ----------------------------------------------------------------------- Earley core

    def _closure(
        self, kernel: list[Item], parent: _Chart | None, runs: list[_Run], goal: int
    ) -> _Chart | None:
        """Predict and complete from ``kernel`` (items already scanned into the new set), with
        ``runs`` carried on from earlier sets; predicting a capped symbol starts a run."""
        if not kernel and not runs:
            return None
        depth = 0 if parent is None else parent.depth + 1
        bnf = self._bnf
        seen: set[Item] = set()
        agenda: list[Item] = []
        waiting: dict[int, list[Item]] = {}
        scans: dict[int, list[Item]] = {}

        def add(item: Item) -> None:
            if item not in seen:
                seen.add(item)
                agenda.append(item)

        for item in kernel:
            add(item)
        while agenda:
            item = agenda.pop()
            p, dot, origin = item
            rhs = bnf.rhs[p]
            if dot == len(rhs):  # complete: advance the items of set `origin` waiting on lhs
                lhs = bnf.lhs[p]
                if origin == depth:
                    # lhs derived ε; items waiting on it here are advanced by the nullable
                    # rule below, but advancing them here too is harmless and obviously right
                    parents = list(waiting.get(lhs, ()))
                else:
                    assert parent is not None
                    parents = parent.at(origin).waiting.get(lhs, [])
                for p2, dot2, origin2 in parents:
                    add((p2, dot2 + 1, origin2))
                continue
            sym = rhs[dot]
            if sym < 0:
                scans.setdefault(~sym, []).append(item)
                continue
            if sym in self._roots and sym not in waiting:
                runs = runs + [_Run(sym, depth, self._roots[sym], _B, 0)]
            waiting.setdefault(sym, []).append(item)
            for q in bnf.prods_of[sym]:
                add((q, 0, depth))
            if self._nullable[sym]:  # Aycock-Horspool
                add((p, dot + 1, origin))
        accepting = goal in self._accept and self._accept[goal] in seen
        chart = _Chart(depth, goal, waiting, scans, accepting, tuple(runs), parent)
        if goal != bnf.start:
            self._finish_costs(chart)
        return chart

    def _finish_costs(self, chart: _Chart) -> None:
        """Fill ``chart.up`` and ``chart.rest`` of a nested chart (see ``_Chart``).

        Once production ``p`` begun at set ``o`` completes, what is left is the rest of each
        item of set ``o`` waiting on its lhs, and so on up to the goal: a shortest path, found
        by iterating to the least fixpoint (items begun here depend on each other).
        """
        up: dict[int, np.ndarray] = {chart.goal: _DONE} if chart.depth == 0 else {}

        def after(p: int, origin: int) -> np.ndarray:
            at = up if origin == chart.depth else chart.at(origin).up
            assert at is not None  # the sets before a nested one are nested
            return at.get(self._bnf.lhs[p], _NEVER)

        changed = True
        while changed:
            changed = False
            for a, items in chart.waiting.items():
                best = up.get(a, _NEVER)
                for p, dot, origin in items:
                    best = np.minimum(best, _apply(self._suffix[p][dot + 1], after(p, origin)))
                if a not in up or (best < up[a]).any():
                    up[a] = best
                    changed = True
        rest = _DONE if chart.accepting else _NEVER
        for items in chart.scans.values():
            for p, dot, origin in items:
                rest = np.minimum(rest, _apply(self._suffix[p][dot], after(p, origin)))
        chart.up, chart.rest = up, rest

    def _contains(self, terminal: int, cp: int) -> bool:
        i = bisect_right(self._starts[terminal], cp) - 1
        return i >= 0 and cp <= self._ends[terminal][i]

    def _signature(self, chart: _Chart, cp: int) -> _Sig | None:
        """All the step from ``chart`` by ``cp`` depends on (None: there is no next chart)."""
        terms = tuple(t for t in chart.pending if self._contains(t, cp))
        moves = tuple(self._move(run, cp) for run in chart.runs)
        if not terms and not any(moves):
            return None
        return terms, moves

    def _move(self, run: _Run, cp: int) -> _Move | None:
        """How the decoder and nested chart of ``run`` take ``cp`` (None: the run dies)."""
        decoded = _decode(run.state, cp)
        nested = None if decoded is None else self._signature(run.chart, cp)
        return None if decoded is None or nested is None else (*decoded, nested)

    def _step(self, chart: _Chart, cp: int, scratch: _Memo | None = None) -> _Chart | None:
        """The chart after one more code point ``cp`` (``None``: no longer viable).

        The result depends only on the signature of ``cp``, so it is memoised under it: in
        ``self._memo``, or in ``scratch`` when one is given (then new entries go there only).
        """
        sig = self._signature(chart, cp)
        return None if sig is None else self._follow(chart, sig, scratch)

    def _follow(self, chart: _Chart, sig: _Sig, scratch: _Memo | None) -> _Chart | None:
        """``_step`` from its signature, memoised."""
        key = (chart, sig)
        if key in self._memo:
            return self._memo[key]
        memo = self._memo if scratch is None else scratch
        if key not in memo:
            if scratch is None and len(memo) >= _MEMO_LIMIT:
                memo.clear()
            memo[key] = self._advance(chart, sig, scratch)
        return memo[key]

    def _advance(self, chart: _Chart, sig: _Sig, scratch: _Memo | None) -> _Chart | None:
        """Scan the terminals of ``sig``, step the runs, and complete those that may end."""
        terms, moves = sig
        kernel = [(p, dot + 1, o) for t in terms for p, dot, o in chart.scans[t]]
        runs: list[_Run] = []
        for run, move in zip(chart.runs, moves, strict=True):
            if move is None:
                continue
            state, more, nested_sig = move
            nested = self._follow(run.chart, nested_sig, scratch)
            if nested is None:
                continue  # the item is dead
            assert nested.rest is not None  # a nested chart
            begun = run.begun + more
            if begun + nested.rest[state] > self._bnf.capped[run.symbol][1]:
                continue  # the item cannot be finished within the cap
            runs.append(run._replace(chart=nested, state=state, begun=begun))
            if nested.accepting and state in _FINAL:
                waiting = chart.at(run.origin).waiting[run.symbol]
                kernel += [(p, dot + 1, o) for p, dot, o in waiting]
        return self._closure(kernel, chart, runs, chart.goal)

    def _walk(self, text: str) -> _Chart | None:
        """The chart after ``text``, extending the previous walk when ``text`` continues it."""
        done, chart = self._last_walk if text.startswith(self._last_walk[0]) else ("", self._root)
        for c in text[len(done) :]:
            if chart is None:
                break
            chart = self._step(chart, ord(c))
        self._last_walk = (text, chart)
        return chart

    def _pieces(self, chart: _Chart, within: CharClass) -> Iterator[tuple[int, int]]:
        """``within`` cut into ranges whose code points all step from ``chart`` alike."""
        cuts = self._cuts(chart)
        for a, b in within.ranges:
            edges = [a] + cuts[bisect_right(cuts, a) : bisect_right(cuts, b)] + [b + 1]
            yield from ((lo, hi - 1) for lo, hi in zip(edges, edges[1:], strict=False))

    def _cuts(self, chart: _Chart) -> list[int]:
        """Sorted code points where a signature from ``chart`` may change."""
        cuts = {
            x for t in chart.pending for a, b in self._bnf.classes[t].ranges for x in (a, b + 1)
        }
        for run in chart.runs:
            cuts |= _DECODER_CUTS | set(self._cuts(run.chart))
        return sorted(cuts)

    def _viable_partial(self, chart: _Chart, tail: bytes, scratch: _Memo | None = None) -> bool:
        """Some character starting with the bytes ``tail`` can be read next from ``chart``."""
        if not tail:
            return True
        pieces = self._pieces(chart, _partial_range(tail))
        return any(self._step(chart, lo, scratch) is not None for lo, _ in pieces)

    # ----------------------------------------------------------------------- public API

    def accepts(self, text: str) -> bool:
        """``text`` is in L(G)."""
        chart = self._walk(text)
        return chart is not None and chart.accepting

    def next_chars(self, text: str) -> CharClass:
        """``{c : text + c is a prefix of some string in L(G)}`` (empty if ``text`` is not)."""
        chart = self._walk(text)
        if chart is None:
            return chars(())
        pieces = self._pieces(chart, ANY_CHAR)
        return chars(piece for piece in pieces if self._step(chart, piece[0]) is not None)

    def is_prefix(self, data: bytes) -> bool:
        """``data`` is a prefix of the UTF-8 encoding of some string in L(G).

        Invalid UTF-8 gives ``False``. ``data`` may end inside a character: it is viable iff
        some character whose encoding starts with those bytes can come next.
        """
        split = _split_utf8(data)
        if split is None:
            return False
        chart = self._walk(split[0])
        return chart is not None and self._viable_partial(chart, split[1])

    def is_complete(self, data: bytes) -> bool:
        """``data`` is valid UTF-8 and decodes to a string in L(G) (EOS is allowed here)."""
        try:
            text = data.decode("utf-8", "strict")
        except UnicodeDecodeError:
            return False
        return self.accepts(text)

    def allowed_tokens(self, prefix: bytes, token_bytes: Sequence[bytes]) -> np.ndarray:
        """The token mask after ``prefix``.

        Returns ``mask: bool[len(token_bytes)]`` with ``mask[t]`` iff ``token_bytes[t] != b""``
        and ``is_prefix(prefix + token_bytes[t])``. End-of-sequence is the caller's business.
        Tokens are visited in sorted byte order so that consecutive tokens share chart steps;
        the result is in the caller's order.
        """
        mask = np.zeros(len(token_bytes), dtype=np.bool_)
        split = _split_utf8(prefix)
        if split is None:
            return mask
        head, tail = split
        base = self._walk(head)
        if base is None:
            return mask
        scratch: _Memo = {}
        # path[k] is the chart after the first k characters of `text`; only viable charts
        path: list[_Chart] = [base]
        text = ""
        for t in sorted(range(len(token_bytes)), key=token_bytes.__getitem__):
            if not token_bytes[t]:
                continue
            split = _split_utf8(tail + token_bytes[t])
            if split is None:
                continue
            new_text, new_tail = split
            shared = 0
            limit = min(len(text), len(new_text), len(path) - 1)
            while shared < limit and text[shared] == new_text[shared]:
                shared += 1
            del path[shared + 1 :]
            text = new_text
            while len(path) <= len(text):
                chart = self._step(path[-1], ord(text[len(path) - 1]), scratch)
                if chart is None:
                    break
                path.append(chart)
            if len(path) == len(text) + 1:
                mask[t] = self._viable_partial(path[-1], new_tail, scratch)
        return mask


__all__ = ["MAX_BNF_SYMBOLS", "ReferenceRecognizer"]
