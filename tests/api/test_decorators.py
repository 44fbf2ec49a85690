"""@grammar tools: schemas from signatures, generated arguments that validate, tool choice.

Oracles: Pydantic's own ``TypeAdapter`` over the function (arguments validate and the function is
called with them), Python's ``re`` and lark's Earley parser for free-form tools, ``json.loads``.
"""

from __future__ import annotations

import datetime
import inspect
import json
import re
from typing import Annotated, Any, Literal

import lark
import pydantic
import pytest

import grammarsd as gs
from grammarsd.api.decorators import Tool, choose_tool, grammar, json_string_body, tools_grammar
from grammarsd.api.models import LoadedModel
from grammarsd.errors import GrammarError
from grammarsd.grammar import ir
from grammarsd.grammar.regex import grammar_from_regex
from grammarsd.matcher.reference import ReferenceRecognizer

CALLS: list[tuple[str, dict[str, Any]]] = []


@grammar
def get_weather(
    city: Annotated[Literal["Oslo", "Paris"], pydantic.Field(description="City name")],
    unit: Literal["C", "F"] = "C",
    days: Annotated[int, pydantic.Field(ge=1, le=3)] = 1,
) -> str:
    """Current weather for a city."""
    CALLS.append(("get_weather", {"city": city, "unit": unit, "days": days}))
    return f"{city}:{unit}:{days}"


@grammar
def book(when: datetime.date, seats: Literal[1, 2], /) -> str:
    """Book a table."""
    CALLS.append(("book", {"when": when, "seats": seats}))
    return f"{when.isoformat()}x{seats}"


SQL = r'''
start: "SELECT " COLS " FROM " NAME
COLS: /[a-z]{1,3}(, [a-z]{1,3}){0,2}/
NAME: /[a-z]{1,4}/
'''


@grammar(lark=SQL)
def run_sql(query: str) -> str:
    """Run a read-only SQL query."""
    CALLS.append(("run_sql", {"query": query}))
    return query


@grammar(regex=r'[0-9]{2}"[a-c]\\')
def tag(code: str) -> str:
    """A code with a quote and a backslash (JSON escaping is exercised)."""
    CALLS.append(("tag", {"code": code}))
    return code


def _lark_accepts(text: str) -> bool:
    try:
        lark.Lark(SQL, parser="earley", lexer="dynamic_complete").parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


def _validate_against_function(fn: Any, args: dict[str, Any]) -> None:
    """The oracle: Pydantic's ``validate_call`` over the undecorated function, every argument
    passed by position (the test tools have no keyword-only parameters)."""
    CALLS.clear()
    pydantic.validate_call(fn)(*(args[n] for n in inspect.signature(fn).parameters))
    CALLS.clear()


# -- decoration time ---------------------------------------------------------------------------


def test_schema_from_signature() -> None:
    s = get_weather.schema
    assert s["description"] == "Current weather for a city."
    assert s["properties"]["city"]["description"] == "City name"
    assert s["required"] == ["city"]
    assert s["additionalProperties"] is False
    # The same schema Pydantic derives from the function itself (the oracle).
    ref = pydantic.TypeAdapter(get_weather.fn).json_schema()
    assert {k: v for k, v in s["properties"].items()} == ref["properties"]


def test_tool_stays_callable() -> None:
    assert get_weather("Oslo", unit="F") == "Oslo:F:1"
    assert isinstance(get_weather, Tool)
    assert get_weather.__name__ == "get_weather"
    assert get_weather.__doc__ == "Current weather for a city."


def test_untyped_parameter_is_refused() -> None:
    with pytest.raises(gs.GrammarError, match="'b' has no type annotation"):

        @grammar
        def f(a: int, b) -> None:  # type: ignore[no-untyped-def]
            pass


def test_variadic_parameter_is_refused() -> None:
    with pytest.raises(gs.GrammarError, match="variadic"):

        @grammar
        def f(*names: str) -> None:
            pass


@pytest.mark.parametrize(
    "source", ["def f(a: int) -> None: ...", "def f(a: str, b: str) -> None: ...", "def f() -> None: ..."]
)
def test_free_form_needs_one_str_parameter(source: str) -> None:
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    with pytest.raises(gs.GrammarError, match="exactly one `str` parameter"):
        grammar(regex="a+")(namespace["f"])


def test_malformed_regex_fails_at_decoration() -> None:
    with pytest.raises(gs.GrammarSyntaxError):

        @grammar(regex="(a")
        def f(x: str) -> None:
            pass


def test_validate_rejects_bad_arguments() -> None:
    with pytest.raises(gs.OutputValidationError):
        get_weather.validate({"city": "Rome"})
    with pytest.raises(gs.OutputValidationError):
        get_weather.validate({"city": "Oslo", "extra": 1})
    with pytest.raises(gs.OutputValidationError):
        run_sql.validate({"query": "DROP TABLE x"})


def test_json_string_body_escapes_exactly() -> None:
    """Strings of the escaped grammar are exactly the JSON bodies of the original's strings."""
    pattern = r'[\x00-\x22\\a]{0,2}'
    escaped = ReferenceRecognizer(json_string_body(grammar_from_regex(pattern)))
    accepts = escaped.accepts
    alphabet = [chr(c) for c in range(0x23)] + ["\\", "a", "b"]
    strings = [""] + alphabet + [a + b for a in alphabet for b in alphabet]
    for s in strings:
        body = json.dumps(s, ensure_ascii=False)[1:-1]
        assert accepts(body) == bool(re.fullmatch(pattern, s)), s
    # and nothing that is not a canonical body: a raw quote, a raw control char
    assert not accepts('"')
    assert not accepts("\n")


@pytest.mark.parametrize("body", [ir.Excluding(("a",), ir.ANY_CHAR), ir.Capped(ir.lit("a"), 1)],
                         ids=["excluding", "capped"])
def test_json_string_body_refuses_what_is_a_json_body_already(body: ir.Expr) -> None:
    with pytest.raises(GrammarError, match="cannot be escaped"):
        json_string_body(ir.Grammar.single(ir.seq(ir.lit("<"), body)))


# -- with the tiny model -----------------------------------------------------------------------

GEN = {"max_tokens": 80, "json_options": {"whitespace": "compact"}}


@pytest.mark.parametrize("seed", [0, 1])
def test_generate_arguments_validate(tiny_model: LoadedModel, seed: int) -> None:
    args = get_weather.generate(tiny_model, "Weather?", seed=seed, temperature=1.0, **GEN)
    _validate_against_function(get_weather.fn, args)
    assert args["city"] in ("Oslo", "Paris") and args["unit"] in ("C", "F")
    assert 1 <= args["days"] <= 3
    CALLS.clear()
    assert get_weather.invoke(args) == f"{args['city']}:{args['unit']}:{args['days']}"
    assert CALLS == [("get_weather", args)]


def test_call_positional_only_and_dates(tiny_model: LoadedModel) -> None:
    CALLS.clear()
    out = book.call(tiny_model, "Book it", seed=3, temperature=1.0, **GEN)
    ((name, args),) = CALLS
    assert name == "book" and isinstance(args["when"], datetime.date)
    assert out == f"{args['when'].isoformat()}x{args['seats']}"


def test_free_form_tools_generate_in_language(tiny_model: LoadedModel) -> None:
    q = run_sql.generate(tiny_model, "Query:", seed=0, temperature=1.0, max_tokens=40)
    assert _lark_accepts(q["query"])
    code = tag.generate(tiny_model, "Tag:", seed=0, temperature=1.0, max_tokens=20)["code"]
    assert re.fullmatch(r'[0-9]{2}"[a-c]\\', code)


@pytest.mark.parametrize("seed", [0, 1, 3])  # today: book, tag, run_sql (any tool is valid)
def test_choose_tool(tiny_model: LoadedModel, seed: int) -> None:
    tools = [get_weather, book, run_sql, tag]
    CALLS.clear()
    call = choose_tool(tiny_model, "Pick a tool:", tools, seed=seed, temperature=1.0, max_tokens=80)
    assert call.tool in tools
    result = call()
    ((name, args),) = CALLS
    assert name == call.name and args == call.arguments
    if call.tool is run_sql:
        assert _lark_accepts(args["query"]) and result == args["query"]
    elif call.tool is tag:
        assert re.fullmatch(r'[0-9]{2}"[a-c]\\', args["code"])
    else:  # the oracle: Pydantic validating the same arguments against the function itself
        _validate_against_function(call.tool.fn, args)


def test_tools_grammar_names_are_distinct() -> None:
    with pytest.raises(ValueError, match="distinct"):
        tools_grammar([get_weather, get_weather])
    g = tools_grammar([get_weather, run_sql])
    assert g.start == "start" and all(n == "start" or n.startswith(("t0_", "t1_")) for n in g.rules)
