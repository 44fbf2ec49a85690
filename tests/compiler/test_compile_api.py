"""The public compile entry points: syntax selection, start rules, limits and typed errors."""

from __future__ import annotations

import gc
import pickle

import numpy as np
import pytest

import grammarsd as gs
from grammarsd.tokenizer.info import TokenizerInfo

VOCAB = TokenizerInfo.from_token_bytes(
    [b"", b"a", b"b", b"ab", b"1", b"2", b"+", b" ", b"(", b")", "é".encode()],
    eos_ids=[0],
    special_ids=[0],
)


def accepts(compiled: gs.CompiledGrammar, text: str) -> bool:
    m = compiled.matcher()
    return m.accept_string(text) and m.is_accepting()


def test_lark_text_is_the_default_syntax() -> None:
    g = gs.compile_grammar('start: "a" b*\nb: "b"', VOCAB)
    assert accepts(g, "abbb") and not accepts(g, "ba")


def test_gbnf_is_detected_and_starts_at_root() -> None:
    g = gs.compile_grammar('root ::= "(" expr ")"\nexpr ::= [12] ("+" [12])*', VOCAB)
    assert accepts(g, "(1+2+1)") and not accepts(g, "(1+)")


def test_explicit_start_rule() -> None:
    g = gs.compile_grammar('start: "a"\nother: "b"', VOCAB, syntax="lark", start="other")
    assert accepts(g, "b") and not accepts(g, "a")


def test_regex_matches_whole_output() -> None:
    g = gs.compile_regex(r"a(b|é)?", VOCAB)
    assert accepts(g, "aé") and accepts(g, "a") and not accepts(g, "ab1")


def test_masks_are_eos_aware() -> None:
    g = gs.compile_regex(r"ab?", VOCAB)
    m = g.matcher()
    assert list(m.allowed_token_ids()) == [1, 3]  # "a" and "ab"; no EOS yet
    assert m.accept_token(1)
    assert list(m.allowed_token_ids()) == [0, 2]  # EOS and "b"


@pytest.mark.parametrize(
    ("text", "syntax", "error"),
    [
        ('start: "a" )', "lark", gs.GrammarSyntaxError),
        ("root ::= [a-", "gbnf", gs.GrammarSyntaxError),
        ('start: "a"\nstart.2: "b"', "lark", gs.GrammarSyntaxError),
    ],
)
def test_malformed_grammars_raise_typed_errors(text: str, syntax: str, error: type) -> None:
    with pytest.raises(error) as info:
        gs.compile_grammar(text, VOCAB, syntax=syntax)  # type: ignore[arg-type]
    assert info.value.line >= 1 and info.value.column >= 1


def test_lookaround_is_refused_with_position() -> None:
    with pytest.raises(gs.UnsupportedSyntaxError) as info:
        gs.compile_regex(r"ab(?=c)", VOCAB)
    assert info.value.construct and info.value.column == 3


def test_empty_language_is_refused() -> None:
    with pytest.raises(gs.EmptyLanguageError):
        gs.compile_regex(r"[^\s\S]", VOCAB)


def test_dfa_limit_is_a_typed_error_not_a_hang() -> None:
    with pytest.raises(gs.GrammarTooLargeError):
        gs.compile_regex(r"[ab]*a[ab]{14}", VOCAB, limits=gs.CompileLimits(max_dfa_states=1000))


def test_unknown_syntax_is_refused() -> None:
    with pytest.raises(ValueError, match="syntax"):
        gs.compile_grammar('start: "a"', VOCAB, syntax="ebnf")  # type: ignore[arg-type]


def test_compiled_grammar_prints_its_ir() -> None:
    g = gs.compile_regex(r"ab+", VOCAB)
    assert "start" in str(g.grammar)


def test_compiles_from_text_rebuild_the_ir_they_were_compiled_from() -> None:
    """Compiles from text keep the text, not the IR, and rebuild it on first read: it must be
    the IR the front end gives for that text (property order included), read independently."""
    from grammarsd.grammar.gbnf import grammar_from_gbnf
    from grammarsd.grammar.json_schema import schema_to_grammar
    from grammarsd.grammar.lark import grammar_from_lark
    from grammarsd.grammar.regex import grammar_from_regex

    schema = {"type": "object", "properties": {"z": {"type": "integer"}, "a": {"type": "string"}},
              "required": ["z"]}
    for cache in (True, False):
        compiled = gs.compile_json_schema(schema, VOCAB, cache=cache)
        assert compiled.grammar == schema_to_grammar(schema)
        assert compiled.grammar is compiled.grammar  # rebuilt once
    lark = 'start: "a" b*\nb: "b"'
    assert gs.compile_grammar(lark, VOCAB).grammar == grammar_from_lark(lark)
    gbnf = 'root ::= "x" [0-9]*'
    assert gs.compile_grammar(gbnf, VOCAB).grammar == grammar_from_gbnf(gbnf)
    assert gs.compile_regex("a[bc]+", VOCAB).grammar == grammar_from_regex("a[bc]+")
    ir = grammar_from_regex("q+")
    assert gs.compile_ir(ir, VOCAB).grammar is ir  # IR given is IR kept


def _reachable_ir(root: object) -> int:
    """IR nodes reachable from ``root`` through containers and grammarsd's own objects (not
    through functions, modules or other libraries' objects: numba's reach every global)."""
    from grammarsd.grammar.ir import Expr

    seen: set[int] = set()
    stack, found = [root], 0
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        found += isinstance(o, Expr)
        if isinstance(o, (tuple, list, dict, set, frozenset)) or (
            type(o).__module__.startswith("grammarsd.") and not isinstance(o, type)
        ):
            stack.extend(gc.get_referents(o))
    return found


def test_a_grammar_compiled_from_text_keeps_no_ir() -> None:
    """Cached grammars holding IR (the terminals' expressions, the helpers' labels, the grammar)
    made every collector pass longer; the tables keep none, and ``build_tables`` of the rebuilt
    IR still names the terminals. The control: the tables as ``build_tables`` gives them do."""
    from grammarsd.compiler.tables import build_tables

    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^x+$"},
                                               "b": {"type": "array", "items": {"$ref": "#"}}}}
    compiled = gs.compile_json_schema(schema, VOCAB, cache=False)
    compiled.matcher().fill_next_token_bitmask(np.zeros((1, 1), dtype=np.int32))
    assert _reachable_ir(compiled) == 0
    named = build_tables(compiled.grammar)
    assert _reachable_ir(named) > 0
    assert len(named.term_exprs) == compiled.tables.num_terminals
    assert named.nt_names and not compiled.tables.nt_names


def test_tokenizer_info_pickles_and_compiles_identically() -> None:
    clone = pickle.loads(pickle.dumps(VOCAB))
    a = gs.compile_regex(r"(ab)+", VOCAB).matcher()
    b = gs.compile_regex(r"(ab)+", clone).matcher()
    assert np.array_equal(a.allowed_token_ids(), b.allowed_token_ids())


def test_the_garbage_collector_is_paused_only_while_compiling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from grammarsd.compiler import tables

    seen: list[bool] = []
    build = tables.build_tables

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(gc.isenabled())
        return build(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("grammarsd.compiler.compiled.build_tables", spy)
    assert gc.isenabled()
    gs.compile_regex("a+b", VOCAB, cache=False)
    assert seen == [False] and gc.isenabled()  # paused inside, back on after
    with pytest.raises(gs.GrammarsdError):  # an error on the way out resumes it too
        gs.compile_regex("(?=a)", VOCAB, cache=False)
    assert gc.isenabled()
    gc.disable()
    try:  # a host that turned it off keeps it off
        gs.compile_regex("ab+", VOCAB, cache=False)
        assert not gc.isenabled()
    finally:
        gc.enable()


CYCLE_PRONE_SCHEMAS = [  # each reaches a part of the JSON Schema compiler that once made cycles
    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
     "additionalProperties": {"type": "string"}},  # keys outside "a": strings_excluding
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}],
     "minItems": 1, "maxItems": 4},  # array tails
    {"oneOf": [{"type": "string", "maxLength": 2}, {"type": "integer"}]},  # emptiness checks
    {"type": "object", "properties": {"x": {"$ref": "#"}}},  # recursion: productivity pruning
]


@pytest.mark.parametrize("schema", CYCLE_PRONE_SCHEMAS)
def test_compiling_makes_no_reference_cycles(schema: dict) -> None:
    """Compile garbage is freed by reference counting: none is left for the cyclic collector,
    whose runs would otherwise walk every compilation's IR (``collector_paused``)."""
    gs.compile_json_schema(schema, VOCAB, cache=False)  # warm the process-wide caches
    gc.collect()
    gc.disable()
    try:
        gs.compile_json_schema(schema, VOCAB, cache=False)
        assert gc.collect() == 0
    finally:
        gc.enable()
