"""Python-flavor character classes checked against ``re`` itself over every code point.

For a pattern that matches exactly one character, ``re.findall`` over a string holding every
code point (surrogates excluded: the IR cannot hold them) lists exactly the characters ``re``
matches; the IR must be a class (or one-character literal) with the same members.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

import numpy as np
import pytest

from grammarsd.grammar import unicode as uni
from grammarsd.grammar.ir import CharClass, Literal
from grammarsd.grammar.regex import parse_regex

ALL = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)


def re_members(pattern: str) -> np.ndarray:
    mask = np.zeros(0x110000, dtype=np.bool_)
    found = re.findall(pattern, ALL)
    assert all(len(m) == 1 for m in found)
    mask[[ord(m) for m in found]] = True
    return mask


def ir_members(pattern: str) -> np.ndarray:
    expr = parse_regex(pattern)
    if isinstance(expr, Literal):
        assert len(expr.text) == 1
        expr = CharClass(((ord(expr.text),) * 2,))
    assert isinstance(expr, CharClass), expr
    return uni.class_to_mask(expr)


def assert_same(pattern: str) -> None:
    want, got = re_members(pattern), ir_members(pattern)
    diff = np.flatnonzero(want != got)
    assert diff.size == 0, (
        f"{pattern!r}: {diff.size} code points differ, first {[hex(int(c)) for c in diff[:8]]}"
    )


CATEGORY_PATTERNS = [
    r"\d",
    r"\D",
    r"\w",
    r"\W",
    r"\s",
    r"\S",
    r".",
    r"(?s).",
    r"[^\n]",
    r"(?a)\d",
    r"(?a)\w",
    r"(?a)\s",
    r"(?a)\W",
    r"[\d\s]",
    r"[^\w\s]",
    r"[a-z\d]",
    r"[^\W\d_]",
]

IGNORECASE_PATTERNS = [
    "(?i)a",
    "(?i)k",
    "(?i)s",
    "(?i)i",
    "(?i)I",
    "(?i)\u0130",
    "(?i)\u0131",
    "(?i)\u017f",
    "(?i)\u00b5",
    "(?i)\u03a3",
    "(?i)\u03c2",
    "(?i)\u1e9e",
    "(?i)\u00df",
    "(?i)\u2126",
    "(?i)\u212a",
    "(?i)\u0345",
    "(?i)\U00010400",
    "(?i)\U00010428",
    "(?i)\U0001e900",
    "(?i)[a-z]",
    "(?i)[A-Z]",
    "(?i)[^a-z]",
    "(?i)[k]",
    "(?i)[^k]",
    "(?i)[\u0100-\u017f]",
    "(?i)[\u0370-\u03ff]",
    "(?i)[\u0390\u03b0]",
    "(?i)[\U00010400-\U0001044f]",
    "(?i)[\U00010428]",
    "(?i)[^\U00010400]",
    "(?i)[a-\U0010ffff]",
    "(?i)[\\w]",
    "(?i)\\w",
    "(?i)[\\W]",
    "(?i)[a\\W]",
    "(?i)[\\d]",
    "(?i)[^\\s]",
    "(?i)[\u1e00-\u1eff\\d]",
    "(?i)[^a-z\u0131]",
    "(?ia)k",
    "(?ia)[a-z]",
    "(?ia)[\u017f]",
    "(?ia)[^a-z]",
    "(?ia)\\w",
    "(?ia)[\U00010400-\U0001044f]",
    "(?i)[\u24b6-\u24e9]",
    "(?i)[\u10a0-\u10ff]",
]


@pytest.mark.parametrize("pattern", CATEGORY_PATTERNS)
def test_categories_match_re(pattern: str) -> None:
    assert_same(pattern)


@pytest.mark.parametrize("pattern", IGNORECASE_PATTERNS)
def test_ignorecase_matches_re(pattern: str) -> None:
    assert_same(pattern)


def test_ignorecase_every_cased_bmp_literal() -> None:
    """Every cased BMP character as a literal: same members as ``re`` (via one big class test).

    For each cased ``c``, ``(?i)c`` must match exactly the characters ``re`` says; checking all
    ~2800 of them one by one would be slow, so compare on the candidate set (every character
    whose simple lowercase or uppercase is related) plus a random sample of others.
    """
    rng = np.random.default_rng(0)
    cased = np.flatnonzero(uni.cased_mask()[:0x10000])
    related = np.flatnonzero(uni.cased_mask() | (uni.simple_lower() != np.arange(0x110000)))
    sample = rng.choice(0x110000, 2000, replace=False)
    probe = sorted(set(related.tolist()) | {int(c) for c in sample} - set(range(0xD800, 0xE000)))
    probe_text = [chr(c) for c in probe]
    for c in rng.choice(cased, 300, replace=False).tolist():
        pattern = "(?i)" + re.escape(chr(c))
        compiled = re.compile(pattern)
        got = uni.class_to_mask(_as_class(parse_regex(pattern)))
        for cp, ch in zip(probe, probe_text, strict=True):
            assert bool(compiled.fullmatch(ch)) == bool(got[cp]), (hex(c), hex(cp))


def _as_class(expr: object) -> CharClass:
    if isinstance(expr, Literal):
        return CharClass(((ord(expr.text),) * 2,))
    assert isinstance(expr, CharClass)
    return expr


def test_class_tables_hold_the_predicates_they_stand_for() -> None:
    """Python ``re``'s ``\\d \\w \\s`` and ECMA's ``\\s`` (read off ``re`` by the tables) against
    their definitions asked of every code point: the ``str`` predicates, and ECMA-262's
    WhiteSpace and LineTerminator (its listed characters and Unicode category Zs)."""
    every = [chr(cp) for cp in range(0x110000)]

    def holding(test: Callable[[str], bool]) -> np.ndarray:
        return np.fromiter(map(test, every), dtype=np.bool_, count=len(every))

    assert (uni.category_mask("py_digit") == holding(str.isdecimal)).all()
    assert (uni.category_mask("py_word") == holding(lambda c: c.isalnum() or c == "_")).all()
    assert (uni.category_mask("py_space") == holding(str.isspace)).all()
    listed = set("\t\v\f \u00a0\ufeff\n\r\u2028\u2029")
    ecma = holding(lambda c: c in listed or unicodedata.category(c) == "Zs")
    assert (uni.category_mask("ecma_space") == ecma).all()
    assert ecma.sum() > len(listed)  # category Zs adds some (U+3000, U+2000-U+200A, ...)


def test_tables_are_built_once() -> None:
    """Each table is cached: the second call is the same object."""
    first = uni.category_mask("py_word")
    again = uni.category_mask("py_word")
    assert again is first
    assert uni.simple_lower() is uni.simple_lower()
