"""``bench/compile_ab.py`` runs end to end: two workers per core take every schema in turn and
the summary counts the schemas both compiled; a checkout that is not one fails with its name."""

from __future__ import annotations

import json
import re
import runpy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "compile_ab.py"
SCHEMAS = {
    "a.json": {"type": "integer"},
    "b.json": {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]},
    "c.json": {"type": "string", "pattern": "("},  # refused by the compiler: left out
}


def _run(monkeypatch: pytest.MonkeyPatch, *args: str) -> None:
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), *args])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(SCRIPT), run_name="__main__")
    assert done.value.code == 0


@pytest.fixture
def data(tmp_path: Path) -> Path:
    for name, schema in SCHEMAS.items():
        doc = {"schema": schema, "tests": [{"valid": True, "data": 1}]}
        (tmp_path / name).write_text(json.dumps(doc), encoding="utf-8")
    return tmp_path


def test_the_same_checkout_twice(monkeypatch: pytest.MonkeyPatch, data: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    _run(monkeypatch, str(data), str(ROOT), str(ROOT), "--cores", "0")
    out = capsys.readouterr().out
    summary = re.search(r"^all: (\d+) schemas, compile mean ([\d.]+) -> ([\d.]+) ms \(ratio "
                        r"([\d.]+)\), median per-schema ratio ([\d.]+), masks ratio ([\d.]+)$",
                        out, re.MULTILINE)
    assert summary is not None, out
    assert summary.group(1) == "2"
    assert all(float(x) > 0 for x in summary.groups()[1:])


def test_a_path_that_is_no_checkout_is_named(monkeypatch: pytest.MonkeyPatch, data: Path,
                                             tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), str(data), str(tmp_path / "nowhere"),
                                      "--cores", "0"])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(SCRIPT), run_name="__main__")
    assert done.value.code == 2
    assert "nowhere is not a grammarsd checkout" in capsys.readouterr().err
