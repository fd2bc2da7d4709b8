"""OpenTelemetry <-> AEF (interop/opentelemetry.md, rules OT-1 .. OT-9): every step and refusal of the page's three
checked examples (otel-aef, aef-otel-aef, aef-otel-aef-redteam), compared as JSON values; the real SDK's requests in
../shared/samples/otel (protobuf bodies and their OTLP/JSON form give the same run); the round trip through the
registry's harness against the page's "What does not carry over"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from aefgate.converters.fidelity import fidelity
from aefgate.converters.otel.exporter import to_otel
from aefgate.converters.otel.importer import from_otel
from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.verifier import verify_run
from tests._shared import EXAMPLES, SAMPLES, copy_run
from tests.conftest import aefgate, one_json
from tests.converters.test_inspect_aef import assert_same_run, metrics_from_lines

OPTION = {"--run-id": "run_id", "--from": "source", "--subject": "subject", "--subject-kind": "subject_kind",
          "--target-mode": "target_mode", "--at": "at", "--content-capture": "content_capture"}


def _expected(example: str) -> dict:
    return json.loads((EXAMPLES / example / "expected.json").read_text())


def _from_otel_args(args: list[str]) -> tuple[str, dict]:
    assert args[0] == "from-otel" and args[2] == "{out}"
    return args[1], {OPTION[args[i]]: args[i + 1] for i in range(3, len(args), 2)}


def _lines(path: Path) -> list:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").split("\n") if x]


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """to-otel of aef-otel-aef's input (the corpus run completed-eval without overlays: aef-inspect/input)."""
    return to_otel(EXAMPLES / "aef-inspect" / "input", tmp_path_factory.mktemp("otel") / "otel.jsonl")


def test_to_otel_gives_the_examples_events(exported: Path):
    # the example's otel.jsonl is not in shared/; its run keeps it byte for byte (logs.otlp.jsonl, the README)
    assert _lines(exported) == _lines(EXAMPLES / "aef-otel-aef" / "run" / "logs.otlp.jsonl")
    page_block = _lines(EXAMPLES / "otel-aef" / "input.jsonl")[0]  # the page's worked example, line 3 of otel.jsonl
    assert _lines(exported)[2] == page_block


@pytest.mark.parametrize("example", ["otel-aef", "aef-otel-aef", "aef-otel-aef-redteam"])
def test_from_otel_steps_reproduce(example: str, exported: Path, tmp_path: Path):
    step = [s for s in _expected(example)["steps"] if s["args"][0] == "from-otel"][0]
    src, opts = _from_otel_args(step["args"])
    source = exported if example == "aef-otel-aef" else EXAMPLES / example / src
    out = from_otel(source, tmp_path / "run", **opts)
    assert verify_run(out).outcome == "intact"
    assert_same_run(out, EXAMPLES / example / step["expected"])


@pytest.mark.parametrize("ref", _expected("otel-aef")["refusals"], ids=lambda r: f"{r['args'][1]}-{r['says']}")
def test_from_otel_refusals(ref: dict, tmp_path: Path):
    src, opts = _from_otel_args(ref["args"])
    with pytest.raises(Refusal) as e:
        from_otel(EXAMPLES / "otel-aef" / src, tmp_path / "out", **opts)
    assert e.value.rule == ref["says"], e.value
    assert e.value.exit_code == 2 and e.value.where
    assert not (tmp_path / "out").exists()


def _refusal_run(name: str, tmp: Path) -> Path:
    """An aef-otel-aef refusal folder completed as ../shared/spec/README.md says: result-id-mismatch over its input;
    the two running runs with the metrics their lines score."""
    src = EXAMPLES / "aef-otel-aef" / "refusals" / name
    if name == "result-id-mismatch":
        d = copy_run(EXAMPLES / "aef-inspect" / "input", tmp / name)
        for p in src.rglob("*"):
            if p.is_file():
                shutil.copyfile(p, d / p.relative_to(src))
        return d
    d = copy_run(src, tmp / name)
    metrics_from_lines(d)
    return d


@pytest.mark.parametrize("name,rule,code", [("result-id-mismatch", "OT-8", 1), ("before-1970", "OT-9", 2),
                                            ("reasoning-not-utf8", "OT-9", 2)])
def test_to_otel_refusals(name: str, rule: str, code: int, tmp_path: Path):
    run = _refusal_run(name, tmp_path)
    if rule == "OT-9":
        assert verify_run(run).outcome == "unsealed"  # a running run that verifies: refused by OT-9, not OT-8
    with pytest.raises(Refusal) as e:
        to_otel(run, tmp_path / "out.jsonl")
    assert (e.value.rule, e.value.exit_code) == (rule, code)
    assert not (tmp_path / "out.jsonl").exists()


def test_round_trip_loses_exactly_the_pages_list():
    """aefgate fidelity otel on the example's input: every loss declared; what the example keeps is kept, and every
    field it says is lost is lost (or absent from the run)."""
    report = fidelity("otel", EXAMPLES / "aef-inspect" / "input")
    assert report.ok and report.back_outcome == "intact", report.summary()
    rt = _expected("aef-otel-aef")["roundTrip"]
    kept = set(report.kept)
    for item in rt["kept"]:
        for f in item["fields"]:
            if f.startswith("results:reasoning"):  # its text comes back as reason
                assert "results:reason" in kept or "results:reason" in report.added
            elif f == "results:reason":  # kept on every line that had one; a line with only a reasoning blob gets
                c = report.fields[f]      # one on the way back (its text), a difference the reasoning item declares
                assert c.kept == sum(1 for x in _lines(EXAMPLES / "aef-inspect" / "input" / "results.ndjson")
                                     if "reason" in x), c
                assert not c.undeclared and all(t.startswith("The reasoning blob") for t in c.losses), c
            elif f == "results:traceLink":
                assert {"results:traceLink.traceId", "results:traceLink.spanId"} <= kept
            else:
                assert f in kept, f
    lost = {f for f, _ in report.lost}
    for item in rt["lost"]:
        for f in item.get("fields", []):
            prefix = "run.json:" if f == "run.json" else f
            seen = [x for x in report.fields if x == prefix or x.startswith((prefix + ".", prefix))]
            if not seen:  # the corpus run's overlays: aef-inspect/input is that run without them (README)
                assert f == "file:overlays", f
                continue
            assert set(seen) & lost, (item["item"], f)


def test_the_sdk_requests_json_and_protobuf_give_one_run(tmp_path: Path):
    s = SAMPLES / "otel"
    a = from_otel(s / "logs.otlp.jsonl", tmp_path / "json", traces=[s / "traces.otlp.jsonl"], at="2026-12-01T00:00:00Z")
    b = from_otel([s / "logs-1.pb", s / "logs-2.pb"], tmp_path / "pb", traces=[s / "traces-1.pb", s / "traces-2.pb"],
                  at="2026-12-01T00:00:00Z")
    files = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file())
    for rel in files:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    assert verify_run(a).outcome == "intact"
    run = jsonio.read_json(a / "run.json")
    assert run["subject"]["telemetry"] == {"agentId": "asst_travel_01", "serviceName": "travel-assistant-evals"}
    lines = [x for _, x in jsonio.iter_ndjson(a / "results.ndjson")]
    assert [(x["caseId"], x["path"], x["state"]) for x in lines] == [
        ("book-flight-basic", "Relevance", "scored"), ("book-flight-basic", "Groundedness", "scored"),
        ("refund-policy", "Relevance", "scored"), ("refund-policy", "Groundedness", "error")]
    assert lines[1]["scores"] == [{"metric": "Groundedness", "value": 0.92, "label": "pass"}]
    assert lines[3]["reason"] and "scores" not in lines[3]
    assert all(x["traceLink"]["spanId"] for x in lines)  # each event's parent span is in traces.otlp.jsonl
    # every request the SDK sent is kept, as its OTLP/JSON form
    assert _lines(a / "logs.otlp.jsonl") == _lines(s / "logs.otlp.jsonl")
    assert _lines(a / "traces.otlp.jsonl") == _lines(s / "traces.otlp.jsonl")


def test_cli_import_export_convert(exported: Path, tmp_path: Path):
    s = SAMPLES / "otel"
    p = aefgate("import", "otel", s / "logs-1.pb", s / "logs-2.pb", tmp_path / "run", "--traces", s / "traces-1.pb",
                "--traces", s / "traces-2.pb", "--at", "2026-12-01T00:00:00Z", "--json")
    assert p.returncode == 0, p.stderr
    doc = one_json(p.stdout)
    assert doc["outcome"] == "intact" and doc["results"] == 4
    p = aefgate("export", "otel", EXAMPLES / "aef-inspect" / "input", tmp_path / "out.jsonl", "--json")
    assert p.returncode == 0, p.stderr
    assert one_json(p.stdout)["lines"] == 9
    assert (tmp_path / "out.jsonl").read_bytes() == exported.read_bytes()
    p = aefgate("export", "otel", tmp_path / "run", tmp_path / "again.jsonl")  # an error line without a summary name
    assert p.returncode == 2 and "[OT-1]" in p.stderr and not (tmp_path / "again.jsonl").exists()
    p = aefgate("convert", EXAMPLES / "otel-aef" / "input.jsonl", tmp_path / "conv", "--from", "otel", "--to",
                "aef", "--run-id", "otel-import-0001", "--from-tool", "hand-written OTLP/JSON (opentelemetry.md)",
                "--subject", "agent:support/support-triage", "--at", "2026-10-09T00:00:00Z", "--json")
    assert p.returncode == 0, p.stderr
    assert_same_run(tmp_path / "conv", EXAMPLES / "otel-aef" / "run")
    p = aefgate("import", "otel", EXAMPLES / "otel-aef" / "refusals" / "pending.jsonl", tmp_path / "x", "--json")
    assert p.returncode == 2 and one_json(p.stdout)["error"]["rule"] == "OT-6" and not (tmp_path / "x").exists()
    p = aefgate("fidelity", "otel", EXAMPLES / "aef-inspect" / "input", "--json")
    assert p.returncode == 0 and one_json(p.stdout)["ok"] is True
    for cmd in (["import", "otel"], ["export", "otel"]):
        assert aefgate(*cmd, "--help").returncode == 0


# -- export otel --to: OTLP/HTTP into a loopback receiver -----------------------------------------------------------


class _Receiver:
    """A loopback OTLP/HTTP receiver (the standard library's HTTP server): keeps every request; answers the first
    ``busy`` requests 503 with Retry-After: 0, then 200 (an empty ExportLogsServiceResponse)."""

    def __init__(self, busy: int = 0, status: int = 200) -> None:
        import http.server
        import threading

        self.requests: list[tuple[str, dict, bytes]] = []
        self.busy, self.status = busy, status
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append((self.path, dict(self.headers), body))
                if outer.busy > 0:
                    outer.busy -= 1
                    self.send_response(503)
                    self.send_header("Retry-After", "0")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(outer.status)
                msg = b"" if outer.status == 200 else b"bad request: nope\n"
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(msg)))
                self.end_headers()
                self.wfile.write(msg)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_export_to_an_otlp_http_endpoint(exported: Path, tmp_path: Path):
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from aefgate.formats.otlp import from_json

    run = EXAMPLES / "aef-inspect" / "input"
    rx = _Receiver(busy=1)
    try:
        p = aefgate("export", "otel", run, "--to", rx.url, "--header", "api-key=s3cret", "--json")
        assert p.returncode == 0, p.stderr
        doc = one_json(p.stdout)
        assert doc["logs"]["records"] == 9 and doc["logs"]["attempts"] == 2  # a 503, Retry-After 0, then 200
        logs = [r for r in rx.requests if r[0] == "/v1/logs"]
        traces = [r for r in rx.requests if r[0] == "/v1/traces"]
        assert len(logs) == 2 and logs[0][2] == logs[1][2]  # the retried request is the same body
        got = ExportLogsServiceRequest()
        got.ParseFromString(logs[1][2])  # decoded by opentelemetry-proto itself
        assert logs[1][1]["Content-Type"] == "application/x-protobuf" and logs[1][1]["api-key"] == "s3cret"
        want = ExportLogsServiceRequest()
        for line in _lines(exported):
            want.resource_logs.extend(from_json(line, "logs").resource_logs)
        assert got == want  # the records received are the file export's
        got_t = ExportTraceServiceRequest()
        got_t.ParseFromString(traces[0][2])
        assert len(got_t.resource_spans[0].scope_spans[0].spans) == 2  # the run's own traces
        # JSON encoding
        rx.requests.clear()
        p = aefgate("export", "otel", run, "--to", rx.url + "/v1/logs", "--encoding", "json")
        assert p.returncode == 0, p.stderr
        body = json.loads(rx.requests[0][2])
        assert body["resourceLogs"] == [rl for line in _lines(exported) for rl in line["resourceLogs"]]
    finally:
        rx.close()
    bad = _Receiver(status=400)
    try:  # a final error: exit 1, the endpoint and the status named
        p = aefgate("export", "otel", run, "--to", bad.url, "--json")
        assert p.returncode == 1
        err = one_json(p.stdout)["error"]
        assert err["rule"] == "OTLP-3" and "HTTP 400: bad request: nope" in err["message"]
        assert bad.url + "/v1/logs" in err["where"]
    finally:
        bad.close()
    p = aefgate("export", "otel", run, "--to", "ftp://x", "--json")
    assert p.returncode == 2 and one_json(p.stdout)["error"]["rule"] == "PUB-1"
    p = aefgate("export", "otel", run, tmp_path / "f.jsonl", "--to", "http://127.0.0.1:9", "--json")
    assert p.returncode == 2 and one_json(p.stdout)["error"]["rule"] == "CLI-2"


def test_the_pages_lists_are_the_declared_losses():
    """Each sentence of the page's "What does not carry over" is a declared loss of its direction (and each of the
    page's declared losses is on the page): one source, checked."""
    from aefgate.converters.otel.losses import LOSSES_FROM_OTEL, LOSSES_TO_OTEL

    text = (EXAMPLES.parent / "opentelemetry.md").read_text(encoding="utf-8").replace("`", "")
    part = text.split("## What does not carry over", 1)[1].split("## Worked example", 1)[0]
    to_otel_list = " ".join(part.split("**AEF → OpenTelemetry.**", 1)[1].split("**OpenTelemetry → AEF.**")[0].split())
    from_otel_list = " ".join(part.split("**OpenTelemetry → AEF.**", 1)[1].split())
    for losses, page in ((LOSSES_TO_OTEL, to_otel_list), (LOSSES_FROM_OTEL, from_otel_list)):
        declared = [x.text for x in losses if x.source == "page"]
        for t in declared:
            assert t in page, t
        assert len(page) == sum(len(t) for t in declared) + len(declared) - 1  # nothing on the page left out


def test_trials_and_their_rollups_come_back(tmp_path: Path):
    """A run with epochs: each trial line's event carries aefgate.trial, each rollup's aefgate.trials.aggregation
    (aefgate's attributes, docs/mappings/otel.md); the import places them back as trial lines and rollups ([RES-8])
    with the same trials counts, and the round trip keeps them."""
    from aefgate.converters.inspect.importer import from_inspect
    from aefgate.converters.otel.exporter import to_otel

    run = from_inspect(SAMPLES / "inspect" / "epochs_mean.eval", tmp_path / "run", at="2026-12-01T00:00:00Z")
    orig = _lines(run / "results.ndjson")
    assert any("trial" in x for x in orig) and any("trials" in x for x in orig)
    events = to_otel(run, tmp_path / "events.jsonl")
    attrs = [{a["key"]: a["value"] for a in rec["attributes"]}
             for doc in _lines(events) for rl in doc["resourceLogs"] for sl in rl["scopeLogs"]
             for rec in sl["logRecords"]]
    assert sorted(int(a["aefgate.trial"]["intValue"]) for a in attrs if "aefgate.trial" in a) == \
        sorted(x["trial"] for x in orig if "trial" in x for _ in x.get("scores") or [None])
    assert sum("aefgate.trials.aggregation" in a for a in attrs) == sum(
        max(1, len(x.get("scores") or [])) for x in orig if "trials" in x)
    report = fidelity("otel", run)
    assert report.ok, report.summary()
    assert {"results:trial", "results:trials.n", "results:trials.passed", "results:trials.aggregation"} <= \
        set(report.kept), report.summary()
