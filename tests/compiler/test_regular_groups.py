"""Right-linear rule groups become DFA terminals, and big repeats open with a full chunk.

Two compiler shapes used to make masks slow, and both must keep the language exactly:

* a group of rules that refer to each other only in tail position (``ws: [ \\t] ws | ""``, the
  JSON Schema front end's one-rule-per-state pattern fallback) stayed in the parser as a loop
  over one-character terminals; now every entry referenced from outside is one terminal;
* ``x{m,n}`` opened with a short remainder terminal ``x{m % c}`` before its chunks; now the
  remainder is folded into the first chunk.

Oracles: Python's ``re`` for the right-linear grammars (each is a regex written by hand below),
``jsonschema`` for the pattern fallback, and a length-set evaluator for ``_chunked``.
"""

from __future__ import annotations

import json
import re

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import grammarsd as gs
from grammarsd.compiler.lexer import build_byte_dfa
from grammarsd.compiler.tables import CompileLimits, _chunked, build_tables
from grammarsd.grammar.ir import (
    EMPTY,
    Choice,
    Expr,
    Grammar,
    Literal,
    Ref,
    Repeat,
    Seq,
    chars,
    choice,
    lit,
    repeat,
    seq,
)
from grammarsd.grammar.json_schema import compiler as json_schema_compiler
from grammarsd.grammar.json_schema import schema_to_grammar
from grammarsd.tokenizer.info import TokenizerInfo

BYTES = TokenizerInfo.from_token_bytes([b""] + [bytes([b]) for b in range(256)], eos_ids=[0],
                                       special_ids=[0])

# (name, Lark grammar, the same language as a Python regex, terminals after compiling)
GROUPS = [
    ("alternating", 'start: "<" a ">"\na: "x" b |\nb: "y" a', r"<(xy)*>", 1),
    ("whitespace", 'start: "[" ws "]"\nws: /[ \\t]/ ws |', r"\[[ \t]*\]", 1),
    ("entry used twice", 'start: a "-" a\na: "ab" a | "c"', r"(ab)*c-(ab)*c", 1),
    ("group inside a group", 'start: g\ng: "(" h ")" g |\nh: "a" h | "b"', r"(\(a*b\))*", 1),
    ("multi-byte", 'start: a\na: "é" a | "ü" b\nb: "€" b |', r"é*ü€*", 1),
    ("start is a member", 'start: "a" start | "b"', r"a*b", 1),
]
ALPHABET = "<>xy[] \t-abc()éü€"


def _accepts(g: gs.CompiledGrammar, text: str) -> bool:
    m = g.matcher()
    return m.accept_string(text) and m.is_accepting()


@pytest.mark.parametrize(("name", "grammar", "_regex", "terminals"), GROUPS,
                         ids=[g[0] for g in GROUPS])
def test_group_is_one_terminal(name: str, grammar: str, _regex: str, terminals: int) -> None:
    compiled = gs.compile_grammar(grammar, BYTES, cache=False)
    assert compiled.tables.num_terminals == terminals, [
        str(e) for e in build_tables(compiled.grammar).term_exprs]
    assert compiled.tables.num_items <= 5  # <start> -> S ; S -> T (and S -> "" if nullable): no loop


@pytest.mark.parametrize(("name", "grammar", "regex", "_t"), GROUPS, ids=[g[0] for g in GROUPS])
@settings(max_examples=80, deadline=None)
@given(st.text(ALPHABET, max_size=10))
def test_group_language_matches_re(name: str, grammar: str, regex: str, _t: int,
                                   text: str) -> None:
    g = gs.compile_grammar(grammar, BYTES)
    assert _accepts(g, text) == bool(re.fullmatch(regex, text))


@pytest.mark.parametrize(("name", "grammar", "regex", "_t"), GROUPS, ids=[g[0] for g in GROUPS])
def test_group_accepts_generated_members(name: str, grammar: str, regex: str, _t: int) -> None:
    g = gs.compile_grammar(grammar, BYTES)
    members = {
        "alternating": ["<>", "<xy>", "<xyxyxy>"],
        "whitespace": ["[]", "[ \t \t]"],
        "entry used twice": ["c-c", "ababc-abc"],
        "group inside a group": ["", "(b)", "(aab)(b)"],
        "multi-byte": ["ü", "ééü€€", "ü€"],
        "start is a member": ["b", "aaab"],
    }[name]
    for text in members:
        assert re.fullmatch(regex, text), text  # the table itself is right
        assert _accepts(g, text), text


def test_not_right_linear_stays_in_the_parser() -> None:
    # a non-tail self reference (balanced parentheses) is not regular: no terminal may hide it
    g = gs.compile_grammar('start: "(" start ")" |', BYTES, cache=False)
    assert g.tables.num_terminals == 2
    for text, ok in [("", True), ("(())", True), ("(()", False), ("())", False)]:
        assert _accepts(g, text) == ok


def test_group_over_the_dfa_limit_falls_back_to_the_parser() -> None:
    # ([ab]*a[ab]{6}c)*[ab]*a[ab]{6}: one group of 8 rules whose DFA needs ~2**7 states; under a
    # tight limit the group must stay a parser loop (as before), with the same language
    k = 6
    rules = ('start: q0\nq0: "a" q0 | "b" q0 | "a" r1\n'
             + "".join(f'r{i}: "a" r{i + 1} | "b" r{i + 1}\n' for i in range(1, k))
             + f'r{k}: "a" e | "b" e\ne: "c" q0 |\n')
    regex = rf"([ab]*a[ab]{{{k}}}c)*[ab]*a[ab]{{{k}}}"
    small = gs.compile_grammar(rules, BYTES, limits=CompileLimits(max_dfa_states=40),
                               cache=False)
    big = gs.compile_grammar(rules, BYTES, cache=False)
    assert small.tables.num_terminals > 1 and big.tables.num_terminals == 1
    for text in ["a" * 7, "ab" * 4, "b" * 7, "abbbbbb", "aabbbbbbcabbbbbb", "abbbbbbc", "abbbbb"]:
        want = bool(re.fullmatch(regex, text))
        assert _accepts(small, text) == want and _accepts(big, text) == want, text


# --------------------------------------------------------------------------- JSON pattern fallback

# The k-th symbol from the end: its minimal DFA has 2**k states, past state elimination's caps.
# A pattern's automaton is one ``Decoding`` leaf up to ``_DECODING_STATES`` states; past it (the
# limit lowered here) the front end emits one right-linear rule per DFA state.
FALLBACK = {"type": "string", "pattern": "^[ab]*a[ab]{5}$"}


@pytest.fixture(params=["leaf", "rules"])
def pattern_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways a pattern's automaton reaches the compiler."""
    if request.param == "rules":
        monkeypatch.setattr(json_schema_compiler, "_DECODING_STATES", 0)
    return str(request.param)


def test_pattern_fallback_rules_become_one_terminal(pattern_path: str) -> None:
    grammar = schema_to_grammar(FALLBACK)
    assert (len(grammar.rules) > 30) == (pattern_path == "rules")  # the fallback happened
    tables = build_tables(grammar)
    assert tables.num_terminals == 1, [str(e)[:60] for e in tables.term_exprs]


@settings(max_examples=120, deadline=None,  # the fixture patches the same for every example
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.text("ab\"\\", max_size=12))
def test_pattern_fallback_language(pattern_path: str, value: str) -> None:
    g = gs.compile_json_schema(FALLBACK, BYTES, cache=False)
    text = json.dumps(value)
    want = jsonschema.Draft202012Validator(FALLBACK).is_valid(value)
    assert _accepts(g, text) == want


# A URI that must also start with http(s):// is the product of two automata, one rule per
# state (~28k lexer nodes with its JSON spellings). Past the group size limit it stayed in the
# parser, one terminal per character, and a mask in the host part cost ~45 ms.
HTTP_URI = {"type": "string", "allOf": [{"format": "uri"}, {"pattern": "^https?://"}]}


def test_uri_with_a_pattern_is_one_terminal() -> None:
    tables = build_tables(schema_to_grammar(HTTP_URI))
    assert tables.num_terminals == 1, [str(e)[:60] for e in tables.term_exprs]


@pytest.mark.parametrize(("value", "valid"), [
    ("https://example.com/repo1", True),
    ("http://user@[::1]:8080/a?b#c", True),
    ("https://", True),  # RFC 3986: the authority and the path may be empty
    ("https:/x", False),  # a URI, but not what the pattern asks for
    ("ftp://example.com", False),
    ("https://exa mple.com", False),
    ("https://example.com/%zz", False),
])
def test_uri_with_a_pattern_language(value: str, valid: bool) -> None:
    g = gs.compile_json_schema(HTTP_URI, BYTES)
    assert _accepts(g, json.dumps(value)) == valid, value


# --------------------------------------------------------------------------- chunked repeats


def _lengths(expr: Expr) -> set[int]:
    """Lengths of the words of an expression over the one-letter literal ``"a"`` (the oracle)."""
    if isinstance(expr, Literal):
        return {len(expr.text)}
    if isinstance(expr, Seq):
        out = {0}
        for item in expr.items:
            out = {a + b for a in out for b in _lengths(item)}
        return out
    if isinstance(expr, Choice):
        return set().union(*(_lengths(i) for i in expr.items))
    if isinstance(expr, Repeat):
        item, out, cur = _lengths(expr.item), set(), {0}
        top = expr.max if expr.max is not None else expr.min + 3  # enough to see the tail
        for k in range(top + 1):
            if k >= expr.min:
                out |= cur
            cur = {a + b for a in cur for b in item}
        return out
    raise TypeError(expr)


def _leading_max(expr: Expr, chunk: int) -> list[int]:
    """Per alternative, the longest word of its first terminal: the leading items up to the
    first repeat of more than ``chunk`` copies (what the lowering keeps in the parser)."""
    alts = expr.items if isinstance(expr, Choice) else (expr,)
    out = []
    for alt in alts:
        items = alt.items if isinstance(alt, Seq) else (alt,)
        total = 0
        for item in items:
            if isinstance(item, Choice) or isinstance(item, Repeat) and (
                    isinstance(item.item, Repeat) or (item.max or 0) > chunk):
                break  # a helper nonterminal or a count of chunks: the parser's
            total += max(_lengths(item))
        out.append(total)
    return out


@pytest.mark.parametrize(("lo", "hi"), [(0, 300), (1, 255), (5, 130), (127, 400), (129, 129),
                                        (200, 1000), (1, None), (300, None), (256, 600)])
def test_chunked_keeps_the_language_and_opens_with_a_full_chunk(lo: int, hi: int | None) -> None:
    c = 16
    x = lit("a")
    pieces: list[Expr] = []
    expr = _chunked(Repeat(x, lo, hi), c, pieces.append)
    assert all((p.max or 0) <= c for p in pieces if isinstance(p, Repeat))  # one terminal each
    want = {n for n in range(lo, (hi if hi is not None else lo + 3) + 1)}
    got = {n for n in _lengths(expr) if hi is not None or n <= lo + 3}
    assert got == want
    if hi is not None and hi - lo >= c:
        # no short terminal opens the repeat (the old lowering opened x{1,255} with x{1})
        assert min(_leading_max(expr, c)) >= c - 1


@settings(max_examples=40, deadline=None)
@given(st.text("ab", min_size=0, max_size=300))
def test_bounded_repeat_language(text: str) -> None:
    g = gs.compile_regex("[ab]{3,260}", BYTES)
    assert _accepts(g, text) == (3 <= len(text) <= 260)


def test_string_with_min_length_opens_with_a_long_terminal() -> None:
    schema = {"type": "string", "minLength": 1, "maxLength": 255}
    tables = build_tables(schema_to_grammar(schema))
    # the old lowering's one-character opener ("\"" plus one JSON character) is gone
    assert all(not (isinstance(e, Seq) and len(e.items) == 2 and e.items[0] == lit('"'))
               for e in tables.term_exprs), [str(e)[:40] for e in tables.term_exprs]
    g = gs.compile_json_schema(schema, BYTES)
    for value in ["", "a", "x" * 128, "é" * 200, "y" * 255, "z" * 256]:
        assert _accepts(g, json.dumps(value)) == (1 <= len(value) <= 255), len(value)


def test_group_in_a_counted_repeat() -> None:
    # a group referenced inside a counted repeat is instantiated once per copy
    g = gs.compile_grammar('start: ("<" a ">")~0..3\na: "q" a |', BYTES, cache=False)
    assert g.tables.num_terminals == 1
    for text in ["", "<>", "<q><qq><>", "<><><><>", "<q", "<x>"]:
        assert _accepts(g, text) == bool(re.fullmatch(r"(<q*>){0,3}", text)), text


def _diamonds(levels: int) -> str:
    """An automaton written as right-linear rules whose states form a DAG: ``d{i}`` reaches
    ``e{i}`` on two bytes and ``e{i}`` reaches ``d{i+1}`` on two, so inlining copies every
    state once per path (2^levels) while the rules stay linear in ``levels``."""
    rules = ["start: d0"]
    for i in range(levels):
        rules.append(f'd{i}: "a" e{i} | "b" e{i}')
        rules.append(f'e{i}: "c" d{i + 1} | "d" d{i + 1} | "!"')
    rules.append(f'd{levels}: "x"')
    return "\n".join(rules)


@settings(max_examples=60, deadline=None)
@given(st.text("abcdx!", max_size=40))
def test_dag_of_right_linear_rules_is_one_terminal(text: str) -> None:
    levels = 16  # inlined: ~2^16 copies, far past max_terminal_size
    g = gs.compile_grammar(_diamonds(levels), BYTES)
    assert g.tables.num_terminals == 1
    regex = rf"(?:[ab][cd]){{0,{levels - 1}}}[ab]!|(?:[ab][cd]){{{levels}}}x"
    assert _accepts(g, text) == bool(re.fullmatch(regex, text)), text
    full = "ac" * levels + "x"
    assert _accepts(g, full) and not _accepts(g, full + "x")


@pytest.mark.parametrize("limit", [3, 4_000])
def test_big_leaf_rule_in_the_middle_of_a_terminal(limit: int) -> None:
    # a rule too big to inline but without references is used in non-tail position: it must
    # not join a rule group (a group reference ends the group's automaton)
    rules = {"start": Ref("wrap"), "wrap": seq(lit("<"), Ref("big"), lit(">")),
             "big": seq(lit("ab"), repeat(lit("c")), lit("d"))}
    g = gs.compile_ir(Grammar(rules, "start"), BYTES,
                      limits=CompileLimits(max_terminal_size=limit), cache=False)
    for text in ["<abd>", "<abccd>", "<abd", "abd>", "<ab>", "<abdd>"]:
        assert _accepts(g, text) == bool(re.fullmatch(r"<abc*d>", text)), (limit, text)


def test_lexemes_of_one_rule_set_equal_their_inlined_dfas() -> None:
    # the bodies' atoms and sharing are found once per rule set (``lexer._rule_atoms``) and
    # reused by every lexeme of it: each lexeme, one with classes the bodies do not cut and
    # one sharing a node with a body included, must give the DFA of its inlined regex
    shared = seq(lit("ab"), repeat(chars([(ord("a"), ord("z"))]), 0, 3))
    q0 = Choice((seq(lit("x"), Ref("q1")), EMPTY))
    rules = (("q0", 0, q0), ("q1", 0, choice(seq(shared, Ref("q0")), seq(lit("é"), Ref("q0")))))
    star = repeat(seq(lit("x"), choice(shared, lit("é"))), 0, None)  # q0 inlined
    digit = chars([(ord("0"), ord("9"))])
    lexemes = {
        Ref("q0"): star,
        seq(lit("z"), Ref("q1")): seq(lit("z"), choice(shared, lit("é")), star),
        seq(shared, Ref("q0")): seq(shared, star),
        seq(digit, Ref("q1")): seq(digit, choice(shared, lit("é")), star),
    }
    for lexeme, inlined in lexemes.items():
        got = build_byte_dfa(lexeme, nonempty=True, rules=rules)
        want = build_byte_dfa(inlined, nonempty=True)
        assert np.array_equal(got.trans, want.trans), lexeme
        assert np.array_equal(got.accept, want.accept), lexeme
