"""MaskBench runner: token-mask correctness and speed of grammarsd and its peers, schema by schema.

A MaskBench data directory holds one JSON file per schema, ``{"schema": ..., "tests": [{"valid":
bool, "data": ...}, ...]}``. Every instance is serialized with ``json.dumps(data)`` (default
separators) and tokenized once, in the parent process, with one tokenizer (Llama-3 by default), so
every engine sees the same token ids. For each engine and schema a worker process

1. compiles the schema and fills the first mask: the **compile time** (time to first mask); the
   engine's one-time set-up and JIT warm-up are measured apart when the worker starts;
2. for each instance resets the matcher and, for each token, fills the mask (timed), checks that the
   token is allowed and accepts it, then checks that EOS is allowed. A valid instance must pass every
   check (else *valid rejected*); an invalid one must fail some check (else *invalid accepted*).

A schema passes when it compiles (or its language is proved empty) and no instance gets a wrong
answer. Statuses of one (engine,
schema) record:

``ok``             compiled and every instance ran (wrong answers are counted in the record)
``empty_language`` the engine proved that no instance is valid (one of the engine's
                   ``empty_language`` errors): right when the file has no valid instance, every
                   valid one counts as rejected otherwise
``compile_error``  the engine refused the schema (one of the engine's ``refusals``)
``timeout``        compile plus instances took longer than the per-schema limit; the worker is killed
``error``          any other exception, or the worker process died (a crash); the run goes on

Output directory layout (``--out``), resumable: a rerun skips (engine, schema) pairs already there::

    config.json            tokenizer and data directory of the run (a rerun must match)
    results/<engine>.jsonl one record per schema (see ``SchemaRecord``)
    warmup.jsonl           one line per worker start: set-up and warm-up seconds
    environment.json       hardware and versions
    report.md, *.png       written by ``grammarsd.bench.report``

Workers are forked where the platform allows it (they inherit the loaded tokenizer) and spawned
elsewhere; one worker runs at a time, so the benchmark is single-threaded. Engines take turns over
chunks of ``turn`` schemas, each keeping its worker between turns: a machine whose speed drifts
over minutes slows every engine alike, so their ratios hold (run one engine after another, one
commit's compile ratio to llguidance came out 5.4x and 8.5x in two runs ten minutes apart).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Literal, TextIO

import numpy as np

from grammarsd.bench.engines import ENGINES, Engine, engine_class
from grammarsd.bench.workers import (
    BenchError,
    Reply,
    Worker,
    describe,
    progress,
    read_json,
    read_jsonl,
    serve,
    start_logged,
)
from grammarsd.errors import GrammarsdError

Status = Literal["ok", "empty_language", "compile_error", "timeout", "error"]

# (schema, text) pairs that reach the paths a JIT compiles lazily: string bodies, counted strings,
# nullable values (two live scans), numbers, enums
WARMUP_CASES: tuple[tuple[dict[str, Any], str], ...] = (
    (
        {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "n": {"type": "integer"},
                "note": {"type": ["string", "null"], "maxLength": 100},
                "x": {"type": "number"},
                "tag": {"enum": ["a", "b"]},
            },
        },
        '{"name": "warm", "n": 1, "note": "a longer note, é", "x": -1.25, "tag": "b"}',
    ),
)


# -- data ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instance:
    """One test instance: its label and the token ids of ``json.dumps(data)``."""

    valid: bool
    tokens: tuple[int, ...]


@dataclass(frozen=True)
class SchemaCase:
    """One MaskBench file: ``name`` is the file name (the key of its results)."""

    name: str
    schema: Any
    instances: tuple[Instance, ...]


@dataclass
class SchemaRecord:
    """The result of one engine on one schema (one JSON line).

    ``compile_s`` is the time to first mask (``None`` unless compiled); ``mask_ns`` holds every mask
    fill in nanoseconds, in order (one per token plus one per instance for the EOS check; empty
    unless ``status == "ok"``); ``wrong`` lists ``{"test", "kind", "at"}`` for each wrong answer,
    ``at`` being the token index of the first failed check (``len(tokens)`` for EOS, ``None`` for an
    invalid instance accepted). ``inconsistent`` counts tokens the mask allowed but the engine then
    refused to accept.
    """

    schema: str
    engine: str
    status: Status
    error: str | None = None
    compile_s: float | None = None
    n_valid: int = 0
    n_invalid: int = 0
    valid_rejected: int = 0
    invalid_accepted: int = 0
    inconsistent: int = 0
    wrong: list[dict[str, Any]] = field(default_factory=list)
    mask_ns: list[int] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Compiled (or proved empty), ran, and gave no wrong answer."""
        return (self.status in ("ok", "empty_language") and self.valid_rejected == 0
                and self.invalid_accepted == 0)


class MaskBenchError(BenchError):
    """The benchmark cannot run: bad data directory, unreadable file, engine that cannot start.

    ``path`` names the offending file or directory when there is one; for malformed JSON,
    ``line`` and ``column`` (1-based) say where.
    """


def spread(items: Sequence[Any], limit: int | None) -> list[Any]:
    """``limit`` of ``items`` evenly spread over their order (all when ``limit`` is None or larger);
    deterministic, so reruns select the same ones."""
    if limit is None or limit >= len(items):
        return list(items)
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    return [items[i * len(items) // limit] for i in range(limit)]


def schema_files(data_dir: Path, limit: int | None = None) -> list[Path]:
    """The ``*.json`` files of ``data_dir``, sorted by name; with ``limit``, ``limit`` of them
    evenly spread over that order (deterministic, so reruns select the same files).

    Raises
    ------
    MaskBenchError
        If ``data_dir`` is not a directory or has no ``*.json`` file.
    """
    if not data_dir.is_dir():
        raise MaskBenchError("not a directory", path=data_dir)
    files = sorted(data_dir.glob("*.json"))
    if not files:
        raise MaskBenchError("no *.json files", path=data_dir)
    return spread(files, limit)


def load_case(path: Path, tokenizer: Any) -> SchemaCase:
    """Read one MaskBench file and tokenize its instances (``json.dumps(data)``, no specials).

    Raises
    ------
    MaskBenchError
        If the file is not JSON (with line and column) or lacks ``schema`` / ``tests`` /
        ``valid`` / ``data``.
    """
    doc = read_json(path, MaskBenchError)
    if not isinstance(doc, dict) or "schema" not in doc:
        raise MaskBenchError('not a MaskBench file: no "schema" key', path=path)
    tests = doc.get("tests", [])
    if not isinstance(tests, list):
        raise MaskBenchError('"tests" is not a list', path=path)
    instances = []
    for i, t in enumerate(tests):
        if not isinstance(t, dict) or not isinstance(t.get("valid"), bool) or "data" not in t:
            raise MaskBenchError(f'tests[{i}] needs a boolean "valid" and a "data"', path=path)
        ids = tokenizer.encode(json.dumps(t["data"]), add_special_tokens=False)
        instances.append(Instance(valid=t["valid"], tokens=tuple(int(x) for x in ids)))
    return SchemaCase(name=path.name, schema=doc["schema"], instances=tuple(instances))


# -- inside a worker ----------------------------------------------------------------------------


def _allowed(bitmask: np.ndarray, token: int) -> bool:
    return bool((int(bitmask[0, token >> 5]) >> (token & 31)) & 1)


def run_case(engine: Engine, case: SchemaCase, bitmask: np.ndarray) -> SchemaRecord:
    """Compile ``case.schema`` with ``engine`` and check every instance (see the module docstring).

    ``bitmask`` is the ``int32[1, ceil(V / 32)]`` buffer the matcher writes into. Exceptions in the
    engine become ``compile_error`` (a refusal) or ``error`` records; nothing propagates.
    """
    rec = SchemaRecord(schema=case.name, engine=engine.name, status="ok")
    rec.n_valid = sum(i.valid for i in case.instances)
    rec.n_invalid = len(case.instances) - rec.n_valid
    start = time.perf_counter()
    try:
        m = engine.matcher(engine.compile(case.schema), bitmask)
        m.fill()
    except engine.empty_language as e:
        rec.status, rec.error = "empty_language", describe(e)
        rec.wrong = [{"test": k, "kind": "valid_rejected", "at": 0}
                     for k, inst in enumerate(case.instances) if inst.valid]
        rec.valid_rejected = len(rec.wrong)
        return rec
    except engine.refusals as e:
        rec.status, rec.error = "compile_error", describe(e)
        return rec
    except Exception as e:
        rec.status, rec.error = "error", f"while compiling: {describe(e)}"
        return rec
    rec.compile_s = time.perf_counter() - start
    clock = time.perf_counter_ns
    times = rec.mask_ns
    try:
        for k, inst in enumerate(case.instances):
            m.reset()
            failed_at: int | None = None
            for j, tok in enumerate(inst.tokens):
                t0 = clock()
                m.fill()
                times.append(clock() - t0)
                if not _allowed(bitmask, tok):
                    failed_at = j
                    break
                if not m.accept(tok):
                    rec.inconsistent += 1
                    failed_at = j
                    break
            else:
                t0 = clock()
                m.fill()
                times.append(clock() - t0)
                if not _allowed(bitmask, engine.eos_id):
                    failed_at = len(inst.tokens)
            if inst.valid and failed_at is not None:
                rec.valid_rejected += 1
                rec.wrong.append({"test": k, "kind": "valid_rejected", "at": failed_at})
            elif not inst.valid and failed_at is None:
                rec.invalid_accepted += 1
                rec.wrong.append({"test": k, "kind": "invalid_accepted", "at": None})
    except Exception as e:
        return SchemaRecord(
            schema=case.name,
            engine=engine.name,
            status="error",
            error=f"while matching: {describe(e)}",
            compile_s=rec.compile_s,
        )
    return rec


def _warm_up(engine: Engine, tokenizer: Any) -> float:
    """Compile small schemas and run one instance each (``WARMUP_CASES``, then the engine's own
    ``warmup_cases``); returns seconds (JIT, caches, first calls)."""
    start = time.perf_counter()
    bitmask = np.zeros((1, (engine.vocab_size + 31) // 32), dtype=np.int32)
    for schema, text in WARMUP_CASES + engine.warmup_cases:
        ids = tuple(tokenizer.encode(text, add_special_tokens=False))
        rec = run_case(engine, SchemaCase("warm-up", schema, (Instance(True, ids),)), bitmask)
        if not rec.passed:
            raise RuntimeError(f"warm-up failed: {rec.status} {rec.error or rec.wrong}")
    return time.perf_counter() - start


_TOKENIZERS: dict[str, Any] = {}


def _tokenizer(name: str) -> Any:
    """The tokenizer ``name`` (a ``grammarsd.load_tokenizer`` argument), loaded once per process;
    forked workers inherit the parent's."""
    if name not in _TOKENIZERS:
        from grammarsd.api.models import load_tokenizer

        _TOKENIZERS[name] = load_tokenizer(name)
    return _TOKENIZERS[name]


def _worker_setup(engine_spec: str, tokenizer_name: str) -> tuple[dict[str, Any], Any]:
    """Set up one engine in a worker: returns its timings and the case handler."""
    os.environ.setdefault("RAYON_NUM_THREADS", "1")  # single-threaded peers (Rust thread pools)
    tokenizer = _tokenizer(tokenizer_name)
    start = time.perf_counter()
    engine = engine_class(engine_spec)(tokenizer)
    setup_s = time.perf_counter() - start
    warmup_s = _warm_up(engine, tokenizer)
    bitmask = np.zeros((1, (engine.vocab_size + 31) // 32), dtype=np.int32)
    info = {"engine": engine.name, "setup_s": setup_s, "warmup_s": warmup_s}
    return info, lambda case: asdict(run_case(engine, case, bitmask))


def _worker_main(conn: Connection, engine_spec: str, tokenizer_name: str) -> None:
    serve(conn, lambda: _worker_setup(engine_spec, tokenizer_name))


# -- in the parent ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MaskBenchConfig:
    """One benchmark run.

    Attributes
    ----------
    data_dir : the MaskBench directory (``*.json`` files).
    out_dir : where results go (created; reused to resume).
    engines : engine names (see ``grammarsd.bench.engines.ENGINES``) or ``"module:attr"`` specs.
    limit : run this many schemas, spread evenly over the sorted file list (``None``: all).
    timeout_s : per (engine, schema) limit on compile plus all instances, in seconds.
    tokenizer : a ``grammarsd.load_tokenizer`` name or path (``"llama3"`` is MaskBench's).
    progress : show a tqdm progress bar on stderr.
    turn : schemas each engine runs before the next engine's turn (at least 1).
    """

    data_dir: Path
    out_dir: Path
    engines: tuple[str, ...] = tuple(ENGINES)
    limit: int | None = None
    timeout_s: float = 60.0
    tokenizer: str = "llama3"
    progress: bool = True
    turn: int = 50

    def __post_init__(self) -> None:
        if not self.engines:
            raise ValueError("no engines given")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {self.timeout_s}")
        if self.turn < 1:
            raise ValueError(f"turn must be >= 1, got {self.turn}")


def results_path(out_dir: Path, engine: str) -> Path:
    """The JSON-lines file of ``engine``'s records under ``out_dir``."""
    return out_dir / "results" / f"{engine}.jsonl"


def read_records(path: Path) -> Iterator[SchemaRecord]:
    """The records of one results file (none when it does not exist); a torn last line is
    dropped, any other bad line raises ``MaskBenchError`` with its line number."""
    return read_jsonl(path, SchemaRecord, MaskBenchError)


def _check_config(cfg: MaskBenchConfig) -> None:
    """Refuse to mix results of different tokenizers in one output directory."""
    path = cfg.out_dir / "config.json"
    mine = {"tokenizer": cfg.tokenizer, "data_dir": str(cfg.data_dir.resolve())}
    if path.exists():
        theirs = json.loads(path.read_text(encoding="utf-8"))
        if theirs.get("tokenizer") != mine["tokenizer"]:
            raise MaskBenchError(
                f"results here are for tokenizer {theirs.get('tokenizer')!r}, not "
                f"{cfg.tokenizer!r}",
                path=cfg.out_dir,
                hint="use another --out directory",
            )
    path.write_text(json.dumps(mine, indent=2) + "\n", encoding="utf-8")


def run_maskbench(cfg: MaskBenchConfig) -> dict[str, list[SchemaRecord]]:
    """Run (or resume) the benchmark; returns each engine's records for the selected schemas.

    Records are appended to ``results/<engine>.jsonl`` as they finish, so an interrupted run loses
    at most the schema in flight. Engine set-up and warm-up timings go to ``warmup.jsonl``.

    Raises
    ------
    MaskBenchError
        Bad data (missing directory, a file that is not JSON, ...) before anything runs, or an
        engine whose worker cannot start.
    """
    files = schema_files(cfg.data_dir, cfg.limit)
    tokenizer = _tokenizer(cfg.tokenizer)
    cases = [load_case(p, tokenizer) for p in files]
    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    (cfg.out_dir / "results").mkdir(exist_ok=True)
    _check_config(cfg)
    names = [engine_class(spec).name for spec in cfg.engines]
    done = {
        name: {r.schema: r for r in read_records(results_path(cfg.out_dir, name))} for name in names
    }
    todo = sum(c.name not in done[name] for name in names for c in cases)
    total = len(cases) * len(names)
    bar = progress(total, initial=total - todo, unit="schema", enabled=cfg.progress)
    runners = [_EngineRunner(cfg, spec, name, done[name], bar)
               for spec, name in zip(cfg.engines, names, strict=True)]
    try:
        for start in range(0, len(cases), cfg.turn):  # the engines take turns
            for runner in runners:
                runner.run(cases[start : start + cfg.turn])
    finally:
        for runner in runners:
            runner.close()
        bar.close()
    return {name: [done[name][c.name] for c in cases] for name in names}


class _EngineRunner:
    """One engine's worker (started on first use, restarted after a crash or timeout) and its
    results file, kept open across the engine's turns."""

    def __init__(self, cfg: MaskBenchConfig, spec: str, name: str,
                 done: dict[str, SchemaRecord], bar: Any) -> None:
        self.cfg, self.name, self.done, self.bar = cfg, name, done, bar
        self.worker = Worker(
            name,
            _worker_main,
            (spec, cfg.tokenizer),
            setup_timeout_s=max(300.0, cfg.timeout_s),
            method="fork",  # workers inherit the loaded tokenizer
            hint="install the bench extra (pip install 'grammarsd[bench]') or leave the engine "
            "out of --engines",
        )
        self.out: TextIO | None = None

    def run(self, cases: list[SchemaCase]) -> None:
        """Run the cases of this turn that have no record yet, appending their records."""
        cfg, name, worker = self.cfg, self.name, self.worker
        cases = [c for c in cases if c.name not in self.done]
        if cases:
            self.bar.set_description(name)
        if cases and self.out is None:
            self.out = results_path(cfg.out_dir, name).open("a", encoding="utf-8")
        for case in cases:
            if not worker.alive:
                start_logged(worker, cfg.out_dir / "warmup.jsonl", MaskBenchError)
            rec = _record(worker.run(case, cfg.timeout_s), case, name, cfg.timeout_s)
            if rec.status in ("timeout", "error") and cfg.progress:
                self.bar.write(f"{name} {case.name}: {rec.status} {rec.error or ''}".rstrip()[:300])
            assert self.out is not None
            self.out.write(json.dumps(asdict(rec)) + "\n")
            self.out.flush()
            self.done[case.name] = rec
            self.bar.update(1)

    def close(self) -> None:
        self.worker.close()
        if self.out is not None:
            self.out.close()


def _record(reply: Reply, case: SchemaCase, name: str, timeout_s: float) -> SchemaRecord:
    """The record of one worker reply (a timeout or a dead worker is the case's failure)."""
    if reply.status == "ok":
        return SchemaRecord(**reply.value)
    if reply.status == "timeout":
        return SchemaRecord(case.name, name, "timeout", error=f"over {timeout_s:g} s")
    return SchemaRecord(
        case.name, name, "error", error=f"worker died (exit code {reply.exit_code})"
    )


# -- command line -------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the MaskBench arguments on ``parser`` (shared by the script and the CLI)."""
    parser.add_argument("data_dir", type=Path, help="MaskBench directory of *.json files")
    parser.add_argument("--limit", type=int, default=None, help="run N schemas, evenly spread")
    parser.add_argument(
        "--engines",
        default=",".join(ENGINES),
        help=f"comma-separated engines (default: {','.join(ENGINES)}); 'module:attr' for custom",
    )
    parser.add_argument("--out", type=Path, default=Path("maskbench-out"), help="results directory")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per schema and engine")
    parser.add_argument("--tokenizer", default="llama3", help="tokenizer (default: llama3)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--turn", type=int, default=50,
                        help="schemas per engine turn: engines alternate so drift hits all alike")


def run_from_args(args: argparse.Namespace, out: TextIO) -> int:
    """Run the benchmark described by parsed ``args``, print the report to ``out``; exit status."""
    from grammarsd.bench.report import write_report

    engines = tuple(e.strip() for e in args.engines.split(",") if e.strip())
    try:  # usage errors: exit 2 with the reason, like argparse
        for spec in engines:
            engine_class(spec)
        if args.limit is not None and args.limit < 1:
            raise ValueError(f"--limit must be >= 1, got {args.limit}")
        if args.timeout <= 0:
            raise ValueError(f"--timeout must be > 0, got {args.timeout}")
        if not engines:
            raise ValueError("--engines is empty")
        if args.turn < 1:
            raise ValueError(f"--turn must be >= 1, got {args.turn}")
    except (ValueError, ImportError) as e:
        print(f"maskbench: {e}", file=sys.stderr)
        return 2
    cfg = MaskBenchConfig(
        data_dir=args.data_dir,
        out_dir=args.out,
        engines=engines,
        limit=args.limit,
        timeout_s=args.timeout,
        tokenizer=args.tokenizer,
        progress=not args.no_progress,
        turn=args.turn,
    )
    start = time.perf_counter()
    records = run_maskbench(cfg)
    elapsed = time.perf_counter() - start
    out.write(write_report(cfg, records, run_seconds=elapsed))
    out.write(f"\nresults, report and plots in {cfg.out_dir}/ ({elapsed:.0f} s this run)\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python bench/maskbench.py DATA_DIR [--limit N] [--engines ...] [--out DIR] ...``."""
    parser = argparse.ArgumentParser(
        prog="maskbench", description="MaskBench: token-mask correctness and speed per engine."
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run_from_args(args, sys.stdout)
    except GrammarsdError as e:
        print(f"maskbench: error: {e}", file=sys.stderr)
        return 1


__all__ = [
    "Instance",
    "MaskBenchConfig",
    "MaskBenchError",
    "SchemaCase",
    "SchemaRecord",
    "add_arguments",
    "load_case",
    "main",
    "read_records",
    "results_path",
    "run_case",
    "run_from_args",
    "run_maskbench",
    "schema_files",
    "spread",
]
