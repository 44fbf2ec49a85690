"""Tokenizer layer: exact bytes of every token id, EOS ids and the model's logit width.

``info.py`` owns :class:`TokenizerInfo`; ``decode.py`` owns the piece -> bytes rules for
byte-level BPE, SentencePiece and added tokens. Nothing here imports ``transformers`` or
``torch``: Hugging Face tokenizers are read by duck typing.
"""

from grammarsd.tokenizer.decode import PrefixRule, VocabFormat, VocabKind
from grammarsd.tokenizer.info import TokenizerInfo

__all__ = ["PrefixRule", "TokenizerInfo", "VocabFormat", "VocabKind"]
