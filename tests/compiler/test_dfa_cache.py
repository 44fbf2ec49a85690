"""The terminal DFA cache: packed storage round-trips, keys are structural, the bound holds, and
terminals composed from cached parts equal the lexer's direct construction (the oracle)."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grammarsd.compiler.dfa_cache as dfa_cache
from grammarsd.compiler.dfa_cache import DfaCache, PackedDfa, fingerprint
from grammarsd.compiler.lexer import ByteDFA, build_byte_dfa
from grammarsd.errors import GrammarTooLargeError
from grammarsd.grammar._canonical import canonical
from grammarsd.grammar.automata import CharDFA
from grammarsd.grammar.encodings import encode_class
from grammarsd.grammar.ir import (
    ANY_CHAR,
    Capped,
    Choice,
    Decoding,
    Excluding,
    Expr,
    Literal,
    Ref,
    Repeat,
    Seq,
    char_set,
    chars,
)
from grammarsd.grammar.regex import parse_regex


@pytest.fixture(autouse=True)
def _direct(monkeypatch: pytest.MonkeyPatch) -> None:
    """The direct construction unless a test asks for composition."""
    monkeypatch.setattr(dfa_cache, "COMPOSE", "never")

PATTERNS = ["[a-z]+@[0-9]{2,5}\u00e9", "(ab|cd)*x?", "[\u0080-\U0010ffff]{1,3}", "\\d+(\\.\\d+)?"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_packing_round_trips(pattern: str) -> None:
    dfa = build_byte_dfa(parse_regex(pattern), nonempty=True)
    packed = PackedDfa.pack(dfa)
    back = packed.unpack()
    assert np.array_equal(back.trans, dfa.trans) and np.array_equal(back.accept, dfa.accept)
    assert packed.table.shape[1] == len({dfa.trans[:, b].tobytes() for b in range(256)})
    assert packed.nbytes < dfa.trans.nbytes


@pytest.mark.parametrize("expr", [
    *(parse_regex(p) for p in PATTERNS),
    Excluding(("id", "name", "n\u00e9"), chars([(0x20, 0x10FFFF)])),  # a key complement
    Seq((Literal('"'), Excluding(("a",), chars([(0x61, 0x7A)])), Literal('"'))),
    Choice(()),  # the empty language: one state
], ids=lambda e: str(e)[:24])
def test_the_minimisers_classes_are_packings_own(expr: Expr) -> None:
    """``_finish`` hands the DFA cache the byte classes it found; they must be exactly what
    packing the table finds (classes numbered by first occurrence of each distinct column)."""
    dfa = build_byte_dfa(expr)
    assert dfa.packed is not None
    classes, table = dfa.packed
    first_seen: dict[bytes, int] = {}
    expected = [first_seen.setdefault(dfa.trans[:, b].tobytes(), len(first_seen))
                for b in range(256)]
    assert classes.tolist() == expected
    # the byte table written out from the packing is canonical: minimising it again is a no-op
    assert np.array_equal(canonical(np.ascontiguousarray(dfa.trans), dfa.accept)[0], dfa.trans)
    repacked = PackedDfa.pack(ByteDFA(dfa.trans, dfa.accept))  # found from the table alone
    assert np.array_equal(repacked.classes, classes) and np.array_equal(repacked.table, table)


def _expr(n: int) -> Expr:
    """Built afresh on every call: equal structure, distinct objects."""
    tail = Choice((Literal("z"), Seq((Literal("y"), Repeat(chars([(97, 99)]), 0, n)))))
    return Seq((Literal("k"), tail, tail))


def test_equal_structure_shares_an_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[Expr] = []

    def counting(expr: Expr, **kwargs: object) -> object:
        built.append(expr)
        return build_byte_dfa(expr, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(dfa_cache, "build_byte_dfa", counting)
    cache = DfaCache()
    first = cache.get(_expr(3), 1_000).unpack()
    again = cache.get(_expr(3), 1_000).unpack()
    other = cache.get(_expr(4), 1_000).unpack()  # negative control: one bound differs
    assert len(built) == 2
    assert np.array_equal(first.trans, again.trans)
    assert first.num_states != other.num_states
    assert again.matches(b"kyabcz") and not again.matches(b"kyabcaz")


@pytest.mark.parametrize("text", ["", "a", '"key"', "\u00e9\u20ac\U0001f600", "\x00\x7f"])
def test_a_literal_part_is_the_part_of_its_dfa(text: str) -> None:
    """Literal parts are spelled without a table; the oracle reads the lexer's DFA."""
    fast = dfa_cache._Part.literal(text)
    slow = dfa_cache._Part.of(build_byte_dfa(Literal(text)))
    assert fast is not None and (fast.num_states, fast.finals) == (slow.num_states, slow.finals)
    for a, b in zip((fast.src, fast.lo, fast.hi, fast.tgt), (slow.src, slow.lo, slow.hi, slow.tgt),
                    strict=True):
        assert np.array_equal(a, b) and a.dtype == b.dtype
    assert dfa_cache._Part.literal("\ud800") is None  # a lone surrogate: the lexer's business


def test_a_variant_is_built_from_its_rewrite_and_rewritten_only_on_a_miss() -> None:
    rewrites: list[Expr] = []

    def star(expr: Expr) -> Expr:  # a stand-in for the tables' opened whitespace gaps
        rewrites.append(expr)
        assert isinstance(expr, Repeat)
        return Repeat(expr.item, expr.min, None)

    def touches(expr: Expr) -> bool:
        return isinstance(expr, Repeat)

    variant = dfa_cache.Variant(b"star", star, touches)
    cache = DfaCache()
    bounded = Repeat(Literal("ab"), 1, 2)
    opened = cache.get(bounded, 1_000, variant=variant).unpack()
    again = cache.get(Repeat(Literal("ab"), 1, 2), 1_000, variant=variant).unpack()
    assert len(rewrites) == 1  # the second lookup hit: no rewrite
    assert np.array_equal(opened.trans, again.trans)
    assert opened.matches(b"ababab")  # the rewrite's language, not the expression's
    plain = cache.get(bounded, 1_000).unpack()  # negative control: no variant, no rewrite
    assert len(rewrites) == 1 and not plain.matches(b"ababab") and plain.matches(b"abab")


def test_an_expression_a_variant_leaves_alone_shares_its_plain_dfa() -> None:
    def never(expr: Expr) -> Expr:
        raise AssertionError("an untouched expression is not rewritten")

    cache = DfaCache()
    text = Seq((Literal("x"), Repeat(Literal("ab"), 1, 2), Literal("y")))
    plain = cache.get(text, 1_000)
    shared = cache.get(text, 1_000, variant=dfa_cache.Variant(b"never", never, lambda e: False))
    assert shared is plain  # one cache entry: no second build, no rewrite
    other = cache.get(text, 1_000, variant=dfa_cache.Variant(b"x", lambda e: e, lambda e: True))
    assert other is not plain  # negative control: what a variant touches has its own entry


def testfingerprints_separate_what_differs() -> None:
    exprs: list[Expr] = [Literal("ab"), Literal("ba"), chars([(97, 98)]), Ref("ab"),
                         Repeat(Literal("ab"), 0, 2), Repeat(Literal("ab"), 0, None),
                         Capped(Literal("ab"), 2), Seq((Literal("a"), Literal("b"))),
                         Choice((Literal("a"), Literal("b"))),
                         Excluding(("a", "b"), ANY_CHAR), Excluding(("a\x00b",), ANY_CHAR),
                         Excluding(("a", "b"), chars([(97, 98)])),
                         Decoding(CharDFA.from_expr(Literal("ab"))),
                         Decoding(CharDFA.from_expr(Literal("ba")))]
    digests = {fingerprint(e) for e in exprs}
    assert len(digests) == len(exprs)
    assert fingerprint(_expr(3)) == fingerprint(_expr(3))


def test_byte_bound_evicts_least_recently_used() -> None:
    cache = DfaCache(max_bytes=1)
    cache.get(parse_regex("a+"), 1_000)
    cache.get(parse_regex("b+"), 1_000)
    assert len(cache._items) == 1  # only the newest stays, whatever its size
    roomy = DfaCache()
    for pattern in PATTERNS:
        roomy.get(parse_regex(pattern), 1_000)
    assert len(roomy._items) == len(PATTERNS)
    assert roomy._bytes == sum(p.nbytes for p in roomy._items.values())


# --------------------------------------------------------------------------- composition

WS = Repeat(char_set(" \t\n\r"), 0, None)
URI_BODY = Seq((encode_class(chars([(ord("a"), ord("z"))])),
                Repeat(encode_class(ANY_CHAR), 0, None)))  # JSON string content
KEY_BODY = Choice((Seq(()), Seq((encode_class(chars([(ord("a"), ord("a"))])),
                                Repeat(encode_class(chars([(ord("b"), ord("z"))])), 0, 3)))))


def _quoted(body: Expr) -> Expr:
    return Seq((Literal('"'), body, Literal('"')))


def _prop(key: str, value: Expr) -> Expr:
    return Seq((WS, Literal(","), WS, Literal(f'"{key}"'), WS, Literal(":"), WS, value))


def _same(a: PackedDfa, b: PackedDfa) -> bool:
    x, y = a.unpack(), b.unpack()
    return x.trans.shape == y.trans.shape and bool((x.trans == y.trans).all()) and bool(
        (x.accept == y.accept).all())


def _direct_dfa(expr: Expr) -> PackedDfa:
    return PackedDfa.pack(build_byte_dfa(expr, nonempty=True, max_states=50_000))


SHAPES: list[Expr] = [
    _prop("homepage", _quoted(URI_BODY)),
    Choice((Seq((WS, Literal("}"))), _prop("a", _quoted(URI_BODY)), _prop("b", Literal("null")))),
    Seq((_quoted(KEY_BODY), WS, Literal(":"), WS)),
    Choice((Repeat(_prop("x", Literal("1")), 0, 7),
            Seq((Repeat(_prop("x", Literal("1")), 8, 8), Repeat(_prop("x", Literal("1")), 0, 4))))),
    Seq((Literal("["), WS, Repeat(Seq((Literal("ab"), Repeat(Literal("c"), 1, None))), 2, 5))),
    Seq((Repeat(Literal("a"), 0, None), Literal("b"), Repeat(Literal("a"), 0, None))),
    Seq((Literal("é€😀"), Choice((Seq(()), Literal("\u00e9"))), Repeat(ANY_CHAR, 0, 2))),
]


@pytest.mark.parametrize("expr", SHAPES)
def test_composed_terminal_equals_the_direct_construction(
        expr: Expr, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dfa_cache, "COMPOSE", "always")
    composed = DfaCache().get(expr, 50_000)
    assert _same(composed, _direct_dfa(expr))
    assert not composed.accept[0]  # nonempty: the terminal never matches ""


def test_composing_leaves_nothing_to_the_cyclic_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    """A composition's NFA is freed when it is done: a self-referencing closure kept it (~4.6k
    objects per compile on MaskBench schemas) until the cyclic collector ran and walked it."""
    monkeypatch.setattr(dfa_cache, "COMPOSE", "always")
    for expr in SHAPES:  # first calls compile (or load) kernels, which leaves cycles of its own
        DfaCache().get(expr, 50_000)
    cache = DfaCache()
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for expr in SHAPES:
            cache.get(expr, 50_000)
        gc.collect()
        left = len(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert left == 0


_LEAVES: list[Expr] = [Literal("a"), Literal("ab"), Literal('"'), Literal(""), char_set("ab"), WS,
           _quoted(URI_BODY), KEY_BODY, encode_class(chars([(ord("a"), ord("c"))]))]


def _trees(depth: int) -> st.SearchStrategy[Expr]:
    leaf = st.sampled_from(_LEAVES)
    if depth == 0:
        return leaf
    sub = _trees(depth - 1)
    trees: st.SearchStrategy[Expr] = st.one_of(
        leaf,
        st.lists(sub, min_size=0, max_size=4).map(lambda xs: Seq(tuple(xs))),
        st.lists(sub, min_size=1, max_size=3).map(lambda xs: Choice(tuple(xs))),
        st.tuples(sub, st.integers(0, 3), st.one_of(st.none(), st.integers(0, 3))).map(
            lambda t: Repeat(t[0], min(t[1], t[2] if t[2] is not None else t[1]), t[2])),
    )
    return trees


@settings(max_examples=120, deadline=None)
@given(expr=_trees(3))
def test_composed_random_trees_equal_the_direct_construction(expr: Expr) -> None:
    dfa_cache.COMPOSE = "always"
    try:
        composed = DfaCache().get(expr, 50_000)
    finally:
        dfa_cache.COMPOSE = "never"
    assert _same(composed, _direct_dfa(expr))


def _watched_cache(monkeypatch: pytest.MonkeyPatch) -> tuple[DfaCache, list[Expr]]:
    """A fresh cache under ``COMPOSE = "reused"``, and the terminals it composes."""
    monkeypatch.setattr(dfa_cache, "COMPOSE", "reused")
    composed: list[Expr] = []
    cache = DfaCache()
    real = cache._compose

    def spy(expr: Expr, max_states: int, flat: dict[int, bool]) -> object:
        composed.append(expr)
        return real(expr, max_states, flat)

    monkeypatch.setattr(cache, "_compose", spy)
    return cache, composed


def _unjoined(key: str, value: Expr) -> Expr:
    """A member with a gap after its value: the gap alone is no chain (it spells no byte), so
    the member is not glued (``DfaCache._sequence``) but composed or built directly."""
    return Seq((_prop(key, value), WS))


def test_reused_string_parts_turn_composition_on(monkeypatch: pytest.MonkeyPatch) -> None:
    cache, composed = _watched_cache(monkeypatch)
    first, second, third = (_unjoined(k, _quoted(URI_BODY)) for k in ("a", "b", "c"))
    own_key = Seq((_quoted(KEY_BODY), WS, Literal(":")))
    for expr in (first, own_key, second, third):
        assert _same(cache.get(expr, 50_000), _direct_dfa(expr))
    # the URI string is new in ``first`` (built inside it), met again in ``second``
    assert composed == [second, third]


def test_a_small_terminal_without_string_parts_is_composed_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Over cached literal and whitespace parts a member's comma, key and colon cost less than
    the direct construction; a long chain of them does not (``COMPOSE_PLAIN_NODES``)."""
    cache, composed = _watched_cache(monkeypatch)
    small = _unjoined("k", Choice((Literal("true"), Literal("false"))))
    chain = Seq(tuple(x for i in range(dfa_cache.COMPOSE_PLAIN_NODES)
                      for x in (WS, Literal(f'"k{i}":'))))
    for expr in (small, chain):
        assert _same(cache.get(expr, 50_000), _direct_dfa(expr))
    assert composed == [small]


def test_a_key_complement_part_is_built_from_its_trie_when_first_met(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Built from its trie, the part is cheaper than reading it inside the whole terminal: the
    member is that part glued to its colon's chain, nothing composed."""
    cache, composed = _watched_cache(monkeypatch)
    joins = _watched_joins(monkeypatch)
    member = Seq((_quoted(Excluding(("id", "name", "\u00e9"), ANY_CHAR)), WS, Literal(":")))
    assert _same(cache.get(member, 50_000), _direct_dfa(member))
    assert composed == [] and joins == [True]


def test_composition_keeps_the_state_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dfa_cache, "COMPOSE", "always")
    many = Seq(tuple(Literal(f"k{i}") for i in range(200)))  # ~600 NFA states
    with pytest.raises(GrammarTooLargeError):
        DfaCache().get(many, 300)
    assert DfaCache().get(many, 5_000).num_states == _direct_dfa(many).num_states


def _watched_joins(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Under ``COMPOSE = "reused"``, whether each attempted glue (``dfa_cache._glue``)
    succeeded."""
    monkeypatch.setattr(dfa_cache, "COMPOSE", "reused")
    joins: list[bool] = []
    real = dfa_cache._glue

    def spy(pieces: list[object], max_states: int) -> object:
        out = real(pieces, max_states)  # type: ignore[arg-type]
        joins.append(out is not None)
        return out

    monkeypatch.setattr(dfa_cache, "_glue", spy)
    return joins


@pytest.mark.parametrize("value", [Literal("null"), _quoted(URI_BODY),
                                   Choice((Literal("true"), Literal("false")))])
def test_a_comma_variant_is_joined_to_its_member(monkeypatch: pytest.MonkeyPatch,
                                                 value: Expr) -> None:
    """``ws "," ws member`` built after ``member``: the member's DFA behind the comma's."""
    joins = _watched_joins(monkeypatch)
    member = Seq((Literal('"k"'), WS, Literal(":"), WS, value))
    cache = DfaCache()
    cache.get(member, 50_000)
    built = len(joins)  # the member: a chain, or its key's chain joined to the value
    led = Seq((WS, Literal(","), WS, member))
    assert _same(cache.get(led, 50_000), _direct_dfa(led))
    assert joins[built:] == [True]
    alone = Seq((WS, Literal(","), WS, Seq((Literal('"j"'), WS, Literal(":"), WS, value))))
    assert _same(cache.get(alone, 50_000), _direct_dfa(alone))
    # no member built: the comma, key and colon are one chain joined to the value (no join
    # where the value is a literal: all of it is one chain)
    assert joins[built + 1:] == ([] if isinstance(value, Literal) else [True])


_DIGITS = chars([(ord("0"), ord("9"))])
MEMBER_VALUES = [  # (value, joined after the chain of key and colon)
    (_quoted(URI_BODY), True),
    (Choice((Literal("true"), Literal("false"))), True),
    (Seq((Repeat(Literal("-"), 0, 1), Repeat(_DIGITS, 1, None))), True),
    (Literal("null"), False),  # all of it a chain
    (Repeat(_DIGITS, 0, 3), False),  # a chain too, as far as the shape goes
    (Choice((Seq(()), Literal("x"))), False),  # derives the empty string
]


@pytest.mark.parametrize(("value", "joined"), MEMBER_VALUES)
def test_a_member_is_its_key_chain_joined_to_its_value(
        monkeypatch: pytest.MonkeyPatch, value: Expr, joined: bool) -> None:
    joins = _watched_joins(monkeypatch)
    cache = DfaCache()
    for key in ("a", "b"):
        member = Seq((Literal(f'"{key}"'), WS, Literal(":"), WS, value))
        assert _same(cache.get(member, 50_000), _direct_dfa(member))
    assert joins == [True, True] if joined else joins == []
    if joined:  # the value was built once, as a terminal of its own, and found the second time
        assert _same(cache.get(value, 50_000), _direct_dfa(value))
        assert ("terminal", fingerprint(value), 50_000) in cache._items


def test_a_member_after_a_key_that_is_no_chain_glues_the_key_dfa(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An other key (a key complement) is a piece of its own, like a value."""
    joins = _watched_joins(monkeypatch)
    member = Seq((_quoted(Excluding(("id",), ANY_CHAR)), WS, Literal(":"), WS, _quoted(URI_BODY)))
    assert _same(DfaCache().get(member, 50_000), _direct_dfa(member))
    assert joins == [True]


def test_an_object_of_members_is_glued_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nested sequences (a member, the rest of the object after it) are spliced: their chains
    and values are glued in one kernel; a member met before is one piece."""
    joins = _watched_joins(monkeypatch)
    cache = DfaCache()

    def member(key: str, value: Expr) -> Expr:
        return Seq((Literal(f'"{key}"'), WS, Literal(":"), WS, value))

    digits = Seq((Repeat(Literal("-"), 0, 1), Repeat(_DIGITS, 1, None)))  # one piece: nullable
    rest = Seq((WS, Literal(","), WS, member("b", digits), WS, Literal("}")))
    obj = Seq((Literal("{"), WS, member("a", _quoted(URI_BODY)), rest))
    assert _same(cache.get(obj, 50_000), _direct_dfa(obj))
    assert joins == [True]  # the digits and the URI string are built on their own, not glued
    cache.get(member("c", _quoted(URI_BODY)), 50_000)
    again = Seq((Literal("["), WS, member("c", _quoted(URI_BODY)), WS, Literal("]")))
    assert _same(cache.get(again, 50_000), _direct_dfa(again))
    assert joins == [True, True, True]  # member c, then "[" ws, c and ws "]"


def test_an_optional_last_member_is_the_union_of_its_alternatives(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``ws "}" | ws "," ws member ws "}"``: a chain and a glued sequence, united; nothing
    composed. An enum past ``UNION_MAX`` alternatives is composed as before."""
    cache, composed = _watched_cache(monkeypatch)
    close = Seq((WS, Literal("}")))
    member = Seq((Literal('"n"'), WS, Literal(":"), WS, _quoted(URI_BODY)))
    tail = Choice((close, Seq((WS, Literal(","), WS, member, close))))
    assert _same(cache.get(tail, 50_000), _direct_dfa(tail))
    boolean = Choice((Seq(()), Literal("true"), Literal("false")))  # the empty word left out
    assert _same(cache.get(boolean, 50_000), _direct_dfa(boolean))
    assert composed == []
    enum = Choice(tuple(Literal(f'"v{i}"') for i in range(dfa_cache.UNION_MAX + 1)))
    assert _same(cache.get(enum, 50_000), _direct_dfa(enum))
    assert composed == [enum]


def test_a_join_that_would_not_be_deterministic_is_left_to_composition(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The head's accepting state goes on reading ``a``, which the tail starts with."""
    joins = _watched_joins(monkeypatch)
    tail = Seq((Literal("a"), Literal("b")))
    cache = DfaCache()
    cache.get(tail, 1_000)
    expr = Seq((Literal("x"), Repeat(chars([(ord("a"), ord("a"))]), 0, None), tail))
    assert _same(cache.get(expr, 1_000), _direct_dfa(expr))
    assert joins == [False]


def test_a_nullable_head_is_not_joined(monkeypatch: pytest.MonkeyPatch) -> None:
    joins = _watched_joins(monkeypatch)
    member = Seq((Literal('"k"'), WS, Literal(":"), WS, Literal("1")))
    cache = DfaCache()
    cache.get(member, 1_000)
    expr = Seq((WS, Repeat(Literal(","), 0, 1), WS, member))  # the comma may be missing
    assert _same(cache.get(expr, 1_000), _direct_dfa(expr))
    assert joins == []


CHAINS = [  # (expression, spelled as a chain)
    (Seq((Literal('"key"'), WS, Literal(":"), WS)), True),
    (Seq((WS, Literal(","), WS)), True),
    (Seq((Literal("{"), WS, WS, Literal("}"))), True),  # one loop twice: still one loop
    (Seq((Literal("\u00e9t\u00e9"), Repeat(_DIGITS, 0, None), Seq((Literal("x"), WS)))), True),
    (Seq((WS, Literal(" a"))), False),  # the loop holds the byte after it
    (Seq((Literal("a"), WS, Repeat(_DIGITS, 0, None), Literal("b"))), False),  # a* b*
    (Seq((Literal("a"), Repeat(chars([(0xE9, 0xE9)]), 0, None))), False),  # not one byte each
    (Seq((WS, WS)), False),  # no byte: only the empty string and loops
]


@pytest.mark.parametrize(("expr", "chained"), CHAINS)
def test_a_chain_is_spelled_directly_and_equals_the_direct_construction(
        expr: Expr, chained: bool) -> None:
    chain = dfa_cache._chain(expr)
    assert (chain is not None) == chained
    if chain is not None:
        assert _same(chain, _direct_dfa(expr))  # canonical as it stands
