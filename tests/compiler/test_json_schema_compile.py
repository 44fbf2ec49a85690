"""Schemas whose strings have long length bounds compile to small automata and stay exact.

Oracle: ``jsonschema`` on the decoded instance; the grammar is run through the compiled
tables and the numba matcher (the path the lexer and chunking changes affect).
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

import grammarsd as gs
from grammarsd.tokenizer.info import TokenizerInfo

BYTES = TokenizerInfo.from_token_bytes([b""] + [bytes([b]) for b in range(256)], eos_ids=[0],
                                       special_ids=[0])

SCHEMAS: dict[str, dict[str, Any]] = {
    "long maxLength": {"type": "string", "maxLength": 3000},
    "minLength and maxLength": {"type": "string", "minLength": 70, "maxLength": 200},
    "long strings in an object": {
        "type": "object",
        "properties": {"a": {"type": "string", "maxLength": 32767},
                       "b": {"type": "string", "minLength": 1, "maxLength": 255}},
        "required": ["a"],
    },
    "length beside an enum exclusion": {"type": "string", "maxLength": 150,
                                        "not": {"enum": ["x" * 10]}},
}

TEXTS = ["", "x" * 10, "x" * 69, "x" * 70, "é" * 150, "\U0001f600" * 199, "q\"\\/\n" * 40,
         "\u20ac" * 201, "y" * 255, "y" * 256, "z" * 3000, "z" * 3001]


def instances(name: str) -> list[Any]:
    if SCHEMAS[name]["type"] == "string":
        return TEXTS
    return [{"a": t} for t in TEXTS] + [{"a": "", "b": t} for t in TEXTS] + [{"b": "x"}]


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_long_length_bounds_compile_small_and_exact(name: str) -> None:
    schema = SCHEMAS[name]
    compiled = gs.compile_json_schema(schema, BYTES, cache=False)
    # the bounds are not multiplied into the automata (32,767 characters at a few states each
    # would be ~100k states)
    assert compiled.tables.num_dfa_states < 50_000
    for value in instances(name):
        for ensure_ascii in (True, False):
            text = json.dumps(value, ensure_ascii=ensure_ascii)
            m = compiled.matcher()
            ok = m.accept_string(text) and m.is_accepting()
            assert ok == jsonschema.Draft202012Validator(schema).is_valid(value), (name, text[:80])
