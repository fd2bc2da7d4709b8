"""The importer crashes and silent acceptances of issue 28 (hardening's part), each replayed: a refusal naming the
rule and the place (exit 2, nothing in OUT), never ``internal``; and the bounded readers they now go through
(``jsonio.loads_tolerant``, ``yamlio.load``, ``fsutil.open_regular``)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from pathlib import Path

import pytest

from aefgate.cli.app import run as cli
from aefgate.formats import yamlio
from aefgate.aef import jsonio
from aefgate.fsutil import MISSING, input_file_problem, open_regular
from tests._shared import SAMPLES

AT = "2026-12-01T00:00:00Z"
RUN1 = "subjects/agents/Support Agent/runs/2026-05-20_09-14-07_3fa9c2e1"
DEEP = b"[" * 1000 + b"]" * 1000


def refused(args: list, out: Path) -> tuple[str, str, str]:
    """Run the command in-process; it must refuse: exit 2, one ``error [RULE] at WHERE: message`` line, no OUT."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli([*map(str, args), str(out)])
    text = err.getvalue().strip()
    assert code == 2, text
    assert "internal" not in text and "Traceback" not in text, text
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]
    errors = [x for x in text.splitlines() if x.startswith("error [")]
    assert len(errors) == 1, text
    head, _, message = errors[0].partition(": ")
    rule, _, where = head.removeprefix("error [").partition("] at ")
    return rule, where, message


# -- Evaluation API: results[].order null or missing ------------------------------------------------------------------


@pytest.mark.parametrize("how", ["null", "missing"])
def test_evaluation_api_section_without_order(tmp_path: Path, how: str) -> None:
    doc = json.loads((SAMPLES / "evaluation-api" / "finished.json").read_text())
    if how == "null":
        doc["results"][1]["order"] = None
    else:
        del doc["results"][1]["order"]
    src = tmp_path / "in.json"
    src.write_text(json.dumps(doc))
    rule, where, message = refused(["import", "evaluation-api", "--subject", "agent:x", src], tmp_path / "out")
    assert (rule, where) == ("EVAPI-1", f"{src}#.results[1].order")
    assert "order" in message


# -- store v1 ---------------------------------------------------------------------------------------------------------


def _store(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(SAMPLES / "store-v1" / ".agenteval", ws)
    return ws


@pytest.mark.parametrize("file,insert,expect", [
    ("scenarios/refund-order.json", b'"x": ' + DEEP + b", ", "nesting deeper than 64"),
    ("manifest.json", b'"x": ' + DEEP + b", ", "nesting deeper than 64"),
    ("scenarios/refund-order.json", b'"x": 1e400, ', "overflows binary64"),
    ("scenarios/refund-order.json", b'"x": ' + b"9" * 400 + b", ", "overflows binary64"),
    ("manifest.json", b'"x": ' + b"9" * 400 + b", ", "overflows binary64"),
    ("scenarios/refund-order.json", b'"x": [' + b"[" * 65 + b"]" * 65 + b"], ", "nesting deeper than 64"),
])
def test_store_v1_bounds(tmp_path: Path, file: str, insert: bytes, expect: str) -> None:
    ws = _store(tmp_path)
    p = ws / RUN1 / file
    p.write_bytes(p.read_bytes().replace(b"{", b"{" + insert, 1))
    rule, where, message = refused(["import", "store-v1", "--at", AT, ws / RUN1], tmp_path / "out")
    assert (rule, where) == ("SV1-3", str(p))
    assert expect in message


@pytest.mark.parametrize("events,expect", [
    (DEEP + b", ", "nesting too deep"),
    (b"1e400, ", "overflows binary64"),
    (b"-" + b"9" * 400 + b", ", "overflows binary64"),
    (b'{"v": 2.5e+999}, ', "overflows binary64"),
])
def test_store_v1_agent_trace_bounds(tmp_path: Path, events: bytes, expect: str) -> None:
    ws = _store(tmp_path)
    p = ws / RUN1 / "traces" / "agent-trace.json"
    data = p.read_bytes()
    assert b'"events": [' in data
    p.write_bytes(data.replace(b'"events": [', b'"events": [' + events, 1))
    rule, where, message = refused(["import", "store-v1", "--at", AT, ws / RUN1], tmp_path / "out")
    assert (rule, where) == ("SV1-3", str(p))
    assert expect in message


def test_store_v1_trace_text_that_looks_like_a_big_number_is_text(tmp_path: Path) -> None:
    """"1e400" inside a string, or a hex id with e and digits, is no number: the trace imports."""
    ws = _store(tmp_path)
    p = ws / RUN1 / "traces" / "agent-trace.json"
    p.write_bytes(p.read_bytes().replace(b'"events": [', b'"events": ["1e400", "a3e123b", "' + b"9" * 400 + b'", ',
                                         1))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert cli(["import", "store-v1", "--at", AT, str(ws / RUN1), str(tmp_path / "out")]) == 0, err.getvalue()


# -- AEP / CloudEvents ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def events(sealed_run: Path, tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("ev")
    out = {}
    for fmt in ("aep", "cloudevents"):
        out[fmt] = base / f"{fmt}.jsonl"
        with contextlib.redirect_stderr(io.StringIO()):
            assert cli(["export", fmt, str(sealed_run), str(out[fmt])]) == 0
    return out


def _with_aef(src: Path, dst: Path, key: str, value) -> Path:
    lines = [json.loads(x) for x in src.read_text().splitlines()]
    lines[0]["data"]["aef"][key] = value
    dst.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return dst


@pytest.mark.parametrize("fmt", ["aep", "cloudevents"])
@pytest.mark.parametrize("key,value,expect", [
    ("usage", [{"role": "agent", "model": ["m"]}], "aef.usage[0].model is a string"),
    ("usage", [{"role": "agent", "model": {"a": 1}}], "aef.usage[0].model is a string"),
    ("usage", [{"role": ["agent"]}], "aef.usage[0].role is a string"),
    ("trial", -1, "aef.trial is an integer from 0 to 999"),
    ("trial", 1000, "aef.trial is an integer from 0 to 999"),
])
def test_aep_member_types(tmp_path: Path, events: dict[str, Path], fmt: str, key: str, value, expect: str) -> None:
    src = _with_aef(events[fmt], tmp_path / "in.jsonl", key, value)
    args = ["import", "aep", "--at", AT, src] if fmt == "aep" else \
        ["convert", "--from", "cloudevents", "--to", "aef", "--at", AT, src]
    rule, where, message = refused(args, tmp_path / "out")
    assert (rule, where, message) == ("AEP-13", f"{src}:1", expect if key == "usage" else
                                      "aef.trial is an integer from 0 to 999 (an AEF line's trial)")


# -- ASSERT -----------------------------------------------------------------------------------------------------------


def _suite(tmp_path: Path) -> Path:
    s = tmp_path / "suite"
    shutil.copytree(SAMPLES / "assert" / "demo-suite", s)
    return s


def _first_line(p: Path, f) -> None:
    lines = p.read_bytes().split(b"\n")
    lines[0] = f(lines[0])
    p.write_bytes(b"\n".join(lines))


@pytest.mark.parametrize("file,mutate,rule,expect,line", [
    ("run-001/scores.jsonl", lambda b: b[:-1] + b', "x": ' + DEEP + b"}", "ASSERT-2", "nesting deeper than 64", 1),
    ("run-001/scores.jsonl", lambda b: b.replace(b"{", b'{"x": 1e400, ', 1), "ASSERT-2", "overflows binary64", 1),
    ("run-001/scores.jsonl", lambda b: b.replace(b"{", b'{"x": ' + b"9" * 400 + b", ", 1), "ASSERT-2",
     "overflows binary64", 1),
    ("run-001/scores.jsonl", lambda b: b.replace(b"{", b'{"x": NaN, "y": 1e400, ', 1), "ASSERT-2",
     "overflows binary64", 1),
    ("run-001/scores.jsonl", lambda b: b.replace(b"{", b'{"x": "\\ud800x", ', 1), "ASSERT-2", "unpaired surrogate",
     1),
    ("run-001/scores.jsonl", lambda b: b.replace(b"{", b'{"x": NaN, "y": "\\udc00", ', 1), "ASSERT-2",
     "unpaired surrogate", 1),
    ("run-001/manifest.json", lambda b: b.replace(b"{", b'{"x": ' + DEEP + b", ", 1), "ASSERT-2",
     "nesting deeper than 64", None),
])
def test_assert_json_bounds(tmp_path: Path, file, mutate, rule, expect, line) -> None:
    s = _suite(tmp_path)
    p = s / file
    if line is None:
        p.write_bytes(mutate(p.read_bytes()))
    else:
        _first_line(p, mutate)
    got_rule, where, message = refused(["import", "assert", "--content-capture", "on", "--at", AT, s / "run-001"],
                                       tmp_path / "out")
    assert (got_rule, where) == (rule, f"{p}:{line}" if line else str(p))
    assert expect in message


@pytest.mark.parametrize("text,expect,line", [
    ("sample_size: " + "7" * 5000, "an integer of 5000 characters", 16),
    ("sample_size: 1.0e+400", "overflows binary64", 16),
    ("sample_size: " + "[" * 1000 + "]" * 1000, "nested deeper than 64", None),
    ("sample_size: &a [*a]", "an alias of a node that holds it", 16),
])
def test_assert_config_yaml_bounds(tmp_path: Path, text: str, expect: str, line) -> None:
    s = _suite(tmp_path)
    p = s / "run-001" / "config.yaml"
    cfg = p.read_text()
    assert cfg.splitlines()[15].strip() == "sample_size: 3"
    p.write_text(cfg.replace("sample_size: 3", text, 1))
    rule, where, message = refused(["import", "assert", "--at", AT, s / "run-001"], tmp_path / "out")
    assert (rule, where) == ("ASSERT-7", f"{p}:{line}" if line else str(p))
    assert expect in message


@pytest.mark.parametrize("kind,expect", [
    ("fifo", "not a regular file (a pipe, a device?)"),
    ("devzero", "not a regular file (a pipe, a device?)"),
    ("loop", "a symbolic link that loops (it leads back to itself)"),
    ("dangling", "a symbolic link that leads nowhere"),
    ("folder", "a folder, not a file"),
])
@pytest.mark.parametrize("name", ["scores.jsonl", "inference_set.jsonl", "manifest.json", "config.yaml"])
def test_assert_files_that_are_not_regular_files(tmp_path: Path, kind: str, expect: str, name: str) -> None:
    s = _suite(tmp_path)
    p = s / "run-001" / name
    p.unlink()
    {"fifo": lambda: os.mkfifo(p), "devzero": lambda: p.symlink_to("/dev/zero"),
     "loop": lambda: p.symlink_to(p.name), "dangling": lambda: p.symlink_to("absent"),
     "folder": lambda: p.mkdir()}[kind]()
    assert refused(["import", "assert", "--at", AT, s / "run-001"], tmp_path / "out") == ("ASSERT-2", str(p), expect)


def test_assert_a_missing_scores_file_is_still_absent(tmp_path: Path) -> None:
    """Absent is not refused (a run judged by nobody yet): only what is there and cannot be read is."""
    s = _suite(tmp_path)
    (s / "run-001" / "scores.jsonl").unlink()
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert cli(["import", "assert", "--at", AT, str(s / "run-001"), str(tmp_path / "out")]) == 0, err.getvalue()


# -- the readers ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("buf,kw,rule", [
    (b"[1e400]", {}, "ENC-3"),
    (b"[-1e400]", {}, "ENC-3"),
    (b"[" + b"9" * 309 + b"]", {}, "ENC-3"),
    (b"[-" + b"9" * 400 + b"]", {}, "ENC-3"),
    (DEEP, {}, "ENC-17"),
    (b"[" * 65 + b"]" * 65, {}, "ENC-17"),
    (b'["\\ud800"]', {}, "ENC-2"),
    (b"[NaN]", {}, "ENC-1"),
    (b"[NaN, 1e400]", {"nonfinite": True}, "ENC-3"),
    (b"[NaN, " + b"7" * 5000 + b"]", {"nonfinite": True}, "ENC-3"),
    (b"[NaN, " + DEEP + b"]", {"nonfinite": True}, "ENC-17"),
    (b"[NaN, " + b"[" * 65 + b"]" * 65 + b"]", {"nonfinite": True}, "ENC-17"),
    (b'[NaN, {"\\udc00": 1}]', {"nonfinite": True}, "ENC-2"),
    (b"[NaN, \xff]", {"nonfinite": True}, "ENC-1"),
    (b"[1]", {"top_object": True}, "ENC-1"),
])
def test_loads_tolerant_bounds(buf: bytes, kw: dict, rule: str) -> None:
    with pytest.raises(jsonio.JsonProblem) as e:
        jsonio.loads_tolerant(buf, **kw)
    assert e.value.rule == rule


def test_loads_tolerant_takes_what_lenient_writers_write() -> None:
    assert jsonio.loads_tolerant(b'{"a": 1, "a": 2}') == {"a": 2}
    v = jsonio.loads_tolerant(b'{"a": NaN, "b": -Infinity, "c": 1.5e308}', nonfinite=True)
    assert v["a"] != v["a"] and v["b"] == float("-inf") and v["c"] == 1.5e308
    assert jsonio.loads_tolerant(b"[" * 64 + b"]" * 64) is not None
    assert jsonio.loads_tolerant(b"[-" + b"9" * 308 + b"]") == [-int("9" * 308)]


@pytest.mark.parametrize("text,rule", [
    ("x: " + "7" * 5000, "ENC-3"),
    ("x: -" + "9" * 309, "ENC-3"),
    ("x: 0x" + "f" * 300, "ENC-3"),
    ("x: 1.0e+400", "ENC-3"),
    ("x: " + "[" * 1000 + "]" * 1000, "ENC-17"),
    ("x: " + "[" * 64 + "]" * 64, "ENC-17"),
    ("a: &a [*a]", "ENC-17"),
    ("a: &a [1,1,1,1,1,1,1,1,1,1]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(7)), "ENC-17"),
])
def test_yaml_bounds(text: str, rule: str) -> None:
    with pytest.raises(yamlio.YamlProblem) as e:
        yamlio.load(text)
    assert e.value.rule == rule


def test_yaml_reads_ordinary_documents() -> None:
    assert yamlio.load("a: 1\nb: [1, {c: .inf}]\nd: &x [1]\ne: *x\n") == {"a": 1, "b": [1, {"c": float("inf")}],
                                                                       "d": [1], "e": [1]}
    deep = yamlio.load("x: " + "[" * 63 + "]" * 63)  # 64 deep with the mapping: the bound, read
    for _ in range(62):
        deep = deep["x"] if isinstance(deep, dict) else deep[0]
    assert deep == [[]]
    assert yamlio.load("") is None


def test_open_regular_and_input_file_problem(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"x")
    with open_regular(f) as h:
        assert h.read() == b"x"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    loop = tmp_path / "loop"
    loop.symlink_to("loop")
    for p, problem in ((fifo, "not a regular file (a pipe, a device?)"), (tmp_path, "a folder, not a file"),
                       (loop, "a symbolic link that loops (it leads back to itself)"),
                       (tmp_path / "absent", MISSING)):
        assert input_file_problem(p) == problem
        with pytest.raises(OSError):
            open_regular(p).close()  # never blocks: the FIFO is opened without waiting for a writer


@pytest.mark.parametrize("kind,expect", [
    ("fifo", "not a regular file (a pipe, a device?)"),
    ("devzero", "not a regular file (a pipe, a device?)"),
    ("loop", "a symbolic link that loops (it leads back to itself)"),
    ("dangling", "a symbolic link that leads nowhere"),
])
def test_evaluation_api_response_files_that_are_not_regular_files(tmp_path: Path, kind: str, expect: str) -> None:
    folder = tmp_path / "responses"
    folder.mkdir()
    shutil.copyfile(SAMPLES / "evaluation-api" / "finished.json", folder / "a.json")
    bad = folder / "b.json"
    {"fifo": lambda: os.mkfifo(bad), "devzero": lambda: bad.symlink_to("/dev/zero"),
     "loop": lambda: bad.symlink_to(bad.name), "dangling": lambda: bad.symlink_to("absent.json")}[kind]()
    args = ["import", "evaluation-api", "--subject", "agent:x", "--at", AT]
    assert refused([*args, folder], tmp_path / "out") == ("CLI-1", str(bad), f"a response file: {expect}")
    assert refused([*args, bad], tmp_path / "out") == ("CLI-1", str(bad), expect)


def test_assert_export_reads_deep_blobs_as_text(tmp_path: Path) -> None:
    """The ASSERT exporter reads evidence blobs as JSON where they are: a blob nested 1,000 deep is text to it."""
    from aefgate.converters.assert_ai import exporter

    assert exporter._messages_of(DEEP) == ("text", DEEP.decode())
    assert exporter._tool_edit(DEEP)["actor"] == "tool"
    assert exporter._args(DEEP.decode()) == {"input": DEEP.decode()}
    taxonomy = tmp_path / "t.json"
    taxonomy.write_bytes(b'{"behavior_categories": ' + DEEP + b"}")
    from aefgate.errors import Refusal

    with pytest.raises(Refusal) as e:
        exporter._taxonomy(tmp_path, str(taxonomy))
    assert (e.value.rule, e.value.where) == ("ASSERT-11", str(taxonomy))
    assert "nesting deeper than 64" in e.value.message


@pytest.mark.parametrize("fmt", ["aep", "cloudevents"])
@pytest.mark.parametrize("decisive", [[None], [["r"]], [{"a": 1}], [1]])
def test_aep_decisive_entries_are_strings(tmp_path: Path, events: dict[str, Path], fmt: str, decisive) -> None:
    """Found by the fuzz test (seed 2026): a decisive entry that is a list was hashed before it was checked."""
    lines = [json.loads(x) for x in events[fmt].read_text().splitlines()]
    withagg = next(i for i, x in enumerate(lines) if "aggregation" in x["data"].get("aef", {}))
    lines[withagg]["data"]["aef"]["aggregation"]["decisive"] = decisive
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    args = ["import", "aep", "--at", AT, src] if fmt == "aep" else \
        ["convert", "--from", "cloudevents", "--to", "aef", "--at", AT, src]
    assert refused(args, tmp_path / "out") == (
        "AEP-13", f"{src}:{withagg + 1}", "aef.aggregation.decisive is an array of strings (result ids or paths)")


# -- Inspect: a pooled model call whose request is not an object (found by the fuzz test, seed 28) ----------------


@pytest.mark.parametrize("request_value", ["\ud800", "abc", 3, ["messages"]])
def test_inspect_call_request_that_is_not_an_object(tmp_path: Path, request_value) -> None:
    doc = json.loads((SAMPLES / "inspect" / "errors_limits.json").read_text())
    call = doc["samples"][5]["events"][7]["call"]
    assert call.get("call_refs"), "the sample's model call cites the call pool"  # the case the resolver expands
    call["request"] = request_value
    src = tmp_path / "in.json"
    src.write_text(json.dumps(doc))
    rule, where, message = refused(["import", "inspect", src], tmp_path / "out")
    assert (rule, where) == ("IN-FMT-6", str(src)) and "call.request" in message, (rule, where, message)


# -- OTLP: a time that is not a fixed64 (issue 28: "-5" was read as 1969-12-31T23:59:59.999999995Z) -------------------


@pytest.mark.parametrize("stamp", ["-5", str(2 ** 64), str(2 ** 70), 1.5, True])
def test_otlp_time_outside_fixed64(tmp_path: Path, stamp) -> None:
    doc = json.loads((SAMPLES / "otel" / "logs.otlp.jsonl").read_text().splitlines()[0])
    doc["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]["timeUnixNano"] = stamp
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(doc) + "\n")
    rule, where, message = refused(["import", "otel", src], tmp_path / "out")
    assert (rule, where) == ("OTLP-1", f"{src}:1") and "timeUnixNano" in message, (rule, where, message)


# -- OTLP: an AnyValue that OTLP's proto cannot hold (issue 28: intValue 2**64 was a score; two oneof members) ------


@pytest.mark.parametrize("value, says", [
    ({"intValue": str(2 ** 64)}, "outside int64"),
    ({"intValue": 2 ** 63}, "outside int64"),
    ({"intValue": str(-(2 ** 63) - 1)}, "outside int64"),
    ({"intValue": "1e3"}, "int64"),
    ({"intValue": "3", "doubleValue": 0.5}, "one value"),
    ({"doubleValue": "0.5"}, "a number"),
])
def test_otlp_any_value_outside_the_proto(tmp_path: Path, value: dict, says: str) -> None:
    doc = json.loads((SAMPLES / "otel" / "logs.otlp.jsonl").read_text().splitlines()[0])
    attrs = doc["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]["attributes"]
    scores = [a for a in attrs if a["key"] == "gen_ai.evaluation.score.value"]
    assert scores, "the sample's first event has a score"
    scores[0]["value"] = value
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(doc) + "\n")
    rule, where, message = refused(["import", "otel", src], tmp_path / "out")
    assert (rule, where) == ("OTLP-1", f"{src}:1") and says in message, (rule, where, message)


def test_otlp_any_value_int64_limits_are_scores(tmp_path: Path) -> None:
    """The largest int64 is still a value OTLP holds: imported as the score, exactly."""
    doc = json.loads((SAMPLES / "otel" / "logs.otlp.jsonl").read_text().splitlines()[0])
    attrs = doc["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]["attributes"]
    [a for a in attrs if a["key"] == "gen_ai.evaluation.score.value"][0]["value"] = {"intValue": str(2 ** 63 - 1)}
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(doc) + "\n")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli(["import", "otel", str(src), str(tmp_path / "out"), "--at", AT])
    assert code == 0, err.getvalue()
    lines = [json.loads(x) for x in (tmp_path / "out" / "results.ndjson").read_text().splitlines()]
    assert [s["value"] for x in lines for s in x.get("scores", ())][0] == 2 ** 63 - 1
