"""The ``grammarsd`` command line: one function per subcommand, registered on one parser.

Subcommands:

``demo``
    Load a model (default SmolLM2), show the chat-formatted prompt's token ids with their exact
    bytes, stream a short greedy answer, then run structured generation: a Pydantic model
    extracted from a sentence (printed as the validated object), a regex and a Lark grammar.

``generate PROMPT [--schema FILE | --regex R | --grammar FILE_OR_NAME | --choices a,b]``
    Stream a (constrained) generation to the terminal (``grammarsd.api.generate.stream``).

``bench maskbench DATA_DIR``
    MaskBench: per-schema token-mask correctness and speed of grammarsd and its peers
    (``grammarsd.bench.maskbench``).

``bench jsonschemabench [--data DIR] [--subsets A,B] [--limit N] ...``
    JSONSchemaBench: generation with one model for every engine, coverage and efficiency
    (``grammarsd.bench.jsonschemabench``).

``bench test-suite [--suite DIR] [--out DIR]``
    The JSON Schema Test Suite as judge of the JSON Schema compiler: per-keyword passed / refused /
    wrong (``grammarsd.bench.test_suite``).

To add a subcommand, write ``_add_<name>(subparsers)`` that registers its arguments and sets
``func`` to a ``(args, out) -> int`` handler, and list it in :data:`_SUBCOMMANDS`.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from grammarsd.errors import GrammarsdError

Handler = Callable[[argparse.Namespace, TextIO], int]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.func
    try:
        return handler(args, sys.stdout)
    except GrammarsdError as exc:
        print(f"grammarsd: error: {exc}", file=sys.stderr)
        return 1


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grammarsd", description="Structured output and controlled decoding for LMs."
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in _SUBCOMMANDS:
        add(subparsers)
    return parser


def _add_demo(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "demo",
        help="show exact token bytes and stream a short greedy continuation",
        description="Load a model, show the chat-formatted prompt's tokens with their exact bytes "
        "and stream a greedy continuation.",
    )
    p.add_argument("--model", default=None, help="built-in name, path or hub id (default: smollm2)")
    p.add_argument("--prompt", default="What is the capital of France?", help="user message")
    p.add_argument("--max-new-tokens", type=int, default=32, help="tokens to generate (>= 1)")
    p.set_defaults(func=_run_demo)


def _run_demo(args: argparse.Namespace, out: TextIO) -> int:
    from grammarsd.api.models import load_model

    if args.max_new_tokens < 1:
        raise SystemExit("grammarsd demo: --max-new-tokens must be >= 1")
    lm = load_model(args.model)
    info = lm.tokenizer_info
    out.write(
        f"model {lm.name!r} loaded in {lm.load_seconds:.2f} s "
        f"(logit width {info.vocab_size}, {info.kind}, eos {list(info.eos_ids)})\n"
    )

    ids = _prompt_ids(lm.tokenizer, args.prompt)
    out.write(f"prompt: {len(ids)} tokens (id: exact bytes; special tokens shown by name)\n")
    special = set(info.special_ids)
    for i in ids:
        shown = lm.tokenizer.convert_ids_to_tokens(i) if i in special else info.token_bytes[i]
        out.write(f"  {i:>6}: {shown!r}\n")

    out.write("answer: ")
    _stream_to(out, lm, args.prompt, {"max_tokens": args.max_new_tokens})
    for title, prompt, options in _demo_examples():
        out.write(f"\n{title}\n  prompt: {prompt}\n  output: ")
        result = _stream_to(out, lm, prompt, options)
        if result is not None and not isinstance(result.value, str):
            out.write(f"  value:  {result.value!r}\n")
    return 0


def _demo_examples() -> list[tuple[str, str, dict[str, Any]]]:
    """The structured part of the demo: (title, prompt, generate options)."""
    import pydantic

    class Person(pydantic.BaseModel):
        name: str = pydantic.Field(max_length=24)
        age: int = pydantic.Field(ge=0, le=120)
        city: str = pydantic.Field(max_length=24)

    return [
        (
            "schema=Person (a Pydantic model; returns a validated instance)",
            "Extract the person as JSON: Maria Lopez is 34 years old and lives in Madrid.",
            {"schema": Person, "json_options": {"whitespace": "compact"}, "max_tokens": 80},
        ),
        (
            r"regex=r'\d{4}-\d{2}-\d{2}'",
            "When did the Apollo 11 astronauts land on the Moon? Give the date.",
            {"regex": r"\d{4}-\d{2}-\d{2}", "max_tokens": 20},
        ),
        (
            "grammar='sql_select.lark' (a bundled Lark grammar)",
            "Write an SQL query that lists the names of users older than 30.",
            {"grammar": "sql_select.lark", "max_tokens": 60},
        ),
    ]


def _stream_to(out: TextIO, lm: Any, prompt: str, options: dict[str, Any]) -> Any:
    """Stream one generation to ``out`` with a rate line; returns its ``Result`` (None on a
    generation error, which is reported inline)."""
    from grammarsd.api.generate import stream
    from grammarsd.errors import GenerationError

    start = time.perf_counter()
    pieces = stream(lm, prompt, **options)
    try:
        while True:
            out.write(next(pieces))
            out.flush()
    except StopIteration as stop:
        result = stop.value
    except GenerationError as exc:
        out.write(f"\n  [{type(exc).__name__}: {exc.message}]\n")
        return None
    elapsed = time.perf_counter() - start
    n = result.stats.tokens
    out.write(
        f"\n  [{n} tokens in {elapsed:.2f} s: {n / elapsed:.1f} tokens/s, "
        f"{result.stats.forced_tokens} forced, finish {result.finish_reason}]\n"
    )
    return result


def _add_generate(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "generate",
        help="stream a (constrained) generation",
        description="Generate from PROMPT, optionally constrained by a JSON Schema file, a regex, "
        "a grammar (Lark/GBNF file or bundled name) or a list of choices, streaming the output.",
    )
    p.add_argument("prompt", help="the user message")
    spec = p.add_mutually_exclusive_group()
    spec.add_argument("--schema", metavar="FILE", help="JSON Schema file")
    spec.add_argument("--regex", metavar="R", help="Python regex for the whole output")
    spec.add_argument("--grammar", metavar="FILE_OR_NAME", help="Lark/GBNF file or bundled name")
    spec.add_argument("--choices", metavar="A,B,...", help="comma-separated alternatives")
    p.add_argument("--model", default=None, help="built-in name, path or hub id (default: smollm2)")
    p.add_argument("--max-tokens", type=int, default=256, help="token budget (>= 1)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    p.add_argument("--seed", type=int, default=None, help="noise seed for sampling")
    p.set_defaults(func=_run_generate)


def _run_generate(args: argparse.Namespace, out: TextIO) -> int:
    import json
    from pathlib import Path

    from grammarsd.api.models import load_model

    options: dict[str, Any] = {
        "max_tokens": args.max_tokens, "temperature": args.temperature, "seed": args.seed
    }
    if args.schema is not None:
        options["schema"] = json.loads(Path(args.schema).read_text(encoding="utf-8"))
    elif args.regex is not None:
        options["regex"] = args.regex
    elif args.grammar is not None:
        path = Path(args.grammar)
        options["grammar"] = path.read_text(encoding="utf-8") if path.is_file() else args.grammar
    elif args.choices is not None:
        options["choices"] = args.choices.split(",")
    lm = load_model(args.model)
    return 0 if _stream_to(out, lm, args.prompt, options) is not None else 1


def _prompt_ids(tokenizer: Any, prompt: str) -> list[int]:
    """Token ids of ``prompt`` as a single user turn (chat template when the tokenizer has one)."""
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
        )
        ids: list[int] = tokenizer.encode(text, add_special_tokens=False)
        return ids
    return list(tokenizer.encode(prompt, add_special_tokens=True))


def _add_bench(subparsers: Any) -> None:
    from grammarsd.bench.maskbench import add_arguments, run_from_args

    p = subparsers.add_parser("bench", help="benchmarks against peer engines")
    benches = p.add_subparsers(dest="bench", required=True, metavar="BENCH")
    mb = benches.add_parser(
        "maskbench",
        help="token-mask correctness and speed per JSON Schema (grammarsd vs peers)",
        description="Run MaskBench: compile each schema, check valid and invalid instances token by "
        "token, time every mask; resumable results, report and plots under --out.",
    )
    add_arguments(mb)
    mb.set_defaults(func=run_from_args)

    from grammarsd.bench import jsonschemabench

    jsb = benches.add_parser(
        "jsonschemabench",
        help="generate for real-world JSON Schemas with one model, every engine side by side",
        description="JSONSchemaBench: coverage (declared, empirical, compliance) and efficiency "
        "(GCT, TTFT, TPOT) of grammarsd and its peers, driven through one model and decode loop; "
        "resumable results, report and plots under --out.",
    )
    jsonschemabench.add_arguments(jsb)
    jsb.set_defaults(func=jsonschemabench.run_from_args)

    from grammarsd.bench import test_suite

    ts = benches.add_parser(
        "test-suite",
        help="judge the JSON Schema compiler with the official JSON Schema Test Suite",
        description="Compile every schema of the JSON Schema Test Suite: each must be refused "
        "(SchemaUnsupportedError) or agree with every valid/invalid label. Prints the per-keyword "
        "table; exit status 1 when any answer is wrong.",
    )
    test_suite.add_arguments(ts)
    ts.set_defaults(func=test_suite.run_from_args)


_SUBCOMMANDS: tuple[Callable[[Any], None], ...] = (_add_demo, _add_generate, _add_bench)
