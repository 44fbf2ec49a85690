"""Pattern-constrained JSON strings compile to one DFA terminal, with an unchanged language.

The shape: a string with a ``pattern`` used to become right-linear rules (one per state of the
pattern's automaton), which the compiler kept in the parser as a loop over one-character
terminals, so almost every token was uncertain inside such a string. Now the string (quotes
included) is one terminal. Oracles: Python's ``re`` (ASCII flavour, which is ECMA-262's for
these patterns) on the decoded value, and ``jsonschema`` on MaskBench's labelled instances.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grammarsd as gs
from grammarsd.compiler.tables import build_tables
from grammarsd.grammar.json_schema import schema_to_grammar
from grammarsd.tokenizer.info import TokenizerInfo

BYTES = TokenizerInfo.from_token_bytes([b""] + [bytes([b]) for b in range(256)], eos_ids=[0],
                                       special_ids=[0])

# (ECMA pattern, the same pattern for Python's re with re.ASCII: ECMA's "$" is Python's "\Z")
PATTERNS = [
    (r"^\w+$", r"^\w+\Z"),
    (r"\.([Yy][Aa][Mm][Ll]|[Jj][Ss][Oo][Nn])$", r"\.([Yy][Aa][Mm][Ll]|[Jj][Ss][Oo][Nn])\Z"),
    (r"^[\^\-._:/?&=,\w]+$", r"^[\^\-._:/?&=,\w]+\Z"),
    (r"^[a-z0-9]{10}$", r"^[a-z0-9]{10}\Z"),
    (r"ab*c", r"ab*c"),
]
ALPHABET = "aAbcJjsSonNyYmMlL019_.-^/ é\"\\\n\u2028"


def compiled(pattern: str) -> gs.CompiledGrammar:
    return gs.compile_json_schema({"type": "string", "pattern": pattern}, BYTES, cache=False)


@pytest.mark.parametrize(("pattern", "_py"), PATTERNS)
def test_pattern_string_is_one_terminal(pattern: str, _py: str) -> None:
    tables = build_tables(schema_to_grammar({"type": "string", "pattern": pattern}))
    assert tables.num_terminals == 1, [str(e)[:80] for e in tables.term_exprs]


def test_pattern_value_in_an_object_is_regular_with_its_key() -> None:
    schema = {"type": "object", "properties": {"id": {"type": "string", "pattern": r"^\w+$"}},
              "required": ["id"], "additionalProperties": False}
    tables = build_tables(schema_to_grammar(schema))
    assert tables.num_terminals == 1  # the whole object, key and pattern string included


@pytest.mark.parametrize(("pattern", "py"), PATTERNS)
@settings(max_examples=60, deadline=None)
@given(st.text(ALPHABET, max_size=12))
def test_pattern_strings_match_re(pattern: str, py: str, value: str) -> None:
    grammar = compiled(pattern)
    expected = re.search(py, value, re.ASCII) is not None
    for ensure_ascii in (True, False):
        m = grammar.matcher()
        text = json.dumps(value, ensure_ascii=ensure_ascii)
        assert (m.accept_string(text) and m.is_accepting()) == expected, text


@pytest.mark.parametrize(("pattern", "py"), PATTERNS)
def test_pattern_strings_match_re_on_chosen_values(pattern: str, py: str) -> None:
    grammar = compiled(pattern)
    for value in ["x.yaml", "a.b.JSON", ".json.", "q" * 10, "0123456789", "abc_1", "a^b",
                  "ac", "abbbbc", "zabcz", "x.json\n", "\\.yaml", "é", "a b"]:
        m = grammar.matcher()
        expected = re.search(py, value, re.ASCII) is not None
        assert (m.accept_string(json.dumps(value)) and m.is_accepting()) == expected, value


MASKBENCH = Path("/work/shared/data/maskbench-dev")


@pytest.mark.parametrize("name", [
    "Github_easy---o21848.json",
    pytest.param("JsonSchemaStore---vtestunit-schema.json", marks=pytest.mark.slow),
])
def test_maskbench_pattern_schemas_stay_exact(name: str) -> None:
    path = MASKBENCH / name
    if not path.exists():
        pytest.skip(f"{path} is not on this machine")
    data = json.loads(path.read_text())
    grammar = gs.compile_json_schema(data["schema"], BYTES, cache=False)
    validator = jsonschema.validators.validator_for(data["schema"])(data["schema"])
    for test in data["tests"]:
        m = grammar.matcher()
        ok = m.accept_string(json.dumps(test["data"])) and m.is_accepting()
        assert ok == validator.is_valid(test["data"]) == test["valid"], test["description"]
