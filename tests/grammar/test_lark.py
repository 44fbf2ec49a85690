"""Lark front end against Lark's own Earley parser (``lexer="dynamic_complete"``: every split
of the input into terminals is tried, i.e. scannerless CFG semantics) on many strings."""

from __future__ import annotations

import itertools

import pytest
from _frontend_oracle import recognizer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lark import Lark
from lark.exceptions import LarkError

from grammarsd.errors import GrammarSyntaxError, UnsupportedSyntaxError
from grammarsd.grammar.lark import grammar_from_lark


def lark_oracle(text: str, start: str = "start"):
    parser = Lark(text, parser="earley", lexer="dynamic_complete", start=start)

    def accepts(s: str) -> bool:
        try:
            parser.parse(s)
        except LarkError:
            return False
        return True

    return accepts


def strings(alphabet: str, max_len: int) -> list[str]:
    return ["".join(t) for n in range(max_len + 1) for t in itertools.product(alphabet, repeat=n)]


# name: (grammar, alphabet for exhaustive strings, max length, extra strings)
GRAMMARS = {
    "inline_rules_and_filtered": (
        """
        start: _pair+ tail?
        _pair: "a" x
        ?x: "b" | "c" x
        tail: "!"
        """,
        "abc!",
        5,
        ["abacb!", "ab!!"],
    ),
    "maybe_and_ranges": (
        """
        start: "x" [y] z~2..3
        y: "y"
        z: "z" | "w"
        """,
        "xyzw",
        5,
        ["xyzwz", "xzzzz"],
    ),
    "case_insensitive_terms": (
        """
        start: "ab"i WORD
        WORD: /c[de]+/i
        """,
        "abAcdE",
        5,
        ["ABCDE", "aBcEd"],
    ),
    "templates": (
        """
        start: sep{item, ","} ";"
        sep{x, s}: x (s x)*
        item: "a" | "bb"
        """,
        "ab,;",
        6,
        ["a,bb,a;", "bb;"],
    ),
    "common_imports_and_ignore": (
        """
        start: NAME "=" value ("," NAME "=" value)*
        ?value: NUMBER | ESCAPED_STRING | SIGNED_INT
        %import common.CNAME -> NAME
        %import common.NUMBER
        %import common.SIGNED_INT
        %import common.ESCAPED_STRING
        %import common.WS
        %ignore WS
        """,
        "a=1 ",
        5,
        ['x = "hi"', "x=1.5e3 , y = -2", 'x="a\\"b"', "x=1,", " a = 1 ", "1=a", 'x="\n"'],
    ),
    "ignore_two_terminals": (
        """
        start: item*
        item: "a" "b"
        COMMENT: /#[^\\n]*\\n/
        %ignore COMMENT
        %ignore " "
        """,
        "ab #\n",
        5,
        ["ab # c\nab", "#x\n ab", "a#\nb"],
    ),
    "left_recursion": (
        """
        ?start: sum
        ?sum: sum "+" atom | atom
        atom: "1" | "(" sum ")"
        """,
        "1+()",
        6,
        ["(1+1)+1", "((1))"],
    ),
    "terminal_composition": (
        """
        start: NUM (OP NUM)*
        NUM: DIGIT+ ("." DIGIT+)?
        DIGIT: "0".."2"
        OP: "+" | "-"
        """,
        "01.+",
        5,
        ["1.2+0", "1."],
    ),
    "zero_width_terminal_via_rule": (
        """
        start: "<" inner? ">"
        inner: /x+/ | /y/
        """,
        "<>xy",
        5,
        [],
    ),
}


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_lark_grammar_matches_lark_earley(name: str) -> None:
    text, alphabet, max_len, extra = GRAMMARS[name]
    oracle = lark_oracle(text)
    rec = recognizer(grammar_from_lark(text))
    samples = strings(alphabet, max_len) + extra
    accepted = 0
    for s in samples:
        want = oracle(s)
        accepted += want
        assert rec.accepts(s) == want, (name, s, want)
    assert accepted > 0  # the table must exercise the accepting side too


SOUP = GRAMMARS["common_imports_and_ignore"][0]
SOUP_ORACLE = lark_oracle(SOUP)
SOUP_RECOGNIZER = recognizer(grammar_from_lark(SOUP))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["x", "=", "1", "2.5", '"s"', ",", " ", "-", "ab"]), max_size=8))
def test_lark_random_token_soup(parts: list[str]) -> None:
    s = "".join(parts)
    assert SOUP_RECOGNIZER.accepts(s) == SOUP_ORACLE(s), s


def test_ignored_terminals_have_no_maximal_munch() -> None:
    """Documented difference: Lark matches ignored terminals greedily even with
    ``dynamic_complete``; in scannerless CFG semantics ``#`` alone is a COMMENT here."""
    text = 'start: "a" "b"\nCOMMENT: /#[^\\n]*/\n%ignore COMMENT'
    assert recognizer(grammar_from_lark(text)).accepts("a#b")
    assert not lark_oracle(text)("a#b")


def test_custom_start_rule() -> None:
    text = 'start: "a"\nother: "b"+'
    g = grammar_from_lark(text, start="other")
    assert g.start == "other"
    rec = recognizer(g)
    assert rec.accepts("bb") and not rec.accepts("a")


def test_ignore_is_allowed_between_symbols_and_at_ends() -> None:
    text = 'start: "a" "b"\n%ignore " "'
    rec = recognizer(grammar_from_lark(text))
    assert all(rec.accepts(s) for s in ["ab", " ab", "a b", "ab  ", "  a  b  "])
    assert not rec.accepts("a  c")


ERRORS = {
    # name: (text, error type, construct or None, line, column)
    "rule_priority": ('start: a\na.2: "x"', UnsupportedSyntaxError, "priority", 2, 1),
    "terminal_priority": ('start: A\nA.3: "x"', UnsupportedSyntaxError, "priority", 2, 1),
    "declare": ("start: A\n%declare A", UnsupportedSyntaxError, "%declare", 2, 1),
    "lookahead_terminal": ("start: X\nX: /a(?=b)/", UnsupportedSyntaxError, "lookahead", 2, 1),
    "undefined_rule": ('start: a b\nb: "x"', GrammarSyntaxError, None, 1, 8),
    "duplicate_rule": ('start: "a"\nstart: "b"', GrammarSyntaxError, None, 2, 1),
    "unclosed_paren": ('start: ("a"', GrammarSyntaxError, None, 1, 12),
    "bad_token": ('start: "a"\nx: "a" %ign', GrammarSyntaxError, None, 2, 8),
    "bad_regex": ("start: X\nX: /a[/", GrammarSyntaxError, None, 2, 1),
    "bad_range": ('start: "a"~3..2', GrammarSyntaxError, None, 1, 1),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_lark_errors(name: str) -> None:
    text, kind, construct, line, column = ERRORS[name]
    with pytest.raises(kind) as info:
        grammar_from_lark(text)
    if kind is GrammarSyntaxError:
        assert not isinstance(info.value, UnsupportedSyntaxError)
    else:
        assert info.value.construct == construct
    assert (info.value.line, info.value.column) == (line, column)


def test_missing_start_rule() -> None:
    with pytest.raises(GrammarSyntaxError):
        grammar_from_lark('start: "a"', start="nope")
