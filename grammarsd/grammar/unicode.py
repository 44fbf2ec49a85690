"""Unicode tables for the regex front end, built once per process.

Every table is a numpy array indexed by code point (``0 .. 0x10FFFF``, length ``0x110000``):

    simple_lower()      int32[0x110000]   the simple lowercase mapping ``re`` uses
                                          (``_sre.unicode_tolower``)
    ascii_lower()       int32[0x110000]   lowercase for A-Z only (``re.ASCII`` + IGNORECASE)
    simple_upper()      int32[0x110000]   the simple uppercase mapping (identity where the
                                          full mapping is not one code point)
    category_mask(name) bool[0x110000]    ``\\d \\w \\s`` of Python ``re`` (``"py_digit"``,
                                          ``"py_word"``, ``"py_space"``), of ``re.ASCII``
                                          (``"ascii_*"``), and Unicode general categories
                                          (``"gc:Lu"``, ``"gc:L"``, ...)

Tables are cached with ``functools.lru_cache``: each is built once per process. The ``re``
classes and ``ecma_space`` are read off ``re`` itself in ~20-40 ms; a general category, which
asks ``unicodedata`` of every code point, ~150 ms, and the first IGNORECASE class ~0.2 s;
later calls are a dictionary lookup. ``category_class(name)`` caches the
IR class too. ``mask_to_class`` / ``class_to_mask`` convert between boolean masks and IR
``CharClass`` ranges.
"""

from __future__ import annotations

import _sre
import re
import unicodedata
from collections.abc import Iterator
from functools import cache, lru_cache

import numpy as np

from grammarsd.grammar.ir import MAX_CODE_POINT, CharClass, chars

SIZE = MAX_CODE_POINT + 1

#: General categories grouped by their one-letter major class (UAX #44).
GENERAL_CATEGORIES = (
    "Lu Ll Lt Lm Lo Mn Mc Me Nd Nl No Pc Pd Ps Pe Pi Pf Po Sm Sc Sk So Zs Zl Zp Cc Cf Cs Co Cn"
).split()


def _all_chars() -> Iterator[str]:
    """Every code point as a one-character string (not kept: 1.1M strings cost ~60 MB)."""
    return map(chr, range(SIZE))


@lru_cache(maxsize=1)
def simple_lower() -> np.ndarray:
    """``int32[0x110000]``: ``re``'s simple lowercase mapping of every code point."""
    tolower = _sre.unicode_tolower
    table = np.fromiter((tolower(cp) for cp in range(SIZE)), dtype=np.int32, count=SIZE)
    table.setflags(write=False)
    return table


@lru_cache(maxsize=1)
def ascii_lower() -> np.ndarray:
    """``int32[0x110000]``: identity except ``A-Z`` -> ``a-z``."""
    table = np.arange(SIZE, dtype=np.int32)
    table[ord("A") : ord("Z") + 1] += 32
    table.setflags(write=False)
    return table


@lru_cache(maxsize=1)
def simple_upper() -> np.ndarray:
    """``int32[0x110000]``: the one-code-point uppercase of each code point (else itself)."""
    table = np.arange(SIZE, dtype=np.int32)
    for cp, ch in enumerate(_all_chars()):
        up = ch.upper()
        if len(up) == 1 and up != ch:
            table[cp] = ord(up)
    table.setflags(write=False)
    return table


@lru_cache(maxsize=1)
def cased_mask() -> np.ndarray:
    """``bool[0x110000]``: ``_sre.unicode_iscased`` for every code point."""
    iscased = _sre.unicode_iscased
    mask = np.fromiter((iscased(cp) for cp in range(SIZE)), dtype=np.bool_, count=SIZE)
    mask.setflags(write=False)
    return mask


def _re_mask(pattern: str) -> np.ndarray:
    """The code points a one-character ``re`` pattern matches, found by ``re`` over one string
    of every code point (a scan in C; ``_sre`` tests ``\\d \\w \\s`` with the same predicates as
    ``str.isdecimal``, ``str.isalnum`` or ``_``, and ``str.isspace``)."""
    every = np.arange(SIZE, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")
    mask = np.zeros(SIZE, dtype=np.bool_)
    mask[[m.start() for m in re.finditer(pattern, every)]] = True
    return mask


@cache
def category_mask(name: str) -> np.ndarray:
    """``bool[0x110000]`` membership of a named character category.

    Names: ``py_digit`` (``str.isdecimal``), ``py_word`` (``str.isalnum`` or ``_``),
    ``py_space`` (``str.isspace``), ``ascii_digit``, ``ascii_word``, ``ascii_space``
    (``re.ASCII`` meanings), ``ecma_space`` (ECMA-262 WhiteSpace + LineTerminator) and
    ``gc:XX`` / ``gc:X`` for a Unicode general category or major class.
    """
    if name == "py_digit":
        mask = _re_mask(r"\d")
    elif name == "py_word":
        mask = _re_mask(r"\w")
    elif name == "py_space":
        mask = _re_mask(r"\s")
    elif name.startswith("ascii_") or name == "ecma_space":
        text = {
            "ascii_digit": "0123456789",
            "ascii_word": "0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
            "ascii_space": " \t\n\r\f\v",
            "ecma_space": "\t\v\f \u00a0\ufeff\n\r\u2028\u2029",
        }[name]
        mask = np.zeros(SIZE, dtype=np.bool_)
        mask[[ord(c) for c in text]] = True
        if name == "ecma_space":  # and category Zs, all of which ``str.isspace`` holds
            space = np.flatnonzero(category_mask("py_space")).tolist()
            mask[[c for c in space if unicodedata.category(chr(c)) == "Zs"]] = True
    elif name.startswith("gc:"):
        mask = _general_category(name[3:])
    else:
        raise KeyError(f"unknown character category {name!r}")
    mask.setflags(write=False)
    return mask


@lru_cache(maxsize=1)
def _category_codes() -> np.ndarray:
    index = {gc: i for i, gc in enumerate(GENERAL_CATEGORIES)}
    cat = unicodedata.category
    return np.fromiter((index[cat(ch)] for ch in _all_chars()), dtype=np.int8, count=SIZE)


def _general_category(gc: str) -> np.ndarray:
    wanted = [i for i, name in enumerate(GENERAL_CATEGORIES) if name == gc or name[0] == gc]
    if len(gc) not in (1, 2) or not wanted:
        raise KeyError(f"unknown general category {gc!r}")
    return np.isin(_category_codes(), np.array(wanted, dtype=np.int8))


@cache
def category_class(name: str) -> CharClass:
    """``category_mask(name)`` as an IR ``CharClass`` (cached)."""
    return mask_to_class(category_mask(name))


def mask_to_class(mask: np.ndarray) -> CharClass:
    """The ``CharClass`` of the code points set in ``bool[0x110000]`` ``mask``."""
    padded = np.concatenate(([False], mask, [False])).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    starts, stops = edges[0::2], edges[1::2] - 1
    return chars(zip(starts.tolist(), stops.tolist(), strict=True))


def class_to_mask(cls: CharClass) -> np.ndarray:
    """``bool[0x110000]`` membership of ``cls``."""
    mask = np.zeros(SIZE, dtype=np.bool_)
    for a, b in cls.ranges:
        mask[a : b + 1] = True
    return mask


__all__ = [
    "GENERAL_CATEGORIES",
    "SIZE",
    "ascii_lower",
    "cased_mask",
    "category_class",
    "category_mask",
    "class_to_mask",
    "mask_to_class",
    "simple_lower",
    "simple_upper",
]
