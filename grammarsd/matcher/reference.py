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
2. **Trimming.** Productions that mention an unproductive symbol (a nonterminal deriving no
   terminal string, or an empty class) are dropped. Afterwards every symbol that occurs derives
   some string, which is what makes "non-empty Earley set" mean "viable prefix" (see ``_Chart``).
3. **Earley.** A textbook Earley recognizer over code points, with nullable nonterminals handled
   as in Aycock & Horspool, "Practical Earley Parsing" (2002): when predicting a nullable
   nonterminal, the predicting item is also advanced past it.

Bytes are decoded strictly as UTF-8. A prefix may end inside a multi-byte character; the code
points whose encoding starts with those bytes form one contiguous range (minus surrogates), and
the prefix is viable iff that range meets a character the chart can scan next.

Speed, only as much as the tests need: an Earley chart is a function of the *sequence of sets of
terminals the characters matched*, not of the characters themselves, so charts are memoised by
``(parent chart, matched terminals)``. Inside a JSON string, every ordinary character matches the
same terminals, so a 128k-token mask touches few distinct charts. ``allowed_tokens`` walks the
vocabulary in sorted byte order so consecutive tokens share their chart path.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from grammarsd.errors import GrammarTooLargeError
from grammarsd.grammar.ir import (
    CharClass,
    Choice,
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


# --------------------------------------------------------------------------- data structures


@dataclass
class _Bnf:
    """Plain BNF over code-point classes.

    Symbols are ints: ``s >= 0`` is nonterminal ``s``; ``s < 0`` is terminal ``~s`` (an index
    into ``classes``). Production ``p`` is ``lhs[p] -> rhs[p]``; ``prods_of[a]`` lists the
    productions of nonterminal ``a``. ``start`` is an augmented start symbol with the single
    production ``start -> <grammar start rule>``, so acceptance is one item lookup.
    """

    lhs: list[int] = field(default_factory=list)  # [P]
    rhs: list[tuple[int, ...]] = field(default_factory=list)  # [P]
    prods_of: list[list[int]] = field(default_factory=list)  # [N]
    classes: list[CharClass] = field(default_factory=list)  # [T]
    start: int = -1

    def add_nonterminal(self) -> int:
        self.prods_of.append([])
        return len(self.prods_of) - 1

    def add_production(self, lhs: int, rhs: tuple[int, ...]) -> None:
        self.prods_of[lhs].append(len(self.lhs))
        self.lhs.append(lhs)
        self.rhs.append(rhs)


class _Chart:
    """One Earley set, plus access to every earlier set of the same input.

    The items are those of set ``depth`` (after ``depth`` code points). ``waiting[a]`` lists the
    items with the dot before nonterminal ``a`` (the completer looks them up); ``scans[t]`` lists
    the items with the dot before terminal ``t``; ``pending`` is ``sorted(scans)``.

    Invariant (because the grammar is trimmed): every item derives from the start item and its
    remaining symbols, and those of every item it was predicted from, derive some string. Hence
    the input so far is a viable prefix iff the set is non-empty; a chart is only built for
    non-empty sets, and a dead input is represented by ``None``.

    Earlier sets are reached through ``at(j)``: ``frozen`` is a list of the charts for depths
    ``0 .. len(frozen) - 1`` shared by many descendants, and ``recent`` holds the ones after it.
    Every ``_RECENT_LIMIT`` steps ``recent`` is folded into a fresh ``frozen`` list, so a step
    costs O(1) amortised copying even when charts branch at every depth.
    """

    __slots__ = ("depth", "waiting", "scans", "pending", "accepting", "frozen", "recent")

    def __init__(
        self,
        depth: int,
        waiting: dict[int, list[Item]],
        scans: dict[int, list[Item]],
        accepting: bool,
        parent: _Chart | None,
    ) -> None:
        self.depth = depth
        self.waiting = waiting
        self.scans = scans
        self.pending = tuple(sorted(scans))
        self.accepting = accepting
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
        return (self._helper(expr),)

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


def _trim(bnf: _Bnf) -> _Bnf:
    """Drop every production that mentions an unproductive symbol (same symbol numbering)."""
    productive = [False] * len(bnf.prods_of)

    def ok(sym: int) -> bool:
        return productive[sym] if sym >= 0 else not bnf.classes[~sym].is_empty

    changed = True
    while changed:
        changed = False
        for p, rhs in enumerate(bnf.rhs):
            if not productive[bnf.lhs[p]] and all(ok(s) for s in rhs):
                productive[bnf.lhs[p]] = changed = True
    out = _Bnf(classes=bnf.classes, start=bnf.start)
    out.prods_of = [[] for _ in bnf.prods_of]
    for lhs, rhs in zip(bnf.lhs, bnf.rhs, strict=True):
        if all(ok(s) for s in rhs):
            out.add_production(lhs, rhs)
    return out


def _nullable(bnf: _Bnf) -> list[bool]:
    """``nullable[a]``: nonterminal ``a`` derives the empty string."""
    nullable = [False] * len(bnf.prods_of)
    changed = True
    while changed:
        changed = False
        for p, rhs in enumerate(bnf.rhs):
            if not nullable[bnf.lhs[p]] and all(s >= 0 and nullable[s] for s in rhs):
                nullable[bnf.lhs[p]] = changed = True
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
    semantics; recursion, left recursion, ambiguity and empty languages are all fine).

    Parameters
    ----------
    grammar
        Any well-formed IR grammar.

    Raises
    ------
    GrammarTooLargeError
        If unrolling bounded repeats would exceed ``MAX_BNF_SYMBOLS``.
    """

    def __init__(self, grammar: Grammar) -> None:
        self._bnf = _trim(_Lowering(grammar).bnf)
        self._nullable = _nullable(self._bnf)
        # terminal t -> starts / ends of its ranges, for bisect membership tests
        self._starts = [[a for a, _ in c.ranges] for c in self._bnf.classes]
        self._ends = [[b for _, b in c.ranges] for c in self._bnf.classes]
        self._accept_item: Item | None = None
        if self._bnf.prods_of[self._bnf.start]:
            self._accept_item = (self._bnf.prods_of[self._bnf.start][0], 1, 0)
        initial = [(p, 0, 0) for p in self._bnf.prods_of[self._bnf.start]]
        # None: the language is empty, no input is viable
        self._root = self._closure(initial, None)
        self._memo: dict[tuple[_Chart, tuple[int, ...]], _Chart | None] = {}
        # callers usually query growing prefixes: each walk starts where the last one ended
        self._last_walk: tuple[str, _Chart | None] = ("", self._root)

    # ----------------------------------------------------------------------- Earley core

    def _closure(self, kernel: list[Item], parent: _Chart | None) -> _Chart | None:
        """Predict and complete from ``kernel`` (items already scanned into the new set)."""
        if not kernel:
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
            waiting.setdefault(sym, []).append(item)
            for q in bnf.prods_of[sym]:
                add((q, 0, depth))
            if self._nullable[sym]:  # Aycock-Horspool
                add((p, dot + 1, origin))
        return _Chart(depth, waiting, scans, self._accept_item in seen, parent)

    def _contains(self, terminal: int, cp: int) -> bool:
        i = bisect_right(self._starts[terminal], cp) - 1
        return i >= 0 and cp <= self._ends[terminal][i]

    def _step(
        self,
        chart: _Chart,
        cp: int,
        scratch: dict[tuple[_Chart, tuple[int, ...]], _Chart | None] | None = None,
    ) -> _Chart | None:
        """The chart after one more code point ``cp`` (``None``: no longer viable).

        The result depends only on which pending terminals contain ``cp``, so it is memoised
        under that signature: in ``self._memo``, or in ``scratch`` when one is given (then new
        entries go there only).
        """
        sig = tuple(t for t in chart.pending if self._contains(t, cp))
        if not sig:
            return None
        key = (chart, sig)
        if key in self._memo:
            return self._memo[key]
        memo = self._memo if scratch is None else scratch
        if key not in memo:
            kernel = [(p, dot + 1, o) for t in sig for p, dot, o in chart.scans[t]]
            if scratch is None and len(memo) >= _MEMO_LIMIT:
                memo.clear()
            memo[key] = self._closure(kernel, chart)
        return memo[key]

    def _walk(self, text: str) -> _Chart | None:
        """The chart after ``text``, extending the previous walk when ``text`` continues it."""
        done, chart = self._last_walk if text.startswith(self._last_walk[0]) else ("", self._root)
        for c in text[len(done) :]:
            if chart is None:
                break
            chart = self._step(chart, ord(c))
        self._last_walk = (text, chart)
        return chart

    def _viable_partial(self, chart: _Chart, tail: bytes) -> bool:
        """Some character starting with the bytes ``tail`` can be scanned next from ``chart``."""
        if not tail:
            return True
        partial = _partial_range(tail)
        return any(not partial.intersect(self._bnf.classes[t]).is_empty for t in chart.pending)

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
        return chars(r for t in chart.pending for r in self._bnf.classes[t].ranges)

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
        scratch: dict[tuple[_Chart, tuple[int, ...]], _Chart | None] = {}
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
                mask[t] = self._viable_partial(path[-1], new_tail)
        return mask


__all__ = ["MAX_BNF_SYMBOLS", "ReferenceRecognizer"]
