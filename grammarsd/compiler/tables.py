"""IR -> flat Earley tables over byte-DFA terminals.

The grammar is split in two levels, the way lexer-plus-parser engines do, but keeping plain CFG
(scannerless) semantics:

* every *regular* piece of the grammar (a rule or sub-expression that does not reach recursion, and is
  not too big) becomes a **terminal**, compiled to a byte-level DFA (``compiler.lexer``) that consumes
  at least one byte. Inside a terminal, the parser is not touched at all;
* a *right-linear rule group* (a cycle of rules that refer to each other only in tail position,
  ``q0: "" | enc(C1) q1 | ...`` or ``ws: [ \t] ws | ""``) is regular too: its members stay ``Ref``
  inside terminal expressions and the lexer builds their NFA directly (``lexer.RuleSet``), so each
  entry referenced from outside is one terminal instead of a parser loop over one-character
  terminals. Where such a terminal's DFA would pass the limits, it falls back to the parser loop.
  Rules that reference rules only in tail position but form a DAG (an automaton written one rule
  per state) are grouped the same way (``_add_tail_group``): inlined, each state would be copied
  once per path to it;
* a *big counted repeat* (``x{0,8192}``: its DFA would keep thousands of copies of ``x`` apart)
  is not one terminal: it is rewritten over chunks ``x{c}`` (``CompileLimits.repeat_chunk``),
  each chunk a small terminal and the number of chunks counted by the parser (``_chunked``). The
  first terminal of the rewrite always holds at least ``c`` copies (a minimum count that is not a
  multiple of ``c`` is folded into it), so no short terminal opens a bounded string. A big
  repeat of one JSON character (a long ``maxLength`` string body) with a bounded count and a
  minimum of at most ``c`` is a ``Capped`` terminal instead: near every chunk boundary most
  string tokens would cross into the next chunk and need the parser (~4 ms masks on Llama-3);
* a ``Capped`` node (a JSON string body of at most ``m`` decoded characters) is always one
  terminal of its own, never merged with its neighbours: the matcher counts its characters
  from where it starts (``lexer._capped``). Its item must be regular; there is no parser
  fallback, so a capped terminal past the limits is an error;
* the rest becomes a BNF over nonterminals and terminals, run by an Earley parser
  (``matcher._kernels``) that advances all live terminal DFAs byte by byte and completes a terminal at
  every byte where its DFA accepts (no maximal munch: the language is exactly the CFG's).

Flat layout (``EarleyTables``; ``sym >= 0`` is a nonterminal, ``sym < 0`` is terminal ``-sym - 1``):

    item_next     int32 [I]     symbol after the dot of dotted item i, or END when complete
    item_lhs      int32 [I]     left-hand nonterminal of item i's production
    nt_ptr        int32 [N + 1] CSR: first items (dot 0) of nonterminal n's productions are
    nt_items      int32 [P]     nt_items[nt_ptr[n]:nt_ptr[n + 1]]
    nullable      uint8 [N]
    start_item    int       item ``S' -> . S`` of the augmented start rule
    accept_item   int       item ``S' -> S .``
    dfa_trans     int32 [Q, K]  all terminal DFAs in one state space, one column per byte class
                                of the grammar (byte ``b`` reads column ``byte_col[b]``); -1 = dead
    byte_col      uint8 [256]   the column of each byte: the coarsest partition of the bytes that
                                every terminal's DFA respects (~60 columns for a JSON Schema)
    dfa_accept    uint8 [Q]
    dfa_has_out   uint8 [Q]     the state has at least one live transition
    state_term    int32 [Q]     terminal owning each state
    state_tile    int64 [Q, 4]  for states of tiled counted repeats (``lexer._tiled``): a key
                                naming the sub-automaton reachable from the state; -1 rows else
    state_cap     int32 [Q]     for states of a ``Capped`` terminal where the next byte starts a
                                decoded character: the terminal's bound; 0 elsewhere
    term_cap      int32 [T]     a ``Capped`` terminal's bound on decoded characters; 0: none
    term_start    int32 [T]     start state of each terminal's DFA (never accepting)
    follow_bytes  uint64 [T, 4] 256-bit set: first bytes of every terminal that can follow
                                terminal t anywhere in the grammar (static FOLLOW). After t
                                completes, a next byte outside this set cannot start anything
                                new, so the matcher may postpone the Earley closure.
    ws_bound      int       the matcher bounds runs of whitespace outside JSON strings to this
                            (``ir.WhitespaceGaps``, ``matcher.whitespace``); 0: no bound
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np
from numba import njit

from grammarsd.compiler import _bnf
from grammarsd.compiler._bnf import END
from grammarsd.compiler.dfa_cache import DFA_CACHE, PackedDfa, Variant, fingerprint, rules_digest
from grammarsd.compiler.lexer import RuleSet
from grammarsd.errors import EmptyLanguageError, GrammarError, GrammarTooLargeError
from grammarsd.grammar._canonical import joint_classes
from grammarsd.grammar.encodings import decoded_class
from grammarsd.grammar.ir import (
    JSON_WHITESPACE,
    NOTHING,
    Capped,
    CharClass,
    Choice,
    Expr,
    Grammar,
    Literal,
    Ref,
    Repeat,
    Seq,
    WhitespaceGaps,
    children,
    choice,
    is_empty,
    known_ref_names,
    node_facts,
    ref_counts,
    ref_names,
    repeat,
    seq,
)
from grammarsd.grammar.passes import nullable, strongly_connected_components


@dataclass(frozen=True)
class CompileLimits:
    """Bounds that keep compilation finite; exceeding one raises ``GrammarTooLargeError``."""

    max_terminal_size: int = 150  # nodes of one regular piece as the lexer reads them (a JSON
    # character is one: ``NodeFacts.size``) before it is split structurally, its parts becoming
    # terminals. Parts recur across grammars, where the DFA and mask-row caches serve them; a
    # whole big object is a DFA of its own, built for one schema. Against the old bound (4,000
    # tree nodes) on MaskBench-dev: compile -5 %, masks -6 % (docs/benchmarks.md, session 25)
    max_dfa_states: int = 200_000  # summed over all terminals
    max_productions: int = 500_000
    max_repeat: int = 100_000  # bound of a repeat of a non-regular item
    repeat_chunk: int = 256  # counted copies one terminal may hold; longer repeats are chunked
    repeat_alone: int = 32  # repeats of more copies are a terminal of their own, never merged
    # with their neighbours: one DFA shared by every use (a JSON string of up to 255 characters)
    max_group_size: int = 100_000  # IR nodes of a right-linear rule group lexed as one automaton
    # (a JSON-encoded character counts as one node: the lexer reads it as one symbol). A group
    # past it stays in the parser, one terminal per character: a ``format: uri`` with a
    # ``pattern`` (~28k) then cost ~45 ms per mask, against under 1 ms as one terminal


@dataclass(frozen=True)
class EarleyTables:
    item_next: np.ndarray
    item_lhs: np.ndarray
    nt_ptr: np.ndarray
    nt_items: np.ndarray
    nullable: np.ndarray
    start_item: int
    accept_item: int
    dfa_trans: np.ndarray
    byte_col: np.ndarray
    dfa_accept: np.ndarray
    dfa_has_out: np.ndarray
    state_term: np.ndarray
    term_start: np.ndarray
    follow_bytes: np.ndarray
    state_tile: np.ndarray
    state_cap: np.ndarray
    term_cap: np.ndarray
    nt_labels: tuple[str | HelperName, ...] = field(repr=False, default=())  # see ``nt_names``
    term_exprs: tuple[Expr, ...] = field(repr=False, default=())  # empty: see ``without_ir``
    ws_bound: int = 0
    term_dfas: tuple[PackedDfa, ...] = field(repr=False, default=())  # as placed, shared with
    # the DFA cache: per-terminal facts the matcher keeps across grammars key on them

    @property
    def nt_names(self) -> tuple[str, ...]:
        """The nonterminals' names: a rule's name, or a helper's expression text."""
        return tuple(str(label) for label in self.nt_labels)

    def without_ir(self) -> EarleyTables:
        """These tables without the IR they name their symbols by (``nt_labels`` and
        ``term_exprs`` empty): what a ``CompiledGrammar`` keeps. The terminals' expressions
        are ~400 objects the cyclic collector tracks per MaskBench schema; kept alive by the
        compile cache they made its passes over the host's heap longer and more frequent
        (MaskBench-dev in one process: collector time in compiles 1.25 -> 0.33 ms, compile
        mean -5 %). ``build_tables(compiled.grammar)`` gives them back."""
        return replace(self, nt_labels=(), term_exprs=())

    @property
    def byte_table(self) -> np.ndarray:
        """int32 [Q, 256]: ``dfa_trans`` with a column per byte (a copy, for readers that
        walk bytes without the kernels)."""
        return self.dfa_trans[:, self.byte_col]

    @property
    def num_items(self) -> int:
        return int(self.item_next.shape[0])

    @property
    def num_terminals(self) -> int:
        return int(self.term_start.shape[0])

    @property
    def num_dfa_states(self) -> int:
        return int(self.dfa_accept.shape[0])


# --------------------------------------------------------------------------- regular analysis


def _local_size_and_refs(root: Expr) -> tuple[int, frozenset[str]]:
    """``root``'s size as the lexer reads it (``NodeFacts.size``: a JSON-encoded character
    counts one), not counting referenced rules, and the rules it references."""
    facts = node_facts(root)
    return facts.size, facts.refs


class _Counts:
    """Counted repeats in regular expressions, read off the node facts.

    The *expansion* of an expression (``ir.NodeFacts.expansion``) is the product of the repeat
    bounds along its most deeply counted path (``x{0,5}{0,4}`` is 20; an unbounded ``x{m,}``
    counts ``m + 1``; a JSON-encoded character is one symbol of the lexer, expansion 1): how
    many copies of a piece its DFA must keep apart. A repeat whose expansion exceeds ``alone``
    is *big*: its DFA grows with the count (a JSON string has ~20 byte states per character),
    so it is never merged into a bigger terminal; the lowering makes it one terminal of its
    own, a ``Capped`` one (a long JSON string body), or chunks it (``_chunked``). A ``Capped``
    node is big too: it is always a terminal of its own.
    """

    def __init__(self, alone: int) -> None:
        self.alone = alone

    def expansion(self, expr: Expr) -> int:
        return node_facts(expr).expansion

    def has_big(self, expr: Expr) -> bool:
        """True iff some repeat inside ``expr`` (or ``expr`` itself) is big."""
        return node_facts(expr).big > self.alone


def _label(expr: Expr, limit: int = 80) -> str:
    """A display name for a helper nonterminal: the expression's text cut to ``limit`` characters.
    Expressions nested too deeply for the recursive ``__str__`` are named by their kind only."""
    try:
        text = str(expr)
    except RecursionError:
        return f"<deep {type(expr).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True, eq=False)
class HelperName:
    """A helper nonterminal's name, ``(expr)`` then ``suffix``, rendered when read: most are
    never read, and rendering a big expression costs more than lowering it."""

    expr: Expr
    suffix: str = ""

    def __str__(self) -> str:
        return f"({_label(self.expr)}){self.suffix}"


def _chunked(expr: Repeat, per_chunk: int, lex_whole: Callable[[Expr], None]) -> Expr:
    """``x{m,n}`` rewritten over chunks ``C = x{c}`` (``c = per_chunk``), same language.

    ``x{m,n} = x{m} x{0,n-m}`` (``x*`` for ``n = None``). With ``N = q*c + r`` (``0 <= r < c``),
    ``x{0,N} = C{q} x{0,r} | C{0,q-1} x{0,c-1}``. With ``m = j*c + r0``, ``x{m}`` is
    ``(x{r0} C) C{j-1}``: the remainder is folded into the first chunk (a sequence of two
    counts, so one terminal of ``c + r0`` copies, not a big repeat). For ``j = 0`` it is folded
    into the first chunk of ``x{0,N}`` instead::

        x{r0} x{0,c-1}  |  (x{r0} C) C{q-1} x{0,r}  |  (x{r0} C) C{0,q-2} x{0,c-1}

    Either way no terminal shorter than a chunk opens the repeat (the tokens at its start stay
    inside one terminal). Each form is unambiguous when ``x`` is. Counts of chunks live in the
    parser (a repeat of a non-regular item), counts inside a chunk in one small terminal:
    ``lex_whole`` is told each piece of at most ``c`` copies, which stays regular although big.
    """
    x, c = expr.item, per_chunk
    chunk = Repeat(x, c, c)
    j, r0 = divmod(expr.min, c)
    rem = repeat(x, r0, r0)
    tail = None if expr.max is None else (expr.max - expr.min) % c
    for piece in (chunk, rem, repeat(x, 0, tail), repeat(x, 0, c - 1)):
        lex_whole(piece)
    if expr.max is None:
        fixed = seq(rem, chunk, repeat(chunk, j - 1, j - 1)) if j else rem
        return seq(fixed, repeat(x, 0, None))
    q, r = divmod(expr.max - expr.min, c)
    if j:
        upto = choice(seq(repeat(chunk, q, q), repeat(x, 0, r)),
                      seq(repeat(chunk, 0, q - 1), repeat(x, 0, c - 1)) if q else NOTHING)
        return seq(rem, chunk, repeat(chunk, j - 1, j - 1), upto)
    if not q:
        return seq(rem, repeat(x, 0, r))
    lead = seq(rem, chunk)
    return choice(seq(rem, repeat(x, 0, c - 1)),
                  seq(lead, repeat(chunk, q - 1, q - 1), repeat(x, 0, r)),
                  seq(lead, repeat(chunk, 0, q - 2), repeat(x, 0, c - 1)) if q > 1 else NOTHING)


def _coalesce(items: tuple[Expr, ...], counts: _Counts,
              regular: Callable[[Expr], Expr | None]) -> list[Expr]:
    """Adjacent counted copies of one item merged where the merged repeat is big
    (``x x{0,254}`` -> ``x{1,255}``, items compared after ``regular`` inlines them), so that
    ``_chunked`` sees the whole count and folds its minimum into the first chunk. The
    language is unchanged."""
    out: list[Expr] = []
    for item in items:
        if out and (isinstance(item, Repeat) or isinstance(out[-1], Repeat)):
            (x, lo, hi), (y, lo2, hi2) = _counted(out[-1]), _counted(item)
            if x is y or x == y or (regular(x) or x) == (regular(y) or y):
                merged = Repeat(x, lo + lo2, None if hi is None or hi2 is None else hi + hi2)
                if counts.has_big(merged):
                    out[-1] = merged
                    continue
        out.append(item)
    return out


def _counted(expr: Expr) -> tuple[Expr, int, int | None]:
    """``expr`` as ``(item, min, max)`` of a repeat (``(expr, 1, 1)`` if it is none)."""
    if isinstance(expr, Repeat):
        return expr.item, expr.min, expr.max
    return expr, 1, 1


@dataclass
class _Regular:
    """What of the grammar is regular, found by ``_regular_bodies``.

    bodies    rule -> its body with regular rules inlined; a member of a right-linear rule group
              maps to ``Ref(itself)`` (groups stay references, the lexer expands them)
    groups    group member -> (group id, its body with plain regular rules inlined)
    reach     group member -> every group member a lexeme referencing it needs (its own group
              and the groups the bodies reference, transitively)
    nullable  the group members that derive the empty string
    too_big   rules whose tail group passed the size limits (so would any group holding them)
    big       rule -> its inlined body, for rules regular but for what must be a terminal of
              its own (a big counted repeat: lowered structurally, except as a ``Capped`` item,
              which is one DFA however many copies it holds)

    ``groups`` and ``reach`` are filled by ``finish``. While the analysis runs, groups grow by
    absorbing earlier ones (``_add_tail_group``), so membership is a union-find: a member keeps
    the group it ``joined``, and ``merged`` forwards an absorbed group to its absorber. Each
    group records only what it added (``fresh`` members, the groups it ``absorbed``, the groups
    its references ``needed`` when it was made), so a chain of n rule-states costs O(n), not
    O(n^2); ``finish`` expands the live groups once.
    """

    bodies: dict[str, Expr] = field(default_factory=dict)
    groups: dict[str, tuple[int, Expr]] = field(default_factory=dict)
    reach: dict[str, frozenset[str]] = field(default_factory=dict)
    nullable: set[str] = field(default_factory=set)
    too_big: set[str] = field(default_factory=set)
    big: dict[str, Expr] = field(default_factory=dict)
    size: dict[str, int] = field(default_factory=dict)  # plain regular rule -> inlined size
    member_body: dict[str, Expr] = field(default_factory=dict)  # as ``groups`` bodies
    joined: dict[str, int] = field(default_factory=dict)  # member -> the group it joined
    merged: dict[int, int] = field(default_factory=dict)  # absorbed group -> its absorber
    fresh: dict[int, list[str]] = field(default_factory=dict)  # group -> members it added
    absorbed: dict[int, list[int]] = field(default_factory=dict)  # group -> groups it took in
    needed: dict[int, set[int]] = field(default_factory=dict)  # group -> groups it referenced
    own: dict[int, int] = field(default_factory=dict)  # live group -> its members' own nodes
    refs: dict[int, frozenset[str]] = field(default_factory=dict)  # -> other groups' members
    total: dict[int, int] = field(default_factory=dict)  # live group -> its lexer size

    def group_of(self, member: str) -> int:
        """The live group holding ``member`` (path-compressing the ``merged`` chain)."""
        gid = self.joined[member]
        root = gid
        while root in self.merged:
            root = self.merged[root]
        while gid != root:
            self.merged[gid], gid = root, self.merged[gid]
        return root

    def size_of(self, rule: str) -> int:
        """Lexer size of a regular rule: a group member counts its whole group."""
        return self.total[self.group_of(rule)] if rule in self.joined else self.size[rule]

    def add(self, gid: int, fresh: dict[str, Expr], absorbed: set[int], own: int,
            refs: frozenset[str], total: int) -> None:
        """Make group ``gid`` of the ``fresh`` members (name -> body) and the groups
        ``absorbed``, referencing the members ``refs`` of other groups."""
        self.needed[gid] = {self.group_of(r) for r in refs}
        for g in absorbed:
            del self.own[g], self.refs[g], self.total[g]
            self.merged[g] = gid
        for m, body in fresh.items():
            self.joined[m] = gid
            self.member_body[m] = body
        self.fresh[gid], self.absorbed[gid] = list(fresh), sorted(absorbed)
        self.own[gid], self.refs[gid], self.total[gid] = own, refs, total

    def finish(self) -> None:
        """Fill ``groups`` and ``reach`` from the live groups. A group's reach is its members
        and the reach of each group it needed, as that group was then."""
        for gid in self.own:
            members = self._members([gid])
            reach = frozenset(members).union(self._members(_closure(self.needed[gid],
                                                                    self.needed)))
            for m in members:
                self.groups[m] = (gid, self.member_body[m])
                self.reach[m] = reach

    def _members(self, groups: Iterable[int]) -> list[str]:
        """The members of ``groups``, each group as it was when it was made."""
        return [m for g in _closure(groups, self.absorbed) for m in self.fresh[g]]


def _closure(start: Iterable[int], edges: Mapping[int, Iterable[int]]) -> set[int]:
    """``start`` and every node reachable from it along ``edges``."""
    seen = set(start)
    stack = list(seen)
    while stack:
        for h in edges[stack.pop()]:
            if h not in seen:
                seen.add(h)
                stack.append(h)
    return seen


def _regular_bodies(grammar: Grammar, limits: CompileLimits, counts: _Counts,
                    skip: frozenset[str] = frozenset()) -> _Regular:
    """Rules whose language is regular by construction, with their references inlined.

    A rule is regular when it cannot reach itself, all rules it references are regular, its
    inlined body stays under ``limits.max_terminal_size`` nodes as the lexer counts them
    (``NodeFacts.size``; bigger ones are split structurally) and holds no big counted repeat
    (see ``_Counts``). A strongly connected component of rules is a regular *group* when its
    members refer to each other only in tail position, reference nothing outside but regular
    rules, stay under ``limits.max_group_size`` nodes and hold no big counted repeat
    (``_add_group``). Works bottom-up over the rule graph without recursion across rules, so
    long chains of rules (one per JSON property, say) cost no stack depth.

    The rules of ``skip`` are left out, known not to be regular (shared rules lowered apart,
    ``_Fragment``): a rule referencing one is not regular either.
    """
    local = {name: _local_size_and_refs(body) for name, body in grammar.rules.items()
             if name not in skip}
    order = strongly_connected_components(  # (sorted: a set's order differs by process)
        {name: sorted(r for r in refs if r not in skip) for name, (_, refs) in local.items()})
    out = _Regular()
    inner = {name for name, (_, refs) in local.items() if refs}  # rules that reference rules
    inner.update(skip)  # (each shared rule references rules: ``_Fragment.lower``)
    tail_memo: dict[str, bool] = {}

    def tail_only(rule: str) -> bool:  # inner rules only in tail position (leaves anywhere)
        if rule not in tail_memo:
            tail_memo[rule] = _right_linear(grammar.rules[rule], inner)
        return tail_memo[rule]

    for gid, scc in enumerate(order):  # callees first
        name = scc[0]
        own, refs = local[name]
        if len(scc) > 1 or name in refs:
            _add_group(grammar, scc, gid, limits, counts, out)
            if name not in out.joined:  # too big with the groups it references as copies
                _add_tail_group(grammar, scc, gid, limits, counts, out, local, tail_only)
            continue
        if any(r not in out.bodies for r in refs):
            continue
        total = own + sum(out.size_of(r) * count
                          for r, count in ref_counts(grammar.rules[name]).items())
        if total > limits.max_terminal_size:
            _add_tail_group(grammar, [name], gid, limits, counts, out, local, tail_only)
            continue
        body = _inline(grammar.rules[name], out.bodies)
        if counts.has_big(body):
            out.big[name] = body
            continue
        out.size[name] = total
        out.bodies[name] = body
    out.finish()
    return out


def _add_group(grammar: Grammar, scc: list[str], gid: int, limits: CompileLimits,
               counts: _Counts, out: _Regular) -> None:
    """Record the component ``scc`` in ``out`` as regular group ``gid`` if it is one."""
    members = set(scc)
    for m in scc:
        if any(r not in members and r not in out.bodies for r in ref_names(grammar.rules[m])):
            return
        if not _right_linear(grammar.rules[m], members):
            return
    for m in scc:
        out.bodies[m] = Ref(m)
    bodies = {m: _inline(grammar.rules[m], out.bodies) for m in scc}
    total = sum(_lexer_size(b, members, out.size_of) for b in bodies.values())
    if total > limits.max_group_size or any(counts.has_big(b) for b in bodies.values()):
        for m in scc:
            del out.bodies[m]
        return
    own = sum(_lexer_size(b, grammar.rules, out.size_of) for b in bodies.values())
    out.add(gid, bodies, set(), own, ref_names(*bodies.values()) - members, total)
    _close_nullable(scc, bodies, out.nullable)


def _add_tail_group(grammar: Grammar, seed: list[str], gid: int, limits: CompileLimits,
                    counts: _Counts, out: _Regular,
                    local: dict[str, tuple[int, frozenset[str]]],
                    tail_only: Callable[[str], bool]) -> None:
    """Make the rules of ``seed`` (one rule too big to inline, or a cycle too big as a group)
    group ``gid`` with every rule they reach by tail references, where all of them reference
    rules only in tail position (``tail_only``).

    Front ends write automata as one rule per state (``q3: "a" q4 | "b" q7 | ""``). Where the
    states form a DAG, inlining copies a shared state once per path to it (and a group copies
    every group it references), so sizes explode; as one group each state is one NFA entry.
    Groups reached are absorbed whole, their bodies kept as they are (they stay right-linear:
    what they inlined stays inlined). Sizes count each member's own nodes once (``out.own``).
    Work per call is bounded by the rules it adds and the groups it absorbs, not their members:
    a group reaching a rule already known too big gives up at once. Nothing changes unless the
    result passes ``_add_group``'s size tests."""
    rules = grammar.rules
    if not all(local[m][1] and tail_only(m) for m in seed):
        return  # a rule without references stays a leaf: others may use it anywhere
    fresh = dict.fromkeys(seed)  # the new members, in order
    absorbed: set[int] = set()

    def inside(r: str) -> bool:
        return r in fresh or (r in out.joined and out.group_of(r) in absorbed)

    stack = list(seed)
    # a lower bound of the group's size as it grows: its members' own sizes as the lexer counts
    # them (``local``: a JSON-encoded character is one symbol, a reference one node)
    bound = sum(local[m][0] for m in seed)
    while stack:
        for r in set(local[stack.pop()][1]):
            if r in fresh:
                continue
            if r in out.too_big:
                bound = limits.max_group_size + 1
            elif r in out.joined:
                g = out.group_of(r)
                if g not in absorbed:
                    absorbed.add(g)
                    bound += out.total[g]
            elif r in out.bodies and local[r][1] and tail_only(r):
                fresh[r] = None  # a plain regular rule with tail references: a state too
                stack.append(r)
                bound += local[r][0]
            if bound > limits.max_group_size:  # it contains a group too big: so is this one
                out.too_big.update(seed)
                return
    if any(not inside(r) and r not in out.bodies for m in fresh for r in local[m][1]):
        return
    plain = {m: out.bodies[m] for m in fresh if m in out.bodies}
    for m in fresh:
        out.bodies[m] = Ref(m)
    bodies = {m: _inline(rules[m], out.bodies) for m in fresh}
    own = sum(_lexer_size(b, rules, out.size_of) for b in bodies.values())
    own += sum(out.own[g] for g in absorbed)
    outside = ref_names(*bodies.values()).union(*(out.refs[g] for g in absorbed))
    outside = frozenset(r for r in outside if not inside(r))
    total = own + sum(out.size_of(r) for r in outside)
    if total > limits.max_group_size or any(counts.has_big(b) for b in bodies.values()):
        out.too_big.update(seed)
        for m in fresh:
            if m in plain:
                out.bodies[m] = plain[m]
            else:
                del out.bodies[m]
        return
    for m in plain:
        del out.size[m]
    out.add(gid, bodies, absorbed, own, outside, total)
    _close_nullable(list(fresh), bodies, out.nullable)


def _close_nullable(names: list[str], bodies: dict[str, Expr], found: set[str]) -> None:
    """Add to ``found`` every rule of ``names`` that derives the empty string (least fixpoint)."""
    changed = True
    while changed:
        changed = False
        for m in names:
            if m not in found and nullable(bodies[m], found):
                found.add(m)
                changed = True


def _right_linear(expr: Expr, members: set[str]) -> bool:
    """True iff every reference to ``members`` inside ``expr`` is in tail position: nothing
    but the empty string can follow it within ``expr``."""
    if isinstance(expr, Choice):
        return all(_right_linear(i, members) for i in expr.items)
    if isinstance(expr, Seq):
        return not any(_mentions(i, members) for i in expr.items[:-1]) and (
            not expr.items or _right_linear(expr.items[-1], members))
    if isinstance(expr, Repeat):
        return not _mentions(expr.item, members) or (
            expr.max == 1 and _right_linear(expr.item, members))
    if isinstance(expr, Capped):  # counted from its start: nothing inside is a tail
        return not _mentions(expr.item, members)
    return True


def _mentions(expr: Expr, members: set[str]) -> bool:
    return not members.isdisjoint(ref_names(expr))


def _lexer_size(expr: Expr, members: Container[str], size: Callable[[str], int]) -> int:
    """IR nodes of a group body as the lexer sees them: a JSON-encoded character is one
    symbol, a member of the group one node, a rule of another group its whole size."""
    total = 0
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, Ref) and e.name not in members:
            total += size(e.name)
            continue
        total += 1
        if decoded_class(e) is None:
            stack.extend(children(e))
    return total


def _inline(expr: Expr, regular: dict[str, Expr]) -> Expr:
    """``expr`` with every Ref replaced by its (already inlined) regular body.

    Subtrees without a Ref come back as the same object (the lexer recognises JSON character
    encodings by identity, see ``grammar.encodings``).
    """
    if isinstance(expr, Ref):
        return regular[expr.name]
    if not ref_names(expr):
        return expr
    return _rebuild(expr, [_inline(c, regular) for c in children(expr)])


def _rebuild(expr: Expr, parts: list[Expr]) -> Expr:
    """``expr`` with its children replaced by ``parts``; ``expr`` itself if none changed."""
    if all(p is c for p, c in zip(parts, children(expr), strict=True)):
        return expr
    if isinstance(expr, Repeat):
        return Repeat(parts[0], expr.min, expr.max)
    if isinstance(expr, Capped):
        return Capped(parts[0], expr.max)
    return Seq(tuple(parts)) if isinstance(expr, Seq) else Choice(tuple(parts))


# --------------------------------------------------------------------------- lowering

_DEAD = object()  # a symbol for the empty language: its production is dropped
_EPS = object()  # a symbol for the empty string: it is left out


_NO_RULES: frozenset[str] = frozenset()


class _Lowering:
    """Builds the BNF: nonterminals, productions and terminal expressions."""

    def __init__(
        self,
        grammar: Grammar,
        limits: CompileLimits,
        dfa_builder: Callable[[Expr, RuleSet, bytes], PackedDfa],
        shared: _Fragment | None = None,
    ) -> None:
        self.grammar = grammar
        self.limits = limits
        self.counts = _Counts(limits.repeat_alone)
        self.shared = shared  # ``grammar.shared`` lowered apart, spliced in where first met
        skip = grammar.shared if shared is not None else frozenset()
        self.analysis = _regular_bodies(grammar, limits, self.counts, skip)
        self.regular = self.analysis.bodies
        self.dfa_builder = dfa_builder
        self.unlexable: set[Expr] = set()  # lexemes with rule groups whose DFA passed the limits
        self.dropped_groups: set[int] = set()  # groups back in the parser (their DFA was too big)
        self._regular_memo: dict[int, tuple[Expr, Expr | None]] = {}  # id -> (expr, regular_expr)
        self._seq_memo: dict[int, tuple[Seq, list[object]]] = {}  # id -> (Seq, production)
        self._rules_memo: dict[frozenset[str], frozenset[str]] = {}  # ref_names -> rules_of
        self._rule_sets: dict[frozenset[str], tuple[RuleSet, bytes]] = {}  # see ``rule_set``
        self.one_terminal: set[Expr] = set()  # big repeats lexed whole: see ``symbol``
        self.dfa_states = 0  # summed over the terminals built so far
        self.nt_labels: list[str | HelperName] = []
        self.prod_lhs: list[int] = []  # production p: prod_lhs[p] -> the symbols of
        self.prod_syms: list[int] = []  # prod_syms[prod_end[p - 1]:prod_end[p]] (``_bnf``)
        self.prod_end: list[int] = []
        self.rule_nt: dict[str, int] = {}
        self.pending: list[str] = []
        self.helper_nt: dict[object, int] = {}
        self.term_exprs: list[Expr] = []
        self.term_dfas: list[PackedDfa] = []
        self.term_info: dict[Expr, tuple[object, bool]] = {}  # expr -> ``terminal(expr)``

    # -- symbols -------------------------------------------------------------

    def new_nt(self, label: str | HelperName) -> int:
        self.nt_labels.append(label)
        return len(self.nt_labels) - 1

    def add_prod(self, lhs: int, syms: list[object]) -> None:
        if _DEAD in syms:  # (the sentinels compare by identity, in C)
            return
        kept = [s for s in syms if s is not _EPS] if _EPS in syms else syms
        self.prod_syms.extend(kept)  # type: ignore[arg-type]
        self.prod_lhs.append(lhs)
        self.prod_end.append(len(self.prod_syms))
        if len(self.prod_lhs) > self.limits.max_productions:
            raise GrammarTooLargeError("productions", len(self.prod_lhs),
                                       self.limits.max_productions)

    def rule(self, name: str) -> int:
        """The nonterminal of rule ``name``; its body is lowered later by ``drain`` (no recursion
        across rules, so arbitrarily long chains of rules cost no stack). A shared rule comes
        with all the others, lowered before (``splice``)."""
        if name not in self.rule_nt and self.shared is not None and name in self.grammar.shared:
            self.splice(self.shared)
            self.shared = None
        if name not in self.rule_nt:
            self.rule_nt[name] = self.new_nt(name)
            self.pending.append(name)
        return self.rule_nt[name]

    def drain(self) -> None:
        """Lower the bodies of all rules referenced so far (and those they reference)."""
        while self.pending:
            name = self.pending.pop()
            nt = self.rule_nt[name]
            for alt in self.alternatives(self.grammar.rules[name]):
                self.add_prod(nt, alt)

    def regular_expr(self, expr: Expr) -> Expr | None:
        """``expr`` with regular refs inlined, or None if it reaches a non-regular rule.

        Memoised by identity (the lowering asks again for every enclosing run); the memo is
        dropped whenever a lexeme turns out unlexable, since that changes the answers."""
        hit = self._regular_memo.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        out = self._regular_expr(expr)
        self._regular_memo[id(expr)] = (expr, out)
        return out

    def _regular_expr(self, expr: Expr) -> Expr | None:
        if isinstance(expr, Ref):
            out = self.regular.get(expr.name)
        elif isinstance(expr, (Literal, CharClass)):
            return expr
        elif isinstance(expr, Capped):  # never merged: lowered by ``capped``
            return None
        elif known_ref_names(expr) == _NO_RULES and not self.counts.has_big(expr):
            return expr  # nothing to inline and nothing to refuse (the common case: JSON text)
        else:
            parts = []
            for c in children(expr):  # the first non-regular child decides (an object
                part = self.regular_expr(c)  # state's choice of steps: its first step)
                if part is None:
                    return None
                parts.append(part)
            out = _rebuild(expr, parts)
            if isinstance(out, Repeat) and self.counts.has_big(out) and out not in self.one_terminal:
                return None
        if out is not None and self.unlexable and (out in self.unlexable or any(
                self.analysis.groups[r][0] in self.dropped_groups for r in self.rules_of(out))):
            return None
        return out

    def rules_of(self, expr: Expr) -> frozenset[str]:
        """The group members a lexeme needs (empty for plain regular expressions): the reach
        of every rule it references (``ref_names``, kept on the nodes), memoised by those
        names."""
        if not self.analysis.groups:  # no rule groups: lexemes hold no references
            return _NO_RULES
        names = ref_names(expr)
        hit = self._rules_memo.get(names)
        if hit is None:
            reach = self.analysis.reach
            hit = self._rules_memo[names] = frozenset().union(*(reach[n] for n in names))
        return hit

    def terminal(self, expr: Expr,
                 own: tuple[RuleSet, bool] | None = None) -> tuple[object, bool]:
        """(terminal symbol for L(expr) minus the empty string or _DEAD, nullable).

        ``own`` gives the rules and nullability of a lexeme whose rules the analysis grouped
        otherwise (``capped_rules``); by default they come from ``analysis.groups``.

        Raises ``GrammarTooLargeError`` for a lexeme with rule groups whose DFA would take the
        summed DFA states past ``limits.max_dfa_states`` (the caller lowers it structurally).
        """
        known = self.term_info.get(expr)  # one lookup: an equal lexeme built apart compares
        if known is None:  # as a tree
            if own is None:
                rules, digest = self.rule_set(self.rules_of(expr))
                empty_ok = nullable(expr, self.analysis.nullable)
            else:
                rules, empty_ok = own
                digest = rules_digest(rules)
            dfa = self.dfa_builder(expr, rules, digest)
            if rules and self.dfa_states + dfa.num_states > self.limits.max_dfa_states:
                raise GrammarTooLargeError("dfa_states", self.dfa_states + dfa.num_states,
                                           self.limits.max_dfa_states)
            sym = self.new_terminal(expr, dfa) if dfa.accept.any() else _DEAD
            known = self.term_info[expr] = (sym, empty_ok)
        return known

    def new_terminal(self, expr: Expr, dfa: PackedDfa) -> int:
        self.term_exprs.append(expr)
        self.term_dfas.append(dfa)
        self.dfa_states += dfa.num_states
        return -len(self.term_exprs)

    def splice(self, fragment: _Fragment) -> None:
        """Add ``fragment``'s nonterminals, productions and terminals, as if its rules were
        lowered here: a terminal already made here (an equal lexeme) is used again."""
        base = len(self.nt_labels)
        self.nt_labels.extend(fragment.labels)
        syms = []
        for expr, dfa, empty_ok in fragment.terms:
            known = self.term_info.get(expr)
            if known is None:
                known = self.term_info[expr] = (self.new_terminal(expr, dfa), empty_ok)
            syms.append(known[0])
        for lhs, body in fragment.prods:
            self.add_prod(base + lhs, [base + s if s >= 0 else syms[-1 - s] for s in body])
        self.rule_nt.update((name, base + nt) for name, nt in fragment.rule_nt)

    def rule_set(self, names: frozenset[str]) -> tuple[RuleSet, bytes]:
        """The rule groups of ``names`` as the lexer takes them, and their digest; memoised,
        since every lexeme inside a big group (one rule per automaton state) needs it whole."""
        hit = self._rule_sets.get(names)
        if hit is None:
            rules = tuple((n, *self.analysis.groups[n]) for n in sorted(names))
            hit = self._rule_sets[names] = (rules, rules_digest(rules))
        return hit

    def lexeme(self, expr: Expr) -> tuple[object, bool] | None:
        """``terminal(expr)``, or None where a lexeme with rule groups is too big: it is then
        remembered as unlexable (and a too-big group entry drops its whole group), so that
        ``regular_expr`` sends it, and what contains it, down the structural path."""
        try:
            return self.terminal(expr)
        except GrammarTooLargeError:
            if not self.rules_of(expr):
                raise
            self.unlexable.add(expr)
            self._regular_memo.clear()
            self._seq_memo.clear()
            if isinstance(expr, Ref):
                self.dropped_groups.add(self.analysis.groups[expr.name][0])
            return None

    def symbol(self, expr: Expr) -> object:
        """One symbol deriving exactly L(expr), creating helper nonterminals as needed."""
        if is_empty(expr):
            return _EPS
        if isinstance(expr, Capped):
            return self.capped(expr)
        reg = self.regular_expr(expr)
        if isinstance(expr, Ref) and reg is None:
            return self.rule(expr.name)
        if reg is not None:
            found = self.lexeme(reg)
            if found is None:  # ``reg`` is unlexable now: lower ``expr`` structurally
                return self.symbol(expr)
            return self.maybe_empty(*found, reg)
        if isinstance(expr, Repeat):
            item = self.regular_expr(expr.item)
            whole = None if item is None else Repeat(item, expr.min, expr.max)
            if whole is None or not self.counts.has_big(whole):
                return self.repeat(expr)  # a non-regular item, or an unlexable one
            if self.counts.expansion(whole) <= self.limits.repeat_chunk:
                self.one_terminal.add(whole)  # a big repeat that fits: its own terminal
                return self.symbol(whole)
            if (whole.max is not None and whole.min <= self.limits.repeat_chunk
                    and decoded_class(whole.item) is not None):
                # a long JSON string body: one terminal whose characters the matcher counts
                # (each copy is one decoded character)
                return self.capped(Capped(Repeat(whole.item, whole.min, None), whole.max))
            per_chunk = self.limits.repeat_chunk // self.counts.expansion(whole.item)
            if per_chunk < 2:  # the item is a chunk already: count it in the parser
                return self.repeat(expr)
            key = ("chunked", expr)  # a big repeat of a small regular item
            if key not in self.helper_nt:
                h = self.helper_nt[key] = self.new_nt(HelperName(expr))
                chunked = _chunked(whole, per_chunk, self.one_terminal.add)
                self.add_prod(h, [self.symbol(chunked)])
            return self.helper_nt[key]
        if expr not in self.helper_nt:
            h = self.helper_nt[expr] = self.new_nt(HelperName(expr))
            for alt in self.alternatives(expr):
                self.add_prod(h, alt)
        return self.helper_nt[expr]

    def maybe_empty(self, sym: object, empty_ok: bool, expr: Expr) -> object:
        """A symbol for terminal ``sym``'s language plus the empty string if ``empty_ok``
        (``expr``: the lexeme, to name the helper)."""
        if not empty_ok:
            return sym
        if sym is _DEAD:
            return _EPS
        key = ("opt", sym)
        if key not in self.helper_nt:
            h = self.helper_nt[key] = self.new_nt(HelperName(expr, "?"))
            self.add_prod(h, [sym])
            self.add_prod(h, [])
        return self.helper_nt[key]

    def capped(self, expr: Capped) -> object:
        """The symbol of a ``Capped`` node: one terminal of its own, whose characters the
        matcher counts from its start (``lexer._capped``). A cap of 0 leaves at most the
        empty string. No parser fallback: a count cannot span terminals.

        Raises
        ------
        GrammarError
            The item is not regular.
        GrammarTooLargeError
            The capped terminal's DFA is past the limits.
        """
        item = self.capped_item(expr.item)
        own = None
        if item is None:  # rules the analysis left to the parser: one group, whatever its size
            item, own = expr.item, self.capped_rules(expr.item)
            if own is None:
                raise GrammarError(
                    f"Capped item is not regular: {_label(expr.item)}",
                    hint="a capped item must be a regular JSON string body, lexed as one DFA")
        if expr.max == 0:
            empty_ok = own[1] if own is not None else nullable(item, self.analysis.nullable)
            return _EPS if empty_ok else _DEAD
        lexeme = Capped(item, expr.max)
        return self.maybe_empty(*self.terminal(lexeme, own), lexeme)

    def capped_rules(self, item: Expr) -> tuple[RuleSet, bool] | None:
        """Every rule ``item`` reaches, as one right-linear group, and whether ``item`` is
        nullable; None where some rule refers to another in other than tail position. For the
        rules of a big pattern automaton (one per state) that the analysis did not group
        (past ``max_group_size``): a capped item has no parser fallback, and the lexer's
        NFA holds each rule once, so only the DFA limits apply."""
        rules = self.grammar.rules
        names = _reached(self.grammar, ref_names(item))
        if not all(_right_linear(rules[n], names) for n in names):
            return None
        found: set[str] = set()
        _close_nullable(sorted(names), {n: rules[n] for n in names}, found)
        return tuple((n, 0, rules[n]) for n in sorted(names)), nullable(item, found)

    def capped_item(self, expr: Expr) -> Expr | None:
        """``expr`` with regular rules inlined, or None where it is not regular: the item of a
        ``Capped`` lexeme. Unlike ``regular_expr`` it keeps big counted repeats (a capped
        item is one DFA however many copies it holds)."""
        if isinstance(expr, Ref):
            return self.regular.get(expr.name, self.analysis.big.get(expr.name))
        if isinstance(expr, Capped):
            return None
        if isinstance(expr, (Literal, CharClass)):
            return expr
        parts = [self.capped_item(c) for c in children(expr)]
        return None if any(p is None for p in parts) else _rebuild(expr, parts)  # type: ignore[arg-type]

    def alternatives(self, expr: Expr) -> list[list[object]]:
        """The productions (symbol sequences) of a rule body.

        A non-regular ``Seq`` is lowered once per distinct value: an object's member automaton
        repeats "comma, member ``j``, state after ``j``" in the body of every state before
        ``j`` (``json_schema.objects``), each built apart but equal."""
        if isinstance(expr, Choice) and self.regular_expr(expr) is None:
            return [alt for item in expr.items for alt in self.alternatives(item)]
        if isinstance(expr, Seq) and (hit := self._seq_memo.get(id(expr))) is not None:
            return [hit[1]]
        if isinstance(expr, Seq) and self.regular_expr(expr) is None:
            syms: list[object] = []
            run: list[Expr] = []  # adjacent regular items become one terminal
            for item in _coalesce(expr.items, self.counts, self.regular_expr):
                if self.regular_expr(item) is not None:
                    run.append(item)
                    continue
                syms.extend(self.run_symbols(run))
                run = []
                syms.append(self.symbol(item))
            syms.extend(self.run_symbols(run))
            self._seq_memo[id(expr)] = (expr, syms)
            return [syms]
        return [[self.symbol(expr)]]

    def run_symbols(self, run: list[Expr]) -> list[object]:
        """Symbols for adjacent regular items: one terminal, or one per item where the merged
        lexeme is unlexable."""
        if not run:
            return []
        merged = seq(*run)
        if len(run) > 1 and self.regular_expr(merged) is None:
            return [self.symbol(item) for item in run]
        return [self.symbol(merged)]

    def repeat(self, expr: Repeat) -> object:
        if expr in self.helper_nt:
            return self.helper_nt[expr]
        x = self.symbol(expr.item)
        hi = expr.max
        if hi is not None and hi > self.limits.max_repeat:
            raise GrammarTooLargeError("repeat bound", hi, self.limits.max_repeat)
        if expr.min > self.limits.max_repeat:
            raise GrammarTooLargeError("repeat bound", expr.min, self.limits.max_repeat)
        h = self.helper_nt[expr] = self.new_nt(HelperName(expr))
        if x is _EPS:
            self.add_prod(h, [])
            return h
        if x is _DEAD:
            if expr.min == 0:
                self.add_prod(h, [])
            return h
        body: list[object] = [x] * expr.min
        if hi is None:
            star = self.new_nt(HelperName(expr.item, "*"))
            self.add_prod(star, [])
            self.add_prod(star, [star, x])  # left recursion: linear in Earley
            body.append(star)
        elif hi > expr.min:
            tail: object = _EPS
            for k in range(1, hi - expr.min + 1):
                opt = self.new_nt(HelperName(expr.item, f"{{0,{k}}}"))
                self.add_prod(opt, [])
                self.add_prod(opt, [x, tail])
                tail = opt
            body.append(tail)
        self.add_prod(h, body)
        return h


@dataclass(frozen=True)
class _Fragment:
    """A grammar's shared rules (``Grammar.shared``) lowered on their own, once per process,
    for ``_Lowering.splice``: nonterminals ``0 .. len(labels) - 1`` (``rule_nt`` names the
    rules'), productions over them and terminals ``-1 - t`` of ``terms`` (expression, DFA,
    whether the lexeme derives the empty string). Open objects make JSON Schema grammars hold
    the any-value rules (70 % of MaskBench-dev's); splicing them instead of lowering them anew
    takes a small open object's compile from 1.51 to 1.29 ms."""

    labels: tuple[str | HelperName, ...]
    rule_nt: tuple[tuple[str, int], ...]
    prods: tuple[tuple[int, tuple[int, ...]], ...]
    terms: tuple[tuple[Expr, PackedDfa, bool], ...]

    @classmethod
    def lower(cls, grammar: Grammar, limits: CompileLimits,
              dfa_builder: Callable[[Expr, RuleSet, bytes], PackedDfa]) -> _Fragment | None:
        """``grammar.shared`` lowered apart (with the rules they reference), or None where the
        result would not be what lowering them in place gives: a shared rule that is regular
        (it would be inlined) or references no rule, a rule group, a lexeme too big, a
        nonterminal for a rule not shared; or past the limits (lowered in place, only what the
        grammar reaches of them counts)."""
        shared = grammar.shared
        rules = {name: grammar.rules[name] for name in _reached(grammar, shared)}
        low = _Lowering(Grammar(rules, start=min(shared)), limits, dfa_builder)
        for name in sorted(shared):
            if name in low.regular or name in low.analysis.big or not ref_names(rules[name]):
                return None
            low.rule(name)
        try:
            low.drain()
        except GrammarTooLargeError:
            return None
        if low.analysis.groups or low.unlexable or low.one_terminal or not shared.issuperset(
                low.rule_nt):
            return None
        ends = [0, *low.prod_end]
        return cls(
            labels=tuple(low.nt_labels),
            rule_nt=tuple(low.rule_nt.items()),
            prods=tuple((lhs, tuple(low.prod_syms[ends[p]:ends[p + 1]]))
                        for p, lhs in enumerate(low.prod_lhs)),
            terms=tuple((expr, dfa, low.term_info[expr][1])
                        for expr, dfa in zip(low.term_exprs, low.term_dfas, strict=True)),
        )


def _reached(grammar: Grammar, names: Iterable[str]) -> set[str]:
    """``names`` and every rule they reference, directly or not."""
    seen = set(names)
    stack = list(seen)
    while stack:
        for r in ref_names(grammar.rules[stack.pop()]):
            if r not in seen:
                seen.add(r)
                stack.append(r)
    return seen


_FRAGMENTS: OrderedDict[tuple[object, ...], _Fragment | None] = OrderedDict()
_FRAGMENTS_SIZE = 32  # one per JSON Schema options in use, and per ``indent`` level
_FRAGMENTS_LOCK = threading.Lock()


def _shared_fragment(grammar: Grammar, limits: CompileLimits,
                     dfa_builder: Callable[[Expr, RuleSet, bytes], PackedDfa],
                     variant: bytes) -> _Fragment | None:
    """``_Fragment.lower`` of ``grammar``, kept per process by the rules it covers (names and
    bodies' ``fingerprint``s: walked once per body object), the limits and the DFA
    ``variant``; None where it has no shared rules or they cannot be lowered apart."""
    if not grammar.shared:
        return None
    rules = grammar.rules
    key = (tuple(sorted((name, fingerprint(rules[name]))
                        for name in _reached(grammar, grammar.shared))),
           grammar.shared, limits, variant)
    with _FRAGMENTS_LOCK:
        if key in _FRAGMENTS:
            _FRAGMENTS.move_to_end(key)
            return _FRAGMENTS[key]
    fragment = _Fragment.lower(grammar, limits, dfa_builder)
    with _FRAGMENTS_LOCK:
        _FRAGMENTS[key] = fragment
        while len(_FRAGMENTS) > _FRAGMENTS_SIZE:
            _FRAGMENTS.popitem(last=False)
    return fragment


# --------------------------------------------------------------------------- flattening


@njit(cache=True, nogil=True)
def _joint_columns(classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """The coarsest partition of the bytes that refines each row of ``classes`` (uint8
    [T, 256]: every terminal's byte classes), as ``(byte_col uint8 [256], first int64 [K])``:
    columns numbered by first occurrence, ``first[c]`` the lowest byte of column ``c``. One
    pass per terminal: a byte's new column is the number of its (old column, class) pair."""
    col = np.zeros(256, np.int64)
    for t in range(classes.shape[0]):
        col = joint_classes(col, classes[t])[0]
    first = np.full(col.max() + 1, -1, np.int64)
    for b in range(255, -1, -1):
        first[col[b]] = b
    return col.astype(np.uint8), first


@njit(cache=True, nogil=True)
def _place(table: np.ndarray, classes: np.ndarray, offset: int, trans: np.ndarray,
           has_out: np.ndarray, first: np.ndarray) -> None:  # pragma: no cover - compiled
    """Writes the packed DFA ``table[:, classes]`` (int32 [n, k], uint8 [256]) into rows
    ``offset .. offset + n - 1`` of the shared ``trans`` (int32 [Q, K]: a column per joint
    class, ``first[c]`` a byte of column ``c``; each lies inside one of this DFA's classes),
    its targets shifted by ``offset`` (-1 stays dead), and marks in ``has_out`` (uint8 [Q])
    the rows with a live byte: per row, its ``k`` targets are shifted once and then spread
    over the columns (every class is some byte's, so a live class is a live byte)."""
    shifted = np.empty(table.shape[1], np.int32)
    own = np.empty(first.shape[0], np.int64)  # this DFA's class of each column
    for c in range(first.shape[0]):
        own[c] = classes[first[c]]
    for r in range(table.shape[0]):
        live = 0
        for c in range(table.shape[1]):
            target = table[r, c]
            if target >= 0:
                shifted[c] = target + offset
                live = 1
            else:
                shifted[c] = -1
        has_out[offset + r] = live
        row = trans[offset + r]
        for c in range(own.shape[0]):
            row[c] = shifted[own[c]]


class _OpenGaps:
    """Lexemes with a bounded whitespace gap (``ir.WhitespaceGaps``) made unbounded, for their
    DFAs only: the lowering keeps deciding what to merge by the bounded gap (counted as its
    bound, so gaps inside counted repeats keep those repeats apart, as before). Memoised by
    identity, since lexemes share their subexpressions."""

    def __init__(self, grammar: Grammar, gaps: WhitespaceGaps) -> None:
        self.bound = gaps.bound
        self.bounded = Repeat(JSON_WHITESPACE, 0, gaps.bound)
        if grammar.rules[gaps.rule] != self.bounded:
            raise GrammarError(f"rule {gaps.rule!r} is not a gap of at most {gaps.bound} JSON "
                               f"whitespace characters: {_label(grammar.rules[gaps.rule])}")
        self.open = Repeat(JSON_WHITESPACE, 0, None)
        self.memo: dict[int, tuple[Expr, Expr]] = {}

    def touches(self, expr: Expr) -> bool:
        """Whether ``expr`` holds a gap to open (else ``self(expr)`` is ``expr``)."""
        return self.bound in node_facts(expr).gaps

    def __call__(self, expr: Expr) -> Expr:
        if not self.touches(expr):
            return expr
        hit = self.memo.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        out: Expr
        if expr == self.bounded:
            out = self.open
        else:
            out = _rebuild(expr, [self(c) for c in children(expr)])
        self.memo[id(expr)] = (expr, out)
        return out


def build_tables(
    grammar: Grammar,
    *,
    limits: CompileLimits | None = None,
    whitespace: WhitespaceGaps | None = None,
) -> EarleyTables:
    """Lower ``grammar`` to flat Earley tables; see the module docstring for the layout.

    With ``whitespace`` (a promise about ``grammar``, see ``ir.WhitespaceGaps``) the terminals'
    DFAs hold the gaps unbounded and their bound goes to the matcher (``EarleyTables.ws_bound``):
    a bounded gap costs its bound plus one DFA states in every terminal that holds it."""
    limits = limits or CompileLimits()
    open_gaps = None
    if whitespace is not None and whitespace.rule in grammar.rules:
        open_gaps = _OpenGaps(grammar, whitespace)

    opened = None if open_gaps is None else Variant(f"open{open_gaps.bound}".encode(), open_gaps,
                                                open_gaps.touches)
    # rule groups' bodies open their gaps too (the matcher bounds every run alike): a bounded
    # gap is its bound plus one states in every copy of a body (an array of objects whose
    # member automata are a group: 338 states to 50 on a Github_ultra schema)
    opened_rules: dict[bytes, RuleSet] = {}  # rules digest -> the bodies with open gaps

    def dfa_builder(expr: Expr, rules: RuleSet, rules_digest: bytes) -> PackedDfa:
        if rules and open_gaps is not None:
            hit = opened_rules.get(rules_digest)
            if hit is None:
                hit = opened_rules[rules_digest] = tuple(
                    (name, group, open_gaps(body)) for name, group, body in rules)
            rules = hit
        return DFA_CACHE.get(expr, limits.max_dfa_states, rules, rules_digest, opened)

    shared = _shared_fragment(grammar, limits, dfa_builder, b"" if opened is None else opened.tag)
    low = _Lowering(grammar, limits, dfa_builder, shared)
    top = low.new_nt("<start>")
    low.add_prod(top, [low.symbol(Ref(grammar.start))])
    low.drain()
    ptr = np.zeros(len(low.prod_end) + 1, np.int64)
    ptr[1:] = low.prod_end
    (ok, item_next, item_lhs, nt_ptr, nt_items, nullable_nt, start_item, accept_item, used_nt,
     used_t) = _bnf.trim_and_number(len(low.nt_labels), len(low.term_exprs),
                                    np.asarray(low.prod_lhs, np.int32), ptr,
                                    np.asarray(low.prod_syms, np.int32), top)
    if not ok:
        raise EmptyLanguageError("the grammar accepts no string at all")

    dfas = [low.term_dfas[t] for t in used_t.tolist()]
    total = sum(d.num_states for d in dfas)
    if total > limits.max_dfa_states:
        raise GrammarTooLargeError("dfa_states", total, limits.max_dfa_states)
    byte_col, first = _joint_columns(
        np.array([d.classes for d in dfas], np.uint8).reshape(-1, 256))
    # every row of a live table is written by ``_place``; an empty one is one dead row
    width = first.shape[0]
    dfa_trans = np.empty((total, width), np.int32) if total else np.full((1, width), -1, np.int32)
    dfa_has_out = np.zeros(max(total, 1), dtype=np.uint8)
    dfa_accept = np.zeros(max(total, 1), dtype=np.uint8)
    state_term = np.zeros(max(total, 1), dtype=np.int32)
    state_tile = np.full((max(total, 1), 4), -1, dtype=np.int64)
    state_cap = np.zeros(max(total, 1), dtype=np.int32)
    term_start = np.zeros(len(dfas), dtype=np.int32)
    term_cap = np.zeros(len(dfas), dtype=np.int32)
    offset = 0
    for t, d in enumerate(dfas):
        n = d.num_states
        _place(d.table, d.classes, offset, dfa_trans, dfa_has_out, first)
        dfa_accept[offset : offset + n] = d.accept
        state_term[offset : offset + n] = t
        if d.tile is not None:
            state_tile[offset : offset + n] = d.tile
        if d.char_start is not None:
            state_cap[offset : offset + n] = np.where(d.char_start, d.cap, 0)
            term_cap[t] = d.cap
        term_start[t] = offset
        offset += n
    return EarleyTables(
        item_next=item_next,
        item_lhs=item_lhs,
        nt_ptr=nt_ptr,
        nt_items=nt_items,
        nullable=nullable_nt,
        start_item=int(start_item),
        accept_item=int(accept_item),
        dfa_trans=dfa_trans,
        byte_col=byte_col,
        dfa_accept=dfa_accept,
        dfa_has_out=dfa_has_out,
        state_term=state_term,
        term_start=term_start,
        follow_bytes=_bnf.follow_bytes(nt_ptr, nt_items, item_next, nullable_nt, dfa_trans,
                                      byte_col, term_start),
        state_tile=state_tile,
        state_cap=state_cap,
        term_cap=term_cap,
        nt_labels=tuple(low.nt_labels[o] for o in used_nt.tolist()),
        term_exprs=tuple(low.term_exprs[o] for o in used_t.tolist()),
        ws_bound=0 if open_gaps is None else open_gaps.bound,
        term_dfas=tuple(dfas),
    )


__all__ = ["END", "CompileLimits", "EarleyTables", "build_tables"]
