"""Tests for ``Capped`` in the reference recognizer, each against an oracle that shares nothing
with it.

Oracles: ``json.loads`` for the decoded length, the reference on the *uncapped* grammar for
membership in the item (``test_reference.py`` checks that part), and enumeration of whole
strings over a small alphabet of pieces (raw characters, short and ``\\u`` escapes, surrogate
halves, a lone backslash) for prefixes.
"""

from __future__ import annotations

import functools
import itertools
import json
import random

import pytest

from grammarsd.errors import GrammarError
from grammarsd.grammar.encodings import encode_class
from grammarsd.grammar.ir import (
    EMPTY,
    Capped,
    Expr,
    Grammar,
    Ref,
    char_set,
    chars,
    choice,
    lit,
    repeat,
    seq,
)
from grammarsd.matcher.reference import ReferenceRecognizer

NOT_SPACE = encode_class(char_set(" \t\n\r\f\v").negate())
HEX = char_set("0123456789abcdefABCDEF")

# item name -> rules; "body" is the item, the others are what it refers to
ITEMS: dict[str, dict[str, Expr]] = {
    # (\S+ ){0,3}\S+ over decoded characters: every encoding of each one is allowed
    "words": {
        "body": seq(
            repeat(seq(repeat(NOT_SPACE, 1), encode_class(char_set(" "))), 0, 3),
            repeat(NOT_SPACE, 1),
        )
    },
    "abc": {"body": repeat(chars([(ord("a"), ord("c"))]))},
    # [aé][é\n]* as right-linear rules, one per automaton state, as the schema compiler writes
    "right-linear": {
        "body": seq(encode_class(char_set("aé")), Ref("s1")),
        "s1": choice(EMPTY, seq(encode_class(char_set("é\n")), Ref("s1"))),
    },
    # any \uXXXX escapes (lone surrogates too) and "a"
    "u-escapes": {"body": repeat(choice(seq(lit("\\u"), repeat(HEX, 4, 4)), lit("a")))},
}
CAPS = (0, 1, 2, 5)

# "\\ud83d" "\\ude00" is one character (a surrogate pair); "é" is two bytes in UTF-8
PIECES = ("a", " ", "é", "\\n", '\\"', "\\u00e9", "\\ud83d", "\\ude00", "\\")
WIDE = 4  # strings of up to this many pieces from PIECES
# fewer pieces, so that strings of more than 5 characters are enumerated too
LONG_PIECES = ("a", " ", "\\u00e9", "\\ud83d\\ude00")
LONG = 6


def _grammar(item: str, cap: int | None) -> Grammar:
    """``'"' capped(body, cap) '"'``; no cap for None."""
    body: Expr = Ref("body") if cap is None else Capped(Ref("body"), cap)
    return Grammar({"start": seq(lit('"'), body, lit('"')), **ITEMS[item]}, start="start")


@functools.cache
def _recognizer(item: str, cap: int | None) -> ReferenceRecognizer:
    return ReferenceRecognizer(_grammar(item, cap))


def _bodies(pieces: tuple[str, ...], n: int) -> list[str]:
    """Every concatenation of at most ``n`` pieces, sorted (consecutive walks share prefixes)."""
    return sorted({"".join(t) for k in range(n + 1) for t in itertools.product(pieces, repeat=k)})


@functools.cache
def _in_item(item: str, body: str) -> bool:
    """The item accepts ``body`` (the uncapped reference); it then is a JSON string body."""
    ok = _recognizer(item, None).accepts(f'"{body}"')
    assert not ok or isinstance(json.loads(f'"{body}"'), str), body
    return ok


def expected(item: str, cap: int, body: str) -> bool:
    return _in_item(item, body) and len(json.loads(f'"{body}"')) <= cap


CASES = [(item, cap) for item in ITEMS for cap in CAPS]
IDS = [f"{item}-{cap}" for item, cap in CASES]


# --------------------------------------------------------------------------- whole strings


@pytest.mark.parametrize(("item", "cap"), CASES, ids=IDS)
def test_acceptance_is_item_and_decoded_length(item: str, cap: int) -> None:
    rec = _recognizer(item, cap)
    for pieces, n in ((PIECES, WIDE), (LONG_PIECES, LONG)):
        for body in _bodies(pieces, n):
            assert rec.accepts(f'"{body}"') == expected(item, cap, body), body
            assert not rec.accepts(f'"{body}"a')


@pytest.mark.parametrize(("item", "cap"), CASES, ids=IDS)
def test_cap_off_by_one_is_caught(item: str, cap: int) -> None:
    # the negative control: the oracle for `cap` tells the reference for `cap + 1` apart
    rec = _recognizer(item, cap + 1)
    bodies = _bodies(LONG_PIECES, LONG) + _bodies(PIECES, WIDE)
    assert any(rec.accepts(f'"{b}"') != expected(item, cap, b) for b in bodies)


# --------------------------------------------------------------------------- prefixes


def _byte_prefixes(texts: list[str]) -> set[bytes]:
    return {t.encode()[:k] for t in texts for k in range(len(t.encode()) + 1)}


@functools.cache
def _viable(item: str, cap: int) -> frozenset[bytes]:
    """Byte prefixes of the accepted strings of up to ``WIDE`` pieces."""
    accepted = [f'"{b}"' for b in _bodies(PIECES, WIDE) if expected(item, cap, b)]
    return frozenset(_byte_prefixes(accepted))


def _probes() -> list[bytes]:
    """Byte prefixes of strings of up to ``WIDE - 1`` pieces, cut anywhere (mid-character too),
    leaving out the lone backslash (``\\`` then ``u`` could go on with a raw ``u``).

    With one piece to spare the enumeration is exact for them: for these items a viable one is
    finished by completing its cut piece with a piece that begins the fewest characters (a
    ``\\u00e9`` after a ``\\u``, a ``\\ude00`` after a ``\\ud83d\\``), plus at most one more
    piece where the item still wants a character (a word after a space): within ``WIDE`` pieces.
    """
    pieces = tuple(p for p in PIECES if p != "\\")
    return sorted(_byte_prefixes([f'"{b}"' for b in _bodies(pieces, WIDE - 1)]))


PROBES = _probes()


@pytest.mark.parametrize(("item", "cap"), CASES, ids=IDS)
def test_prefix_viability_against_enumeration(item: str, cap: int) -> None:
    rec = _recognizer(item, cap)
    viable = _viable(item, cap)
    for probe in PROBES:
        assert rec.is_prefix(probe) == (probe in viable), probe


@pytest.mark.parametrize(("item", "cap"), CASES, ids=IDS)
def test_token_masks_equal_per_token_definition(item: str, cap: int) -> None:
    # one shared walk with a scratch memo over many counts must match fresh per-token queries
    rnd = random.Random(cap)
    texts = [f'"{b}"' for b in _bodies(PIECES, 3)]
    vocab = sorted({t.encode()[i:j] for t in texts for i, j in [sorted(rnd.sample(range(12), 2))]})
    vocab = sorted(vocab + [b"", b"\xff", "é".encode()[:1]], key=lambda _: rnd.random())
    rec = ReferenceRecognizer(_grammar(item, cap))
    for prefix in PROBES[::37]:
        mask = rec.allowed_tokens(prefix, vocab)
        fresh = _recognizer(item, cap)
        assert mask.tolist() == [t != b"" and fresh.is_prefix(prefix + t) for t in vocab], prefix


# --------------------------------------------------------------------------- named cases

# (item, cap, data, is_prefix, is_complete): the decisions that a counting rule gets wrong first
NAMED = {
    # a viable item prefix with a count within the cap, but the item wants one more character
    "space-needs-a-word": ("words", 2, b'"a ', False, False),
    "space-then-word-fits": ("words", 3, b'"a b"', True, True),
    "pair-is-one-character": ("words", 1, b'"\\ud83d\\ude00"', True, True),
    "pair-half-read": ("words", 1, b'"\\ud83d\\ude0', True, False),
    "escape-begun-counts": ("words", 1, b'"a\\', False, False),
    "u-escape-begun": ("words", 1, b'"\\u00', True, False),
    "split-utf8-counts": ("words", 1, b'"a\xc3', False, False),
    "split-utf8-fits": ("words", 2, b'"a\xc3', True, False),
    "lone-high-then-raw": ("u-escapes", 2, b'"\\ud83da"', True, True),
    "lone-high-then-raw-over": ("u-escapes", 1, b'"\\ud83da', False, False),
    "high-then-low-escape": ("u-escapes", 1, b'"\\ud83d\\udc', True, False),
    "high-then-other-escape": ("u-escapes", 1, b'"\\ud83d\\u0', False, False),
    "high-then-high-escape": ("u-escapes", 1, b'"\\ud83d\\ud8', False, False),
    "two-lone-highs": ("u-escapes", 2, b'"\\ud83d\\ud83d"', True, True),
    "right-linear-tail": ("right-linear", 2, b'"\\u00e9\\n"', True, True),
    "right-linear-state": ("right-linear", 2, b'"aa', False, False),
    "right-linear-over": ("right-linear", 2, b'"a\\n\\', False, False),
    "bad-escape": ("words", 5, b'"\\a', False, False),
    "cap-zero-empty": ("abc", 0, b'""', True, True),
    "cap-zero-nothing-more": ("abc", 0, b'"a', False, False),
}


@pytest.mark.parametrize("name", list(NAMED))
def test_named_cases(name: str) -> None:
    item, cap, data, prefix, complete = NAMED[name]
    rec = ReferenceRecognizer(_grammar(item, cap))
    assert rec.is_prefix(data) == prefix
    assert rec.is_complete(data) == complete


def test_next_chars_inside_a_cap() -> None:
    rec = ReferenceRecognizer(_grammar("abc", 2))
    assert rec.next_chars('"') == char_set('abc"')
    assert rec.next_chars('"ab') == char_set('"')
    u = ReferenceRecognizer(_grammar("u-escapes", 1))
    assert u.next_chars('"\\ud83d') == char_set('\\"')
    assert u.next_chars('"\\ud83d\\u') == char_set("dD")  # only a low half fits
    assert u.next_chars('"\\ud83d\\ud') == char_set("cdefCDEF")


def test_empty_capped_language() -> None:
    # every string of the item decodes to 3 characters: nothing fits a cap of 2
    rec = ReferenceRecognizer(Grammar.single(choice(lit("x"), Capped(lit("abc"), 2))))
    assert rec.accepts("x") and not rec.is_prefix(b"a")
    assert rec.next_chars("") == char_set("x")


def test_nested_cap_is_refused() -> None:
    with pytest.raises(GrammarError):
        ReferenceRecognizer(Grammar.single(Capped(Capped(lit("a"), 1), 1)))


# --------------------------------------------------------------------------- the schema shape


def test_long_strings_at_a_cap_of_500() -> None:
    # '"' capped(str_3, 500) '"' with str_3 right-linear; hundreds of characters in seconds
    grammar = Grammar(
        {
            "start": seq(lit('"'), Capped(Ref("str_3"), 500), lit('"')),
            "str_3": choice(EMPTY, seq(encode_class(char_set("ab")), Ref("str_4"))),
            "str_4": choice(EMPTY, seq(encode_class(char_set("ab")), Ref("str_3"))),
        }
    )
    rec = ReferenceRecognizer(grammar)
    for body in ("ab" * 250, "ab" * 249 + "\\u0061b", "ab" * 250 + "a", "b\\u0062" * 251):
        assert rec.accepts(f'"{body}"') == (len(json.loads(f'"{body}"')) <= 500), body
    assert rec.is_prefix(('"' + "ab" * 250).encode())
    assert not rec.is_prefix(('"' + "ab" * 250 + "\\").encode())
    assert not rec.allowed_tokens(('"' + "ab" * 250).encode(), [b"a", b"\\u"]).any()
    mask = rec.allowed_tokens(('"' + "ab" * 249 + "a").encode(), [b"a", b"ab", b'b"'])
    assert mask.tolist() == [True, False, True]
