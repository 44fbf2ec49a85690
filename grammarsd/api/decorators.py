"""``@grammar``: typed Python functions as constrained tool calls (ecosystem research §2, Design A).

    @grammar
    def get_weather(city: str, unit: Literal["C", "F"] = "C") -> str:
        '''Current weather for a city.'''

    get_weather.schema                       # JSON Schema of the arguments (from the signature)
    get_weather.generate(model, prompt)      # validated arguments: {"city": ..., "unit": ...}
    get_weather.call(model, prompt)          # ... and the function's result
    choose_tool(model, prompt, [get_weather, run_sql])   # the model picks one: ToolCall

Data structures. A :class:`Tool` wraps the function (it stays callable as itself) with either

* ``arguments`` — a Pydantic model built from the signature (``extra="forbid"``), whose JSON Schema
  is ``schema`` and which validates generated arguments; or
* ``format`` — for free-form tools (``@grammar(regex=...)`` / ``@grammar(lark=...)``), whose one
  ``str`` parameter is constrained by the regex or Lark grammar directly.

:func:`choose_tool` builds one grammar: a choice, over the tools, of the JSON text
``{"tool": "<name>", "arguments": <arguments>}``, where a free-form tool's argument is a JSON string
whose content is its regex/Lark language (canonically escaped, :func:`json_string_body`).

Signatures are checked at decoration time: every parameter needs a type annotation, ``*args`` and
``**kwargs`` are refused, and a free-form tool has exactly one ``str`` parameter
(:class:`~grammarsd.errors.GrammarError`, with the parameter named).
"""

from __future__ import annotations

import functools
import inspect
import json
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, overload

import pydantic

from grammarsd.api.generate import generate, strict_schema
from grammarsd.errors import GrammarError, OutputValidationError
from grammarsd.grammar import ir
from grammarsd.grammar.json_schema import schema_to_grammar

R = TypeVar("R")

FormatSyntax = Literal["regex", "lark"]


@dataclass(frozen=True)
class FreeFormFormat:
    """The grammar of a free-form tool's one string argument (OpenAI custom-tool style)."""

    syntax: FormatSyntax
    definition: str

    def to_ir(self) -> ir.Grammar:
        """The argument's language as grammar IR (raises ``GrammarSyntaxError`` if malformed)."""
        if self.syntax == "regex":
            from grammarsd.grammar.regex import grammar_from_regex

            return grammar_from_regex(self.definition)
        from grammarsd.grammar.lark import grammar_from_lark

        return grammar_from_lark(self.definition)


class Tool(Generic[R]):
    """A function made into a constrained tool by :func:`grammar`.

    Attributes
    ----------
    fn : the wrapped function; ``tool(*args, **kwargs)`` calls it unchanged.
    name : the function's name (the ``"tool"`` value in :func:`choose_tool` output).
    description : the function's docstring ("" without one).
    arguments : the Pydantic model of the arguments (typed tools), else ``None``.
    format : the free-form grammar (free-form tools), else ``None``.
    schema : JSON Schema of the arguments object.
    """

    def __init__(self, fn: Callable[..., R], fmt: FreeFormFormat | None = None) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name: str = fn.__name__
        self.description: str = inspect.getdoc(fn) or ""
        self.format = fmt
        self._signature = inspect.signature(fn)
        params = _typed_parameters(fn, self._signature)
        if fmt is None:
            self.arguments: type[pydantic.BaseModel] | None = _arguments_model(self.name, params)
            self.schema: dict[str, Any] = self.arguments.model_json_schema()
            self.schema.pop("title", None)
        else:
            self.arguments = None
            self._text_param = _single_str_parameter(self.name, params)
            fmt.to_ir()  # malformed regex / Lark fails here, at decoration time
            self.schema = {
                "type": "object",
                "properties": {self._text_param: {"type": "string"}},
                "required": [self._text_param],
                "additionalProperties": False,
            }
        if self.description:
            self.schema["description"] = self.description

    def __call__(self, *args: Any, **kwargs: Any) -> R:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        kind = "typed" if self.format is None else self.format.syntax
        return f"Tool({self.name}{self._signature}, {kind})"

    # -- arguments -----------------------------------------------------------------------

    def validate(self, arguments: Any) -> dict[str, Any]:
        """Validated arguments (parameter name -> value) from a mapping or JSON text.

        Raises ``OutputValidationError`` when they do not validate.
        """
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        if self.arguments is None:
            value = json.loads(text) if isinstance(arguments, str) else arguments
            if not (isinstance(value, dict) and set(value) == {self._text_param}):
                raise OutputValidationError(text, [f"expected {{{self._text_param!r}: str}}"])
            return self.validate_text(value[self._text_param])
        try:
            model = self.arguments.model_validate_json(text)
        except pydantic.ValidationError as exc:
            raise OutputValidationError(text, exc.errors(include_url=False)) from None
        return {name: getattr(model, name) for name in type(model).model_fields}

    def validate_text(self, text: Any) -> dict[str, Any]:
        """Arguments of a free-form tool from its one string, checked against its grammar."""
        assert self.format is not None
        if not isinstance(text, str) or not _in_language(self.format, text):
            raise OutputValidationError(str(text), [f"not in the tool's {self.format.syntax}"])
        return {self._text_param: text}

    def invoke(self, arguments: dict[str, Any]) -> R:
        """Call the function with validated ``arguments`` (positional-only ones by position)."""
        args, kwargs = [], {}
        for name, param in self._signature.parameters.items():
            if name not in arguments:
                continue  # left to its default
            if param.kind is inspect.Parameter.POSITIONAL_ONLY:
                args.append(arguments[name])
            else:
                kwargs[name] = arguments[name]
        return self.fn(*args, **kwargs)

    # -- generation ----------------------------------------------------------------------

    def generate(self, model: Any, prompt: Any, **options: Any) -> dict[str, Any]:
        """Generate this tool's arguments for ``prompt`` and return them validated.

        ``options`` are those of :func:`grammarsd.generate` (``max_tokens``, ``seed``, ...) except
        the output spec, which the tool supplies.
        """
        if self.format is None:
            assert self.arguments is not None
            value = generate(model, prompt, schema=self.arguments, **options)
            return {name: getattr(value, name) for name in type(value).model_fields}
        if self.format.syntax == "regex":
            text = generate(model, prompt, regex=self.format.definition, **options)
        else:
            text = generate(model, prompt, grammar=self.format.definition, **options)
        return self.validate_text(text)

    def call(self, model: Any, prompt: Any, **options: Any) -> R:
        """:meth:`generate` the arguments, then call the function with them."""
        return self.invoke(self.generate(model, prompt, **options))

    def call_grammar(self) -> ir.Grammar:
        """IR of ``{"tool": "<name>", "arguments": ...}`` (the :func:`choose_tool` alternative)."""
        if self.format is None:
            args = schema_to_grammar(strict_schema(self.schema))
        else:
            body = json_string_body(self.format.to_ir())
            key = json.dumps(self._text_param)
            args = _wrap(body, ir.lit("{" + key + ": \""), ir.lit("\"}"))
        head = '{"tool": ' + json.dumps(self.name, ensure_ascii=False) + ', "arguments": '
        return _wrap(args, ir.lit(head), ir.lit("}"))


@overload
def grammar(fn: Callable[..., R], /) -> Tool[R]: ...


@overload
def grammar(
    *, regex: str | None = None, lark: str | None = None
) -> Callable[[Callable[..., R]], Tool[R]]: ...


def grammar(
    fn: Callable[..., R] | None = None, /, *, regex: str | None = None, lark: str | None = None
) -> Tool[R] | Callable[[Callable[..., R]], Tool[R]]:
    """Make a typed function a constrained tool (see the module docstring).

    ``@grammar`` derives the arguments' JSON Schema from the signature; ``@grammar(regex=...)`` or
    ``@grammar(lark=...)`` makes a free-form tool whose one ``str`` parameter is generated in that
    language. Raises ``GrammarError`` at decoration time for an untyped parameter, ``*args`` /
    ``**kwargs``, a free-form tool without exactly one ``str`` parameter, or both ``regex`` and
    ``lark``; ``GrammarSyntaxError`` for a malformed regex or Lark grammar.
    """
    if regex is not None and lark is not None:
        raise GrammarError("give @grammar at most one of regex= and lark=")
    fmt = (
        FreeFormFormat("regex", regex)
        if regex is not None
        else FreeFormFormat("lark", lark)
        if lark is not None
        else None
    )
    if fn is not None:
        if fmt is not None:
            raise GrammarError("use @grammar(regex=...) / @grammar(lark=...) as a decorator factory")
        return Tool(fn)
    return lambda f: Tool(f, fmt)


# -- choosing among tools ---------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall(Generic[R]):
    """A tool the model chose, with its validated arguments; calling it runs the tool."""

    tool: Tool[R]
    arguments: dict[str, Any]

    @property
    def name(self) -> str:
        return self.tool.name

    def __call__(self) -> R:
        return self.tool.invoke(self.arguments)


def tools_grammar(tools: Sequence[Tool[Any]]) -> ir.Grammar:
    """One grammar: a choice over the tools' ``{"tool": ..., "arguments": ...}`` texts.

    Rule names of tool ``i`` get the prefix ``t{i}_`` (a prefix-free code, so no clashes).
    """
    if not tools:
        raise ValueError("choose among at least one tool")
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise ValueError(f"tool names must be distinct, got {names}")
    rules: dict[str, ir.Expr] = {}
    starts = []
    for i, tool in enumerate(tools):
        g = tool.call_grammar()
        prefix = f"t{i}_"
        for name, expr in g.rules.items():
            rules[prefix + name] = _rename(expr, prefix)
        starts.append(ir.Ref(prefix + g.start))
    rules["start"] = ir.choice(*starts)
    return ir.Grammar(rules, start="start")


def choose_tool(
    model: Any, prompt: Any, tools: Sequence[Tool[Any]], **options: Any
) -> ToolCall[Any]:
    """Let the model pick one of ``tools`` and generate its arguments, in one constrained output.

    The output is the JSON text ``{"tool": "<name>", "arguments": {...}}`` of exactly one tool;
    ``options`` are those of :func:`grammarsd.generate` except the output spec. Returns the
    :class:`ToolCall` (tool + validated arguments); ``OutputValidationError`` if they do not
    validate.
    """
    text = generate(model, prompt, grammar=tools_grammar(tools), **options)
    value = json.loads(text)
    by_name = {t.name: t for t in tools}
    tool = by_name[value["tool"]]
    return ToolCall(tool, tool.validate(value["arguments"]))


# -- signature helpers ------------------------------------------------------------------------


def _typed_parameters(fn: Callable[..., Any], sig: inspect.Signature) -> list[inspect.Parameter]:
    """The parameters with their annotations resolved; refuses untyped and variadic ones."""
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # NameError & co. from unresolvable string annotations
        raise GrammarError(f"cannot resolve the annotations of {fn.__name__}: {exc}") from None
    out = []
    for name, param in sig.parameters.items():
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise GrammarError(
                f"{fn.__name__}: parameter {name!r} is variadic (*args/**kwargs)",
                hint="a tool's arguments must be named and typed",
            )
        if name not in hints:
            raise GrammarError(
                f"{fn.__name__}: parameter {name!r} has no type annotation",
                hint=f"annotate it, e.g. `{name}: str`; the annotation becomes its JSON Schema",
            )
        out.append(param.replace(annotation=hints[name]))
    return out


def _arguments_model(name: str, params: list[inspect.Parameter]) -> type[pydantic.BaseModel]:
    fields: dict[str, Any] = {}
    for p in params:
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (p.annotation, default)
    try:
        return pydantic.create_model(
            f"{name}_arguments", __config__=pydantic.ConfigDict(extra="forbid"), **fields
        )
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError, NameError) as exc:
        raise GrammarError(f"{name}: cannot build an arguments model: {exc}") from None


def _single_str_parameter(name: str, params: list[inspect.Parameter]) -> str:
    if len(params) != 1 or params[0].annotation is not str:
        got = ", ".join(f"{p.name}: {p.annotation}" for p in params) or "none"
        raise GrammarError(
            f"{name}: a free-form (regex/lark) tool takes exactly one `str` parameter; got {got}"
        )
    return params[0].name


# -- IR helpers -------------------------------------------------------------------------------

_JSON_SPECIAL = ir.chars([(0, 0x1F), (ord('"'), ord('"')), (ord("\\"), ord("\\"))])


def json_string_body(g: ir.Grammar) -> ir.Grammar:
    """``g`` with every string replaced by its JSON-string body (``json.dumps(s)[1:-1]`` without
    ASCII escaping): ``"``, ``\\`` and control characters become their canonical escapes.

    Invariant: ``s`` is in ``g`` iff ``json.dumps(s, ensure_ascii=False)[1:-1]`` is in the result.
    """
    return ir.Grammar({n: _escape(e) for n, e in g.rules.items()}, start=g.start)


def _escape(e: ir.Expr) -> ir.Expr:
    if isinstance(e, ir.Literal):
        return ir.lit(json.dumps(e.text, ensure_ascii=False)[1:-1])
    if isinstance(e, ir.CharClass):
        special = e.intersect(_JSON_SPECIAL)
        plain = e.intersect(_JSON_SPECIAL.negate())
        escaped = [
            ir.lit(json.dumps(chr(c), ensure_ascii=False)[1:-1])
            for lo, hi in special.ranges
            for c in range(lo, hi + 1)
        ]
        return ir.choice(*([] if plain.is_empty else [plain]), *escaped)
    if isinstance(e, ir.Seq):
        return ir.seq(*map(_escape, e.items))
    if isinstance(e, ir.Choice):
        return ir.choice(*map(_escape, e.items))
    if isinstance(e, ir.Repeat):
        return ir.repeat(_escape(e.item), e.min, e.max)
    if isinstance(e, (ir.Capped, ir.Excluding, ir.Decoding)):  # JSON string bodies already
        raise GrammarError(f"a JSON string body cannot be escaped into another: {e}")
    return e  # Ref


def _rename(e: ir.Expr, prefix: str) -> ir.Expr:
    if isinstance(e, ir.Ref):
        return ir.Ref(prefix + e.name)
    if isinstance(e, ir.Seq):
        return ir.seq(*(_rename(x, prefix) for x in e.items))
    if isinstance(e, ir.Choice):
        return ir.choice(*(_rename(x, prefix) for x in e.items))
    if isinstance(e, ir.Repeat):
        return ir.repeat(_rename(e.item, prefix), e.min, e.max)
    if isinstance(e, ir.Capped):
        return ir.capped(_rename(e.item, prefix), e.max)
    return e


def _wrap(inner: ir.Grammar, before: ir.Expr, after: ir.Expr) -> ir.Grammar:
    """``before inner after`` as a grammar (a fresh start rule around ``inner``'s)."""
    start = "call"
    while start in inner.rules:
        start += "_"
    rules = dict(inner.rules)
    rules[start] = ir.seq(before, ir.Ref(inner.start), after)
    return ir.Grammar(rules, start=start)


def _in_language(fmt: FreeFormFormat, text: str) -> bool:
    """Whether ``text`` is in the free-form tool's language (Python ``re``; lark's Earley)."""
    if fmt.syntax == "regex":
        import re

        return re.fullmatch(fmt.definition, text) is not None
    import lark

    try:
        lark.Lark(fmt.definition, parser="earley", lexer="dynamic_complete").parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


__all__ = [
    "FreeFormFormat",
    "Tool",
    "ToolCall",
    "choose_tool",
    "grammar",
    "json_string_body",
    "tools_grammar",
]
