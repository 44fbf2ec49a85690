"""The error tree: every failure grammarsd raises on purpose is a ``GrammarsdError``.

Each error carries the data a caller needs to act on it (where: line/column, JSON pointer,
keyword; what was tried) and an optional ``hint``. Unsupported input fails at compile time,
never in silence.

    GrammarsdError
    ├── GrammarError                 a grammar, regex or schema cannot be compiled
    │   ├── GrammarSyntaxError       malformed text (line, column)
    │   │   └── UnsupportedSyntaxError   well-formed but unsupported construct (lookaround, ...)
    │   ├── GrammarTooLargeError     a compile-time limit was exceeded (states, rules, ...)
    │   ├── EmptyLanguageError       the grammar accepts no string at all
    │   └── SchemaError              JSON Schema problems (pointer)
    │       ├── InvalidSchemaError       not a valid schema for its draft
    │       └── SchemaUnsupportedError   a keyword grammarsd cannot enforce exactly (keyword, pointer)
    ├── TokenizerError               tokenizer/model mismatch, unknown token bytes
    ├── ModelLoadError               a model could not be found or fetched (tried)
    ├── MatcherError                 misuse of a matcher (rollback past the start, ...)
    ├── LimitExceededError           a runtime work limit was hit (never a hang)
    └── GenerationError              decoding-time failures
        ├── IncompleteOutputError    max tokens hit before the structure closed (text)
        └── OutputValidationError    the text failed validation afterwards (text, errors)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class GrammarsdError(Exception):
    """Base of every error grammarsd raises on purpose."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message}\nhint: {hint}")


class GrammarError(GrammarsdError):
    """A grammar, regex or schema cannot be compiled."""


class GrammarSyntaxError(GrammarError):
    """Malformed grammar or regex text, with 1-based ``line`` and ``column``."""

    def __init__(
        self,
        message: str,
        *,
        line: int,
        column: int,
        source: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.line = line
        self.column = column
        self.source = source
        where = f"line {line}, column {column}"
        text = f"{message} (at {where})"
        if source is not None:
            lines = source.splitlines() or [""]
            if 1 <= line <= len(lines):
                text += f"\n  {lines[line - 1]}\n  {' ' * (column - 1)}^"
        super().__init__(text, hint=hint)
        self.message = message

    @classmethod
    def at_offset(
        cls, message: str, source: str, offset: int, *, hint: str | None = None
    ) -> GrammarSyntaxError:
        """Build the error from a 0-based character ``offset`` into ``source``."""
        offset = max(0, min(offset, len(source)))
        line = source.count("\n", 0, offset) + 1
        column = offset - (source.rfind("\n", 0, offset) + 1) + 1
        return cls(message, line=line, column=column, source=source, hint=hint)


class UnsupportedSyntaxError(GrammarSyntaxError):
    """Well-formed input using a construct grammarsd cannot compile exactly.

    ``construct`` names it (``"lookahead"``, ``"backreference"``, ``"priority"``, ...).
    """

    def __init__(
        self,
        construct: str,
        *,
        line: int,
        column: int,
        source: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.construct = construct
        super().__init__(
            f"unsupported construct: {construct}",
            line=line,
            column=column,
            source=source,
            hint=hint,
        )

    @classmethod
    def at_offset(
        cls, construct: str, source: str, offset: int, *, hint: str | None = None
    ) -> UnsupportedSyntaxError:
        offset = max(0, min(offset, len(source)))
        line = source.count("\n", 0, offset) + 1
        column = offset - (source.rfind("\n", 0, offset) + 1) + 1
        return cls(construct, line=line, column=column, source=source, hint=hint)


class GrammarTooLargeError(GrammarError):
    """A compile-time limit was exceeded; ``limit`` names it, ``value`` is what was reached."""

    def __init__(self, limit: str, value: int, maximum: int, *, hint: str | None = None) -> None:
        self.limit = limit
        self.value = value
        self.maximum = maximum
        super().__init__(f"grammar too large: {limit} reached {value} (limit {maximum})", hint=hint)


class EmptyLanguageError(GrammarError):
    """The grammar accepts no string at all, so no output could ever satisfy it."""


class SchemaError(GrammarError):
    """A JSON Schema problem located by ``pointer`` (an RFC 6901 JSON pointer)."""

    def __init__(self, message: str, *, pointer: str = "", hint: str | None = None) -> None:
        self.pointer = pointer
        super().__init__(f"{message} (at {pointer or '#'})", hint=hint)
        self.message = message


class InvalidSchemaError(SchemaError):
    """The schema is not valid against its draft's metaschema, or is not JSON."""


class SchemaUnsupportedError(SchemaError):
    """A keyword grammarsd cannot enforce exactly; it is refused rather than ignored."""

    def __init__(
        self, keyword: str, *, pointer: str = "", reason: str = "", hint: str | None = None
    ) -> None:
        self.keyword = keyword
        self.reason = reason
        msg = f"unsupported JSON Schema keyword {keyword!r}"
        if reason:
            msg += f": {reason}"
        super().__init__(msg, pointer=pointer, hint=hint)


class TokenizerError(GrammarsdError):
    """A tokenizer cannot be used as given (mismatch with the model, unknown token bytes)."""


class ModelLoadError(GrammarsdError):
    """A model or tokenizer could not be found or fetched; ``tried`` lists what was attempted."""

    def __init__(self, message: str, *, tried: Sequence[str] = (), hint: str | None = None) -> None:
        self.tried = list(tried)
        if self.tried:
            message += "\ntried:\n" + "\n".join(f"  - {t}" for t in self.tried)
        super().__init__(message, hint=hint)


class MatcherError(GrammarsdError):
    """A matcher was used wrongly (rollback past the start, wrong bitmask shape, ...)."""


class LimitExceededError(GrammarsdError):
    """A runtime work limit was hit; raised instead of hanging."""


class GenerationError(GrammarsdError):
    """Failures while decoding."""


class IncompleteOutputError(GenerationError):
    """Max tokens were hit before the structure closed; ``text`` is the partial output."""

    def __init__(self, text: str, *, max_tokens: int | None = None) -> None:
        self.text = text
        self.max_tokens = max_tokens
        limit = f" ({max_tokens} tokens)" if max_tokens is not None else ""
        super().__init__(
            f"output ended at the token limit{limit} before the structure was complete",
            hint="raise max_tokens; the partial text is in .text",
        )


class OutputValidationError(GenerationError):
    """The generated text failed validation; ``errors`` holds the validator's findings."""

    def __init__(self, text: str, errors: Any) -> None:
        self.text = text
        self.errors = errors
        super().__init__(f"generated output failed validation: {errors}")


__all__ = [
    "EmptyLanguageError",
    "GenerationError",
    "GrammarError",
    "GrammarSyntaxError",
    "GrammarTooLargeError",
    "GrammarsdError",
    "IncompleteOutputError",
    "InvalidSchemaError",
    "LimitExceededError",
    "MatcherError",
    "ModelLoadError",
    "OutputValidationError",
    "SchemaError",
    "SchemaUnsupportedError",
    "TokenizerError",
    "UnsupportedSyntaxError",
]
