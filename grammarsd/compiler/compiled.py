"""CompiledGrammar: a grammar's flat tables bound to one tokenizer, and the ``compile_*`` entry points.

A ``CompiledGrammar`` is immutable and shared by any number of matchers. The token trie is built once
per tokenizer (keyed by its fingerprint) and shared by every grammar compiled for it.
"""

from __future__ import annotations

import gc
import json
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from grammarsd.compiler.tables import CompileLimits, EarleyTables, build_tables
from grammarsd.errors import GrammarTooLargeError
from grammarsd.grammar.ir import Capped, Choice, Grammar, Repeat, Seq, WhitespaceGaps
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
        The IR it was compiled from (``str(compiled.grammar)`` shows it as EBNF). A compile from
        text (a schema, a grammar, a pattern) keeps the text and rebuilds the IR when it is first
        read: IR is many small objects, and cached grammars holding theirs made the garbage
        collector's full passes cost ~0.5 ms more per compile on MaskBench (0.9 against 0.4).
    source:
        The IR, or a function that rebuilds it (what ``grammar`` reads).
    tokenizer_info:
        The tokenizer the masks are for; masks are ``ceil(tokenizer_info.vocab_size / 32)`` words.
    tables:
        The flat Earley tables and terminal DFAs, without the IR naming their symbols
        (``EarleyTables.without_ir``, for the same reason): ``build_tables(compiled.grammar)``
        has it.
    """

    source: Grammar | Callable[[], Grammar] = field(repr=False, compare=False)
    tokenizer_info: TokenizerInfo
    tables: EarleyTables
    trie: TokenTrie = field(repr=False)
    runtime_slot: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """Matcher-layer state shared by all matchers (kernel tables, lazy mask cache)."""

    @cached_property
    def grammar(self) -> Grammar:
        source = self.source
        return source if isinstance(source, Grammar) else source()

    def memory_bytes(self) -> int:
        """Bytes held by the tables and by the lazily grown mask cache (the trie is shared; IR,
        the terminals' and helpers' and ``grammar`` once read, is not counted). Cheap:
        ``CompileCache`` asks every entry once every few insertions."""
        rt = self.runtime_slot.get("runtime")
        return self._tables_nbytes if rt is None else self._tables_nbytes + rt.nbytes

    @cached_property
    def _tables_nbytes(self) -> int:
        """The tables' arrays (they never change)."""
        return sum(
            getattr(self.tables, f).nbytes
            for f in self.tables.__dataclass_fields__
            if hasattr(getattr(self.tables, f), "nbytes")
        )

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


class CompileCache:
    """A thread-safe LRU of compiled grammars, bounded by their ``memory_bytes()``.

    Keys are ``(kind, canonical spec, options, limits, tokenizer fingerprint)``. Mask caches
    grow while grammars are used, so sizes are re-measured, all of them, once every
    ``len(self) // REMEASURE_EVERY`` insertions (amortised O(1) per insertion: measuring every
    entry on every insertion took ~0.5 ms per compile with a few hundred grammars cached);
    between, an entry counts as it was last measured, and growth since then is seen late.

    The default bound, 128 MiB, holds ~200 MaskBench schemas' grammars before their mask rows
    grow (~0.6 MiB each: the DFA table is 4 bytes per state and byte class, ~60 classes). With
    1 KiB per state (a column per byte, before session 32) it held ~60, and a bigger bound
    bought nothing where schemas are not compiled twice and cost time where they are: all of
    MaskBench-dev's paired schemas in one process compiled 7-9 % slower with 512 MiB than with
    128 MiB (three alternated pairs; 650 MiB more resident; writing a new grammar's tables onto
    memory the process had not touched cost ~2 us per state, ten times the cost on reused
    memory). Raise ``COMPILE_CACHE.max_bytes`` to keep more grammars.
    """

    REMEASURE_EVERY = 8

    def __init__(self, max_bytes: int = 128 << 20) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[Any, ...], tuple[CompiledGrammar, int]] = OrderedDict()
        self._total = 0  # the sizes in ``_items``, as last measured
        self._inserted = 0  # insertions since the last full measure
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get_or_compile(
        self, key: tuple[Any, ...], build: Callable[[], CompiledGrammar]
    ) -> CompiledGrammar:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                self.hits += 1
                return self._items[key][0]
            self.misses += 1
        compiled = build()  # outside the lock: compiles may run in parallel
        with self._lock:
            if key in self._items:  # a parallel compile of the same key came first
                self._total -= self._items.pop(key)[1]
            size = compiled.memory_bytes()
            self._items[key] = (compiled, size)
            self._total += size
            self._inserted += 1
            if self._inserted * self.REMEASURE_EVERY >= len(self._items):
                self._remeasure()
            while self._total > self.max_bytes and len(self._items) > 1:
                self._total -= self._items.popitem(last=False)[1][1]
        return compiled

    def _remeasure(self) -> None:
        for key, (compiled, _) in list(self._items.items()):
            self._items[key] = (compiled, compiled.memory_bytes())
        self._total = sum(size for _, size in self._items.values())
        self._inserted = 0

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._total = self._inserted = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: tuple[Any, ...]) -> bool:
        return key in self._items


COMPILE_CACHE = CompileCache()
"""The process-wide cache the ``compile_*`` functions use unless given ``cache=False``."""


def _cached(
    cache: bool, key: tuple[Any, ...], build: Callable[[], CompiledGrammar]
) -> CompiledGrammar:
    with collector_paused():
        return COMPILE_CACHE.get_or_compile(key, build) if cache else build()


_gc_lock = threading.Lock()
_gc_pauses = 0  # compilations in flight (any thread)
_gc_resume = False  # whether the collector was on when the first of them began


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while compiling.

    Compiling allocates bursts of short-lived containers (IR nodes, tuples, memo entries) that
    make no reference cycles worth collecting, and every burst triggers collections that scan
    the host's whole heap: with torch and transformers loaded (~250k tracked objects) that is
    over half of a typical schema's compile time. Reference counting still frees everything
    as usual. Nested and concurrent compilations share one pause; the collector comes back when
    the last one ends, and only if it was on before the first began."""
    global _gc_pauses, _gc_resume
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_resume = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_resume:
                gc.enable()


def _as_tokenizer_info(tokenizer: Any) -> TokenizerInfo:
    if hasattr(tokenizer, "token_bytes") and hasattr(tokenizer, "fingerprint"):
        return tokenizer
    from grammarsd.tokenizer.info import TokenizerInfo

    return TokenizerInfo.from_huggingface(tokenizer)


def compile_ir(
    grammar: Grammar,
    tokenizer: Any,
    *,
    limits: CompileLimits | None = None,
    cache: bool = True,
    whitespace: WhitespaceGaps | None = None,
) -> CompiledGrammar:
    """Compile IR for ``tokenizer`` (a ``TokenizerInfo`` or a Hugging Face tokenizer).

    ``whitespace`` is a front end's promise about the grammar's whitespace (``ir.WhitespaceGaps``)
    that makes it cheaper to compile; a wrong promise changes the language."""
    info = _as_tokenizer_info(tokenizer)
    return _cached(cache, ("ir", grammar, limits, whitespace, info.fingerprint),
                   lambda: _build(grammar, info, limits, whitespace, grammar))


def _build(grammar: Grammar, info: TokenizerInfo, limits: CompileLimits | None,
           whitespace: WhitespaceGaps | None,
           source: Grammar | Callable[[], Grammar]) -> CompiledGrammar:
    """``grammar``'s tables bound to ``info``; ``source`` is what ``CompiledGrammar.grammar``
    reads (``grammar`` itself, or a function rebuilding it from the text it came from)."""
    try:
        tables = build_tables(grammar, limits=limits, whitespace=whitespace)
    except RecursionError:  # the compiler walks expressions recursively
        raise GrammarTooLargeError(
            "expression_depth",
            _depth(grammar),
            sys.getrecursionlimit(),
            hint="flatten deeply nested sequences and choices (or split them into rules)",
        ) from None
    return CompiledGrammar(source=source, tokenizer_info=info, tables=tables.without_ir(),
                           trie=token_trie(info))


def _depth(grammar: Grammar) -> int:
    """The deepest expression nesting of any rule (iterative: deep input is why it is asked)."""
    deepest = 0
    stack = [(body, 1) for body in grammar.rules.values()]
    while stack:
        expr, d = stack.pop()
        deepest = max(deepest, d)
        if isinstance(expr, (Seq, Choice)):
            stack.extend((e, d + 1) for e in expr.items)
        elif isinstance(expr, (Repeat, Capped)):
            stack.append((expr.item, d + 1))
    return deepest


def compile_grammar(
    grammar: str | Grammar,
    tokenizer: Any,
    *,
    syntax: GrammarSyntax = "auto",
    start: str | None = None,
    limits: CompileLimits | None = None,
    cache: bool = True,
) -> CompiledGrammar:
    """Compile a Lark or GBNF grammar text (or IR) for ``tokenizer``.

    ``syntax="auto"`` reads text containing ``::=`` as GBNF and anything else as Lark. ``start``
    defaults to ``start`` for Lark and ``root`` for GBNF.
    """
    if isinstance(grammar, Grammar):
        return compile_ir(grammar, tokenizer, limits=limits, cache=cache)
    if syntax == "auto":
        syntax = "gbnf" if "::=" in grammar else "lark"
    if syntax not in ("gbnf", "lark"):
        raise ValueError(f"unknown grammar syntax {syntax!r}; expected 'auto', 'lark' or 'gbnf'")
    info = _as_tokenizer_info(tokenizer)
    text = grammar

    def parse() -> Grammar:
        if syntax == "gbnf":
            from grammarsd.grammar.gbnf import grammar_from_gbnf

            return grammar_from_gbnf(text, start=start or "root")
        from grammarsd.grammar.lark import grammar_from_lark

        return grammar_from_lark(text, start=start or "start")

    return _cached(cache, ("grammar", syntax, start, text, limits, info.fingerprint),
                   lambda: _build(parse(), info, limits, None, parse))


def compile_regex(
    pattern: str,
    tokenizer: Any,
    *,
    limits: CompileLimits | None = None,
    cache: bool = True,
) -> CompiledGrammar:
    """Compile a Python-syntax regular expression; the whole output must match it."""
    from grammarsd.grammar.regex import grammar_from_regex

    info = _as_tokenizer_info(tokenizer)

    def parse() -> Grammar:
        return grammar_from_regex(pattern)

    return _cached(cache, ("regex", pattern, limits, info.fingerprint),
                   lambda: _build(parse(), info, limits, None, parse))


def compile_json_schema(
    schema: Any,
    tokenizer: Any,
    *,
    registry: Any = None,
    limits: CompileLimits | None = None,
    cache: bool = True,
    **options: Any,
) -> CompiledGrammar:
    """Compile a JSON Schema for ``tokenizer``.

    ``schema`` is a dict, a JSON string, a Pydantic model class or any type Pydantic's
    ``TypeAdapter`` accepts. ``options`` are ``JsonSchemaOptions`` fields (``whitespace``,
    ``max_whitespace``, ``indent``, ``any_order``, ``formats``, ...); unknown names raise
    ``ValueError``. ``registry`` (a ``referencing.Registry``) resolves remote ``$ref``.
    Keywords that cannot be enforced exactly raise ``SchemaUnsupportedError``.
    """
    from grammarsd.grammar.json_schema import (
        JsonSchemaOptions,
        recursion_refused,
        resolve_schema,
        schema_to_grammar,
        whitespace_gaps,
    )

    opts = JsonSchemaOptions.from_dict(options)
    info = _as_tokenizer_info(tokenizer)
    with recursion_refused():  # resolving and the JSON texts walk the schema recursively
        resolved = resolve_schema(schema)
        # the key and what ``grammar`` rebuilds from, key order kept: properties come in
        # schema order, so schemas that differ only in it are different grammars
        text = json.dumps(resolved)
        # a registry is not hashable content: never cached
        key = None if registry is not None or not cache else (
            "json", text, opts, limits, info.fingerprint)

    def lower() -> Grammar:
        return schema_to_grammar(json.loads(text), options=opts, registry=registry)

    def build() -> CompiledGrammar:
        return _build(schema_to_grammar(resolved, options=opts, registry=registry), info, limits,
                      whitespace_gaps(opts), lower)

    return _cached(key is not None, key or (), build)  # (the collector paused either way)


__all__ = [
    "COMPILE_CACHE",
    "CompileCache",
    "CompiledGrammar",
    "compile_grammar",
    "compile_ir",
    "compile_json_schema",
    "compile_regex",
    "token_trie",
]
