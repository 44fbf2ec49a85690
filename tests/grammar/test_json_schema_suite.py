"""The JSON Schema Test Suite as judge: refusals are fine, wrong answers are not.

Each vendored suite file (drafts 7 and 2020-12, core and ``optional/format``) is judged by
``grammarsd.bench.test_suite``: a schema is refused (``SchemaUnsupportedError``) or its
grammar must agree with the suite's ``valid`` label on every instance, membership decided by the
reference recognizer. The oracle is the suite's labels, not our code.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from grammarsd.bench import test_suite as judge

_judged = functools.lru_cache(maxsize=None)(judge.judge_file)
FILES = [p for d in ("draft7", "draft2020-12") for p in judge.suite_files(judge.DEFAULT_SUITE, d)]


def test_suite_is_vendored() -> None:
    assert len(FILES) > 100
    assert (judge.DEFAULT_SUITE.parent / "LICENSE").exists()


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parts[-3]}/{p.parent.name}/{p.name}")
def test_no_wrong_answers(path: Path) -> None:
    result = _judged(path)
    assert result.wrong == 0, "\n".join(result.wrong_cases)


CORE_MUST_PASS = ["type.json", "properties.json", "required.json", "enum.json", "const.json",
                  "items.json", "allOf.json", "anyOf.json", "ref.json", "additionalProperties.json",
                  "minItems.json", "maxItems.json", "minLength.json", "maxLength.json",
                  "minimum.json", "maximum.json", "boolean_schema.json"]


@pytest.mark.parametrize("name", CORE_MUST_PASS)
def test_core_keywords_mostly_enforced(name: str) -> None:
    """Coverage guard: the most used keywords are enforced, not refused wholesale."""
    result = _judged(judge.DEFAULT_SUITE / "draft2020-12" / name)
    assert result.passed >= 2 * result.refused, result.refusals
