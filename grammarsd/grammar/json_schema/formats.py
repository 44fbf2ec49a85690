"""``format`` as regular languages over decoded characters.

Owns which formats grammarsd enforces and how. A format is enforced only where its language is
regular and written here exactly as the JSON Schema Test Suite (RFC 3339, RFC 4122, ...) defines
it; a format the drafts define but that is not listed here is refused, and a format name no
draft defines is ignored (the specification says unknown formats are annotations).

``email`` is a *subset* of RFC 5321 ``Mailbox`` (never an invalid address; some rare valid ones
are rejected), kept within the 64-character local part and 254-character address limits by
plain bounded repeats: the local part is one dot-atom of up to 64 characters without dots, two
atoms of up to 31 + 32, or three or four atoms of up to 15 each, or a quoted string with up to
31 (possibly escaped) characters; the domain is ``[IPv4]``, ``[IPv6:...]``, 1-4 labels of up to
46 characters or 5-6 labels of up to 30, each label letters, digits and inner hyphens without
``--`` in positions 3-4 (RFC 5891 reserves those for A-labels, whose validity needs IDNA).
``jsonschema``'s email checker only asks for an ``@``, so whatever is accepted here also passes
``grammarsd.grammar.validate``. ``hostname`` stays refused: the suite lists valid A-labels
(``xn--...``) that this label language would reject, and invalid ones (``xn--X``) that plain
RFC 1123 labels would accept; telling them apart needs Punycode and IDNA 2008 checks.

Complements (``not``, ``oneOf``) take the string automaton minus ``format_dfa``; only for the
formats enforced exactly, never for ``SUBSET_FORMATS`` (the complement of a subset would admit
valid values).
"""

from __future__ import annotations

from functools import cache

from grammarsd.grammar.automata import CharDFA
from grammarsd.grammar.ir import CharClass, Choice, Expr, Literal, Repeat, Seq, choice, lit, seq
from grammarsd.grammar.regex import parse_regex

#: Every format name some draft (4 .. 2020-12) defines.
KNOWN_FORMATS = frozenset({
    "date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname",
    "ipv4", "ipv6", "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template",
    "json-pointer", "relative-json-pointer", "regex", "host-name", "ip-address", "color",
})

#: Enforced formats whose language is a *subset* of the format (never an invalid value, some
#: valid ones rejected): their complement would admit valid values, so it is refused.
SUBSET_FORMATS = frozenset({"email"})

_YEAR = r"[0-9]{4}"
# Leap years: divisible by 4, and centuries only when divisible by 400.
_LEAP = (r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)")
_DATE = (r"(?:" + _YEAR + r"-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
         r"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
         r"|" + _LEAP + r"-02-29)")
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"

_HEX = "[0-9A-Fa-f]"
_H16 = _HEX + "{1,4}"
_IPV4 = _OCTET + r"(?:\." + _OCTET + r"){3}"
_LS32 = f"(?:{_H16}:{_H16}|{_IPV4})"


def _ipv6() -> str:
    """RFC 3986 ``IPv6address``: the nine forms of where ``::`` may stand."""
    forms = [f"(?:{_H16}:){{6}}{_LS32}", f"::(?:{_H16}:){{5}}{_LS32}"]
    for before, after in ((0, 4), (1, 3), (2, 2), (3, 1)):
        forms.append(f"(?:(?:{_H16}:){{0,{before}}}{_H16})?::(?:{_H16}:){{{after}}}{_LS32}")
    forms.append(f"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}")
    forms.append(f"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}")
    forms.append(f"(?:(?:{_H16}:){{0,6}}{_H16})?::")
    return "(?:" + "|".join(forms) + ")"


# RFC 3986 URIs; RFC 3987 IRIs add ``ucschar`` wherever ``unreserved`` stands (outside
# IP literals) and ``iprivate`` in the query.
_UNRESERVED = r"A-Za-z0-9\-._~"
_SUB_DELIMS = r"!$&'()*+,;="
_PCT = f"%{_HEX}{{2}}"
_UCSCHAR = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in [
    (0xA0, 0xD7FF), (0xF900, 0xFDCF), (0xFDF0, 0xFFEF),
    *((p * 0x10000, p * 0x10000 + 0xFFFD) for p in range(1, 14)), (0xE1000, 0xEFFFD)])
_IPRIVATE = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in [
    (0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD)])


def _uri_forms(ucs: str, private: str) -> tuple[str, str]:
    """(absolute URI, relative reference) of RFC 3986, or of RFC 3987 with the IRI classes."""
    unres = _UNRESERVED + ucs
    pchar = f"(?:[{unres}{_SUB_DELIMS}:@]|{_PCT})"
    authority = (f"(?:(?:[{unres}{_SUB_DELIMS}:]|{_PCT})*@)?"
                 f"(?:\\[(?:{_ipv6()}|[vV]{_HEX}+\\.[{_UNRESERVED}{_SUB_DELIMS}:]+)\\]"
                 f"|(?:[{unres}{_SUB_DELIMS}]|{_PCT})*)(?::[0-9]*)?")
    path_abempty = f"(?:/{pchar}*)*"
    path_absolute = f"/(?:{pchar}+(?:/{pchar}*)*)?"
    path_rootless = f"{pchar}+(?:/{pchar}*)*"
    path_noscheme = f"(?:[{unres}{_SUB_DELIMS}@]|{_PCT})+(?:/{pchar}*)*"
    query = f"(?:\\?(?:{pchar}|[/?{private}])*)?" if private else f"(?:\\?(?:{pchar}|[/?])*)?"
    query_fragment = query + f"(?:#(?:{pchar}|[/?])*)?"
    absolute = (f"[A-Za-z][A-Za-z0-9+\\-.]*:(?://{authority}{path_abempty}|{path_absolute}"
                f"|{path_rootless})?" + query_fragment)
    relative = (f"(?://{authority}{path_abempty}|{path_absolute}|{path_noscheme})?"
                + query_fragment)
    return absolute, relative


_URI, _RELATIVE = _uri_forms("", "")
_IRI, _IRELATIVE = _uri_forms(_UCSCHAR, _IPRIVATE)

# RFC 3339 appendix A durations.
_D = "[0-9]+"
_DUR_TIME = f"T(?:{_D}H(?:{_D}M(?:{_D}S)?)?|{_D}M(?:{_D}S)?|{_D}S)"
_DURATION = (f"P(?:(?:{_D}D|{_D}M(?:{_D}D)?|{_D}Y(?:{_D}M(?:{_D}D)?)?)(?:{_DUR_TIME})?"
             f"|{_DUR_TIME}|{_D}W)")

# RFC 5321 / 5322 mailbox pieces (ASCII only; bounds in the module docstring).
_LETDIG, _LDH = "[A-Za-z0-9]", "[A-Za-z0-9\\-]"
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~\-]"
_QCHAR = r"(?:[ !#-\[\]-~]|\\[ -~])"


def _label(n: int) -> str:
    """A hostname label of 1..n letters, digits and inner hyphens, without ``--`` at 3-4."""
    return (f"{_LETDIG}(?:{_LETDIG}|{_LDH}{_LETDIG}|{_LDH}{_LDH}{_LETDIG}"
            f"|{_LDH}(?:{_LETDIG}{_LDH}|-{_LETDIG}){_LDH}{{0,{n - 5}}}{_LETDIG})?")


def _dotted(part: str, lo: int, hi: int) -> str:
    """``lo`` to ``hi`` copies of ``part`` joined by dots."""
    return f"{part}(?:\\.{part}){{{lo - 1},{hi - 1}}}"


_LOCAL = (f"(?:{_ATEXT}{{1,64}}|{_ATEXT}{{1,31}}\\.{_ATEXT}{{1,32}}"
          f"|{_dotted(_ATEXT + '{1,15}', 3, 4)}|\"{_QCHAR}{{0,31}}\")")
_EMAIL = (f"{_LOCAL}@(?:{_dotted(_label(46), 1, 4)}|{_dotted(_label(30), 5, 6)}"
          f"|\\[{_IPV4}\\]|\\[IPv6:{_ipv6()}\\])")

_FRAC = r"(?:\.[0-9]+)?"
_HOUR, _MINUTE = "(?:[01][0-9]|2[0-3])", "[0-5][0-9]"
_OFFSET = f"(?:[Zz]|[+-]{_HOUR}:{_MINUTE})"


@cache  # one object for ``time`` and ``date-time``: ~1.4k alternatives, encoded once
def _time() -> Expr:
    """RFC 3339 ``full-time``; second 60 only where the time is 23:59:60 in UTC.

    The leap-second part lists, for each of the 1440 local ``HH:MM``, the two offsets (one
    ahead of UTC, one behind) that make it 23:59 in UTC: the local time and the offset are
    linked digit by digit, so no smaller grammar states it.
    """
    ordinary = parse_regex(f"{_HOUR}:{_MINUTE}:{_MINUTE}{_FRAC}{_OFFSET}")
    frac = parse_regex(_FRAC)
    leap = [seq(lit("23:59:60"), frac, parse_regex("[Zz]"))]
    day, utc = 24 * 60, 23 * 60 + 59
    for local in range(day):
        ahead, behind = (local - utc) % day, (utc - local) % day  # local = utc +/- offset
        leap.append(seq(lit(f"{local // 60:02}:{local % 60:02}:60"), frac,
                        choice(lit(f"+{ahead // 60:02}:{ahead % 60:02}"),
                               lit(f"-{behind // 60:02}:{behind % 60:02}"))))
    return choice(ordinary, *leap)


_PATTERNS: dict[str, str] = {
    "date": _DATE,
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "ipv4": _IPV4,
    "ipv6": _ipv6(),
    "uri": _URI,
    "uri-reference": f"(?:{_URI}|{_RELATIVE})",
    "iri": _IRI,
    "iri-reference": f"(?:{_IRI}|{_IRELATIVE})",
    "duration": _DURATION,
    "json-pointer": r"(?:/(?:[^~/]|~[01])*)*",
    "relative-json-pointer": r"(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^~/]|~[01])*)*)",
    "email": _EMAIL,
}


@cache
def format_expr(name: str) -> Expr | None:
    """The decoded strings of format ``name``, or ``None`` if it is known but not enforced.

    Only call with names in ``KNOWN_FORMATS``.
    """
    if name == "time":
        return _time()
    if name == "date-time":
        return seq(parse_regex(_DATE), parse_regex("[Tt]"), _time())
    pattern = _PATTERNS.get(name)
    return None if pattern is None else parse_regex(pattern, flavor="python")


def _lengths(expr: Expr) -> tuple[int, int | None]:
    """Shortest and longest word length (in characters) of a rule-free expression."""
    if isinstance(expr, Literal):
        return len(expr.text), len(expr.text)
    if isinstance(expr, CharClass):
        return 1, 1
    if isinstance(expr, Repeat):
        lo, hi = _lengths(expr.item)
        top = None if hi is None or expr.max is None else hi * expr.max
        return lo * expr.min, top
    if isinstance(expr, (Seq, Choice)):
        parts = [_lengths(e) for e in expr.items]
        his = [hi for _, hi in parts]
        if isinstance(expr, Seq):
            return sum(lo for lo, _ in parts), None if None in his else sum(
                h for h in his if h is not None)
        return min(lo for lo, _ in parts), None if None in his else max(
            h for h in his if h is not None)
    raise TypeError(f"unexpected expression in a format: {expr!r}")


@cache
def format_dfa(name: str) -> CharDFA:
    """The automaton of the enforced format ``name`` (cached; raises ``GrammarTooLargeError``
    where it exceeds ``CharDFA.from_expr``'s limits, as the leap seconds of ``time`` may)."""
    expr = format_expr(name)
    assert expr is not None
    return CharDFA.from_expr(expr)


@cache
def format_lengths(name: str) -> tuple[int, int | None]:
    """Shortest and longest length (decoded characters) of the enforced format ``name``, so a
    ``minLength``/``maxLength`` beside it that adds nothing need not be intersected."""
    expr = format_expr(name)
    assert expr is not None
    return _lengths(expr)
