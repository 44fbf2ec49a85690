"""Tests for the reference recognizer, each against an oracle that shares nothing with it.

Oracles: a length-bounded least-fixpoint enumeration of each rule's strings and of their
prefixes (random small grammars), Python's ``re`` and the ``regex`` package's partial matching
(random regular IR built side by side with a pattern), brute force over code-point encodings
(partial UTF-8), and ``json.loads`` (a JSON grammar).
"""

from __future__ import annotations

import itertools
import json
import random
import re
from collections.abc import Iterable

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grammarsd.errors import GrammarTooLargeError
from grammarsd.grammar.ir import (
    ANY_CHAR,
    EMPTY,
    NOTHING,
    CharClass,
    Choice,
    Expr,
    Grammar,
    Literal,
    Ref,
    Repeat,
    Seq,
    char_set,
    chars,
    choice,
    lit,
    optional,
    repeat,
    seq,
)
from grammarsd.matcher.reference import ReferenceRecognizer

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --------------------------------------------------------------------------- brute-force oracle

ALPHABET = ("a", "b", "é")  # one 2-byte character, so byte-level prefixes split characters
N = 5  # strings up to this many characters are enumerated exhaustively

# The oracle's view of an expression: (F, P, nonempty) where F is the set of derivable strings
# of length <= N, P the set of length <= N prefixes of derivable strings (of any length), and
# nonempty whether the language is non-empty at all.
Triple = tuple[frozenset[str], frozenset[str], bool]
EPS: Triple = (frozenset({""}), frozenset({""}), True)
VOID: Triple = (frozenset(), frozenset(), False)


def _concat(xs: Iterable[str], ys: Iterable[str]) -> frozenset[str]:
    ys = list(ys)
    return frozenset(x + y for x in xs for y in ys if len(x) + len(y) <= N)


def _t_seq(a: Triple, b: Triple) -> Triple:
    prefixes = _concat(a[0], b[1]) | (a[1] if b[2] else frozenset())
    return _concat(a[0], b[0]), prefixes, a[2] and b[2]


def _t_alt(a: Triple, b: Triple) -> Triple:
    return a[0] | b[0], a[1] | b[1], a[2] or b[2]


def _t_star(a: Triple) -> Triple:
    full = frozenset({""})
    while True:
        grown = full | _concat(full, a[0])
        if grown == full:
            break
        full = grown
    return full, _concat(full, a[1]) | {""}, True


def _oracle_eval(expr: Expr, rules: dict[str, Triple]) -> Triple:
    if isinstance(expr, Literal):
        text = expr.text
        full = frozenset({text}) if len(text) <= N else frozenset()
        return full, frozenset(text[:k] for k in range(min(len(text), N) + 1)), True
    if isinstance(expr, CharClass):
        members = frozenset(c for c in ALPHABET if ord(c) in expr)
        assert len(members) == sum(b - a + 1 for a, b in expr.ranges), "class outside alphabet"
        return members, members | {""} if members else frozenset(), bool(members)
    if isinstance(expr, Ref):
        return rules[expr.name]
    if isinstance(expr, Seq):
        out = EPS
        for item in expr.items:
            out = _t_seq(out, _oracle_eval(item, rules))
        return out
    if isinstance(expr, Choice):
        out = VOID
        for item in expr.items:
            out = _t_alt(out, _oracle_eval(item, rules))
        return out
    assert isinstance(expr, Repeat)
    item = _oracle_eval(expr.item, rules)
    out = EPS
    for _ in range(expr.min):
        out = _t_seq(out, item)
    if expr.max is None:
        return _t_seq(out, _t_star(item))
    tail = EPS
    for _ in range(expr.max - expr.min):  # item{0,k} = ε | item item{0,k-1}
        tail = _t_alt(EPS, _t_seq(item, tail))
    return _t_seq(out, tail)


def oracle(grammar: Grammar) -> Triple:
    """Least fixpoint of the rule equations, truncated to length N (exact up to N)."""
    rules: dict[str, Triple] = {name: VOID for name in grammar.rules}
    while True:
        new = {name: _oracle_eval(body, rules) for name, body in grammar.rules.items()}
        if new == rules:
            return rules[grammar.start]
        rules = new


def all_strings(alphabet: Iterable[str], n: int) -> list[str]:
    letters = list(alphabet)
    return ["".join(t) for k in range(n + 1) for t in itertools.product(letters, repeat=k)]


# --------------------------------------------------------------------------- random grammars

RULES = ("r0", "r1", "r2")


def _exprs(rule_names: tuple[str, ...]) -> st.SearchStrategy[Expr]:
    letters = st.sampled_from(ALPHABET)
    literal = st.lists(letters, max_size=2).map(lambda cs: Literal("".join(cs)))
    charclass = st.sets(letters, max_size=3).map(lambda cs: char_set("".join(cs)))
    ref = st.sampled_from(rule_names).map(Ref)
    # literals and classes twice, so that empty languages do not dominate
    base = st.one_of(literal, literal, charclass, charclass, ref, st.sampled_from([EMPTY, NOTHING]))

    def extend(inner: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
        bounds = st.integers(0, 2).flatmap(
            lambda m: st.tuples(st.just(m), st.sampled_from([None, m, m + 1, m + 2]))
        )
        return st.one_of(
            st.lists(inner, max_size=3).map(lambda xs: Seq(tuple(xs))),
            st.lists(inner, min_size=1, max_size=3).map(lambda xs: Choice(tuple(xs))),
            st.tuples(inner, bounds).map(lambda t: Repeat(t[0], t[1][0], t[1][1])),
        )

    return st.recursive(base, extend, max_leaves=10)


@st.composite
def grammars(draw: st.DrawFn) -> Grammar:
    names = RULES[: draw(st.integers(1, len(RULES)))]
    return Grammar({name: draw(_exprs(names)) for name in names}, start=names[0])


def _byte_prefixes(strings: Iterable[str]) -> set[bytes]:
    return {s.encode()[:k] for s in strings for k in range(len(s.encode()) + 1)}


@SETTINGS
@given(grammars())
def test_random_grammar_matches_enumeration(grammar: Grammar) -> None:
    full, prefixes, _ = oracle(grammar)
    rec = ReferenceRecognizer(grammar)
    for s in all_strings(ALPHABET, N):
        assert rec.accepts(s) == (s in full), s
        assert rec.is_complete(s.encode()) == (s in full), s
        assert rec.is_prefix(s.encode()) == (s in prefixes), s
        if len(s) < N:
            expected = char_set("".join(c for c in ALPHABET if s + c in prefixes))
            assert rec.next_chars(s) == expected, s
            # a prefix ending inside "é" is viable iff "é" can come next
            assert rec.is_prefix(s.encode() + "é".encode()[:1]) == (s + "é" in prefixes), s
        assert not rec.accepts(s + "z")


# Tokens: whole characters, pairs, split characters, invalid bytes and the empty token.
TOY_VOCAB = (
    [c.encode() for c in ALPHABET]
    + [(x + y).encode() for x in ALPHABET for y in ALPHABET]
    + [b"\xc3", b"\xa9", b"\xa9a", b"a\xc3", b"\xa9\xc3", b"", b"\xff", b"\x80", b"z", b"\xc3\xa8"]
)


@SETTINGS
@given(grammars(), st.randoms(use_true_random=False))
def test_random_grammar_token_masks(grammar: Grammar, rnd: random.Random) -> None:
    _, prefixes, _ = oracle(grammar)
    viable = _byte_prefixes(prefixes)  # exact for byte strings spanning <= N characters
    vocab = TOY_VOCAB[:]
    rnd.shuffle(vocab)
    rec = ReferenceRecognizer(grammar)
    # prefix + token spans at most len(s) + 2 characters
    for s in all_strings(ALPHABET, N - 2):
        for prefix in (s.encode(), s.encode() + b"\xc3"):
            mask = rec.allowed_tokens(prefix, vocab)
            expected = [tok != b"" and prefix + tok in viable for tok in vocab]
            assert mask.tolist() == expected, (s, prefix)


# --------------------------------------------------------------------------- regular IR vs re


def _regular() -> st.SearchStrategy[tuple[Expr, str]]:
    letters = st.sampled_from(ALPHABET)
    base = st.one_of(
        st.lists(letters, min_size=1, max_size=2).map(
            lambda cs: (lit("".join(cs)), re.escape("".join(cs)))
        ),
        st.sets(letters, min_size=1).map(
            lambda cs: (char_set("".join(cs)), "[" + "".join(sorted(cs)) + "]")
        ),
        st.just((EMPTY, "(?:)")),
    )

    def extend(
        inner: st.SearchStrategy[tuple[Expr, str]],
    ) -> st.SearchStrategy[tuple[Expr, str]]:
        def rep(t: tuple[tuple[Expr, str], int, int | None]) -> tuple[Expr, str]:
            (e, p), m, n = t
            return Repeat(e, m, n), f"(?:{p}){{{m},{'' if n is None else n}}}"

        return st.one_of(
            st.lists(inner, min_size=1, max_size=3).map(
                lambda xs: (Seq(tuple(e for e, _ in xs)), "".join(f"(?:{p})" for _, p in xs))
            ),
            st.lists(inner, min_size=1, max_size=3).map(
                lambda xs: (
                    Choice(tuple(e for e, _ in xs)),
                    "(?:" + "|".join(p for _, p in xs) + ")",
                )
            ),
            st.tuples(inner, st.integers(0, 3), st.sampled_from([None, 0, 1, 3])).map(
                lambda t: rep((t[0], t[1], None if t[2] is None else t[1] + t[2]))
            ),
        )

    return st.recursive(base, extend, max_leaves=6)


@SETTINGS
@given(_regular())
def test_regular_ir_matches_python_re(pair: tuple[Expr, str]) -> None:
    expr, pattern = pair
    rec = ReferenceRecognizer(Grammar.single(expr))
    compiled = re.compile(pattern)
    for s in all_strings(ALPHABET, N):
        assert rec.accepts(s) == (compiled.fullmatch(s) is not None), (pattern, s)
        partial = regex.fullmatch(pattern, s, partial=True) is not None
        assert rec.is_prefix(s.encode()) == partial, (pattern, s)


# --------------------------------------------------------------------------- special grammars


def _lang(rec: ReferenceRecognizer, alphabet: str, n: int) -> set[str]:
    return {s for s in all_strings(alphabet, n) if rec.accepts(s)}


def test_left_recursion() -> None:
    # e -> e "+" n | n ; n -> [0-9]
    g = Grammar(
        {"e": choice(seq(Ref("e"), lit("+"), Ref("n")), Ref("n")), "n": char_set("12")}, start="e"
    )
    rec = ReferenceRecognizer(g)
    expected = {s for s in all_strings("12+", 5) if re.fullmatch(r"[12](?:\+[12])*", s)}
    assert _lang(rec, "12+", 5) == expected
    assert rec.is_prefix(b"1+2+") and not rec.is_prefix(b"1++")
    assert rec.next_chars("1+") == char_set("12")


def test_hidden_left_recursion_through_nullable() -> None:
    # a -> b a "x" | "y" ; b -> ε | "z"   : language z^j y x^k with j <= k
    g = Grammar(
        {"a": choice(seq(Ref("b"), Ref("a"), lit("x")), lit("y")), "b": optional(lit("z"))},
        start="a",
    )
    rec = ReferenceRecognizer(g)

    def member(s: str) -> bool:
        m = re.fullmatch(r"(z*)y(x*)", s)
        return m is not None and len(m.group(1)) <= len(m.group(2))

    assert _lang(rec, "xyz", 6) == {s for s in all_strings("xyz", 6) if member(s)}


def test_nullable_rules_and_cycles() -> None:
    # s -> s | a a ; a -> ε | "a" | a     (cycles s -> s, a -> a; nullable a)
    g = Grammar(
        {"s": choice(Ref("s"), seq(Ref("a"), Ref("a"))), "a": choice(EMPTY, lit("a"), Ref("a"))},
        start="s",
    )
    rec = ReferenceRecognizer(g)
    assert _lang(rec, "a", 4) == {"", "a", "aa"}
    assert rec.is_prefix(b"aa") and not rec.is_prefix(b"aaa")


def test_unproductive_rules_are_trimmed() -> None:
    # loop -> "a" loop  derives nothing, so "a" must not look like a viable prefix
    g = Grammar(
        {"s": choice(seq(lit("a"), Ref("loop")), lit("b")), "loop": seq(lit("a"), Ref("loop"))},
        start="s",
    )
    rec = ReferenceRecognizer(g)
    assert rec.accepts("b")
    assert not rec.is_prefix(b"a")
    assert rec.next_chars("") == char_set("b")


@pytest.mark.parametrize(
    "expr",
    [NOTHING, Seq((lit("a"), NOTHING)), Repeat(NOTHING, 1, None), chars(())],
    ids=["nothing", "seq-nothing", "repeat-nothing", "empty-class"],
)
def test_empty_language(expr: Expr) -> None:
    rec = ReferenceRecognizer(Grammar.single(expr))
    assert not rec.is_prefix(b"")
    assert not rec.is_prefix(b"a")
    assert not rec.accepts("")
    assert rec.next_chars("") == chars(())
    assert not rec.allowed_tokens(b"", [b"a", b""]).any()


def test_empty_string_language() -> None:
    for expr in (EMPTY, Repeat(NOTHING, 0, None), Repeat(lit("a"), 0, 0)):
        rec = ReferenceRecognizer(Grammar.single(expr))
        assert rec.accepts("") and rec.is_complete(b"") and rec.is_prefix(b"")
        assert not rec.is_prefix(b"a")
        assert rec.next_chars("") == chars(())
        assert not rec.allowed_tokens(b"", [b"a", b"", b"\xc3"]).any()


def test_large_bounded_repeat() -> None:
    rec = ReferenceRecognizer(Grammar.single(repeat(lit("ab"), 40, 300)))
    for k in (0, 39, 40, 41, 299, 300, 301):
        assert rec.accepts("ab" * k) == (40 <= k <= 300), k
    assert rec.is_prefix(b"ab" * 300) and not rec.is_prefix(b"ab" * 300 + b"a")


def test_huge_repeat_is_refused() -> None:
    with pytest.raises(GrammarTooLargeError):
        ReferenceRecognizer(Grammar.single(repeat(lit("a"), 0, 10**8)))


# --------------------------------------------------------------------------- UTF-8 edges


def _encoded_prefixes(code_points: Iterable[int], suffix: bytes = b"") -> set[bytes]:
    """Every non-empty prefix of ``chr(cp).encode() + suffix``."""
    out: set[bytes] = set()
    for cp in code_points:
        enc = chr(cp).encode() + suffix
        out.update(enc[:k] for k in range(1, len(enc) + 1))
    return out


def _probe_bytes() -> list[bytes]:
    """All 1- and 2-byte strings, and 3- and 4-byte strings around every interesting boundary."""
    edges = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF]
    edges += [0xE0, 0xED, 0xEE, 0xEF, 0xF0, 0xF3, 0xF4, 0xF5, 0xFF]
    cont = [0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0]
    probes = [bytes([a]) for a in range(256)]
    probes += [bytes([a, b]) for a in range(256) for b in range(256)]
    probes += [bytes([a, b, c]) for a in edges for b in range(256) for c in cont]
    probes += [bytes([a, b, c, d]) for a in edges[-9:] for b in cont for c in cont for d in cont]
    return probes


PROBES = _probe_bytes()

EDGE_CLASSES = {
    "2-3-byte-edge": chars([(0x7FF, 0x800)]),
    "3-4-byte-edge": chars([(0xFFFF, 0x10000)]),
    "max": chars([(0x10FFFF, 0x10FFFF)]),
    "around-surrogates": chars([(0xD7FF, 0xD7FF), (0xE000, 0xE000)]),
    "two-byte-block": chars([(0x80, 0x7FF)]),
    "ascii-and-e0": chars([(0x41, 0x41), (0x800, 0x83F)]),
}


@pytest.mark.parametrize("name", list(EDGE_CLASSES))
def test_partial_utf8_against_encodings(name: str) -> None:
    cls = EDGE_CLASSES[name]
    members = [cp for a, b in cls.ranges for cp in range(a, b + 1)]
    viable = _encoded_prefixes(members, b"x")
    rec = ReferenceRecognizer(Grammar.single(seq(cls, lit("x"))))
    for probe in PROBES:
        assert rec.is_prefix(probe) == (probe in viable), probe
    for cp in members:
        enc = chr(cp).encode()
        assert rec.is_prefix(enc + b"x") and rec.is_complete(enc + b"x")
        assert not rec.is_complete(enc)


def test_partial_utf8_any_char() -> None:
    # viable: every prefix of the encoding of one non-surrogate code point, nothing else
    rec = ReferenceRecognizer(Grammar.single(ANY_CHAR))
    bmp = (cp for cp in range(0x10000) if not 0xD800 <= cp <= 0xDFFF)
    viable = _encoded_prefixes(bmp)
    # code points >= U+10000 that differ only in the last 6 bits share their first 3 bytes
    viable |= {chr(cp).encode()[:k] for cp in range(0x10000, 0x110000, 64) for k in (1, 2, 3)}
    for probe in PROBES:
        expected = probe in viable if len(probe) < 4 else _decodes_to_one_char(probe)
        assert rec.is_prefix(probe) == expected, probe


def _decodes_to_one_char(data: bytes) -> bool:
    try:
        return len(data.decode("utf-8", "strict")) == 1
    except UnicodeDecodeError:
        return False


@pytest.mark.parametrize(
    "data",
    [
        b"\xff",
        b"\xc0\x80",
        b"\xc1\xbf",
        b"\xe0\x80",
        b"\xed\xa0\x80",
        b"\xed\xbf",
        b"\xf4\x90",
        b"\xf5",
        b"a\x80",
        b"\xc3a",
        b"\x80\x80\x80\x80",
    ],
)
def test_invalid_utf8_is_never_a_prefix(data: bytes) -> None:
    rec = ReferenceRecognizer(Grammar.single(repeat(ANY_CHAR)))
    assert not rec.is_prefix(data)
    assert not rec.is_complete(data)
    assert not rec.allowed_tokens(b"", [data])[0]


def test_surrogates_are_never_accepted() -> None:
    rec = ReferenceRecognizer(Grammar.single(repeat(ANY_CHAR)))
    assert not rec.accepts("\ud800")
    assert rec.accepts("\ud7ff\ue000")


def test_tokens_completing_a_split_character() -> None:
    rec = ReferenceRecognizer(Grammar.single(lit("é€😀")))
    full = "é€😀".encode()
    for cut in range(len(full) + 1):
        prefix = full[:cut]
        vocab = [full[cut:k] for k in range(cut, len(full) + 1)] + [full[cut:] + b"x", b"\xa8"]
        expected = [k > cut for k in range(cut, len(full) + 1)] + [False, False]
        assert rec.allowed_tokens(prefix, vocab).tolist() == expected, cut
    assert not rec.allowed_tokens(b"\xff", [b"a"]).any()


# --------------------------------------------------------------------------- a JSON grammar


def json_grammar() -> Grammar:
    ws = repeat(char_set(" \n"))
    digit = chars([(0x30, 0x39)])
    string_char = choice(
        chars([(0x20, 0x10FFFF)]).intersect(char_set('"\\').negate()),
        seq(lit("\\"), char_set('"\\/bfnrt')),
    )
    comma_list = lambda item: optional(seq(item, repeat(seq(ws, lit(","), ws, item)), ws))  # noqa: E731
    return Grammar(
        {
            "value": choice(
                Ref("object"),
                Ref("array"),
                Ref("string"),
                Ref("number"),
                lit("true"),
                lit("false"),
                lit("null"),
            ),
            "object": seq(lit("{"), ws, comma_list(Ref("member")), lit("}")),
            "member": seq(Ref("string"), ws, lit(":"), ws, Ref("value")),
            "array": seq(lit("["), ws, comma_list(Ref("value")), lit("]")),
            "string": seq(lit('"'), repeat(string_char), lit('"')),
            "number": seq(
                optional(lit("-")),
                choice(lit("0"), seq(chars([(0x31, 0x39)]), repeat(digit))),
                optional(seq(lit("."), repeat(digit, 1))),
                optional(seq(char_set("eE"), optional(char_set("+-")), repeat(digit, 1))),
            ),
        },
        start="value",
    )


def _json_ok(s: str) -> bool:
    if s != s.strip(" \n"):
        return False  # json.loads allows surrounding whitespace; the grammar does not
    try:
        json.loads(s)
    except ValueError:
        return False
    return True


JSON_PIECES = [
    "{",
    "}",
    "[",
    "]",
    '"',
    '"a"',
    ":",
    ",",
    " ",
    "1",
    "0",
    "-",
    ".",
    "e",
    "+",
    "null",
    "é",
    "\\n",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(JSON_PIECES), max_size=12))
def test_json_grammar_against_json_loads(pieces: list[str]) -> None:
    s = "".join(pieces)
    assert REC_JSON.accepts(s) == _json_ok(s), s


REC_JSON = ReferenceRecognizer(json_grammar())


def test_json_mask_equals_per_token_definition() -> None:
    # the shared sorted walk must agree with the per-token definition on a messy vocabulary
    rnd = random.Random(0)
    pieces = ["{", '"', "a", "é", " ", ":", "1", ",", "}", "]", "[", "tr", "ue", "\\", "n", "."]
    vocab = {"".join(rnd.choices(pieces, k=rnd.randint(1, 4))).encode() for _ in range(3000)}
    vocab |= {"é".encode()[:1], "é".encode()[1:], b"\xff", b""}
    tokens = sorted(vocab, key=lambda _: rnd.random())
    for prefix in [b"", b'{"a', b'{"a": [1, tr', b'{"\xc3', b"[1."]:
        mask = REC_JSON.allowed_tokens(prefix, tokens)
        assert mask.tolist() == [t != b"" and REC_JSON.is_prefix(prefix + t) for t in tokens]


def test_json_document_prefixes_in_any_order() -> None:
    # every byte prefix of a document is viable (mid-character cuts too); queries go forward,
    # backward and through dead text, so walks that resume from an earlier walk are exercised
    doc = json.dumps({"k": ["é€😀", -1.5e3, {"n": None}], "t": True}, ensure_ascii=False).encode()
    cuts = list(range(len(doc) + 1))
    for order in (cuts, cuts[::-1], sorted(cuts, key=lambda k: (k * 7919) % 31)):
        for k in order:
            assert REC_JSON.is_prefix(doc[:k]), doc[:k]
            assert not REC_JSON.is_prefix(doc[:k] + b"\x01"), doc[:k]  # never valid in JSON
            assert REC_JSON.is_complete(doc[:k]) == (k == len(doc) or _json_ok_bytes(doc[:k]))


def _json_ok_bytes(data: bytes) -> bool:
    try:
        return _json_ok(data.decode())
    except UnicodeDecodeError:
        return False
