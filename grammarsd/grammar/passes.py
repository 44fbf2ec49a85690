"""IR -> IR passes that keep the language and shrink the structure.

    nullable(expr, rules)   whether an expression derives the empty string
    nullable_rules(g)       rules deriving the empty string (least fixpoint)
    productive_rules(g)     rules deriving at least one string (least fixpoint)
    remove_unproductive(g)  refs to unproductive rules become NOTHING; unreachable rules dropped
    normalize(g)            drop unreachable rules, inline trivial / single-use non-recursive
                            rules, rebuild every expression with the smart constructors (which
                            merge literal runs and fold trivial repeats)

Every pass returns a new ``Grammar`` with the same start rule and the same language.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence

from grammarsd.errors import EmptyLanguageError
from grammarsd.grammar.ir import (
    NOTHING,
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
    capped,
    choice,
    iter_refs,
    ref_names,
    repeat,
    seq,
)


def _fixpoint(g: Grammar, holds: Callable[[Expr, set[str]], bool]) -> frozenset[str]:
    known: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, body in g.rules.items():
            if name not in known and holds(body, known):
                known.add(name)
                changed = True
    return frozenset(known)


def nullable(expr: Expr, rules: Container[str] = ()) -> bool:
    """Whether ``expr`` derives the empty string, ``rules`` naming the rules that do."""
    if isinstance(expr, Literal):
        return expr.text == ""
    if isinstance(expr, CharClass):
        return False
    if isinstance(expr, Seq):
        return all(nullable(i, rules) for i in expr.items)
    if isinstance(expr, Choice):
        return any(nullable(i, rules) for i in expr.items)
    if isinstance(expr, Repeat):
        return expr.min == 0 or nullable(expr.item, rules)
    if isinstance(expr, Capped):
        return nullable(expr.item, rules)
    if isinstance(expr, Excluding):
        return "" not in expr.words
    if isinstance(expr, Decoding):
        return expr.dfa.accepts_empty()
    return expr.name in rules


def _productive(expr: Expr, known: set[str]) -> bool:
    """Whether ``expr`` derives some string, ``known`` naming the rules that do. A ``Capped``
    item is taken to have a short enough word (front ends only cap such items; a cap of 0
    over a non-nullable item is the exception, which the compiler's own trimming finds)."""
    if isinstance(expr, Literal):
        return True
    if isinstance(expr, CharClass):
        return not expr.is_empty
    if isinstance(expr, Seq):
        return all(_productive(i, known) for i in expr.items)
    if isinstance(expr, Choice):
        return any(_productive(i, known) for i in expr.items)
    if isinstance(expr, Repeat):
        return expr.min == 0 or _productive(expr.item, known)
    if isinstance(expr, Capped):
        return _productive(expr.item, known)
    if isinstance(expr, (Excluding, Decoding)):
        return not expr.is_empty
    return expr.name in known


def nullable_rules(g: Grammar) -> frozenset[str]:
    """Names of the rules that derive the empty string."""
    return _fixpoint(g, nullable)


def productive_rules(g: Grammar) -> frozenset[str]:
    """Names of the rules that derive at least one (finite) string."""
    return _fixpoint(g, _productive)


def _rebuild(expr: Expr, ref: Callable[[Ref], Expr]) -> Expr:
    """``expr`` rebuilt bottom-up with the smart constructors, ``Ref`` nodes mapped by ``ref``."""
    if isinstance(expr, Ref):
        return ref(expr)
    if isinstance(expr, Seq):
        return seq(*(_rebuild(i, ref) for i in expr.items))
    if isinstance(expr, Choice):
        return choice(*(_rebuild(i, ref) for i in expr.items))
    if isinstance(expr, Repeat):
        return repeat(_rebuild(expr.item, ref), expr.min, expr.max)
    if isinstance(expr, Capped):
        return capped(_rebuild(expr.item, ref), expr.max)
    if isinstance(expr, CharClass) and expr.is_empty:
        return NOTHING
    return expr


def _reachable(rules: Mapping[str, Expr], start: str) -> list[str]:
    seen = {start}
    order = [start]
    for name in order:
        for r in sorted(ref_names(rules[name])):
            if r not in seen:
                seen.add(r)
                order.append(r)
    return order


def _restrict(rules: Mapping[str, Expr], start: str) -> dict[str, Expr]:
    return {name: rules[name] for name in _reachable(rules, start)}


def remove_unproductive(g: Grammar) -> Grammar:
    """Replace references to unproductive rules by NOTHING and drop what became unreachable.

    Raises
    ------
    EmptyLanguageError : the start rule is unproductive (the grammar accepts no string).
    """
    productive = productive_rules(g)
    if g.start not in productive:
        raise EmptyLanguageError(f"start rule {g.start!r} derives no string")

    def ref(r: Ref) -> Expr:
        return r if r.name in productive else NOTHING

    rules = {name: _rebuild(body, ref) for name, body in g.rules.items() if name in productive}
    return Grammar(_restrict(rules, g.start), start=g.start)


def strongly_connected_components(edges: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of a reference graph, iteratively (no recursion,
    so long chains of rules cost no stack). Components come callees first: every component is
    listed after all components it references."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(edges[node]):
                work.append((node, i + 1))
                nxt = edges[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return out


def _recursive_rules(rules: Mapping[str, Expr]) -> set[str]:
    """Rules that can reach themselves through references."""
    edges = {name: sorted(ref_names(body)) for name, body in rules.items()}
    return {
        member
        for component in strongly_connected_components(edges)
        if len(component) > 1 or component[0] in edges[component[0]]
        for member in component
    }


def _substitute(name: str, body: Expr) -> Callable[[Ref], Expr]:
    """A ``Ref`` mapper that replaces references to ``name`` by ``body``."""
    return lambda r: body if r.name == name else r


def _is_trivial(name: str, body: Expr) -> bool:
    return isinstance(body, (Literal, CharClass)) or (isinstance(body, Ref) and body.name != name)


def normalize(g: Grammar) -> Grammar:
    """Smaller grammar, same language and start rule.

    Drops rules unreachable from the start, inlines every non-start rule whose body is a
    ``Ref``, ``Literal`` or ``CharClass`` or that is referenced exactly once and is not
    recursive, and rebuilds expressions with the smart constructors (literal runs merged).
    Inlining never changes which of the remaining rules are recursive, so recursion is
    computed once; reference counts and users are kept up to date incrementally.
    """
    rules = {n: _rebuild(body, lambda r: r) for n, body in _restrict(g.rules, g.start).items()}
    recursive = _recursive_rules(rules)
    counts: dict[str, int] = dict.fromkeys(rules, 0)
    users: dict[str, set[str]] = {name: set() for name in rules}
    for name, body in rules.items():
        for r in iter_refs(body):
            counts[r.name] += 1
            users[r.name].add(name)

    def inlinable(name: str) -> bool:
        body = rules[name]
        single = counts[name] == 1 and name not in recursive
        return name != g.start and (_is_trivial(name, body) or single)

    work = [name for name in rules if inlinable(name)]
    while work:
        victim = work.pop()
        if victim not in rules or not inlinable(victim):
            continue
        body = rules.pop(victim)
        inner = [r.name for r in iter_refs(body)]
        for name in inner:
            users[name].discard(victim)
        for user in users.pop(victim):
            uses = sum(1 for r in iter_refs(rules[user]) if r.name == victim)
            rules[user] = _rebuild(rules[user], _substitute(victim, body))
            for name in inner:
                counts[name] += uses
                users[name].add(user)
            work.append(user)
        for name in inner:
            counts[name] -= 1  # the victim's own reference is gone
            work.append(name)
        del counts[victim]
    return Grammar(rules, start=g.start)


__all__ = ["normalize", "nullable", "nullable_rules", "productive_rules", "remove_unproductive"]
