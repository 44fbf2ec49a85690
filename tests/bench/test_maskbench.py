"""MaskBench runner: end-to-end counts on tiny schemas, resumability, error paths, crash isolation.

The instance labels of the tiny data set are checked against ``jsonschema`` (the independent oracle)
before any engine's counts are asserted against them.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from _fake_engines import FixedEngine

from grammarsd.api.cli import main as cli_main
from grammarsd.bench.engines import GrammarsdEngine
from grammarsd.bench.maskbench import (
    Instance,
    MaskBenchConfig,
    MaskBenchError,
    SchemaCase,
    SchemaRecord,
    _warm_up,
    load_case,
    read_records,
    results_path,
    run_case,
    run_maskbench,
    schema_files,
)
from grammarsd.bench.report import compile_bands, markdown, ratio, summarize, write_report
from grammarsd.testing import hf_tokenizer

# name -> (schema, [(valid, data), ...]); every engine supports these keywords exactly
TINY: dict[str, tuple[Any, list[tuple[bool, Any]]]] = {
    "a_integer.json": ({"type": "integer"}, [(True, 5), (True, -12), (False, "x"), (False, 1.5)]),
    "b_object.json": (
        {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name", "age"],
            "additionalProperties": False,
        },
        [
            (True, {"name": "Al", "age": 3}),
            (False, {"name": "Al"}),
            (False, {"name": "Al", "age": "3"}),
        ],
    ),
    "c_enum.json": ({"enum": ["red", "green"]}, [(True, "green"), (False, "blue")]),
}
N_VALID, N_INVALID = 4, 5


def _write_data(root: Path, cases: dict[str, tuple[Any, list[tuple[bool, Any]]]]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, (schema, tests) in cases.items():
        doc = {"schema": schema, "tests": [{"valid": v, "data": d} for v, d in tests]}
        (root / name).write_text(json.dumps(doc), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def llama3() -> Any:
    return hf_tokenizer("llama3")


@pytest.fixture
def tiny_dir(tmp_path: Path) -> Path:
    return _write_data(tmp_path / "data", TINY)


def _config(data: Path, out: Path, engines: tuple[str, ...], **kw: Any) -> MaskBenchConfig:
    return MaskBenchConfig(data_dir=data, out_dir=out, engines=engines, progress=False, **kw)


def test_tiny_labels_agree_with_jsonschema() -> None:
    for schema, tests in TINY.values():
        for valid, data in tests:
            assert jsonschema.Draft202012Validator(schema).is_valid(data) == valid, (schema, data)
    assert sum(v for _, t in TINY.values() for v, _ in t) == N_VALID
    assert sum(not v for _, t in TINY.values() for v, _ in t) == N_INVALID


def test_end_to_end_grammarsd(tiny_dir: Path, tmp_path: Path, llama3: Any) -> None:
    out = tmp_path / "out"
    cfg = _config(tiny_dir, out, ("grammarsd", "grammarsd-any-order"))
    records = run_maskbench(cfg)
    for name in ("grammarsd", "grammarsd-any-order"):
        s = summarize(name, records[name])
        assert (s.schemas, s.passing, s.compile_errors, s.timeouts, s.errors) == (3, 3, 0, 0, 0)
        assert (s.valid_instances, s.invalid_instances) == (N_VALID, N_INVALID)
        assert (s.valid_rejected, s.invalid_accepted) == (0, 0)
        # one mask per token of every valid instance, plus its EOS check
        valid_tokens = sum(
            len(llama3.encode(json.dumps(d), add_special_tokens=False)) + 1
            for _, tests in TINY.values()
            for v, d in tests
            if v
        )
        assert s.masks > valid_tokens
        assert s.compile_ms_mean > 0 and s.mask_us_p50 > 0
    text = write_report(cfg, records)
    assert "| grammarsd | 3 | 3 | 0 | 0 | 0 | 0 | 0/4 | 0/5 |" in text
    assert re.search(r"\| grammarsd-any-order \| 3 \| \d+\.\d{3} \|", text)  # ratio row
    assert (out / "report.md").read_text(encoding="utf-8").endswith(text)
    assert {"cpu", "python", "numpy", "numba", "grammarsd"} <= set(
        json.loads((out / "environment.json").read_text(encoding="utf-8"))
    )
    assert (out / "mask_time_cdf.png").stat().st_size > 0
    assert (out / "compile_time_cdf.png").stat().st_size > 0


PEERS = [("xgrammar", "xgrammar"), ("llguidance", "llguidance"), ("outlines-core", "outlines_core")]


@pytest.mark.parametrize("engine,module", PEERS, ids=[p[0] for p in PEERS])
def test_end_to_end_peer(engine: str, module: str, tiny_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip(module)
    records = run_maskbench(_config(tiny_dir, tmp_path / "out", (engine,)))
    s = summarize(engine, records[engine])
    assert (s.schemas, s.passing, s.compile_errors, s.timeouts, s.errors) == (3, 3, 0, 0, 0)
    assert (s.valid_instances, s.invalid_instances) == (N_VALID, N_INVALID)
    assert (s.valid_rejected, s.invalid_accepted) == (0, 0)


# -- the checker itself, in process, with engines whose answers are known ------------------------


@pytest.mark.parametrize(
    "allow,accept,rejected,accepted,inconsistent",
    [
        (True, True, 0, 2, 0),  # allows everything: every invalid instance is accepted
        (False, True, 1, 0, 0),  # allows nothing: the valid instance is rejected at token 0
        (True, False, 1, 1, 2),  # mask and accept disagree: counted, and the check fails
    ],
    ids=["allow-all", "allow-none", "inconsistent"],
)
def test_checker_counts(
    allow: bool, accept: bool, rejected: int, accepted: int, inconsistent: int, llama3: Any
) -> None:
    engine = FixedEngine(llama3)
    engine.allow, engine.accept = allow, accept
    case = SchemaCase(
        "x.json",
        {},
        (Instance(True, (1, 2)), Instance(False, (3,)), Instance(False, ())),
    )
    bitmask = np.zeros((1, (engine.vocab_size + 31) // 32), dtype=np.int32)
    rec = run_case(engine, case, bitmask)
    assert rec.status == "ok" and (rec.n_valid, rec.n_invalid) == (1, 2)
    assert (rec.valid_rejected, rec.invalid_accepted) == (rejected, accepted)
    assert rec.inconsistent == inconsistent
    if allow and accept:  # every token plus one EOS check per instance
        assert len(rec.mask_ns) == 2 + 1 + 0 + 3
    if not allow:
        assert rec.wrong == [{"test": 0, "kind": "valid_rejected", "at": 0}]


def test_grammarsd_refusal_is_a_compile_error(llama3: Any) -> None:
    engine = GrammarsdEngine(llama3)
    case = SchemaCase("lookbehind.json", {"type": "string", "pattern": "(?<=a)b"}, ())
    bitmask = np.zeros((1, (engine.vocab_size + 31) // 32), dtype=np.int32)
    rec = run_case(engine, case, bitmask)
    assert rec.status == "compile_error" and "SchemaUnsupportedError" in (rec.error or "")
    assert not rec.passed


def test_grammarsd_warm_up_reaches_the_lazily_compiled_paths(llama3: Any) -> None:
    """The warm-up passes (it raises otherwise) and the engine's own case, compiled, has what the
    shared cases lack: no whitespace gaps (the plain fill kernel) and a terminal whose length the
    matcher counts."""
    engine = GrammarsdEngine(llama3)
    assert _warm_up(engine, llama3) > 0
    tables = engine.compile(engine.warmup_cases[0][0]).tables
    assert tables.ws_bound == 0 and (tables.term_cap > 0).any()


# Unsatisfiable: each branch's ``required`` conflicts with the outer ``maxProperties``.
_EMPTY_SCHEMA = {"type": "object", "maxProperties": 1, "anyOf": [{"required": ["a", "b"]},
                                                                 {"required": ["c", "d"]}]}


@pytest.mark.parametrize("with_valid", [False, True], ids=["no-valid-instance", "valid-instance"])
def test_proved_empty_language_passes_only_without_valid_instances(
    with_valid: bool, llama3: Any
) -> None:
    engine = GrammarsdEngine(llama3)
    tokens = tuple(llama3.encode('{"a": 1}', add_special_tokens=False))
    instances = (Instance(False, tokens),) + ((Instance(True, tokens),) if with_valid else ())
    # the oracle: jsonschema agrees the instance is invalid (the schema admits none)...
    assert not jsonschema.Draft202012Validator(_EMPTY_SCHEMA).is_valid({"a": 1})
    rec = run_case(engine, SchemaCase("empty.json", _EMPTY_SCHEMA, instances), np.zeros(
        (1, (engine.vocab_size + 31) // 32), dtype=np.int32))
    assert rec.status == "empty_language" and "EmptyLanguageError" in (rec.error or "")
    # ...so a file that labels an instance valid makes the engine's proof count as a rejection
    assert rec.passed is not with_valid
    assert rec.valid_rejected == int(with_valid)
    assert summarize("grammarsd", [rec]).empty_languages == 1


def test_summary_and_ratio_by_hand() -> None:
    peer = [
        SchemaRecord("a", "p", "ok", compile_s=0.002, n_valid=1, mask_ns=[1000, 3000]),
        SchemaRecord(
            "b", "p", "ok", compile_s=0.004, n_invalid=1, invalid_accepted=1, mask_ns=[2000]
        ),
        SchemaRecord("c", "p", "compile_error", error="no"),
        SchemaRecord("d", "p", "timeout"),
    ]
    base = [
        SchemaRecord("a", "g", "ok", compile_s=0.001, mask_ns=[1000]),
        SchemaRecord("b", "g", "ok", compile_s=0.001, mask_ns=[1000]),
        SchemaRecord("c", "g", "ok", compile_s=0.001, mask_ns=[1000]),
        SchemaRecord("d", "g", "error", error="boom"),
    ]
    s = summarize("p", peer)
    assert (s.schemas, s.passing, s.compile_errors, s.timeouts, s.errors) == (4, 1, 1, 1, 0)
    assert (s.invalid_accepted, s.invalid_instances, s.valid_instances) == (1, 1, 1)
    assert (s.compile_ms_mean, s.compile_ms_p50) == pytest.approx((3.0, 3.0))
    assert (s.masks, s.mask_us_mean, s.mask_us_p50, s.mask_us_max) == (3, 2.0, 2.0, 3.0)
    r = ratio("p", peer, base)  # paired: a and b
    assert r.paired == 2
    assert (r.compile_mean, r.mask_mean, r.mask_p50) == pytest.approx((3.0, 2.0, 2.0))
    # per schema, compile plus its masks: peer 2 ms + 4 us and 4 ms + 2 us, base 1 ms + 1 us twice
    assert r.total_mean == pytest.approx((2.004 + 4.002) / 2 / 1.001)


def test_compile_bands_by_hand() -> None:
    """100 paired schemas taking 1..100 ms for grammarsd and 2 ms for the peer, slowest first in
    bands of 1, 4, 5, 15, 25 and 50; schemas not ``ok`` for both, or unpaired, are left out."""
    base = [SchemaRecord(f"s{k}", "g", "ok", compile_s=k / 1000) for k in range(1, 101)]
    base += [SchemaRecord("gone", "g", "error", error="boom"),
             SchemaRecord("lone", "g", "ok", compile_s=9.0)]
    peer = [SchemaRecord(f"s{k}", "p", "ok", compile_s=0.002) for k in range(1, 101)]
    peer += [SchemaRecord("gone", "p", "ok", compile_s=1.0)]
    bands = compile_bands(peer, base)
    assert [b.schemas for b in bands] == [1, 4, 5, 15, 25, 50]
    assert [b.base_ms for b in bands] == pytest.approx([100, 97.5, 93, 83, 63, 25.5])
    assert [b.peer_ms for b in bands] == pytest.approx([2.0] * 6)
    assert [b.base_share for b in bands] == pytest.approx(
        [100 / 5050, 390 / 5050, 465 / 5050, 1245 / 5050, 1575 / 5050, 1275 / 5050])
    text = markdown([], [], {}, {}, {"p": bands})
    assert "| 0–1 % | 1 | 100.00 | 2.00 | 0.020 | 2.0 % |" in text
    assert compile_bands(peer, []) == []


# -- resumability ---------------------------------------------------------------------------------


def test_rerun_skips_done_and_repairs_a_torn_line(tiny_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    cfg = _config(tiny_dir, out, ("_fake_engines:AllowAllEngine",))
    run_maskbench(cfg)
    path = results_path(out, "allow-all")
    first = path.read_text(encoding="utf-8")
    assert [r.schema for r in read_records(path)] == sorted(TINY)

    run_maskbench(cfg)  # everything done: nothing is run or appended
    assert path.read_text(encoding="utf-8") == first

    # drop the last record and leave half of it, as a run killed mid-write would
    lines = first.splitlines(keepends=True)
    path.write_text("".join(lines[:-1]) + lines[-1][:20], encoding="utf-8")
    records = run_maskbench(cfg)
    after = path.read_text(encoding="utf-8").splitlines(keepends=True)
    assert after[:-1] == lines[:-1]  # kept byte for byte, not rerun
    assert json.loads(after[-1])["schema"] == "c_enum.json"
    assert [r.invalid_accepted for r in records["allow-all"]] == [2, 2, 1]


@pytest.mark.parametrize(("turn", "order"), [(1, "ababab"), (2, "aabbab"), (50, "aaabbb")])
def test_engines_take_turns(turn: int, order: str, tiny_dir: Path, tmp_path: Path,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Each engine runs ``turn`` schemas, then the next one does: drift falls on all alike."""
    log = tmp_path / "compiles.log"
    monkeypatch.setenv("FAKE_ENGINE_LOG", str(log))
    engines = ("_fake_engines:LoggingEngine", "_fake_engines:OtherLoggingEngine")
    records = run_maskbench(_config(tiny_dir, tmp_path / "out", engines, turn=turn))
    ours = {json.dumps(schema, sort_keys=True) for schema, _ in TINY.values()}
    compiles = [line.split(" ", 1) for line in log.read_text().splitlines()]
    assert "".join(name[-1] for name, schema in compiles if schema in ours) == order  # no warm-up
    assert all(len(r) == len(TINY) for r in records.values())


def test_out_dir_of_another_tokenizer_is_refused(tiny_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "config.json").write_text(json.dumps({"tokenizer": "smollm2"}), encoding="utf-8")
    with pytest.raises(MaskBenchError, match="smollm2"):
        run_maskbench(_config(tiny_dir, out, ("_fake_engines:AllowAllEngine",)))


# -- error paths ----------------------------------------------------------------------------------


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(MaskBenchError, match="not a directory") as err:
        schema_files(tmp_path / "nope")
    assert err.value.path == tmp_path / "nope"
    with pytest.raises(MaskBenchError, match=r"no \*\.json files"):
        schema_files(tmp_path)


def test_file_that_is_not_json(tmp_path: Path, llama3: Any) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": {},\n  "tests": [oops]}', encoding="utf-8")
    with pytest.raises(MaskBenchError, match="not JSON") as err:
        load_case(bad, llama3)
    assert (err.value.path, err.value.line, err.value.column) == (bad, 2, 13)
    assert f"{bad}:2:13" in str(err.value)


@pytest.mark.parametrize(
    "doc,message",
    [
        ([1, 2], 'no "schema" key'),
        ({"schema": {}, "tests": {}}, '"tests" is not a list'),
        ({"schema": {}, "tests": [{"data": 1}]}, 'tests\\[0\\] needs a boolean "valid"'),
        ({"schema": {}, "tests": [{"valid": True}]}, 'tests\\[0\\] needs a boolean "valid"'),
    ],
    ids=["no-schema", "tests-not-list", "no-valid", "no-data"],
)
def test_malformed_files(doc: Any, message: str, tmp_path: Path, llama3: Any) -> None:
    path = tmp_path / "f.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(MaskBenchError, match=message):
        load_case(path, llama3)


def test_limit_spreads_evenly(tmp_path: Path) -> None:
    for i in range(10):
        (tmp_path / f"s{i}.json").write_text("{}", encoding="utf-8")
    assert [p.name for p in schema_files(tmp_path, 3)] == ["s0.json", "s3.json", "s6.json"]
    assert len(schema_files(tmp_path, 50)) == 10


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["bench", "maskbench", str(tmp_path / "nope"), "--no-progress"]) == 1
    assert "not a directory" in capsys.readouterr().err
    assert cli_main(["bench", "maskbench", str(tmp_path), "--engines", "nosuch"]) == 2
    assert "unknown engine 'nosuch'" in capsys.readouterr().err
    assert cli_main(["bench", "maskbench", str(tmp_path), "--limit", "0"]) == 2


def test_crash_hang_and_exception_are_that_schemas_failure(tmp_path: Path) -> None:
    cases = {
        f"{i}_{how}.json": ({"title": how, "type": "integer"}, [(True, 7)])
        for i, how in enumerate(["ok", "die", "hang", "raise", "ok"])
    }
    data = _write_data(tmp_path / "data", cases)
    cfg = _config(data, tmp_path / "out", ("_fake_engines:FaultyEngine",), timeout_s=2.0)
    recs = run_maskbench(cfg)["faulty"]
    assert [r.status for r in recs] == ["ok", "error", "timeout", "error", "ok"]
    assert "worker died (exit code 3)" in (recs[1].error or "")
    assert "over 2 s" in (recs[2].error or "")
    assert "KeyError: 'boom'" in (recs[3].error or "")
    assert [r.passed for r in recs] == [True, False, False, False, True]
    s = summarize("faulty", recs)
    assert (s.passing, s.timeouts, s.errors) == (2, 1, 2)
    # every record was written as it finished, and the worker was restarted twice
    assert [asdict(r) for r in read_records(results_path(cfg.out_dir, "faulty"))] == [
        asdict(r) for r in recs
    ]
    warmups = (cfg.out_dir / "warmup.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(warmups) == 3
