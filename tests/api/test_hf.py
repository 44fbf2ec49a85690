"""The transformers LogitsProcessor: outputs obey the grammar under every generate() call pattern.

Oracles: Python's ``re`` / the ``regex`` package (partial matching) for regex grammars, Pydantic for
schemas, the non-assisted greedy output for assisted decoding, and a fresh matcher fed exactly the
row's prefix for the processor's prefix-keyed state.
"""

from __future__ import annotations

import random
import re
from typing import Any, Literal

import pydantic
import pytest
import regex
import torch

import grammarsd as gs
from grammarsd import LogitsProcessor, Regex
from grammarsd.api.models import LoadedModel
from grammarsd.tokenizer import TokenizerInfo

EOS = 2  # the tiny model's (Llama-2) EOS, also used as padding
PATTERN = r"\d{3}-[a-z]{2}"
PROMPTS = ["Hello", "A longer prompt here", "x"]


class Reading(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")  # a finite language: EOS must come

    unit: Literal["C", "F"]
    ok: bool
    n: int = pydantic.Field(ge=0, le=99)


def _left_padded(model: LoadedModel, prompts: list[str]) -> dict[str, torch.Tensor]:
    """Left-padded batch without touching the shared tokenizer's pad token."""
    ids = [model.tokenizer(p).input_ids for p in prompts]
    n = max(map(len, ids))
    return {
        "input_ids": torch.tensor([[EOS] * (n - len(i)) + i for i in ids]),
        "attention_mask": torch.tensor([[0] * (n - len(i)) + [1] * len(i) for i in ids]),
    }


def _generated(model: LoadedModel, spec: Any, prompts: list[str], **kw: Any) -> list[list[int]]:
    """Run ``model.generate`` with a fresh processor; each row's generated ids up to and incl. EOS."""
    batch = _left_padded(model, prompts)
    lp = LogitsProcessor(spec, model.tokenizer)
    out = model.model.generate(**batch, logits_processor=[lp], pad_token_id=EOS, **kw)
    rows = []
    for row in out[:, batch["input_ids"].shape[1] :].tolist():
        rows.append(row[: row.index(EOS) + 1] if EOS in row else row)
    return rows


def _text(model: LoadedModel, ids: list[int]) -> str:
    return str(model.tokenizer.decode([t for t in ids if t != EOS], skip_special_tokens=True))


def _assert_matches_pattern(model: LoadedModel, rows: list[list[int]]) -> None:
    for ids in rows:
        text = _text(model, ids)
        if ids and ids[-1] == EOS:
            assert re.fullmatch(PATTERN, text), (ids, text)
        else:  # cut off by max_new_tokens: still a prefix of the language
            assert regex.fullmatch(PATTERN, text, partial=True), (ids, text)


CALL_PATTERNS = {
    "greedy": {"do_sample": False},
    "sampling": {"do_sample": True, "top_k": 0},
    "beams": {"num_beams": 2, "do_sample": False},
}


@pytest.mark.parametrize("kwargs", CALL_PATTERNS.values(), ids=CALL_PATTERNS.keys())
def test_generate_batch_matches_regex(tiny_model: LoadedModel, kwargs: dict[str, Any]) -> None:
    torch.manual_seed(0)
    rows = _generated(tiny_model, Regex(PATTERN), PROMPTS, max_new_tokens=12, **kwargs)
    assert len(rows) == len(PROMPTS)
    assert any(r and r[-1] == EOS for r in rows)  # the check below is not vacuous
    _assert_matches_pattern(tiny_model, rows)


def test_sampled_schema_outputs_validate(tiny_model: LoadedModel) -> None:
    torch.manual_seed(1)
    compact = gs.compile_json_schema(Reading, tiny_model.tokenizer_info, whitespace="compact")
    rows = _generated(tiny_model, compact, PROMPTS, max_new_tokens=40, do_sample=True, top_k=0)
    for ids in rows:
        assert ids[-1] == EOS, "the longest output is 29 bytes; EOS must come"
        Reading.model_validate_json(_text(tiny_model, ids))


def test_json_schema_dict_spec(tiny_model: LoadedModel) -> None:
    schema = {"type": "array", "items": {"enum": ["red", "green"]}, "minItems": 1, "maxItems": 3}
    (ids,) = _generated(tiny_model, schema, ["Colors:"], max_new_tokens=40, do_sample=False)
    assert ids[-1] == EOS
    value = pydantic.TypeAdapter(list[Literal["red", "green"]]).validate_json(_text(tiny_model, ids))
    assert 1 <= len(value) <= 3


ASSISTED = {
    "assistant_model": lambda m: {"assistant_model": m.model},
    "prompt_lookup": lambda m: {"prompt_lookup_num_tokens": 3},
}
LOOKUP_PROMPT = "123-ab 456-cd 789-"  # n-grams for prompt lookup to propose


@pytest.fixture(scope="module")
def plain_greedy(tiny_model: LoadedModel) -> list[list[int]]:
    return _generated(tiny_model, Regex(PATTERN), [LOOKUP_PROMPT], max_new_tokens=12, do_sample=False)


@pytest.mark.parametrize("make_kwargs", ASSISTED.values(), ids=ASSISTED.keys())
def test_assisted_equals_plain_greedy(
    tiny_model: LoadedModel, plain_greedy: list[list[int]], make_kwargs: Any
) -> None:
    assisted = _generated(
        tiny_model,
        Regex(PATTERN),
        [LOOKUP_PROMPT],
        max_new_tokens=12,
        do_sample=False,
        **make_kwargs(tiny_model),
    )
    assert assisted == plain_greedy
    _assert_matches_pattern(tiny_model, assisted)


def test_assisted_sampling_matches_regex(tiny_model: LoadedModel) -> None:
    torch.manual_seed(3)
    rows = _generated(
        tiny_model,
        Regex(PATTERN),
        ["Hello"],
        max_new_tokens=12,
        do_sample=True,
        assistant_model=tiny_model.model,
    )
    _assert_matches_pattern(tiny_model, rows)


# -- prefix-keyed state, driven directly ----------------------------------------------------------


def _random_walks(compiled: gs.CompiledGrammar, rng: random.Random, n: int) -> list[list[int]]:
    """``n`` random token sequences the grammar allows (ending in EOS when it completes)."""
    walks = []
    for _ in range(n):
        m, ids = compiled.matcher(), []
        while not m.is_terminated() and len(ids) < 20:
            tok = int(rng.choice(m.allowed_token_ids()))
            assert m.accept_token(tok)
            ids.append(tok)
        walks.append(ids)
    return walks


def _fresh_allowed(compiled: gs.CompiledGrammar, prefix: list[int]) -> set[int] | None:
    """Allowed ids after ``prefix`` by a fresh matcher; None if the prefix leaves the language."""
    m = compiled.matcher()
    for t in prefix:
        if not m.accept_token(t):
            return None
    allowed = set(m.allowed_token_ids().tolist())
    return allowed or None


def test_shuffled_and_rolled_back_prefixes(llama2_info: TokenizerInfo) -> None:
    """Random call sequences (lengths up and down, rows shuffled and duplicated, rejected draft
    tokens) give, row by row, the mask a fresh matcher computes for that row's prefix."""
    compiled = gs.compile_regex(r"(\d{2}|[a-c]+)(,[xyz]{1,3}){0,4}", llama2_info)
    rng = random.Random(11)
    walks = _random_walks(compiled, rng, 8)
    lp = LogitsProcessor(compiled, prompt_length=2)
    dead = 0
    for _ in range(40):
        length = rng.randint(0, max(map(len, walks)))
        rows = []
        for _ in range(rng.randint(1, 5)):
            walk = rng.choice([w for w in walks if len(w) >= length])
            row = walk[:length]
            if row and rng.random() < 0.15:  # a rejected draft token: leaves the language
                row[-1] = 29871  # "▁" is never allowed by this grammar
            rows.append(row)
        ids = torch.tensor([[1, 1, *r] for r in rows], dtype=torch.long)
        scores = torch.zeros(len(rows), llama2_info.vocab_size)
        out = lp(ids, scores)
        assert not scores.isinf().any()  # the input is left untouched
        for row, got in zip(rows, out, strict=True):
            allowed = set(torch.nonzero(torch.isfinite(got)).flatten().tolist())
            expected = _fresh_allowed(compiled, row)
            if expected is None:
                dead += 1
                assert allowed == {EOS}
            else:
                assert allowed == expected
    assert dead > 0


def test_padded_logit_width_is_masked(llama2_info: TokenizerInfo) -> None:
    lp = LogitsProcessor(Regex("[0-9]+"), llama2_info)
    out = lp(torch.tensor([[1]]), torch.zeros(1, llama2_info.vocab_size + 64))
    finite = torch.isfinite(out[0])
    assert not finite[llama2_info.vocab_size :].any()
    assert finite[: llama2_info.vocab_size].any()


def test_reuse_needs_reset(llama2_info: TokenizerInfo) -> None:
    lp = LogitsProcessor(Regex("[0-9]+"), llama2_info)
    lp(torch.tensor([[1, 1, 1]]), torch.zeros(1, llama2_info.vocab_size))
    with pytest.raises(gs.MatcherError, match="reset"):
        lp(torch.tensor([[1]]), torch.zeros(1, llama2_info.vocab_size))
    lp.reset()
    lp(torch.tensor([[1]]), torch.zeros(1, llama2_info.vocab_size))


def test_bare_string_spec_is_refused(llama2_info: TokenizerInfo) -> None:
    with pytest.raises(TypeError, match="ambiguous"):
        LogitsProcessor("[0-9]+", llama2_info)


def test_compiled_grammar_vocab_mismatch(llama2_info: TokenizerInfo) -> None:
    compiled = gs.compile_regex("a", llama2_info)
    with pytest.raises(gs.TokenizerError):
        LogitsProcessor(compiled, vocab_size=llama2_info.vocab_size + 1)
