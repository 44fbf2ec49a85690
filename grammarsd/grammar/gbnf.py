"""GBNF front end: llama.cpp's grammar format lowered to the grammar IR.

A hand-written recursive-descent parser following llama.cpp's ``llama-grammar.cpp`` rules::

    grammar      := (space-nl rule)* space-nl
    rule         := name space "::=" space-nl alternates (newline | end)
    alternates   := sequence ("|" space-nl sequence)*
    sequence     := (item space)*              newlines allowed only inside ( ... )
    item         := primary ("*" | "+" | "?" | "{" m "}" | "{" m ",}" | "{" m "," n "}")*
    primary      := '"' char* '"' | "[" "^"? (char ("-" char)?)* "]" | "." | name
                  | "(" space-nl alternates ")"
    name         := [a-zA-Z0-9-]+
    char         := any code point but the closing quote/bracket, or an escape
                    \\n \\r \\t \\\\ \\" \\[ \\] \\xNN \\uNNNN \\UNNNNNNNN

``#`` starts a comment to the end of the line; spaces and tabs separate items; a newline ends
a rule unless it is inside parentheses or right after ``|`` or ``::=``. ``.`` is any code
point. Every error (undefined or duplicate rule included) is a ``GrammarSyntaxError`` with line
and column; llama.cpp's token references (``<[1234]>``) raise ``UnsupportedSyntaxError``.
"""

from __future__ import annotations

from grammarsd.errors import GrammarSyntaxError, UnsupportedSyntaxError
from grammarsd.grammar.ir import (
    ANY_CHAR,
    CharClass,
    Expr,
    Grammar,
    Ref,
    chars,
    choice,
    lit,
    repeat,
    seq,
)

_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]"}
_HEX_LENGTH = {"x": 2, "u": 4, "U": 8}


def grammar_from_gbnf(text: str, *, start: str = "root") -> Grammar:
    """Parse GBNF ``text`` into a ``Grammar`` whose start rule is ``start``.

    Raises
    ------
    GrammarSyntaxError : malformed text, an undefined or duplicate rule, or a missing ``start``
        rule; ``line``/``column`` point at the offending character.
    UnsupportedSyntaxError : token references ``<...>``.
    """
    return _GbnfParser(text).parse(start)


def _is_name_char(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "-")


class _GbnfParser:
    def __init__(self, text: str) -> None:
        self.src = text
        self.pos = 0
        self.rules: dict[str, Expr] = {}
        self.references: dict[str, int] = {}  # first reference offset per rule name

    # -- helpers
    def _error(self, message: str, offset: int | None = None) -> GrammarSyntaxError:
        return GrammarSyntaxError.at_offset(
            message, self.src, self.pos if offset is None else offset
        )

    def _peek(self) -> str:
        return self.src[self.pos] if self.pos < len(self.src) else ""

    def _space(self, newline_ok: bool) -> None:
        while self.pos < len(self.src):
            c = self.src[self.pos]
            if c in " \t" or (newline_ok and c in "\r\n"):
                self.pos += 1
            elif c == "#":
                while self.pos < len(self.src) and self.src[self.pos] not in "\r\n":
                    self.pos += 1
            else:
                return

    def _name(self) -> str:
        begin = self.pos
        while _is_name_char(self._peek()):
            self.pos += 1
        if begin == self.pos:
            raise self._error("expecting a rule name")
        return self.src[begin : self.pos]

    def _int(self) -> int:
        begin = self.pos
        while self._peek().isascii() and self._peek().isdigit():
            self.pos += 1
        if begin == self.pos:
            raise self._error("expecting an integer")
        return int(self.src[begin : self.pos])

    # -- grammar
    def parse(self, start: str) -> Grammar:
        self._space(True)
        while self.pos < len(self.src):
            self._rule()
            self._space(True)
        for name, offset in self.references.items():
            if name not in self.rules:
                raise self._error(f"undefined rule {name!r}", offset)
        if start not in self.rules:
            raise self._error(f"start rule {start!r} is not defined", len(self.src))
        return Grammar(self.rules, start=start)

    def _rule(self) -> None:
        begin = self.pos
        name = self._name()
        self._space(False)
        if not self.src.startswith("::=", self.pos):
            raise self._error("expecting ::=")
        self.pos += 3
        self._space(True)
        body = self._alternates(nested=False)
        if self._peek() not in ("", "\r", "\n"):
            raise self._error("expecting newline or end")
        if name in self.rules:
            raise self._error(f"rule {name!r} is defined more than once", begin)
        self.rules[name] = body

    def _alternates(self, nested: bool) -> Expr:
        alts = [self._sequence(nested)]
        while self._peek() == "|":
            self.pos += 1
            self._space(True)
            alts.append(self._sequence(nested))
        return choice(*alts)

    def _sequence(self, nested: bool) -> Expr:
        items: list[Expr] = []
        while True:
            c = self._peek()
            begin = self.pos
            if c == '"':
                items.append(self._literal())
            elif c == "[":
                items.append(self._class())
            elif c == ".":
                self.pos += 1
                items.append(ANY_CHAR)
            elif c == "(":
                self.pos += 1
                self._space(True)
                items.append(self._alternates(nested=True))
                if self._peek() != ")":
                    raise self._error("expecting ')'")
                self.pos += 1
            elif c and _is_name_char(c):
                name = self._name()
                self.references.setdefault(name, begin)
                items.append(Ref(name))
            elif c in ("<", "!"):
                raise UnsupportedSyntaxError.at_offset("token reference", self.src, begin)
            elif c in ("*", "+", "?", "{"):
                if not items:
                    raise self._error(f"expecting preceding item to {c}")
                items[-1] = self._postfix(items[-1])
            else:
                return seq(*items)
            self._space(nested)

    def _postfix(self, item: Expr) -> Expr:
        c = self._peek()
        self.pos += 1
        if c == "*":
            return repeat(item, 0, None)
        if c == "+":
            return repeat(item, 1, None)
        if c == "?":
            return repeat(item, 0, 1)
        begin = self.pos - 1
        self._space(False)
        low = self._int()
        self._space(False)
        high: int | None = low
        if self._peek() == ",":
            self.pos += 1
            self._space(False)
            high = self._int() if self._peek().isdigit() else None
            self._space(False)
        if self._peek() != "}":
            raise self._error("expecting '}'")
        self.pos += 1
        if high is not None and high < low:
            raise self._error("repetition maximum is smaller than its minimum", begin)
        return repeat(item, low, high)

    def _char(self, close: str) -> int:
        """One code point of a literal or class body (escapes decoded)."""
        begin = self.pos
        c = self._peek()
        if not c:
            raise self._error(f"unexpected end of input, expecting {close!r}")
        self.pos += 1
        if c != "\\":
            return ord(c)
        e = self._peek()
        self.pos += 1
        if e in _ESCAPES:
            return ord(_ESCAPES[e])
        if e in _HEX_LENGTH:
            digits = self.src[self.pos : self.pos + _HEX_LENGTH[e]]
            if len(digits) != _HEX_LENGTH[e] or any(
                d not in "0123456789abcdefABCDEF" for d in digits
            ):
                raise self._error(f"invalid \\{e} escape", begin)
            self.pos += len(digits)
            value = int(digits, 16)
            if value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:
                raise self._error(f"escape \\{e}{digits} is not a Unicode scalar value", begin)
            return value
        raise self._error(f"unknown escape \\{e}", begin)

    def _literal(self) -> Expr:
        self.pos += 1
        out: list[str] = []
        while self._peek() != '"':
            out.append(chr(self._char('"')))
        self.pos += 1
        return lit("".join(out))

    def _class(self) -> CharClass:
        begin = self.pos
        self.pos += 1
        negate = self._peek() == "^"
        self.pos += negate
        ranges: list[tuple[int, int]] = []
        while self._peek() != "]":
            if not self._peek():
                raise self._error("unterminated character class", begin)
            low = self._char("]")
            high = low
            if self._peek() == "-" and self.src[self.pos + 1 : self.pos + 2] not in ("]", ""):
                dash = self.pos
                self.pos += 1
                high = self._char("]")
                if high < low:
                    raise self._error("character range is out of order", dash)
            ranges.append((low, high))
        self.pos += 1
        cls = chars(ranges)
        return cls.negate() if negate else cls


__all__ = ["grammar_from_gbnf"]
