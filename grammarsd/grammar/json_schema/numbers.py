"""JSON numbers as regular languages: syntax, exact decimal bounds and divisibility.

Numbers are strings of digits, so "value >= 2.5" or "value is a multiple of 7" are regular
languages over the JSON number syntax. This module builds them as IR expressions (and
divisibility, whose automaton is not a small expression, as a ``CharDFA``):

    NUMBER              -?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?   (exact JSON syntax)
    number_in(...)      numbers in an interval, compared as exact decimals
    integer_in(...)     integral numbers in an interval
    divisibility_dfa()  exponent-free numbers that are (or are not) multiples of p / 10**k

Decisions (see docs/json-schema.md):
- An *integer* is written ``-?(0|[1-9][0-9]*)`` optionally followed by ``.0+`` (2020-12 counts
  ``1.0`` as an integer; ``json.dumps`` never writes that for an ``int`` but does for floats).
  Exponent spellings of integers (``1e2``) are rejected: conservative, never wrong.
  Draft 4 decides by spelling instead (``1.0`` is a number but not an integer, as
  ``jsonschema``'s Draft4Validator and the Python value of ``json.loads``): ``BY_SPELLING``.
- Bounded numbers (``minimum`` & co.) and ``multipleOf`` (or its complement) are written
  without an exponent: again conservative.
- ``-0`` equals ``0`` and is allowed exactly where ``0`` is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import cache, lru_cache

import numpy as np

from grammarsd.grammar.automata import CharDFA
from grammarsd.grammar.ir import (
    EMPTY,
    NOTHING,
    Expr,
    char_set,
    choice,
    lit,
    optional,
    repeat,
    seq,
)

DIGIT = char_set("0123456789")
NONZERO = char_set("123456789")
_INT_PART = choice(lit("0"), seq(NONZERO, repeat(DIGIT)))
_FRAC = seq(lit("."), repeat(DIGIT, 1))
_EXP = seq(char_set("eE"), optional(char_set("+-")), repeat(DIGIT, 1))
NUMBER = seq(optional(lit("-")), _INT_PART, optional(_FRAC), optional(_EXP))
#: What may follow the digits of an integer: nothing or ``.0+``.
INTEGRAL_SUFFIX = optional(seq(lit("."), repeat(lit("0"), 1)))
INTEGER = seq(optional(lit("-")), _INT_PART, INTEGRAL_SUFFIX)


def fixed_width_range(lo: int, hi: int, width: int, base: int,
                      digit: Callable[[int, int], Expr]) -> Expr:
    """Exactly ``width`` base-``base`` digits (leading zeros allowed) with value in ``[lo, hi]``.

    ``digit(a, b)`` is one digit with value in ``[a, b]``. Empty if ``lo > hi``.
    """
    if lo > hi:
        return NOTHING
    if width == 0:
        return EMPTY
    unit = base ** (width - 1)
    top_lo, top_hi = lo // unit, hi // unit
    if top_lo == top_hi:
        return seq(digit(top_lo, top_lo),
                   fixed_width_range(lo % unit, hi % unit, width - 1, base, digit))
    parts: list[Expr] = []
    first_full = top_lo if lo % unit == 0 else top_lo + 1
    last_full = top_hi if hi % unit == unit - 1 else top_hi - 1
    if lo % unit != 0:
        parts.append(seq(digit(top_lo, top_lo),
                         fixed_width_range(lo % unit, unit - 1, width - 1, base, digit)))
    if first_full <= last_full:
        any_digit = digit(0, base - 1)
        parts.append(seq(digit(first_full, last_full), repeat(any_digit, width - 1, width - 1)))
    if hi % unit != unit - 1:
        parts.append(seq(digit(top_hi, top_hi),
                         fixed_width_range(0, hi % unit, width - 1, base, digit)))
    return choice(*parts)


def _dec_digit(a: int, b: int) -> Expr:
    return char_set("".join(str(v) for v in range(a, b + 1)))


def natural_in(lo: int, hi: int | None) -> Expr:
    """Canonical decimal naturals (no leading zeros) in ``[lo, hi]``; ``hi=None``: unbounded."""
    lo = max(lo, 0)
    if hi is not None and lo > hi:
        return NOTHING
    parts: list[Expr] = []
    width = len(str(lo))
    top = None if hi is None else len(str(hi))
    for w in range(width, (top if top is not None else width) + 1):
        w_lo = max(lo, 10 ** (w - 1) if w > 1 else 0)
        w_hi = 10**w - 1 if hi is None else min(hi, 10**w - 1)
        parts.append(fixed_width_range(w_lo, w_hi, w, 10, _dec_digit))
    if hi is None:
        parts.append(seq(NONZERO, repeat(DIGIT, width)))
    return choice(*parts)


def _frac_digits(value: Decimal) -> str:
    """Fraction digits of a non-negative decimal, trailing zeros stripped."""
    text = f"{value:f}"
    return text.split(".")[1].rstrip("0") if "." in text else ""


def _frac_between(lo: str | None, lo_strict: bool, hi: str | None, hi_strict: bool,
                  nonempty: bool) -> Expr:
    """Digit strings ``F`` with ``0.lo <(=) 0.F <(=) 0.hi`` (``None``: unbounded on that side).

    ``lo``/``hi`` are fraction digit strings without trailing zeros (``""`` is zero). With
    ``nonempty`` the string has at least one digit. Recursion consumes one bound digit per level.
    """
    least = 1 if nonempty else 0
    if lo == "" and not lo_strict:
        lo = None
    if hi == "":  # 0.F <(=) 0: only zeros, and only for "<="
        return NOTHING if hi_strict or lo is not None else repeat(lit("0"), least)
    if lo is None and hi is None:
        return repeat(DIGIT, least)
    if lo == "" and hi is None:  # 0.F > 0: some non-zero digit
        return seq(repeat(DIGIT), NONZERO, repeat(DIGIT))
    parts: list[Expr] = [EMPTY] if lo is None and not nonempty else []
    for d in range(10):
        if lo is None:
            nlo, nlo_s = None, False
        elif lo == "":
            nlo, nlo_s = (None, False) if d > 0 else ("", True)
        elif d < int(lo[0]):
            continue
        else:
            nlo, nlo_s = (None, False) if d > int(lo[0]) else (lo[1:], lo_strict)
        if hi is None:
            nhi, nhi_s = None, False
        elif d > int(hi[0]):
            continue
        else:
            nhi, nhi_s = (None, False) if d < int(hi[0]) else (hi[1:], hi_strict)
        parts.append(seq(lit(str(d)), _frac_between(nlo, nlo_s, nhi, nhi_s, False)))
    return choice(*parts)


def _with_frac(lo: str | None, lo_s: bool, hi: str | None, hi_s: bool) -> Expr:
    """An optional ``.F`` whose fraction value lies in the bounds (absent means 0)."""
    zero_ok = (lo is None or (lo == "" and not lo_s)) and (hi is None or not (hi == "" and hi_s))
    return choice(EMPTY if zero_ok else NOTHING,
                  seq(lit("."), _frac_between(lo, lo_s, hi, hi_s, True)))


def _magnitude_in(lo: Decimal, lo_strict: bool, hi: Decimal | None, hi_strict: bool) -> Expr:
    """Exponent-free non-negative decimals ``I(.F)?`` with value in the interval (``lo >= 0``)."""
    if hi is not None and (hi < lo or (hi == lo and (lo_strict or hi_strict))):
        return NOTHING
    n_lo, f_lo = int(lo), _frac_digits(lo - int(lo))
    if hi is None:
        return choice(seq(natural_in(n_lo, n_lo), _with_frac(f_lo, lo_strict, None, False)),
                      seq(natural_in(n_lo + 1, None), _with_frac(None, False, None, False)))
    n_hi, f_hi = int(hi), _frac_digits(hi - int(hi))
    if n_lo == n_hi:
        return seq(natural_in(n_lo, n_lo), _with_frac(f_lo, lo_strict, f_hi, hi_strict))
    return choice(
        seq(natural_in(n_lo, n_lo), _with_frac(f_lo, lo_strict, None, False)),
        seq(natural_in(n_lo + 1, n_hi - 1), _with_frac(None, False, None, False)),
        seq(natural_in(n_hi, n_hi), _with_frac(None, False, f_hi, hi_strict)),
    )


@lru_cache(maxsize=1024)
def number_in(lo: Decimal | None, lo_strict: bool, hi: Decimal | None, hi_strict: bool) -> Expr:
    """Exponent-free JSON numbers with ``lo <(=) value <(=) hi`` (``None``: unbounded). Kept per
    process (bounds recur across schemas: one expression object, its walks' answers kept).

    Invariant: every string matched is JSON number syntax and its exact decimal value satisfies
    the bounds; every exponent-free number that satisfies them is matched.
    """
    parts: list[Expr] = []
    if hi is None or hi > 0 or (hi == 0 and not hi_strict):  # non-negative side
        m_lo, m_lo_s = (Decimal(0), False) if lo is None or lo < 0 else (lo, lo_strict)
        parts.append(_magnitude_in(m_lo, m_lo_s, hi, hi_strict))
    if lo is None or lo < 0 or (lo == 0 and not lo_strict):  # "-" side: magnitude = -value
        m_lo, m_lo_s = (Decimal(0), False) if hi is None or hi > 0 else (-hi, hi_strict)
        parts.append(seq(lit("-"), _magnitude_in(m_lo, m_lo_s, None if lo is None else -lo,
                                                 lo_strict)))
    return choice(*parts)


@lru_cache(maxsize=1024)
def integer_in(lo: int | None, hi: int | None, suffix: Expr = INTEGRAL_SUFFIX) -> Expr:
    """Integral JSON numbers (``-?digits`` then ``suffix``) in ``[lo, hi]`` (inclusive)."""
    parts: list[Expr] = []
    if hi is None or hi >= 0:
        parts.append(natural_in(0 if lo is None else max(lo, 0), hi))
    if lo is None or lo <= 0:
        m_lo = 0 if hi is None or hi >= 0 else -hi
        parts.append(seq(lit("-"), natural_in(m_lo, None if lo is None else -lo)))
    return seq(choice(*parts), suffix)


#: Numbers whose value is not an integer, spelled without exponent (conservative).
NUMBER_NONINTEGRAL = seq(optional(lit("-")), _INT_PART, lit("."), repeat(DIGIT), NONZERO,
                         repeat(DIGIT))


#: Every exponent-free JSON number (the spellings the divisibility automata read).
EXPONENT_FREE = seq(optional(lit("-")), _INT_PART, optional(_FRAC))


@dataclass(frozen=True)
class Integers:
    """Which spellings the type ``integer`` covers, and so which its complement in ``number``.

    suffix       what may follow an integer's digits
    integer      every integer spelling accepted
    nonintegral  the (exponent-free) spellings of numbers that are not integers
    """

    suffix: Expr
    integer: Expr
    nonintegral: Expr


#: Drafts 6 to 2020-12: an integer is a number with a zero fractional part (``1.0`` is one).
BY_VALUE = Integers(INTEGRAL_SUFFIX, INTEGER, NUMBER_NONINTEGRAL)
#: Draft 4: an integer is written without fraction and exponent (``1.0`` is not one).
BY_SPELLING = Integers(EMPTY, seq(optional(lit("-")), _INT_PART),
                       seq(optional(lit("-")), _INT_PART, _FRAC))


def decimal_step(q: Fraction) -> tuple[int, int]:
    """``(p, k)`` with the same exponent-free multiples as ``q > 0``: those of ``p / 10**k``.

    Writing ``q = a / (b1 * b2)`` in lowest terms with ``b1`` a product of 2s and 5s and ``b2``
    coprime to 10, a finite decimal ``x = m * q`` makes ``x * b1 = m * a / b2`` a decimal with
    a denominator coprime to 10, hence an integer, so ``b2`` divides ``m``: the decimal
    multiples of ``q`` are the multiples of ``a / b1``. ``k`` is the least exponent with
    ``10**k / b1`` integral, so ``p = a * 10**k / b1`` is not divisible by 10 when ``k > 0``.
    """
    if q <= 0:
        raise ValueError(f"a divisor must be positive, not {q}")
    b1, rest, k = 1, q.denominator, 0
    for prime in (2, 5):
        while rest % prime == 0:
            rest //= prime
            b1 *= prime
    while 10**k % b1:
        k += 1
    return q.numerator * 10**k // b1, k


# Atoms of the divisibility automata: "-", ".", each digit, and everything else (dead).
_BOUNDS = np.array([0, ord("-"), ord("."), ord("/"), *range(ord("0"), ord("9") + 2)], np.int64)
_MINUS, _DOT, _DIGIT0 = 1, 2, 4


@cache
def divisibility_dfa(p: int, k: int, multiple: bool = True) -> CharDFA:
    """Exponent-free JSON numbers whose value is (``multiple``) or is not a multiple of
    ``p / 10**k`` (``p >= 1``, ``k >= 0``).

    ``x`` is a multiple iff ``x * 10**k`` is an integer divisible by ``p``: the digits of the
    integer part and the first ``k`` fraction digits are read as one number modulo ``p``, and
    any later fraction digit must be 0. States: start, after ``-``, integer part ``0``,
    integer part with residue ``r``, after ``.`` (no digit yet), ``j = min(digits, k)``
    fraction digits with residue ``r``, and *fractional* (a non-zero digit beyond ``k``).
    About ``p * (k + 2)`` states before minimisation. Invariant: the language is exactly the
    exponent-free numbers of ``EXPONENT_FREE`` with that value property (``-0`` is 0, a
    multiple of everything; the sign never matters).
    """
    if p < 1 or k < 0:
        raise ValueError(f"divisibility by {p}/10**{k} is not defined")
    index: dict[tuple[int | str, ...], int] = {}
    rows: list[list[int]] = []
    accept: list[bool] = []

    def state(key: tuple[int | str, ...]) -> int:
        if key not in index:
            index[key] = len(rows)
            rows.append([-1] * len(_BOUNDS))
            accept.append(False)
            todo.append(key)
        return index[key]

    def final(residue: int, shift: int) -> bool:  # value * 10**k is residue * 10**shift (mod p)
        return (residue * 10**shift % p == 0) == multiple

    todo: list[tuple[int | str, ...]] = []
    state(("start",))
    while todo:
        key = todo.pop()
        row = rows[index[key]]
        kind = key[0]
        digits: dict[int, tuple[int | str, ...]] = {}
        if kind in ("start", "neg"):
            if kind == "start":
                row[_MINUS] = state(("neg",))
            digits = {d: ("int", d % p) if d else ("zero",) for d in range(10)}
        elif kind in ("zero", "int"):
            r = 0 if kind == "zero" else int(key[1])
            accept[index[key]] = final(r, k)
            row[_DOT] = state(("dot", r))
            if kind == "int":
                digits = {d: ("int", (r * 10 + d) % p) for d in range(10)}
        elif kind in ("dot", "frac"):
            j, r = (0, int(key[1])) if kind == "dot" else (int(key[1]), int(key[2]))
            if kind == "frac":
                accept[index[key]] = final(r, k - j)
            for d in range(10):
                if j < k:
                    digits[d] = ("frac", j + 1, (r * 10 + d) % p)
                else:
                    digits[d] = ("frac", j, r) if d == 0 else ("fractional",)
        else:  # fractional: never a multiple
            accept[index[key]] = not multiple
            digits = {d: key for d in range(10)}
        for d, target in digits.items():
            row[_DIGIT0 + d] = state(target)
    return CharDFA(_BOUNDS, np.array(rows, np.int32), np.array(accept, bool))
