"""JSONSchemaBench runner: one model, one decode loop, every engine side by side, schema by schema.

Protocol (Geng et al. 2025, "Generating Structured Outputs from Language Models: Benchmark and
Studies"; the defaults of their evaluation code):

* **Prompt.** A fixed system message followed by two worked examples of the schema's subset
  ("Input:" schema, "Output:" instance), then the schema itself (``json.dumps(schema, indent=4)``) as
  the user message, through the model's chat template. Our demos and system message are our own
  (``jsonschemabench_demos.json``, built from the *train* split; tested to validate).
* **Decoding.** Greedy, at most ``max_tokens`` (500) tokens, in grammarsd's decode loop
  (``grammarsd.decoding.loop.Decoding``) for every engine, so engines differ only in their masks:
  each engine's mask is copied into the loop's bitmask row (``EngineConstraint``). Tokens that an
  engine's mask forces are fed in one forward pass for every engine alike.
* **Timeouts.** 40 s to compile, 60 s to generate (checked after every token). A worker that does not
  answer within both plus a margin is killed; that schema is recorded as a compile timeout.
* **Timings** (per schema): GCT, the grammar compilation time; TTFT, from the start of compilation
  to the first token the model produced (prefill included; tokens forced before the first forward
  pass do not count as "first"); TPOT, the time per output token after that one:
  ``(end - first) / (tokens - tokens at first)``, counting every committed token (forced ones and EOS
  included), in milliseconds; TGT, the whole generation.
* **Validity.** The output text (stripped; a fenced ``` block or the outermost ``{...}`` when the raw
  text does not parse, which only unconstrained output needs) must parse as JSON and validate with
  ``jsonschema``'s Draft 2020-12 validator with format checking (plus ``ipv4``, ``ipv6`` and
  ``uuid`` checks, as the benchmark adds); a schema that is not a valid 2020-12 schema makes every
  output invalid. Validation runs in the parent process, independent of every engine.

Engines are those of ``grammarsd.bench.engines`` plus ``unconstrained`` (no grammar: the baseline
row). Each engine runs in its own worker process (spawned; it loads the model itself), engines are
interleaved schema by schema so that machine load affects them alike, and ``workers`` lanes run in
parallel. Output directory (``--out``), resumable: a rerun skips (engine, schema) pairs already there::

    config.json              model, protocol settings (a rerun must match)
    results/<engine>.jsonl   one ``JsbRecord`` per schema
    warmup.jsonl             one line per worker start: model load and warm-up seconds
    environment.json, report.md, coverage.png, tpot.png   (``jsonschemabench_report``)
"""

from __future__ import annotations

import argparse
import csv
import ipaddress
import json
import os
import queue
import re
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import resources
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Literal, TextIO

from grammarsd.bench.engines import ENGINES, Engine, EngineConstraint, engine_class
from grammarsd.bench.maskbench import spread
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

UNCONSTRAINED = "unconstrained"
"""The engine name of free generation (no grammar), the baseline row."""

DEFAULT_ENGINES = ("grammarsd", "xgrammar", "llguidance", "outlines-core", UNCONSTRAINED)
HUB_DATASET = "epfl-dlab/JSONSchemaBench"
PROMPT_VERSION = 1
"""Bumped when the prompt format or demos change: results of another version are not mixed."""

CompileStatus = Literal["ok", "unsupported", "compile_timeout", "error", "prompt_too_long"]
DecodeStatus = Literal["ok", "max_tokens", "decoding_timeout", "error"]


class JsonSchemaBenchError(BenchError):
    """The benchmark cannot run: missing data, unknown subset, a schema file that is not JSON, an
    output directory of another configuration, an engine that cannot start."""


# -- data ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchSchema:
    """One schema of the benchmark; ``key`` (``subset/id``) names its results."""

    subset: str
    id: str
    schema: Any

    @property
    def key(self) -> str:
        return f"{self.subset}/{self.id}"


def read_manifest(data_dir: Path) -> list[tuple[str, str, str]]:
    """``(subset, id, split)`` rows of ``data_dir/MANIFEST.tsv`` (tab-separated, with a header naming
    at least ``subset``, ``id`` and ``split``).

    Raises
    ------
    JsonSchemaBenchError
        If the directory or the manifest is missing or lacks those columns.
    """
    if not data_dir.is_dir():
        raise JsonSchemaBenchError("not a directory", path=data_dir)
    path = data_dir / "MANIFEST.tsv"
    if not path.is_file():
        raise JsonSchemaBenchError(
            "no MANIFEST.tsv",
            path=data_dir,
            hint="the data directory holds <subset>/<id>.json files "
            "and a MANIFEST.tsv with subset, id and split columns",
        )
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t")
        missing = {"subset", "id", "split"} - set(reader.fieldnames or ())
        if missing:
            raise JsonSchemaBenchError(f"missing column(s) {', '.join(sorted(missing))}", path=path)
        return [(r["subset"], r["id"], r["split"]) for r in reader]


def load_local(
    data_dir: Path, split: str, subsets: Sequence[str] | None, limit: int | None
) -> list[BenchSchema]:
    """The schemas of ``split`` in ``subsets`` (all subsets when None), ``limit`` per subset, in
    subset order, ids sorted.

    Raises
    ------
    JsonSchemaBenchError
        For an unknown subset or split (naming the known ones) and for a schema file that is missing
        or not JSON (with line and column).
    """
    rows = read_manifest(data_dir)
    known = sorted({s for s, _, _ in rows})
    for name in subsets or ():
        if name not in known:
            raise JsonSchemaBenchError(
                f"unknown subset {name!r}; subsets in {data_dir}: {', '.join(known)}"
            )
    splits = sorted({sp for _, _, sp in rows})
    if split not in splits:
        raise JsonSchemaBenchError(f"no {split!r} split; splits in {data_dir}: {', '.join(splits)}")
    out: list[BenchSchema] = []
    for subset in subsets or known:
        ids = sorted(i for s, i, sp in rows if s == subset and sp == split)
        for id_ in spread(ids, limit):
            out.append(BenchSchema(subset, id_, _read_schema(data_dir / subset / f"{id_}.json")))
    return out


def _read_schema(path: Path) -> Any:
    if not path.is_file():
        raise JsonSchemaBenchError("listed in MANIFEST.tsv but missing", path=path)
    return read_json(path, JsonSchemaBenchError)


def load_hub(
    name: str, split: str, subsets: Sequence[str] | None, limit: int | None
) -> list[BenchSchema]:
    """The same selection from the Hugging Face dataset ``name`` (one config per subset, columns
    ``unique_id`` and ``json_schema``); needs the ``datasets`` package and a reachable hub."""
    try:
        import datasets
    except ImportError:
        raise JsonSchemaBenchError(
            f"loading {name!r} from the hub needs the datasets package",
            hint="pip install datasets, or pass --data DIR (a local copy with MANIFEST.tsv)",
        ) from None
    try:
        names = list(subsets or datasets.get_dataset_config_names(name))
        out: list[BenchSchema] = []
        for subset in names:
            if subset == "default":
                continue
            table = datasets.load_dataset(name, subset, split=split)
            rows = sorted(zip(table["unique_id"], table["json_schema"], strict=True))
            for id_, text in spread(rows, limit):
                out.append(BenchSchema(subset, str(id_), json.loads(text)))
        return out
    except Exception as e:
        raise JsonSchemaBenchError(
            f"cannot load {name!r} from the hub: {type(e).__name__}: {e}",
            hint="pass --data DIR (a local copy with MANIFEST.tsv) where no hub is reachable",
        ) from e


# -- prompt -------------------------------------------------------------------------------------


@cache
def demos() -> dict[str, Any]:
    """The packaged system message and two demos per subset (``jsonschemabench_demos.json``)."""
    text = (
        resources.files("grammarsd.bench")
        .joinpath("jsonschemabench_demos.json")
        .read_text(encoding="utf-8")
    )
    data: dict[str, Any] = json.loads(text)
    return data


def messages(schema: BenchSchema) -> list[dict[str, str]]:
    """The chat messages of one schema: system message with its subset's two examples, then the
    schema (indented by 4) as the user message.

    Raises
    ------
    JsonSchemaBenchError
        If no demos exist for the schema's subset.
    """
    d = demos()
    examples = d["subsets"].get(schema.subset)
    if not examples:
        raise JsonSchemaBenchError(
            f"no prompt examples for subset {schema.subset!r}; known: {', '.join(d['subsets'])}"
        )
    parts = [d["system_message"], "", "Examples:"]
    for n, ex in enumerate(examples, 1):
        parts += [
            f"Example {n}:",
            "Input: " + json.dumps(ex["schema"], indent=4),
            "Output: " + json.dumps(ex["output"]),
        ]
    return [
        {"role": "system", "content": "\n".join(parts)},
        {"role": "user", "content": json.dumps(schema.schema, indent=4)},
    ]


def plain_prompt(chat: list[dict[str, str]]) -> str:
    """The messages as one text, for a model without a chat template: each message's content,
    then ``Output:`` as in the examples."""
    return "\n\n".join(m["content"] for m in chat) + "\nOutput: "


# -- validity (in the parent, independent of every engine) ---------------------------------------


def extract_json(text: str) -> Any:
    """The JSON value of an output: the stripped text, else a fenced block, else the outermost
    ``{...}``. Raises ``ValueError`` (with the first parse error) when none parses."""
    candidates = [text.strip()]
    fence = re.search(r"```(?:json)?\s*(.*?)```", text, re.DOTALL)
    if fence:
        candidates.append(fence.group(1).strip())
    lo, hi = text.find("{"), text.rfind("}")
    if 0 <= lo < hi:
        candidates.append(text[lo : hi + 1])
    first: json.JSONDecodeError | None = None
    for c in candidates:
        try:
            return json.loads(c)
        except json.JSONDecodeError as e:
            first = first or e
    raise ValueError(f"not JSON: {first}")


def _ipv4(value: object) -> bool:
    return not isinstance(value, str) or bool(ipaddress.IPv4Address(value))


def _ipv6(value: object) -> bool:
    return not isinstance(value, str) or bool(ipaddress.IPv6Address(value))


def _uuid(value: object) -> bool:
    return not isinstance(value, str) or bool(uuid.UUID(value))


@cache
def format_checker() -> Any:
    """jsonschema's ``FormatChecker`` plus strict ``ipv4``, ``ipv6`` and ``uuid`` checks (the
    benchmark's validation adds the same three)."""
    from jsonschema import FormatChecker

    checker = FormatChecker()
    for name, check in (("ipv4", _ipv4), ("ipv6", _ipv6), ("uuid", _uuid)):
        checker.checks(name, raises=ValueError)(check)
    return checker


def judge(text: str, schema: Any) -> tuple[bool, str]:
    """``(valid, why)`` for one output: see the module docstring."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        value = extract_json(text)
    except ValueError as e:
        return False, str(e)
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as e:
        return False, f"the schema is not a valid 2020-12 schema: {e.message}"
    error = next(
        iter(Draft202012Validator(schema, format_checker=format_checker()).iter_errors(value)),
        None,
    )
    if error is not None:
        where = "/" + "/".join(str(p) for p in error.absolute_path)
        return False, f"at {where}: {error.message}"[:500]
    return True, "valid"


# -- records ------------------------------------------------------------------------------------


@dataclass
class JsbRecord:
    """One engine on one schema (one JSON line). Times in seconds except ``tpot_ms``; ``None``
    where a step did not happen. ``valid``/``why`` are filled by the parent after the run."""

    key: str
    engine: str
    compile_status: CompileStatus
    decode_status: DecodeStatus | None = None
    error: str | None = None
    gct_s: float | None = None
    ttft_s: float | None = None
    tpot_ms: float | None = None
    tgt_s: float | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    forced_tokens: int = 0
    output: str = ""
    valid: bool = False
    why: str = ""

    @property
    def subset(self) -> str:
        return self.key.split("/", 1)[0]

    @property
    def compiled(self) -> bool:
        """Declared coverage counts this: the engine compiled the schema."""
        return self.compile_status == "ok"


@dataclass(frozen=True)
class Job:
    """What a worker needs for one schema."""

    key: str
    schema: Any
    messages: list[dict[str, str]]


@dataclass(frozen=True)
class Protocol:
    """The settings that make results comparable (a rerun into the same directory must match)."""

    model: str | None = None
    device: str = "cpu"
    max_tokens: int = 500
    compile_timeout_s: float = 40.0
    generation_timeout_s: float = 60.0
    prompt_version: int = PROMPT_VERSION


# -- inside a worker ----------------------------------------------------------------------------

WARMUP_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"ok": {"type": "boolean"}}}


class _Runner:
    """One engine plus the model, in a worker process."""

    def __init__(self, engine_spec: str, protocol: Protocol, threads: int | None) -> None:
        import torch

        from grammarsd.api.models import load_model

        if threads:
            torch.set_num_threads(threads)
        start = time.perf_counter()
        self.lm = load_model(protocol.model, device=protocol.device)
        self.load_s = time.perf_counter() - start
        self.protocol = protocol
        tok = self.lm.tokenizer
        self.info = self.lm.tokenizer_info
        self.engine: Engine | None = None
        self.name = UNCONSTRAINED
        if engine_spec != UNCONSTRAINED:
            self.engine = engine_class(engine_spec)(tok)
            self.name = self.engine.name
            if self.engine.vocab_size > self.info.vocab_size:
                raise JsonSchemaBenchError(
                    f"{self.name}: tokenizer has {self.engine.vocab_size} tokens, the model only "
                    f"{self.info.vocab_size} logits"
                )
        self.pad = tok.pad_token_id if tok.pad_token_id is not None else self.info.eos_ids[0]
        self.context = int(getattr(self.lm.model.config, "max_position_embeddings", 1 << 30))

    def warm_up(self) -> float:
        """One short constrained generation (JIT, caches, first calls); returns seconds."""
        start = time.perf_counter()
        job = Job("warm-up/0", WARMUP_SCHEMA, [{"role": "user", "content": "Answer in JSON."}])
        rec = self.run(job, max_tokens=8)
        if rec.compile_status != "ok" or rec.decode_status == "error":
            raise RuntimeError(f"warm-up failed: {rec.compile_status} {rec.error}")
        return time.perf_counter() - start

    def run(self, job: Job, max_tokens: int | None = None) -> JsbRecord:
        """Compile, then decode greedily under the protocol's limits; never raises."""
        try:
            return self._run(job, max_tokens or self.protocol.max_tokens)
        except Exception as e:
            return JsbRecord(job.key, self.name, "error", error=f"in the runner: {describe(e)}")

    def _run(self, job: Job, limit: int) -> JsbRecord:
        from grammarsd.api.generate import prompt_ids
        from grammarsd.decoding.loop import DecodeConfig, Decoding
        from grammarsd.decoding.samplers import SamplingParams

        p = self.protocol
        rec = JsbRecord(key=job.key, engine=self.name, compile_status="ok")
        tok = self.lm.tokenizer
        has_template = bool(getattr(tok, "chat_template", None))
        ids = prompt_ids(tok, job.messages if has_template else plain_prompt(job.messages))
        rec.prompt_tokens = len(ids)
        if len(ids) + limit > self.context:
            rec.compile_status = "prompt_too_long"
            rec.error = f"{len(ids)} prompt tokens + {limit} > context {self.context}"
            return rec
        start = time.perf_counter()
        constraint = None
        if self.engine is not None:
            try:
                compiled = self.engine.compile(job.schema)
            except self.engine.refusals as e:
                rec.compile_status, rec.error = "unsupported", describe(e)
                return rec
            except Exception as e:
                rec.compile_status, rec.error = "error", describe(e)
                return rec
            constraint = EngineConstraint(self.engine, compiled)
        compiled_at = time.perf_counter()
        rec.gct_s = compiled_at - start
        if rec.gct_s > p.compile_timeout_s:
            rec.compile_status = "compile_timeout"
            rec.error = f"compiled in {rec.gct_s:.1f} s > {p.compile_timeout_s:g} s"
            return rec
        first_at: float | None = None
        tokens_at_first = 0
        row = None
        try:
            dec = Decoding(
                self.lm.model,
                self.info,
                [ids],
                constraint,
                SamplingParams(temperature=0.0),
                DecodeConfig(max_tokens=limit),
                pad_id=self.pad,
            )
            for step, rows in enumerate(dec.steps()):
                row = rows[0]
                now = time.perf_counter()
                if first_at is None and (step >= 1 or row.finish is not None):
                    first_at, tokens_at_first = now, len(row.generated)
                if row.finish is None and now - compiled_at > p.generation_timeout_s:
                    rec.decode_status = "decoding_timeout"
                    rec.error = f"still generating after {p.generation_timeout_s:g} s"
                    break
            else:
                rec.decode_status = "max_tokens" if row and row.finish == "length" else "ok"
        except Exception as e:
            rec.decode_status, rec.error = "error", describe(e)
        end = time.perf_counter()
        if row is not None:
            rec.output = row.text_bytes.decode("utf-8", errors="replace")
            rec.output_tokens = len(row.generated)
            rec.forced_tokens = row.forced
        rec.tgt_s = end - start
        if first_at is not None:
            rec.ttft_s = first_at - start
            after = rec.output_tokens - tokens_at_first
            rec.tpot_ms = 1e3 * (end - first_at) / after if after > 0 else None
        return rec


def _worker_setup(
    engine_spec: str, protocol: Protocol, threads: int | None
) -> tuple[dict[str, Any], Any]:
    os.environ.setdefault("RAYON_NUM_THREADS", "1")  # peers' Rust thread pools: one thread
    runner = _Runner(engine_spec, protocol, threads)
    warmup_s = runner.warm_up()
    info = {"engine": runner.name, "load_s": runner.load_s, "warmup_s": warmup_s}
    return info, lambda job: asdict(runner.run(job))


def _worker_main(
    conn: Connection, engine_spec: str, protocol: Protocol, threads: int | None
) -> None:
    serve(conn, lambda: _worker_setup(engine_spec, protocol, threads))


# -- in the parent ------------------------------------------------------------------------------


@dataclass(frozen=True)
class JsbConfig:
    """One benchmark run.

    Attributes
    ----------
    data : a local directory (``<subset>/<id>.json`` + ``MANIFEST.tsv``) or ``hf:<dataset>``.
    out_dir : where results go (created; reused to resume).
    split, subsets, limit : the selection (``limit`` schemas per subset, evenly spread).
    engines : engine names (``grammarsd.bench.engines.ENGINES``, ``"module:attr"``) or
        ``"unconstrained"``.
    protocol : model and limits.
    workers : parallel lanes (each runs one process per engine).
    threads : torch threads per worker (None: torch's default).
    progress : a tqdm progress bar with ETA on stderr.
    kill_margin_s : a worker silent for both timeouts plus this margin is killed.
    """

    data: str
    out_dir: Path
    split: str = "val"
    subsets: tuple[str, ...] | None = None
    limit: int | None = None
    engines: tuple[str, ...] = DEFAULT_ENGINES
    protocol: Protocol = field(default_factory=Protocol)
    workers: int = 1
    threads: int | None = None
    progress: bool = True
    kill_margin_s: float = 60.0

    def __post_init__(self) -> None:
        if not self.engines:
            raise ValueError("no engines given")
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")
        p = self.protocol
        if p.max_tokens < 1 or p.compile_timeout_s <= 0 or p.generation_timeout_s <= 0:
            raise ValueError("max_tokens and the timeouts must be positive")


def select(cfg: JsbConfig) -> list[BenchSchema]:
    """The schemas ``cfg`` selects (from a local directory or the hub)."""
    if cfg.data.startswith("hf:"):
        return load_hub(cfg.data[3:], cfg.split, cfg.subsets, cfg.limit)
    return load_local(Path(cfg.data), cfg.split, cfg.subsets, cfg.limit)


def engine_name(spec: str) -> str:
    return UNCONSTRAINED if spec == UNCONSTRAINED else engine_class(spec).name


def results_path(out_dir: Path, engine: str) -> Path:
    return out_dir / "results" / f"{engine}.jsonl"


def read_records(path: Path) -> Iterator[JsbRecord]:
    """The records of one results file (none when it does not exist); a torn last line (a run
    killed mid-write) is dropped."""
    return read_jsonl(path, JsbRecord, JsonSchemaBenchError)


def _check_config(cfg: JsbConfig) -> None:
    path = cfg.out_dir / "config.json"
    mine = asdict(cfg.protocol)
    if path.exists():
        theirs = json.loads(path.read_text(encoding="utf-8"))
        if theirs != mine:
            raise JsonSchemaBenchError(
                f"{cfg.out_dir}: holds results of another configuration ({theirs}, not {mine})",
                hint="use another --out directory",
            )
    path.write_text(json.dumps(mine, indent=2) + "\n", encoding="utf-8")


def run_jsonschemabench(cfg: JsbConfig) -> dict[str, list[JsbRecord]]:
    """Run (or resume) the benchmark; returns each engine's records of the selected schemas.

    Records are appended as they finish, so an interrupted run loses at most the schemas in flight.

    Raises
    ------
    JsonSchemaBenchError
        Bad data or configuration before anything runs, or an engine whose worker cannot start.
    """
    schemas = select(cfg)
    if not schemas:
        raise JsonSchemaBenchError("the selection is empty")
    jobs = {s.key: Job(s.key, s.schema, messages(s)) for s in schemas}  # demos checked up front
    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    (cfg.out_dir / "results").mkdir(exist_ok=True)
    _check_config(cfg)
    names = {spec: engine_name(spec) for spec in cfg.engines}
    done = {
        name: {r.key: r for r in read_records(results_path(cfg.out_dir, name))}
        for name in names.values()
    }
    todo: queue.Queue[BenchSchema] = queue.Queue()
    remaining = 0
    for s in schemas:
        missing = [spec for spec, name in names.items() if s.key not in done[name]]
        if missing:
            todo.put(s)
            remaining += len(missing)
    total = len(schemas) * len(names)
    bar = progress(total, initial=total - remaining, unit="run", enabled=cfg.progress)
    lock = threading.Lock()
    outs = {
        name: results_path(cfg.out_dir, name).open("a", encoding="utf-8") for name in names.values()
    }
    errors: list[BaseException] = []

    def lane() -> None:
        workers: dict[str, Worker] = {}
        try:
            while not errors:
                try:
                    s = todo.get_nowait()
                except queue.Empty:
                    return
                for spec, name in names.items():
                    if s.key in done[name]:
                        continue
                    rec = _run_one(cfg, workers, spec, name, jobs[s.key])
                    rec.valid, rec.why = (
                        judge(rec.output, s.schema)
                        if _decoded(rec)
                        else (False, rec.error or rec.compile_status)
                    )
                    with lock:
                        outs[name].write(json.dumps(asdict(rec)) + "\n")
                        outs[name].flush()
                        done[name][s.key] = rec
                        bar.update(1)
                        if rec.error and rec.compile_status not in ("ok", "unsupported"):
                            bar.write(f"{name} {s.key}: {rec.compile_status} {rec.error}"[:300])
        except BaseException as e:  # stop every lane; re-raised in the caller's thread
            errors.append(e)
        finally:
            for w in workers.values():
                w.close()

    try:
        threads = [threading.Thread(target=lane, daemon=True) for _ in range(cfg.workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        bar.close()
        for f in outs.values():
            f.close()
    if errors:
        raise errors[0]
    return {name: [done[name][s.key] for s in schemas] for name in names.values()}


def _decoded(rec: JsbRecord) -> bool:
    return rec.compile_status == "ok" and rec.decode_status in (
        "ok",
        "max_tokens",
        "decoding_timeout",
    )


def _run_one(
    cfg: JsbConfig, workers: dict[str, Worker], spec: str, name: str, job: Job
) -> JsbRecord:
    """One engine on one schema in that lane's worker for the engine (started on demand)."""
    p = cfg.protocol
    worker = workers.get(spec)
    if worker is None or not worker.alive:
        worker = workers[spec] = Worker(
            name,
            _worker_main,
            (spec, p, cfg.threads),
            setup_timeout_s=600.0,
            hint="install the bench extra (pip install 'grammarsd[bench]') or leave the engine "
            "out of --engines",
        )
        start_logged(worker, cfg.out_dir / "warmup.jsonl", JsonSchemaBenchError)
    limit = p.compile_timeout_s + p.generation_timeout_s + cfg.kill_margin_s
    return _record(worker.run(job, limit), job.key, name, limit)


def _record(reply: Reply, key: str, name: str, limit: float) -> JsbRecord:
    if reply.status == "ok":
        return JsbRecord(**reply.value)
    if reply.status == "timeout":
        return JsbRecord(
            key,
            name,
            "compile_timeout",
            error=f"worker killed after {limit:g} s (the decode loop checks its own limit at every "
            "token, so compilation or one mask hung)",
        )
    return JsbRecord(key, name, "error", error=f"worker died (exit code {reply.exit_code})")


# -- command line -------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the JSONSchemaBench arguments on ``parser``."""
    parser.add_argument(
        "--data",
        default=f"hf:{HUB_DATASET}",
        help="a directory of <subset>/<id>.json files with MANIFEST.tsv, or hf:<dataset> "
        f"(default: hf:{HUB_DATASET}, needs the datasets package and a hub)",
    )
    parser.add_argument("--split", default="val", help="split (default: val)")
    parser.add_argument("--subsets", default=None, help="comma-separated subsets (default: all)")
    parser.add_argument("--limit", type=int, default=None, help="N schemas per subset, spread")
    parser.add_argument("--model", default=None, help="load_model name or path (default: smollm2)")
    parser.add_argument("--device", default="cpu", help="where the model runs: cpu, cuda (cpu)")
    parser.add_argument(
        "--engines",
        default=",".join(DEFAULT_ENGINES),
        help=f"comma-separated (default: {','.join(DEFAULT_ENGINES)}; also "
        f"{', '.join(e for e in ENGINES if e not in DEFAULT_ENGINES)}, 'module:attr')",
    )
    parser.add_argument("--out", type=Path, default=Path("jsonschemabench-out"), help="results")
    parser.add_argument("--workers", type=int, default=1, help="parallel lanes (default: 1)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads per worker")
    parser.add_argument("--max-tokens", type=int, default=500, help="per output (default: 500)")
    parser.add_argument("--compile-timeout", type=float, default=40.0, help="seconds (40)")
    parser.add_argument("--generation-timeout", type=float, default=60.0, help="seconds (60)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run_from_args(args: argparse.Namespace, out: TextIO) -> int:
    """Run the benchmark described by parsed ``args`` and print the report; exit status."""
    from grammarsd.bench.jsonschemabench_report import write_report

    engines = tuple(e.strip() for e in args.engines.split(",") if e.strip())
    try:
        for spec in engines:
            engine_name(spec)
        cfg = JsbConfig(
            data=args.data,
            out_dir=args.out,
            split=args.split,
            subsets=tuple(s.strip() for s in args.subsets.split(",")) if args.subsets else None,
            limit=args.limit,
            engines=engines,
            protocol=Protocol(
                model=args.model,
                device=args.device,
                max_tokens=args.max_tokens,
                compile_timeout_s=args.compile_timeout,
                generation_timeout_s=args.generation_timeout,
            ),
            workers=args.workers,
            threads=args.threads,
            progress=not args.no_progress,
        )
        if args.limit is not None and args.limit < 1:
            raise ValueError(f"--limit must be >= 1, got {args.limit}")
    except (ValueError, ImportError) as e:
        print(f"jsonschemabench: {e}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    records = run_jsonschemabench(cfg)
    elapsed = time.perf_counter() - start
    out.write(write_report(cfg, records, run_seconds=elapsed))
    out.write(f"\nresults, report and plots in {cfg.out_dir}/ ({elapsed:.0f} s this run)\n")
    return 0


__all__ = [
    "DEFAULT_ENGINES",
    "UNCONSTRAINED",
    "BenchSchema",
    "JsbConfig",
    "JsbRecord",
    "JsonSchemaBenchError",
    "Protocol",
    "add_arguments",
    "extract_json",
    "judge",
    "load_hub",
    "load_local",
    "messages",
    "plain_prompt",
    "read_manifest",
    "read_records",
    "run_from_args",
    "run_jsonschemabench",
]
