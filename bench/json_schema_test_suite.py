"""Judge ``schema_to_grammar`` with the official JSON Schema Test Suite.

For every schema of every test file: compiling either raises ``SchemaUnsupportedError``
(*refused*) or the grammar must accept ``json.dumps(data)`` for every instance the suite marks
valid and reject every one it marks invalid (*passed*); anything else is *wrong*. Membership is
decided by ``grammarsd.matcher.reference.ReferenceRecognizer`` (the slow exact oracle), the
truth by the suite's own ``valid`` labels. Objects may come in any key order in the suite, so the
judge compiles with ``any_order=True``.

Usage::

    python bench/json_schema_test_suite.py [--suite DIR] [--write docs/json-schema.md]
    python bench/json_schema_test_suite.py --maskbench DIR [--sample N] [--matcher]

prints the per-file table (schemas passed / refused / wrong) and, with ``--write``, replaces the
table between the markers in ``docs/json-schema.md``. ``--maskbench`` judges a seeded sample of
MaskBench files instead; ``--matcher`` decides membership with the compiled matcher on the
Llama-3 vocabulary (``accept_string`` + ``is_accepting``, tested equal to the reference
recognizer and much faster on long instances), so no instance is skipped.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grammarsd.errors import SchemaUnsupportedError
from grammarsd.grammar.ir import Grammar
from grammarsd.grammar.json_schema import JsonSchemaOptions, schema_to_grammar
from grammarsd.matcher.reference import ReferenceRecognizer

#: Builds a membership test (JSON text -> accepted?) for a grammar.
Recognizer = Callable[[Grammar], Callable[[str], bool]]


def reference_recognizer(grammar: Grammar) -> Callable[[str], bool]:
    """Membership by the slow exact oracle."""
    return ReferenceRecognizer(grammar).accepts


def matcher_recognizer(grammar: Grammar) -> Callable[[str], bool]:
    """Membership by the compiled matcher on the Llama-3 vocabulary."""
    import grammarsd
    from grammarsd.testing import tokenizer_info

    compiled = grammarsd.compile_ir(grammar, tokenizer_info("llama3"))

    def accepts(text: str) -> bool:
        matcher = compiled.matcher()
        return matcher.accept_string(text) and matcher.is_accepting()

    return accepts

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SUITE = ROOT / "tests" / "data" / "json-schema-test-suite" / "tests"
DRAFT_URIS = {"draft7": "http://json-schema.org/draft-07/schema",
              "draft2020-12": "https://json-schema.org/draft/2020-12/schema"}
BEGIN, END = "<!-- suite-table-begin -->", "<!-- suite-table-end -->"


@dataclass
class FileResult:
    """Outcome of one suite file: counts of schemas and the details of wrong answers."""

    name: str
    passed: int = 0
    refused: int = 0
    wrong: int = 0
    wrong_cases: list[str] = field(default_factory=list)
    refusals: Counter[str] = field(default_factory=Counter)  # keyword -> schemas refused


def judge_options(path: Path) -> JsonSchemaOptions:
    """The options the judge compiles a suite file with.

    Any key order; the draft of the suite folder; ``format`` asserted only in
    ``optional/format`` (the core files treat it as the annotation it is by default).
    """
    draft = next(p for p in path.parts if p in DRAFT_URIS)
    formats = "assert" if path.parent.name == "format" else "ignore"
    return JsonSchemaOptions(any_order=True, default_draft=DRAFT_URIS[draft], formats=formats)


def judge_case(case: dict, options: JsonSchemaOptions,
               recognizer: Recognizer = reference_recognizer) -> tuple[str, str]:
    """``("passed" | "refused" | "wrong", detail)`` for one suite case (schema + tests).

    A refusal's detail is the refused keyword.
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


def judge_file(path: Path) -> FileResult:
    """Judge every case of one suite file."""
    options = judge_options(path)
    result = FileResult(path.name)
    for case in json.loads(path.read_text(encoding="utf-8")):
        verdict, detail = judge_case(case, options)
        if verdict == "passed":
            result.passed += 1
        elif verdict == "refused":
            result.refused += 1
            result.refusals[detail] += 1
        else:
            result.wrong += 1
            result.wrong_cases.append(detail)
    return result


def suite_files(suite: Path, draft: str) -> list[Path]:
    """The judged files of one draft: the core files and ``optional/format``."""
    base = suite / draft
    return sorted(base.glob("*.json")) + sorted((base / "optional" / "format").glob("*.json"))


def table(results: dict[str, list[FileResult]]) -> str:
    """A Markdown table per draft plus totals."""
    lines: list[str] = []
    for draft, files in results.items():
        tot = [sum(getattr(r, k) for r in files) for k in ("passed", "refused", "wrong")]
        lines += [f"### {draft}: {tot[0]} passed, {tot[1]} refused, {tot[2]} wrong", "",
                  "| file | passed | refused | wrong | refused keywords |",
                  "|---|---:|---:|---:|---|"]
        for r in files:
            kws = ", ".join(f"{k} ({n})" for k, n in r.refusals.most_common())
            lines.append(f"| {r.name} | {r.passed} | {r.refused} | {r.wrong} | {kws} |")
        lines.append("")
    return "\n".join(lines)


def maskbench(folder: Path, sample: int, seed: int = 0, max_chars: int | None = 2000,
              any_order: bool = False, recognizer: Recognizer = reference_recognizer) -> str:
    """Judge a random sample of MaskBench files (``{"schema", "tests": [{"valid", "data"}]}``).

    Instances longer than ``max_chars`` are skipped (``None``: none are; the reference
    recognizer is slow on long ones). Returns a report: totals, refusals by keyword and wrong
    answers by kind.
    """
    import random

    paths = sorted(folder.glob("*.json"))
    random.Random(seed).shuffle(paths)
    verdicts: Counter[str] = Counter()
    refused: Counter[str] = Counter()
    wrong: list[str] = []
    for path in paths[:sample]:
        case = json.loads(path.read_text(encoding="utf-8"))
        tests = [t for t in case["tests"]
                 if max_chars is None or len(json.dumps(t["data"])) <= max_chars]
        case = {"schema": case["schema"], "tests": tests, "description": path.name}
        verdict, detail = judge_case(case, JsonSchemaOptions(any_order=any_order), recognizer)
        verdicts[verdict] += 1
        if verdict == "refused":
            refused[detail] += 1
        elif verdict == "wrong":
            wrong.append(detail)
    lines = [f"MaskBench sample of {sample} (seed {seed}): " + ", ".join(
        f"{k} {v}" for k, v in sorted(verdicts.items())), "refused by keyword: " + ", ".join(
        f"{k} {v}" for k, v in refused.most_common())]
    lines += [f"WRONG {w[:300]}" for w in wrong]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", type=Path, default=DEFAULT_SUITE)
    parser.add_argument("--drafts", nargs="*", default=["draft7", "draft2020-12"])
    parser.add_argument("--write", type=Path, default=None,
                        help="Markdown file whose suite table is replaced")
    parser.add_argument("--maskbench", type=Path, default=None,
                        help="a MaskBench folder to sample instead of the suite")
    parser.add_argument("--sample", type=int, default=200)
    parser.add_argument("--any-order", action="store_true",
                        help="MaskBench: compile with any_order=True")
    parser.add_argument("--matcher", action="store_true",
                        help="MaskBench: judge with the compiled matcher, skipping no instance")
    args = parser.parse_args(argv)
    if args.maskbench is not None:
        if args.matcher:
            print(maskbench(args.maskbench, args.sample, max_chars=None,
                            any_order=args.any_order, recognizer=matcher_recognizer))
        else:
            print(maskbench(args.maskbench, args.sample, any_order=args.any_order))
        return 0
    start = time.perf_counter()
    results = {d: [judge_file(p) for p in suite_files(args.suite, d)] for d in args.drafts}
    elapsed = time.perf_counter() - start
    text = table(results)
    text += (f"\nJudged in {elapsed:.1f} s on {platform.machine()} / Python "
             f"{platform.python_version()}.\n")
    print(text)
    for files in results.values():
        for r in files:
            for case in r.wrong_cases:
                print(f"WRONG {r.name}: {case}")
    if args.write is not None:
        doc = args.write.read_text(encoding="utf-8")
        head, rest = doc.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        args.write.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}", encoding="utf-8")
    return 1 if any(r.wrong for files in results.values() for r in files) else 0


if __name__ == "__main__":
    sys.exit(main())
