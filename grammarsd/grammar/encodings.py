"""JSON string encodings of single decoded characters, as IR, and the way to recognise them.

This module owns the map from "a set of decoded code points" to "the JSON text that encodes one
of them" (``encode_class``):

    raw        the character itself, if it is >= U+0020 and not ``"`` or ``\\``
    short      ``\\" \\\\ \\/ \\b \\f \\n \\r \\t`` for the characters they stand for
    \\uXXXX    any BMP character, hex digits in either case
    pair       ``\\uD8xx\\uDCxx`` surrogate pairs for astral characters (what ``json.dumps`` writes
               with ``ensure_ascii=True``)

so a character is reachable in any encoding exactly when the decoded character is allowed.
Lone surrogate escapes are never produced (they decode to no Unicode scalar value).

It also owns the plain-IR reading of ``ir.Excluding`` (``expand_excluding``): the JSON string
bodies decoding to any string but a few words, built from the words' trie
(``strings_outside``).

The expressions are plain IR, so every consumer (the reference recognizer, printers) reads
them as usual. The byte lexer may instead *recognise* them with ``decoded_class`` and lower
"one JSON-encoded character from ``cc``" in one step from the decoded-character automaton
(``grammarsd.compiler.lexer``), which keeps bounded-length and pattern-constrained JSON
strings linear in the number of decoded-character states. Recognition is by object identity
with what ``encode_class`` returned (O(1), and sound: that object's language *is* the encoding
of ``cc``); an equal expression built some other way is simply not recognised.
"""

from __future__ import annotations

import functools
import threading

from grammarsd.grammar.ir import (
    EMPTY,
    NOTHING,
    CharClass,
    Excluding,
    Expr,
    char_set,
    chars,
    choice,
    lit,
    one_symbol,
    repeat,
    seq,
)

SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f",
                 "\n": "\\n", "\r": "\\r", "\t": "\\t"}
"""Decoded character -> its two-character JSON escape."""

RAW_OK = chars([(0x20, 0x10FFFF)]).intersect(char_set('"\\').negate())
"""Characters JSON allows unescaped inside a string."""

_MAX_REMEMBERED = 8192  # distinct classes kept; past it both maps restart (recognition is optional)
_encoded: dict[CharClass, Expr] = {}
_decoded: dict[int, tuple[Expr, CharClass]] = {}  # id(expr) -> (expr kept alive, class)
_lock = threading.Lock()


def class_expr(cc: CharClass) -> Expr:
    """``cc`` as an expression; the empty class is NOTHING (so smart constructors absorb it)."""
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


def _build(cc: CharClass) -> Expr:
    parts: list[Expr] = [class_expr(cc.intersect(RAW_OK))]
    parts += [lit(esc) for ch, esc in SHORT_ESCAPES.items() if ord(ch) in cc]
    for lo, hi in cc.ranges:
        if lo <= 0xFFFF:
            parts.append(_u_escape(lo, min(hi, 0xFFFF)))
        if hi >= 0x10000:
            parts.append(_astral_pairs(max(lo, 0x10000), hi))
    return choice(*parts)


def encode_class(cc: CharClass) -> Expr:
    """Every JSON encoding of one decoded character from ``cc`` (see the module docstring).

    Invariant: the decoded value of any string matched is a single member of ``cc``, and
    ``decoded_class(encode_class(cc)) == cc`` while the result is remembered.
    """
    with _lock:
        hit = _encoded.get(cc)
    if hit is not None:
        return hit
    expr = _build(cc)
    with _lock:
        if len(_encoded) >= _MAX_REMEMBERED:
            _encoded.clear()
            _decoded.clear()
        expr = _encoded.setdefault(cc, expr)
        if not cc.is_empty:
            _decoded[id(expr)] = (expr, cc)
            one_symbol(expr)
    return expr


def decoded_class(expr: Expr) -> CharClass | None:
    """The class ``cc`` if ``expr`` is the very object ``encode_class(cc)`` returned, else None."""
    hit = _decoded.get(id(expr))
    return hit[1] if hit is not None and hit[0] is expr else None


@functools.lru_cache(maxsize=1024)
def strings_outside(excluded: tuple[str, ...], char: Expr, char_class: CharClass,
                    min_len: int = 0, max_len: int | None = None) -> Expr:
    """The JSON string bodies decoding to ``min_len..max_len`` characters from ``char_class``,
    except the words ``excluded`` (sorted, distinct); ``char`` spells one character of
    ``char_class`` (``encode_class`` of it, or a rule naming that).

    Built from the trie of ``excluded``: at each trie node either stop (if that node is not an
    excluded word), leave the trie with a character that has no child, or follow a child.
    Cached: a string constraint is asked for at every place its schema is used.
    """
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
        other = leaving_class(char_class, "".join(kids))
        lo = max(0, min_len - depth - 1)
        hi = None if max_len is None else max_len - depth - 1
        if not other.is_empty:
            parts.append(seq(encode_class(other), repeat(char, lo, hi)))
        for k in kids:
            if ord(k) in char_class:
                parts.append(seq(encode_class(one_char(k)), _words_outside(
                    node[k], depth + 1, char, char_class, min_len, max_len)))
    return choice(*parts) if parts else NOTHING


def expand_excluding(expr: Excluding) -> Expr:
    """``expr`` as plain IR (``strings_outside``, each character spelled by ``encode_class``)."""
    return strings_outside(expr.words, encode_class(expr.chars), expr.chars)


@functools.lru_cache(maxsize=4096)
def one_char(ch: str) -> CharClass:
    """The class of the one character ``ch`` (the same few, again and again)."""
    return char_set(ch)


@functools.lru_cache(maxsize=4096)
def leaving_class(char_class: CharClass, kids: str) -> CharClass:
    """The characters of ``char_class`` not in ``kids``: a trie node's way out of the trie."""
    return char_class.intersect(char_set(kids).negate())


__all__ = ["RAW_OK", "SHORT_ESCAPES", "class_expr", "decoded_class", "encode_class",
           "expand_excluding", "leaving_class", "one_char", "strings_outside"]
