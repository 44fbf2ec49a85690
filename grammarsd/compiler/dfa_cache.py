"""Terminal DFAs shared across grammars: structural fingerprints, a byte-bounded LRU of packed
tables, and terminals composed from the DFAs of parts met before.

The same lexemes recur in every JSON schema (string values with all their escape spellings,
numbers, whitespace), so most terminals of a new schema are already built (``DfaCache.get``).

Composition. A value type recurs *inside* terminals too: ten properties with ``format: uri``
are ten terminals ``"key" ws ":" ws "\\"" URI "\\""``, each with its own ~950-state copy of the
URI string, ~30 ms each through the character-level construction (``lexer.build_byte_dfa``).
Such a terminal is a tree of ``Seq``, ``Choice`` and small ``Repeat`` nodes over *parts*;
``_compose`` builds it as a Thompson NFA whose pieces are the parts' byte DFAs (from
``DfaCache``'s part store), joined by epsilon edges, and determinises it over bytes in numba
(``_canonical.subsets``), then minimises and numbers it like any DFA (``lexer._finish``).
UTF-8 and JSON spellings are codes, so concatenation and union over bytes are those over
characters: the table is the canonical one the direct construction gives, state for state.

What is a part: a node of JSON string content (it holds JSON character encodings and no raw
``"``: a string body, a pattern, a format), or a quoted string of one, stays whole (``_opaque``),
since the direct construction reads its encodings as one tagged symbol each and bytes would
spell every escape apart; any other node that is not a flattened ``Seq``/``Choice``/``Repeat``
is a part too (a literal, a character class). A terminal with string parts is composed only
once one of them has been met before (``_composable``): a part met once (an object's own
key pattern) is built inside its terminal the direct way, as building it apart and then again
over bytes would cost more than it saves. One without string parts is composed when it is
small (``COMPOSE_PLAIN_NODES``).

Joins and chains. An object's optional member comes twice: ``member`` where it may be the first
key and ``ws "," ws member`` after another. The second is built after the first, so its DFA is
the comma's DFA with the member's cached DFA behind it (``DfaCache._joined``): no parts, no
subset construction, only the canonical numbering of the glued table. A terminal of literals
and whitespace loops alone (a key and its colon, a comma) is written out as its table
(``_chain``), which is canonical as it stands. Any other sequence is glued from its pieces
(``DfaCache._sequence``): its runs of literals and loops as chains, its other items as
terminals of their own (values recur across members, keys do not), laid end to end in one
kernel and minimised once; a whole small object of string members costs one minimisation of
its ~100 states instead of an NFA of its parts and a subset construction.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit

from grammarsd.compiler.lexer import (
    ByteDFA,
    RuleSet,
    _counted,
    _finish,
    _read_only,
    build_byte_dfa,
    excluding_lexeme,
)
from grammarsd.errors import GrammarTooLargeError
from grammarsd.grammar._canonical import (
    byte_packing,
    concatenation,
    sequence,
    subset_construction,
    union,
)
from grammarsd.grammar.encodings import decoded_class
from grammarsd.grammar.ir import (
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
    is_empty,
    kept_on_nodes,
)
from grammarsd.grammar.passes import nullable

COMPOSE = "reused"
"""When ``DfaCache`` composes a terminal from parts: ``"reused"`` (once a string part was met
before), ``"always"`` or ``"never"`` (tests pin one)."""
COMPOSE_MAX_COPIES = 4096  # a longer repeat is one part (the lexer tiles or chunks it)
# A terminal without string parts (a member's comma, key and colon around a literal value) is
# composed when it has at most this many nodes: over cached parts it costs ~0.3 against ~0.45 ms
# built directly; larger ones (chains of members, each with its whitespace loops) determinise
# faster at the character level (25 Github_ultra schemas: 32 nodes saves 19 % of their time).
COMPOSE_PLAIN_NODES = 32
UNION_MAX = 4  # ``DfaCache._union`` takes the product of at most this many alternatives
JOIN_HEAD = 3  # ``DfaCache._joined`` joins a built last item to at most this many before it


def fingerprint(root: Expr) -> bytes:
    """A 16-byte digest of ``root``'s structure: equal for structurally equal expressions
    (which have the same DFA), different otherwise but for hash collisions.

    Cache keys are digests, not expressions: comparing two equal expressions built apart
    walks them as trees, and a shared sub-expression (the rest of an object after property
    ``i``) is then compared once per path to it. Here each node of the DAG is hashed once in
    its life: the digest is kept on the (immutable) node, as ``_CachedHash`` keeps its hash,
    so the JSON character encodings every schema shares are hashed once per process.
    """
    kept = root.__dict__.get("_fingerprint")  # (the common case, without the walk's call)
    if kept is not None:
        return kept
    return kept_on_nodes(root, "_fingerprint", (), _no_leaf, _digest_here)


def _no_leaf(_: Expr) -> bytes:
    raise AssertionError("a fingerprint has no leaves: every node keeps its digest")


def _digest_here(e: Expr, kids: list[bytes]) -> bytes:
    """``e``'s digest from its children's."""
    kind = type(e)
    h = hashlib.blake2b(_TAGS[kind], digest_size=16)
    if kind is Seq or kind is Choice:  # (most nodes: their children say the rest)
        for k in kids:
            h.update(k)
        return h.digest()
    if isinstance(e, Literal):
        h.update(e.text.encode("utf-8", "surrogatepass"))
    elif isinstance(e, CharClass):
        h.update(np.asarray(e.ranges, np.int64).tobytes())
    elif isinstance(e, Ref):
        h.update(e.name.encode())
    elif isinstance(e, Repeat):
        h.update(f"{e.min},{e.max}".encode())
    elif isinstance(e, Capped):
        h.update(str(e.max).encode())
    elif isinstance(e, Excluding):
        h.update(np.asarray(e.chars.ranges, np.int64).tobytes())
        h.update(json.dumps(e.words).encode())  # unambiguous, whatever the words hold
    elif isinstance(e, Decoding):
        d = e.dfa
        h.update(np.array(d.trans.shape, np.int64).tobytes())
        for a in (d.bounds, d.trans, d.accept):
            h.update(a.tobytes())
    for k in kids:
        h.update(k)
    return h.digest()


_TAGS = {kind: kind.__name__.encode()
         for kind in (Literal, CharClass, Ref, Seq, Choice, Repeat, Capped, Excluding, Decoding)}


def rules_digest(rules: RuleSet) -> bytes:
    """A 16-byte digest of the rule groups a lexeme references (empty for none)."""
    if not rules:
        return b""
    digest = hashlib.blake2b(digest_size=16)
    for name, group, body in rules:
        digest.update(f"{name}\0{group}\0".encode())
        digest.update(fingerprint(body))
    return digest.digest()


@dataclass(frozen=True)
class Variant:
    """A rewrite of terminal expressions applied before their DFA is built (``DfaCache.get``),
    named by ``tag`` in the cache key: a function of the expression alone, the same for every
    rewrite with this tag. ``touches(e)`` is False where ``rewrite(e)`` is ``e`` itself: such
    an expression shares the DFA it has under no variant (a format inside an object's member
    and at the top of another schema)."""

    tag: bytes
    rewrite: Callable[[Expr], Expr]
    touches: Callable[[Expr], bool]


@dataclass(frozen=True)
class PackedDfa:
    """A ``ByteDFA`` stored by byte classes: its ``trans == table[:, classes]``. Terminal
    DFAs use a few dozen distinct columns of their 256, so this is ~10x smaller."""

    classes: np.ndarray  # uint8 [256]: column of ``table`` for each byte
    table: np.ndarray  # int32 [num_states, num_classes]
    accept: np.ndarray
    tile: np.ndarray | None
    cap: int
    char_start: np.ndarray | None

    def __post_init__(self) -> None:
        # shared by every grammar that meets the terminal, so never written; and read-only
        # always, so the kernels that read it (``tables._place``) compile one variant, not a
        # second one in the middle of a run when a join first hands them a writable table
        for a in (self.classes, self.table, self.accept, self.tile, self.char_start):
            if a is not None:
                a.setflags(write=False)

    @property
    def num_states(self) -> int:
        return int(self.table.shape[0])

    @classmethod
    def pack(cls, dfa: ByteDFA) -> PackedDfa:
        classes, table = dfa.packed if dfa.packed is not None else byte_packing(dfa.trans)
        return cls(classes, table, dfa.accept, dfa.tile, dfa.cap, dfa.char_start)

    def unpack(self) -> ByteDFA:
        """The ``ByteDFA`` (the reference: ``tables._place`` writes the same rows, a column per
        byte class of the grammar)."""
        return ByteDFA(np.ascontiguousarray(self.table[:, self.classes]), self.accept, self.tile,
                       self.cap, self.char_start)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.classes, self.table, self.accept, self.tile,
                                      self.char_start) if a is not None)


@dataclass(frozen=True)
class _Part:
    """A part's DFA (empty string kept) as NFA pieces: its live transitions as byte
    intervals ``src -> tgt`` on ``lo..hi`` (local state numbers), and its accepting states."""

    num_states: int
    src: np.ndarray  # int64 [E], ascending
    lo: np.ndarray  # int64 [E]
    hi: np.ndarray  # int64 [E]
    tgt: np.ndarray  # int64 [E]
    finals: tuple[int, ...]

    @classmethod
    def of(cls, dfa: ByteDFA) -> _Part:
        trans = dfa.trans
        n = trans.shape[0]
        change = np.ones((n, 257), np.bool_)  # column 256: every row's end
        change[:, 1:256] = trans[:, 1:] != trans[:, :-1]
        flat = np.flatnonzero(change)
        row, col = np.divmod(flat, 257)
        live = col < 256
        live[live] = trans[row[live], col[live]] >= 0
        k = np.flatnonzero(live)  # a run of one live target starts here, ends before k + 1
        return cls(n, row[k], col[k], flat[k + 1] % 257 - 1,
                   trans[row[k], col[k]].astype(np.int64), tuple(np.flatnonzero(dfa.accept)))

    @classmethod
    def literal(cls, text: str) -> _Part | None:
        """The chain spelling ``text`` in UTF-8, without a table (a member's key is a new
        literal in every terminal); None for text with a lone surrogate, which the lexer's
        construction handles."""
        try:
            data = np.frombuffer(text.encode("utf-8"), np.uint8).astype(np.int64)
        except UnicodeEncodeError:
            return None
        src = np.arange(len(data), dtype=np.int64)
        return cls(len(data) + 1, src, data, data.copy(), src + 1, (len(data),))

    @property
    def nbytes(self) -> int:
        return 32 * int(self.src.shape[0]) + 8 * len(self.finals)


_JSON, _QUOTE = 1, 2  # ``_content`` bits: holds JSON character encodings; holds a raw quote
_QUOTE_LIT = Literal('"')


def _content(e: Expr) -> int:
    return kept_on_nodes(e, "_json_content", (Literal, CharClass), _leaf_content, _content_here)


def _leaf_content(e: Expr) -> int:
    if isinstance(e, Literal):
        return _QUOTE if '"' in e.text else 0
    assert isinstance(e, CharClass)
    return _QUOTE if any(a <= 0x22 <= b for a, b in e.ranges) else 0


def _content_here(e: Expr, kids: list[int]) -> int:
    if decoded_class(e) is not None or isinstance(e, (Excluding, Decoding)):
        return _JSON
    bits = 0
    for k in kids:
        bits |= k
    return bits


def _opaque(e: Expr) -> bool:
    """JSON string content, or a quoted string of it: a part, never flattened."""
    if decoded_class(e) is not None or _content(e) == _JSON:
        return True
    return (isinstance(e, Seq) and len(e.items) == 3 and e.items[0] == _QUOTE_LIT
            and e.items[2] == _QUOTE_LIT and _content(e.items[1]) == _JSON)


def _flattened(e: Expr) -> bool:
    """``_compose`` spells ``e`` from its children rather than taking it as one part."""
    if isinstance(e, (Seq, Choice)):
        return not _opaque(e)
    if isinstance(e, Repeat):
        return (e.max or e.min) <= COMPOSE_MAX_COPIES and not _opaque(e)
    return False


class DfaCache:
    """Byte DFAs of terminals (stored packed) and of the parts terminals are composed from,
    shared across grammars; one LRU bound on the bytes of both.

    Some terminals are expensive (a ``date-time`` string: ~18k states, ~0.2 s), so the bound
    is on bytes, not on states. 512 MiB: MaskBench's 4,059 paired schemas fill ~400 MB, and at
    64 MiB the cache evicted 32.6k entries over them, rebuilding formats and common members
    (and, since the matcher keeps a terminal's chain sets by its ``PackedDfa``, recomputing
    those in the masks). Side by side, each process compiling half the schemas: 256 against
    64 MiB compile -2 to -6 %, masks -2 %; 512 against 256 MiB compile -1.4 %, 1 GiB -3.9 %.
    A process that meets few schemas holds a few MB; lower ``DFA_CACHE.max_bytes`` to trade
    compile time for memory.
    """

    def __init__(self, max_bytes: int = 512 << 20, max_seen: int = 1 << 16) -> None:
        self.max_bytes = max_bytes
        self.max_seen = max_seen
        self._items: OrderedDict[tuple[object, ...], PackedDfa | _Part] = OrderedDict()
        self._seen: OrderedDict[tuple[bytes, int], None] = OrderedDict()  # string parts met
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, expr: Expr, max_states: int, rules: RuleSet = (),
            digest: bytes | None = None, variant: Variant | None = None) -> PackedDfa:
        """The DFA of ``expr`` (``build_byte_dfa(expr, nonempty=True, ...)``), packed as the
        tables take it (``tables._place``); ``digest`` is ``rules_digest(rules)`` where the
        caller keeps it. With a ``variant``, the DFA of ``variant.rewrite(expr)``, keyed by
        ``expr`` and the variant's tag: the rewrite runs only on a miss. The caller rewrites
        ``rules`` (a function of the rules and the variant: ``digest`` names them before the
        rewrite), so a lexeme with rules is never taken for one the variant leaves alone."""
        if digest is None:
            digest = rules_digest(rules)
        tag = b"" if variant is None else variant.tag
        key = ("terminal", fingerprint(expr) + digest + tag, max_states)
        packed = self._lookup(key)
        if packed is None:
            # an expression the variant leaves alone shares the plain entry (asked on a miss
            # only: ``touches`` walks the expression); under both keys its bytes count twice,
            # so the bound stays an upper bound
            if variant is not None and not rules and not variant.touches(expr):
                plain = ("terminal", fingerprint(expr) + digest, max_states)
                packed = self._lookup(plain)
                if packed is None:
                    packed = self._build(expr, max_states, rules, None)
                    self._store(plain, packed)
            else:
                packed = self._build(expr, max_states, rules, variant)
            self._store(key, packed)
        assert isinstance(packed, PackedDfa)
        return packed

    def _build(self, expr: Expr, max_states: int, rules: RuleSet,
               variant: Variant | None) -> PackedDfa:
        """The DFA of ``expr`` (rewritten by ``variant``) on a miss: joined to a tail built
        before (``_joined``), spelled as a chain (``_chain``), composed from cached parts
        (``_compose``), or built directly."""
        plain = (not rules and _flattened(expr) and _counted(expr) is None
                 and excluding_lexeme(expr) is None)
        shortcuts = plain and COMPOSE != "never"  # tests pin the direct construction
        if shortcuts:
            joined = (self._joined(expr, max_states, variant) if isinstance(expr, Seq)
                      else self._union(expr, max_states, variant)
                      if isinstance(expr, Choice) else None)
            if joined is not None:
                return joined
        if variant is not None:
            expr = variant.rewrite(expr)
        if shortcuts or isinstance(expr, Literal) and COMPOSE != "never":
            chain = _chain(expr)  # (a literal alone: an alternative of a key's spellings)
            if chain is not None and chain.num_states <= max_states:
                return chain
        if plain:
            flat = self._composable(expr, max_states)
            if flat is not None:
                return PackedDfa.pack(
                    _finish(self._compose(expr, max_states, flat), True, max_states))
        return PackedDfa.pack(
            build_byte_dfa(expr, nonempty=True, max_states=max_states, rules=rules))

    def _joined(self, expr: Expr, max_states: int, variant: Variant | None) -> PackedDfa | None:
        """The DFA of a ``Seq`` of at most ``JOIN_HEAD`` items and a last one that is a terminal
        already built (an object member's comma variant ``ws "," ws member``, built after the
        member itself), as the head's DFA followed by the last item's; where that item is not
        cached, as its pieces glued (``_sequence``). None where either side
        derives the empty string or the join is not deterministic."""
        if not isinstance(expr, Seq) or len(expr.items) < 2:
            return None
        *head_items, tail_expr = expr.items
        tag = b"" if variant is None else variant.tag
        tail = None
        if len(head_items) <= JOIN_HEAD:
            tail = self._lookup(("terminal", fingerprint(tail_expr) + tag, max_states))
        if tail is None:
            return self._sequence(expr, max_states, variant)
        head_expr = Seq(tuple(head_items)) if len(head_items) > 1 else head_items[0]
        if nullable(head_expr) or nullable(tail_expr):
            return None
        assert isinstance(tail, PackedDfa)
        return _glue([self.get(head_expr, max_states, variant=variant), tail], max_states)

    def _sequence(self, expr: Seq, max_states: int,
                  variant: Variant | None) -> PackedDfa | None:
        """The DFA of a ``Seq`` as its pieces glued in one kernel (``_glue``): each run of
        literals and whitespace loops a chain (``_chain``, not cached: keys differ), each
        other item its DFA as a terminal of its own, built or found (values recur across
        members). A nested ``Seq`` is one piece where it is cached as a terminal (a member
        met before) or an item of it that is no link of a chain derives the empty string (a
        number), else its items are items. An object of string members is its keys' chains
        and one string DFA: no NFA, no subset construction, one minimisation. None where
        there is no value between chains, an item derives the empty string, a run is no
        chain, or the glue is not deterministic; the items' DFAs are built only once the
        shape is known to fit."""
        tag = b"" if variant is None else variant.tag
        pieces: list[PackedDfa | Expr] = []  # an item still to build: its Expr
        run: list[Expr] = []
        todo = list(reversed(expr.items))
        while todo:
            item = todo.pop()
            if _chain_shaped(item):
                run.append(item)
                continue
            piece: PackedDfa | Expr = item
            if isinstance(item, Seq) and not _opaque(item):
                found = self._lookup(("terminal", fingerprint(item) + tag, max_states))
                if found is None and all(_chain_shaped(e) or not nullable(e)
                                         for e in item.items):
                    todo.extend(reversed(item.items))
                    continue
                if found is not None:
                    assert isinstance(found, PackedDfa)
                    piece = found
            if (run and not _add_chain(pieces, run, variant)) or (
                    piece is item and nullable(item)):
                return None
            run = []
            pieces.append(piece)
        if (run and not _add_chain(pieces, run, variant)) or len(pieces) < 2:
            return None
        return _glue([self.get(p, max_states, variant=variant) if isinstance(p, Expr) else p
                      for p in pieces], max_states)

    def _union(self, expr: Choice, max_states: int,
               variant: Variant | None) -> PackedDfa | None:
        """The DFA of a ``Choice`` as the union of its alternatives' DFAs, each a terminal of
        its own, built or found (``_united``): an optional last member before the closing
        brace, ``ws "}" | ws "," ws member ws "}"``, is a chain and a glued sequence, with no
        NFA or subset construction. An alternative's DFA leaves out the empty string, as the
        terminal's does. None past ``UNION_MAX`` alternatives (an enum: the product would
        be taken once per alternative) or where an alternative is tiled or capped."""
        alternatives = [alt for alt in expr.items if not is_empty(alt)]
        if not alternatives or len(alternatives) > UNION_MAX:
            return None
        pieces = [self.get(alt, max_states, variant=variant) for alt in alternatives]
        return pieces[0] if len(pieces) == 1 else _united(pieces, max_states)

    def _lookup(self, key: tuple[object, ...]) -> PackedDfa | _Part | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
            return hit

    def _store(self, key: tuple[object, ...], value: PackedDfa | _Part) -> None:
        with self._lock:
            if key in self._items:
                return
            self._items[key] = value
            self._bytes += value.nbytes
            while self._bytes > self.max_bytes and len(self._items) > 1:
                _, old = self._items.popitem(last=False)
                self._bytes -= old.nbytes

    def _part(self, expr: Expr, max_states: int) -> _Part:
        key = ("part", fingerprint(expr), max_states)
        part = self._lookup(key)
        if part is None:
            part = _Part.literal(expr.text) if isinstance(expr, Literal) else None
            if part is None:
                part = _Part.of(build_byte_dfa(expr, max_states=max_states))
            self._store(key, part)
        assert isinstance(part, _Part)
        return part

    def _composable(self, expr: Expr, max_states: int) -> dict[int, bool] | None:
        """Which nodes of ``expr`` ``_compose`` spells from their children (``_flattened``, by
        id: one answer per node however often the tree holds it), or None where ``COMPOSE``
        does not let ``expr`` be composed. Under ``"reused"`` it may iff one of its string
        parts was met before (the new ones are remembered as met, for the next terminal), or
        it has no string part and at most ``COMPOSE_PLAIN_NODES`` nodes. One with a key
        complement part (``lexer.excluding_lexeme``) is composed at once, since that part's own
        DFA is built from its trie, at a fraction of reading it inside the whole terminal."""
        if COMPOSE == "never":
            return None
        flat: dict[int, bool] = {}
        new: list[tuple[bytes, int]] = []
        reused = opaque = False
        stack = [expr]
        while stack:
            e = stack.pop()
            if id(e) in flat:
                continue
            flat[id(e)] = spelled = _flattened(e)
            if spelled:
                stack.extend(children(e))
            elif _opaque(e):
                opaque = True
                key = (fingerprint(e), max_states)
                if ("part", *key) in self._items or key in self._seen or excluding_lexeme(e):
                    reused = True
                else:
                    new.append(key)
        if COMPOSE == "always":
            return flat
        with self._lock:
            for key in new:
                self._seen[key] = None
            while len(self._seen) > self.max_seen:
                self._seen.popitem(last=False)
        return flat if reused or (not opaque and len(flat) <= COMPOSE_PLAIN_NODES) else None

    def _compose(self, expr: Expr, max_states: int,
                 flat: dict[int, bool]) -> tuple[np.ndarray, np.ndarray]:
        """The byte table (deterministic, not minimal) of ``expr`` from its parts' DFAs;
        ``flat`` is ``_composable``'s answer for ``expr``: Thompson's construction over the
        parts (``_Thompson``), then the subset construction. Raises ``GrammarTooLargeError``
        past ``max_states`` NFA or DFA states or the subset construction's work bound."""
        nfa = _Thompson(flat, lambda e: self._part(e, max_states), max_states)
        nfa.spell(expr, 0, 1)
        size, pieces = nfa.size, nfa.pieces
        pairs = np.array(nfa.eps, np.int64).reshape(-1, 2)
        eps_ptr = np.zeros(size + 1, np.int64)
        np.cumsum(np.bincount(pairs[:, 0], minlength=size), out=eps_ptr[1:])
        eps_nbr = pairs[np.argsort(pairs[:, 0], kind="stable"), 1]
        if pieces:  # pieces are appended in state order, each part's edges by source
            shift = np.repeat(np.array([off for off, _ in pieces], np.int64),
                              [p.src.shape[0] for _, p in pieces])  # one add, not one per piece
            src = np.concatenate([p.src for _, p in pieces]) + shift
            lo = np.concatenate([p.lo for _, p in pieces])
            hi = np.concatenate([p.hi for _, p in pieces])
            tgt = np.concatenate([p.tgt for _, p in pieces]) + shift
        else:
            src = lo = hi = tgt = np.zeros(0, np.int64)
        edge_ptr = np.zeros(size + 1, np.int64)
        np.cumsum(np.bincount(src, minlength=size), out=edge_ptr[1:])
        important = edge_ptr[1:] > edge_ptr[:-1]
        important[1] = True
        return subset_construction(256, eps_ptr, eps_nbr, edge_ptr, lo, hi, tgt, important, 0, 1,
                                   max_states)


class _Thompson:
    """The NFA of one ``DfaCache._compose``: Thompson's construction over ``Seq``/``Choice``/
    ``Repeat`` nodes (those ``flat`` marks), whose other nodes are parts with DFAs of their own.

    A fragment ``start -> end`` adds no edge into ``start`` or out of ``end``, so siblings share
    them; a part is a fresh copy of its DFA entered from ``start`` whose accepting states lead
    to ``end``; a repeat is its copies in a chain (each optional one may leave to ``end``), or
    a loop node for ``*``. State 0 is the start, 1 the final state. (A class, not a nested
    recursive function: that would be a reference cycle holding the NFA until the cyclic
    collector runs.)"""

    def __init__(self, flat: dict[int, bool], part_of: Callable[[Expr], _Part],
                 max_states: int) -> None:
        self.flat = flat
        self.part_of = part_of
        self.max_states = max_states
        self.size = 2
        self.eps: list[int] = []  # epsilon edges, flat: source, target, source, target, ...
        self.pieces: list[tuple[int, _Part]] = []  # (first state, part) in state order
        self.parts: dict[int, _Part] = {}  # a part met again (the gaps) is looked up once

    def new(self) -> int:
        self.size += 1
        return self.size - 1

    def spell(self, e: Expr, start: int, end: int) -> None:
        eps = self.eps
        if not self.flat[id(e)]:
            part = self.parts.get(id(e))
            if part is None:
                part = self.parts[id(e)] = self.part_of(e)
            self.pieces.append((self.size, part))
            eps.extend((start, self.size))
            for f in part.finals:
                eps.extend((self.size + f, end))
            self.size += part.num_states
            if self.size > self.max_states:
                raise GrammarTooLargeError("nfa_states", self.size, self.max_states)
        elif isinstance(e, Choice):
            for item in e.items:
                self.spell(item, start, end)
        elif isinstance(e, Seq):
            cur = start
            for item in e.items[:-1]:
                nxt = self.new()
                self.spell(item, cur, nxt)
                cur = nxt
            if e.items:
                self.spell(e.items[-1], cur, end)
            else:
                eps.extend((start, end))
        else:
            assert isinstance(e, Repeat)
            cur = start
            for _ in range(e.min):
                nxt = self.new()
                self.spell(e.item, cur, nxt)
                cur = nxt
            if e.max is None:
                loop = self.new()
                eps.extend((cur, loop, loop, end))
                self.spell(e.item, loop, loop)
                return
            for _ in range(e.max - e.min):
                nxt = self.new()
                eps.extend((cur, end))
                self.spell(e.item, cur, nxt)
                cur = nxt
            eps.extend((cur, end))


def _chain(expr: Expr) -> PackedDfa | None:
    """The DFA of a ``Seq`` of literals and loops over ASCII classes (a member's key and colon
    between whitespace gaps, a comma), spelled directly: one state per byte, each loop on the
    state it follows; None for any other shape, for a loop holding the byte after it or
    beside another loop at the same state (no longer deterministic as written), or for one
    that spells no byte. Already canonical: the shortest word from state ``i`` has
    ``n - 1 - i`` bytes, so no two states are equivalent, and each state has one successor
    besides itself, so breadth-first order is the chain's. It comes packed, so neither the
    cache nor a join (``_join``) reads 256 byte columns."""
    return _chain_of([expr])


def _chain_of(items: list[Expr]) -> PackedDfa | None:
    """``_chain`` of the items one after another (a run of a sequence, as it stands)."""
    spelled = bytearray()  # the chain's bytes
    loops: dict[int, CharClass] = {}  # state -> its loop
    todo = items[::-1]
    while todo:
        e = todo.pop()
        if isinstance(e, Seq):
            todo.extend(reversed(e.items))
        elif isinstance(e, Literal):
            try:
                data = e.text.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate: the lexer's business
                return None
            loop = loops.get(len(spelled))
            if data and loop is not None and any(a <= data[0] <= b for a, b in loop.ranges):
                return None
            spelled += data
        elif (isinstance(e, Repeat) and e.min == 0 and e.max is None
              and isinstance(e.item, CharClass) and e.item.ranges
              and e.item.ranges[-1][1] < 0x80):
            if loops.setdefault(len(spelled), e.item) != e.item:  # ``a* b*`` is not ``(a|b)*``
                return None
        else:
            return None
    if not spelled:
        return None
    return _spelled_chain(bytes(spelled), tuple(
        (state, a, b) for state, loop in loops.items() for a, b in loop.ranges))


@functools.lru_cache(maxsize=4096)
def _spelled_chain(spelled: bytes, loops: tuple[tuple[int, int, int], ...]) -> PackedDfa:
    """The chain reading ``spelled`` with a loop on ``a..b`` at state ``i`` for each ``(i, a,
    b)`` of ``loops``; kept per process (packed: a few hundred bytes each), since a key and
    its colon recur across objects and schemas."""
    _, accept, classes, table = _chain_table(
        np.frombuffer(spelled, np.uint8), np.array(loops, np.int64).reshape(-1, 3))
    return PackedDfa(classes, table, accept, None, 0, None)


@njit(cache=True, nogil=True)
def _chain_table(spelled: np.ndarray, loops: np.ndarray) -> tuple[
        np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """``_chain``'s table: state i reads ``spelled[i]`` to i + 1, loops on ``a..b`` for each
    ``(i, a, b)`` of ``loops``, the last state accepts; with its packing (``byte_packing``)."""
    n = spelled.shape[0] + 1
    trans = np.full((n, 256), -1, np.int32)
    for i in range(n - 1):
        trans[i, spelled[i]] = i + 1
    for r in range(loops.shape[0]):
        trans[loops[r, 0], loops[r, 1]:loops[r, 2] + 1] = loops[r, 0]
    accept = np.zeros(n, np.bool_)
    accept[n - 1] = True
    classes, table = byte_packing(trans)
    return trans, accept, classes, table


def _chain_shaped(e: Expr) -> bool:
    """Whether ``e`` may be a link of a chain (``_chain`` decides, after any rewrite)."""
    return isinstance(e, Literal) or (isinstance(e, Repeat) and isinstance(e.item, CharClass))


def _add_chain(pieces: list[PackedDfa | Expr], run: list[Expr],
               variant: Variant | None) -> bool:
    """Append the chain (``_chain``) of ``run`` rewritten by ``variant`` to ``pieces``; False
    where it is no chain. The items are rewritten one by one (links and gaps are shared
    nodes, whose rewrites are kept), with no new sequence to walk."""
    chain = _chain_of(run if variant is None else [variant.rewrite(e) for e in run])
    if chain is not None:
        pieces.append(chain)
    return chain is not None


def _join(head: PackedDfa, tail: PackedDfa, max_states: int) -> PackedDfa | None:
    """The canonical DFA of ``L(head) L(tail)`` (both without the empty string), in one kernel
    over the packed tables (``_canonical.concatenation``); None where a side is tiled or
    capped, or where the result would not be deterministic."""
    if head.tile is not None or head.cap or tail.tile is not None or tail.cap:
        return None
    return _result(concatenation(*map(_read_only, (
        head.table, head.classes, head.accept, tail.table, tail.classes, tail.accept))),
        max_states)


def _glue(pieces: list[PackedDfa], max_states: int) -> PackedDfa | None:
    """The canonical DFA of the pieces' languages one after another (none with the empty
    string): two by ``_join``, more in one kernel over their packed tables laid end to end
    (``_canonical.sequence``); None where a piece is tiled or capped, or where the result
    would not be deterministic."""
    if len(pieces) == 2:
        return _join(pieces[0], pieces[1], max_states)
    flat = _end_to_end(pieces)
    return None if flat is None else _result(sequence(*flat), max_states)


def _united(pieces: list[PackedDfa], max_states: int) -> PackedDfa | None:
    """The canonical DFA of the union of the pieces' languages (``_canonical.union``); None
    where a piece is tiled or capped."""
    flat = _end_to_end(pieces)
    return None if flat is None else _result(union(*flat), max_states)


def _end_to_end(pieces: Sequence[PackedDfa]) -> tuple[np.ndarray, ...] | None:
    """The pieces' packed tables laid end to end as ``_canonical.sequence`` takes them; None
    where a piece is tiled or capped (its states carry more than their rows)."""
    packed = []
    for piece in pieces:
        if piece.tile is not None or piece.cap:
            return None
        packed.append((piece.classes, piece.table, piece.accept))
    rows = [table.shape[0] for _, table, _ in packed]
    widths = [table.shape[1] for _, table, _ in packed]
    return (np.concatenate([c for c, _, _ in packed]),
            np.concatenate([t.ravel() for _, t, _ in packed]),
            np.cumsum([0] + [r * w for r, w in zip(rows[:-1], widths[:-1], strict=True)]),
            np.array(widths, np.int64), np.cumsum([0] + rows),
            np.concatenate([a for _, _, a in packed]))


def _result(kernel_out: tuple[bool, np.ndarray, np.ndarray, np.ndarray],
            max_states: int) -> PackedDfa | None:
    """A ``concatenation``, ``sequence`` or ``union`` kernel's answer as a ``PackedDfa`` (None
    where not ok)."""
    ok, classes, table, accept = kernel_out
    if not ok:
        return None
    if table.shape[0] > max_states:
        raise GrammarTooLargeError("dfa_states", int(table.shape[0]), max_states)
    return PackedDfa(classes, table, accept, None, 0, None)


DFA_CACHE = DfaCache()
"""The process-wide cache ``tables.build_tables`` uses."""

__all__ = ["COMPOSE", "DFA_CACHE", "DfaCache", "PackedDfa", "Variant", "fingerprint", "rules_digest"]
