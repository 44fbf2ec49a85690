"""Whitespace gaps of JSON grammars, bounded by the matcher instead of the DFAs.

``compile_json_schema`` compiles the gaps ``[\\t\\n\\r ]{0,N}`` unbounded and the matcher bounds
each run of whitespace outside strings (``matcher.whitespace``). The oracle is the reference
recognizer on the grammar as the JSON front end wrote it, gaps bounded: every mask, EOS decision
and whole-string answer must be the same, and a reference with a looser bound must disagree.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from grammarsd.compiler.compiled import compile_ir, compile_json_schema
from grammarsd.compiler.tables import build_tables
from grammarsd.errors import GrammarError
from grammarsd.grammar.ir import Grammar, WhitespaceGaps, char_set, lit, repeat, seq
from grammarsd.grammar.json_schema import JsonSchemaOptions, schema_to_grammar, whitespace_gaps
from grammarsd.matcher import whitespace
from grammarsd.matcher.reference import ReferenceRecognizer
from grammarsd.matcher.whitespace import whitespace_runs
from grammarsd.tokenizer.info import TokenizerInfo

BOUND = 3
EOS = 0
PIECES = ("{", "}", "[", "]", ",", ":", '"', "a", "b", "1", "\\", '\\"', "true", "null",
          " ", "\n", "\t", "\r")
WS = (" ", "  ", "   ", "    ", "     ", "\n", "\n  ", "\n    ", "\t\t", "\r\n", " \n ")


def _vocab(seed: int = 0) -> TokenizerInfo:
    """Id 0 is EOS; whitespace runs of 1-5 bytes, JSON punctuation and words, alone and in
    random runs (so tokens start, end and cross gaps and strings)."""
    rng = random.Random(seed)
    pieces = list(PIECES) + list(WS)
    pieces += ['"a"', '": ', '", ', ', "', ' "', '" ', '"  ', '  "', "a b", "a   b", ' ]', '[ ',
               " }", "{ ", ": [", "],", " ,", ", "]
    for _ in range(150):
        pieces.append("".join(rng.choice(PIECES + WS) for _ in range(rng.randint(2, 5))))
    pieces += [chr(c) for c in range(0x20, 0x7F)]  # any text can be spelled
    unique = list(dict.fromkeys(p.encode() for p in pieces))
    return TokenizerInfo.from_token_bytes([b""] + unique, eos_ids=[EOS], special_ids=[EOS])


VOCAB = _vocab()
SCHEMAS = {
    "object": {"type": "object", "properties": {
        "a": {"type": "string"}, "b": {"type": "array", "items": {"type": "integer"}}},
        "required": ["a"], "additionalProperties": False},
    "nested": {"type": "array", "items": {"type": "object", "properties": {
        "a": {"type": "boolean"}, "b": {"type": ["null", "string"]}},
        "additionalProperties": False}, "maxItems": 3},
    "const": {"enum": [{"a": [1, True]}, [], "a b"]},
    # the items' member automata are one right-linear rule group, lexed whole with the array
    "alternatives": {"type": "array", "items": {"anyOf": [
        {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "string"}},
         "additionalProperties": False},
        {"type": "object", "properties": {"a": {"type": "null"}, "c": {"type": "integer"}},
         "additionalProperties": False}]}},
}


def _mask(ref: ReferenceRecognizer, prefix: bytes) -> np.ndarray:
    mask = np.asarray(ref.allowed_tokens(prefix, VOCAB.token_bytes), dtype=bool)
    mask[EOS] = ref.is_complete(prefix)
    return mask


def _walk(schema: dict, oracle_bound: int, seed: int, steps: int) -> str | None:
    """Walk the matcher of ``schema`` (bound ``BOUND``) by random allowed tokens, preferring
    whitespace, with a fork or rollback now and then; the first disagreement with the reference of the
    schema's grammar at ``oracle_bound``, or None."""
    oracle = schema_to_grammar(schema, options=JsonSchemaOptions(max_whitespace=oracle_bound))
    ref = ReferenceRecognizer(oracle)
    m = compile_json_schema(schema, VOCAB, max_whitespace=BOUND, cache=False).matcher()
    rng = random.Random(seed)
    prefixes = [b""]
    for _ in range(steps):
        prefix = prefixes[-1]
        expected = _mask(ref, prefix)
        got = np.zeros(VOCAB.vocab_size, dtype=bool)
        got[m.allowed_token_ids()] = True
        diff = np.flatnonzero(expected != got)
        if diff.size:
            return f"prefix={prefix!r}: " + ", ".join(
                f"{VOCAB.token_bytes[t]!r} ref={expected[t]}" for t in diff[:6])
        if m.is_accepting() != ref.is_complete(prefix):
            return f"prefix={prefix!r}: accepting={m.is_accepting()}"
        allowed = [int(t) for t in np.flatnonzero(expected) if t != EOS]
        if rng.random() < 0.1:  # a fork carries the state of the run
            m = m.fork()
        if len(prefixes) > 2 and rng.random() < 0.15:  # back one token: the bound state too
            m.rollback(1)
            prefixes.pop()
            continue
        if not allowed:
            return None
        spaces = [t for t in allowed if VOCAB.token_bytes[t].strip() == b""]
        t = rng.choice(spaces if spaces and rng.random() < 0.6 else allowed)
        assert m.accept_token(t)
        prefixes.append(prefix + VOCAB.token_bytes[t])
    return None


@pytest.mark.parametrize("name", SCHEMAS)
@pytest.mark.parametrize("seed", range(4))
def test_masks_match_the_bounded_grammar(name: str, seed: int) -> None:
    problem = _walk(SCHEMAS[name], BOUND, seed, steps=40)
    assert problem is None, f"{name}, seed {seed}: {problem}"


@pytest.mark.parametrize("name", SCHEMAS)
def test_a_looser_bound_is_noticed(name: str) -> None:
    """Negative control: the reference of the bound plus one disagrees on some walk."""
    assert any(_walk(SCHEMAS[name], BOUND + 1, seed, steps=60) for seed in range(8)), name


def _spaced(value: object, rng: random.Random) -> str:
    """``value`` as JSON text with a random run of 0-5 whitespace characters in every gap."""
    def gap() -> str:
        return "".join(rng.choice(" \n\t\r") for _ in range(rng.choice((0, 1, 3, 3, 4, 5))))
    if isinstance(value, dict):
        members = [gap() + json.dumps(k) + gap() + ":" + gap() + _spaced(v, rng) + gap()
                   for k, v in value.items()]
        return "{" + (",".join(members) if members else gap()) + "}"
    if isinstance(value, list):
        items = [gap() + _spaced(v, rng) + gap() for v in value]
        return "[" + (",".join(items) if items else gap()) + "]"
    return json.dumps(value)


def _runs_within(text: str, bound: int) -> bool:
    """No run of more than ``bound`` whitespace characters outside strings (an independent
    scan of the text)."""
    run, inside, escaped = 0, False, False
    for ch in text:
        if inside:
            inside = escaped or ch != '"'
            escaped = not escaped and ch == "\\"
            continue
        run = run + 1 if ch in " \n\t\r" else 0
        if run > bound:
            return False
        inside = ch == '"'
    return True


def _tokens(text: str) -> list[int]:
    """Greedy longest-match token ids of ``text``."""
    ids = {b: i for i, b in enumerate(VOCAB.token_bytes) if b}
    data, out = text.encode(), []
    while data:
        size = max(k for k in range(1, 8) if data[:k] in ids)
        out.append(ids[data[:size]])
        data = data[size:]
    return out


def test_whole_texts_are_judged_by_their_runs() -> None:
    """JSON text of valid instances, with random gaps: accepted iff every run is within the
    bound, as one string and token by token (the mask agrees with a refused token)."""
    compiled = compile_json_schema(SCHEMAS["nested"], VOCAB, max_whitespace=BOUND, cache=False)
    rng = random.Random(0)
    seen = set()
    for _ in range(300):
        value = [{"a": rng.random() < 0.5, "b": rng.choice([None, "x  y", 'q"  "'])}
                 for _ in range(rng.randint(0, 3))]
        text = _spaced(value, rng)
        want = _runs_within(text, BOUND)
        m = compiled.matcher()
        assert (m.accept_string(text) and m.is_accepting()) == want, text
        m = compiled.matcher()
        refused = next((t for t in _tokens(text) if not m.accept_token(t)), None)
        if refused is not None:  # the mask agrees, from the state before the token
            assert refused not in m.allowed_token_ids(), text
        assert (refused is None and m.is_accepting()) == want, text
        seen.add(want)
    assert seen == {True, False}


@pytest.mark.parametrize("name", ["object", "alternatives"])
def test_bounded_gaps_leave_the_dfas_unbounded(name: str) -> None:
    """Also inside a rule group's bodies (``alternatives``: the array is one terminal)."""
    schema = SCHEMAS[name]
    tables = compile_json_schema(schema, VOCAB, max_whitespace=32, cache=False).tables
    assert tables.ws_bound == 32
    plain = compile_ir(schema_to_grammar(schema), VOCAB, cache=False).tables
    assert plain.ws_bound == 0
    assert tables.num_dfa_states * 3 < plain.num_dfa_states


def test_open_gaps_keep_the_terminal_split() -> None:
    """Only the DFAs change: a counted repeat holding gaps (an array with ``maxItems``) is kept
    apart from its neighbours as with bounded gaps, so its terminals do not multiply."""
    schema = {"type": "object", "properties": {"xs": {"type": "array", "maxItems": 6, "items": {
        "type": "object", "properties": {"a": {"type": "integer"}}}}, "b": {"type": "string"}}}
    grammar = schema_to_grammar(schema)
    bounded = build_tables(grammar)
    opened = build_tables(grammar, whitespace=WhitespaceGaps("ws", 32))
    assert np.array_equal(bounded.item_next, opened.item_next)
    assert bounded.term_exprs == opened.term_exprs
    assert opened.num_dfa_states * 3 < bounded.num_dfa_states


def test_only_flexible_bounded_layouts_promise_gaps() -> None:
    assert whitespace_gaps(JsonSchemaOptions()) == WhitespaceGaps("ws", 32)
    assert whitespace_gaps(JsonSchemaOptions(max_whitespace=None)) is None
    assert whitespace_gaps(JsonSchemaOptions(max_whitespace=0)) is None
    assert whitespace_gaps(JsonSchemaOptions(whitespace="compact")) is None
    assert whitespace_gaps(JsonSchemaOptions(whitespace="indent", indent=2)) is None


def test_a_promise_the_grammar_does_not_keep_is_refused() -> None:
    grammar = Grammar({"start": seq(lit("["), repeat(lit(" "), 0, 3), lit("]"))}
                      | {"ws": repeat(char_set(" \t"), 0, 3)})
    with pytest.raises(GrammarError, match="not a gap of at most 3"):
        build_tables(grammar, whitespace=WhitespaceGaps("ws", 3))


def test_the_shared_runs_are_bounded_and_reused() -> None:
    first = whitespace_runs(VOCAB, 1)
    assert whitespace_runs(VOCAB, 1) is first
    for bound in range(2, 2 + whitespace.CACHE_SIZE):
        whitespace_runs(VOCAB, bound)
    assert len(whitespace._CACHE) == whitespace.CACHE_SIZE
    assert whitespace_runs(VOCAB, 1) is not first  # evicted, least recently used
