"""JSON numbers as regular languages: syntax, exact decimal bounds and divisibility.

Numbers are strings of digits, so "value >= 2.5" or "value is a multiple of 7" are regular
languages over the JSON number syntax. This module builds them as IR expressions:

    NUMBER              -?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?   (exact JSON syntax)
    number_in(...)      numbers in an interval, compared as exact decimals
    integer_in(...)     integral numbers in an interval
    multiples(...)      integral numbers divisible by an integer, optionally signed

Decisions (see docs/json-schema.md):
- An *integer* is written ``-?(0|[1-9][0-9]*)`` optionally followed by ``.0+`` (2020-12 counts
  ``1.0`` as an integer; ``json.dumps`` never writes that for an ``int`` but does for floats).
  Exponent spellings of integers (``1e2``) are rejected: conservative, never wrong.
- Bounded numbers (``minimum`` & co.) are written without an exponent: again conservative.
- ``-0`` equals ``0`` and is allowed exactly where ``0`` is.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Literal

from grammarsd.grammar.ir import (
    EMPTY,
    NOTHING,
    Expr,
    Ref,
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


def number_in(lo: Decimal | None, lo_strict: bool, hi: Decimal | None, hi_strict: bool) -> Expr:
    """Exponent-free JSON numbers with ``lo <(=) value <(=) hi`` (``None``: unbounded).

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


def integer_in(lo: int | None, hi: int | None) -> Expr:
    """Integral JSON numbers (``-?digits`` plus optional ``.0+``) in ``[lo, hi]`` (inclusive)."""
    parts: list[Expr] = []
    if hi is None or hi >= 0:
        parts.append(natural_in(0 if lo is None else max(lo, 0), hi))
    if lo is None or lo <= 0:
        m_lo = 0 if hi is None or hi >= 0 else -hi
        parts.append(seq(lit("-"), natural_in(m_lo, None if lo is None else -lo)))
    return seq(choice(*parts), INTEGRAL_SUFFIX)


Sign = Literal["any", "nonneg", "nonpos"]


def multiples(divisor: int, sign: Sign = "any") -> tuple[Expr, dict[str, Expr]]:
    """Integral JSON numbers divisible by ``divisor`` (> 0) with the given sign.

    Returns the expression and the rules it references: the residue automaton over decimal
    digits, one rule ``mod{divisor}_{r}`` per residue ``r`` (digits still to read that bring
    residue ``r`` to 0). ``-0``/``0`` belong to every sign.
    """
    rules: dict[str, Expr] = {}
    for r in range(divisor):
        alts: list[Expr] = [EMPTY] if r == 0 else []
        alts += [seq(lit(str(d)), Ref(f"mod{divisor}_{(r * 10 + d) % divisor}")) for d in range(10)]
        rules[f"mod{divisor}_{r}"] = choice(*alts)
    magnitude = choice(lit("0"), *(seq(lit(str(d)), Ref(f"mod{divisor}_{d % divisor}"))
                                   for d in range(1, 10)))
    parts: list[Expr] = []
    if sign != "nonpos":
        parts.append(magnitude)
    parts.append(seq(lit("-"), magnitude if sign != "nonneg" else lit("0")))
    if sign == "nonpos":
        parts.append(lit("0"))
    return seq(choice(*parts), INTEGRAL_SUFFIX), rules


#: Numbers whose value is not an integer, spelled without exponent (conservative).
NUMBER_NONINTEGRAL = seq(optional(lit("-")), _INT_PART, lit("."), repeat(DIGIT), NONZERO,
                         repeat(DIGIT))


def decimal_places(k: int) -> Expr:
    """Exponent-free numbers with at most ``k`` significant fraction digits (multiples of 10**-k).

    Trailing zeros after the ``k`` digits are allowed (``0.50`` is a multiple of 0.1).
    """
    frac = seq(lit("."), repeat(DIGIT, 1, k), repeat(lit("0"))) if k else seq(
        lit("."), repeat(lit("0"), 1))
    return seq(optional(lit("-")), _INT_PART, optional(frac))


def decimal_multiples(p: int, k: int) -> tuple[Expr, dict[str, Expr]]:
    """Exponent-free numbers that are multiples of ``p / 10**k`` (``p > 0``, ``k >= 1``).

    ``x`` is such a multiple iff the digits of ``x * 10**k`` (integer part, then the first ``k``
    fraction digits padded with zeros) spell a multiple of ``p`` and every later fraction digit
    is 0. Rules ``dmul{p}_{k}_i{r}`` read integer digits at residue ``r``; ``..._f{j}_{r}``
    read fraction digit ``j + 1`` at residue ``r``.
    """
    tag = f"dmul{p}_{k}"
    rules: dict[str, Expr] = {}

    def frac(j: int, r: int, first: bool) -> Expr:
        if j == k:
            return repeat(lit("0"), 1 if first else 0) if r == 0 else NOTHING
        return Ref(f"{tag}_f{j}_{r}{'n' if first else ''}")

    for j in range(k):
        for r in range(p):
            for first in (False, True):
                alts: list[Expr] = []
                if not first and r * 10 ** (k - j) % p == 0:
                    alts.append(EMPTY)
                alts += [seq(lit(str(d)), frac(j + 1, (r * 10 + d) % p, False))
                         for d in range(10)]
                rules[f"{tag}_f{j}_{r}{'n' if first else ''}"] = choice(*alts)
    for r in range(p):
        tail = choice(EMPTY if r * 10**k % p == 0 else NOTHING, seq(lit("."), frac(0, r, True)))
        digits = [seq(lit(str(d)), Ref(f"{tag}_i{(r * 10 + d) % p}")) for d in range(10)]
        rules[f"{tag}_i{r}"] = choice(tail, *digits)
    zero_tail = choice(EMPTY, seq(lit("."), frac(0, 0, True)))
    magnitude = choice(seq(lit("0"), zero_tail),
                       *(seq(lit(str(d)), Ref(f"{tag}_i{d % p}")) for d in range(1, 10)))
    return seq(optional(lit("-")), magnitude), rules
