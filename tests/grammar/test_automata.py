"""CharDFA against independent oracles: Python's ``re`` on random regular IR built side by side
with an equivalent regex string, and membership laws for the Boolean algebra."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grammarsd.errors import GrammarError, GrammarTooLargeError
from grammarsd.grammar import _canonical
from grammarsd.grammar.automata import CharDFA, _atom_bounds, _Nfa
from grammarsd.grammar.ir import (
    ANY_CHAR,
    EMPTY,
    NOTHING,
    CharClass,
    Choice,
    Expr,
    Literal,
    Ref,
    Repeat,
    Seq,
    char_set,
    chars,
    choice,
    lit,
    repeat,
    seq,
)

# 1-, 2-, 3- and 4-byte characters, so atoms straddle every UTF-8 length
ALPHABET = "ab\u00e9\u20ac\U0001f600"
EXTRA = "cz\x00\u07ff\uffff\U0010ffff"


def _rx_char(cp: int) -> str:
    return f"\\U{cp:08x}"


# (IR, equivalent Python regex) leaves, written independently of each other
CLASS_LEAVES: list[tuple[Expr, str]] = [
    (chars([(ord("a"), ord("b"))]), "[ab]"),
    (char_set("a").negate(), "[^a]"),
    (chars([(0xE9, 0x20AC)]), f"[{_rx_char(0xE9)}-{_rx_char(0x20AC)}]"),
    (ANY_CHAR, "(?s:.)"),
    (chars([(0x80, 0x10FFFF)]), f"[{_rx_char(0x80)}-{_rx_char(0x10FFFF)}]"),
    (chars([(ord("b"), ord("b")), (0x1F600, 0x1F600)]), f"[b{_rx_char(0x1F600)}]"),
]


@st.composite
def regular(draw: st.DrawFn, depth: int = 3) -> tuple[Expr, str]:
    """A random regular IR expression and an equivalent Python regex, built side by side."""
    kind = draw(st.sampled_from(["lit", "class"] + (["seq", "alt", "rep"] * 2 if depth else [])))
    if kind == "lit":
        text = draw(st.text(alphabet=ALPHABET, max_size=3))
        return Literal(text), "(?:" + re.escape(text) + ")"
    if kind == "class":
        return draw(st.sampled_from(CLASS_LEAVES))
    parts = draw(st.lists(regular(depth - 1), min_size=0 if kind == "alt" else 1, max_size=3))
    if kind == "seq":
        return Seq(tuple(e for e, _ in parts)), "".join(f"(?:{r})" for _, r in parts)
    if kind == "alt":
        if not parts:
            return NOTHING, "(?!)"
        return Choice(tuple(e for e, _ in parts)), "(?:" + "|".join(r for _, r in parts) + ")"
    lo = draw(st.integers(0, 2))
    hi = draw(st.one_of(st.none(), st.integers(lo, lo + 2)))
    item, rx = parts[0]
    bound = f"{{{lo},}}" if hi is None else f"{{{lo},{hi}}}"
    return Repeat(item, lo, hi), f"(?:{rx}){bound}"


def sample_member(expr: Expr, rng: random.Random) -> str | None:
    """A random member of ``expr`` straight from the IR (None for the empty language)."""
    if isinstance(expr, Literal):
        return expr.text
    if isinstance(expr, CharClass):
        if not expr.ranges:
            return None
        a, b = rng.choice(expr.ranges)
        return chr(rng.randint(a, b))
    if isinstance(expr, Seq):
        out = [sample_member(i, rng) for i in expr.items]
        return None if any(o is None for o in out) else "".join(o for o in out if o)
    if isinstance(expr, Choice):
        options = [o for o in (sample_member(i, rng) for i in expr.items) if o is not None]
        return rng.choice(options) if options else None
    assert isinstance(expr, Repeat)
    count = rng.randint(expr.min, expr.min + 2 if expr.max is None else expr.max)
    out = [sample_member(expr.item, rng) for _ in range(count)]
    return None if any(o is None for o in out) else "".join(o for o in out if o)


def to_re(expr: Expr) -> str:
    """Test-side printer of IR as a Python regex (for checking ``to_expr`` output)."""
    if isinstance(expr, Literal):
        return "(?:" + re.escape(expr.text) + ")"
    if isinstance(expr, CharClass):
        if not expr.ranges:
            return "(?!)"
        return "[" + "".join(f"{_rx_char(a)}-{_rx_char(b)}" for a, b in expr.ranges) + "]"
    if isinstance(expr, Seq):
        return "".join(to_re(i) for i in expr.items)
    if isinstance(expr, Choice):
        return "(?:" + "|".join(to_re(i) for i in expr.items) + ")" if expr.items else "(?!)"
    assert isinstance(expr, Repeat)
    hi = "" if expr.max is None else str(expr.max)
    return f"(?:{to_re(expr.item)}){{{expr.min},{hi}}}"


random_strings = st.lists(st.text(alphabet=ALPHABET + EXTRA, max_size=6), max_size=25)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _samples(expr: Expr, extra: list[str], seed: int) -> list[str]:
    rng = random.Random(seed)
    members = [sample_member(expr, rng) for _ in range(10)]
    return extra + [m for m in members if m is not None] + [""]


def _same_language(d1: CharDFA, d2: CharDFA) -> bool:
    return d1.difference(d2).is_empty() and d2.difference(d1).is_empty()


# --------------------------------------------------------------------------- membership


@FAST
@given(pair=regular(), strings=random_strings, seed=st.integers(0, 2**16))
def test_matches_agrees_with_re(pair: tuple[Expr, str], strings: list[str], seed: int) -> None:
    expr, rx = pair
    dfa = CharDFA.from_expr(expr)
    pattern = re.compile(rx)
    for s in _samples(expr, strings, seed):
        assert dfa.matches(s) == bool(pattern.fullmatch(s)), (str(expr), rx, s)
    assert dfa.accepts_empty() == bool(pattern.fullmatch(""))


@FAST
@given(shared=regular(2), a=regular(1), b=regular(1), strings=random_strings,
       seed=st.integers(0, 2**16))
def test_shared_subexpressions_agree_with_re(
    shared: tuple[Expr, str], a: tuple[Expr, str], b: tuple[Expr, str], strings: list[str],
    seed: int,
) -> None:
    # one object X used at several places that end at the same NFA state (the tails of a
    # choice, a repeat body), next to places that do not; the regex spells X out each time
    (x, rx), (ea, ra), (eb, rb) = shared, a, b
    expr = Choice((Seq((ea, x)), Seq((eb, x)), x, Repeat(Seq((x, ea)), 0, None),
                   Seq((Choice((Seq((ea, x)), x)), eb))))
    regex = (f"(?:(?:{ra})(?:{rx})|(?:{rb})(?:{rx})|(?:{rx})|(?:(?:{rx})(?:{ra}))*"
             f"|(?:(?:{ra})(?:{rx})|(?:{rx}))(?:{rb}))")
    dfa = CharDFA.from_expr(expr)
    pattern = re.compile(regex)
    for s in _samples(expr, strings, seed):
        assert dfa.matches(s) == bool(pattern.fullmatch(s)), (str(expr), regex, s)


def test_shared_tails_are_built_once() -> None:
    # "the rest after item i" referenced by two items before it: 2**40 paths as a tree, far
    # past the NFA limit, but one copy per item as a DAG. Words: "x0" or "y0", then "x1" or
    # "y1", ... stopping anywhere.
    rest: Expr = EMPTY
    for i in reversed(range(40)):
        rest = Choice((EMPTY, Seq((lit(f"x{i % 10}"), rest)), Seq((lit(f"y{i % 10}"), rest))))
    dfa = CharDFA.from_expr(rest, max_states=1_000)

    def member(word: str) -> bool:
        pairs = [word[k:k + 2] for k in range(0, len(word), 2)]
        return len(word) <= 80 and all(
            len(p) == 2 and p[0] in "xy" and p[1] == str(k % 10) for k, p in enumerate(pairs))

    rng = random.Random(5)
    words = ["", "x0", "y0x1", "x0x0", "x1", "y0y1y2y3y4y5y6y7y8y9x0"] + [
        "".join(rng.choice("xy") + rng.choice(["0", "1", str(k % 10)])
                for k in range(rng.randint(0, 12))) for _ in range(200)]
    for word in words:
        assert dfa.matches(word) == member(word), word



def _nfa_graph(expr: Expr, stamp_min: int, limit: int = 100_000) -> tuple[int, list, list]:
    """The Thompson NFA of ``expr`` with repeats stamped from ``stamp_min`` work: (states,
    sorted epsilon edges, sorted character edges)."""
    nfa = _Nfa(_atom_bounds(expr), limit)
    nfa.STAMP_MIN = stamp_min
    nfa.share(expr)
    nfa.build(expr, nfa.new(), nfa.new())
    eps = np.concatenate([np.array(nfa.eps, np.int64).reshape(-1, 2), *nfa.eps_blocks])
    edges = np.concatenate([np.array(nfa.edges, np.int64).reshape(-1, 4), *nfa.edge_blocks])
    return nfa.size, sorted(map(tuple, eps.tolist())), sorted(map(tuple, edges.tolist()))


@FAST
@given(pair=regular(2), other=regular(1), low=st.integers(0, 3), extra=st.integers(0, 4))
def test_stamped_repeats_build_the_same_nfa(pair: tuple[Expr, str], other: tuple[Expr, str],
                                            low: int, extra: int) -> None:
    # copies stamped from the first one are the copies built one by one, state for state,
    # also with a shared node inside the repeated item and nested repeats
    (x, _), (y, _) = pair, other
    item = Choice((Seq((x, y)), Seq((y, x)), Repeat(Seq((x, y)), 1, 3)))
    expr = Seq((Repeat(item, low, low + extra), Repeat(item, 2, None), x))
    assert _nfa_graph(expr, 0) == _nfa_graph(expr, 10**9)


def test_stamped_repeats_keep_the_nfa_limit() -> None:
    expr = repeat(seq(lit("ab"), char_set("xyz")), 0, 50)
    size = _nfa_graph(expr, 10**9)[0]
    assert _nfa_graph(expr, 0, limit=size)[0] == size
    for stamp_min in (0, 10**9):
        with pytest.raises(GrammarTooLargeError) as info:
            _nfa_graph(expr, stamp_min, limit=size - 1)
        assert (info.value.limit, info.value.maximum) == ("nfa_states", size - 1)


@FAST
@given(a=regular(), b=regular(), strings=random_strings, seed=st.integers(0, 2**16))
def test_boolean_algebra_by_membership(
    a: tuple[Expr, str], b: tuple[Expr, str], strings: list[str], seed: int
) -> None:
    da, db = CharDFA.from_expr(a[0]), CharDFA.from_expr(b[0])
    ra, rb = re.compile(a[1]), re.compile(b[1])
    inter, union, diff, comp = da.intersect(db), da.union(db), da.difference(db), da.complement()
    for s in _samples(a[0], strings, seed) + _samples(b[0], [], seed + 1):
        in_a, in_b = bool(ra.fullmatch(s)), bool(rb.fullmatch(s))
        assert inter.matches(s) == (in_a and in_b), s
        assert union.matches(s) == (in_a or in_b), s
        assert diff.matches(s) == (in_a and not in_b), s
        assert comp.matches(s) == (not in_a), s


@FAST
@given(pair=regular(), strings=random_strings, seed=st.integers(0, 2**16))
def test_to_expr_round_trip(pair: tuple[Expr, str], strings: list[str], seed: int) -> None:
    expr, rx = pair
    dfa = CharDFA.from_expr(expr)
    back = dfa.to_expr()
    assert _same_language(CharDFA.from_expr(back), dfa)
    pattern, printed = re.compile(rx), re.compile(to_re(back))
    for s in _samples(expr, strings, seed):
        assert bool(printed.fullmatch(s)) == bool(pattern.fullmatch(s)), (str(back), s)


@FAST
@given(pair=regular())
def test_complement_is_an_involution_and_partitions(pair: tuple[Expr, str]) -> None:
    dfa = CharDFA.from_expr(pair[0])
    comp = dfa.complement()
    assert comp.complement() == dfa
    assert dfa.intersect(comp).is_empty()
    assert dfa.union(comp) == CharDFA.from_expr(repeat(ANY_CHAR))


# --------------------------------------------------------------------------- fixed cases


MINIMAL_SIZES = {
    "literal": (lit("abc"), 4),
    "a*a == a+": (seq(repeat(lit("a")), lit("a")), 2),
    "[a-z]{1,1000}": (repeat(chars([(97, 122)]), 1, 1000), 1001),
    "(a|b)*a(a|b){3}": (seq(repeat(char_set("ab")), lit("a"), repeat(char_set("ab"), 3, 3)), 16),
    "empty string": (EMPTY, 1),
    "nothing": (NOTHING, 1),
}


@pytest.mark.parametrize("name", list(MINIMAL_SIZES))
def test_minimal_state_counts(name: str) -> None:
    # the minimal DFA sizes of these languages are textbook facts (n+1 for a chain of n,
    # 2**(k+1) for "k+1-th symbol from the end is a")
    expr, size = MINIMAL_SIZES[name]
    assert CharDFA.from_expr(expr).num_states == size


def test_equivalent_expressions_give_equal_automata() -> None:
    a = CharDFA.from_expr(seq(repeat(lit("a")), lit("a")))
    b = CharDFA.from_expr(repeat(lit("a"), 1))
    assert a == b and hash(a) == hash(b)
    assert a != CharDFA.from_expr(repeat(lit("a")))


def test_large_bounded_repeats_stay_small() -> None:
    az = chars([(97, 122)])
    dfa = CharDFA.from_expr(repeat(az, 1, 1000))
    both = dfa.intersect(CharDFA.from_expr(repeat(ANY_CHAR, 0, 500)))
    back = CharDFA.from_expr(both.to_expr())
    assert dfa.num_states == 1001
    assert back == both and both.num_states == 501
    assert both.matches("q" * 500) and not both.matches("q" * 501) and not both.matches("")


def test_empty_language_and_emptiness() -> None:
    assert CharDFA.from_expr(NOTHING).is_empty()
    assert CharDFA.empty_language() == CharDFA.from_expr(NOTHING)
    disjoint = CharDFA.from_expr(lit("a")).intersect(CharDFA.from_expr(lit("b")))
    assert disjoint.is_empty() and not disjoint.accepts_empty()
    eps = CharDFA.from_expr(EMPTY)
    assert not eps.is_empty() and eps.accepts_empty() and eps.matches("")
    assert eps.to_expr() == EMPTY and CharDFA.from_expr(NOTHING).to_expr() == NOTHING


def test_surrogates_are_never_members() -> None:
    everything = CharDFA.from_expr(repeat(ANY_CHAR)).union(CharDFA.from_expr(lit("x")))
    assert not everything.matches("\ud800") and not everything.matches("a\udfff")
    assert not CharDFA.from_expr(NOTHING).complement().matches("\udbff")
    assert CharDFA.from_expr(choice(lit("\ud800"), lit("y"))) == CharDFA.from_expr(lit("y"))


def test_property_names_matching_no_pattern() -> None:
    # the JSON Schema use: names matching none of the patternProperties
    starts_x = CharDFA.from_expr(seq(lit("x-"), repeat(ANY_CHAR)))
    digits = CharDFA.from_expr(repeat(chars([(48, 57)]), 1))
    other = starts_x.union(digits).complement()
    rx = re.compile(r"x-.*|[0-9]+", re.S)
    for s in ["x-", "x-1", "12", "", "x", "1a", "é", "x-\U0001f600", "-x"]:
        assert other.matches(s) == (not rx.fullmatch(s)), s
    printed = re.compile(to_re(other.to_expr()))
    for s in ["x-", "x-1", "12", "", "x", "1a", "é", "x-\U0001f600", "-x"]:
        assert bool(printed.fullmatch(s)) == (not rx.fullmatch(s)), s


def test_limits_raise_typed_errors() -> None:
    nth_from_end = seq(repeat(char_set("ab")), lit("a"), repeat(char_set("ab"), 12, 12))
    with pytest.raises(GrammarTooLargeError) as info:
        CharDFA.from_expr(nth_from_end, max_states=1000)
    assert info.value.limit == "dfa_states" and info.value.maximum == 1000
    dfa = CharDFA.from_expr(seq(repeat(char_set("ab")), lit("a"), repeat(char_set("ab"), 4, 4)))
    with pytest.raises(GrammarTooLargeError) as info:
        dfa.to_expr(max_size=50)
    assert info.value.limit == "regex_size"


def test_subset_construction_is_bounded_in_work(monkeypatch: pytest.MonkeyPatch) -> None:
    # a{1,1000} spelled as nested counts: few DFA states, each a set of hundreds of NFA states
    # (~1.6M units of work, where the bound on states alone would not stop it)
    nested = repeat(repeat(repeat(lit("a"), 1, 10), 1, 10), 1, 10)
    monkeypatch.setattr(_canonical, "SUBSET_WORK_LIMIT", 1 << 20)
    with pytest.raises(GrammarTooLargeError) as info:
        CharDFA.from_expr(nested)
    assert info.value.limit == "subset_work" and info.value.value > info.value.maximum == 1 << 20
    monkeypatch.setattr(_canonical, "SUBSET_WORK_LIMIT", 1 << 22)  # room for it: the same DFA
    dfa = CharDFA.from_expr(nested)
    assert [n for n in (0, 1, 999, 1000, 1001) if dfa.matches("a" * n)] == [1, 999, 1000]


def test_rule_references_are_rejected() -> None:
    with pytest.raises(GrammarError):
        CharDFA.from_expr(seq(lit("a"), Ref("value")))


def test_instances_are_immutable() -> None:
    dfa = CharDFA.from_expr(lit("a"))
    with pytest.raises(AttributeError):
        dfa.trans = dfa.trans  # type: ignore[misc]
    with pytest.raises(ValueError):
        dfa.trans[0, 0] = 5


def test_constructor_drops_surrogate_transitions() -> None:
    # a raw table looping on every code point: the surrogate block must not survive
    raw = CharDFA(np.zeros(1, np.int64), np.zeros((1, 1), np.int32), np.ones(1, bool))
    assert raw == CharDFA.from_expr(repeat(ANY_CHAR))
    assert raw.matches("a\U0010ffff") and not raw.matches("a\udc00")


def _right_linear_accepts(rules: dict[str, Expr], start: str, text: str) -> bool:
    """Test-side interpreter of a right-linear grammar (``label Ref`` items and ``EMPTY``)."""

    def items(name: str) -> tuple[Expr, ...]:
        rule = rules[name]
        return rule.items if isinstance(rule, Choice) else (rule,)

    current = {start}
    for ch in text:
        nxt = set()
        for name in current:
            for item in items(name):
                if isinstance(item, Seq) and item.items:
                    label, ref = item.items
                    assert isinstance(ref, Ref)
                    ok = ch in label.text if isinstance(label, Literal) else ord(ch) in label
                    if ok:
                        nxt.add(ref.name)
        current = nxt
    return any(item == EMPTY for name in current for item in items(name))


@FAST
@given(pair=regular(), strings=random_strings, seed=st.integers(0, 2**16))
def test_to_rules_agrees_with_re(pair: tuple[Expr, str], strings: list[str], seed: int) -> None:
    expr, rx = pair
    dfa = CharDFA.from_expr(expr)
    rules = dfa.to_rules("s")
    assert next(iter(rules)) == "s0" and len(rules) == dfa.num_states
    pattern = re.compile(rx)
    for s in _samples(expr, strings, seed):
        assert _right_linear_accepts(rules, "s0", s) == bool(pattern.fullmatch(s)), s


def test_to_rules_stays_linear_where_to_expr_is_too_large() -> None:
    word = repeat(chars([(ord("a"), ord("z")), (ord("0"), ord("9"))]), 1)
    email = seq(word, lit("@"), word, lit("."), repeat(chars([(ord("a"), ord("z"))]), 2, 6))
    bounded = CharDFA.from_expr(email).intersect(CharDFA.from_expr(repeat(ANY_CHAR, 0, 120)))
    with pytest.raises(GrammarTooLargeError):
        bounded.to_expr()
    rules = bounded.to_rules("email_")
    rx = re.compile(r"[a-z0-9]+@[a-z0-9]+\.[a-z]{2,6}")
    for s in [
        "a@b.cd",
        "a@b.c",
        "x" * 100 + "@y.com",
        "x" * 120 + "@y.com",
        "@b.cd",
        "a@b.cdefghi",
    ]:
        expected = bool(rx.fullmatch(s)) and len(s) <= 120
        assert _right_linear_accepts(rules, "email_0", s) == expected, s


@pytest.mark.parametrize(
    "bounds, trans, accept",
    [
        ([1], [[0]], [True]),  # atoms must start at code point 0
        ([0, 5, 5], [[0, 0, 0]], [True]),  # strictly increasing
        ([0, 5], [[0]], [True]),  # one column per atom
        ([0], [[3]], [True]),  # target out of range
        ([0], [[0]], [True, False]),  # one accept flag per state
    ],
)
def test_constructor_rejects_malformed_tables(bounds: list, trans: list, accept: list) -> None:
    with pytest.raises(ValueError):
        CharDFA(np.array(bounds), np.array(trans, np.int32), np.array(accept))
