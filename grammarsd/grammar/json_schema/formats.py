"""``format`` as regular languages over decoded characters.

Owns which formats grammarsd enforces and how. A format is enforced only where its language is
regular and written here exactly as the JSON Schema Test Suite (RFC 3339, RFC 4122, ...) defines
it; a format the drafts define but that is not listed here is refused, and a format name no
draft defines is ignored (the specification says unknown formats are annotations).
"""

from __future__ import annotations

from functools import cache

from grammarsd.grammar.ir import Expr, choice, lit, seq
from grammarsd.grammar.regex import parse_regex

#: Every format name some draft (4 .. 2020-12) defines.
KNOWN_FORMATS = frozenset({
    "date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname",
    "ipv4", "ipv6", "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template",
    "json-pointer", "relative-json-pointer", "regex", "host-name", "ip-address", "color",
})

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


# RFC 3986 pieces.
_UNRESERVED = r"A-Za-z0-9\-._~"
_SUB_DELIMS = r"!$&'()*+,;="
_PCT = f"%{_HEX}{{2}}"
_PCHAR = f"(?:[{_UNRESERVED}{_SUB_DELIMS}:@]|{_PCT})"
_AUTHORITY = (f"(?:(?:[{_UNRESERVED}{_SUB_DELIMS}:]|{_PCT})*@)?"
              f"(?:\\[(?:{_ipv6()}|v{_HEX}+\\.[{_UNRESERVED}{_SUB_DELIMS}:]+)\\]"
              f"|(?:[{_UNRESERVED}{_SUB_DELIMS}]|{_PCT})*)(?::[0-9]*)?")
_SEGMENT_NZ = f"{_PCHAR}+"
_PATH_ABEMPTY = f"(?:/{_PCHAR}*)*"
_PATH_ABSOLUTE = f"/(?:{_SEGMENT_NZ}(?:/{_PCHAR}*)*)?"
_PATH_ROOTLESS = f"{_SEGMENT_NZ}(?:/{_PCHAR}*)*"
_PATH_NOSCHEME = f"(?:[{_UNRESERVED}{_SUB_DELIMS}@]|{_PCT})+(?:/{_PCHAR}*)*"
_QUERY_FRAGMENT = f"(?:\\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"
_URI = (f"[A-Za-z][A-Za-z0-9+\\-.]*:(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}"
        f"|{_PATH_ROOTLESS})?" + _QUERY_FRAGMENT)
_RELATIVE = (f"(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_PATH_NOSCHEME})?"
             + _QUERY_FRAGMENT)

# RFC 3339 appendix A durations.
_D = "[0-9]+"
_DUR_TIME = f"T(?:{_D}H(?:{_D}M(?:{_D}S)?)?|{_D}M(?:{_D}S)?|{_D}S)"
_DURATION = (f"P(?:(?:{_D}D|{_D}M(?:{_D}D)?|{_D}Y(?:{_D}M(?:{_D}D)?)?)(?:{_DUR_TIME})?"
             f"|{_DUR_TIME}|{_D}W)")

_FRAC = r"(?:\.[0-9]+)?"
_HOUR, _MINUTE = "(?:[01][0-9]|2[0-3])", "[0-5][0-9]"
_OFFSET = f"(?:[Zz]|[+-]{_HOUR}:{_MINUTE})"


def _time() -> Expr:
    """RFC 3339 ``full-time``; second 60 only where the time is 23:59:60 in UTC.

    The leap-second part lists the local ``HH:MM`` for each of the 2880 offsets: the local
    time and the offset are linked digit by digit, so no smaller grammar states it.
    """
    ordinary = parse_regex(f"{_HOUR}:{_MINUTE}:{_MINUTE}{_FRAC}{_OFFSET}")
    frac = parse_regex(_FRAC)
    leap = [seq(lit("23:59:60"), frac, parse_regex("[Zz]"))]
    for sign in "+-":
        for minutes in range(24 * 60):
            local = (23 * 60 + 59 + (minutes if sign == "+" else -minutes)) % (24 * 60)
            leap.append(seq(lit(f"{local // 60:02}:{local % 60:02}:60"), frac,
                            lit(f"{sign}{minutes // 60:02}:{minutes % 60:02}")))
    return choice(ordinary, *leap)


_PATTERNS: dict[str, str] = {
    "date": _DATE,
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "ipv4": _IPV4,
    "ipv6": _ipv6(),
    "uri": _URI,
    "uri-reference": f"(?:{_URI}|{_RELATIVE})",
    "duration": _DURATION,
    "json-pointer": r"(?:/(?:[^~/]|~[01])*)*",
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
