"""CompiledGrammar: a grammar's flat tables bound to one tokenizer, and the ``compile_*`` entry points.

A ``CompiledGrammar`` is immutable and shared by any number of matchers. The token trie is built once
per tokenizer (keyed by its fingerprint) and shared by every grammar compiled for it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from grammarsd.compiler.tables import CompileLimits, EarleyTables, build_tables
from grammarsd.grammar.ir import Grammar
from grammarsd.tokenizer.trie import TokenTrie

if TYPE_CHECKING:
    from grammarsd.matcher.matcher import GrammarMatcher
    from grammarsd.tokenizer.info import TokenizerInfo

GrammarSyntax = Literal["auto", "lark", "gbnf"]


@dataclass(frozen=True)
class CompiledGrammar:
    """A grammar compiled for one tokenizer.

    Attributes
    ----------
    grammar:
        The IR it was compiled from (``str(compiled.grammar)`` shows it as EBNF).
    tokenizer_info:
        The tokenizer the masks are for; masks are ``ceil(tokenizer_info.vocab_size / 32)`` words.
    tables:
        The flat Earley tables and terminal DFAs.
    """

    grammar: Grammar
    tokenizer_info: TokenizerInfo
    tables: EarleyTables
    trie: TokenTrie = field(repr=False)
    runtime_slot: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """Matcher-layer state shared by all matchers (kernel tables, lazy mask cache)."""

    def matcher(self) -> GrammarMatcher:
        """A fresh matcher at the start of the language."""
        from grammarsd.matcher.matcher import GrammarMatcher  # matcher layer sits below

        return GrammarMatcher(self)


_TRIE_CACHE: OrderedDict[str, TokenTrie] = OrderedDict()
_TRIE_LOCK = threading.Lock()
_TRIE_CACHE_SIZE = 8


def token_trie(info: TokenizerInfo) -> TokenTrie:
    """The (cached) byte trie of ``info``'s vocabulary."""
    key = info.fingerprint
    with _TRIE_LOCK:
        if key in _TRIE_CACHE:
            _TRIE_CACHE.move_to_end(key)
            return _TRIE_CACHE[key]
    trie = TokenTrie.from_token_bytes(info.token_bytes)
    with _TRIE_LOCK:
        _TRIE_CACHE[key] = trie
        while len(_TRIE_CACHE) > _TRIE_CACHE_SIZE:
            _TRIE_CACHE.popitem(last=False)
    return trie


def _as_tokenizer_info(tokenizer: Any) -> TokenizerInfo:
    if hasattr(tokenizer, "token_bytes") and hasattr(tokenizer, "fingerprint"):
        return tokenizer  # type: ignore[no-any-return]
    from grammarsd.tokenizer.info import TokenizerInfo

    return TokenizerInfo.from_huggingface(tokenizer)


def compile_ir(
    grammar: Grammar, tokenizer: Any, *, limits: CompileLimits | None = None
) -> CompiledGrammar:
    """Compile IR for ``tokenizer`` (a ``TokenizerInfo`` or a Hugging Face tokenizer)."""
    info = _as_tokenizer_info(tokenizer)
    tables = build_tables(grammar, limits=limits)
    return CompiledGrammar(
        grammar=grammar,
        tokenizer_info=info,
        tables=tables,
        trie=token_trie(info),
    )


def compile_grammar(
    grammar: str | Grammar,
    tokenizer: Any,
    *,
    syntax: GrammarSyntax = "auto",
    start: str | None = None,
    limits: CompileLimits | None = None,
) -> CompiledGrammar:
    """Compile a Lark or GBNF grammar text (or IR) for ``tokenizer``.

    ``syntax="auto"`` reads text containing ``::=`` as GBNF and anything else as Lark. ``start``
    defaults to ``start`` for Lark and ``root`` for GBNF.
    """
    if isinstance(grammar, Grammar):
        return compile_ir(grammar, tokenizer, limits=limits)
    if syntax == "auto":
        syntax = "gbnf" if "::=" in grammar else "lark"
    if syntax == "gbnf":
        from grammarsd.grammar.gbnf import grammar_from_gbnf

        ir = grammar_from_gbnf(grammar, start=start or "root")
    elif syntax == "lark":
        from grammarsd.grammar.lark import grammar_from_lark

        ir = grammar_from_lark(grammar, start=start or "start")
    else:
        raise ValueError(f"unknown grammar syntax {syntax!r}; expected 'auto', 'lark' or 'gbnf'")
    return compile_ir(ir, tokenizer, limits=limits)


def compile_regex(
    pattern: str, tokenizer: Any, *, limits: CompileLimits | None = None
) -> CompiledGrammar:
    """Compile a Python-syntax regular expression; the whole output must match it."""
    from grammarsd.grammar.regex import grammar_from_regex

    return compile_ir(grammar_from_regex(pattern), tokenizer, limits=limits)


def compile_json_schema(
    schema: Any,
    tokenizer: Any,
    *,
    registry: Any = None,
    limits: CompileLimits | None = None,
    **options: Any,
) -> CompiledGrammar:
    """Compile a JSON Schema for ``tokenizer``.

    ``schema`` is a dict, a JSON string, a Pydantic model class or any type Pydantic's
    ``TypeAdapter`` accepts. ``options`` are ``JsonSchemaOptions`` fields (``whitespace``,
    ``max_whitespace``, ``indent``, ``any_order``, ``formats``, ...); unknown names raise
    ``ValueError``. ``registry`` (a ``referencing.Registry``) resolves remote ``$ref``.
    Keywords that cannot be enforced exactly raise ``SchemaUnsupportedError``.
    """
    from grammarsd.grammar.json_schema import JsonSchemaOptions, schema_to_grammar

    opts = JsonSchemaOptions.from_dict(options)
    grammar = schema_to_grammar(schema, options=opts, registry=registry)
    return compile_ir(grammar, tokenizer, limits=limits)


__all__ = [
    "CompiledGrammar",
    "compile_grammar",
    "compile_ir",
    "compile_json_schema",
    "compile_regex",
    "token_trie",
]
