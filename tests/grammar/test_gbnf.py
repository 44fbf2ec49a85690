"""GBNF front end: real-world llama.cpp-style grammars against independent oracles (``json``,
``re``, an equivalent Lark grammar run by Lark's Earley parser), plus syntax and errors."""

from __future__ import annotations

import itertools
import json
import re

import pytest
from _frontend_oracle import assert_agrees, recognizer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lark import Lark
from lark.exceptions import LarkError

from grammarsd.errors import GrammarSyntaxError, UnsupportedSyntaxError
from grammarsd.grammar.bundled import load_bundled
from grammarsd.grammar.gbnf import grammar_from_gbnf


def strings(alphabet: str, max_len: int) -> list[str]:
    return ["".join(t) for n in range(max_len + 1) for t in itertools.product(alphabet, repeat=n)]


# --------------------------------------------------------------------------- json.gbnf


def _json_oracle(s: str) -> bool:
    def reject(_: str) -> object:
        raise ValueError("NaN/Infinity are not JSON")

    try:
        json.loads(s, parse_constant=reject)
    except ValueError:
        return False
    return True


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)


@pytest.fixture(scope="module")
def json_gbnf():
    return recognizer(load_bundled("json.gbnf"))


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    value=JSON_VALUES,
    indent=st.sampled_from([None, 0, 2]),
    cut=st.integers(0, 40),
    junk=st.sampled_from(["", "x", ",", "]", '"', "\\", "\x01", " ", "\n\t", "01", "+1"]),
)
def test_json_gbnf_matches_json_module(json_gbnf, value, indent, cut, junk) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=bool(cut % 2))
    mutated = text[:cut] + junk + text[cut:]
    for s in (text, " " + text + "\n", mutated):
        assert json_gbnf.accepts(s) == _json_oracle(s), s


@pytest.mark.parametrize(
    "s",
    [
        "",
        "{}",
        "[1,]",
        '{"a":}',
        "-0.5e+3",
        "01",
        "1.",
        ".5",
        '"\\u12G4"',
        '"\\x"',
        "nul",
        '"\t"',
        "[[[]]]",
        ' { "k" : [ true , false , null ] } ',
        '"\\ud800"',
        "-",
        "1e5",
    ],
)
def test_json_gbnf_edge_cases(json_gbnf, s: str) -> None:
    assert json_gbnf.accepts(s) == _json_oracle(s)


# --------------------------------------------------------------------------- other grammars

LIST_GBNF = r"""
root ::= item+

# Excludes various line break characters
item ::= "- " [^\r\n\x0b\x0c\x85\u2028\u2029]+ "\n"
"""
LIST_RE = "(- [^\r\n\x0b\x0c\x85\u2028\u2029]+\n)+"

ARITH_GBNF = r"""
root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
"""
ARITH_LARK = r"""
start: (expr "=" WS? term "\n")+
expr: term (/[-+*\/]/ term)*
term: IDENT | NUM | "(" WS? expr ")" WS?
IDENT: /[a-z][a-z0-9_]*[ \t\n]*/
NUM: /[0-9]+[ \t\n]*/
WS: /[ \t\n]+/
"""


def test_list_gbnf_matches_re() -> None:
    samples = strings("- a\n\x85", 6) + ["- milk\n- eggs\n", "- a\n-  \n", "- \u2028\n"]
    assert_agrees(grammar_from_gbnf(LIST_GBNF), lambda s: bool(re.fullmatch(LIST_RE, s)), samples)


def test_arithmetic_gbnf_matches_equivalent_lark() -> None:
    parser = Lark(ARITH_LARK, parser="earley", lexer="dynamic_complete")

    def oracle(s: str) -> bool:
        try:
            parser.parse(s)
        except LarkError:
            return False
        return True

    samples = strings("a1+(=\n", 5) + ["x = (a+1)*b\n", "a1_=2\nb=c\n", "(a) = b \n", "a=\n"]
    assert_agrees(grammar_from_gbnf(ARITH_GBNF), oracle, samples)


SYNTAX = {
    # name: (gbnf, equivalent Python regex, alphabet)
    "escapes": (
        r'root ::= "\x41\u00e9\U0001F600\t\n\r\\\"\[\]"',
        'A\u00e9\U0001f600\t\n\r\\\\"\\[\\]',
        "A",
    ),
    "classes": (r"root ::= [a-c] [^a-c\]] [\x30-\x32-]", r"[a-c][^a-c\]][0-2\-]", "ab]0-z"),
    "any_char": ("root ::= . .?", r"(?s:.)(?s:.)?", "a\n"),
    "repetitions": (
        'root ::= "a"{2} "b"{1,} "c"{0,2} "d"{ 1 , 3 }',
        "a{2}b{1,}c{0,2}d{1,3}",
        "abcd",
    ),
    "postfix_stack": ('root ::= ("a"? "b")+', "(a?b)+", "ab"),
    "multiline_alternates": ('root ::= "a" |\n  "b" | # comment\n  "c"\n', "a|b|c", "abc"),
    "nested_newlines": ('root ::= (\n  "a"\n  "b"\n)*\n', "(ab)*", "ab"),
    "empty_alternative": ('root ::= "x" ( | "y")', "xy?", "xy"),
    "dashed_names": ('root ::= my-rule2\nmy-rule2 ::= "z"', "z", "z"),
    "utf8_literal": ('root ::= "héllo 字"', "héllo 字", "h"),
}


@pytest.mark.parametrize("name", list(SYNTAX))
def test_gbnf_syntax_matches_re(name: str) -> None:
    text, pattern, alphabet = SYNTAX[name]
    samples = strings(alphabet, 6)
    samples.append(re.sub(r"\\(.)", r"\1", pattern) if name in {"escapes", "utf8_literal"} else "")
    assert_agrees(grammar_from_gbnf(text), lambda s: bool(re.fullmatch(pattern, s)), samples, name)
    assert any(re.fullmatch(pattern, s) for s in samples), "table must include accepted strings"


def test_custom_start() -> None:
    g = grammar_from_gbnf('root ::= "a"\nother ::= "b"', start="other")
    assert recognizer(g).accepts("b") and g.start == "other"


ERRORS = {
    # name: (text, line, column)
    "undefined_rule": ('root ::= "a" missing\n', 1, 14),
    "duplicate_rule": ('root ::= "a"\nroot ::= "b"', 2, 1),
    "missing_assign": ('root = "a"', 1, 6),
    "unterminated_literal": ('root ::= "abc', 1, 14),
    "unterminated_class": ("root ::= [abc", 1, 10),
    "unknown_escape": (r'root ::= "\q"', 1, 11),
    "bad_hex": (r'root ::= "\x4"', 1, 11),
    "dangling_star": ("root ::= *", 1, 10),
    "unclosed_paren": ('root ::= ("a"\n', 2, 1),
    "bad_repetition": ('root ::= "a"{3,1}', 1, 13),
    "trailing_junk": ('root ::= "a" )', 1, 14),
    "missing_root": ('item ::= "a"', 1, 13),
    "newline_ends_rule": ('root ::= "a"\n  "b"', 2, 3),
    "range_order": ("root ::= [z-a]", 1, 12),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_gbnf_errors(name: str) -> None:
    text, line, column = ERRORS[name]
    with pytest.raises(GrammarSyntaxError) as info:
        grammar_from_gbnf(text)
    assert not isinstance(info.value, UnsupportedSyntaxError)
    assert (info.value.line, info.value.column) == (line, column)


def test_token_references_are_unsupported() -> None:
    with pytest.raises(UnsupportedSyntaxError) as info:
        grammar_from_gbnf("root ::= <[1234]>")
    assert info.value.construct == "token reference"
    assert (info.value.line, info.value.column) == (1, 10)
