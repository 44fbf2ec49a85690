"""The official JSON Schema Test Suite as judge of ``schema_to_grammar``: refusals are fine,
wrong answers are not.

This module owns the judge, its per-keyword report and its command line
(``grammarsd bench test-suite``, ``python bench/json_schema_test_suite.py``).

A suite folder holds one folder per draft (``draft7``, ``draft2020-12``, ...) of JSON files, one per
keyword; each file is a list of *cases* ``{"description", "schema", "tests": [{"description",
"data", "valid"}, ...]}``. The judged files of a draft are its core files and
``optional/format/*.json``. For every case, compiling the schema either raises
``SchemaUnsupportedError`` (*refused*, counted under the refused keyword) or the grammar must accept
``json.dumps(data)`` for every instance the suite labels valid and reject every one labelled invalid
(*passed*); anything else (a disagreement, or any other exception while compiling) is *wrong*.
Membership is decided by ``grammarsd.matcher.reference.ReferenceRecognizer`` (the slow exact
oracle), the truth by the suite's own ``valid`` labels. The suite writes objects in any key order,
so schemas compile with ``any_order=True``; core files treat ``format`` as the annotation it is by
default (``formats="ignore"``), ``optional/format`` files assert it.

Outputs: the per-keyword Markdown table (one row per file: passed / refused / wrong and the refused
keywords, a total line per draft); with ``--out DIR``, ``DIR/test-suite.md`` (the table) and
``DIR/test-suite.json`` (per-file counts, refusals and wrong answers); with ``--write FILE``, the
table between ``<!-- suite-table-begin -->`` and ``<!-- suite-table-end -->`` in ``FILE`` is
replaced. The exit status is 1 when any answer is wrong.

``--maskbench DIR`` (script only) judges a seeded sample of MaskBench files the same way instead.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from grammarsd.bench.workers import BenchError, read_json
from grammarsd.bench.workers import progress as progress_bar
from grammarsd.errors import GrammarsdError, SchemaUnsupportedError
from grammarsd.grammar.ir import Grammar
from grammarsd.grammar.json_schema import JsonSchemaOptions, schema_to_grammar
from grammarsd.matcher.reference import ReferenceRecognizer

#: Builds a membership test (JSON text -> accepted?) for a grammar.
Recognizer = Callable[[Grammar], Callable[[str], bool]]

#: The suite as vendored in the repository (present in a source checkout, not in a wheel).
DEFAULT_SUITE = (
    Path(__file__).resolve().parents[2] / "tests" / "data" / "json-schema-test-suite" / "tests"
)
#: Suite draft folder -> the ``$schema`` URI its schemas default to.
DRAFT_URIS = {
    "draft7": "http://json-schema.org/draft-07/schema",
    "draft2020-12": "https://json-schema.org/draft/2020-12/schema",
}
DEFAULT_DRAFTS = ("draft7", "draft2020-12")
BEGIN, END = "<!-- suite-table-begin -->", "<!-- suite-table-end -->"


# -- data ---------------------------------------------------------------------------------------


@dataclass
class FileResult:
    """Outcome of one suite file (one keyword).

    ``passed + refused + wrong`` is the number of cases in the file; ``refusals`` maps each
    refused keyword to its number of cases (its values sum to ``refused``); ``wrong_cases`` holds
    one line per wrong case (``len(wrong_cases) == wrong``). ``path`` is the file's path relative
    to its draft folder (``"type.json"``, ``"optional/format/date.json"``), ``name`` its file name.
    """

    name: str
    path: str = ""
    passed: int = 0
    refused: int = 0
    wrong: int = 0
    wrong_cases: list[str] = field(default_factory=list)
    refusals: Counter[str] = field(default_factory=Counter)

    def to_json(self) -> dict[str, Any]:
        """The record written to ``test-suite.json``."""
        return {
            "file": self.path,
            "passed": self.passed,
            "refused": self.refused,
            "wrong": self.wrong,
            "refusals": dict(self.refusals.most_common()),
            "wrong_cases": self.wrong_cases,
        }


class SuiteError(BenchError):
    """The suite cannot be judged: no suite folder, a missing draft folder, a file that is not a
    suite file. ``path`` names the offending file or folder; for malformed JSON, ``line`` and
    ``column`` (1-based) say where."""


# -- judging ------------------------------------------------------------------------------------


def reference_recognizer(grammar: Grammar) -> Callable[[str], bool]:
    """Membership by the slow exact oracle."""
    return ReferenceRecognizer(grammar).accepts


def matcher_recognizer(grammar: Grammar) -> Callable[[str], bool]:
    """Membership by the compiled matcher on the Llama-3 vocabulary (``accept_string`` and
    ``is_accepting``; tested equal to the reference recognizer, much faster on long texts)."""
    import grammarsd
    from grammarsd.testing import tokenizer_info

    compiled = grammarsd.compile_ir(grammar, tokenizer_info("llama3"))

    def accepts(text: str) -> bool:
        matcher = compiled.matcher()
        return matcher.accept_string(text) and matcher.is_accepting()

    return accepts


def judge_options(path: Path) -> JsonSchemaOptions:
    """The options the judge compiles a suite file with.

    Any key order; the draft of the suite folder the file lies in (a path component named in
    ``DRAFT_URIS``); ``format`` asserted only in ``optional/format``.
    """
    draft = path.parts[_draft_index(path)]
    return JsonSchemaOptions(
        any_order=True,
        default_draft=DRAFT_URIS[draft],
        formats="assert" if path.parent.name == "format" else "ignore",
    )


def judge_case(
    case: dict[str, Any], options: JsonSchemaOptions, recognizer: Recognizer = reference_recognizer
) -> tuple[str, str]:
    """``("passed" | "refused" | "wrong", detail)`` for one case (``schema`` + ``tests``).

    A refusal's detail is the refused keyword; a wrong answer's says which instance and how.
    """
    try:
        grammar = schema_to_grammar(case["schema"], options=options)
    except SchemaUnsupportedError as exc:
        return "refused", exc.keyword
    except Exception as exc:  # a crash on a valid schema is a wrong answer, not a refusal
        return "wrong", f"{case['description']}: compile raised {type(exc).__name__}: {exc}"
    accepts = recognizer(grammar)
    for test in case["tests"]:
        text = json.dumps(test["data"])
        if accepts(text) != test["valid"]:
            verdict = "accepted invalid" if test["valid"] is False else "rejected valid"
            return "wrong", f"{case['description']} / {test['description']}: {verdict} {text}"
    return "passed", ""


def load_suite_file(path: Path) -> list[dict[str, Any]]:
    """The cases of one suite file.

    Raises ``SuiteError`` (with ``path``, and ``line``/``column`` for malformed JSON) when the
    file cannot be read, is not JSON, or is not a list of ``{"description", "schema", "tests":
    [{"description", "data", "valid": bool}]}`` cases.
    """
    doc = read_json(path, SuiteError)
    if not isinstance(doc, list):
        raise SuiteError("not a suite file: expected a list of test cases", path=path)
    for i, case in enumerate(doc):
        tests = case.get("tests") if isinstance(case, dict) else None
        if not (
            isinstance(case, dict)
            and "schema" in case
            and "description" in case
            and isinstance(tests, list)
            and all(
                isinstance(t, dict)
                and "data" in t
                and "description" in t
                and isinstance(t.get("valid"), bool)
                for t in tests
            )
        ):
            raise SuiteError(
                f'case {i} is not {{"description", "schema", "tests": '
                '[{"description", "data", "valid": bool}]}',
                path=path,
            )
    return doc


def judge_file(path: Path, recognizer: Recognizer = reference_recognizer) -> FileResult:
    """Judge every case of one suite file (which must lie under a draft folder)."""
    options = judge_options(path)
    result = FileResult(path.name, "/".join(path.parts[_draft_index(path) + 1 :]))
    for case in load_suite_file(path):
        verdict, detail = judge_case(case, options, recognizer)
        if verdict == "passed":
            result.passed += 1
        elif verdict == "refused":
            result.refused += 1
            result.refusals[detail] += 1
        else:
            result.wrong += 1
            result.wrong_cases.append(detail)
    return result


def default_suite() -> Path:
    """The vendored suite folder, ``DEFAULT_SUITE``; ``SuiteError`` when it is not there (an
    installed package without the repository's ``tests/data``)."""
    if not DEFAULT_SUITE.is_dir():
        raise SuiteError(
            "the JSON Schema Test Suite is not vendored here",
            path=DEFAULT_SUITE,
            hint="pass --suite DIR (the suite's tests/ folder, holding draft7/, "
            "draft2020-12/, ...)",
        )
    return DEFAULT_SUITE


def suite_files(suite: Path, draft: str) -> list[Path]:
    """The judged files of one draft, sorted: the core files, then ``optional/format``.

    Raises ``SuiteError`` when ``suite`` or its ``draft`` folder is missing, or when ``draft`` is
    not one of ``DRAFT_URIS``.
    """
    if not suite.is_dir():
        raise SuiteError("no such suite folder", path=suite)
    if draft not in DRAFT_URIS:
        raise SuiteError(
            f"unknown draft {draft!r}", path=suite, hint=f"drafts judged: {', '.join(DRAFT_URIS)}"
        )
    base = suite / draft
    if not base.is_dir():
        raise SuiteError(f"no draft folder {draft!r} in the suite", path=base)
    return sorted(base.glob("*.json")) + sorted((base / "optional" / "format").glob("*.json"))


def judge_suite(
    suite: Path, drafts: Sequence[str] = DEFAULT_DRAFTS, *, progress: bool = False
) -> dict[str, list[FileResult]]:
    """Judge every file of each draft; ``{draft: [FileResult per file, in suite_files order]}``.

    Every draft folder is checked before any file is judged. ``progress`` shows a tqdm bar over
    files on stderr.
    """
    files = {draft: suite_files(suite, draft) for draft in drafts}
    bar = progress_bar(sum(len(paths) for paths in files.values()), unit="file", enabled=progress)
    results: dict[str, list[FileResult]] = {}
    try:
        for draft, paths in files.items():
            results[draft] = []
            for path in paths:
                bar.set_description(f"{draft}/{path.name}")
                results[draft].append(judge_file(path))
                bar.update(1)
    finally:
        bar.close()
    return results


def any_wrong(results: dict[str, list[FileResult]]) -> bool:
    """Whether any case of any file got a wrong answer."""
    return any(r.wrong for files in results.values() for r in files)


# -- reports ------------------------------------------------------------------------------------


def table(results: dict[str, list[FileResult]]) -> str:
    """The per-keyword Markdown table: per draft a total line, then one row per file."""
    lines: list[str] = []
    for draft, files in results.items():
        tot = [sum(getattr(r, k) for r in files) for k in ("passed", "refused", "wrong")]
        lines += [
            f"### {draft}: {tot[0]} passed, {tot[1]} refused, {tot[2]} wrong",
            "",
            "| file | passed | refused | wrong | refused keywords |",
            "|---|---:|---:|---:|---|",
        ]
        for r in files:
            kws = ", ".join(f"{k} ({n})" for k, n in r.refusals.most_common())
            lines.append(f"| {r.name} | {r.passed} | {r.refused} | {r.wrong} | {kws} |")
        lines.append("")
    return "\n".join(lines)


def write_outputs(out_dir: Path, results: dict[str, list[FileResult]], text: str) -> None:
    """Write ``test-suite.md`` (``text``) and ``test-suite.json`` (per-file records by draft)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "test-suite.md").write_text(text, encoding="utf-8")
    doc = {draft: [r.to_json() for r in files] for draft, files in results.items()}
    (out_dir / "test-suite.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def replace_table(path: Path, text: str) -> None:
    """Replace what lies between ``BEGIN`` and ``END`` in the Markdown file ``path`` by ``text``.

    Raises ``SuiteError`` when the file cannot be read or lacks either marker.
    """
    try:
        doc = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(f"cannot read: {exc}", path=path) from exc
    head, begin, rest = doc.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise SuiteError(f"no table markers {BEGIN} ... {END}", path=path)
    path.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}", encoding="utf-8")


# -- MaskBench sample ---------------------------------------------------------------------------


def maskbench(
    folder: Path,
    sample: int,
    seed: int = 0,
    max_chars: int | None = 2000,
    any_order: bool = False,
    recognizer: Recognizer = reference_recognizer,
) -> str:
    """Judge a seeded random sample of MaskBench files (``{"schema", "tests": [{"valid", "data"}]}``).

    Instances longer than ``max_chars`` are skipped (``None``: none are; the reference
    recognizer is slow on long ones). Returns a report: totals, refusals by keyword and wrong
    answers.
    """
    paths = sorted(folder.glob("*.json"))
    random.Random(seed).shuffle(paths)
    verdicts: Counter[str] = Counter()
    refused: Counter[str] = Counter()
    wrong: list[str] = []
    for path in paths[:sample]:
        case = json.loads(path.read_text(encoding="utf-8"))
        tests = [
            t for t in case["tests"] if max_chars is None or len(json.dumps(t["data"])) <= max_chars
        ]
        case = {"schema": case["schema"], "tests": tests, "description": path.name}
        verdict, detail = judge_case(case, JsonSchemaOptions(any_order=any_order), recognizer)
        verdicts[verdict] += 1
        if verdict == "refused":
            refused[detail] += 1
        elif verdict == "wrong":
            wrong.append(detail)
    lines = [
        f"MaskBench sample of {sample} (seed {seed}): "
        + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())),
        "refused by keyword: " + ", ".join(f"{k} {v}" for k, v in refused.most_common()),
    ]
    lines += [f"WRONG {w[:300]}" for w in wrong]
    return "\n".join(lines)


# -- command line -------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the suite arguments on ``parser`` (shared by the CLI and the script)."""
    parser.add_argument(
        "--suite",
        type=Path,
        default=None,
        metavar="DIR",
        help="the suite's tests/ folder (default: the vendored copy)",
    )
    parser.add_argument(
        "--drafts",
        nargs="+",
        default=list(DEFAULT_DRAFTS),
        choices=list(DRAFT_URIS),
        help="drafts to judge (default: all)",
    )
    parser.add_argument(
        "--write",
        type=Path,
        default=None,
        metavar="FILE",
        help="Markdown file whose suite table (between markers) is replaced",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="write test-suite.md and test-suite.json there",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run_from_args(args: argparse.Namespace, out: TextIO) -> int:
    """Judge the suite described by parsed ``args``, print the table and the wrong answers to
    ``out``; 1 when any answer is wrong, else 0. Bad input raises ``SuiteError``."""
    suite = default_suite() if args.suite is None else args.suite
    start = time.perf_counter()
    results = judge_suite(suite, args.drafts, progress=not args.no_progress)
    elapsed = time.perf_counter() - start
    text = table(results) + (
        f"\nJudged in {elapsed:.1f} s on {platform.machine()} / Python "
        f"{platform.python_version()}.\n"
    )
    out.write(text + "\n")
    for files in results.values():
        for r in files:
            out.writelines(f"WRONG {r.path}: {case}\n" for case in r.wrong_cases)
    if args.out is not None:
        write_outputs(args.out, results, text)
    if args.write is not None:
        replace_table(args.write, text)
    return 1 if any_wrong(results) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python bench/json_schema_test_suite.py [--suite DIR] [--drafts ...] [--write FILE]
    [--out DIR]``, or ``--maskbench DIR [--sample N] [--any-order] [--matcher]``."""
    parser = argparse.ArgumentParser(
        prog="json_schema_test_suite", description=__doc__.split("\n\n")[0]
    )
    add_arguments(parser)
    parser.add_argument(
        "--maskbench",
        type=Path,
        default=None,
        metavar="DIR",
        help="judge a seeded sample of this MaskBench folder instead of the suite",
    )
    parser.add_argument("--sample", type=int, default=200, help="MaskBench: files to sample")
    parser.add_argument(
        "--any-order", action="store_true", help="MaskBench: compile with any_order=True"
    )
    parser.add_argument(
        "--matcher",
        action="store_true",
        help="MaskBench: judge with the compiled matcher, skipping no instance",
    )
    args = parser.parse_args(argv)
    if args.maskbench is not None:
        recognizer = matcher_recognizer if args.matcher else reference_recognizer
        max_chars = None if args.matcher else 2000
        print(
            maskbench(
                args.maskbench,
                args.sample,
                max_chars=max_chars,
                any_order=args.any_order,
                recognizer=recognizer,
            )
        )
        return 0
    try:
        return run_from_args(args, sys.stdout)
    except GrammarsdError as exc:
        print(f"json_schema_test_suite: error: {exc}", file=sys.stderr)
        return 1


# -- helpers ------------------------------------------------------------------------------------


def _draft_index(path: Path) -> int:
    """Index in ``path.parts`` of the last draft folder; ``SuiteError`` when there is none."""
    for i in range(len(path.parts) - 1, -1, -1):
        if path.parts[i] in DRAFT_URIS:
            return i
    raise SuiteError(f"not under a draft folder ({', '.join(DRAFT_URIS)})", path=path)


__all__ = [
    "BEGIN",
    "DEFAULT_DRAFTS",
    "DEFAULT_SUITE",
    "DRAFT_URIS",
    "END",
    "FileResult",
    "Recognizer",
    "SuiteError",
    "add_arguments",
    "any_wrong",
    "default_suite",
    "judge_case",
    "judge_file",
    "judge_options",
    "judge_suite",
    "load_suite_file",
    "main",
    "maskbench",
    "matcher_recognizer",
    "reference_recognizer",
    "replace_table",
    "run_from_args",
    "suite_files",
    "table",
    "write_outputs",
]
