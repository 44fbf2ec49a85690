"""The ``grammarsd`` CLI: ``demo`` on the tiny model, and the same entry point via ``-m``."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from grammarsd.api.cli import main
from grammarsd.api.models import LoadedModel


def test_demo_tiny(tiny_model: LoadedModel, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--model", "tiny", "--prompt", "héllo 🎉", "--max-new-tokens", "3"]) == 0
    out = capsys.readouterr().out
    # the prompt's tokens with their exact bytes, checked against the tokenizer's own pieces
    ids = tiny_model.tokenizer.encode("héllo 🎉")
    assert f"{len(ids)} tokens" in out
    assert "b'\\xf0'" in out and "b'\\xc3\\xa9l'" in out
    # transformers < 5.23 adds no BOS for this GGUF (it declares no add_bos_token)
    assert ("'<s>'" in out) == (ids[0] == tiny_model.tokenizer.bos_token_id)
    assert re.search(r"\[\d+ tokens in [\d.]+ s: [\d.]+ tokens/s", out)


def test_bad_arguments_exit_with_usage() -> None:
    with pytest.raises(SystemExit) as err:
        main(["demo", "--max-new-tokens", "many"])
    assert err.value.code == 2


def test_model_errors_are_reported(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--model", "/no/such/model"]) == 1
    assert "could not load model" in capsys.readouterr().err


def test_python_dash_m_entry_point() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "grammarsd", "--help"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0 and "demo" in proc.stdout


@pytest.mark.model
def test_demo_default_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--prompt", "Say hi.", "--max-new-tokens", "4"]) == 0
    out = capsys.readouterr().out
    assert "'<|im_start|>'" in out and "b'user'" in out
