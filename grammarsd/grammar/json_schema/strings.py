"""JSON string literals over *decoded* characters.

This module owns the map from "a set of decoded code points" to "the JSON text that encodes one
of them". Every constraint on strings (length, pattern, format, enum exclusions) is written over
decoded characters; ``encode_class`` (``grammarsd.grammar.encodings``) then turns each character
class into every spelling a JSON writer may emit for it (raw, short escapes, ``\\uXXXX``,
surrogate pairs), so escapes can never smuggle in a forbidden character.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from grammarsd.grammar.encodings import encode_class, one_char, strings_outside
from grammarsd.grammar.ir import (
    ANY_CHAR,
    EMPTY,
    CharClass,
    Choice,
    Excluding,
    Expr,
    Literal,
    Ref,
    Repeat,
    Seq,
    children,
    choice,
    lit,
    seq,
)


def encode_text(text: str) -> Expr:
    """The usual JSON encodings of the decoded string ``text`` (without quotes).

    Accepts what ``json.dumps`` writes with ``ensure_ascii`` on and off; other spellings of the
    same string (say ``\\u0061`` for ``a``) are rejected — conservative, never wrong.
    """
    return choice(*(lit(json.dumps(text, ensure_ascii=a)[1:-1]) for a in (True, False)))


def encode_chars(expr: Expr) -> Expr:
    """The JSON string bodies decoding to a word of ``expr`` (its ``Ref`` items kept as is).

    Every ``CharClass`` becomes ``encode_class`` of it and every literal character that of its
    singleton class, so a decoded character may be spelled any way a JSON writer may (unlike
    ``encode_text``). Invariant: the decoded values matched are exactly the words of ``expr``;
    the structure (and so the nesting depth) of ``expr`` is kept.
    """
    if isinstance(expr, Ref):
        return expr
    if isinstance(expr, CharClass):
        return encode_class(expr)
    if isinstance(expr, Literal):
        encoded = tuple(encode_class(one_char(ch)) for ch in expr.text)
        return EMPTY if not encoded else encoded[0] if len(encoded) == 1 else Seq(encoded)
    # built directly, not through seq/choice: flattening would break the identity of the
    # encode_class objects by which the lexer recognises them (``decoded_class``)
    parts = tuple(encode_chars(item) for item in children(expr))
    if isinstance(expr, Repeat):
        return Repeat(parts[0], expr.min, expr.max)
    return Seq(parts) if isinstance(expr, Seq) else Choice(parts)


def string_literal(text: str) -> Expr:
    """``text`` as a quoted JSON string (see ``encode_text``). Printable ASCII without a quote
    or backslash (most object keys) has one spelling, the text itself."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return Literal(f'"{text}"')
    return seq(lit('"'), encode_text(text), lit('"'))


def strings_excluding(
    excluded: Iterable[str], char: Expr, char_class: CharClass = ANY_CHAR,
    min_len: int = 0, max_len: int | None = None,
) -> Expr:
    """Decoded strings of ``min_len..max_len`` characters from ``char_class`` not in ``excluded``.

    ``char`` is the encoded form of one character of ``char_class`` (usually a shared rule).
    Without length bounds this is one ``Excluding`` leaf (an object's other keys: the lexer
    reads it from the trie of the words); with them, the trie as IR (``strings_outside``).
    """
    words = tuple(sorted(set(excluded)))
    if words and not min_len and max_len is None:
        return Excluding(words, char_class)
    return strings_outside(words, char, char_class, min_len, max_len)
