"""generate / generate_result / stream / generate_batch: structured generation for users.

This module owns the user-facing side of decoding: turning a prompt (text or chat messages) into
token ids, turning an output spec (``schema=``, ``regex=``, ``grammar=``, ``choices=``) into a
cached ``CompiledGrammar`` plus a parser/validator for the result, and turning finished rows of
``grammarsd.decoding.loop.Decoding`` into values, ``Result`` objects or streamed text.

Options (keywords of every function here; unknown keys raise ``TypeError``)
--------------------------------------------------------------------------
schema : a Pydantic model (or any type ``pydantic.TypeAdapter`` accepts) -> a validated instance;
    a JSON Schema dict -> the parsed, ``jsonschema``-validated value.
regex : a Python regex the whole output must match -> the string.
grammar : Lark or GBNF text, a bundled grammar name (``"json.lark"``) or a ``Grammar`` -> the string.
choices : a list of strings, one of which is the output -> the string.
    (At most one of the four; none gives free text.)
tokenizer : the Hugging Face tokenizer, required when ``model`` is a bare transformers model.
max_tokens : token budget (forced tokens and EOS count). Default 256.
temperature, top_k, top_p, min_p, repetition_penalty, seed : see ``SamplingParams``; temperature
    0 (the default) is greedy.
stop : a string or strings that end the output (cut before it).
chat_template : apply the tokenizer's chat template (``add_generation_prompt=True``) when it has
    one. Default True.
strict : for schemas, read a missing ``additionalProperties`` as ``false`` in every object that
    declares ``properties`` (see :func:`strict_schema`). Default True; False is spec-faithful.
json_options : ``JsonSchemaOptions`` fields for schemas (``{"whitespace": "compact"}``, ...).
batch_forced : feed runs of forced tokens in one forward pass. Default True.

Errors: ``IncompleteOutputError`` when the output ended (``max_tokens`` or a stop string) before
the structure was complete, ``OutputValidationError`` when the parsed output fails validation,
compiler errors (``GrammarSyntaxError``, ``SchemaUnsupportedError``, ...) unchanged.
"""

from __future__ import annotations

import codecs
import re
import weakref
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from typing_extensions import Unpack

from grammarsd.api.models import LoadedModel
from grammarsd.api.result import GenerationStats, Result
from grammarsd.compiler.compiled import (
    CompiledGrammar,
    compile_grammar,
    compile_ir,
    compile_json_schema,
    compile_regex,
)
from grammarsd.decoding.loop import DecodeConfig, DecodeStats, Decoding, Row
from grammarsd.decoding.samplers import SamplingParams
from grammarsd.errors import IncompleteOutputError, OutputValidationError
from grammarsd.grammar import ir
from grammarsd.tokenizer.info import TokenizerInfo

Prompt = str | Sequence[Mapping[str, str]]
"""A user message, or chat messages ``[{"role": ..., "content": ...}, ...]``."""


class GenerateOptions(TypedDict, total=False):
    """The keyword options of ``generate`` & co. (documented in the module docstring)."""

    schema: Any
    regex: str
    grammar: str | ir.Grammar
    choices: Sequence[str]
    tokenizer: Any
    max_tokens: int
    temperature: float
    top_k: int | None
    top_p: float | None
    min_p: float | None
    repetition_penalty: float | None
    seed: int | None
    stop: str | Sequence[str] | None
    chat_template: bool
    strict: bool
    json_options: Mapping[str, Any]
    batch_forced: bool


_SPEC_KEYS = ("schema", "regex", "grammar", "choices")


# -- output specs -------------------------------------------------------------------


@dataclass(frozen=True)
class OutputSpec:
    """What the output must be and how its text becomes a value.

    ``compiled`` is None for free text; ``parse(text)`` returns the value or raises
    ``OutputValidationError``.
    """

    compiled: CompiledGrammar | None
    parse: Callable[[str], Any]


def strict_schema(schema: Any) -> Any:
    """A copy of JSON Schema ``schema`` where objects declaring ``properties`` are closed.

    Every subschema (under ``properties``, ``items``, ``$defs``, ``anyOf``, ...) that has
    ``properties`` but no ``additionalProperties``, ``unevaluatedProperties`` or
    ``patternProperties`` gets ``"additionalProperties": false``, which is what users of Pydantic
    models expect (only the declared fields). Direct branches of ``allOf`` are left open, since
    closing each branch would reject the properties the other branches declare; their nested
    subschemas are still closed. Explicit ``additionalProperties`` is never changed.
    """
    return _strict(schema, in_all_of=False)


_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "prefixItems")
_SCHEMA_SINGLE = (
    "items", "additionalProperties", "unevaluatedProperties", "not", "if", "then", "else",
    "contains", "propertyNames", "additionalItems", "unevaluatedItems",
)  # fmt: skip


def _strict(node: Any, *, in_all_of: bool) -> Any:
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: _strict(v, in_all_of=False) for k, v in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_strict(v, in_all_of=False) for v in value]
        elif key == "allOf" and isinstance(value, list):
            out[key] = [_strict(v, in_all_of=True) for v in value]
        elif key in _SCHEMA_SINGLE:
            out[key] = (
                [_strict(v, in_all_of=False) for v in value]
                if isinstance(value, list)
                else _strict(value, in_all_of=False)
            )
        else:
            out[key] = value
    open_keys = ("additionalProperties", "unevaluatedProperties", "patternProperties")
    if "properties" in out and not in_all_of and not any(k in out for k in open_keys):
        out["additionalProperties"] = False
    return out


def output_spec(
    info: TokenizerInfo,
    *,
    schema: Any = None,
    regex: str | None = None,
    grammar: str | ir.Grammar | None = None,
    choices: Sequence[str] | None = None,
    strict: bool = True,
    json_options: Mapping[str, Any] | None = None,
) -> OutputSpec:
    """Compile the output spec (the ``compile_*`` functions cache by content and tokenizer).

    At most one of ``schema``, ``regex``, ``grammar``, ``choices`` may be given (ValueError).
    """
    values = (schema, regex, grammar, choices)
    given = [k for k, v in zip(_SPEC_KEYS, values, strict=True) if v is not None]
    if len(given) > 1:
        raise ValueError(f"give at most one of schema=, regex=, grammar=, choices= (got {given})")
    if schema is not None:
        return _schema_spec(info, schema, strict, dict(json_options or {}))
    if regex is not None:
        compiled = compile_regex(regex, info)
        pattern = re.compile(regex)
        return OutputSpec(compiled, lambda text: _check(text, pattern.fullmatch(text) is not None,
                                                        f"does not match {regex!r}"))
    if grammar is not None:
        return OutputSpec(_grammar(info, grammar), lambda text: text)
    if choices is not None:
        options = tuple(choices)
        if not options or not all(isinstance(c, str) for c in options):
            raise ValueError("choices must be a non-empty list of strings")
        expr = ir.choice(*(ir.lit(c) for c in options))
        compiled = compile_ir(ir.Grammar.single(expr), info)
        return OutputSpec(compiled, lambda text: _check(text, text in options, "not a choice"))
    return OutputSpec(None, lambda text: text)


def _check(text: str, ok: bool, why: str) -> str:
    if not ok:
        raise OutputValidationError(text, [why])
    return text


def _grammar(info: TokenizerInfo, grammar: str | ir.Grammar) -> CompiledGrammar:
    if isinstance(grammar, ir.Grammar):
        return compile_ir(grammar, info)
    from grammarsd.grammar.bundled import list_bundled, load_bundled

    if grammar in list_bundled():
        return compile_ir(load_bundled(grammar), info)
    return compile_grammar(grammar, info)


def _schema_spec(
    info: TokenizerInfo, schema: Any, strict: bool, json_options: dict[str, Any]
) -> OutputSpec:
    from grammarsd.grammar.pydantic import pydantic_schema
    from grammarsd.grammar.validate import validate_json

    raw = schema if isinstance(schema, dict) else pydantic_schema(schema)
    compiled = compile_json_schema(strict_schema(raw) if strict else raw, info, **json_options)
    # the output is validated against what the user gave (not the strict variant)
    return OutputSpec(compiled, lambda text: validate_json(text, schema))


# -- models and prompts ---------------------------------------------------------------

_WRAPPED: weakref.WeakKeyDictionary[Any, LoadedModel] = weakref.WeakKeyDictionary()


def as_loaded_model(model: Any, tokenizer: Any = None) -> LoadedModel:
    """``model`` if it is a ``LoadedModel``, else a (cached) wrapper of a transformers model.

    Raises ``TypeError`` when a transformers model comes without ``tokenizer``.
    """
    if isinstance(model, LoadedModel):
        if tokenizer is not None and tokenizer is not model.tokenizer:
            raise ValueError("tokenizer= differs from the LoadedModel's own tokenizer")
        return model
    if tokenizer is None:
        raise TypeError("pass tokenizer= along with a transformers model (or use load_model)")
    cached = _WRAPPED.get(model)
    if cached is None or cached.tokenizer is not tokenizer:
        name = str(getattr(model, "name_or_path", type(model).__name__))
        cached = LoadedModel(model.eval(), tokenizer, name, 0.0)
        _WRAPPED[model] = cached
    return cached


def prompt_ids(tokenizer: Any, prompt: Prompt, *, chat_template: bool = True) -> list[int]:
    """Token ids of ``prompt``: through the chat template (with the generation prompt) when
    ``chat_template`` and the tokenizer has one, else the plain encoding with special tokens.

    Raises ``ValueError`` for chat messages that cannot go through a chat template.
    """
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if isinstance(prompt, str):
        if not (chat_template and has_template):
            return list(tokenizer.encode(prompt, add_special_tokens=True))
        messages: list[Mapping[str, str]] = [{"role": "user", "content": prompt}]
    else:
        if not (chat_template and has_template):
            raise ValueError("chat messages need chat_template=True and a tokenizer with one")
        messages = list(prompt)
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return list(tokenizer.encode(text, add_special_tokens=False))


# -- requests -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Request:
    """Everything one call needs, resolved from its options."""

    lm: LoadedModel
    spec: OutputSpec
    params: SamplingParams
    config: DecodeConfig
    chat_template: bool

    @classmethod
    def from_options(cls, model: Any, options: Mapping[str, Any]) -> _Request:
        unknown = sorted(set(options) - set(GenerateOptions.__annotations__))
        if unknown:
            raise TypeError(f"unknown generate option(s): {', '.join(unknown)}")
        opts = dict(options)
        lm = as_loaded_model(model, opts.pop("tokenizer", None))
        spec = output_spec(
            lm.tokenizer_info,
            strict=opts.pop("strict", True),
            json_options=opts.pop("json_options", None),
            **{k: opts.pop(k) for k in _SPEC_KEYS if k in opts},
        )
        stop = opts.pop("stop", None)
        stops = (stop,) if isinstance(stop, str) else tuple(stop or ())
        config = DecodeConfig(
            max_tokens=opts.pop("max_tokens", 256),
            stop=tuple(s.encode() for s in stops),
            batch_forced=opts.pop("batch_forced", True),
        )
        chat_template = opts.pop("chat_template", True)
        return cls(lm, spec, SamplingParams(**opts), config, chat_template)

    def decoding(self, prompts: Sequence[Prompt]) -> Decoding:
        tok = self.lm.tokenizer
        ids = [prompt_ids(tok, p, chat_template=self.chat_template) for p in prompts]
        info = self.lm.tokenizer_info
        pad = tok.pad_token_id if tok.pad_token_id is not None else (info.eos_ids or (0,))[0]
        return Decoding(
            self.lm.model, info, ids, self.spec.compiled, self.params, self.config, pad_id=pad
        )

    def result(self, row: Row, stats: DecodeStats) -> Result[Any]:
        """The finished ``row`` as a ``Result``; raises if incomplete or invalid."""
        data = row.text_bytes
        text = data.decode("utf-8", errors="replace")
        compiled = self.spec.compiled
        if compiled is not None and not _complete(row, compiled, data):
            raise IncompleteOutputError(
                text, max_tokens=self.config.max_tokens if row.finish == "length" else None
            )
        value = self.spec.parse(text)
        generated = row.generated
        first = row.first_token_at if row.first_token_at is not None else stats.finished_at
        n = len(generated)
        assert row.finish is not None
        return Result(
            value=value,
            text=text,
            token_ids=generated,
            finish_reason=row.finish,
            stats=GenerationStats(
                ttft=first - stats.started_at,
                tpot=(stats.finished_at - first) / (n - 1) if n > 1 else 0.0,
                tokens=n,
                forced_tokens=row.forced,
                mask_seconds=stats.mask_seconds,
                forward_passes=stats.forward_passes,
            ),
        )


def _complete(row: Row, compiled: CompiledGrammar, data: bytes) -> bool:
    """Whether the row's output is a complete string of the grammar."""
    if row.finish in ("eos", "grammar"):
        return True
    if row.finish == "length":
        return row.matcher is not None and row.matcher.is_accepting()
    m = compiled.matcher()  # a stop string cut the output: check what is left
    return m.accept_string(data) and m.is_accepting()


# -- public API -----------------------------------------------------------------------


def generate(model: Any, prompt: Prompt, **options: Unpack[GenerateOptions]) -> Any:
    """Generate one output and return its value (see the module docstring for ``options``).

    Parameters
    ----------
    model : a ``LoadedModel`` (``grammarsd.load_model``) or a transformers causal LM with
        ``tokenizer=``.
    prompt : a user message or chat messages.

    Returns
    -------
    A validated Pydantic instance for ``schema=`` a model, the parsed JSON value for ``schema=`` a
    dict, else the text (which satisfies ``regex=``, ``grammar=`` or ``choices=``).
    """
    return generate_result(model, prompt, **options).value


def generate_result(model: Any, prompt: Prompt, **options: Unpack[GenerateOptions]) -> Result[Any]:
    """Like :func:`generate`, returning the ``Result`` (value, text, token ids, finish, stats)."""
    request = _Request.from_options(model, options)
    decoding = request.decoding([prompt])
    for _ in decoding.steps():
        pass
    return request.result(decoding.rows[0], decoding.stats)


def stream(
    model: Any, prompt: Prompt, **options: Unpack[GenerateOptions]
) -> Generator[str, None, Result[Any]]:
    """Yield the output text as tokens arrive, in pieces that never split a character.

    Pieces are decoded from the accumulated token bytes, emitting only complete UTF-8 characters;
    with ``stop=``, the last ``len(longest stop) - 1`` bytes are held back until they cannot start
    a stop string. The pieces concatenate to ``Result.text``, and the generator's return value
    (``StopIteration.value``) is that ``Result``. ``IncompleteOutputError`` and
    ``OutputValidationError`` are raised after the last piece.
    """
    request = _Request.from_options(model, options)
    decoding = request.decoding([prompt])
    row = decoding.rows[0]
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    hold = max((len(s) - 1 for s in request.config.stop), default=0)
    sent = 0  # bytes of row.output handed to the decoder
    for _ in decoding.steps():
        end = len(row.text_bytes) if row.finish is not None else len(row.output) - hold
        if end > sent:
            piece = decoder.decode(bytes(row.output[sent:end]))
            sent = end
            if piece:
                yield piece
    tail = decoder.decode(b"", final=True)
    if tail:
        yield tail
    return request.result(row, decoding.stats)


def generate_batch(
    model: Any,
    prompts: Sequence[Prompt],
    *,
    return_results: bool = False,
    **options: Unpack[GenerateOptions],
) -> list[Any]:
    """Generate for several prompts in one left-padded batch (one matcher and mask row each).

    Each output equals what :func:`generate` gives for that prompt alone (same seed, same
    options). Returns values, or ``Result`` objects with ``return_results=True``. The first
    failing row raises (``IncompleteOutputError`` / ``OutputValidationError``).
    """
    request = _Request.from_options(model, options)
    if not prompts:
        return []
    decoding = request.decoding(list(prompts))
    for _ in decoding.steps():
        pass
    results = [request.result(row, decoding.stats) for row in decoding.rows]
    return results if return_results else [r.value for r in results]


__all__ = [
    "GenerateOptions",
    "OutputSpec",
    "Prompt",
    "as_loaded_model",
    "generate",
    "generate_batch",
    "generate_result",
    "stream",
    "output_spec",
    "prompt_ids",
    "strict_schema",
]
