"""Byte-level lexer DFAs: regular IR (terminals, lexemes) -> dense UTF-8 byte tables.

This module owns the step from a character-level ``CharDFA`` (``grammarsd.grammar.automata``)
to the flat table the numba matcher walks. Every code-point transition is lowered to UTF-8:
shortest forms only (no overlongs such as ``C0 80`` or ``E0 80 80``), never an encoded
surrogate (``ED A0..BF ..``), nothing above U+10FFFF (``F4 90..`` and ``F5..FF`` lead bytes are
dead), no lone continuation bytes. A byte sequence is therefore alive in the table iff it is
a prefix of the UTF-8 encoding of some member of the language.

Construction. A multi-byte character is a path lead byte -> continuation bytes. The state
reached after a lead byte or a continuation byte is identified by what it still has to do:
``(remaining continuation bytes, the piecewise-constant map from the remaining code-point
offset to the next character state)``. These intermediate states are hash-consed, so the
very common "any continuation byte, then state t" chains are shared by all lead bytes and all
character states; only blocks cut by a class boundary get their own nodes (and only they are
looked at one by one: runs of whole blocks are written at once; ASCII is spelled for all states
in one numpy step, the rest of a row once per distinct map above U+007F). The result is
deterministic by construction; it is then trimmed, minimised and numbered breadth-first by
``canonical_table`` (the same routine the character automata use).

JSON strings. An expression may hold sub-expressions that ``grammar.encodings`` recognises as
"every JSON spelling of one character from class C" (raw, short escapes, ``\\uXXXX``, surrogate
pairs). ``build_byte_dfa`` then determinises over decoded characters only (each such
sub-expression is one *tagged* symbol, ``automata.tagged_table``, whose unescaped spellings are
read as plain characters, so they meet the plain characters around them in one state) and
spells the tagged symbols' escapes here, with hash-consed escape states (after ``\\``, ``d``
hex digits left, a surrogate pair's low half to come) keyed like the UTF-8 ones. Escape states
depend only on the *shape* of a character map (its targets renamed in order of appearance), and
a few hundred shapes serve every string of every schema, so each shape is built once per
process (``_escape_shape``) and copied with the table's targets filled in. A JSON string with a
length bound or a pattern thus costs a few byte states per decoded-character state instead of a
subset construction over every escape spelling. An ``ir.Excluding`` leaf (an object's other
keys) inside a lexeme is read the same way, as the tagged strings outside its words
(``automata.tagged_outside``): one decoded-character state per node of the words' trie, built
from the words, not from the trie spelled as IR. Alone or quoted (a part of a composed
terminal, ``compiler.dfa_cache``) it is built at the byte level instead, three to five times
faster (``_excluding_dfa``): each trie node a copy of the string body's boundary state with its
children's spellings redirected. Quoted and followed by more (a member's key, colon and
what follows: ``'"' excluding '"' ws ":" ws``), the rest's DFA takes the place of the
closing quote's final state, which has no way out: one minimisation, no subset
construction. Where a plain backslash meets an escape (a literal ``\\``
beside an encoded character), it falls back to expanding the encodings as IR.

Counted repeats. ``x{m,n}`` of a prefix code ``x`` (one JSON or UTF-8 character) is ``n``
copies of ``x``'s small DFA chained end to start (``_tiled``), already minimal, instead of a
subset construction whose cost grows with ``n``. Tiled tables are numbered copy by copy.

Layout of a ``ByteDFA``::

    trans   int32 [n, 256]   next state, or -1 (dead)
    accept  bool  [n]

Start state 0. Every state is live (reachable, and can reach an accepting state), the table
is minimal, and states are numbered breadth-first -- except for the empty language, which is
the single non-accepting state with no transitions (``ByteDFA.is_empty``).

Capped terminals. ``Capped(x, m)`` (a JSON string body of at most ``m`` decoded characters) is
``x``'s DFA as it is, plus the bound and a flag per state: ``char_start[q]`` iff the next byte
read from ``q`` starts a decoded character. The matcher counts those bytes and kills a scan
past ``m``, so the DFA never keeps ``m`` copies of the pattern apart. The flags come from a
search over pairs (DFA state, state of the JSON string body syntax, ``_SYNTAX``), which also
refuses a DFA whose bytes would not decode one way (see ``_capped``).

Rule groups. A lexeme may also reference *right-linear rule groups* by ``Ref`` (a ``RuleSet``
says what each name means): rules that refer to members of their own group only in tail
position, such as ``q0: "a" q1 | ""``, ``q1: "b" q0``. Their language is regular, and the
Thompson NFA gets one entry state per rule of the group: a tail reference to a member is an
epsilon edge to that member's entry, so the group costs one copy per occurrence of the ``Ref``
in the lexeme (``_RuleNfa``), never one per derivation step.
"""

from __future__ import annotations

import functools
import hashlib
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import njit

from grammarsd.errors import GrammarError, GrammarTooLargeError
from grammarsd.grammar._canonical import byte_packing, canonical_packed, canonical_packed_dag
from grammarsd.grammar.automata import (
    TAG_OFFSET,
    CharDFA,
    Tagged,
    Tagger,
    _atom_bounds,
    _compound_nodes,
    _Nfa,
    _surrogate_atoms,
    canonical_table,
    tagged_outside,
    tagged_states,
    tagged_table,
)
from grammarsd.grammar.encodings import RAW_OK, SHORT_ESCAPES, decoded_class, encode_class
from grammarsd.grammar.ir import (
    MAX_CODE_POINT,
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
    children,
    repeat,
    seq,
)

# Multi-byte UTF-8 forms: (lead-byte prefix, continuation bytes, first and last code point).
# A lead ``prefix + i`` starts the block of 64**continuations code points from i * 64**cont.;
# clipping to the valid range excludes overlongs and code points above U+10FFFF.
_MULTI_BYTE_FORMS = (
    (0xC0, 1, 0x80, 0x7FF),
    (0xE0, 2, 0x800, 0xFFFF),
    (0xF0, 3, 0x10000, MAX_CODE_POINT),
)

# A piecewise-constant map from code points (or block offsets) to targets:
# ((start, target), ...) with strictly increasing starts, the first start 0 and adjacent
# targets different; target -1 is dead. The last piece runs to the end of the domain.
Pieces = tuple[tuple[int, int], ...]
_DEAD: Pieces = ((0, -1),)
_NO_TARGET = 1 << 62  # above every target: ``(cp, _NO_TARGET)`` sorts after each piece at cp

RuleSet = tuple[tuple[str, int, Expr], ...]
"""Rules a lexeme may reference: ``(name, group, body)`` sorted by name, closed under the
references of the bodies. Members of one ``group`` refer to each other only in tail position
(right-linear); a body may reference rules of other groups anywhere."""


@dataclass(frozen=True, eq=False)
class ByteDFA:
    """A minimal, trimmed DFA over bytes; start state 0; see the module docstring."""

    byte_table: np.ndarray | None  # int32 [num_states, 256]; next state or -1 (dead); None
    # where ``packed`` holds it (``trans`` writes it out when first read)
    accept: np.ndarray  # bool [num_states]
    tile: np.ndarray | None = None  # int64 [num_states, 4] for tiled DFAs, see ``_tiled``
    cap: int = 0  # a ``Capped`` terminal's bound on decoded characters (0: not capped)
    char_start: np.ndarray | None = None  # bool [num_states]: with ``cap``, the next byte
    # starts a decoded character (the matcher counts a character there)
    packed: tuple[np.ndarray, np.ndarray] | None = None  # ``(classes, table)`` with
    # ``trans == table[:, classes]`` where the minimiser had them (``_finish``): packing for
    # the DFA cache is then free, and the byte table is written only if someone reads it

    def __post_init__(self) -> None:
        n = self.accept.shape[0] if self.accept.ndim == 1 else -1
        if self.byte_table is None and self.packed is None:
            raise ValueError("ByteDFA needs its byte table or its packing")
        if self.byte_table is not None and (
                self.byte_table.dtype != np.int32 or self.byte_table.shape != (n, 256)):
            raise ValueError("ByteDFA.trans must be int32 [num_states, 256]")
        if self.accept.dtype != np.bool_ or n < 0:
            raise ValueError("ByteDFA.accept must be bool [num_states]")
        if self.tile is not None and self.tile.shape != (n, 4):
            raise ValueError("ByteDFA.tile must be int64 [num_states, 4]")
        if (self.cap > 0) != (self.char_start is not None) or (
                self.char_start is not None and self.char_start.shape != self.accept.shape):
            raise ValueError("ByteDFA.char_start must be bool [num_states] exactly when capped")
        if self.packed is not None and (self.packed[0].shape != (256,) or
                                        self.packed[1].shape[0] != n):
            raise ValueError("ByteDFA.packed must be (classes [256], table [num_states, k])")

    @property
    def trans(self) -> np.ndarray:
        """int32 [num_states, 256]: the next state on each byte, or -1 (dead)."""
        table = self.byte_table
        if table is None:
            assert self.packed is not None
            classes, packed = self.packed
            table = np.ascontiguousarray(packed[:, classes])
            table.setflags(write=False)
            object.__setattr__(self, "byte_table", table)  # a cache: equal for every reader
        return table

    @property
    def num_states(self) -> int:
        return int(self.accept.shape[0])

    def is_empty(self) -> bool:
        """True iff no byte string is accepted."""
        return not bool(self.accept[0]) and bool((self.trans[0] < 0).all())

    def walk(self, data: bytes, state: int = 0) -> int:
        """The state after reading ``data`` from ``state``; -1 once dead (reference loop)."""
        for byte in data:
            if state < 0:
                break
            state = int(self.trans[state, byte])
        return state

    def matches(self, data: bytes) -> bool:
        """True iff ``data`` is in the language."""
        state = self.walk(data)
        return state >= 0 and bool(self.accept[state])


def build_byte_dfa(
    expr: Expr, *, nonempty: bool = False, max_states: int = 50_000, rules: RuleSet = ()
) -> ByteDFA:
    """The byte DFA of the UTF-8 encodings of a regular expression's language.

    Parameters
    ----------
    expr : Expr
        Regular IR; a ``Ref`` may only name a rule of ``rules``.
    nonempty : bool
        Drop the empty string from the language (the start state is then non-accepting), for
        lexemes that must consume at least one byte.
    max_states : int
        Limit on character and byte states.
    rules : RuleSet
        The right-linear rule groups ``expr`` references (see the module docstring).

    Raises
    ------
    GrammarTooLargeError
        ``"dfa_states"`` (or ``"nfa_states"``) past ``max_states``.
    GrammarError
        ``Capped`` anywhere but at the top, or over an item that is not a JSON string body.
    """
    excluding = excluding_lexeme(expr)
    if excluding is not None and not (excluding[2] is not None and rules):
        leaf, quoted, rest = excluding
        tail = None if rest is None else _tail_dfa(rest, max_states)
        if tail is None or (tail.tile is None and tail.char_start is None):
            dfa = _excluding_dfa(leaf, quoted, nonempty, max_states, tail)
            if dfa is not None:
                return dfa
    decoding = _decoding_lexeme(expr) if not rules else None
    if decoding is not None:
        table = _decoding_table(*decoding)
        return _finish(_Lowering(*table, max_states).build(), nonempty, max_states)
    if isinstance(expr, Capped):
        item = build_byte_dfa(expr.item, nonempty=nonempty, max_states=max_states, rules=rules)
        if expr.max == 0:  # at most the empty string: nothing to count
            return ByteDFA(np.full((1, 256), -1, np.int32), item.accept[:1].copy())
        return _capped(item, expr.max)
    if rules:
        return _build_with_rules(expr, rules, nonempty, max_states)
    counted = _counted(expr)
    if counted is not None:
        unit = build_byte_dfa(counted[0], max_states=max_states)
        tiled = _tiled(unit, counted[1], counted[2], nonempty, max_states)
        if tiled is not None:
            return tiled
    if _has_json_char(expr):
        bounds, trans, accept = tagged_table(expr, _json_tag, raw=RAW_OK,
                                             max_states=max_states)
        try:
            return _finish(_Lowering(bounds, trans, accept, max_states).build(), nonempty,
                           max_states)
        except _Overlap:
            pass  # a plain backslash meets an escape: expand the encodings as IR
    char_dfa = CharDFA.from_expr(expr, max_states=max_states)
    return byte_dfa_from_char_dfa(char_dfa, nonempty=nonempty, max_states=max_states)


@functools.lru_cache(maxsize=256)
def _tail_dfa(expr: Expr, max_states: int) -> ByteDFA:
    """What follows a quoted key complement (the same few, again and again: ``ws ":" ws``)."""
    return build_byte_dfa(expr, max_states=max_states)


def excluding_lexeme(expr: Expr) -> tuple[Excluding, bool, Expr | None] | None:
    """``(leaf, quoted, rest)`` if ``expr`` is an ``Excluding`` leaf alone (``rest`` None), or
    between two ``"`` (``quoted``) and then ``rest`` if anything follows: a member of an
    object's other keys, which ``build_byte_dfa`` builds whole."""
    if isinstance(expr, Excluding):
        return expr, False, None
    if isinstance(expr, Seq) and len(expr.items) >= 3 and isinstance(expr.items[1], Excluding) \
            and expr.items[0] == _QUOTE == expr.items[2]:
        return expr.items[1], True, seq(*expr.items[3:]) if len(expr.items) > 3 else None
    return None


_QUOTE = Literal('"')


def _decoding_lexeme(expr: Expr) -> tuple[CharDFA, bool] | None:
    """``(dfa, quoted)`` if ``expr`` is a ``Decoding`` leaf alone or between two ``"`` (a
    pattern's string): its tagged table is written from the automaton, no NFA to determinise."""
    if isinstance(expr, Decoding):
        return expr.dfa, False
    if isinstance(expr, Seq) and len(expr.items) == 3 and isinstance(expr.items[1], Decoding) \
            and expr.items[0] == _QUOTE == expr.items[2]:
        return expr.items[1].dfa, True
    return None


_RAW_CUTS = np.array(sorted({c for a, b in RAW_OK.ranges for c in (a, b + 1)} | {0x22, 0x23}),
                     np.int64)  # (the quote's own atom, for a quoted string)


def _decoding_table(dfa: CharDFA, quoted: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The tagged table (as ``automata.tagged_table`` reads it, not minimised) of the JSON
    string bodies decoding to ``dfa``'s words, between quotes if ``quoted``: per state, each
    atom's target for its tagged symbols and, for its characters in ``RAW_OK``, its plain ones."""
    plain = np.union1d(dfa.bounds, _RAW_CUTS[_RAW_CUTS <= MAX_CODE_POINT])
    bounds = np.concatenate([plain, TAG_OFFSET + dfa.bounds])
    atom_of = np.searchsorted(dfa.bounds, plain, "right") - 1
    raw = np.array([int(c) in RAW_OK for c in plain.tolist()], np.bool_)
    n, k = dfa.num_states, len(plain)
    body = np.full((n, len(bounds)), -1, np.int32)
    body[:, :k] = np.where(raw, dfa.trans[:, atom_of], -1)
    body[:, k:] = dfa.trans
    if not quoted:
        return bounds, body, dfa.accept.copy()
    quote = int(np.searchsorted(plain, 0x22))  # the atom of ``"`` (not raw: free in ``body``)
    trans = np.full((n + 2, len(bounds)), -1, np.int32)
    trans[1 : n + 1] = np.where(body >= 0, body + 1, -1)
    trans[0, quote] = 1
    trans[1 : n + 1, quote] = np.where(dfa.accept, n + 1, -1)
    accept = np.zeros(n + 2, np.bool_)
    accept[n + 1] = True
    return bounds, trans, accept


@functools.lru_cache(maxsize=16)
def _string_body(chars: CharClass) -> ByteDFA:
    """Every JSON string body over ``chars`` (its start is its only character boundary)."""
    return build_byte_dfa(repeat(encode_class(chars)))


def _excluding_dfa(leaf: Excluding, quoted: bool, nonempty: bool, max_states: int,
                   tail: ByteDFA | None = None) -> ByteDFA | None:
    """The byte DFA of ``leaf`` (``quoted``: between two ``"``, then ``tail`` if given) from the
    words' trie and the DFA of every string body over its class, without the tagged table: each
    trie node is a copy of the body's boundary state in which the spellings of its children's
    characters lead to the children (a spelling's prefix is one state per node, both cases of a
    hex digit alike) and every other byte goes on as in the body, so a string leaves the trie
    at its first character off it (``_excluding_table``). The trie and the prefixes lead to
    the body and the tail, so the table is minimised as a DAG in front of them
    (``canonical_packed_dag``). The same table as the tagged construction gives (the tests
    compare them); a 5-key member's in ~0.18 ms. None past ``max_states`` rows before
    minimisation: the tagged construction then bounds its work as it goes."""
    body = _string_body(leaf.chars)
    text = "".join(leaf.words).encode("utf-32-le", "surrogatepass")
    offsets = np.zeros(len(leaf.words) + 1, np.int64)
    np.cumsum([len(w) for w in leaf.words], out=offsets[1:])
    rest = _NO_TAIL if tail is None else tail
    built = _excluding_table(np.frombuffer(text, np.uint32), offsets,
                             np.array(leaf.chars.ranges, np.int64).reshape(-1, 2),
                             *_packing(body), quoted, *_packing(rest), max_states)
    if built is None:
        return None
    table, accept, closed, column = built
    if nonempty and accept[0]:  # (unquoted, "" not left out): a fresh start, as ``_finish``
        return _finish((table[:, column], accept), nonempty, max_states)
    packed = canonical_packed_dag(table, accept, closed, column)
    assert packed is not None, "a trie is a tree"
    return _finished(*packed, max_states)


def _packing(dfa: ByteDFA) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(classes, table, accept)`` of ``dfa``, read-only, as the kernels over packed tables
    take them."""
    classes, table = dfa.packed if dfa.packed is not None else byte_packing(dfa.trans)
    return _read_only(classes), _read_only(table), _read_only(dfa.accept)


# what follows the closing quote of a key complement with no tail: the end, one accepting state
_NO_TAIL = ByteDFA(None, np.ones(1, bool), packed=(np.zeros(256, np.uint8),
                                                   np.full((1, 1), -1, np.int32)))


def _read_only(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a``: tables arrive writable or not, and numba compiles a kernel
    once per combination of flags; a compile met first in the middle of a run costs seconds
    (writable ``_NO_TAIL`` rows for a quoted key complement with nothing after it took
    Github_easy---o35866 from 0.97 to 5.3 s)."""
    view = a.view()
    view.setflags(write=False)
    return view


@njit(cache=True, nogil=True)
def _excluding_table(code_points, offsets, ranges, body_classes, body, body_accept, quoted,  # noqa: ANN001, ANN201
                     tail_classes, tail, tail_accept, max_states):  # pragma: no cover - compiled
    """``_excluding_dfa``'s table before minimisation, over byte columns: ``(table, accept,
    closed, column)``, None past ``max_states`` rows. ``column`` (int64 [256]) maps each byte
    to its column: the bytes split as the body and tail do (both given packed: ``classes``,
    ``table``), and every byte a spelling of a trie edge or a quote reads is a column of its
    own; columns are numbered by first byte, as packing numbers them. The rows: with quotes, a
    start that reads the opening one; one per trie node (``_word_trie``: the body's boundary
    row); the body; the spellings' prefix states, each a copy of the body row it stands beside
    (a prefix state is known by its row: a target past the body in a row this node wrote);
    with quotes, the tail, whose start every state where the body may end reaches by the
    closing quote. ``closed`` marks the body and the tail: the other rows lead there or to each
    other, without a cycle."""
    final, kid_ptr, kid_char, kid_node = _word_trie(code_points, offsets, ranges)
    num_nodes = final.shape[0]
    if num_nodes > max_states:
        return None
    spelled = np.empty((3, 12), np.uint8)
    lengths = np.empty(3, np.int64)
    alone = np.zeros(256, np.bool_)  # bytes written one at a time: a column each
    alone[0x22] = True
    for k in range(kid_ptr[num_nodes]):
        for j in range(_spell(kid_char[k], spelled, lengths)):
            for i in range(lengths[j]):
                b = spelled[j, i]
                alone[b] = True
                if i >= 2 and 0x61 <= b <= 0x66:  # a hex digit: either case
                    alone[b - 32] = True
    column = np.empty(256, np.int64)
    rep = np.empty(256, np.int64)  # the first byte of each column
    width = 0
    for b in range(256):
        column[b] = -1
        if not alone[b]:
            for c in range(width):
                r = rep[c]
                if (not alone[r] and body_classes[r] == body_classes[b]
                        and tail_classes[r] == tail_classes[b]):
                    column[b] = c
                    break
        if column[b] < 0:
            column[b] = width
            rep[width] = b
            width += 1
    first = 1 if quoted else 0
    shift = first + num_nodes  # body state s is state shift + s
    prefix_base = shift + body.shape[0]  # then one state per spelling prefix
    rest = tail.shape[0] if quoted else 0
    capacity = prefix_base + 8 * kid_node.shape[0] + rest
    table = np.empty((capacity, width), np.int32)
    table[:first] = -1
    for s in range(body.shape[0]):
        for c in range(width):
            t = body[s, body_classes[rep[c]]]
            table[shift + s, c] = t + shift if t >= 0 else -1
    for n in range(num_nodes):
        table[first + n] = table[shift]
    top = prefix_base
    for n in range(num_nodes):
        for k in range(kid_ptr[n], kid_ptr[n + 1]):
            for j in range(_spell(kid_char[k], spelled, lengths)):
                here = first + n
                last = lengths[j] - 1
                for i in range(last + 1):
                    b = spelled[j, i]
                    col = column[b]
                    if i == last:
                        nxt = first + kid_node[k]
                    else:
                        nxt = table[here, col]
                        if nxt < 0:  # (every spelling lives in the body)
                            return None
                        if nxt < prefix_base:  # a new prefix: the body state it stands beside
                            if top + rest == capacity:
                                capacity *= 2
                                grown = np.empty((capacity, width), np.int32)
                                grown[:top] = table[:top]
                                table = grown
                            table[top] = table[nxt]
                            nxt = top
                            top += 1
                            if top > max_states:
                                return None
                    table[here, col] = nxt
                    if i >= 2 and 0x61 <= b <= 0x66:  # a hex digit: either case
                        table[here, column[b - 32]] = nxt
                    here = nxt
    accept = np.zeros(top + rest, np.bool_)
    for n in range(num_nodes):
        accept[first + n] = not final[n]
    accept[shift:prefix_base] = body_accept
    closed = np.zeros(top + rest, np.bool_)
    closed[shift:prefix_base] = True
    if quoted:  # an opening quote, and a closing one wherever the body may end, to the tail
        if top + rest > max_states:
            return None
        for s in range(rest):
            for c in range(width):
                t = tail[s, tail_classes[rep[c]]]
                table[top + s, c] = t + top if t >= 0 else -1
        quote = column[0x22]
        table[0, quote] = first
        for s in range(top):
            if accept[s]:
                table[s, quote] = top
        accept[:top] = False
        accept[top:] = tail_accept
        closed[top:] = True
    return table[: top + rest], accept, closed, column


@njit(cache=True, nogil=True)
def _word_trie(code_points, offsets, ranges):  # noqa: ANN001, ANN201  # pragma: no cover
    """``automata.trie_nodes`` over the sorted, distinct words ``code_points[offsets[i]:
    offsets[i + 1]]``, children only on characters in ``ranges`` (int64 [R, 2], sorted):
    ``(final, kid_ptr, kid_char, kid_node)``, node ``n``'s children ``kid_ptr[n]:kid_ptr[n +
    1]``. A node is a run of words sharing a prefix; sorted, the prefix itself (if it is a
    word) comes first and the children are the runs of equal next characters."""
    cap = code_points.shape[0] + 1  # a node per distinct nonempty prefix, and the root
    lo = np.empty(cap, np.int64)
    hi = np.empty(cap, np.int64)
    depth = np.empty(cap, np.int64)
    final = np.zeros(cap, np.bool_)
    kid_ptr = np.zeros(cap + 1, np.int64)
    kid_char = np.empty(cap, np.int64)
    kid_node = np.empty(cap, np.int64)
    lo[0], hi[0], depth[0] = 0, offsets.shape[0] - 1, 0
    num = 1
    k = 0
    n = 0
    while n < num:
        d = depth[n]
        final[n] = lo[n] < hi[n] and offsets[lo[n] + 1] - offsets[lo[n]] == d
        i = lo[n] + 1 if final[n] else lo[n]
        while i < hi[n]:
            ch = code_points[offsets[i] + d]
            j = i + 1
            while j < hi[n] and code_points[offsets[j] + d] == ch:
                j += 1
            inside = False
            for r in range(ranges.shape[0]):
                if ranges[r, 0] <= ch <= ranges[r, 1]:
                    inside = True
                    break
            if inside:
                kid_char[k] = ch
                kid_node[k] = num
                k += 1
                lo[num], hi[num], depth[num] = i, j, d + 1
                num += 1
            i = j
        kid_ptr[n + 1] = k
        n += 1
    return final[:num], kid_ptr[: num + 1], kid_char[:k], kid_node[:k]


@njit(cache=True, nogil=True)
def _spell(c, out, lengths):  # noqa: ANN001, ANN201  # pragma: no cover - compiled
    """The JSON spellings of the character ``c`` (hex digits in lower case) into ``out`` (uint8
    [3, 12]) and ``lengths``; their number. Raw UTF-8 where JSON allows it (``RAW_OK``: from
    U+0020, but ``"`` and ``\\``), a short escape (``SHORT_ESCAPES``), ``\\uXXXX`` (two for a
    character past the BMP)."""
    num = 0
    if c >= 0x20 and c != 0x22 and c != 0x5C:
        lengths[num] = _utf8(c, out[num])
        num += 1
    short = _SHORT_ESCAPE[c] if c < 0x80 else 0
    if short:
        out[num, 0] = 0x5C
        out[num, 1] = short
        lengths[num] = 2
        num += 1
    if c <= 0xFFFF:
        _u_escape(c, out[num], 0)
        lengths[num] = 6
    else:
        _u_escape(0xD800 + ((c - 0x10000) >> 10), out[num], 0)
        _u_escape(0xDC00 + ((c - 0x10000) & 0x3FF), out[num], 6)
        lengths[num] = 12
    return num + 1


_SHORT_ESCAPE = np.zeros(0x80, np.uint8)  # a character's letter after ``\\`` (0: none)
for _char, _escape in SHORT_ESCAPES.items():
    _SHORT_ESCAPE[ord(_char)] = ord(_escape[1])
_SHORT_ESCAPE.setflags(write=False)
_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)


@njit(cache=True, nogil=True)
def _u_escape(c, out, at):  # noqa: ANN001, ANN201  # pragma: no cover - compiled
    """``\\uXXXX`` of the code unit ``c`` into ``out[at:at + 6]``, hex digits in lower case."""
    out[at] = 0x5C
    out[at + 1] = 0x75
    for i in range(4):
        out[at + 2 + i] = _HEX[(c >> (12 - 4 * i)) & 0xF]


@njit(cache=True, nogil=True)
def _utf8(c, out):  # noqa: ANN001, ANN201  # pragma: no cover - compiled
    """The UTF-8 bytes of ``c`` into ``out``; their number."""
    if c < 0x80:
        out[0] = c
        return 1
    if c < 0x800:
        out[0] = 0xC0 | (c >> 6)
        out[1] = 0x80 | (c & 0x3F)
        return 2
    if c < 0x10000:
        out[0] = 0xE0 | (c >> 12)
        out[1] = 0x80 | ((c >> 6) & 0x3F)
        out[2] = 0x80 | (c & 0x3F)
        return 3
    out[0] = 0xF0 | (c >> 18)
    out[1] = 0x80 | ((c >> 12) & 0x3F)
    out[2] = 0x80 | ((c >> 6) & 0x3F)
    out[3] = 0x80 | (c & 0x3F)
    return 4


# The syntax of JSON string bodies, one byte at a time. State 0 is a character boundary; the
# others are inside a character: UTF-8 continuation bytes to go, after a backslash, hex digits
# of a ``\uXXXX`` to go (``_UD3``: after ``\uD``, a surrogate or not; ``_H*``: of a high
# surrogate, whose low half ``\uDC00``-``\uDFFF`` must follow before the boundary).
(_BOUNDARY, _CONT1, _CONT2, _CONT3, _ESC, _U4, _UD3, _X3, _X2, _X1,
 _H2, _H1, _H0, _HIGH, _LOW_U, _LOW_D) = range(16)
_WHERE = ("where a character starts",) + ("inside a UTF-8 character",) * 3 + (
    "after a backslash",) + ("inside a \\u escape",) * 5 + (
    "inside a surrogate pair",) * 6


def _json_body_syntax() -> np.ndarray:
    """int8 [16, 256]: the syntax state after a byte; -1 where no JSON string body has it (a
    raw ``"`` or control byte, a bad escape or UTF-8 byte, a lone surrogate)."""
    t = np.full((16, 256), -1, np.int8)

    def put(state: int, chars: bytes | range, target: int) -> None:
        t[state, list(chars)] = target

    hex_digits = b"0123456789abcdefABCDEF"
    put(_BOUNDARY, range(0x20, 0x80), _BOUNDARY)
    put(_BOUNDARY, b'"', -1)
    put(_BOUNDARY, b"\\", _ESC)
    put(_BOUNDARY, range(0xC2, 0xE0), _CONT1)
    put(_BOUNDARY, range(0xE0, 0xF0), _CONT2)
    put(_BOUNDARY, range(0xF0, 0xF5), _CONT3)
    for state, target in ((_CONT1, _BOUNDARY), (_CONT2, _CONT1), (_CONT3, _CONT2)):
        put(state, range(0x80, 0xC0), target)
    put(_ESC, b'"\\/bfnrt', _BOUNDARY)
    put(_ESC, b"u", _U4)
    put(_U4, hex_digits, _X3)
    put(_U4, b"dD", _UD3)
    put(_UD3, b"01234567", _X2)
    put(_UD3, b"89abAB", _H2)  # \uDC..-\uDF.. here would be a lone low surrogate
    for state, target in ((_X3, _X2), (_X2, _X1), (_X1, _BOUNDARY), (_H2, _H1), (_H1, _H0)):
        put(state, hex_digits, target)
    put(_H0, b"\\", _HIGH)
    put(_HIGH, b"u", _LOW_U)
    put(_LOW_U, b"dD", _LOW_D)
    put(_LOW_D, b"cdefCDEF", _X2)  # the low half's last two digits, then the boundary
    t.setflags(write=False)
    return t


_SYNTAX = _json_body_syntax()


def _capped(dfa: ByteDFA, cap: int) -> ByteDFA:
    """``dfa`` (a ``Capped`` item's) with the bound ``cap`` and its character starts.

    ``char_start[q]`` iff ``q`` is paired with the boundary in the reachable pairs (DFA state,
    ``_SYNTAX`` state) from ``(0, boundary)``. The flags count the decoded characters of every
    accepted string exactly only if each state is either at a boundary or inside a character,
    and the DFA reads nothing the syntax rejects and accepts only at a boundary; anything else
    is refused rather than miscounted. Tiles are dropped: a capped state's language depends
    on the count too, so equal tiles would not mean equal mask rows.

    Raises
    ------
    GrammarError
        The item does not match JSON string bodies only.
    """
    n, k = dfa.num_states, _SYNTAX.shape[0]
    seen = np.zeros((n, k), np.bool_)
    bad = _syntax_pairs(dfa.trans, _SYNTAX, seen, np.empty(n * k, np.int64))
    hint = "wrap only a JSON string body (the text between the quotes) in Capped"
    if bad >= 0:
        pair, byte = divmod(bad, 256)
        raise GrammarError(
            f"Capped item must match JSON string bodies only: it reads byte 0x{byte:02x} "
            f"({chr(byte)!r}) {_WHERE[pair % k]} (DFA state {pair // k})", hint=hint)
    start = seen[:, _BOUNDARY]
    inside = seen[:, _BOUNDARY + 1 :].any(axis=1)
    both = np.flatnonzero(start & inside)
    if both.size:
        raise GrammarError(
            "Capped item must match JSON string bodies with one decoding: DFA state "
            f"{both[0]} is both at a character boundary and inside a character", hint=hint)
    if (dfa.accept & inside).any():
        raise GrammarError("Capped item must match JSON string bodies only: it accepts a "
                           "string that ends inside a character", hint=hint)
    start.setflags(write=False)
    return ByteDFA(dfa.trans, dfa.accept, cap=cap, char_start=start)


@njit(cache=True, nogil=True)
def _syntax_pairs(trans: np.ndarray, syntax: np.ndarray, seen: np.ndarray,
                  stack: np.ndarray) -> int:  # pragma: no cover - compiled
    """Marks in ``seen`` (bool [n, k]) the pairs (DFA state, syntax state) reachable from
    ``(0, 0)`` over the live transitions of ``trans``; returns -1, or ``(q * k + s) * 256 + b``
    for a reachable pair ``(q, s)`` whose live byte ``b`` ``syntax`` rejects. ``stack`` is
    int64 [n * k] scratch."""
    k = syntax.shape[0]
    seen[0, 0] = True
    stack[0] = 0
    top = 1
    while top > 0:
        top -= 1
        q, s = divmod(stack[top], k)
        for b in range(256):
            t = trans[q, b]
            if t < 0:
                continue
            u = syntax[s, b]
            if u < 0:
                return (q * k + s) * 256 + b
            if not seen[t, u]:
                seen[t, u] = True
                stack[top] = t * k + u
                top += 1
    return -1


TILE_MIN_COUNT = 8  # bounded repeats of more copies are built by ``_tiled`` where they can be


def _counted(expr: Expr) -> tuple[Expr, int, int] | None:
    """``(x, m, n)`` when ``expr`` is ``x{m,n}`` with ``n > TILE_MIN_COUNT``, else None. Also
    recognised: a sequence of bounded repeats of one ``x`` (counts add up) and a choice of such
    whose count ranges leave no gap, the shapes ``tables._chunked`` leaves in one terminal."""
    if isinstance(expr, Choice):
        ranges = [r for r in map(_count_range, expr.items) if r is not None]
        if not ranges or len(ranges) < len(expr.items):
            return None
        ranges.sort(key=lambda r: r[1])
        x, lo, hi = ranges[0]
        for y, a, b in ranges[1:]:
            if not (y is x or y == x) or a > hi + 1:
                return None
            hi = max(hi, b)
        found: tuple[Expr, int, int] | None = (x, lo, hi)
    else:
        found = _count_range(expr)
    return found if found is not None and found[2] > TILE_MIN_COUNT else None


def _count_range(expr: Expr) -> tuple[Expr, int, int] | None:
    """``(x, m, n)`` for ``x{m,n}`` or a sequence of ``x`` and bounded repeats of ``x``."""
    items = expr.items if isinstance(expr, Seq) else (expr,)
    x = next((i.item for i in items if isinstance(i, Repeat)), None)
    lo = hi = 0
    for i in items:
        if isinstance(i, Repeat) and i.max is not None and (i.item is x or i.item == x):
            lo, hi = lo + i.min, hi + i.max
        elif i is x or i == x:
            lo, hi = lo + 1, hi + 1
        else:
            return None
    return None if x is None else (x, lo, hi)


def _tiled(unit: ByteDFA, lo: int, hi: int, nonempty: bool, max_states: int) -> ByteDFA | None:
    """The DFA of ``x{lo,hi}`` as ``hi`` copies of ``x``'s DFA ``unit``, or None unless ``x``
    is a prefix code (one accepting state, without transitions, and not the start) whose start
    is never re-entered (no transition into it), as one JSON character or one UTF-8 character
    is. The start of a copy stands for "the previous copies are done"; a start re-entered,
    as in ``(a*b){1,20}``, would accept ``ba`` there.

    Copy ``i`` reads the ``i+1``-th ``x``; the transitions into ``unit``'s accepting state go
    to the start of copy ``i+1`` instead, and the start of copy ``i`` accepts iff ``lo <= i``.
    The start of copy 0 is entered only at the beginning, so ``nonempty`` just makes it
    non-accepting. A subset construction would build the same table; this costs one copy per
    count (a JSON string of up to 255 characters in ~1 ms instead of ~130 ms). The copies are
    pairwise distinguishable (each has its own count left), and within a copy the states are
    as distinct as ``unit``'s, so the table is minimal; it is numbered copy by copy.

    ``tile[q] = (unit key, state in the unit, copies left, copies still needed)`` names the
    sub-automaton reachable from ``q`` exactly (the rest of the current copy, then between
    ``needed - 1`` and ``left - 1`` more): equal tiles mean equal languages from the state, in
    any grammar, which lets mask rows be shared without reading the sub-automaton."""
    final = np.flatnonzero(unit.accept)
    if (final.shape[0] != 1 or final[0] == 0 or (unit.trans[final[0]] >= 0).any()
            or (unit.trans == 0).any()):
        return None
    f = int(final[0])
    k = unit.num_states - 1  # states per copy: all but the accepting one
    n = hi * k + 1
    if n > max_states:
        raise GrammarTooLargeError("dfa_states", n, max_states)
    inner = np.delete(np.arange(unit.num_states), f)
    index = np.full(unit.num_states, -1, dtype=np.int64)
    index[inner] = np.arange(k)  # start 0 stays 0: f != 0
    block = unit.trans[inner].astype(np.int64)
    local = np.where(block >= 0, index[np.maximum(block, 0)], -1)
    into_final = block == f
    trans = np.full((n, 256), -1, dtype=np.int32)
    for i in range(hi):
        rows = trans[i * k : (i + 1) * k]
        rows[:] = np.where(local >= 0, local + i * k, -1)
        rows[into_final] = (i + 1) * k
    accept = np.zeros(n, dtype=np.bool_)
    accept[np.arange(lo, hi + 1) * k] = True
    copy = np.arange(n) // k
    tile = np.empty((n, 4), dtype=np.int64)
    tile[:, 0] = _unit_key(unit)
    tile[:, 1] = np.arange(n) % k
    tile[:, 2] = hi - copy
    tile[:, 3] = np.maximum(lo - copy, 0)
    if nonempty:
        accept[0] = False
        tile[0, 3] = max(lo, 1)
    for a in (trans, accept, tile):
        a.setflags(write=False)
    return ByteDFA(trans, accept, tile)


def _unit_key(unit: ByteDFA) -> int:
    """A 62-bit digest of ``unit``'s table (tiles of equal units get equal keys)."""
    digest = hashlib.blake2b(unit.trans.tobytes() + unit.accept.tobytes(), digest_size=8)
    return int.from_bytes(digest.digest(), "little") >> 2


def _build_with_rules(expr: Expr, rules: RuleSet, nonempty: bool, max_states: int) -> ByteDFA:
    """``build_byte_dfa`` for a lexeme that references rule groups (same two spelling paths)."""
    if _has_json_char(expr) or _rule_bodies(rules).json_chars:
        try:
            table_t = _rule_table(expr, rules, _json_tag, max_states)
            return _finish(_Lowering(*table_t, max_states).build(), nonempty, max_states)
        except _Overlap:
            pass  # as in build_byte_dfa: expand the encodings as IR
    plain = _rule_table(expr, rules, None, max_states)
    return _finish(_Lowering(*plain, max_states).build(), nonempty, max_states)


@dataclass(frozen=True, eq=False)
class _RuleBodies:
    """What every lexeme referencing one ``RuleSet`` needs of its bodies, found once per set
    (``_rule_bodies``, ``_rule_atoms``): a big pattern automaton is a group of thousands of
    state rules, and each of its hundreds of lexemes walked them all again."""

    table: dict[str, tuple[int, Expr]]  # name -> (group, body)
    json_chars: bool  # some body holds a JSON character encoding (``_has_json_char``)


@functools.lru_cache(maxsize=16)
def _rule_bodies(rules: RuleSet) -> _RuleBodies:
    """The bodies of ``rules`` by name, and whether any holds a JSON character encoding."""
    return _RuleBodies({name: (group, body) for name, group, body in rules},
                       any(_has_json_char(body) for _, _, body in rules))


@functools.lru_cache(maxsize=16)
def _rule_atoms(rules: RuleSet, tag: Tagger | None) -> tuple[np.ndarray, frozenset[int],
                                                             frozenset[int]]:
    """The atom starts the bodies of ``rules`` cut (``automata._atom_bounds``), the ids of
    their compound nodes and of those shared (``automata._compound_nodes``), spelled with
    ``tag``. The cache keeps ``rules`` alive, so the ids stay theirs."""
    bodies = [body for _, _, body in rules]
    shared: set[int] = set()
    met = _compound_nodes(bodies, tag, shared)
    bounds = _atom_bounds(Choice(tuple(bodies)), tag, refs=True, raw=_raw(tag))
    return bounds, frozenset(met), frozenset(shared)


def _raw(tag: Tagger | None) -> CharClass | None:
    """What a tagged JSON character may spell unescaped (the lexer's only tagger is
    ``_json_tag``): read as plain characters (``automata.tagged_table``)."""
    return None if tag is None else RAW_OK


def _rule_table(
    expr: Expr, rules: RuleSet, tag: Tagger | None, max_states: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The minimal character table of ``expr`` with its rule references expanded (tagged
    symbols as in ``automata.tagged_table`` when ``tag`` is given): (bounds, trans, accept).
    The bodies' part of the atoms and of the sharing is the same for every lexeme of
    ``rules``; only ``expr`` is walked."""
    body_bounds, met, shared = _rule_atoms(rules, tag)
    bounds = np.union1d(_atom_bounds(expr, tag, refs=True, raw=_raw(tag)), body_bounds)
    nfa = _RuleNfa(bounds, max(100_000, 20 * max_states), tag, _rule_bodies(rules).table)
    nfa.share(expr, met=met, shared=shared)
    start, final = nfa.new(), nfa.new()
    nfa.build(expr, start, final)
    trans, accept = nfa.determinize(start, final, max_states)
    trans[:, _surrogate_atoms(bounds)] = -1  # plain surrogates, and tagged ones:
    trans[:, np.flatnonzero((bounds >= TAG_OFFSET + SURROGATES[0])
                            & (bounds <= TAG_OFFSET + SURROGATES[1]))] = -1
    trans, accept = canonical_table(trans, accept)
    return bounds, trans, accept


class _RuleNfa(_Nfa):
    """A Thompson NFA that also builds ``Ref`` to right-linear rule groups.

    A reference from outside a group opens one *instance* of it: a fresh entry state per member
    (created when first referenced), each member's body built from its entry to the ``end`` the
    outer reference was given. A reference met while its own group's instance is open is a
    tail reference (the compiler only groups right-linear rules), so it is an epsilon edge to
    the member's entry: whatever follows it in the body can only be the empty string. Bodies
    are built from a worklist, so long chains of members cost no stack.
    """

    def __init__(self, bounds: np.ndarray, limit: int, tag: Tagger | None,
                 rules: dict[str, tuple[int, Expr]]) -> None:
        super().__init__(bounds, limit, tag, _raw(tag))
        self.rules = rules
        self.open: dict[int, tuple[dict[str, int], list[str]]] = {}  # group -> entries, to build

    def build(self, expr: Expr, start: int, end: int) -> None:
        if not isinstance(expr, Ref):
            super().build(expr, start, end)
            return
        group = self.rules[expr.name][0]
        instance = self.open.get(group)
        if instance is not None:
            self.eps += (start, self._entry(instance, expr.name))
            return
        instance = ({}, [])
        self.open[group] = instance
        self.eps += (start, self._entry(instance, expr.name))
        entries, todo = instance
        while todo:
            name = todo.pop()
            self.build(self.rules[name][1], entries[name], end)
        del self.open[group]

    def _stampable(self) -> bool:
        """A tail reference inside a copy would enter an open instance, shared by all copies."""
        return not self.open

    def _entry(self, instance: tuple[dict[str, int], list[str]], name: str) -> int:
        entries, todo = instance
        if name not in entries:
            entries[name] = self.new()
            todo.append(name)
        return entries[name]


def _json_tag(expr: Expr) -> Tagged | None:
    """The lexer's tagger: a JSON character encoding is one tagged character of its class
    (``encodings.decoded_class``), an ``Excluding`` leaf the tagged strings outside its words,
    a ``Decoding`` leaf the tagged strings of its automaton."""
    if isinstance(expr, Excluding):
        return tagged_outside(expr.words, expr.chars)
    if isinstance(expr, Decoding):
        return tagged_states(expr.dfa)
    return decoded_class(expr)


def _has_json_char(expr: Expr) -> bool:
    """True iff some sub-expression is a JSON character encoding ``_json_tag`` recognises."""
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, (Excluding, Decoding)) or decoded_class(e) is not None:
            return True
        stack.extend(children(e))
    return False


def byte_dfa_from_char_dfa(
    dfa: CharDFA, *, nonempty: bool = False, max_states: int = 50_000
) -> ByteDFA:
    """Lower a character DFA to UTF-8 bytes; see ``build_byte_dfa`` for the parameters.

    Invariant: ``result.matches(s.encode())`` iff ``dfa.matches(s)`` (and ``s != ""`` when
    ``nonempty``), and a byte string is alive iff it prefixes such an encoding.
    """
    builder = _Lowering(dfa.bounds, dfa.trans, dfa.accept, max_states)
    return _finish(builder.build(), nonempty, max_states)


def _finish(table: tuple[np.ndarray, np.ndarray], nonempty: bool, max_states: int) -> ByteDFA:
    """Canonical ``ByteDFA`` of a deterministic byte table (start 0), minus "" if ``nonempty``."""
    trans, accept = table
    if nonempty and accept[0]:
        # a fresh non-accepting start with the old start's transitions (shifted by one)
        shifted = np.where(trans < 0, -1, trans + 1).astype(np.int32)
        trans = np.vstack([shifted[:1], shifted])
        accept = np.concatenate([[False], accept])
    return _finished(*canonical_packed(np.ascontiguousarray(trans, np.int32),
                                       np.ascontiguousarray(accept, bool)), max_states)


def _finished(accept: np.ndarray, classes: np.ndarray, packed: np.ndarray,
              max_states: int) -> ByteDFA:
    """The ``ByteDFA`` of a canonical table given packed, within ``max_states``."""
    if accept.shape[0] > max_states:
        raise GrammarTooLargeError("dfa_states", int(accept.shape[0]), max_states)
    for a in (accept, classes, packed):
        a.setflags(write=False)
    return ByteDFA(None, accept, packed=(classes, packed))


class _Overlap(Exception):
    """A plain backslash and a JSON escape leave one state for different targets."""


class _Lowering:
    """Builds the (unminimised, deterministic) byte table of one character-level table.

    The table's symbols are code points ``c`` (spelled as UTF-8) and, past ``TAG_OFFSET``,
    JSON-encoded characters ``TAG_OFFSET + c`` (spelled as a short escape, as ``\\uXXXX`` in
    either case, or as a surrogate pair; see ``grammar.encodings``: their unescaped spelling is
    a plain symbol, ``automata.tagged_table``'s ``raw``).
    Rows ``0..n-1`` are the character states; later rows are intermediate states, written
    per distinct map from a shape built once per process (``_utf8_shape``, ``_escape_shape``:
    the map's targets as labels): the continuation bytes left of a UTF-8 spelling, and the
    escape states (after ``\\``; ``d`` hex digits left; a surrogate pair's low half still to
    come). Rows live in ``table`` (int32 [capacity, 256], doubled as needed; ``size`` rows in
    use), so write a row by index once its children are made, never through a view kept across
    them. Two maps that differ share no intermediate state, even where a block of them agrees;
    minimisation merges such copies.
    """

    def __init__(self, bounds: np.ndarray, trans: np.ndarray, accept: np.ndarray,
                 max_states: int) -> None:
        self.bounds = bounds.tolist()
        self.tagged = self.bounds[-1] >= TAG_OFFSET  # else the last atom runs to 0x10FFFF only
        self.trans = trans
        self.accept = accept
        self.max_states = max_states
        n = trans.shape[0]
        # character rows: ASCII spelled at once for every state (one byte = one code point);
        # room for the intermediate rows (~3 per character row at the median), written only
        # as they are handed out (``_new_rows``), so untouched room costs no memory traffic
        self.table = np.empty((4 * n + 64, 256), np.int32)
        self.table[:n, 0x80:] = -1
        self.table[:n, :0x80] = trans[:, np.searchsorted(bounds, np.arange(0x80), "right") - 1]
        self.size = n
        self.nodes: dict[tuple[object, ...], int] = {}
        self.wide: dict[Pieces, tuple[np.ndarray, np.ndarray]] = {}  # see ``_utf8_row``

    def build(self) -> tuple[np.ndarray, np.ndarray]:
        n = self.trans.shape[0]
        first_wide = bisect_right(self.bounds, 0x80) - 1  # the atom holding U+0080
        wide = (self.trans[:, first_wide:] >= 0).any(axis=1)
        # each row's pieces: the atoms whose target differs from the atom before
        starts = np.asarray(self.bounds)
        new_target = np.ones(self.trans.shape, bool)
        new_target[:, 1:] = self.trans[:, 1:] != self.trans[:, :-1]
        for s in np.flatnonzero(wide).tolist():  # states with more than ASCII to spell
            at = np.flatnonzero(new_target[s])
            pieces = tuple(zip(starts[at].tolist(), self.trans[s, at].tolist(), strict=True))
            plain = _restrict(pieces, 0, TAG_OFFSET)
            encoded = _restrict(pieces, TAG_OFFSET, TAG_OFFSET) if self.tagged else _DEAD
            if encoded != _DEAD:  # escapes only: unescaped spellings are plain atoms
                if _at(plain, 0x5C) >= 0:
                    raise _Overlap()
                escape = self._escape(encoded)
                self.table[s, 0x5C] = escape
            self._utf8_row(s, plain)
        accept = np.zeros(self.size, bool)
        accept[:n] = self.accept
        return self.table[: self.size], accept

    def _utf8_row(self, state: int, pieces: Pieces) -> None:
        """Spell every code point of ``pieces`` (over 0..0x10FFFF) in UTF-8 from ``state``.

        The lead bytes and continuation states depend only on the map above U+007F: once per
        distinct map (``self.wide``) its states are written from the shape of the map
        (``_utf8_shape``, its targets as labels), and the lead row kept to copy."""
        key = _restrict(pieces, 0x80, TAG_OFFSET)
        lead = self.wide.get(key)
        if lead is None:
            targets, shape = _labelled(_overwrite(pieces, 0, 0x7F, -1))
            count, lead_bytes, lead_values, *entries = _utf8_shape(shape, len(targets))
            spelled = self._copy_shape(targets, count, *entries)
            lead = self.wide[key] = (lead_bytes, spelled[lead_values])
        row = self.table[state]
        for start, end, target in _spans(pieces, 0x7F):
            if target >= 0:
                row[start : end + 1] = target
        row[lead[0]] = lead[1]

    def _new_rows(self, count: int) -> int:
        """The first of ``count`` fresh dead rows."""
        node = self.size
        self.size += count
        if self.size > self.max_states:
            raise GrammarTooLargeError("dfa_states", self.size, self.max_states)
        if self.size > self.table.shape[0]:
            more = np.empty((max(self.size, 2 * self.table.shape[0]), 256), np.int32)
            more[:node] = self.table[:node]
            self.table = more
        self.table[node : self.size] = -1
        return node

    def _escape(self, encoded: Pieces) -> int:
        """The state after ``\\`` of a JSON-encoded character mapped by ``encoded``: a copy of
        the escape states of its shape (``_escape_shape``) with the shape's labels replaced
        by this table's targets. Copies may duplicate states; minimisation merges them."""
        key = ("esc", encoded)
        node = self.nodes.get(key)
        if node is not None:
            return node
        targets, shape = _labelled(encoded)
        count, *entries = _escape_shape(shape, len(targets))
        node = self.nodes[key] = int(self._copy_shape(targets, count, *entries)[len(targets)])
        return node

    def _copy_shape(self, targets: list[int], count: int, rows: np.ndarray,
                    columns: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Write a shape's ``count`` states (``(row, byte, value)`` entries) as fresh rows:
        the value of each label (``targets``) and of each state (its row), as indexed."""
        node = self._new_rows(count)
        spelled = np.array(targets + list(range(node, node + count)), np.int32)
        self.table[node + rows, columns] = spelled[values]
        return spelled


def _labelled(pieces: Pieces) -> tuple[list[int], Pieces]:
    """The live targets of ``pieces`` in order of first use, and ``pieces`` with each target
    replaced by its index there (its label; dead stays -1): the shape the map shares with
    every map that differs from it only in its targets."""
    targets = list(dict.fromkeys(t for _, t in pieces if t >= 0))
    label = {t: i for i, t in enumerate(targets)}
    return targets, tuple((start, label.get(t, -1)) for start, t in pieces)


@functools.lru_cache(maxsize=2048)
def _escape_shape(encoded: Pieces, labels: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """The escape states of a JSON-encoded character map whose targets are the labels
    ``0..labels-1``, built once per process for each shape (a few hundred shapes serve every
    string of every schema): ``(state count, row, byte, value)`` of the live entries, a value
    below ``labels`` a label and ``labels + i`` state ``i``; state 0 reads the escape letter."""
    speller = _EscapeSpeller(labels)
    speller.escape(encoded)
    return (len(speller.rows), *speller.entries())


@functools.lru_cache(maxsize=4096)
def _utf8_shape(wide: Pieces, labels: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray,
                                                    np.ndarray, np.ndarray]:
    """The UTF-8 spelling of a map over code points above U+007F whose targets are the labels
    ``0..labels-1`` (``wide``: dead below 0x80), built once per process for each shape:
    ``(state count, lead bytes, their values, row, byte, value)``, values as in
    ``_escape_shape``; the states are the continuation bytes still to read."""
    speller = _Utf8Speller(labels)
    lead: dict[int, int] = {}
    for prefix, depth, lo, hi in _MULTI_BYTE_FORMS:
        clipped = _overwrite(_overwrite(wide, 0, lo - 1, -1), hi + 1, None, -1)
        speller.spell(lead, clipped, prefix, depth, hi)
    live = {byte: v for byte, v in lead.items() if v >= 0}
    lead_bytes = np.array(list(live), np.int64)
    lead_values = np.array(list(live.values()), np.int64)
    lead_bytes.setflags(write=False)
    lead_values.setflags(write=False)
    return (len(speller.rows), lead_bytes, lead_values, *speller.entries())


class _Speller:
    """States of one shape, hash-consed by what they still have to read. Node ``labels + i``
    is state ``i``; smaller values are the map's targets (``-1``: dead)."""

    def __init__(self, labels: int) -> None:
        self.labels = labels
        self.rows: list[dict[int, int]] = []
        self.nodes: dict[tuple[object, ...], int] = {}

    def _new_row(self, key: tuple[object, ...]) -> tuple[int, dict[int, int]]:
        node = self.labels + len(self.rows)
        self.nodes[key] = node
        row: dict[int, int] = {}
        self.rows.append(row)
        return node, row

    def entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(row, byte, value)`` of every live entry, read-only (shared by every table of
        this shape)."""
        entries = np.array([(r, byte, v) for r, row in enumerate(self.rows)
                            for byte, v in row.items() if v >= 0], np.int64).reshape(-1, 3)
        entries.setflags(write=False)
        return entries[:, 0], entries[:, 1], entries[:, 2]


class _Utf8Speller(_Speller):
    """The continuation states of UTF-8 spellings (``d`` bytes left, then a map)."""

    def spell(self, row: dict[int, int], pieces: Pieces, prefix: int, depth: int,
              last: int) -> None:
        """Into ``row``: the byte ``prefix + i`` for the block ``i*span .. (i+1)*span-1`` of
        ``pieces`` (over ``0..last``, ``span = 64**depth``), leading to the state that reads
        ``depth`` more continuation bytes."""
        for lo, hi, sub in _split(pieces, 64**depth, last):
            child = self._node(depth, sub)
            for byte in range(prefix + lo, prefix + hi + 1):
                row[byte] = child

    def _node(self, depth: int, pieces: Pieces) -> int:
        """The state that still reads ``depth`` continuation bytes, then maps by ``pieces``."""
        if pieces == _DEAD:
            return -1
        if depth == 0:
            return pieces[0][1]
        key = (depth, pieces)
        node = self.nodes.get(key)
        if node is not None:
            return node
        node, row = self._new_row(key)
        self.spell(row, pieces, 0x80, depth - 1, 64**depth - 1)
        return node


class _EscapeSpeller(_Speller):
    """Builds the escape states of one map (after ``\\``; ``d`` hex digits left; a surrogate
    pair's low half to come)."""

    def escape(self, encoded: Pieces) -> int:
        node, row = self._new_row(("esc", encoded))
        for ch, esc in SHORT_ESCAPES.items():
            row[ord(esc[1])] = _at(encoded, ord(ch))
        # \uXXXX: BMP characters direct; high surrogates lead to the pair's low half
        astral = _restrict(encoded, 0x10000, 0x100000)
        highs = _blocks(astral, 0x400, 0x400, self._low_half)
        bmp = _overwrite(_restrict(encoded, 0, 0x10000), 0xD800, 0xDFFF, -1)
        for start, _ in highs:
            bmp = _overwrite(bmp, 0xD800 + start, 0xDBFF, _at(highs, start))
        row[ord("u")] = self._hex(4, bmp)
        return node

    def _low_half(self, pieces: Pieces) -> int:
        """The state that reads ``\\uDCxx``-``\\uDFxx`` and maps its low 10 bits by ``pieces``."""
        if pieces == _DEAD:
            return -1
        key = ("low", pieces)
        node = self.nodes.get(key)
        if node is not None:
            return node
        node, row = self._new_row(key)
        u_node, u_row = self._new_row(("low-u", pieces))
        row[0x5C] = u_node
        low = _merge([(0, -1), *((0xDC00 + s, t) for s, t in pieces), (0xE000, -1)])
        u_row[ord("u")] = self._hex(4, low)
        return node

    def _hex(self, digits: int, pieces: Pieces) -> int:
        """The state that reads ``digits`` hex digits (either case) and maps their value."""
        if pieces == _DEAD:
            return -1
        if digits == 0:
            return pieces[0][1]
        key = ("hex", digits, pieces)
        node = self.nodes.get(key)
        if node is not None:
            return node
        node, row = self._new_row(key)
        for lo, hi, sub in _split(pieces, 16 ** (digits - 1), 16**digits - 1):
            child = self._hex(digits - 1, sub)
            for v in range(lo, hi + 1):
                row[ord("0123456789abcdef"[v])] = row[ord("0123456789ABCDEF"[v])] = child
        return node


def _split(pieces: Pieces, span: int, last: int) -> list[tuple[int, int, Pieces]]:
    """``pieces`` (over ``0..last``) cut into blocks ``i*span .. (i+1)*span-1``: a list of
    ``(first block, last block, the pieces of each of those blocks re-based to 0)`` covering
    every block that meets a live piece. A run of blocks inside one piece is one entry (its
    blocks are uniform); a block cut by a piece boundary is an entry of its own."""
    out: list[tuple[int, int, Pieces]] = []
    cut: set[int] = set()
    for start, end, target in _spans(pieces, last):
        if target < 0:
            continue
        lo, hi = -(-start // span), (end + 1) // span - 1
        if lo <= hi:
            out.append((lo, hi, ((0, target),)))
        cut.update(b for b in (start // span, end // span) if not lo <= b <= hi)
    out += [(b, b, _restrict(pieces, b * span, span)) for b in sorted(cut)]
    return out


def _spans(pieces: Pieces, last: int) -> list[tuple[int, int, int]]:
    """``(first, last, target)`` of every piece, clipped to ``0..last``."""
    out = []
    for i, (start, target) in enumerate(pieces):
        if start > last:
            break
        end = pieces[i + 1][0] - 1 if i + 1 < len(pieces) else last
        out.append((start, min(end, last), target))
    return out


def _blocks(pieces: Pieces, span: int, count: int, leaf: Callable[[Pieces], int]) -> Pieces:
    """Pieces over block indices ``0..count-1``: block ``i`` maps to ``leaf`` of ``pieces`` on
    ``i*span .. (i+1)*span-1``. Only blocks where a piece starts are looked at; the blocks
    between them are uniform, hence equal to the one before."""
    starts = {0}
    for s, _ in pieces:
        starts.update(b for b in (s // span, s // span + 1) if b < count)
    return _merge([(b, leaf(_restrict(pieces, b * span, span))) for b in sorted(starts)])


def _merge(pieces: list[tuple[int, int]]) -> Pieces:
    """Drop pieces that repeat the previous target (and empty pieces: later start wins)."""
    out: list[tuple[int, int]] = []
    for start, target in pieces:
        if out and out[-1][0] == start:
            out.pop()
        if not out or out[-1][1] != target:
            out.append((start, target))
    return tuple(out)


def _at(pieces: Pieces, cp: int) -> int:
    """The target of ``cp`` (pieces compare as ``(start, target)`` tuples, targets < 2**62)."""
    return pieces[bisect_right(pieces, (cp, _NO_TARGET)) - 1][1]


def _overwrite(pieces: Pieces, lo: int, hi: int | None, target: int) -> Pieces:
    """``pieces`` with ``lo..hi`` (``hi=None``: to the end) mapped to ``target``."""
    if hi is not None and hi < lo:
        return pieces
    out = [(s, t) for s, t in pieces if s < lo] + [(lo, target)]
    if hi is not None:
        out += [(hi + 1, _at(pieces, hi + 1))] + [(s, t) for s, t in pieces if s > hi + 1]
    return _merge(out)


def _restrict(pieces: Pieces, base: int, span: int) -> Pieces:
    """``pieces`` on the block ``base .. base+span-1``, re-based to offset 0."""
    inside = [(s - base, t) for s, t in pieces if base < s < base + span]
    return _merge([(0, _at(pieces, base)), *inside])


__all__ = ["ByteDFA", "RuleSet", "build_byte_dfa", "byte_dfa_from_char_dfa"]
