"""Byte-level lexer DFAs against independent oracles: ``re`` on decoded text, brute-force
enumeration of the byte prefixes of finite languages, the well-formed UTF-8 table of the
Unicode Standard (Table 3-7), and a table-filling check of minimality."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grammarsd.compiler import lexer
from grammarsd.compiler.lexer import ByteDFA, build_byte_dfa, byte_dfa_from_char_dfa
from grammarsd.errors import GrammarTooLargeError
from grammarsd.grammar.automata import CharDFA, canonical_table
from grammarsd.grammar.encodings import encode_class
from grammarsd.grammar.ir import (
    ANY_CHAR,
    EMPTY,
    NOTHING,
    Expr,
    char_set,
    chars,
    choice,
    lit,
    optional,
    repeat,
    seq,
)

DIGIT = chars([(ord("0"), ord("9"))])
HEX = chars([(ord("0"), ord("9")), (ord("A"), ord("F")), (ord("a"), ord("f"))])
TWO = repeat(DIGIT, 2, 2)

# name -> (IR, the same language as a Python regex, written independently)
LEXEMES: dict[str, tuple[Expr, str]] = {
    "json string": (
        seq(
            lit('"'),
            repeat(
                choice(
                    char_set('"\\').union(chars([(0, 0x1F)])).negate(),
                    seq(lit("\\"), char_set('"\\/bfnrt')),
                    seq(lit("\\u"), repeat(HEX, 4, 4)),
                )
            ),
            lit('"'),
        ),
        r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"',
    ),
    "json number": (
        seq(
            optional(lit("-")),
            choice(lit("0"), seq(chars([(ord("1"), ord("9"))]), repeat(DIGIT))),
            optional(seq(lit("."), repeat(DIGIT, 1))),
            optional(seq(char_set("eE"), optional(char_set("+-")), repeat(DIGIT, 1))),
        ),
        r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?",
    ),
    "date-time": (
        seq(
            repeat(DIGIT, 4, 4),
            lit("-"),
            TWO,
            lit("-"),
            TWO,
            char_set("Tt"),
            TWO,
            lit(":"),
            TWO,
            lit(":"),
            TWO,
            optional(seq(lit("."), repeat(DIGIT, 1))),
            choice(char_set("Zz"), seq(char_set("+-"), TWO, lit(":"), TWO)),
        ),
        r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
        r"(?:[Zz]|[+-][0-9]{2}:[0-9]{2})",
    ),
    "[a-z]{1,40}": (repeat(chars([(ord("a"), ord("z"))]), 1, 40), "[a-z]{1,40}"),
    "any*": (repeat(ANY_CHAR), "(?s:.*)"),
    "utf8 boundaries": (
        repeat(chars([(0x7F, 0x80), (0x7FF, 0x800), (0xFFFF, 0x10000), (0x10FFFF, 0x10FFFF)])),
        "[\x7f\x80\u07ff\u0800\uffff\U00010000\U0010ffff]*",
    ),
    "non-ascii words": (
        seq(
            repeat(chars([(0xC0, 0x24F)]), 1),
            optional(seq(lit(" \u20ac"), repeat(lit("\U0001f600")))),
        ),
        "[\u00c0-\u024f]+(?: \u20ac(?:\U0001f600)*)?",
    ),
    "literal alternatives": (choice(lit("true"), lit("false"), lit("null")), "true|false|null"),
}

# (lower, upper) code points: U+007F/0080, U+07FF/0800, U+FFFF/10000, and the last scalars
BOUNDARIES = [0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF]

FINITE_LANGUAGES: dict[str, Expr] = {
    "boundary pairs": repeat(chars([(0x7F, 0x80), (0x7FF, 0x800), (0xFFFF, 0x10000)]), 1, 2),
    "around surrogates": seq(chars([(0xD7FF, 0xD7FF), (0xE000, 0xE000)]), optional(lit("!"))),
    "top of the range": choice(chars([(0x10FFFE, 0x10FFFF)]), lit("a\U0001f600b")),
    "mixed lengths": seq(
        choice(lit("a"), lit("\u00e9"), lit("\u20ac"), lit("\U0001f600")), optional(lit("\u0800"))
    ),
    "with empty": choice(EMPTY, lit("\u07ff\u0080")),
}


def live_prefixes(members: list[str]) -> set[bytes]:
    """Every prefix (the empty one included) of the UTF-8 encoding of every member."""
    out: set[bytes] = set()
    for m in members:
        data = m.encode()
        out.update(data[:k] for k in range(len(data) + 1))
    return out


def enumerate_members(expr: Expr) -> list[str]:
    """All members of a finite language, by brute force over the IR."""
    from grammarsd.grammar.ir import CharClass, Choice, Literal, Repeat, Seq

    if isinstance(expr, Literal):
        return [expr.text]
    if isinstance(expr, CharClass):
        return [chr(c) for a, b in expr.ranges for c in range(a, b + 1)]
    if isinstance(expr, Seq):
        parts = [enumerate_members(i) for i in expr.items]
        return ["".join(p) for p in itertools.product(*parts)]
    if isinstance(expr, Choice):
        return [m for i in expr.items for m in enumerate_members(i)]
    assert isinstance(expr, Repeat) and expr.max is not None
    item = enumerate_members(expr.item)
    return [
        "".join(p) for k in range(expr.min, expr.max + 1) for p in itertools.product(item, repeat=k)
    ]


def well_formed_utf8_prefix(data: bytes) -> bool:
    """Unicode Standard Table 3-7, transcribed: is ``data`` a prefix of well-formed UTF-8?"""
    table = [
        [(0x00, 0x7F)],
        [(0xC2, 0xDF), (0x80, 0xBF)],
        [(0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)],
        [(0xE1, 0xEC), (0x80, 0xBF), (0x80, 0xBF)],
        [(0xED, 0xED), (0x80, 0x9F), (0x80, 0xBF)],
        [(0xEE, 0xEF), (0x80, 0xBF), (0x80, 0xBF)],
        [(0xF0, 0xF0), (0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
        [(0xF1, 0xF3), (0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
        [(0xF4, 0xF4), (0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)],
    ]
    i = 0
    while i < len(data):
        for row in table:
            chunk = data[i : i + len(row)]
            if all(lo <= b <= hi for b, (lo, hi) in zip(chunk, row, strict=False)):
                if len(chunk) < len(row) and i + len(chunk) < len(data):
                    return False
                i += len(row)
                break
        else:
            return False
    return True


def reachable_and_live(dfa: ByteDFA) -> tuple[set[int], set[int]]:
    n = dfa.num_states
    edges = {s: {int(t) for t in dfa.trans[s] if t >= 0} for s in range(n)}
    reach, stack = {0}, [0]
    while stack:
        for t in edges[stack.pop()] - reach:
            reach.add(t)
            stack.append(t)
    live = {s for s in range(n) if dfa.accept[s]}
    changed = True
    while changed:
        new = {s for s in range(n) if edges[s] & live} - live
        live |= new
        changed = bool(new)
    return reach, live


def distinguishable_pairs_all(dfa: ByteDFA) -> bool:
    """Table filling (Moore): True iff every pair of states is distinguishable."""
    n = dfa.num_states
    trans = np.where(dfa.trans < 0, n, dfa.trans)  # n is the dead state
    trans = np.vstack([trans, np.full((1, 256), n)])
    acc = np.append(dfa.accept, False)
    dist = acc[:, None] != acc[None, :]
    while True:
        step = dist.copy()
        for b in range(256):
            col = trans[:, b]
            step |= dist[col[:, None], col[None, :]]
        if (step == dist).all():
            break
        dist = step
    off_diagonal = ~np.eye(n + 1, dtype=bool)
    return bool(dist[off_diagonal].all())


# --------------------------------------------------------------------------- membership


@pytest.mark.parametrize("name", list(LEXEMES))
@settings(max_examples=40, deadline=None)
@given(texts=st.lists(st.text(max_size=12), max_size=20))
def test_bytes_match_iff_re_fullmatch(name: str, texts: list[str]) -> None:
    expr, rx = LEXEMES[name]
    dfa = build_byte_dfa(expr)
    pattern = re.compile(rx)
    fixed = {
        "json string": ['""', '"a\\u00e9\\n\U0001f600"', '"\x1f"', '"\\x"', '"\\uABCg"'],
        "json number": ["-0", "0.5e+10", "01", "-", "1e", "12.", "123"],
        "date-time": ["2024-02-29T23:59:60Z", "2024-02-29t23:59:60.123+05:30", "2024-2-29T"],
        "literal alternatives": ["true", "tru", "nulll", "false"],
    }.get(name, [])
    boundary = [chr(c) for c in BOUNDARIES] + ["".join(chr(c) for c in BOUNDARIES)]
    for s in texts + fixed + boundary + ["", "a" * 40, "a" * 41]:
        assert dfa.matches(s.encode()) == bool(pattern.fullmatch(s)), (name, s)


@pytest.mark.parametrize("name", list(LEXEMES))
def test_every_state_is_live_and_the_table_is_minimal(name: str) -> None:
    dfa = build_byte_dfa(LEXEMES[name][0])
    assert dfa.trans.dtype == np.int32 and dfa.trans.shape == (dfa.num_states, 256)
    assert dfa.trans.flags.c_contiguous and not dfa.trans.flags.writeable
    assert dfa.accept.dtype == np.bool_
    reach, live = reachable_and_live(dfa)
    assert reach == live == set(range(dfa.num_states))
    assert distinguishable_pairs_all(dfa)


# --------------------------------------------------------------------------- prefixes


@pytest.mark.parametrize("name", list(FINITE_LANGUAGES))
def test_alive_iff_prefix_of_a_member(name: str) -> None:
    expr = FINITE_LANGUAGES[name]
    dfa = build_byte_dfa(expr)
    prefixes = live_prefixes(enumerate_members(expr))
    # induction over the live region: every prefix, extended by every byte
    frontier = [b""]
    seen = {b""}
    while frontier:
        data = frontier.pop()
        state = dfa.walk(data)
        assert state >= 0, data
        for byte in range(256):
            ext = data + bytes([byte])
            alive = int(dfa.trans[state, byte]) >= 0
            assert alive == (ext in prefixes), (name, ext)
            if alive and ext not in seen:
                seen.add(ext)
                frontier.append(ext)
    assert seen == prefixes
    members = {m.encode() for m in enumerate_members(expr)}
    assert {p for p in prefixes if dfa.matches(p)} == members


THIRD_BYTE_LEADS = {0xE0, 0xE1, 0xED, 0xEE, 0xF0, 0xF1, 0xF4}
EDGE_CONTINUATIONS = {0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF}


def test_any_char_is_exactly_well_formed_utf8() -> None:
    dfa = build_byte_dfa(repeat(ANY_CHAR))
    one = build_byte_dfa(ANY_CHAR)
    # all 1- and 2-byte strings, then every 3rd byte after the 2-byte prefixes at the edges
    # of the special second-byte ranges (E0 A0.., ED ..9F, F0 90.., F4 ..8F) and ordinary ones
    pairs = np.array(list(itertools.product(range(256), repeat=2)), np.int64)
    after1 = dfa.trans[0][pairs[:, 0]]
    after2 = np.where(after1 >= 0, dfa.trans[np.maximum(after1, 0), pairs[:, 1]], -1)
    for (b0, b1), state in zip(pairs.tolist(), after2.tolist(), strict=True):
        assert (state >= 0) == well_formed_utf8_prefix(bytes([b0, b1])), bytes([b0, b1])
        if state >= 0 and b0 in THIRD_BYTE_LEADS and b1 in EDGE_CONTINUATIONS:
            for b2 in range(256):
                data = bytes([b0, b1, b2])
                alive = int(dfa.trans[state, b2]) >= 0
                assert alive == well_formed_utf8_prefix(data), data
    for cp in BOUNDARIES + [0, 0x10000 + 12345, 0xE9, 0x20AC]:
        assert one.matches(chr(cp).encode()) and dfa.matches(chr(cp).encode() * 2)
    bad = [
        b"\x80",
        b"\xc0\x80",
        b"\xc1\xbf",
        b"\xe0\x80\x80",
        b"\xed\xa0\x80",
        b"\xed\xbf\xbf",
        b"\xf0\x80\x80\x80",
        b"\xf4\x90\x80\x80",
        b"\xf5\x80\x80\x80",
        b"\xff",
        b"\xfe",
    ]
    for data in bad:
        assert dfa.walk(data) < 0, data


# --------------------------------------------------------------------------- options, limits


def test_nonempty_drops_only_the_empty_string() -> None:
    for expr, rx in [(repeat(lit("ab")), "(?:ab)*"), (LEXEMES["any*"][0], "(?s:.*)")]:
        plain, nonempty = build_byte_dfa(expr), build_byte_dfa(expr, nonempty=True)
        assert plain.accept[0] and not nonempty.accept[0]
        for s in ["", "ab", "abab", "a", "\u20ac", "ab\u20ac"]:
            expected = bool(re.fullmatch(rx, s, re.S)) and s != ""
            assert nonempty.matches(s.encode()) == expected, s
        reach, live = reachable_and_live(nonempty)
        assert reach == live == set(range(nonempty.num_states))
        assert distinguishable_pairs_all(nonempty)
    assert build_byte_dfa(EMPTY, nonempty=True).is_empty()
    assert build_byte_dfa(NOTHING).is_empty()


def test_typical_lexemes_stay_small() -> None:
    dfa = build_byte_dfa(LEXEMES["json string"][0], nonempty=True)
    assert dfa.num_states == 15  # 8 character states + 3 shared + 4 boundary UTF-8 nodes
    assert build_byte_dfa(repeat(chars([(ord("a"), ord("z"))]), 1, 1000)).num_states == 1001


def test_byte_state_limit_raises() -> None:
    with pytest.raises(GrammarTooLargeError) as info:
        build_byte_dfa(repeat(chars([(ord("a"), ord("z"))]), 1, 1000), max_states=500)
    assert info.value.limit == "dfa_states"


def test_raw_char_tables_never_encode_surrogates() -> None:
    raw = CharDFA(np.zeros(1, np.int64), np.zeros((1, 1), np.int32), np.ones(1, bool))
    dfa = byte_dfa_from_char_dfa(raw)
    assert dfa.walk(b"\xed\xa0") < 0 and dfa.walk(b"\xed\x9f\xbf") >= 0


# --------------------------------------------------------------------------- counted repeats

JSON_CHAR = encode_class(ANY_CHAR)  # every JSON spelling of any character


@pytest.mark.parametrize(("item", "lo", "hi"), [
    (JSON_CHAR, 0, 40), (JSON_CHAR, 1, 9), (JSON_CHAR, 12, 12), (ANY_CHAR, 3, 30),
    (lit("ab"), 0, 20), (HEX, 5, 64),
])
@pytest.mark.parametrize("nonempty", [False, True])
def test_tiled_repeat_equals_the_subset_construction(
    item: Expr, lo: int, hi: int, nonempty: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # oracle: the generic construction (determinise, lower, minimise), tiling turned off
    expr = repeat(item, lo, hi)
    tiled = build_byte_dfa(expr, nonempty=nonempty)
    monkeypatch.setattr(lexer, "TILE_MIN_COUNT", 10**9)
    generic = build_byte_dfa(expr, nonempty=nonempty)
    assert tiled.num_states == generic.num_states  # already minimal
    trans, accept = canonical_table(tiled.trans, tiled.accept)
    assert (trans == generic.trans).all() and (accept == generic.accept).all()
    reach, live = reachable_and_live(tiled)
    assert reach == live == set(range(tiled.num_states))


def test_tiling_covers_the_shapes_chunking_leaves_and_skips_other_items() -> None:
    x = JSON_CHAR
    # x x{0,255} | x x{256} x{0,43}: a JSON string of 1..300 characters in one terminal
    shaped = choice(seq(x, repeat(x, 0, 255)), seq(x, repeat(x, 256, 256), repeat(x, 0, 43)))
    assert lexer._counted(shaped) == (x, 1, 300)
    assert lexer._counted(choice(repeat(x, 0, 10), repeat(x, 12, 20))) is None  # a gap at 11
    a_or_ab = choice(lit("a"), lit("ab"))  # not a prefix code: built the generic way
    dfa = build_byte_dfa(repeat(a_or_ab, 0, 12))
    for n in range(0, 16):
        for s in ("a" * n, "ab" * n, "aab" * n):
            assert dfa.matches(s.encode()) == bool(re.fullmatch("(?:ab?){0,12}", s)), s


@pytest.mark.parametrize(("pattern", "item"), [
    ("(?:a*b){1,20}", seq(repeat(lit("a")), lit("b"))),
    ("(?: *,x){0,12}", seq(repeat(lit(" ")), lit(",x"))),  # an array item after its gap
])
def test_tiling_refuses_a_unit_whose_start_is_reentered(pattern: str, item: Expr) -> None:
    # oracle: Python's re. A copy's start means "the previous copies are done"; a unit that
    # loops back to its start would accept "ba" for (a*b){1,20} there
    dfa = build_byte_dfa(repeat(item, *map(int, pattern[pattern.index("{") + 1:-1].split(","))))
    for s in ("", "b", "ba", "bab", "baa", "aab" * 3 + "a", " ,x", " ,x ", " ,x ,x", ",x" * 13):
        assert dfa.matches(s.encode()) == bool(re.fullmatch(pattern, s)), s


def test_long_counted_string_is_tiled(monkeypatch: pytest.MonkeyPatch) -> None:
    # the fast path must not silently stop applying to the JSON strings it exists for
    built: list[int] = []
    tiled = lexer._tiled

    def spy(*args: object) -> ByteDFA | None:
        out = tiled(*args)  # type: ignore[arg-type]
        built.append(-1 if out is None else out.num_states)
        return out

    monkeypatch.setattr(lexer, "_tiled", spy)
    dfa = build_byte_dfa(repeat(JSON_CHAR, 0, 255), nonempty=True)
    assert built == [dfa.num_states]
    assert dfa.matches(("é" * 254 + "\\n").encode()) and not dfa.matches(b"a" * 256)
