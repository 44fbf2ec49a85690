"""grammarsd: structured output and controlled decoding for language models."""

from grammarsd.errors import (
    GrammarError,
    GrammarsdError,
    GrammarSyntaxError,
    SchemaUnsupportedError,
    TokenizerError,
)

__version__ = "0.1.0"

__all__ = [
    "GrammarError",
    "GrammarSyntaxError",
    "GrammarsdError",
    "SchemaUnsupportedError",
    "TokenizerError",
    "__version__",
]
