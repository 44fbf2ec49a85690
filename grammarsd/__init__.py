"""grammarsd: structured output and controlled decoding for language models.

tok = grammarsd.TokenizerInfo.from_huggingface(hf_tokenizer)
g = grammarsd.compile_regex(r"\\d{4}-\\d{2}-\\d{2}", tok)   # or compile_grammar(text, tok)
m = g.matcher()
bitmask = grammarsd.allocate_token_bitmask(1, tok.vocab_size)
m.fill_next_token_bitmask(bitmask)                          # bit t set = token t allowed
grammarsd.apply_token_bitmask_inplace(logits, bitmask)      # disallowed logits -> -inf
m.accept_token(token_id)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from grammarsd.compiler.compiled import (
    CompiledGrammar,
    compile_grammar,
    compile_ir,
    compile_json_schema,
    compile_regex,
)
from grammarsd.compiler.tables import CompileLimits
from grammarsd.errors import (
    EmptyLanguageError,
    GrammarError,
    GrammarsdError,
    GrammarSyntaxError,
    GrammarTooLargeError,
    IncompleteOutputError,
    InvalidSchemaError,
    MatcherError,
    ModelLoadError,
    OutputValidationError,
    SchemaUnsupportedError,
    TokenizerError,
    UnsupportedSyntaxError,
)
from grammarsd.grammar.ir import Grammar
from grammarsd.grammar.json_schema import JsonSchemaOptions
from grammarsd.matcher.matcher import GrammarMatcher
from grammarsd.tokenizer.info import TokenizerInfo

if TYPE_CHECKING:
    from grammarsd.api.decorators import Tool, ToolCall, choose_tool, grammar
    from grammarsd.api.generate import generate, generate_batch, generate_result, stream
    from grammarsd.api.hf import GBNF, Lark, LogitsProcessor, Regex
    from grammarsd.api.models import LoadedModel, load_model, load_tokenizer
    from grammarsd.api.result import GenerationStats, Result
    from grammarsd.kernels.bitmask import allocate_token_bitmask, apply_token_bitmask_inplace

#: Names whose modules import torch or transformers (about 2 s): loaded on first use, so that
#: compiling grammars and filling masks does not pay for them.
_LAZY = {
    **dict.fromkeys(("Tool", "ToolCall", "choose_tool", "grammar"), "grammarsd.api.decorators"),
    **dict.fromkeys(("generate", "generate_batch", "generate_result", "stream"),
                    "grammarsd.api.generate"),
    **dict.fromkeys(("GBNF", "Lark", "LogitsProcessor", "Regex"), "grammarsd.api.hf"),
    **dict.fromkeys(("LoadedModel", "load_model", "load_tokenizer"), "grammarsd.api.models"),
    **dict.fromkeys(("GenerationStats", "Result"), "grammarsd.api.result"),
    **dict.fromkeys(("allocate_token_bitmask", "apply_token_bitmask_inplace"),
                    "grammarsd.kernels.bitmask"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'grammarsd' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"

__all__ = [
    "CompileLimits",
    "CompiledGrammar",
    "EmptyLanguageError",
    "GenerationStats",
    "GBNF",
    "Grammar",
    "GrammarError",
    "GrammarMatcher",
    "GrammarSyntaxError",
    "GrammarTooLargeError",
    "GrammarsdError",
    "IncompleteOutputError",
    "InvalidSchemaError",
    "JsonSchemaOptions",
    "Lark",
    "LoadedModel",
    "LogitsProcessor",
    "MatcherError",
    "ModelLoadError",
    "OutputValidationError",
    "Regex",
    "Result",
    "SchemaUnsupportedError",
    "TokenizerError",
    "TokenizerInfo",
    "Tool",
    "ToolCall",
    "UnsupportedSyntaxError",
    "__version__",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "choose_tool",
    "compile_grammar",
    "compile_ir",
    "compile_json_schema",
    "compile_regex",
    "generate",
    "generate_batch",
    "generate_result",
    "grammar",
    "load_model",
    "load_tokenizer",
    "stream",
]
