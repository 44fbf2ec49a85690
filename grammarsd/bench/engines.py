"""Engine adapters for MaskBench: grammarsd and its peers behind one small interface.

An :class:`Engine` is set up once per worker process for one Hugging Face tokenizer (building its own
tokenizer index is part of that set-up) and then compiles schemas; a compiled schema gives a
:class:`EngineMatcher` that writes token masks into one caller-owned ``int32[1, ceil(V / 32)]``
buffer (bit ``t`` set = token ``t`` allowed), accepts tokens and resets.

Engines and the settings used (each is chosen so that ``json.dumps(data)`` output, with its default
``", "`` and ``": "`` separators, is in the language of a faithful engine):

``grammarsd``
    ``compile_json_schema(schema, info)`` with default options (flexible whitespace, properties in
    schema order).
``grammarsd-any-order``
    The same with ``any_order=True`` (properties in any order, each at most once).
``xgrammar``
    ``GrammarCompiler(max_threads=1).compile_json_schema(schema, any_whitespace=True,
    strict_mode=False)``: flexible whitespace and non-strict mode, i.e. extra properties and items
    are allowed where the schema allows them (the spec-compliant setting, as MaskBench's README).
``llguidance``
    ``LLMatcher(hf.from_tokenizer(tok), grammar_from_json_schema(schema))`` with default options
    (flexible whitespace, ``lenient`` off: unknown keywords are errors).
``outlines-core``
    ``Index(build_regex_from_schema(schema), Vocabulary(eos, token bytes))`` with the default
    whitespace pattern ``[ ]?`` (one optional space, which ``json.dumps`` output fits); the
    vocabulary's bytes are grammarsd's exact token bytes (the hub-only ``from_pretrained`` is not
    available offline).

A custom engine can be named as ``"module:attribute"``, where the attribute is an :class:`Engine`
subclass; the runner imports it inside its worker processes.

Every engine uses the same single EOS id (the tokenizer's ``eos_token_id``) and the same vocabulary
width ``V = len(tokenizer)``.
"""

from __future__ import annotations

import importlib
import json
from abc import ABC, abstractmethod
from importlib.metadata import PackageNotFoundError, version
from typing import Any, ClassVar

import numpy as np

from grammarsd.errors import EmptyLanguageError, GrammarsdError


class EngineMatcher(ABC):
    """One matcher of one compiled schema, bound to a caller-owned bitmask buffer at creation."""

    @abstractmethod
    def fill(self) -> None:
        """Write the mask of the current state into the bound ``int32[1, W]`` buffer."""

    @abstractmethod
    def accept(self, token_id: int) -> bool:
        """Advance by one token; False when the engine refuses it."""

    @abstractmethod
    def reset(self) -> None:
        """Back to the empty prefix."""


class Engine(ABC):
    """A constrained-decoding engine set up for one tokenizer.

    Subclasses set :attr:`name`, :attr:`package` (the distribution whose version is reported) and
    :attr:`refusals` (exception types that mean "this schema is not supported": they are counted
    as compile errors; any other exception while compiling counts as an engine error) and, for
    engines that detect unsatisfiable schemas, :attr:`empty_language` (exception types that mean
    "no instance is valid"; checked before :attr:`refusals`).
    """

    name: ClassVar[str]
    package: ClassVar[str]
    refusals: ClassVar[tuple[type[BaseException], ...]] = (Exception,)
    empty_language: ClassVar[tuple[type[BaseException], ...]] = ()
    # (schema, text) pairs run at warm-up after the shared ones (``maskbench.WARMUP_CASES``): what
    # else this engine compiles lazily, so that it is not timed inside a schema's run
    warmup_cases: ClassVar[tuple[tuple[Any, str], ...]] = ()

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.vocab_size: int = len(tokenizer)
        self.eos_id: int = int(tokenizer.eos_token_id)

    @classmethod
    def version(cls) -> str:
        """The installed version of :attr:`package` (``"unknown"`` when not installed as one)."""
        try:
            return version(cls.package)
        except PackageNotFoundError:
            return "unknown"

    @abstractmethod
    def compile(self, schema: Any) -> Any:
        """Compile a JSON Schema (a dict or bool); raise one of :attr:`refusals` to refuse it."""

    @abstractmethod
    def matcher(self, compiled: Any, bitmask: np.ndarray) -> EngineMatcher:
        """A fresh matcher of ``compiled`` writing its masks into ``bitmask`` (``int32[1, W]``)."""


class EngineConstraint:
    """A schema compiled by any engine, as a constraint of grammarsd's decode loop
    (``grammarsd.decoding.loop.Constraint``): the engine writes each mask into its own buffer and
    the loop's bitmask row receives a copy (zero past the engine's vocabulary). The output is
    complete when the engine allows EOS."""

    def __init__(self, engine: Engine, compiled: Any) -> None:
        self.engine = engine
        self.compiled = compiled

    def matcher(self) -> _LoopMatcher:
        return _LoopMatcher(self.engine, self.compiled)


class _LoopMatcher:
    def __init__(self, engine: Engine, compiled: Any) -> None:
        import torch

        self._buf = np.zeros((1, (engine.vocab_size + 31) // 32), dtype=np.int32)
        self._words = torch.from_numpy(self._buf[0])  # shares memory with the buffer
        self._m = engine.matcher(compiled, self._buf)
        self._eos = engine.eos_id

    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0) -> None:
        self._m.fill()
        n = self._buf.shape[1]
        bitmask[index, :n] = self._words
        bitmask[index, n:] = 0

    def accept_token(self, token_id: int) -> bool:
        if token_id == self._eos:  # EOS ends the row; engines differ on whether it is consumed
            return self.is_accepting()
        return self._m.accept(token_id)

    def is_accepting(self) -> bool:
        return bool((int(self._buf[0, self._eos >> 5]) >> (self._eos & 31)) & 1)


# -- grammarsd ----------------------------------------------------------------------------------


class _GrammarsdMatcher(EngineMatcher):
    def __init__(self, compiled: Any, bitmask: np.ndarray) -> None:
        self._m = compiled.matcher()
        self._bitmask = bitmask

    def fill(self) -> None:
        self._m.fill_next_token_bitmask(self._bitmask)

    def accept(self, token_id: int) -> bool:
        return bool(self._m.accept_token(token_id))

    def reset(self) -> None:
        self._m.reset()


class GrammarsdEngine(Engine):
    """grammarsd with default JSON Schema options."""

    name = "grammarsd"
    package = "grammarsd"
    refusals = (GrammarsdError,)
    empty_language = (EmptyLanguageError,)
    options: ClassVar[dict[str, Any]] = {}
    # a bare string (no whitespace gaps: the plain fill kernel) whose pattern meets a maxLength
    # the matcher counts (capped terminals) and a product of automata (pattern and length); an
    # object inside an object, whose member terminals are glued from their values' cached DFAs
    warmup_cases: ClassVar[tuple[tuple[Any, str], ...]] = (
        ({"type": "string", "pattern": "^[a-z]+(-[a-z]+)*$", "maxLength": 5000}, '"warm-up"'),
        ({"type": "object", "properties": {"inner": {
            "type": "object", "properties": {"a": {}, "b": {"type": "boolean"}},
            "required": ["a", "b"], "additionalProperties": False}}},
         '{"inner": {"a": [1], "b": true}}'),
    )

    def __init__(self, tokenizer: Any) -> None:
        import grammarsd as gs

        super().__init__(tokenizer)
        self._gs = gs
        self.info = gs.TokenizerInfo.from_huggingface(tokenizer)
        if self.info.vocab_size != self.vocab_size:
            raise ValueError(
                f"grammarsd vocab {self.info.vocab_size} != tokenizer {self.vocab_size}"
            )

    def compile(self, schema: Any) -> Any:
        return self._gs.compile_json_schema(schema, self.info, **self.options)

    def matcher(self, compiled: Any, bitmask: np.ndarray) -> EngineMatcher:
        return _GrammarsdMatcher(compiled, bitmask)


class GrammarsdAnyOrderEngine(GrammarsdEngine):
    """grammarsd with ``any_order=True``."""

    name = "grammarsd-any-order"
    options: ClassVar[dict[str, Any]] = {"any_order": True}


# -- xgrammar -----------------------------------------------------------------------------------


class _XgrammarMatcher(EngineMatcher):
    def __init__(self, xgr: Any, compiled: Any, bitmask: np.ndarray) -> None:
        import torch

        self._m = xgr.GrammarMatcher(compiled)
        self._tensor = torch.from_numpy(bitmask)  # shares memory with the caller's buffer

    def fill(self) -> None:
        self._m.fill_next_token_bitmask(self._tensor)

    def accept(self, token_id: int) -> bool:
        return bool(self._m.accept_token(token_id))

    def reset(self) -> None:
        self._m.reset()


class XgrammarEngine(Engine):
    """xgrammar, flexible whitespace, non-strict (spec-compliant) mode, one compiler thread."""

    name = "xgrammar"
    package = "xgrammar"

    def __init__(self, tokenizer: Any) -> None:
        import xgrammar as xgr

        super().__init__(tokenizer)
        self._xgr = xgr
        info = xgr.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=self.vocab_size, stop_token_ids=[self.eos_id]
        )
        self._compiler = xgr.GrammarCompiler(info, max_threads=1)

    def compile(self, schema: Any) -> Any:
        return self._compiler.compile_json_schema(
            json.dumps(schema), any_whitespace=True, strict_mode=False
        )

    def matcher(self, compiled: Any, bitmask: np.ndarray) -> EngineMatcher:
        return _XgrammarMatcher(self._xgr, compiled, bitmask)


# -- llguidance ---------------------------------------------------------------------------------


class _LlguidanceMatcher(EngineMatcher):
    def __init__(self, pristine: Any, bitmask: np.ndarray) -> None:
        from llguidance.numpy import fill_next_token_bitmask

        self._pristine = pristine  # never advanced: a matcher in an error state cannot be reset
        self._m = pristine.deep_copy()
        self._fill = fill_next_token_bitmask
        self._bitmask = bitmask

    def fill(self) -> None:
        self._fill(self._m, self._bitmask, 0)

    def accept(self, token_id: int) -> bool:
        return bool(self._m.consume_token(token_id))

    def reset(self) -> None:
        if self._m.is_error():
            self._m = self._pristine.deep_copy()
        else:
            self._m.reset()


class LlguidanceRefusal(Exception):
    """llguidance put its matcher in an error state while building the grammar."""


class LlguidanceEngine(Engine):
    """llguidance with default JSON options; a matcher born in an error state is a refusal."""

    name = "llguidance"
    package = "llguidance"

    def __init__(self, tokenizer: Any) -> None:
        import llguidance
        import llguidance.hf

        super().__init__(tokenizer)
        self._llg = llguidance
        self._tok = llguidance.hf.from_tokenizer(
            tokenizer, n_vocab=self.vocab_size, eos_token=self.eos_id
        )

    def compile(self, schema: Any) -> Any:
        grammar = self._llg.LLMatcher.grammar_from_json_schema(json.dumps(schema))
        # Building the matcher is llguidance's whole compile step; it is the "compiled" object and
        # matchers are deep copies of it.
        m = self._llg.LLMatcher(self._tok, grammar, log_level=0)
        if m.is_error():
            raise LlguidanceRefusal(m.get_error())
        return m

    def matcher(self, compiled: Any, bitmask: np.ndarray) -> EngineMatcher:
        return _LlguidanceMatcher(compiled, bitmask)


# -- outlines-core ------------------------------------------------------------------------------


class _OutlinesMatcher(EngineMatcher):
    def __init__(self, guide: Any, bitmask: np.ndarray) -> None:
        self._g = guide
        self._bitmask = bitmask
        self._ptr = bitmask.ctypes.data
        self._numel = bitmask.size

    def fill(self) -> None:
        self._g.write_mask_into(self._ptr, self._numel, 4)

    def accept(self, token_id: int) -> bool:
        try:
            self._g.advance(token_id, return_tokens=False)
        except ValueError:  # "No next state found": the token is not allowed
            return False
        return True

    def reset(self) -> None:
        self._g.reset()


class OutlinesCoreEngine(Engine):
    """outlines-core: schema -> regex -> token index, default whitespace pattern."""

    name = "outlines-core"
    package = "outlines_core"

    def __init__(self, tokenizer: Any) -> None:
        import outlines_core

        from grammarsd.tokenizer.info import TokenizerInfo

        super().__init__(tokenizer)
        self._oc = outlines_core
        info = TokenizerInfo.from_huggingface(tokenizer)
        ids_of: dict[bytes, list[int]] = {}
        for i, data in enumerate(info.token_bytes):
            if data and i != self.eos_id:
                ids_of.setdefault(data, []).append(i)
        self._vocab = outlines_core.Vocabulary(self.eos_id, ids_of)

    def compile(self, schema: Any) -> Any:
        regex = self._oc.json_schema.build_regex_from_schema(json.dumps(schema))
        return self._oc.Index(regex, self._vocab)

    def matcher(self, compiled: Any, bitmask: np.ndarray) -> EngineMatcher:
        return _OutlinesMatcher(self._oc.Guide(compiled), bitmask)


# -- registry -----------------------------------------------------------------------------------

ENGINES: dict[str, type[Engine]] = {
    e.name: e
    for e in (
        GrammarsdEngine,
        GrammarsdAnyOrderEngine,
        XgrammarEngine,
        LlguidanceEngine,
        OutlinesCoreEngine,
    )
}
"""Built-in engines by name, in report order (grammarsd first: the ratios are to it)."""


def engine_class(spec: str) -> type[Engine]:
    """The engine class named by ``spec``: a key of :data:`ENGINES` or ``"module:attribute"``.

    Raises
    ------
    ValueError
        If ``spec`` names no engine (the message lists the built-in names).
    """
    if spec in ENGINES:
        return ENGINES[spec]
    if ":" in spec:
        module, _, attr = spec.partition(":")
        cls: Any = getattr(importlib.import_module(module), attr, None)
        if isinstance(cls, type) and issubclass(cls, Engine):
            return cls
        raise ValueError(f"{spec!r} is not an Engine subclass")
    raise ValueError(f"unknown engine {spec!r}; built-in engines: {', '.join(ENGINES)}")


__all__ = [
    "ENGINES",
    "Engine",
    "EngineConstraint",
    "EngineMatcher",
    "GrammarsdAnyOrderEngine",
    "GrammarsdEngine",
    "LlguidanceEngine",
    "OutlinesCoreEngine",
    "XgrammarEngine",
    "engine_class",
]
