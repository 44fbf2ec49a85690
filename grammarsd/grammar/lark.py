"""Lark front end: Lark EBNF text lowered to the grammar IR.

Lark's own loader (``lark.load_grammar``) parses the text and expands everything that is sugar
(``?rule``, ``_rule``, templates, ``[x]``, ``x~m..n``, ``%import``, ``%override``): it yields
plain BNF rules over terminals, the terminal definitions and the ``%ignore`` list. This module
lowers that BNF: one IR rule per Lark rule (its expansions become a ``Choice`` of ``Seq`` of
``Ref``), one IR rule per terminal (its pattern through ``parse_regex``, python flavor; string
terminals become literals), and ``%ignore``.

Semantics (where they differ from Lark's own parsers)
----------------------------------------------------
The language is scannerless CFG semantics: a string is in the language iff it splits into a
sequence of terminal matches that the rules derive. There is no lexer, so no maximal munch, no
contextual-lexer choices and no terminal priorities: Lark's ``lexer="basic"``/``"contextual"``
may reject strings this grammar accepts (e.g. ``"ab"`` for ``start: A B`` with ``A: /a+b?/``
splits as ``A="a" B="b"`` here). It agrees with Lark's Earley parser with
``lexer="dynamic_complete"``. ``%ignore X`` means ``X*`` may appear between any two adjacent
symbols of every rule expansion and at both ends of the input; ignored terminals are never
part of other terminals' matches. Zero-width terminals are allowed (Lark's dynamic lexer refuses
them). ``common.ESCAPED_STRING``'s lookbehind is replaced by the equivalent lookaround-free
regex for the token Lark's lexer produces (see ``_LEXER_EQUIVALENTS``); other lazy terminals
keep their fullmatch meaning (``common.C_COMMENT`` may contain ``*/``). Rule and terminal
priorities and ``%declare`` raise ``UnsupportedSyntaxError``.
"""

from __future__ import annotations

import re

from lark.exceptions import GrammarError as LarkGrammarError
from lark.exceptions import LarkError, UnexpectedInput
from lark.grammar import Rule, Terminal
from lark.lexer import PatternStr, TerminalDef
from lark.load_grammar import load_grammar

from grammarsd.errors import GrammarSyntaxError, UnsupportedSyntaxError
from grammarsd.grammar.ir import Expr, Grammar, Ref, choice, lit, repeat, seq
from grammarsd.grammar.regex import parse_regex

#: Regexes of Lark's ``common.lark`` that need a lookbehind, mapped to lookaround-free regexes
#: for the token Lark's lexer actually produces (the lazy ``.*?`` stops at the first closing
#: quote not escaped by a backslash). Fullmatch semantics of the original would also accept
#: ``"a"b"`` as one string, which no Lark lexer produces.
_LEXER_EQUIVALENTS = {
    r'".*?(?<!\\)(\\\\)*?"': r'"(?:[^"\\\n]|\\.)*"',  # common.ESCAPED_STRING
}

_POSITION = re.compile(r"line (\d+),? col(?:umn)? (\d+)")
_QUOTED = re.compile(r"'([^']+)'")


def grammar_from_lark(text: str, *, start: str = "start") -> Grammar:
    """Lower Lark grammar ``text`` to an IR ``Grammar`` whose start rule is ``start``.

    Parameters
    ----------
    text : a Lark grammar (``rule: ...``, ``TERMINAL: ...``, ``%import``, ``%ignore``, ...).
    start : the rule whose language is the grammar's.

    Returns
    -------
    Grammar with one rule per reachable Lark rule and terminal (named as Lark names them),
    plus ``__ignore`` when ``%ignore`` is used; ``grammar.start == start``.

    Raises
    ------
    GrammarSyntaxError : malformed Lark text, undefined names, bad terminal regexes (line and
        column point into ``text``).
    UnsupportedSyntaxError : priorities (``rule.2``, ``TERM.2``), ``%declare``, and regex
        constructs ``parse_regex`` refuses.
    """
    terminals, rules, ignore = _load(text, start)
    _check_supported(text, terminals, rules)
    by_name = {t.name: t for t in terminals}
    used = {s.name for r in rules for s in r.expansion if isinstance(s, Terminal)} | set(ignore)
    ignore_name = _fresh("__ignore", {r.origin.name for r in rules} | used)
    ignored: Expr = seq()
    if ignore:
        ignored = repeat(choice(*(Ref(name) for name in ignore)))

    alternatives: dict[str, list[Expr]] = {start: []}
    for rule in rules:
        symbols = [Ref(str(s.name)) for s in rule.expansion]
        if ignore:
            symbols = [x for s in symbols for x in (Ref(ignore_name), s)][1:]
        alternatives.setdefault(str(rule.origin.name), []).append(seq(*symbols))

    out: dict[str, Expr] = {}
    for name, alts in alternatives.items():
        body = choice(*alts)
        if ignore and name == start:
            body = seq(Ref(ignore_name), body, Ref(ignore_name))
        out[name] = body
    for name in sorted(used):
        out[name] = _terminal(text, by_name[name])
    if ignore:
        out[ignore_name] = ignored
    return Grammar(out, start=start)


# --------------------------------------------------------------------------- loading


def _load(text: str, start: str) -> tuple[list[TerminalDef], list[Rule], list[str]]:
    try:
        grammar, _files = load_grammar(text, "<grammar>", [], False)
        terminals, rules, ignore = grammar.compile([start], set())
    except UnexpectedInput as exc:
        raise GrammarSyntaxError(
            f"malformed Lark grammar: {_first_line(exc)}",
            line=max(1, exc.line),
            column=max(1, exc.column),
            source=text,
        ) from None
    except LarkGrammarError as exc:
        message = str(exc)
        raise GrammarSyntaxError.at_offset(
            _first_line(exc), text, _locate_message(text, message)
        ) from None
    except LarkError as exc:
        raise GrammarSyntaxError(_first_line(exc), line=1, column=1, source=text) from None
    if not any(str(r.origin.name) == start for r in rules):
        raise GrammarSyntaxError(f"start rule {start!r} is not defined", line=1, column=1)
    return list(terminals), list(rules), list(ignore)


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _locate_message(text: str, message: str) -> int:
    """Best offset for a Lark error: its own ``line X column Y`` or the name it quotes."""
    m = _POSITION.search(message)
    if m:
        return _offset(text, int(m.group(1)), int(m.group(2)))
    q = _QUOTED.search(message)
    if q:
        defs = _definition(text, q.group(1))
        if "more than once" in message and len(defs) > 1:
            return defs[1]
        hit = re.search(rf"(?<![\w.]){re.escape(q.group(1))}(?!\w)", text)
        if hit:
            return hit.start()
    return 0


def _offset(text: str, line: int, column: int) -> int:
    lines = text.split("\n")
    return sum(len(s) + 1 for s in lines[: line - 1]) + column - 1


def _definition(text: str, name: str) -> list[int]:
    """Offsets of the definitions of rule or terminal ``name`` in ``text``."""
    pattern = rf"^[ \t]*[?!]?{re.escape(name)}\b"
    return [m.end() - len(name) for m in re.finditer(pattern, text, re.MULTILINE)]


def _fresh(base: str, taken: set[str]) -> str:
    name = base
    while name in taken:
        name += "_"
    return name


# --------------------------------------------------------------------------- checks


def _check_supported(text: str, terminals: list[TerminalDef], rules: list[Rule]) -> None:
    for rule in rules:
        if rule.options.priority is not None:
            name = str(rule.origin.name)
            raise UnsupportedSyntaxError.at_offset(
                "priority",
                text,
                (_definition(text, name) or [0])[0],
                hint=f"rule {name!r} has priority {rule.options.priority}; "
                "priorities only choose between parses and do not change the language",
            )
    for term in terminals:
        if term.priority != 0:
            raise UnsupportedSyntaxError.at_offset(
                "priority",
                text,
                (_definition(text, term.name) or [0])[0],
                hint=f"terminal {term.name!r} has priority {term.priority}",
            )
    defined = {t.name for t in terminals}
    for rule in rules:
        for sym in rule.expansion:
            if isinstance(sym, Terminal) and sym.name not in defined:
                declare = re.search(rf"%declare\b[^\n]*\b{re.escape(sym.name)}\b", text)
                raise UnsupportedSyntaxError.at_offset(
                    "%declare",
                    text,
                    declare.start() if declare else 0,
                    hint=f"terminal {sym.name!r} is declared but has no pattern",
                )


def _terminal(text: str, term: TerminalDef) -> Expr:
    pattern = term.pattern
    if isinstance(pattern, PatternStr) and not pattern.flags:
        return lit(pattern.value)
    regexp = pattern.to_regexp()
    try:
        return parse_regex(_LEXER_EQUIVALENTS.get(regexp, regexp))
    except GrammarSyntaxError as exc:
        where = _terminal_offset(text, term)
        detail = f"in terminal {term.name} ({pattern.to_regexp()!r}): {exc.message}"
        if isinstance(exc, UnsupportedSyntaxError):
            raise UnsupportedSyntaxError.at_offset(
                exc.construct, text, where, hint=detail
            ) from None
        raise GrammarSyntaxError.at_offset(detail, text, where) from None


def _terminal_offset(text: str, term: TerminalDef) -> int:
    defs = _definition(text, term.name)
    if defs:
        return defs[0]
    literal = text.find(f"/{term.pattern.value}/")
    return max(literal, 0)


__all__ = ["grammar_from_lark"]
