"""JSONSchemaBench runner: data selection, prompts, validity judging, metrics, and whole runs on the
tiny model (grammarsd, the unconstrained baseline, and engines that crash, hang or raise)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from grammarsd.api.cli import main as cli_main
from grammarsd.bench.jsonschemabench import (
    BenchSchema,
    JsbConfig,
    JsbRecord,
    JsonSchemaBenchError,
    Protocol,
    extract_json,
    judge,
    load_local,
    messages,
    plain_prompt,
    read_records,
    run_jsonschemabench,
)
from grammarsd.bench.jsonschemabench_report import bootstrap, rows

BOOL = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
ENUM = {"enum": ["yes", "no"]}


def _data(root: Path, schemas: dict[str, Any], subset: str = "Glaiveai2K") -> Path:
    (root / subset).mkdir(parents=True)
    lines = ["subset\tid\tbytes\tsplit"]
    for id_, schema in schemas.items():
        text = schema if isinstance(schema, str) else json.dumps(schema)
        (root / subset / f"{id_}.json").write_text(text, encoding="utf-8")
        lines.append(f"{subset}\t{id_}\t{len(text)}\tval")
    lines.append(f"{subset}\ttrain1\t2\ttrain")
    (root / subset / "train1.json").write_text("{}", encoding="utf-8")
    (root / "MANIFEST.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


# -- data ---------------------------------------------------------------------------------------


def test_selection_is_per_subset_split_and_spread(tmp_path: Path) -> None:
    data = _data(tmp_path, {f"s{i}": BOOL for i in range(10)})
    picked = load_local(data, "val", None, 3)
    assert [s.id for s in picked] == ["s0", "s3", "s6"]
    assert all(s.schema == BOOL and s.subset == "Glaiveai2K" for s in picked)
    assert [s.id for s in load_local(data, "train", ["Glaiveai2K"], None)] == ["train1"]
    # a smaller limit selects a subset of a larger one's (so a run can be reported at half size)
    small = {s.key for s in load_local(data, "val", None, 5)}
    assert small <= {s.key for s in load_local(data, "val", None, 10)}


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("nodir", "not a directory"),
        ("nomanifest", "no MANIFEST.tsv"),
        ("badsubset", "unknown subset 'Nope'; subsets in"),
        ("badsplit", "no 'test' split"),
        ("notjson", r"bad\.json:1:2: not JSON"),
        ("missing", "listed in MANIFEST.tsv but missing"),
    ],
)
def test_bad_data_gets_clear_errors(setup: str, message: str, tmp_path: Path) -> None:
    subsets, split = None, "val"
    if setup == "nodir":
        data = tmp_path / "absent"
    elif setup == "nomanifest":
        data = tmp_path
    else:
        data = _data(tmp_path, {"bad": "{x" if setup == "notjson" else BOOL})
        subsets = ["Nope"] if setup == "badsubset" else None
        split = "test" if setup == "badsplit" else "val"
        if setup == "missing":
            (data / "Glaiveai2K" / "bad.json").unlink()
    with pytest.raises(JsonSchemaBenchError, match=message):
        load_local(data, split, subsets, None)


def test_cli_reports_bad_data_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["bench", "jsonschemabench", "--data", str(tmp_path / "absent"), "--out", str(tmp_path)]
    assert cli_main(args) == 1
    assert "grammarsd: error:" in capsys.readouterr().err
    assert cli_main([*args[:4], "--engines", "nope", "--out", str(tmp_path)]) == 2


# -- prompt -------------------------------------------------------------------------------------


def test_prompt_has_two_examples_and_the_schema() -> None:
    chat = messages(BenchSchema("Github_easy", "x", BOOL))
    assert [m["role"] for m in chat] == ["system", "user"]
    system = chat[0]["content"]
    assert "Example 1:" in system and "Example 2:" in system and "Example 3:" not in system
    assert json.loads(chat[1]["content"]) == BOOL and chat[1]["content"].startswith("{\n    ")
    assert plain_prompt(chat).endswith(chat[1]["content"] + "\nOutput: ")
    with pytest.raises(JsonSchemaBenchError, match="no prompt examples for subset 'Mine'"):
        messages(BenchSchema("Mine", "x", BOOL))


# -- validity (by hand; jsonschema is the oracle inside judge) ----------------------------------


@pytest.mark.parametrize(
    ("text", "schema", "valid", "why"),
    [
        ('{"ok": true}', BOOL, True, "valid"),
        ('  {"ok": false}\n', BOOL, True, "valid"),
        ('Sure! ```json\n{"ok": true}\n``` done', BOOL, True, "valid"),
        ('The answer is {"ok": true}.', BOOL, True, "valid"),
        ('{"ok": 1}', BOOL, False, "at /ok: 1 is not of type 'boolean'"),
        ("{}", BOOL, False, "'ok' is a required property"),
        ('{"ok": tr', BOOL, False, "not JSON"),
        ('"1.2.3.4"', {"format": "ipv4"}, True, "valid"),
        ('"1.2.3.999"', {"format": "ipv4"}, False, "is not a 'ipv4'"),
        ('"not-a-uuid"', {"format": "uuid"}, False, "is not a 'uuid'"),
        ('"::1"', {"format": "ipv6"}, True, "valid"),
        ("1", {"type": "nonsense"}, False, "not a valid 2020-12 schema"),
    ],
)
def test_judge(text: str, schema: Any, valid: bool, why: str) -> None:
    got_valid, got_why = judge(text, schema)
    assert got_valid is valid
    assert why in got_why


def test_extract_json_error_names_the_parse_error() -> None:
    with pytest.raises(ValueError, match="Expecting value"):
        extract_json("no json here")


# -- metrics ------------------------------------------------------------------------------------


def test_bootstrap_by_hand() -> None:
    ones = np.ones(8)
    assert bootstrap(ones, ones).median == 100.0 and bootstrap(ones, ones).std == 0.0
    half = np.array([1, 0] * 4)
    rate = bootstrap(half, ones, resamples=4000)
    assert rate.observed == 50.0
    assert 45.0 <= rate.median <= 55.0
    # binomial standard error of a mean of 8 fair coins: 50 / sqrt(8) = 17.7 percentage points
    assert 15.0 < rate.std < 20.5
    assert np.isnan(bootstrap(np.zeros(3), np.zeros(3)).median)


def test_rows_by_hand() -> None:
    def rec(key: str, engine: str, status: str, valid: bool, tpot: float | None) -> JsbRecord:
        return JsbRecord(key, engine, status, "ok", gct_s=0.5, tpot_ms=tpot, valid=valid)  # type: ignore[arg-type]

    records = {
        "a": [
            rec("S/1", "a", "ok", True, 10.0),
            rec("S/2", "a", "ok", False, 30.0),
            rec("S/3", "a", "unsupported", False, None),
            rec("T/1", "a", "ok", True, 20.0),
        ]
    }
    table = {(r.subset, r.engine): r for r in rows(records)}
    s = table[("S", "a")]
    assert (s.schemas, s.unsupported) == (3, 1)
    assert s.declared.observed == pytest.approx(200 / 3)
    assert s.empirical.observed == pytest.approx(100 / 3)
    assert s.compliance.observed == 50.0
    assert s.tpot_ms == 20.0 and s.gct_s == 0.5
    assert table[("all", "a")].schemas == 4


# -- whole runs on the tiny model --------------------------------------------------------------


def _cfg(data: Path, out: Path, engines: tuple[str, ...], **protocol: Any) -> JsbConfig:
    return JsbConfig(
        data=str(data),
        out_dir=out,
        engines=engines,
        protocol=Protocol(model="tiny", max_tokens=protocol.pop("max_tokens", 24), **protocol),
        threads=1,
        progress=False,
        kill_margin_s=3.0,
    )


def test_end_to_end_grammarsd_and_baseline_then_resume(tmp_path: Path) -> None:
    data = _data(tmp_path / "data", {"bool": BOOL, "enum": ENUM})
    out = tmp_path / "out"
    cfg = _cfg(data, out, ("grammarsd", "unconstrained"))
    records = run_jsonschemabench(cfg)
    assert set(records) == {"grammarsd", "unconstrained"}
    for engine, recs in records.items():
        assert [r.key for r in recs] == ["Glaiveai2K/bool", "Glaiveai2K/enum"]
        for r in recs:
            assert r.compile_status == "ok", r.error
            assert r.decode_status in ("ok", "max_tokens"), r.error
            assert r.ttft_s is not None and r.gct_s is not None and r.prompt_tokens > 0
            if engine == "grammarsd" and r.decode_status == "ok":
                # a complete constrained output is valid: jsonschema is the oracle
                assert r.valid, (r.output, r.why)
    assert records["grammarsd"][1].output in ('"yes"', '"no"')
    # resume: nothing runs again, the records are read back
    lines = (out / "results" / "grammarsd.jsonl").read_text().splitlines()
    again = run_jsonschemabench(cfg)
    assert (out / "results" / "grammarsd.jsonl").read_text().splitlines() == lines
    assert [r.output for r in again["grammarsd"]] == [r.output for r in records["grammarsd"]]
    with pytest.raises(JsonSchemaBenchError, match="another configuration"):
        run_jsonschemabench(_cfg(data, out, ("grammarsd",), max_tokens=25))
    # the report and its plots
    from grammarsd.bench.jsonschemabench_report import write_report

    text = write_report(cfg, records, run_seconds=1.0)
    assert "| Glaiveai2K | grammarsd | 2 |" in text
    assert (out / "coverage.png").stat().st_size > 0 and (out / "tpot.png").stat().st_size > 0


def test_crash_hang_and_exception_are_that_schemas_failure(tmp_path: Path) -> None:
    data = _data(
        tmp_path / "data",
        {
            "a-die": {"title": "die"},
            "b-hang": {"title": "hang"},
            "c-raise": {"title": "raise"},
            "d-fine": ENUM,
        },
    )
    cfg = _cfg(
        data,
        tmp_path / "out",
        ("_fake_engines:FaultyEngine",),
        compile_timeout_s=1.0,
        generation_timeout_s=5.0,
        max_tokens=4,
    )
    recs = run_jsonschemabench(cfg)["faulty"]
    assert [r.compile_status for r in recs] == ["error", "compile_timeout", "error", "ok"]
    assert "worker died (exit code 3)" in (recs[0].error or "")
    assert "worker killed" in (recs[1].error or "")
    assert "KeyError" in (recs[2].error or "")
    assert recs[3].decode_status in ("ok", "max_tokens")
    assert len(list(read_records(tmp_path / "out" / "results" / "faulty.jsonl"))) == 4


def test_hub_loader_maps_configs_and_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hub path with a stand-in ``datasets`` module (no hub here): one config per subset,
    ``unique_id`` and ``json_schema`` columns, ``default`` skipped, the same spread as local."""
    import types

    tables = {
        ("Glaiveai2K", "val"): {
            "unique_id": ["b", "a", "c"],
            "json_schema": ['{"x": 2}', "{}", "true"],
        },
    }
    fake = types.ModuleType("datasets")
    fake.get_dataset_config_names = lambda name: ["default", "Glaiveai2K"]  # type: ignore[attr-defined]
    fake.load_dataset = lambda name, subset, split: tables[(subset, split)]  # type: ignore[attr-defined]
    monkeypatch.setitem(__import__("sys").modules, "datasets", fake)
    from grammarsd.bench.jsonschemabench import load_hub

    got = load_hub("epfl-dlab/JSONSchemaBench", "val", None, 2)
    assert [(s.subset, s.id, s.schema) for s in got] == [
        ("Glaiveai2K", "a", {}),
        ("Glaiveai2K", "b", {"x": 2}),
    ]
    with pytest.raises(JsonSchemaBenchError, match="cannot load .* from the hub: KeyError"):
        load_hub("epfl-dlab/JSONSchemaBench", "test", None, None)
