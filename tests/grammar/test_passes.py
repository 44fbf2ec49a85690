"""Passes keep the language (reference recognizer on every short string) and shrink the IR;
``nullable_rules`` / ``productive_rules`` are checked against the recognizer per rule."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grammarsd.errors import EmptyLanguageError
from grammarsd.grammar.encodings import expand_excluding
from grammarsd.grammar.ir import (
    ANY_CHAR,
    NOTHING,
    CharClass,
    Excluding,
    Expr,
    Grammar,
    Literal,
    Ref,
    Seq,
    chars,
    children,
    choice,
    iter_refs,
    lit,
    repeat,
    seq,
)
from grammarsd.grammar.passes import (
    normalize,
    nullable,
    nullable_rules,
    productive_rules,
    remove_unproductive,
)
from grammarsd.matcher.reference import ReferenceRecognizer

SAMPLES = ["".join(t) for n in range(5) for t in itertools.product("ab", repeat=n)]


def language(g: Grammar) -> set[str]:
    rec = ReferenceRecognizer(g)
    return {s for s in SAMPLES if rec.accepts(s)}


def size(g: Grammar) -> int:
    """Rules plus expression nodes."""

    def count(e: Expr) -> int:
        return 1 + sum(count(c) for c in children(e))

    return sum(count(e) for e in g.rules.values()) + len(g.rules)


# Random grammars over rules r0..r3 and the alphabet {a, b}: the start rule is r0.
NAMES = ["r0", "r1", "r2", "r3"]
LEAVES = st.sampled_from(
    [lit("a"), lit("b"), lit("ab"), chars([(97, 98)]), chars(()), seq(), NOTHING]
) | st.sampled_from(NAMES).map(Ref)


def _exprs() -> st.SearchStrategy[Expr]:
    def extend(inner: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
        return st.one_of(
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: Seq(tuple(xs))),
            st.lists(inner, min_size=1, max_size=3).map(lambda xs: choice(*xs)),
            st.tuples(inner, st.sampled_from([(0, None), (1, None), (0, 1), (2, 3)])).map(
                lambda t: repeat(t[0], *t[1])
            ),
        )

    return st.recursive(LEAVES, extend, max_leaves=5)


GRAMMARS = st.lists(_exprs(), min_size=4, max_size=4).map(
    lambda bodies: Grammar(dict(zip(NAMES, bodies, strict=True)), start="r0")
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(GRAMMARS)
def test_nullable_and_productive_agree_with_recognizer(g: Grammar) -> None:
    nullable, productive = nullable_rules(g), productive_rules(g)
    for name in g.rules:
        rec = ReferenceRecognizer(Grammar(g.rules, start=name))
        assert (name in nullable) == rec.accepts(""), name
        assert (name in productive) == rec.is_prefix(b""), name


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(GRAMMARS)
def test_passes_keep_the_language(g: Grammar) -> None:
    want = language(g)
    normal = normalize(g)
    assert language(normal) == want
    assert normal.start == g.start and len(normal.rules) <= len(g.rules)
    if g.start in productive_rules(g):
        trimmed = remove_unproductive(g)
        assert language(trimmed) == want
        assert productive_rules(trimmed) == frozenset(trimmed.rules)
    else:
        assert want == set()
        with pytest.raises(EmptyLanguageError):
            remove_unproductive(g)


def test_normalize_inlines_merges_and_drops() -> None:
    g = Grammar(
        {
            "start": seq(Ref("greeting"), Ref("name"), Ref("punct")),
            "greeting": seq(lit("he"), Ref("ll"), lit("o ")),  # used once: inlined
            "ll": lit("ll"),  # a literal: inlined
            "name": choice(lit("a"), seq(lit("b"), Ref("name"))),  # recursive: kept
            "punct": Ref("bang"),  # a ref: inlined
            "bang": chars([(33, 33)]),
            "unused": lit("zzz"),  # unreachable: dropped
        }
    )
    n = normalize(g)
    assert set(n.rules) == {"start", "name"}
    assert n.rules["start"] == Seq((Literal("hello "), Ref("name"), chars([(33, 33)])))
    assert size(n) < size(g)
    rec_old, rec_new = ReferenceRecognizer(g), ReferenceRecognizer(n)
    for s in ["hello a!", "hello bba!", "hello !", "hello a", "zzz"]:
        assert rec_old.accepts(s) == rec_new.accepts(s)


def test_normalize_keeps_shared_recursive_rules() -> None:
    g = Grammar(
        {"start": seq(Ref("x"), Ref("x")), "x": choice(lit("a"), seq(lit("("), Ref("x"), lit(")")))}
    )
    n = normalize(g)
    assert set(n.rules) == {"start", "x"}


def test_remove_unproductive_prunes_dead_branches() -> None:
    g = Grammar(
        {
            "start": choice(lit("a"), seq(lit("b"), Ref("loop"))),
            "loop": seq(lit("c"), Ref("loop")),  # derives no finite string
        }
    )
    assert productive_rules(g) == {"start"}
    t = remove_unproductive(g)
    assert dict(t.rules) == {"start": lit("a")}
    assert language(t) == language(g) == {"a"}


def test_empty_language_is_an_error() -> None:
    g = Grammar({"start": seq(lit("a"), Ref("start"))})
    with pytest.raises(EmptyLanguageError):
        remove_unproductive(g)


def test_nullable_rules_by_hand() -> None:
    g = Grammar(
        {
            "start": seq(Ref("opt"), Ref("many")),
            "opt": repeat(lit("a"), 0, 1),
            "many": choice(Ref("start"), lit("b"), seq()),
            "circ": Ref("circ2"),  # only derives itself: neither nullable nor productive
            "circ2": Ref("circ"),
            "never": chars(()),
        }
    )
    assert nullable_rules(g) == {"start", "opt", "many"}
    assert productive_rules(g) == {"start", "opt", "many"}
    assert "never" not in productive_rules(g)
    assert not any(
        r.name == "never" for e in remove_unproductive(g).rules.values() for r in iter_refs(e)
    )


@pytest.mark.parametrize("cls", [ANY_CHAR, chars([])], ids=["any", "none"])
@pytest.mark.parametrize("words", [("",), ("", "a"), ("a",), ("ab", "b")], ids=str)
def test_an_excluding_leaf_is_nullable_and_productive_as_its_expansion(words: tuple,
                                                                       cls: CharClass) -> None:
    leaf = Excluding(words, cls)
    assert nullable(leaf) == nullable(expand_excluding(leaf)) == ReferenceRecognizer(
        Grammar.single(leaf)).accepts("")
    expanded = productive_rules(Grammar.single(seq(lit("<"), expand_excluding(leaf))))
    assert productive_rules(Grammar.single(seq(lit("<"), leaf))) == expanded
    assert expanded == (set() if cls.is_empty and "" in words else {"start"})
