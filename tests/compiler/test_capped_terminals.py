"""Capped terminals (``ir.Capped``): the lexer's character starts against an independent count
(``json.loads`` and the spelling of each generated character), refusals of items that are not
JSON string bodies, the tables' ``state_cap``/``term_cap``, the JSON Schema compiler's choice
between a capped terminal and the product of ``maxLength`` with a pattern, and long plain strings
(a capped terminal, not chunks)."""

from __future__ import annotations

import functools
import json

import jsonschema
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grammarsd.compiler.compiled import CompiledGrammar, compile_ir
from grammarsd.compiler.lexer import ByteDFA, RuleSet, build_byte_dfa
from grammarsd.compiler.tables import END, CompileLimits, EarleyTables, build_tables
from grammarsd.errors import EmptyLanguageError, GrammarError, GrammarTooLargeError
from grammarsd.grammar.automata import CharDFA
from grammarsd.grammar.encodings import encode_class
from grammarsd.grammar.ir import (
    ANY_CHAR,
    EMPTY,
    NOTHING,
    Capped,
    Expr,
    Grammar,
    Ref,
    capped,
    char_set,
    chars,
    children,
    choice,
    lit,
    repeat,
    seq,
)
from grammarsd.grammar.json_schema import schema_to_grammar
from grammarsd.grammar.json_schema.options import JsonSchemaOptions
from grammarsd.grammar.json_schema.strings import encode_chars
from grammarsd.grammar.regex import parse_regex_search
from grammarsd.tokenizer.info import TokenizerInfo

HEX = chars([(ord("0"), ord("9")), (ord("A"), ord("F")), (ord("a"), ord("f"))])
ANY_JSON_CHAR = encode_class(ANY_CHAR)
WORDS = r"^(?:\S+\s+){0,49}\S+$"


def _rules(pattern: str) -> tuple[Expr, RuleSet]:
    """``pattern``'s automaton as one right-linear rule per state, JSON-encoded (what the JSON
    Schema compiler emits for big patterns): the entry and the rule set."""
    dfa = CharDFA.from_expr(parse_regex_search(pattern, flavor="ecma"))
    rules = tuple(sorted((name, 0, encode_chars(body))
                         for name, body in dfa.to_rules("q_").items()))
    return Ref("q_0"), rules


EVEN_AS = _rules(r"^(?:[^a]*a[^a]*a)*[^a]*$")  # accepts about half of any sample

# name -> (item, rules): one per construction path of the lexer
ITEMS: dict[str, tuple[Expr, RuleSet]] = {
    "tagged": (repeat(ANY_JSON_CHAR), ()),
    "tiled": (repeat(ANY_JSON_CHAR, 0, 40), ()),
    "rule group": EVEN_AS,
}


# --------------------------------------------------------------------------- an independent count

_SHORT = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n",
          "\r": "\\r", "\t": "\\t"}


def _hex4(value: int, upper: bool) -> str:
    text = f"\\u{value:04x}"
    return text.upper().replace("\\U", "\\u") if upper else text


@st.composite
def _spelling(draw: st.DrawFn) -> str:
    """One decoded character, spelled any way a JSON writer may."""
    kind = draw(st.sampled_from(["ascii", "raw", "short", "u", "pair"]))
    upper = draw(st.booleans())
    if kind == "ascii":
        return draw(st.sampled_from([chr(c) for c in range(0x20, 0x80) if chr(c) not in '"\\']))
    if kind == "raw":
        c = draw(st.integers(0xA0, 0x10FFFF).filter(lambda c: not 0xD800 <= c <= 0xDFFF))
        return chr(c)
    if kind == "short":
        return _SHORT[draw(st.sampled_from(sorted(_SHORT)))]
    if kind == "u":
        c = draw(st.integers(0, 0xFFFF).filter(lambda c: not 0xD800 <= c <= 0xDFFF))
        return _hex4(c, upper)
    c = draw(st.integers(0x10000, 0x10FFFF)) - 0x10000
    return _hex4(0xD800 + (c >> 10), upper) + _hex4(0xDC00 + (c & 0x3FF), upper)


def _walk_counts(dfa: ByteDFA, data: bytes) -> tuple[list[int], int]:
    """Characters counted before each byte (the matcher's rule: one per ``char_start`` state
    stepped from), and the final state (-1: dead)."""
    assert dfa.char_start is not None
    counts, n, q = [], 0, 0
    for byte in data:
        if q < 0:
            break
        n += bool(dfa.char_start[q])
        counts.append(n)
        q = int(dfa.trans[q, byte])
    return counts, q


@pytest.mark.parametrize("name", ITEMS)
@settings(max_examples=150, deadline=None)
@given(pieces=st.lists(_spelling(), max_size=12))
def test_char_starts_count_decoded_characters(name: str, pieces: list[str]) -> None:
    item, rules = ITEMS[name]
    dfa = build_byte_dfa(Capped(item, 7), rules=rules)
    body = "".join(pieces)
    data = body.encode()
    # the byte offsets where each character's spelling starts, from the generator
    starts = np.cumsum([0] + [len(p.encode()) for p in pieces])[:-1]
    counts, q = _walk_counts(dfa, data)
    assert dfa.cap == 7
    if q >= 0 and dfa.accept[q]:
        assert (counts[-1] if counts else 0) == len(json.loads(f'"{body}"')) == len(pieces)
    for i, n in enumerate(counts):  # every live prefix: the characters started in it
        assert n == int(np.searchsorted(starts, i, side="right")), (body, i)


def test_rule_group_item_accepts_and_counts() -> None:
    item, rules = EVEN_AS
    dfa = build_byte_dfa(Capped(item, 9), nonempty=True, rules=rules)
    for body, ok in [("aa", True), ("\\u0061a", True), ("a\\ud83d\\ude00a", True), ("a", False),
                     ("", False)]:
        counts, q = _walk_counts(dfa, body.encode())
        assert (q >= 0 and bool(dfa.accept[q])) == ok, body
        if ok:
            assert counts[-1] == len(json.loads(f'"{body}"'))


def test_capped_dfa_is_the_item_dfa_with_flags() -> None:
    item = seq(repeat(ANY_JSON_CHAR, 0, 3), lit("x"))
    plain = build_byte_dfa(item, nonempty=True)
    dfa = build_byte_dfa(Capped(item, 2), nonempty=True)
    assert np.array_equal(dfa.trans, plain.trans) and np.array_equal(dfa.accept, plain.accept)
    assert dfa.tile is None and dfa.char_start is not None and dfa.char_start[0]
    zero = build_byte_dfa(Capped(repeat(ANY_JSON_CHAR), 0))
    assert zero.cap == 0 and zero.matches(b"") and not zero.matches(b"a")


# --------------------------------------------------------------------------- refusals

LONE_SURROGATES = repeat(choice(seq(lit("\\u"), repeat(HEX, 4, 4)), char_set("ab")))

NOT_BODIES: dict[str, tuple[Expr, str]] = {
    "raw quote": (lit('a"b'), "0x22"),
    "control byte": (seq(lit("a"), chars([(1, 1)])), "0x01"),
    "bad escape": (lit("\\x"), "after a backslash"),
    "unfinished escape": (lit("\\u12"), "ends inside a character"),
    "lone high surrogate": (lit("\\ud800"), "ends inside a character"),
    "lone low surrogate": (lit("\\udc00"), "inside a \\u escape"),
    "hex digits, any surrogate": (LONE_SURROGATES, "JSON string bodies"),
    "two decodings": (seq(choice(lit("a"), lit("\\u004")), lit("1")), "both at a character"),
}


@pytest.mark.parametrize("name", NOT_BODIES)
def test_items_that_are_not_json_bodies_are_refused(name: str) -> None:
    item, words = NOT_BODIES[name]
    with pytest.raises(GrammarError, match="Capped item must match JSON string bodies") as info:
        build_byte_dfa(Capped(item, 5))
    assert words in str(info.value)


def test_capped_has_no_character_automaton() -> None:
    with pytest.raises(GrammarError, match="Capped"):
        CharDFA.from_expr(seq(lit("a"), Capped(lit("b"), 3)))
    with pytest.raises(GrammarError, match="Capped"):
        build_byte_dfa(Capped(seq(lit("a"), Capped(lit("b"), 3)), 4))


# --------------------------------------------------------------------------- tables


def _capped_terms(t: EarleyTables) -> list[int]:
    return [i for i, e in enumerate(t.term_exprs) if isinstance(e, Capped)]


def _productions(t: EarleyTables) -> list[tuple[int, tuple[int, ...]]]:
    """``(lhs, symbols)`` of every production, read back from the flat tables."""
    out = []
    for n in range(len(t.nt_names)):
        for first in t.nt_items[t.nt_ptr[n] : t.nt_ptr[n + 1]].tolist():
            end = first
            while t.item_next[end] != END:
                end += 1
            out.append((n, tuple(t.item_next[first:end].tolist())))
    return out


def test_tables_make_a_capped_terminal_of_its_own() -> None:
    body = repeat(ANY_JSON_CHAR, 1)
    g = Grammar.single(seq(lit("["), Capped(body, 5), lit("]")))
    t = build_tables(g)
    (c,) = _capped_terms(t)
    assert t.num_terminals == 3  # "[" and "]" are not merged into it
    assert t.term_cap.tolist() == [5 if i == c else 0 for i in range(3)]
    dfa = build_byte_dfa(Capped(body, 5), nonempty=True)
    assert dfa.char_start is not None
    block = slice(t.term_start[c], t.term_start[c] + dfa.num_states)
    assert np.array_equal(t.state_cap[block] > 0, dfa.char_start)
    assert set(t.state_cap[block].tolist()) == {0, 5}
    outside = np.ones(t.num_dfa_states, bool)
    outside[block] = False
    assert not t.state_cap[outside].any()


def test_nullable_capped_item_derives_the_empty_string() -> None:
    g = Grammar.single(seq(lit("<"), Capped(repeat(ANY_JSON_CHAR), 3), lit(">")))
    t = build_tables(g)
    (c,) = _capped_terms(t)
    prods = _productions(t)
    optional = {n for n, body in prods if body == (-c - 1,)}
    assert any((n, ()) in prods and t.nullable[n] for n in optional)


def test_capped_rule_group_and_shared_terminal() -> None:
    entry, rules = EVEN_AS
    body = {name: b for name, _, b in rules}
    g = Grammar({"start": seq(Ref("s"), lit(","), Ref("s")),
                 "s": seq(lit('"'), Capped(entry, 40), lit('"')), **body})
    t = build_tables(g)
    assert len(_capped_terms(t)) == 1 and t.term_cap.max() == 40


def test_capped_rules_past_the_group_limit_are_lexed_whole() -> None:
    entry, rules = _rules(WORDS)
    body = {name: b for name, _, b in rules}
    g = Grammar({"start": seq(lit('"'), Capped(entry, 500), lit('"')), **body})
    small = CompileLimits(max_group_size=50)  # far below the automaton's 100 rules
    t, grouped = build_tables(g, limits=small), build_tables(g)
    assert _capped_terms(t) and np.array_equal(t.byte_table, grouped.byte_table)
    nested = Grammar({"start": Capped(Ref("q"), 3), "q": choice(lit("a"), seq(Ref("r"), lit("b"))),
                      "r": seq(lit("c"), Ref("q"))})
    with pytest.raises(GrammarError, match="not regular"):
        build_tables(nested, limits=small)


@pytest.mark.parametrize(("item", "language"), [
    (repeat(ANY_JSON_CHAR), "ab"), (repeat(ANY_JSON_CHAR, 1), None)])
def test_cap_zero_folds(item: Expr, language: str | None) -> None:
    g = Grammar.single(seq(lit("a"), Capped(item, 0), lit("b")))
    if language is None:
        with pytest.raises(EmptyLanguageError):
            build_tables(g)
        return
    t = build_tables(g)
    assert not _capped_terms(t) and not t.term_cap.any()
    assert capped(NOTHING, 3) == NOTHING and capped(EMPTY, 3) == EMPTY


def test_capped_without_fallback() -> None:
    recursive = Grammar({"start": Capped(Ref("r"), 3), "r": choice(lit("a"), seq(lit("("),
                                                                               Ref("r"), lit(")")))})
    with pytest.raises(GrammarError, match="not regular"):
        build_tables(recursive)
    big = Grammar.single(Capped(repeat(ANY_JSON_CHAR, 0, 200), 50))
    with pytest.raises(GrammarTooLargeError):
        build_tables(big, limits=CompileLimits(max_dfa_states=500))


# --------------------------------------------------------------------------- JSON Schema

CAPPED = JsonSchemaOptions(max_length_product=0)
PRODUCT = JsonSchemaOptions(max_length_product=10**9)


def _has_capped(g: Grammar) -> bool:
    return any(isinstance(e, Capped) for body in g.rules.values() for e in _walk(body))


def _walk(expr: Expr) -> list[Expr]:
    out, stack = [], [expr]
    while stack:
        e = stack.pop()
        out.append(e)
        stack.extend(children(e))
    return out


def test_json_schema_caps_a_long_max_length_beside_a_pattern() -> None:
    schema = {"type": "string", "pattern": WORDS, "maxLength": 500}
    g = schema_to_grammar(schema)
    t = build_tables(g)
    assert _has_capped(g) and t.term_cap.max() == 500
    assert t.num_dfa_states < 10_000  # 3,552; the product went past the DFA limits (50,000)


@pytest.mark.parametrize(("schema", "capped_"), [
    ({"type": "string", "pattern": "^[a-z]+$", "maxLength": 20}, False),  # below 32
    ({"type": "string", "pattern": "^[a-z]+$", "maxLength": 64}, False),  # small product
    ({"type": "string", "pattern": r"^\d{1,15}$", "maxLength": 500}, False),  # adds nothing
    ({"type": "string", "pattern": r"^(?:\S+\s+){0,9}\S+$", "maxLength": 100}, True),
])
def test_json_schema_default_threshold(schema: dict[str, object], capped_: bool) -> None:
    assert _has_capped(schema_to_grammar(schema)) == capped_


@pytest.mark.parametrize("options", [CAPPED, PRODUCT], ids=["capped", "product"])
def test_json_schema_empty_when_no_word_fits(options: JsonSchemaOptions) -> None:
    g = schema_to_grammar({"type": "string", "pattern": "^a{50,}$", "maxLength": 40},
                          options=options)
    assert g.rules[g.start] == NOTHING


def _capped_accepts(t: EarleyTables, text: str) -> bool:
    """A quoted JSON string against the grammar ``'"' capped '"'``: the capped terminal's DFA
    walked with the matcher's count (independent of the matcher)."""
    (c,) = _capped_terms(t)
    cap = int(t.term_cap[c])
    q, n = int(t.term_start[c]), 0
    data = text.encode()
    assert data[:1] == data[-1:] == b'"'
    for byte in data[1:-1]:
        if t.state_cap[q]:
            n += 1
            if n > cap:
                return False
        q = int(t.byte_table[q, byte])
        if q < 0:
            return False
    return bool(t.dfa_accept[q])


TEN_WORDS = {"type": "string", "pattern": r"^(?:\S+\s+){0,9}\S+$", "minLength": 1,
             "maxLength": 40}


@functools.cache
def _ten_words() -> EarleyTables:
    return build_tables(schema_to_grammar(TEN_WORDS, options=CAPPED))


@settings(max_examples=120, deadline=None)
@given(words=st.lists(st.text(st.sampled_from('ab\u00e9\u20ac\U0001f600"\\'), min_size=1,
                              max_size=6), min_size=1, max_size=14),
       gaps=st.lists(st.sampled_from([" ", "  ", "\t", "\n", "\u3000"]), min_size=13,
                     max_size=13),
       ascii_only=st.booleans())
def test_json_schema_capped_language_is_exact(words: list[str], gaps: list[str],
                                              ascii_only: bool) -> None:
    value = "".join(w + g for w, g in zip(words, [*gaps[: len(words) - 1], ""], strict=True))
    expected = jsonschema.Draft202012Validator(TEN_WORDS).is_valid(value)
    assert _capped_accepts(_ten_words(), json.dumps(value, ensure_ascii=ascii_only)) == expected


def test_json_schema_product_path_is_kept() -> None:
    schema = {"type": "string", "pattern": r"^(?:\S+\s+){0,4}\S+$", "maxLength": 40}
    assert _has_capped(schema_to_grammar(schema, options=CAPPED))
    assert not _has_capped(schema_to_grammar(schema, options=PRODUCT))


# ------------------------------------------------- long plain strings: a capped terminal, not chunks

LONG = {"type": "string", "minLength": 2, "maxLength": 3000}
LONG_VOCAB = TokenizerInfo.from_token_bytes([b"", b'"', b"a"], eos_ids=[0], special_ids=[0])


def test_a_long_max_length_string_is_one_capped_terminal() -> None:
    """Past ``repeat_chunk`` characters a plain string body used to be chunks counted by the
    parser; it is one capped terminal now, beside the quote."""
    t = build_tables(schema_to_grammar(LONG))
    assert t.term_cap.tolist() == [0, 3000] and t.num_terminals == 2


@functools.cache
def _long_compiled() -> CompiledGrammar:
    return compile_ir(schema_to_grammar(LONG), LONG_VOCAB, cache=False)


@settings(max_examples=60, deadline=None)
@given(length=st.sampled_from([0, 1, 2, 3, 257, 2998, 2999, 3000, 3001, 3002]),
       pieces=st.lists(st.sampled_from(["a", "é", "\U0001f600", '"', "\\", "\n", "\u2028"]),
                       min_size=1, max_size=5),
       ascii_only=st.booleans())
def test_a_long_max_length_string_language_is_exact(length: int, pieces: list[str],
                                                    ascii_only: bool) -> None:
    """Decoded lengths around both bounds, spelled raw, as short escapes and as ``\\uXXXX``
    (an astral character as a surrogate pair: one character), against ``jsonschema``."""
    value = "".join(pieces[i % len(pieces)] for i in range(length))
    expected = jsonschema.Draft202012Validator(LONG).is_valid(value)
    m = _long_compiled().matcher()
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert (m.accept_string(text) and m.is_accepting()) == expected
