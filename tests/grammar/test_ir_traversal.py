"""Traversals that keep their answers on IR nodes (``ir.node_facts``: referenced rules, tree
sizes, empty parts; ``ir.ref_counts``: references per path) against a plain recursive walk of
the same expression as a tree."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from grammarsd.compiler.tables import _local_size_and_refs
from grammarsd.grammar.ir import (
    Capped,
    CharClass,
    Choice,
    Expr,
    Grammar,
    Literal,
    Ref,
    Repeat,
    Seq,
    chars,
    ref_counts,
    ref_names,
)
from grammarsd.grammar.json_schema.compiler import _has_empty_class


def _tree_walk(expr: Expr) -> tuple[int, Counter[str]]:
    """Oracle: node count and references, every path walked again."""
    if isinstance(expr, Ref):
        return 1, Counter([expr.name])
    if isinstance(expr, (Literal, CharClass)):
        return 1, Counter()
    kids = expr.items if isinstance(expr, (Seq, Choice)) else (expr.item,)
    size, refs = 1, Counter[str]()
    for k in kids:
        s, r = _tree_walk(k)
        size += s
        refs.update(r)
    return size, refs


def _has_hole(expr: Expr) -> bool:
    """Oracle: an empty class somewhere in the tree."""
    if isinstance(expr, CharClass):
        return expr.is_empty
    if isinstance(expr, (Literal, Ref)):
        return False
    kids = expr.items if isinstance(expr, (Seq, Choice)) else (expr.item,)
    return any(_has_hole(k) for k in kids)


def _random_dag(rng: random.Random, nodes: int, leaves: tuple[Expr, ...] = ()) -> Expr:
    """Each new node takes its children from the nodes made so far, so many are shared."""
    made: list[Expr] = [Literal("a"), chars([(48, 57)]), Ref("x"), Ref("y"), Ref("z"), *leaves]
    for _ in range(nodes):
        kind = rng.choice("scrc" + "p")
        picks = tuple(rng.choice(made) for _ in range(rng.randint(1, 3)))
        if kind == "s":
            made.append(Seq(picks))
        elif kind == "c":
            made.append(Choice(picks))
        elif kind == "r":
            made.append(Repeat(picks[0], 0, rng.choice([1, 3, None])))
        else:
            made.append(Capped(picks[0], 5))
    return made[-1]


@pytest.mark.parametrize("seed", range(40))
def test_cached_walks_agree_with_tree_walks(seed: int) -> None:
    rng = random.Random(seed)
    root = _random_dag(rng, rng.randint(1, 25))
    size, refs = _tree_walk(root)
    assert ref_names(root) == frozenset(refs)
    assert _local_size_and_refs(root) == (size, frozenset(refs))
    assert ref_counts(root) == dict(refs)
    # asked again (answers now cached on the nodes), and from a new parent
    parent = Seq((root, Ref("w"), root))
    assert ref_names(parent) == frozenset(refs) | {"w"}
    assert _local_size_and_refs(parent) == (2 * size + 2, frozenset(refs) | {"w"})
    assert ref_counts(parent) == dict(refs + refs + Counter(["w"]))


@pytest.mark.parametrize("seed", range(40))
def test_empty_class_flags_agree_with_tree_walks(seed: int) -> None:
    rng = random.Random(seed)
    root = _random_dag(rng, rng.randint(1, 12), leaves=(chars([]),) * 3 * (seed % 2))
    assert _has_empty_class(root) == _has_hole(root)
    assert _has_empty_class(Choice((Literal("b"), root))) == _has_hole(root)


def test_undefined_references_are_refused_through_shared_nodes() -> None:
    shared = Choice((Literal("a"), Ref("missing")))
    with pytest.raises(ValueError, match="missing"):
        Grammar({"start": Seq((shared, shared))})
    assert Grammar({"start": Seq((shared, shared)), "missing": Literal("b")}).start == "start"
