"""JSON string lexemes built from the decoded-character automaton, and chunked counted repeats.

Oracles: Python's ``json`` decoder (strict; a decoded lone surrogate or a character outside the
class means "not in the language"), the IR-expanding lexer path (an independent construction
that never looks at ``decoded_class``), and the reference recognizer for whole grammars.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grammarsd as gs
from grammarsd.compiler.lexer import ByteDFA, build_byte_dfa, byte_dfa_from_char_dfa
from grammarsd.compiler.tables import CompileLimits, build_tables
from grammarsd.errors import GrammarTooLargeError
from grammarsd.grammar.automata import CharDFA
from grammarsd.grammar.encodings import decoded_class, encode_class, expand_excluding
from grammarsd.grammar.ir import (
    ANY_CHAR,
    CharClass,
    Decoding,
    Excluding,
    Expr,
    Grammar,
    Literal,
    Ref,
    char_set,
    chars,
    children,
    choice,
    lit,
    repeat,
    seq,
)
from grammarsd.grammar.json_schema.compiler import _encoded_format
from grammarsd.grammar.json_schema.formats import KNOWN_FORMATS, format_expr
from grammarsd.grammar.json_schema.strings import encode_chars
from grammarsd.grammar.regex import parse_regex_search
from grammarsd.matcher.reference import ReferenceRecognizer
from grammarsd.tokenizer.info import TokenizerInfo

# named classes: ASCII letters, control characters and quotes, a BMP block next to the
# surrogates, astral emoji, everything
CLASSES: dict[str, CharClass] = {
    "letters": chars([(0x41, 0x5A), (0x61, 0x7A)]),
    "controls and quotes": chars([(0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C), (0x2F, 0x2F)]),
    "around surrogates": chars([(0xD7F0, 0xD7FF), (0xE000, 0xE00F)]),
    "astral": chars([(0x1F600, 0x1F64F), (0x10000, 0x10010), (0x10FFF0, 0x10FFFF)]),
    "any": ANY_CHAR,
}

# pieces of JSON string bodies: raw characters, every escape form, broken escapes
FRAGMENTS = ["a", "Z", "é", "\u20ac", "\U0001f600", "\\", "u", "\\u", '"', "/", "\\/", "\\n",
             "\\t", "\\b", "\\x", "\\u0041", "\\u00e9", "\\u00E9", "\\ud83d", "\\uD83D",
             "\\ude00", "\\uDE00", "\\u001f", "\x1f", "\\u20AC", "\\ud7ff", "\\ue000",
             "\\udbff\\udfff", "\\uD800\\uDC00", "0", "F", "\n"]


def json_oracle(body: bytes, cls: CharClass, lo: int, hi: int | None) -> bool:
    """Is ``"body"`` a JSON string decoding to lo..hi characters of ``cls``?"""
    try:
        value = json.loads(b'"' + body + b'"')
    except (ValueError, UnicodeDecodeError):
        return False
    if not isinstance(value, str) or len(value) < lo or (hi is not None and len(value) > hi):
        return False
    return all(ord(ch) in cls for ch in value)  # lone surrogates are in no CharClass


def string_lexeme(cls: CharClass, lo: int, hi: int | None) -> Expr:
    return seq(lit('"'), repeat(encode_class(cls), lo, hi), lit('"'))


expand = CharDFA.from_expr  # kept apart: tests patch the class attribute to watch the fallback


def expanded_path(expr: Expr) -> ByteDFA:
    """The IR-expanding construction: Thompson NFA over every spelling (no recognition)."""
    return byte_dfa_from_char_dfa(CharDFA.from_expr(expr, max_states=200_000), nonempty=True,
                                  max_states=200_000)


def test_encodings_are_recognised_by_identity_only() -> None:
    enc = encode_class(CLASSES["letters"])
    assert decoded_class(enc) == CLASSES["letters"]
    assert encode_class(CLASSES["letters"]) is enc
    assert decoded_class(lit("a")) is None


@pytest.mark.parametrize("name", list(CLASSES))
@pytest.mark.parametrize("bounds", [(0, None), (0, 3), (2, 5)], ids=str)
def test_direct_construction_equals_the_expanded_one(name: str, bounds: tuple) -> None:
    expr = string_lexeme(CLASSES[name], *bounds)
    fast = build_byte_dfa(expr, nonempty=True, max_states=200_000)
    slow = expanded_path(expr)
    # canonical forms (minimal, breadth-first) are unique: equal tables = equal languages
    assert np.array_equal(fast.trans, slow.trans)
    assert np.array_equal(fast.accept, slow.accept)


@pytest.mark.parametrize("name", list(CLASSES))
@settings(max_examples=60, deadline=None)
@given(pieces=st.lists(st.sampled_from(FRAGMENTS), max_size=6),
       bounds=st.sampled_from([(0, None), (1, 2), (0, 4)]))
def test_lexeme_matches_iff_json_decodes_into_the_class(name: str, pieces: list[str],
                                                        bounds: tuple) -> None:
    cls = CLASSES[name]
    dfa = build_byte_dfa(string_lexeme(cls, *bounds), nonempty=True, max_states=200_000)
    body = "".join(pieces).encode("utf-8", "surrogatepass")
    assert dfa.matches(b'"' + body + b'"') == json_oracle(body, cls, *bounds)


def test_plain_spelling_beside_an_encoded_one_stays_on_the_direct_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # raw "a" leads elsewhere than an encoded "a" (a known key beside the key complement): the
    # encoded one's unescaped spelling is a plain "a", so the two meet in one state
    expr = seq(lit("<"), choice(seq(lit("a"), lit("!")), seq(encode_class(char_set("a")),
                                                             lit("?"))))
    slow = expanded_path(expr)
    with monkeypatch.context() as m:  # the expanding fallback is not taken
        m.setattr(CharDFA, "from_expr", None)
        fast = build_byte_dfa(expr, nonempty=True)
    assert np.array_equal(fast.trans, slow.trans) and np.array_equal(fast.accept, slow.accept)
    assert fast.matches(b"<a!") and fast.matches(b"<a?") and fast.matches(b"<\\u0061?")
    assert not fast.matches(b"<\\u0061!") and not fast.matches(b"<b?")


def test_plain_backslash_beside_an_escape_falls_back_to_the_expanded_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    expr = seq(lit("<"), choice(seq(lit("\\"), lit("!")), seq(encode_class(char_set("a")),
                                                              lit("?"))))
    expanded = []
    with monkeypatch.context() as m:
        m.setattr(CharDFA, "from_expr", lambda *a, **k: expanded.append(1) or expand(*a, **k))
        fast = build_byte_dfa(expr, nonempty=True)
    assert expanded
    slow = expanded_path(expr)
    assert np.array_equal(fast.trans, slow.trans) and np.array_equal(fast.accept, slow.accept)
    assert fast.matches(b"<\\!") and fast.matches(b"<\\u0061?") and fast.matches(b"<a?")


def _untagged_escapes(expr: Expr) -> list[Expr]:
    """The ``\\u`` escapes spelled in ``expr`` outside an encoded class the lexer reads as one
    tagged character (``decoded_class``)."""
    if decoded_class(expr) is not None:
        return []
    if isinstance(expr, Literal) and expr.text.startswith("\\u"):
        return [expr]
    return [e for k in children(expr) for e in _untagged_escapes(k)]


@pytest.mark.parametrize("name", sorted(n for n in KNOWN_FORMATS if format_expr(n) is not None))
def test_encoded_formats_keep_every_character_tagged(name: str) -> None:
    """A format's encoded alternatives must not flatten an encoded class into its parent
    ``Choice``: a plain ``\\u`` beside tagged characters sends the lexer to its expanding
    fallback (``time``: +0.2 s, once per process)."""
    assert _untagged_escapes(_encoded_format(name)) == []


# word sets an ``Excluding`` leaf leaves out: prefixes of each other and the empty word, words
# that need escapes, non-ASCII and astral ones, a character outside a class
WORD_SETS: dict[str, list[str]] = {
    "keys": ["id", "n", "name", "names", "nick"],
    "with empty": ["", "a", "ab", "b"],
    "escapes": ['"', "\\", 'a"b', "\n", "/", "\x1f"],
    "non-ascii": ["\u00e9", "\u20ac\u20ac", "\U0001f600", "x\U0001f600y", "\ud7ff"],
}


def excluding_lexeme(words: list[str], cls: CharClass) -> Expr:
    return seq(lit('"'), Excluding(tuple(sorted(words)), cls), lit('"'))


# an Excluding leaf alone or quoted (then anything: a member's colon and gaps, here with a loop
# or nullable) is built from the string body's DFA (``_excluding_dfa``); after something else
# in a longer lexeme the tagged table reads it (``automata.TaggedOutside``)
CONTEXTS = {
    "alone": lambda leaf: leaf,
    "quoted": lambda leaf: seq(lit('"'), leaf, lit('"')),
    "quoted, then more": lambda leaf: seq(lit('"'), leaf, lit('"'), repeat(char_set(" "), 0, None),
                                          lit(":"), repeat(char_set(" "), 0, 2)),
    "quoted, then maybe more": lambda leaf: seq(lit('"'), leaf, lit('"'),
                                                repeat(char_set(" "), 0, 2)),
    "in a lexeme": lambda leaf: seq(lit(","), lit('"'), leaf, lit('"'), repeat(char_set(" "), 0, 2),
                                    lit(":")),
}


@pytest.mark.parametrize("context", list(CONTEXTS))
@pytest.mark.parametrize("words", list(WORD_SETS))
@pytest.mark.parametrize("name", ["letters", "astral", "any"])
def test_excluding_read_from_its_trie_equals_its_expansion(
        words: str, name: str, context: str, monkeypatch: pytest.MonkeyPatch) -> None:
    leaf = Excluding(tuple(sorted(WORD_SETS[words])), CLASSES[name])
    real = CharDFA.from_expr

    def refusing_leaves(expr: Expr, **kwargs: Any) -> CharDFA:
        assert "excluding(" not in str(expr), "the expanding fallback was taken"
        return real(expr, **kwargs)  # what follows a quoted leaf, built apart

    with monkeypatch.context() as m:
        m.setattr(CharDFA, "from_expr", refusing_leaves)
        fast = build_byte_dfa(CONTEXTS[context](leaf), nonempty=True)
    # the oracle: the trie spelled as IR (encodings), built as a plain Thompson NFA
    slow = expanded_path(CONTEXTS[context](expand_excluding(leaf)))
    assert np.array_equal(fast.trans, slow.trans) and np.array_equal(fast.accept, slow.accept)


@pytest.mark.parametrize("words", list(WORD_SETS))
@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_excluding_matches_iff_json_decodes_to_another_string(words: str,
                                                               data: st.DataObject) -> None:
    listed = WORD_SETS[words]
    # pieces of the words in every spelling, so that the words themselves come up often
    spelled = [json.dumps(ch, ensure_ascii=a)[1:-1] for w in listed for ch in w
               for a in (True, False)]
    pieces = data.draw(st.lists(st.sampled_from(FRAGMENTS + spelled), max_size=5))
    dfa = build_byte_dfa(excluding_lexeme(listed, ANY_CHAR), nonempty=True)
    body = "".join(pieces).encode("utf-8", "surrogatepass")
    expected = json_oracle(body, ANY_CHAR, 0, None) and json.loads(b'"' + body + b'"') not in listed
    assert dfa.matches(b'"' + body + b'"') == expected, body
    for word in listed:  # and every word, in both spellings json.dumps writes, is refused
        for ascii_only in (True, False):
            assert not dfa.matches(json.dumps(word, ensure_ascii=ascii_only).encode())


# automata a ``Decoding`` leaf stands for (``pattern`` strings): loops and counted runs, characters
# that need escapes, non-ASCII and astral ones, the empty word, and a search (unanchored); each
# with the Python regex for ``re.search`` (``\\Z``: Python's ``$`` also matches before a final
# newline, ECMA-262's does not)
PATTERNS = {
    "letters then digits": ("^[a-z]+-[0-9]{2,4}$", "^[a-z]+-[0-9]{2,4}\\Z"),
    "escapes": ('^["\\\\/\\n\\x01]+x?$', '^["\\\\/\\n\\x01]+x?\\Z'),
    "non-ascii": ("^(\u00e9|\u20ac\u20ac|\U0001f600)*$", "^(\u00e9|\u20ac\u20ac|\U0001f600)*\\Z"),
    "short": ("^.{0,3}$", "^[^\\n\\r\u2028\u2029]{0,3}\\Z"),
    "search": ('a"b', 'a"b'),
    "empty word": ("^(|a)$", "^(|a)\\Z"),
}


def pattern_dfa(pattern: str) -> CharDFA:
    return CharDFA.from_expr(parse_regex_search(pattern, flavor="ecma"))


@pytest.mark.parametrize("context", list(CONTEXTS))
@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_decoding_read_from_its_automaton_equals_its_spelling(pattern: str,
                                                              context: str) -> None:
    dfa = pattern_dfa(PATTERNS[pattern][0])
    leaf = Decoding(dfa)
    fast = build_byte_dfa(CONTEXTS[context](leaf), nonempty=True)
    # the oracle: the automaton spelled as IR (state elimination, then every JSON spelling of
    # each class), built as a plain Thompson NFA that never looks at encodings
    slow = expanded_path(CONTEXTS[context](encode_chars(dfa.to_expr())))
    assert np.array_equal(fast.trans, slow.trans) and np.array_equal(fast.accept, slow.accept)
    plain = expanded_path(CONTEXTS[context](leaf))  # the leaf read plainly, edge by edge
    assert np.array_equal(plain.trans, slow.trans) and np.array_equal(plain.accept, slow.accept)


@pytest.mark.parametrize("pattern", list(PATTERNS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_decoding_matches_iff_json_decodes_to_a_word(pattern: str, data: st.DataObject) -> None:
    ecma, python = PATTERNS[pattern]
    lexeme = seq(lit('"'), Decoding(pattern_dfa(ecma)), lit('"'))
    dfa = build_byte_dfa(lexeme, nonempty=True)
    reference = ReferenceRecognizer(Grammar({"start": lexeme}, "start"))
    pieces = data.draw(st.lists(st.sampled_from(FRAGMENTS + ["-", "12", "x", "\\\"", "a\\\"b"]),
                                max_size=5))
    body = "".join(pieces)
    try:
        value = json.loads('"' + body + '"')
    except ValueError:
        value = None
    expected = isinstance(value, str) and all(
        not 0xD800 <= ord(ch) <= 0xDFFF for ch in value) and re.search(python, value) is not None
    text = '"' + body + '"'
    assert dfa.matches(text.encode("utf-8", "surrogatepass")) == expected, body
    assert reference.accepts(text) == expected, body


def test_excluding_past_the_state_bound_is_refused_as_too_large() -> None:
    words = tuple(sorted({f"{i:03d}{'abcdefghij'[i % 10]}" * 3 for i in range(100)}))
    quoted = seq(lit('"'), Excluding(words, ANY_CHAR), lit('"'))
    size = build_byte_dfa(quoted, nonempty=True).num_states
    with pytest.raises(GrammarTooLargeError):
        build_byte_dfa(quoted, nonempty=True, max_states=size // 2)


def test_long_bounded_string_stays_small() -> None:
    grammar = Grammar({"start": string_lexeme(ANY_CHAR, 0, 20_000)}, "start")
    tables = build_tables(grammar)
    # two pieces of at most ``repeat_chunk`` characters, not ~20 states per character of the bound
    assert tables.num_dfa_states < 12_000


# ---------------------------------------------------------------- chunked repeats, end to end

VOCAB = TokenizerInfo.from_token_bytes(
    [b"", b'"', b"a", b"aa", b"\\", b"u", b"0", b"6", b"1", b"\\u0061", b"\xc3\xa9", b"b"],
    eos_ids=[0],
    special_ids=[0],
)


@pytest.mark.parametrize("chunk", [2, 3, 64])
@pytest.mark.parametrize("lo,hi", [(0, 7), (3, 8), (5, None), (7, 7)])
def test_chunked_repeat_has_the_same_language(chunk: int, lo: int, hi: int | None) -> None:
    cls = chars([(ord("a"), ord("b")), (0xE9, 0xE9)])
    grammar = Grammar({"start": seq(lit("["), repeat(Ref("c"), lo, hi), lit("]")),
                       "c": encode_class(cls)}, "start")
    compiled = gs.compile_ir(grammar, VOCAB, limits=CompileLimits(repeat_chunk=chunk),
                             cache=False)
    reference = ReferenceRecognizer(grammar)
    for n in range(0, 12):
        mixed = "a\\u00e9" * (n // 2) + "b" * (n % 2)
        for text in ("a" * n, "b" * n, "\\u0061" * n, "é" * n, mixed):
            word = f"[{text}]"
            m = compiled.matcher()
            ok = m.accept_string(word) and m.is_accepting()
            decoded = json.loads(f'"{text}"')
            expected = len(decoded) >= lo and (hi is None or len(decoded) <= hi)
            assert ok == expected == reference.accepts(word), (chunk, lo, hi, word)
