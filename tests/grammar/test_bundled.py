"""Bundled grammars: strings inside and outside each language, Lark's Earley parser
(``dynamic_complete``) as the oracle for the ``.lark`` files, ``json`` for the JSON ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _frontend_oracle import recognizer
from lark import Lark
from lark.exceptions import LarkError

from grammarsd.grammar import bundled
from grammarsd.grammar.bundled import list_bundled, load_bundled

REQUIRED = [
    "arithmetic.lark",
    "csv.lark",
    "function_call.lark",
    "json.gbnf",
    "json.lark",
    "python_expr.lark",
    "sql_select.lark",
]

# name: (strings in the language, strings outside it) -- checked by hand; Lark agrees below
CASES = {
    "json.lark": (
        ['{"a": [1, -2.5e3, true, null], "b": {}}', "[]", ' "x\\u00e9" ', "0", '{"k":"v"}'],
        ["{a: 1}", "[1,]", "01", "'x'", '{"a" 1}', "+1", ""],
    ),
    "arithmetic.lark": (
        ["1 + 2 * (x - 3) / y ^ 2", "-x", "2^3^4", "((a))", "3.5*b"],
        ["1 +", "(1", "1 2", "*3", ""],
    ),
    "sql_select.lark": (
        [
            "SELECT * FROM users",
            "select a, b.c FROM t AS x WHERE a = 1 AND (b > 'it''s' OR NOT c <> 2)",
            "SELECT id FROM t ORDER BY id DESC, name LIMIT 10;",
        ],
        ["SELECT FROM t", "SELECT a FROM", "SELECT a FROM t WHERE", "SELECT a FROM t LIMIT x"],
    ),
    "csv.lark": (
        ['a,b,c\n1,"x, y",3\n', '"he said ""hi""",2', ",,", "single"],
        ['"unterminated', 'a"b'],
    ),
    "function_call.lark": (
        ['get_weather(city="Paris", days=3)', "f()", "g(flags=[1, 2], ok=true, x=null)"],
        ["f(1)", "f(a=)", "f(a=1,)", "(a=1)", 'f(a="x)'],
    ),
    "python_expr.lark": (
        [
            "f(x, y=2)[0].attr + 3 ** -2",
            "lambda a, b: a if a > b else b",
            "not x in [1, 2] and {'k': None}",
            "a.b.c(d)(e)",
            "x is not None",
        ],
        ["f(x", "1 +", "lambda: ", "[1, 2", "a..b"],
    ),
}


def test_required_grammars_are_bundled() -> None:
    assert set(REQUIRED) <= set(list_bundled())


@pytest.mark.parametrize("name", list(CASES))
def test_bundled_lark_grammar(name: str) -> None:
    inside, outside = CASES[name]
    text = (bundled._directory() / name).read_text()
    parser = Lark(text, parser="earley", lexer="dynamic_complete")
    rec = recognizer(load_bundled(name))
    for s in inside:
        parser.parse(s)  # the oracle agrees the example is in the language
        assert rec.accepts(s), s
    for s in outside:
        with pytest.raises(LarkError):
            parser.parse(s)
        assert not rec.accepts(s), s


@pytest.mark.parametrize("name", ["json.lark", "json.gbnf"])
def test_bundled_json_agrees_with_json_module(name: str) -> None:
    rec = recognizer(load_bundled(name))
    docs = [{"a": [1, 2.5, None, True]}, [], 'é\n"', -0.0, 1e300, {"": {"x": []}}]
    for doc in docs:
        for indent in (None, 2):
            assert rec.accepts(json.dumps(doc, indent=indent))
    for bad in ["NaN", "[1 2]", '{"a":1,}', '"\x01"', "tru"]:
        assert not rec.accepts(bad)


def test_unknown_name_lists_available() -> None:
    with pytest.raises(KeyError, match="json.lark"):
        load_bundled("nope.lark")


def test_package_directory_is_preferred(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "only.gbnf").write_text('root ::= "x"')
    monkeypatch.setattr(bundled, "_PACKAGE_DIR", tmp_path)
    assert list_bundled() == ["only.gbnf"]
    assert recognizer(load_bundled("only.gbnf")).accepts("x")
