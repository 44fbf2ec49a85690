"""``grammarsd bench test-suite``: the JSON Schema Test Suite judge, run through the CLI.

A tiny suite is built in ``tmp_path`` in the suite's own layout and format. The oracle for every
verdict is the suite's labels, which are themselves checked against ``jsonschema`` (an
independent validator); a flipped label (negative control) must turn the verdict into *wrong* and
the exit status into 1. Bad input (no suite, a missing draft folder, a file that is not JSON) must
give ``grammarsd: error: ...`` with the path, never a traceback.
"""

from __future__ import annotations

import copy
import json
import re
import runpy
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from grammarsd.api.cli import main
from grammarsd.bench import test_suite

ROOT = Path(__file__).resolve().parents[2]

# (draft, path under the draft folder) -> cases, in the suite's format. Labels follow the spec.
SUITE: dict[tuple[str, str], list[dict[str, Any]]] = {
    ("draft7", "uniqueItems.json"): [
        {"description": "unbounded items: refused", "schema": {"uniqueItems": True},
         "tests": [{"description": "unique", "data": [1, 2], "valid": True},
                   {"description": "repeated", "data": [1, 1], "valid": False}]},
        {"description": "boolean items", "schema": {"items": {"type": "boolean"},
                                                    "uniqueItems": True},
         "tests": [{"description": "unique", "data": [True, False], "valid": True},
                   {"description": "repeated", "data": [True, True], "valid": False},
                   {"description": "empty", "data": [], "valid": True}]},
    ],
    ("draft2020-12", "type.json"): [
        {"description": "integer", "schema": {"type": "integer"},
         "tests": [{"description": "an integer", "data": 1, "valid": True},
                   {"description": "a float", "data": 1.5, "valid": False},
                   {"description": "a string", "data": "foo", "valid": False}]},
        {"description": "string", "schema": {"type": "string"},
         "tests": [{"description": "a string", "data": "a", "valid": True},
                   {"description": "null", "data": None, "valid": False}]},
    ],
    ("draft2020-12", "dynamicRef.json"): [
        {"description": "dynamic anchor: refused",
         "schema": {"$dynamicRef": "#meta",
                    "$defs": {"a": {"$dynamicAnchor": "meta", "type": "string"}}},
         "tests": [{"description": "a string", "data": "foo", "valid": True},
                   {"description": "a number", "data": 1, "valid": False}]},
        {"description": "const", "schema": {"const": 2},
         "tests": [{"description": "two", "data": 2, "valid": True},
                   {"description": "three", "data": 3, "valid": False}]},
    ],
    ("draft2020-12", "optional/format/date.json"): [
        {"description": "date", "schema": {"format": "date"},
         "tests": [{"description": "leap day", "data": "2020-02-29", "valid": True},
                   {"description": "no leap day", "data": "2021-02-29", "valid": False},
                   {"description": "non-strings pass", "data": 12, "valid": True}]},
    ],
}

# What the table must say: file -> (passed, refused, wrong, refused keywords).
EXPECTED: dict[str, dict[str, tuple[int, int, int, str]]] = {
    "draft7": {"uniqueItems.json": (1, 1, 0, "uniqueItems (1)")},
    "draft2020-12": {"dynamicRef.json": (1, 1, 0, "$dynamicRef (1)"),
                     "type.json": (2, 0, 0, ""),
                     "date.json": (1, 0, 0, "")},
}
VALIDATORS = {"draft7": jsonschema.Draft7Validator, "draft2020-12": jsonschema.Draft202012Validator}


def build_suite(root: Path, suite: dict[tuple[str, str], list[dict[str, Any]]] = SUITE) -> Path:
    for (draft, rel), cases in suite.items():
        path = root / draft / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cases, indent=1), encoding="utf-8")
    return root


def flipped(draft: str, rel: str, case: int, test: int) -> dict[tuple[str, str], list[Any]]:
    """SUITE with one label flipped."""
    suite = copy.deepcopy(SUITE)
    label = suite[draft, rel][case]["tests"][test]
    label["valid"] = not label["valid"]
    return suite


def parse_table(text: str) -> dict[str, dict[str, Any]]:
    """``{draft: {"total": (p, r, w), file: (p, r, w, keywords)}}`` from the printed table."""
    tables: dict[str, dict[str, Any]] = {}
    draft = ""
    for line in text.splitlines():
        if m := re.fullmatch(r"### (\S+): (\d+) passed, (\d+) refused, (\d+) wrong", line):
            draft = m[1]
            tables[draft] = {"total": tuple(int(m[i]) for i in (2, 3, 4))}
        elif m := re.fullmatch(r"\| (\S+\.json) \| (\d+) \| (\d+) \| (\d+) \| (.*) \|", line):
            tables[draft][m[1]] = (int(m[2]), int(m[3]), int(m[4]), m[5].strip())
    return tables


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(["bench", "test-suite", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("key", list(SUITE), ids=lambda k: f"{k[0]}/{k[1]}")
def test_fixture_labels_agree_with_jsonschema(key: tuple[str, str]) -> None:
    """The fixture's labels are right (the independent validator agrees)."""
    validator_class = VALIDATORS[key[0]]
    for case in SUITE[key]:
        validator = validator_class(case["schema"], format_checker=validator_class.FORMAT_CHECKER)
        for test in case["tests"]:
            assert validator.is_valid(test["data"]) == test["valid"], (case, test)


def test_table_counts_and_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = build_suite(tmp_path / "suite")
    out = tmp_path / "out"
    status, text, err = run_cli(["--suite", str(suite), "--no-progress", "--out", str(out)],
                                capsys)
    assert status == 0, text + err
    tables = parse_table(text)
    assert list(tables) == ["draft7", "draft2020-12"]
    for draft, rows in EXPECTED.items():
        assert {k: v for k, v in tables[draft].items() if k != "total"} == rows
        totals = tuple(map(sum, zip(*(r[:3] for r in rows.values()), strict=True)))
        assert tables[draft]["total"] == totals
    assert "WRONG" not in text and err == ""

    assert (out / "test-suite.md").read_text(encoding="utf-8").startswith("### draft7: 1 passed")
    records = json.loads((out / "test-suite.json").read_text(encoding="utf-8"))
    assert [r["file"] for r in records["draft2020-12"]] == [
        "dynamicRef.json", "type.json", "optional/format/date.json"]
    dyn = records["draft2020-12"][0]
    assert (dyn["passed"], dyn["refused"], dyn["wrong"]) == (1, 1, 0)
    assert dyn["refusals"] == {"$dynamicRef": 1} and dyn["wrong_cases"] == []


def test_one_draft_and_progress_bar(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = build_suite(tmp_path)
    status, text, err = run_cli(["--suite", str(suite), "--drafts", "draft7"], capsys)
    assert status == 0
    assert list(parse_table(text)) == ["draft7"]
    assert "1/1" in err  # tqdm over files, on stderr


@pytest.mark.parametrize(
    ("rel", "case", "test", "verdict"),
    [("type.json", 0, 1, "rejected valid"),  # 1.5 relabelled valid for "integer"
     ("optional/format/date.json", 0, 0, "accepted invalid")],  # a real leap day relabelled
)
def test_wrong_label_is_wrong(tmp_path: Path, capsys: pytest.CaptureFixture[str], rel: str,
                              case: int, test: int, verdict: str) -> None:
    """Negative control: the judge follows the labels, so a false one must be caught."""
    suite = build_suite(tmp_path, flipped("draft2020-12", rel, case, test))
    status, text, _ = run_cli(["--suite", str(suite), "--no-progress"], capsys)
    assert status == 1
    name = rel.rsplit("/", 1)[-1]
    passed, refused, wrong, _ = parse_table(text)["draft2020-12"][name]
    assert (passed, refused, wrong) == (EXPECTED["draft2020-12"][name][0] - 1, 0, 1)
    assert parse_table(text)["draft2020-12"]["total"][2] == 1
    assert re.search(rf"^WRONG {re.escape(rel)}: .*{verdict}", text, re.M), text


def test_write_replaces_marked_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = build_suite(tmp_path / "suite", {k: v for k, v in SUITE.items() if k[0] == "draft7"})
    doc = tmp_path / "doc.md"
    doc.write_text(f"intro\n{test_suite.BEGIN}\nold\n{test_suite.END}\noutro\n", encoding="utf-8")
    status, _, _ = run_cli(["--suite", str(suite), "--drafts", "draft7", "--no-progress",
                            "--write", str(doc)], capsys)
    assert status == 0
    head, rest = doc.read_text(encoding="utf-8").split(test_suite.BEGIN)
    body, tail = rest.split(test_suite.END)
    assert head == "intro\n" and tail == "\noutro\n" and "old" not in body
    assert "| uniqueItems.json | 1 | 1 | 0 | uniqueItems (1) |" in body


def _not_json(root: Path) -> Path:
    build_suite(root)
    # the second comma is the error: line 2, column 23
    (root / "draft7" / "broken.json").write_text('[\n  {"description": "x",,}\n]\n')
    return root


def _not_cases(root: Path) -> Path:
    build_suite(root)
    (root / "draft7" / "object.json").write_text('{"schema": {}}')
    return root


@pytest.mark.parametrize(
    ("make", "args", "message"),
    [(lambda root: root / "absent", [], r"absent: no such suite folder"),
     (lambda root: build_suite(root, {("draft2020-12", "type.json"): SUITE[("draft2020-12",
                                                                              "type.json")]}),
      ["--drafts", "draft2020-12", "draft7"], r"draft7: no draft folder 'draft7'"),
     (_not_json, [], r"broken\.json:2:23: not JSON: Expecting property name"),
     (_not_cases, [], r"object\.json: not a suite file")],
    ids=["no-suite", "no-draft-folder", "not-json", "not-a-suite-file"],
)
def test_bad_input_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    make: Any, args: list[str], message: str) -> None:
    suite = make(tmp_path)
    status, text, err = run_cli(["--suite", str(suite), "--no-progress", *args], capsys)
    assert status == 1 and text == ""
    assert err.startswith("grammarsd: error: ") and "Traceback" not in err
    assert re.search(message, err), err


def test_default_suite_missing(monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    monkeypatch.setattr(test_suite, "DEFAULT_SUITE", tmp_path / "nowhere")
    status, _, err = run_cli(["--no-progress"], capsys)
    assert status == 1
    assert err.startswith("grammarsd: error: ") and "--suite" in err and "nowhere" in err


def test_default_suite_is_the_vendored_one() -> None:
    assert test_suite.default_suite() == ROOT / "tests" / "data" / "json-schema-test-suite" / "tests"


def run_script(args: list[str], monkeypatch: pytest.MonkeyPatch,
               capsys: pytest.CaptureFixture[str]) -> tuple[Any, str, str]:
    """Run ``bench/json_schema_test_suite.py`` as ``__main__`` in this process."""
    script = ROOT / "bench" / "json_schema_test_suite.py"
    monkeypatch.setattr(sys, "argv", [str(script), *args])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(script), run_name="__main__")
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def test_script_wrapper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                        capsys: pytest.CaptureFixture[str]) -> None:
    """``python bench/json_schema_test_suite.py`` runs the same judge and reports errors cleanly."""
    suite = build_suite(tmp_path, {k: v for k, v in SUITE.items() if k[0] == "draft7"})
    status, text, _ = run_script(["--suite", str(suite), "--drafts", "draft7", "--no-progress"],
                                 monkeypatch, capsys)
    assert status == 0
    assert "### draft7: 1 passed, 1 refused, 0 wrong" in text
    status, _, err = run_script(["--suite", str(tmp_path / "absent")], monkeypatch, capsys)
    assert status == 1 and "no such suite folder" in err and "Traceback" not in err
