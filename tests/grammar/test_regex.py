"""Regex front end: python flavor against ``re.fullmatch``, ecma flavor against ``re`` on the
syntax both share (ASCII classes) plus hand-checked ECMA-262 cases, and the error contract."""

from __future__ import annotations

import itertools
import re

import pytest
from _frontend_oracle import assert_agrees, recognizer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grammarsd.errors import GrammarSyntaxError, UnsupportedSyntaxError
from grammarsd.grammar.regex import grammar_from_regex, parse_regex, parse_regex_search

SMALL = "ab1 \n"


def all_strings(alphabet: str, max_len: int) -> list[str]:
    return ["".join(t) for n in range(max_len + 1) for t in itertools.product(alphabet, repeat=n)]


# --------------------------------------------------------------------------- python flavor

PY_CASES = {
    "alternation": (r"a|b*c|", "abc"),
    "lazy_is_greedy": (r"a+?b??c*?", "abc"),
    "counted": (r"(ab){2,3}c{,2}d{2,}", "abcd"),
    "counted_exact": (r"x{3}", "xy"),
    "nested_groups": (r"((a|b)(?:c|))+", "abc"),
    "classes": (r"[^a-c][\d\-x]", "abcd1-x"),
    "dot": (r".a", "a\nb"),
    "dotall_inline": (r"(?s:.)a", "a\nb"),
    "ignorecase_scoped": (r"a(?i:b)c", "abcABC"),
    "ignorecase_off": (r"(?i)a(?-i:b)", "abAB"),
    "anchors_both": (r"^ab$", "ab"),
    "anchor_per_branch": (r"^a|b\Z|^$", "ab"),
    "anchor_in_group": (r"(^a|^b)c", "abc"),
    "verbose": ("(?x) a  b # comment\n c", "abc "),
    "escapes": (r"\x61\u0062\U00000063\N{LATIN SMALL LETTER D}\141", "abcd"),
    "empty_pattern": (r"", "a"),
    "empty_group": (r"()a()", "a"),
    "multiline_flag": (r"(?m)^a$", "a\n"),
    "unicode_word": (r"\w+", "aé_1 -٣"),
    "ascii_word": (r"(?a)\w+", "aé_1 -٣"),
    "surrogate_range": ("[\ud7ff-\ue000]", "\ud7ff\ue000a"),
}


@pytest.mark.parametrize("name", list(PY_CASES))
def test_python_flavor_matches_re(name: str) -> None:
    pattern, alphabet = PY_CASES[name]
    samples = [
        s for s in all_strings(alphabet, 4) if not any(0xD800 <= ord(c) <= 0xDFFF for c in s)
    ]
    assert_agrees(parse_regex(pattern), lambda s: bool(re.fullmatch(pattern, s)), samples, name)


def test_flags_argument() -> None:
    for flags, samples in [(re.I, ["A", "a", "b"]), (re.S, ["\n", "a", ""]), (re.X, ["a", " a"])]:
        pattern = "a" if flags != re.S else "."
        pattern = " a " if flags == re.X else pattern
        assert_agrees(
            parse_regex(pattern, flags=flags),
            lambda s, p=pattern, f=flags: bool(re.fullmatch(p, s, f)),
            samples,
        )


def test_grammar_from_regex_has_one_start_rule() -> None:
    g = grammar_from_regex(r"[0-9]+(\.[0-9]+)?")
    assert list(g.rules) == ["start"] and g.start == "start"
    rec = recognizer(g)
    assert rec.accepts("12.5") and not rec.accepts("12.")


# A small regex generator: (pattern, is_atom). Covers literals, classes, groups, alternation,
# every quantifier form (greedy and lazy), anchors at the pattern ends.
ATOMS = st.sampled_from(
    ["a", "b", "1", " ", r"\n", ".", "[ab]", "[^a]", r"\d", r"\w", r"\s", r"\W", "[a-b1]", "(?:)"]
)
QUANTS = st.sampled_from(["", "", "*", "+", "?", "{2}", "{1,2}", "{0,}", "{,1}", "*?", "+?", "??"])


def _regexes() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        group = st.tuples(inner, QUANTS).map(lambda t: f"(?:{t[0]}){t[1]}")
        cat = st.lists(inner, min_size=2, max_size=3).map("".join)
        alt = st.lists(inner, min_size=2, max_size=3).map("|".join).map(lambda s: f"({s})")
        return st.one_of(group, cat, alt)

    atom = st.tuples(ATOMS, QUANTS).map("".join)
    return st.recursive(atom, extend, max_leaves=6)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=_regexes(), texts=st.lists(st.text(SMALL, max_size=6), min_size=10, max_size=10))
def test_python_flavor_random_patterns(pattern: str, texts: list[str]) -> None:
    samples = texts + all_strings("ab", 3)
    assert_agrees(parse_regex(pattern), lambda s: bool(re.fullmatch(pattern, s)), samples, pattern)


# --------------------------------------------------------------------------- ecma flavor

ECMA_QUANTS = st.sampled_from(["", "*", "+", "?", "{2}", "{1,2}", "{0,}", "*?", "+?", "??"])
ECMA_SHARED_ATOMS = ["a", "b", "1", " ", "[ab]", "[^a]", r"\d", r"\w", r"\W", r"\D", "[a-b1]"]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.lists(
        st.tuples(st.sampled_from(ECMA_SHARED_ATOMS), ECMA_QUANTS), min_size=1, max_size=4
    ),
    split=st.integers(0, 3),
    anchors=st.tuples(st.booleans(), st.booleans()),
    texts=st.lists(st.text(SMALL + "é", max_size=6), min_size=10, max_size=10),
)
def test_ecma_shared_subset_matches_re_ascii(
    parts: list[tuple[str, str]], split: int, anchors: tuple[bool, bool], texts: list[str]
) -> None:
    """On syntax both share, ECMA's ASCII ``\\d \\w`` equal Python's ``re.ASCII`` ones;
    fullmatch against ``re.fullmatch`` and search against ``re.search`` (with ``\\A``/``\\Z``)."""
    items = ["".join(p) for p in parts]
    left, right = "".join(items[:split]), "".join(items[split:])
    body = f"{left}|{right}" if split else right
    ecma = ("^" if anchors[0] else "") + body + ("$" if anchors[1] else "")
    py = ("\\A" if anchors[0] else "") + body + ("\\Z" if anchors[1] else "")
    samples = texts + all_strings("a1", 3)
    assert_agrees(
        parse_regex(ecma, flavor="ecma"),
        lambda s: bool(re.fullmatch(py, s, re.ASCII)),
        samples,
        ecma,
    )
    assert_agrees(
        parse_regex_search(ecma, flavor="ecma"),
        lambda s: bool(re.search(py, s, re.ASCII)),
        samples,
        "search " + ecma,
    )


# (pattern, accepted, rejected) -- checked by hand against ECMA-262 (u flag)
ECMA_CASES = {
    "dot_line_terminators": (
        ".",
        ["a", "\t", "\U0001f600", "\x85"],
        ["\n", "\r", "\u2028", "\u2029"],
    ),
    "digit_ascii_only": (r"\d", ["0", "9"], ["\u0663", "a"]),
    "word_ascii_only": (r"\w", ["a", "Z", "_", "0"], ["é", "-", "\u0663"]),
    "space": (
        r"\s",
        [" ", "\t", "\v", "\f", "\ufeff", "\u00a0", "\u3000", "\u2028", "\n", "\r"],
        ["\x1c", "\x85", "a"],
    ),
    "not_space": (r"\S", ["\x85", "a"], [" ", "\ufeff"]),
    "brace_escape": (r"\u{1F600}\u{41}", ["\U0001f600A"], ["A"]),
    "surrogate_pair": (r"\uD83D\uDE00", ["\U0001f600"], ["a"]),
    "named_group": (r"(?<year>\d{4})-(?<m>\d\d)", ["2024-01"], ["2024-1", "24-01"]),
    "empty_class": (r"a[]?", ["a"], ["a]", ""]),
    "any_class": (r"[^]", ["\n", "a"], ["", "ab"]),
    "control_escape": (r"\cJ\cm", ["\n\r"], ["cJcm"]),
    "class_escapes": (r"[\b\-\d]", ["\b", "-", "5"], ["b", "\\"]),
    "null_escape": (r"\0", ["\0"], ["0"]),
    "hex": (r"\x41\u0042", ["AB"], ["ab"]),
    "annex_b_brace": (r"a{b}", ["a{b}"], ["ab"]),
    "annex_b_no_lower_bound": (r"a{,1}", ["a{,1}"], ["", "a"]),
    "identity_escapes": (r"\/\.\*\$\^", ["/.*$^"], [""]),
    "property_letter": (r"\p{L}+", ["aЖ字"], ["1", "a1"]),
    "property_negated": (r"\P{Lu}", ["a", "1"], ["A", "Ж"]),
    "property_long": (r"\p{General_Category=Decimal_Number}", ["\u0663"], ["a"]),
    "property_cased_letter": (r"\p{LC}", ["a", "A", "\u01c5"], ["\u02b0", "1"]),
    "lazy": (r"a+?b{1,2}?", ["ab", "aabb"], ["abbb"]),
    "anchor_branches": (r"^a$|^b$", ["a", "b"], ["ab", ""]),
    "ranges_in_class": (r"[a-cx-z0-2]", ["b", "y", "1"], ["d", "3"]),
}


@pytest.mark.parametrize("name", list(ECMA_CASES))
def test_ecma_hand_checked(name: str) -> None:
    pattern, accepted, rejected = ECMA_CASES[name]
    rec = recognizer(parse_regex(pattern, flavor="ecma"))
    for s in accepted:
        assert rec.accepts(s), (name, s)
    for s in rejected:
        assert not rec.accepts(s), (name, s)


SEARCH_CASES = {
    "unanchored": ("ab", ["ab", "xaby", "\nab\n"], ["a", "b", "ba"]),
    "anchored_start_branch": ("^a|b$", ["a", "ax", "b", "xb"], ["xa", "bx", ""]),
    "anchored_both": ("^a+$", ["a", "aaa"], ["ab", " a"]),
    "dollar_only": ("$", ["", "abc"], []),
    "caret_dollar": ("^$", [""], ["a"]),
    "group_alternation": ("^(?:a|b)$", ["a", "b"], ["ab", "xa"]),
}


@pytest.mark.parametrize("name", list(SEARCH_CASES))
def test_ecma_search_semantics(name: str) -> None:
    pattern, accepted, rejected = SEARCH_CASES[name]
    rec = recognizer(parse_regex_search(pattern))
    for s in accepted:
        assert rec.accepts(s), (name, s)
    for s in rejected:
        assert not rec.accepts(s), (name, s)


# --------------------------------------------------------------------------- errors

UNSUPPORTED = {
    # name: (flavor, pattern, construct prefix, column)
    "py_lookahead": ("python", r"ab(?=c)", "lookahead", 3),
    "py_neg_lookbehind": ("python", r"x(?<!a)b", "lookbehind", 2),
    "py_backref": ("python", r"(a)b\1", "backreference", 5),
    "py_named_backref": ("python", r"(?P<n>a)(?P=n)", "backreference", 9),
    "py_conditional": ("python", r"(a)?(?(1)b|c)", "conditional", 5),
    "py_word_boundary": ("python", r"a\bc", "word boundary", 2),
    "py_possessive": ("python", r"ab*+", "possessive quantifier", 3),
    "py_atomic": ("python", r"a(?>bc)", "atomic group", 2),
    "py_middle_caret": ("python", r"a^b", "start anchor", 2),
    "py_middle_dollar": ("python", r"[$]a$b", "end anchor", 5),
    "py_anchor_in_repeat": ("python", r"(^a)*", "start anchor", 2),
    "ecma_lookahead": ("ecma", r"a(?!b)", "lookahead", 2),
    "ecma_lookbehind": ("ecma", r"(?<=a)b", "lookbehind", 1),
    "ecma_backref": ("ecma", r"(a)\1", "backreference", 4),
    "ecma_named_backref": ("ecma", r"(?<x>a)\k<x>", "backreference", 8),
    "ecma_boundary": ("ecma", r"\bfoo", "word boundary", 1),
    "ecma_anchor_in_repeat": ("ecma", r"(^a)+", "start anchor", 2),
    "ecma_modifiers": ("ecma", r"(?i:a)", "group modifier", 1),
    "ecma_script_property": ("ecma", r"\p{Script=Greek}", "unicode property", 1),
}


@pytest.mark.parametrize("name", list(UNSUPPORTED))
def test_unsupported_constructs_are_named_and_located(name: str) -> None:
    flavor, pattern, construct, column = UNSUPPORTED[name]
    with pytest.raises(UnsupportedSyntaxError) as info:
        parse_regex(pattern, flavor=flavor)  # type: ignore[arg-type]
    assert info.value.construct.startswith(construct)
    assert (info.value.line, info.value.column) == (1, column)


MALFORMED = {
    "py_unclosed_class": ("python", "ab[cd", 1, 3),
    "py_bad_repeat": ("python", "a{3,2}", 1, 3),
    "py_unbalanced": ("python", "a)b", 1, 2),
    "py_second_line": ("python", "(?x)a\n  *+*", 2, 5),
    "py_bad_escape": ("python", r"\q", 1, 1),
    "ecma_unclosed_group": ("ecma", "(ab", 1, 1),
    "ecma_unbalanced": ("ecma", "ab)", 1, 3),
    "ecma_nothing_to_repeat": ("ecma", "*a", 1, 1),
    "ecma_double_quantifier": ("ecma", "a**", 1, 3),
    "ecma_range_order": ("ecma", "[z-a]", 1, 3),
    "ecma_bad_escape": ("ecma", r"\q", 1, 1),
    "ecma_bad_hex": ("ecma", r"\x4", 1, 1),
    "ecma_bad_brace": ("ecma", r"\u{110000}", 1, 1),
    "ecma_unterminated_class": ("ecma", "[ab", 1, 1),
    "ecma_out_of_order_count": ("ecma", "a{3,2}", 1, 2),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_patterns_report_line_and_column(name: str) -> None:
    flavor, pattern, line, column = MALFORMED[name]
    with pytest.raises(GrammarSyntaxError) as info:
        parse_regex(pattern, flavor=flavor)  # type: ignore[arg-type]
    assert not isinstance(info.value, UnsupportedSyntaxError)
    assert (info.value.line, info.value.column) == (line, column)


def test_bad_options_raise() -> None:
    with pytest.raises(ValueError):
        parse_regex("a", flavor="perl")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        parse_regex("a", flavor="ecma", flags=re.I)


# ECMA anchors inside groups and alternatives. Oracle: Python's ``re`` on the same pattern with
# ``^``/``$`` spelled ``\A``/``\Z`` (ECMA without the m flag: start / end of the input only).
INNER_ANCHORS = [r"(^$)|(^a+)", r"a(b$|c)", r"(^a|b)c", r"x(^a)?", r"(a|^)b", r"a$b",
                 r"(^|x)a($|y)", r"^(a$|b)", r"(?:^|,)a", r"(a^)?b", r"((^a)|b)(c|$)"]


@pytest.mark.parametrize("pattern", INNER_ANCHORS)
def test_ecma_anchors_inside_groups_match_re(pattern: str) -> None:
    py = pattern.replace("^", r"\A").replace("$", r"\Z")
    search = recognizer(parse_regex_search(pattern))
    full = recognizer(parse_regex(pattern, flavor="ecma"))
    for n in range(5):
        for t in itertools.product("abcxy,", repeat=n):
            s = "".join(t)
            assert search.accepts(s) == (re.search(py, s) is not None), (pattern, s)
            assert full.accepts(s) == (re.fullmatch(py, s) is not None), (pattern, s)
