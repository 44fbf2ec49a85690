"""JSON string literals over *decoded* characters.

This module owns the map from "a set of decoded code points" to "the JSON text that encodes one
of them". Every constraint on strings (length, pattern, format, enum exclusions) is written over
decoded characters; ``encode_class`` (``grammarsd.grammar.encodings``) then turns each character
class into every spelling a JSON writer may emit for it (raw, short escapes, ``\\uXXXX``,
surrogate pairs), so escapes can never smuggle in a forbidden character.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable

from grammarsd.grammar.encodings import encode_class
from grammarsd.grammar.ir import (
    ANY_CHAR,
    EMPTY,
    NOTHING,
    CharClass,
    Choice,
    Expr,
    Literal,
    Ref,
    Repeat,
    Seq,
    char_set,
    children,
    choice,
    lit,
    repeat,
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
        encoded = tuple(encode_class(_single(ch)) for ch in expr.text)
        return EMPTY if not encoded else encoded[0] if len(encoded) == 1 else Seq(encoded)
    # built directly, not through seq/choice: flattening would break the identity of the
    # encode_class objects by which the lexer recognises them (``decoded_class``)
    parts = tuple(encode_chars(item) for item in children(expr))
    if isinstance(expr, Repeat):
        return Repeat(parts[0], expr.min, expr.max)
    return Seq(parts) if isinstance(expr, Seq) else Choice(parts)


def string_literal(text: str) -> Expr:
    """``text`` as a quoted JSON string (see ``encode_text``)."""
    return seq(lit('"'), encode_text(text), lit('"'))


def strings_excluding(
    excluded: Iterable[str], char: Expr, char_class: CharClass = ANY_CHAR,
    min_len: int = 0, max_len: int | None = None,
) -> Expr:
    """Decoded strings of ``min_len..max_len`` characters from ``char_class`` not in ``excluded``.

    ``char`` is the encoded form of one character of ``char_class`` (usually a shared rule).
    Built from the trie of ``excluded``: at each trie node either stop (if that node is not an
    excluded word), leave the trie with a character that has no child, or follow a child.
    Cached: an object's other keys are "any name but the listed ones", asked again for every
    place the object is used (and in every schema that shares its definitions).
    """
    return _strings_excluding(tuple(sorted(set(excluded))), char, char_class, min_len, max_len)


@functools.lru_cache(maxsize=1024)
def _strings_excluding(excluded: tuple[str, ...], char: Expr, char_class: CharClass,
                       min_len: int, max_len: int | None) -> Expr:
    if max_len is not None and min_len > max_len:
        return NOTHING
    trie: dict = {}
    for word in excluded:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}
    return _words_outside(trie, 0, char, char_class, min_len, max_len)


def _words_outside(node: dict, depth: int, char: Expr, char_class: CharClass, min_len: int,
                   max_len: int | None) -> Expr:
    """The words below trie ``node`` (at ``depth``) that are not in the trie."""
    parts: list[Expr] = []
    if "" not in node and depth >= min_len and (max_len is None or depth <= max_len):
        parts.append(EMPTY)
    if max_len is None or depth < max_len:
        kids = [k for k in node if k]
        other = _outside(char_class, "".join(kids))
        lo = max(0, min_len - depth - 1)
        hi = None if max_len is None else max_len - depth - 1
        if not other.is_empty:
            parts.append(seq(encode_class(other), repeat(char, lo, hi)))
        for k in kids:
            if ord(k) in char_class:
                parts.append(seq(encode_class(_single(k)), _words_outside(
                    node[k], depth + 1, char, char_class, min_len, max_len)))
    return choice(*parts) if parts else NOTHING


@functools.lru_cache(maxsize=4096)
def _single(ch: str) -> CharClass:
    """The class of the one character ``ch`` (the same few, again and again)."""
    return char_set(ch)


@functools.lru_cache(maxsize=4096)
def _outside(char_class: CharClass, kids: str) -> CharClass:
    """The characters of ``char_class`` not in ``kids`` (a trie node's way out)."""
    return char_class.intersect(char_set(kids).negate())
