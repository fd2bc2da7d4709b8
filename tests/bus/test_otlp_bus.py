"""The OTLP records' way through the bus (aefgate.bus.otlp_bus), without a server: splitting a request below the
message size, the journal records by run, and the run built from them (docs/design/ingest.md, "OTLP records")."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from aefgate.bus.otlp_bus import (HDR_REJECTED, HDR_SIGNAL, HDR_SUBJECT, HDR_TRACES, build_run, by_trace, journal_lines,
                                  journal_name, split)
from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.verifier import verify_run
from tests._shared import SAMPLES

OTEL = SAMPLES / "otel"


def _docs(name: str) -> list[dict]:
    return [json.loads(x) for x in (OTEL / name).read_text().splitlines()]


def _records(doc: dict, kind: str) -> list[dict]:
    top, mid, leaf = {"logs": ("resourceLogs", "scopeLogs", "logRecords"),
                      "traces": ("resourceSpans", "scopeSpans", "spans")}[kind]
    return [x for r in doc[top] for s in r[mid] for x in s[leaf]]


def test_split_keeps_every_record_in_order_below_the_limit() -> None:
    logs = _docs("logs.otlp.jsonl")
    doc = copy.deepcopy(logs[0])
    doc["resourceLogs"][0]["scopeLogs"][0]["logRecords"] *= 40  # 80 records
    whole = _records(doc, "logs")
    pieces = split(doc, "logs", 8000)
    assert len(pieces) > 1 and all(len(p) <= 8000 for p in pieces)
    back = [r for p in pieces for r in _records(json.loads(p), "logs")]
    assert back == whole
    for p in pieces:  # each piece keeps its resource and scope
        d = json.loads(p)
        assert d["resourceLogs"][0]["resource"] == doc["resourceLogs"][0]["resource"]
        assert d["resourceLogs"][0]["scopeLogs"][0]["scope"] == doc["resourceLogs"][0]["scopeLogs"][0]["scope"]
    assert split(logs[0], "logs", 1 << 20) == [jsonio.dumps(logs[0])]  # fits: one piece, unchanged
    with pytest.raises(Refusal) as e:
        split(doc, "logs", 300)
    assert e.value.rule == "OTLP-2"


def test_by_trace_splits_spans_by_trace_id() -> None:
    traces = _docs("traces.otlp.jsonl")
    both = copy.deepcopy(traces[0])
    both["resourceSpans"] += traces[1]["resourceSpans"]
    parts = by_trace(both)
    assert len(parts) == 2
    for tid, part in parts.items():
        spans = _records(part, "traces")
        assert spans and {s["traceId"] for s in spans} == {tid}
    assert sum(len(_records(p, "traces")) for p in parts.values()) == len(_records(both, "traces"))


def _message(doc: dict, subject: str | None = None) -> tuple[dict, bytes]:
    headers = {HDR_SIGNAL: "logs", "Content-Type": "application/json", HDR_TRACES: "S otlp.x.trace"}
    if subject:
        headers[HDR_SUBJECT] = subject
    return headers, jsonio.dumps(doc)


def test_journal_lines_group_records_by_run() -> None:
    logs = _docs("logs.otlp.jsonl")
    doc = copy.deepcopy(logs[0])
    rl = doc["resourceLogs"][0]
    # one record of the request carries a suite run id of its own: another run
    tagged = copy.deepcopy(rl["scopeLogs"][0]["logRecords"][0])
    tagged.setdefault("attributes", []).append({"key": "test.suite.run.id", "value": {"stringValue": "nightly 1"}})
    rl["scopeLogs"][0]["logRecords"].append(tagged)
    headers, body = _message(doc, "agent:x")
    out = journal_lines(headers, body, "nats:S#7", 7)
    assert sorted(out) == [journal_name(("run", "nightly 1")), journal_name(("svc", "travel-assistant-evals"))]
    assert journal_name(("run", "nightly 1")) == "otel~nightly%201"
    recs = [json.loads(x) for x in out[journal_name(("svc", "travel-assistant-evals"))]]
    assert len(recs) == 1 and recs[0]["n"] == 7 and recs[0]["t"] == "S otlp.x.trace" and recs[0]["s"] == "agent:x"
    assert recs[0]["g"] == ["svc", "travel-assistant-evals"]
    assert _records(recs[0]["o"], "logs") == _records(logs[0], "logs")
    # the same request again gives the same keys (a retry is dropped when the run is built)
    assert journal_lines(headers, body, "nats:S#9", 9)[recs[0]["j"]][0].count(recs[0]["k"].encode()) == 1


@pytest.mark.parametrize("change, rule", [
    (lambda h, d: h.__setitem__(HDR_SIGNAL, "traces"), "INGEST-1"),
    (lambda h, d: d["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0].__setitem__("attributes", []), "OT-6"),
])
def test_journal_lines_take_a_message_whole_or_not_at_all(change, rule) -> None:
    doc = copy.deepcopy(_docs("logs.otlp.jsonl")[0])
    headers, _ = _message(doc)
    change(headers, doc)
    with pytest.raises(Refusal) as e:
        journal_lines(headers, jsonio.dumps(doc), "nats:S#1", 1)
    assert e.value.rule == rule
    with pytest.raises(Refusal) as e:
        journal_lines({HDR_SIGNAL: "logs"}, b"{not json", "nats:S#2", 2)
    assert e.value.rule == "OTLP-1"


def test_build_run_leaves_out_a_repeated_metric_and_fetches_the_spans(tmp_path: Path) -> None:
    logs, traces = _docs("logs.otlp.jsonl"), _docs("traces.otlp.jsonl")
    recs = []
    for i, doc in enumerate(logs):
        recs += [json.loads(x) for v in journal_lines(*_message(doc), f"nats:S#{i + 1}", i + 1).values() for x in v]
    # a different record repeating (case, metric) of the first: OT-6 would refuse the whole run; it is left out
    repeat = copy.deepcopy(recs[0])
    first = repeat["o"]["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]
    first["timeUnixNano"] = str(int(first.get("timeUnixNano", "0")) + 1)
    repeat["o"]["resourceLogs"][0]["scopeLogs"][0]["logRecords"] = [first]
    recs.append(repeat)
    asked = []

    def fetch(where: str, tids: list[str]) -> list[dict]:
        asked.append((where, tids))
        return traces + traces  # every span twice (stored twice): kept once

    built = build_run(recs, tmp_path / "run", tmp_path / "work", gen=1, at="2026-12-04T08:00:00Z", key=None,
                      target_mode=None, fetch_spans=fetch)
    assert built is not None and built.events == 4 and built.traces
    assert [r.rule for r, _ in built.dropped] == ["OT-6"]
    assert asked and asked[0][0] == "S otlp.x.trace" and len(asked[0][1]) == 2
    assert verify_run(tmp_path / "run").outcome == "intact"
    header = jsonio.read_json(tmp_path / "run" / "run.json")
    assert header["runId"] == "travel-assistant-evals"
    assert header["ext"]["aefgate.otel"] == {"rejectedAtIntake": 1}  # the repeat left out: counted in the run
    spans = [s for _, d in jsonio.iter_ndjson(tmp_path / "run" / "traces.otlp.jsonl") for s in _records(d, "traces")]
    assert len(spans) == len({(s["traceId"], s["spanId"]) for s in spans}) == 4
    # the second generation's run id; a group without an evaluation event makes no run
    b2 = build_run(recs[:1], tmp_path / "run2", tmp_path / "work2", gen=2, at="2026-12-04T08:00:00Z", key=None,
                   target_mode=None, fetch_spans=None)
    assert b2 is not None and jsonio.read_json(tmp_path / "run2" / "run.json")["runId"] == "travel-assistant-evals.2"
    plain = copy.deepcopy(recs[0])
    for lr in plain["o"]["resourceLogs"][0]["scopeLogs"][0]["logRecords"]:
        lr.pop("eventName", None)
    assert build_run([plain], tmp_path / "run3", tmp_path / "work3", gen=1, at=None, key=None, target_mode=None,
                     fetch_spans=None) is None
    assert not (tmp_path / "run3").exists()


def test_the_receivers_rejections_reach_the_run_of_their_group(tmp_path: Path) -> None:
    """``Aefgate-Rejected`` (the events a bus receiver rejected at intake, per group) becomes each group's journal
    record's count, also for a group none of whose events was kept; the run built counts them in its ext."""
    doc = _docs("logs.otlp.jsonl")[0]
    headers, body = _message(doc)
    headers[HDR_REJECTED] = json.dumps([["svc", "travel-assistant-evals", 2], ["run", "gone", 3]])
    out = journal_lines(headers, body, "nats:S#1", 1)
    recs = {k: [json.loads(x) for x in v] for k, v in out.items()}
    assert [r["r"] for r in recs[journal_name(("svc", "travel-assistant-evals"))]] == [2]
    (gone,) = recs[journal_name(("run", "gone"))]
    assert gone["r"] == 3 and gone["o"] == {"resourceLogs": []}
    # the same header on another message: another record (counts of two requests are not one retry)
    other = journal_lines(headers, jsonio.dumps(_docs("logs.otlp.jsonl")[1]), "nats:S#2", 2)
    assert json.loads(other[journal_name(("run", "gone"))][0])["k"] != gone["k"]
    built = build_run(recs[journal_name(("svc", "travel-assistant-evals"))], tmp_path / "run", tmp_path / "w", gen=1,
                      at="2026-12-04T08:00:00Z", key=None, target_mode=None, fetch_spans=None)
    assert built is not None
    assert jsonio.read_json(tmp_path / "run" / "run.json")["ext"]["aefgate.otel"] == {"rejectedAtIntake": 2}
    assert build_run([gone], tmp_path / "run2", tmp_path / "w2", gen=1, at=None, key=None, target_mode=None,
                     fetch_spans=None) is None  # no event kept: no run (the receiver's counts say so)
    headers[HDR_REJECTED] = "not json"
    with pytest.raises(Refusal) as e:
        journal_lines(headers, body, "nats:S#3", 3)
    assert e.value.rule == "INGEST-1"
