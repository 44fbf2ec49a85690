"""``bench/compile_scaling.py`` runs end to end: a row per size and key kind for grammarsd, and an
engine that is not installed (or not known) is reported and skipped, not a traceback."""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "compile_scaling.py"


def _run(monkeypatch: pytest.MonkeyPatch, *args: str) -> None:
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), *args])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(SCRIPT), run_name="__main__")
    assert done.value.code == 0


def test_rows_for_each_size_and_key_kind(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    _run(monkeypatch, "--engines", "grammarsd", "--sizes", "2,3", "--repeats", "1",
         "--tokenizer", "smollm2")
    rows = re.findall(r"^grammarsd\s+(\d+) (required|optional)\s+(\d+)\s+(\d+)$",
                      capsys.readouterr().out, re.MULTILINE)
    assert {(n, kind) for n, kind, _, _ in rows} == {
        ("2", "required"), ("2", "optional"), ("3", "required"), ("3", "optional")}
    assert all(int(cold) > 0 and int(warm) > 0 for _, _, cold, warm in rows)


def test_a_missing_or_unknown_engine_is_skipped(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    _run(monkeypatch, "--engines", "no_such_module_here:Engine,no-such-engine,grammarsd",
         "--sizes", "2", "--repeats", "1", "--tokenizer", "smollm2")
    out = capsys.readouterr().out
    assert "no_such_module_here:Engine: not installed" in out
    assert "no-such-engine: unknown engine" in out
    assert re.search(r"^grammarsd\s+2 required", out, re.MULTILINE)
