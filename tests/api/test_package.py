"""The top-level package: every public name resolves, and importing it stays light."""

from __future__ import annotations

import subprocess
import sys

import pytest

import grammarsd


def test_every_public_name_resolves() -> None:
    missing = [name for name in grammarsd.__all__ if not hasattr(grammarsd, name)]
    assert missing == []
    assert set(grammarsd.__all__) <= set(dir(grammarsd))


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        grammarsd.no_such_name  # type: ignore[attr-defined]  # noqa: B018


def test_import_does_not_load_torch_or_transformers() -> None:
    code = (
        "import sys, grammarsd\n"
        "heavy = sorted(m for m in ('torch', 'transformers') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
        "grammarsd.generate\n"  # first use loads them
        "assert 'torch' in sys.modules\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
