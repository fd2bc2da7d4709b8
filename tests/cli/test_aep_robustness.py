"""The AEP / CloudEvents commands on hostile input, as a user runs them (found by a fuzzing review, 2026-12-02):
a clear refusal with its rule and place, never an internal error; nothing left behind; the input never changed;
what one command writes, the next one reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aefgate.aef.verifier import verify_run
from tests.conftest import aefgate, one_json

AT = "2026-12-02T00:00:00Z"


def _refused(p, rule: str, where: str | None = None) -> dict:
    assert "Traceback" not in p.stderr
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    err = one_json(p.stdout)["error"]
    assert err["rule"] == rule, err
    if where is not None:
        assert err["where"] == where, err
    return err


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def events(sealed_run: Path, tmp_path: Path) -> Path:
    out = tmp_path / "events.aep.jsonl"
    p = aefgate("export", "aep", sealed_run, out, "--json")
    assert p.returncode == 0, p.stderr
    return out


def test_nesting_beyond_the_recursion_limit_is_enc17(tmp_path: Path, sealed_run: Path) -> None:
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"a":' * 10_000 + "1" + "}" * 10_000 + "\n")
    err = _refused(aefgate("import", "aep", deep, tmp_path / "o", "--at", AT, "--json"), "AEP-13", f"{deep}:1")
    assert "nesting deeper than 64" in err["message"]
    _refused(aefgate("convert", deep, tmp_path / "o.jsonl", "--from", "aep", "--to", "cloudevents", "--json"),
             "ENC-17", f"{deep}:1")
    _refused(aefgate("export", "aep", sealed_run, tmp_path / "x.jsonl", "--cause-map", deep, "--json"), "AEP-7")
    assert _tree(tmp_path) == ["deep.jsonl"]


def test_a_deeply_nested_result_line_makes_the_run_invalid(run_copy: Path, tmp_path: Path) -> None:
    with open(run_copy / "results.ndjson", "a") as f:
        f.write('{"a":' * 10_000 + "1" + "}" * 10_000 + "\n")
    p = aefgate("export", "aep", run_copy, tmp_path / "x.jsonl", "--json")
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert one_json(p.stdout)["error"]["rule"] == "AEP-1"
    assert not (tmp_path / "x.jsonl").exists()


def test_a_parent_that_is_a_file(tmp_path: Path, sealed_run: Path, events: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"")
    for args in (["convert", events, f / "o.jsonl", "--from", "aep", "--to", "cloudevents"],
                 ["export", "aep", sealed_run, f / "o.jsonl"],
                 ["export", "cloudevents", sealed_run, f / "o.jsonl"],
                 ["import", "aep", events, f / "run", "--at", AT]):
        _refused(aefgate(*args, "--json"), "OUT-1", str(f))
    assert f.read_bytes() == b""


def test_a_refused_conversion_leaves_no_folders(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("x\n")
    _refused(aefgate("convert", bad, tmp_path / "new" / "a" / "o.jsonl", "--from", "aep", "--to", "cloudevents",
                     "--json"), "ENC-1", f"{bad}:1")
    _refused(aefgate("convert", bad, tmp_path / "new" / "b" / "run", "--from", "aep", "--to", "aef", "--at", AT,
                     "--json"), "AEP-13", f"{bad}:1")
    assert _tree(tmp_path) == ["bad.jsonl"]


def test_an_output_inside_the_input_run_is_refused(run_copy: Path) -> None:
    before = _tree(run_copy)
    for args in (["export", "aep", run_copy, run_copy / "x.jsonl"],
                 ["export", "cloudevents", run_copy, run_copy / "x.jsonl"],
                 ["convert", run_copy, run_copy / "sub" / "y.jsonl", "--from", "aef", "--to", "aep"],
                 ["export", "inspect", run_copy, run_copy / "log.json"]):
        _refused(aefgate(*args, "--json"), "OUT-2")
    _refused(aefgate("convert", run_copy, run_copy / "log.json", "--from", "aef", "--to", "inspect", "--json"),
             "OUT-2")
    assert _tree(run_copy) == before
    assert verify_run(run_copy).outcome == "intact"


def test_the_binary_cloudevents_export_imports_back(sealed_run: Path, tmp_path: Path, events: Path) -> None:
    binary = tmp_path / "binary.jsonl"
    assert aefgate("export", "cloudevents", sealed_run, binary, "--mode", "binary", "--json").returncode == 0
    assert set(json.loads(binary.read_text().splitlines()[0])) == {"headers", "body"}
    p = aefgate("import", "aep", binary, tmp_path / "from-binary", "--at", AT, "--json")
    assert p.returncode == 0, p.stdout + p.stderr
    p2 = aefgate("convert", binary, tmp_path / "via-convert", "--from", "cloudevents", "--to", "aef", "--at", AT,
                 "--json")
    assert p2.returncode == 0, p2.stdout + p2.stderr
    assert aefgate("import", "aep", events, tmp_path / "from-aep", "--at", AT, "--json").returncode == 0
    for run in ("from-binary", "via-convert"):
        assert verify_run(tmp_path / run).outcome == "intact"
        # the same lines as the import of the AEP events themselves
        assert (tmp_path / run / "results.ndjson").read_bytes() == (tmp_path / "from-aep" / "results.ndjson").read_bytes()
        assert json.loads((tmp_path / run / "run.json").read_text())["imported"]["from"] == "aep 0.1 (cloudevents)"


def test_a_cloudevents_error_names_the_line(sealed_run: Path, tmp_path: Path) -> None:
    ce = tmp_path / "ce.jsonl"
    assert aefgate("export", "cloudevents", sealed_run, ce, "--json").returncode == 0
    lines = ce.read_text().splitlines()
    bad = json.loads(lines[1])
    bad["time"] = 7
    lines[1] = json.dumps(bad)
    ce.write_text("\n".join(lines) + "\n")
    err = _refused(aefgate("import", "aep", ce, tmp_path / "o", "--at", AT, "--json"), "CE-1")
    assert err["where"].startswith(f"{ce}:2")


@pytest.mark.parametrize("agent,ref", [("a b", "agent:a%20b"), ("élan", "agent:%C3%A9lan"), ("Bot:X", "agent:Bot:X"),
                                       ("model:mockllm/model", "model:mockllm/model")])
def test_any_agent_the_export_writes_imports_back(sealed_run: Path, tmp_path: Path, agent: str, ref: str) -> None:
    out = tmp_path / "e.jsonl"
    assert aefgate("export", "aep", sealed_run, out, "--agent", agent, "--json").returncode == 0
    p = aefgate("import", "aep", out, tmp_path / "run", "--at", AT, "--json")
    assert p.returncode == 0, p.stdout
    assert verify_run(tmp_path / "run").outcome == "intact"
    assert json.loads((tmp_path / "run" / "run.json").read_text())["subject"]["ref"] == ref


def test_control_characters_in_agent_and_cause_are_refused(sealed_run: Path, tmp_path: Path) -> None:
    for cmd in ("aep", "cloudevents"):
        _refused(aefgate("export", cmd, sealed_run, tmp_path / "x.jsonl", "--agent", "a\nb", "--json"), "AEP-3")
        _refused(aefgate("export", cmd, sealed_run, tmp_path / "x.jsonl", "--cause-map", '{"case-17": "a\\nb"}',
                         "--json"), "AEP-7")
    assert _tree(tmp_path) == []


def test_a_bad_at_is_refused_before_reading(events: Path, tmp_path: Path) -> None:
    _refused(aefgate("import", "aep", events, tmp_path / "o", "--at", "yesterday", "--json"), "ENC-8", "at")
    assert not (tmp_path / "o").exists()


def test_an_empty_mode_is_refused(sealed_run: Path, tmp_path: Path) -> None:
    _refused(aefgate("export", "cloudevents", sealed_run, tmp_path / "x.jsonl", "--mode", "", "--json"), "CONV-3")
    assert not (tmp_path / "x.jsonl").exists()


def test_publish_never_writes_inside_the_run(run_copy: Path) -> None:
    before = _tree(run_copy)
    _refused(aefgate("publish", run_copy, "--to", f"file:{run_copy / 'x.jsonl'}", "--json"), "OUT-2")
    # a spool inside the run is refused before any connection is tried (nothing listens on port 9)
    _refused(aefgate("publish", run_copy, "--to", "nats://127.0.0.1:9/aef.t", "--spool", run_copy / "spool",
                     "--json"), "OUT-2")
    assert _tree(run_copy) == before


def test_a_line_the_builder_refuses_is_placed_at_its_event(events: Path, tmp_path: Path) -> None:
    lines = [json.loads(x) for x in events.read_text().splitlines()]
    lines[1]["data"]["aef"]["usage"] = "x"  # a member of aef of the wrong shape: the result schema refuses the line
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(x) + "\n" for x in lines))
    err = _refused(aefgate("import", "aep", bad, tmp_path / "o", "--at", AT, "--json"), "VER-2", f"{bad}:2")
    assert "/usage" in err["message"] and "results.ndjson:2" in err["message"]
    assert not (tmp_path / "o").exists()


def test_a_time_with_a_space_is_no_rfc3339_date_time(tmp_path: Path) -> None:
    ev = {"aep": "0.1", "id": "x1", "type": "assessment.evaluation.recorded", "time": "2026-10-02 14:06:23Z",
          "source": "aep://h", "agent": "a", "session": "s", "seq": 0,
          "data": {"gen_ai.evaluation.name": "m", "gen_ai.evaluation.score.value": 1}}
    src = tmp_path / "e.jsonl"
    src.write_text(json.dumps(ev) + "\n")
    _refused(aefgate("import", "aep", src, tmp_path / "o", "--at", AT, "--json"), "AEP-13", f"{src}:1")
    _refused(aefgate("convert", src, tmp_path / "o.jsonl", "--from", "aep", "--to", "cloudevents", "--json"), "B2")
    ev["time"] = "2026-10-02T16:06:23+02:00"  # an offset: both take it (the import rewrites it in UTC)
    src.write_text(json.dumps(ev) + "\n")
    assert aefgate("import", "aep", src, tmp_path / "o", "--at", AT, "--json").returncode == 0
    assert aefgate("convert", src, tmp_path / "o.jsonl", "--from", "aep", "--to", "cloudevents").returncode == 0


def test_an_aep_event_with_extensions_named_headers_and_body_is_an_aep_event(events: Path, tmp_path: Path) -> None:
    lines = [json.loads(x) for x in events.read_text().splitlines()]
    for ev in lines:
        ev["headers"], ev["body"] = "h", "b"  # legal AEP extension attribute names ([a-z0-9]{1,20})
    src = tmp_path / "ext.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    p = aefgate("import", "aep", src, tmp_path / "o", "--at", AT, "--json")
    assert p.returncode == 0, p.stdout
    assert json.loads((tmp_path / "o" / "run.json").read_text())["imported"]["from"] == "aep 0.1"
