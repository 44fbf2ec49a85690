"""Generation with the model on each device there is: CPU always, CUDA where a GPU is present.

Masks are filled on the host and applied where the logits are, so every path that moves a mask
(constrained rows, free-text rows of a padded vocabulary, the ``LogitsProcessor``) runs on each
device. Oracles: ``re``, ``jsonschema``, and the padded columns' raw logits.
"""

from __future__ import annotations

import copy
import re

import jsonschema
import pytest
import torch

import grammarsd as gs
from grammarsd import LogitsProcessor, Regex
from grammarsd.api.models import LoadedModel

DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]
PADDED = 32_064  # the tiny model's 32,000 tokens, padded like a model whose head is wider
SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "integer", "minimum": 0}, "tag": {"enum": ["a", "bc"]}},
    "required": ["id", "tag"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module", params=DEVICES)
def model(request: pytest.FixtureRequest, tiny_model: LoadedModel) -> LoadedModel:
    """The tiny model on the device under test."""
    if request.param == "cpu":
        return tiny_model
    return gs.load_model("tiny", device=request.param)


@pytest.fixture(scope="module")
def padded(model: LoadedModel) -> LoadedModel:
    """The tiny model with an output head ``PADDED`` wide whose extra columns always win.

    The extra logits are +100 (bias), so any step that fails to drop padding ids samples one.
    """
    inner = copy.deepcopy(model.model)
    old = inner.get_output_embeddings()
    head = torch.nn.Linear(old.in_features, PADDED, bias=True, device=old.weight.device)
    with torch.no_grad():
        head.weight.zero_()
        head.weight[: old.out_features] = old.weight
        head.bias.zero_()
        head.bias[old.out_features :] = 100.0
    inner.set_output_embeddings(head)
    inner.config.tie_word_embeddings = False
    return LoadedModel(inner, model.tokenizer, f"{model.name}-padded", 0.0)


@pytest.mark.parametrize("seed", [0, 1])
def test_schema_and_regex_on_device(model: LoadedModel, seed: int) -> None:
    value = gs.generate(model, "x", schema=SCHEMA, temperature=1.0, seed=seed, max_tokens=60,
                        json_options={"whitespace": "compact"})
    jsonschema.validate(value, SCHEMA)
    text = gs.generate(model, "x", regex=r"[a-f]{2}\d{1,3}", temperature=1.0, seed=seed)
    assert re.fullmatch(r"[a-f]{2}\d{1,3}", text)


def test_padded_columns_are_never_sampled(padded: LoadedModel) -> None:
    ids = padded.tokenizer("x", return_tensors="pt").input_ids.to(padded.device)
    with torch.inference_mode():
        raw = padded.model(ids).logits[0, -1]
    assert int(raw.argmax()) >= 32_000  # the control: unmasked, a padding id wins
    assert padded.tokenizer_info.padding_ids == range(32_000, PADDED)
    free = gs.generate_result(padded, "x", temperature=1.0, seed=0, max_tokens=12)
    assert free.token_ids and max(free.token_ids) < 32_000
    value = gs.generate(padded, "x", schema=SCHEMA, temperature=1.0, seed=0, max_tokens=60)
    jsonschema.validate(value, SCHEMA)


def test_logits_processor_on_device(model: LoadedModel) -> None:
    batch = model.tokenizer(["x"], return_tensors="pt").to(model.device)
    processor = LogitsProcessor(Regex(r"\d{2}-[a-z]{2}"), model.tokenizer)
    out = model.model.generate(**batch, logits_processor=[processor], do_sample=False,
                               max_new_tokens=12, pad_token_id=2)
    new = out[0, batch.input_ids.shape[1] :].tolist()
    text = model.tokenizer.decode([t for t in new if t != 2], skip_special_tokens=True)
    assert re.fullmatch(r"\d{2}-[a-z]{2}", text), (new, text)
