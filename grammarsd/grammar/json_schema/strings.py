"""JSON string literals over *decoded* characters.

This module owns the map from "a set of decoded code points" to "the JSON text that encodes one
of them". Every constraint on strings (length, pattern, format, enum exclusions) is written over
decoded characters; ``encode_class`` then turns each character class into the alternatives a
JSON writer may emit for it:

    raw        the character itself, if it is >= U+0020 and not ``"`` or ``\\``
    short      ``\\" \\\\ \\/ \\b \\f \\n \\r \\t`` for the characters they stand for
    \\uXXXX    any BMP character, hex digits in either case
    pair       ``\\uD8xx\\uDCxx`` surrogate pairs for astral characters (what ``json.dumps`` writes
               with ``ensure_ascii=True``)

so a character is reachable in any encoding exactly when the decoded character is allowed.
Lone surrogate escapes are never produced (they decode to no Unicode scalar value).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable

from grammarsd.grammar.ir import (
    ANY_CHAR,
    EMPTY,
    NOTHING,
    CharClass,
    Expr,
    char_set,
    chars,
    choice,
    lit,
    repeat,
    seq,
)

_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f",
                  "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_RAW_OK = chars([(0x20, 0x10FFFF)]).intersect(char_set('"\\').negate())
_BMP = chars([(0, 0xFFFF)])


def class_expr(cc: CharClass) -> Expr:
    """``cc`` as an expression; the empty class becomes NOTHING (so smart constructors absorb it)."""
    return NOTHING if cc.is_empty else cc


def _hex_digit(lo: int, hi: int) -> Expr:
    """One hex digit with value in ``[lo, hi]``, upper or lower case."""
    text = "".join("0123456789abcdef"[v] for v in range(lo, hi + 1))
    return class_expr(char_set(text + text.upper()))


@functools.lru_cache(maxsize=8192)
def _hex_range(lo: int, hi: int, width: int) -> Expr:
    """Exactly ``width`` hex digits whose value lies in ``[lo, hi]``."""
    if width == 0:
        return EMPTY
    unit = 16 ** (width - 1)
    top_lo, top_hi = lo // unit, hi // unit
    if top_lo == top_hi:
        return seq(_hex_digit(top_lo, top_lo), _hex_range(lo % unit, hi % unit, width - 1))
    parts: list[Expr] = []
    first_full = top_lo if lo % unit == 0 else top_lo + 1
    last_full = top_hi if hi % unit == unit - 1 else top_hi - 1
    if lo % unit != 0:
        parts.append(seq(_hex_digit(top_lo, top_lo), _hex_range(lo % unit, unit - 1, width - 1)))
    if first_full <= last_full:
        parts.append(seq(_hex_digit(first_full, last_full), repeat(_hex_digit(0, 15), width - 1,
                                                                    width - 1)))
    if hi % unit != unit - 1:
        parts.append(seq(_hex_digit(top_hi, top_hi), _hex_range(0, hi % unit, width - 1)))
    return choice(*parts)


def _u_escape(lo: int, hi: int) -> Expr:
    return seq(lit("\\u"), _hex_range(lo, hi, 4))


def _astral_pairs(lo: int, hi: int) -> Expr:
    """Surrogate-pair escapes for the astral code points ``[lo, hi]``."""
    hlo, llo = divmod(lo - 0x10000, 0x400)
    hhi, lhi = divmod(hi - 0x10000, 0x400)
    if hlo == hhi:
        return seq(_u_escape(0xD800 + hlo, 0xD800 + hlo), _u_escape(0xDC00 + llo, 0xDC00 + lhi))
    parts = [seq(_u_escape(0xD800 + hlo, 0xD800 + hlo), _u_escape(0xDC00 + llo, 0xDFFF))]
    if hlo + 1 <= hhi - 1:
        parts.append(seq(_u_escape(0xD800 + hlo + 1, 0xD800 + hhi - 1), _u_escape(0xDC00, 0xDFFF)))
    parts.append(seq(_u_escape(0xD800 + hhi, 0xD800 + hhi), _u_escape(0xDC00, 0xDC00 + lhi)))
    return choice(*parts)


@functools.lru_cache(maxsize=4096)  # IR is immutable: the same classes recur across schemas
def encode_class(cc: CharClass) -> Expr:
    """Every JSON encoding of one decoded character from ``cc`` (see the module docstring).

    Invariant: the decoded value of any string matched is a single member of ``cc``.
    """
    parts: list[Expr] = [class_expr(cc.intersect(_RAW_OK))]
    parts += [lit(esc) for ch, esc in _SHORT_ESCAPES.items() if ord(ch) in cc]
    for lo, hi in cc.ranges:
        if lo <= 0xFFFF:
            parts.append(_u_escape(lo, min(hi, 0xFFFF)))
        if hi >= 0x10000:
            parts.append(_astral_pairs(max(lo, 0x10000), hi))
    return choice(*parts)


def encode_text(text: str) -> Expr:
    """The usual JSON encodings of the decoded string ``text`` (without quotes).

    Accepts what ``json.dumps`` writes with ``ensure_ascii`` on and off; other spellings of the
    same string (say ``\\u0061`` for ``a``) are rejected — conservative, never wrong.
    """
    return choice(*(lit(json.dumps(text, ensure_ascii=a)[1:-1]) for a in (True, False)))


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
    """
    trie: dict = {}
    for word in excluded:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def walk(node: dict, depth: int) -> Expr:
        parts: list[Expr] = []
        if "" not in node and depth >= min_len and (max_len is None or depth <= max_len):
            parts.append(EMPTY)
        if max_len is None or depth < max_len:
            kids = [k for k in node if k]
            other = char_class.intersect(char_set("".join(kids)).negate())
            lo = max(0, min_len - depth - 1)
            hi = None if max_len is None else max_len - depth - 1
            if not other.is_empty:
                parts.append(seq(encode_class(other), repeat(char, lo, hi)))
            for k in kids:
                if ord(k) in char_class:
                    parts.append(seq(encode_class(char_set(k)), walk(node[k], depth + 1)))
        return choice(*parts) if parts else NOTHING

    return walk(trie, 0)
