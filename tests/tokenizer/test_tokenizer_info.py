"""TokenizerInfo invariants: logit-width padding, size mismatch, EOS, added tokens, pickling."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from transformers import GenerationConfig

from grammarsd.api.models import load_tokenizer
from grammarsd.errors import TokenizerError
from grammarsd.testing import hf_tokenizer, tokenizer_info
from grammarsd.tokenizer import TokenizerInfo


def test_known_sizes_and_kinds() -> None:
    expected = {
        "llama3": (128256, "byte_level", (128001,)),
        "smollm2": (49152, "byte_level", (2,)),
        "llama2": (32000, "sentencepiece", (2,)),
    }
    for name, (size, kind, eos) in expected.items():
        info = tokenizer_info(name)
        assert (info.vocab_size, info.tokenizer_size, info.kind, info.eos_ids) == (
            size,
            size,
            kind,
            eos,
        )


def test_llama2_byte_fallback_and_marker(llama2_info: TokenizerInfo) -> None:
    tok = hf_tokenizer("llama2")
    assert llama2_info.token_bytes[tok.convert_tokens_to_ids("<0x0A>")] == b"\n"
    assert llama2_info.token_bytes[tok.convert_tokens_to_ids("<0xE4>")] == b"\xe4"
    assert llama2_info.token_bytes[tok.convert_tokens_to_ids("\u2581hello")] == b" hello"
    assert llama2_info.special_ids == (0, 1, 2)


def test_padding_ids_past_the_tokenizer() -> None:
    tok = hf_tokenizer("llama2")
    info = TokenizerInfo.from_huggingface(tok, vocab_size=32064)
    assert info.vocab_size == 32064 and info.tokenizer_size == 32000
    assert len(info.token_bytes) == 32064
    assert info.padding_ids == range(32000, 32064)
    assert all(info.token_bytes[i] == b"" for i in info.padding_ids)
    assert info.token_bytes[:32000] == tokenizer_info("llama2").token_bytes
    assert info.fingerprint != tokenizer_info("llama2").fingerprint


def test_tokenizer_larger_than_logit_width_is_refused() -> None:
    with pytest.raises(TokenizerError, match=r"49152 tokens.*vocab_size \(logit width\) is 49151"):
        TokenizerInfo.from_huggingface(hf_tokenizer("smollm2"), vocab_size=49151)


def test_eos_from_generation_config_list() -> None:
    tok = hf_tokenizer("llama3")
    eot = tok.convert_tokens_to_ids("<|eot_id|>")
    config = GenerationConfig(eos_token_id=[128001, eot])
    info = TokenizerInfo.from_huggingface(tok, generation_config=config)
    assert info.eos_ids == (128001, eot)
    as_int = TokenizerInfo.from_huggingface(tok, generation_config={"eos_token_id": eot})
    assert as_int.eos_ids == (128001, eot)
    explicit = TokenizerInfo.from_huggingface(tok, eos_ids=[eot], generation_config=config)
    assert explicit.eos_ids == (eot,)
    assert len({info.fingerprint, explicit.fingerprint}) == 2


def test_eos_out_of_range_is_refused() -> None:
    with pytest.raises(TokenizerError, match="out of range"):
        TokenizerInfo.from_huggingface(hf_tokenizer("llama2"), eos_ids=[32000])


def test_added_tokens() -> None:
    tok = load_tokenizer("llama2")  # a private copy: adding tokens mutates it
    tok.add_tokens(["<tool_call>", "  éé"])
    tok.add_special_tokens({"additional_special_tokens": ["<|mine|>"]})
    info = TokenizerInfo.from_huggingface(tok)
    assert info.tokenizer_size == 32003 == len(tok)
    ids = tok.convert_tokens_to_ids(["<tool_call>", "  éé", "<|mine|>"])
    assert [info.token_bytes[i] for i in ids] == [b"<tool_call>", "  éé".encode(), b""]
    assert ids[2] in info.special_ids and ids[0] not in info.special_ids
    # the oracle: encoding text through the added tokens still round-trips byte for byte
    text = "call <tool_call> now  éé!"
    assert info.decode_bytes(tok.encode(text, add_special_tokens=False)) == b" " + text.encode()


def test_pickle_round_trip(smollm2_info: TokenizerInfo) -> None:
    back = pickle.loads(pickle.dumps(smollm2_info))
    assert back == smollm2_info and hash(back) == hash(smollm2_info)
    assert back.token_bytes == smollm2_info.token_bytes
    assert back.eos_ids == smollm2_info.eos_ids and back.prefix_rule == smollm2_info.prefix_rule
    np.testing.assert_array_equal(back.token_indptr, smollm2_info.token_indptr)
    np.testing.assert_array_equal(back.token_data, smollm2_info.token_data)


def test_flat_arrays_match_token_bytes(llama2_info: TokenizerInfo) -> None:
    indptr, data = llama2_info.token_indptr, llama2_info.token_data
    assert indptr.shape == (llama2_info.vocab_size + 1,) and indptr[0] == 0
    for i in (0, 3, 13, 29871, 31999):
        assert bytes(data[indptr[i] : indptr[i + 1]]) == llama2_info.token_bytes[i]
    assert not indptr.flags.writeable and not data.flags.writeable


def test_from_token_bytes_toy_vocabulary() -> None:
    info = TokenizerInfo.from_token_bytes(
        [b"a", b"b", b"ab", b"<eos>"], eos_ids=[3], special_ids=[3], vocab_size=8
    )
    assert info.token_bytes == [b"a", b"b", b"ab", b""] + [b""] * 4
    assert (info.kind, info.tokenizer_size, info.prefix_space) == ("raw", 4, False)
    assert info.decode_bytes([0, 2, 1, 3, 5]) == b"aabb"
    with pytest.raises(TokenizerError, match="vocab_size"):
        TokenizerInfo.from_token_bytes([b"a", b"b"], eos_ids=[0], vocab_size=1)
    with pytest.raises(TokenizerError, match="sorted and unique"):
        TokenizerInfo(
            vocab_size=1,
            token_bytes=[b"a"],
            eos_ids=(0, 0),
            special_ids=(),
            tokenizer_size=1,
            kind="raw",
            prefix_rule="never",
        )


def test_not_a_fast_tokenizer_is_refused() -> None:
    with pytest.raises(TokenizerError, match="not a tokenizers-backed"):
        TokenizerInfo.from_huggingface(object())


def test_llama3_builds() -> None:
    """The 128k vocabulary (its cost, ~0.15 s, is in the MaskBench report's set-up column)."""
    tok = hf_tokenizer("llama3")
    assert TokenizerInfo.from_huggingface(tok).vocab_size == len(tok)
