"""The Evaluation API <-> AEF (docs/mappings/evaluation-api.md) on the samples (the document's FINISHED example
verbatim and the hand-made statuses), hand-made responses, a loopback HTTP server playing the live API, and the
served run. Expected lines are written from the mapping page, not from the importer's output."""

from __future__ import annotations

import copy
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from aefgate.converters.evaluation_api.exporter import to_evaluation_api
from aefgate.converters.evaluation_api.importer import from_evaluation_api
from aefgate.converters.evaluation_api.live import fetch_sessions
from aefgate.converters.fidelity import fidelity, fidelity_from_source
from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.verifier import verify_run
from tests._shared import EXAMPLES, SAMPLES
from tests.conftest import aefgate, one_json

API = SAMPLES / "evaluation-api"
AT = "2026-12-04T00:00:00Z"
SESSION = "3fa85f64-5717-4562-b3fc-2c963f66afa6"


def _lines(run: Path) -> list[dict]:
    return [x for _, x in jsonio.iter_ndjson(run / "results.ndjson")]


def _import(src, tmp: Path, name: str = "run", **kw) -> Path:
    return from_evaluation_api(src, tmp / name, subject=kw.pop("subject", "agent:acme-support"), at=AT, **kw)


def _blob(run: Path, digest: str) -> bytes:
    h = digest.split(":", 1)[1]
    return (run / "blobs" / "sha256" / h[:2] / h).read_bytes()


def _evidence(run: Path) -> dict[str, dict]:
    return {r["evidenceId"]: r for _, r in jsonio.iter_ndjson(run / "evidence.ndjson")}


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    return _import(API / "finished.json", tmp_path_factory.mktemp("evapi"))


def test_the_finished_example_is_one_line_per_insight(finished: Path) -> None:
    assert verify_run(finished).outcome == "intact"
    lines = {x["path"]: x for x in _lines(finished)}
    assert list(lines) == ["featured", "taskCompleted", "summary", "Engagement/engagementLevel",
                           "Engagement/topicsDiscussed", "Engagement/escalationRequested"]  # featured once, in order
    assert {x["caseId"] for x in lines.values()} == {SESSION}
    assert all(x["annotator"] == {"kind": "LLM"} for x in lines.values())
    assert all(x["endedAt"] == "2026-09-09T12:31:07.412Z" for x in lines.values())
    # values, as the page's table says
    assert (lines["featured"]["state"], lines["featured"]["scores"]) == ("scored", [{"metric": "featured", "value": 4}])
    assert lines["taskCompleted"]["scores"] == [{"metric": "taskCompleted", "value": 1, "label": "Resolved"}]
    assert lines["Engagement/engagementLevel"]["scores"] == [{"metric": "Engagement/engagementLevel", "value": 7}]
    assert lines["Engagement/engagementLevel"]["ext"]["aefgate.evaluationApi"]["executionMode"] == "PER_TURN"
    assert lines["taskCompleted"]["ext"]["aefgate.evaluationApi"]["executionMode"] == "ON_CONVERSATION_END"
    assert lines["featured"]["evaluator"] == {"id": "7c9e6679-7425-40de-944b-e07fc1f90ae7"}
    assert lines["summary"]["evaluator"] == {"id": "e2b5c7d9-4f6a-4b3c-8d1e-9f0a1b2c3d4e"}
    und = lines["Engagement/escalationRequested"]
    assert und["state"] == "not_measured" and "scores" not in und and "value null" in und["reason"]
    ev = _evidence(finished)
    (summary_ev,) = lines["summary"]["evidence"]
    assert ev[summary_ev]["kind"] == "other"
    assert _blob(finished, ev[summary_ev]["digest"]) == b"The user rescheduled an appointment and asked about parking."
    (topics,) = lines["Engagement/topicsDiscussed"]["evidence"]
    assert json.loads(_blob(finished, ev[topics]["digest"])) == ["scheduling", "parking"]
    (quote,) = lines["taskCompleted"]["evidence"]
    assert ev[quote]["kind"] == "transcript"
    assert _blob(finished, ev[quote]["digest"]) == "\"So that's Thursday at 9:30 — confirmed.\"".encode()
    assert _blob(finished, lines["featured"]["reasoning"]["blob"]) == \
        b"The agent understood the request and confirmed the outcome with you."
    metrics = {m["id"]: m for m in jsonio.read_json(finished / "metrics.json")["metrics"]}
    assert metrics == {
        "featured": {"id": "featured", "kind": "score", "direction": "none", "scale": {"min": 1, "max": 5}},
        "taskCompleted": {"id": "taskCompleted", "kind": "score", "direction": "none", "scale": {"min": 0, "max": 1}},
        "Engagement/engagementLevel": {"id": "Engagement/engagementLevel", "kind": "score", "direction": "none",
                                       "scale": {"min": 0, "max": 10}}}
    run = jsonio.read_json(finished / "run.json")
    assert run["subject"] == {"ref": "agent:acme-support", "kind": "agent"}
    assert run["startedAt"] == run["endedAt"] == "2026-09-09T12:31:07.412Z"
    assert "runId" in run["imported"]["asserted"] and run["execution"] == {"targetMode": "live"}


@pytest.mark.parametrize("name, expect", [
    ("not-ready", [("evaluation", "error", "NOT_READY")]),
    ("no-evals", [("evaluation", "not_measured", "NO_EVALS")]),
    ("failed", [("evaluation", "error", "FAILED")]),
])
def test_statuses_become_what_they_mean(tmp_path: Path, name: str, expect) -> None:
    run = _import(API / f"{name}.json", tmp_path)
    assert verify_run(run).outcome == "intact"
    got = [(x["path"], x["state"], x["reason"].split(":")[0]) for x in _lines(run)]
    assert got == expect
    assert {x["caseId"] for x in _lines(run)} == {name}  # no session in the body: the file's name


def test_an_undecided_featured_outcome(tmp_path: Path) -> None:
    run = _import(API / "finished-undecided-featured.json", tmp_path)
    lines = {x["path"]: x for x in _lines(run)}
    assert lines["featured"]["state"] == "not_measured"
    (boolean,) = [x for p, x in lines.items() if p != "featured"]
    assert boolean["scores"][0]["value"] in (0, 1) and "label" in boolean["scores"][0]


@pytest.mark.parametrize("name", ["finished", "finished-undecided-featured", "not-ready", "no-evals", "failed"])
def test_export_gives_the_response_back(tmp_path: Path, name: str) -> None:
    run = _import(API / f"{name}.json", tmp_path)
    out = to_evaluation_api(run, tmp_path / "back.json")
    assert json.loads(out.read_bytes()) == json.loads((API / f"{name}.json").read_bytes())
    report = fidelity_from_source("evaluation-api", API / f"{name}.json", options={"subject": "agent:x"})
    assert report.ok and not report.undeclared, report.to_json()


def test_content_capture_off_keeps_no_content(tmp_path: Path) -> None:
    run = _import(API / "finished.json", tmp_path, content_capture="off")
    assert verify_run(run).outcome == "intact"
    assert not any("reasoning" in x or "evidence" in x for x in _lines(run))
    assert not (run / "blobs").exists() or not any((run / "blobs").rglob("*.*"))
    back = json.loads(to_evaluation_api(run, tmp_path / "back.json").read_bytes())
    refs = [s.get("ref") for s in back["results"] if s["type"] == "STANDALONE_INSIGHT"]
    assert refs == ["taskCompleted"]  # the text insight is left out, never made "undecided"
    report = fidelity_from_source("evaluation-api", API / "finished.json",
                                  options={"subject": "agent:x", "content_capture": "off"})
    assert report.ok and not report.undeclared and report.lost


def _response(*sections, status="FINISHED", featured=None) -> dict:
    out = {"status": status, "results": list(sections)}
    if featured is not None:
        out["featured"] = featured
    return out


def _insight(ref: str, order: int, value, **more) -> dict:
    return {"id": f"id-{ref}", "evaluationInsightDefinitionId": f"def-{ref}", "sessionId": "s-1", "ref": ref,
            "name": ref.title(), "order": order, "value": value, "executionMode": "ON_CONVERSATION_END",
            "created": "2026-10-01T08:00:00-05:00", **more}


def _write(tmp: Path, doc: dict, name: str = "resp.json") -> Path:
    p = tmp / name
    p.write_text(json.dumps(doc, ensure_ascii=False))
    return p


def test_hand_made_responses_import_as_the_page_says(tmp_path: Path) -> None:
    group_b = {"type": "GROUP", "order": 5, "id": "g-b", "sessionId": "s-1", "name": "Qualité/Ton",
               "created": "2026-10-01T08:00:00Z",
               "insights": [_insight("z", 2, {"type": "number", "value": -3}),  # negative, no range; listed 2nd first
                            _insight("y", 1, {"type": "text", "value": "très bien 👍"})]}
    group_a = {"type": "GROUP", "order": 1, "id": "g-a", "sessionId": "s-1", "name": "A", "created":
               "2026-10-01T08:00:00Z", "insights": [_insight("x", 1, {"type": "boolean", "value": False})]}
    doc = _response({"type": "STANDALONE_INSIGHT", **_insight("late", 9, {"type": "boolean", "value": True})},
                    group_b, group_a)  # listed out of order
    run = _import(_write(tmp_path, doc), tmp_path)
    assert verify_run(run).outcome == "intact"
    lines = _lines(run)
    assert [x["path"] for x in lines] == ["A/x", "Qualité%2FTon/y", "Qualité%2FTon/z", "late"]  # ascending order
    by = {x["path"].rsplit("/", 1)[-1]: x for x in lines}
    assert by["x"]["scores"] == [{"metric": "A/x", "value": 0}]  # no labels: no label
    assert by["late"]["scores"] == [{"metric": "late", "value": 1}]
    assert by["z"]["scores"][0]["value"] == -3
    metrics = {m["id"]: m["scale"] for m in jsonio.read_json(run / "metrics.json")["metrics"]}
    assert metrics["Qualité%2FTon/z"] == "unbounded"
    assert by["x"]["endedAt"] == "2026-10-01T13:00:00Z"  # -05:00 -> UTC
    back = json.loads(to_evaluation_api(run, tmp_path / "back.json").read_bytes())
    want = copy.deepcopy(doc)
    want["results"].sort(key=lambda s: s["order"])
    for s in want["results"]:
        if s["type"] == "GROUP":
            s["insights"].sort(key=lambda i: i["order"])
    assert back == want  # written back ascending, everything else as given


@pytest.mark.parametrize("change, rule", [
    (lambda d: d["results"][1].__setitem__("order", 1), "EVAPI-3"),
    (lambda d: d["results"][0]["value"].__setitem__("value", 2.5), "EVAPI-1"),
    (lambda d: d["results"][0]["value"].update(minValue=5, maxValue=9), "EVAPI-5"),
    (lambda d: d["results"][1].__setitem__("sessionId", "other"), "EVAPI-6"),
    (lambda d: d["results"].insert(0, {"type": "FEATURED_INSIGHT", "order": -2147483648, "evaluationDefinitionId":
                                       "f", "sessionId": "s-1", "value": {"type": "number", "value": 3},
                                       "created": "2026-10-01T08:00:00Z"}), "EVAPI-4"),
    (lambda d: d.__setitem__("status", "FAILED"), "EVAPI-2"),
    (lambda d: d["results"][0].__setitem__("executionMode", "SOMETIMES"), "EVAPI-1"),
    (lambda d: d["results"][0].__setitem__("created", "yesterday"), "EVAPI-1"),
])
def test_refusals_name_their_rule(tmp_path: Path, change, rule) -> None:
    doc = _response({"type": "STANDALONE_INSIGHT", **_insight("a", 1, {"type": "number", "value": 3})},
                    {"type": "STANDALONE_INSIGHT", **_insight("b", 2, None)})
    change(doc)
    with pytest.raises(Refusal) as e:
        _import(_write(tmp_path, doc), tmp_path)
    assert e.value.rule == rule
    assert not (tmp_path / "run").exists()


def test_cli_import_export_and_refusal(tmp_path: Path) -> None:
    p = aefgate("import", "evaluation-api", API, tmp_path / "run", "--subject", "agent:acme-support", "--at", AT,
                "--json")
    assert p.returncode == 0, p.stderr
    out = one_json(p.stdout)
    assert out["results"] == 11 and out["outcome"] == "intact"
    p = aefgate("export", "evaluation-api", tmp_path / "run", tmp_path / "out", "--json")
    assert p.returncode == 0 and one_json(p.stdout)["responses"] == 5
    for f in API.glob("*.json"):
        name = (f"{SESSION}.json" if f.name == "finished.json" else
                "5b0f3c1e-8d2a-4e67-9c41-2f7a9d3b6e58.json" if "undecided" in f.name else f.name)
        assert json.loads((tmp_path / "out" / name).read_bytes()) == json.loads(f.read_bytes())
    p = aefgate("import", "evaluation-api", API / "finished.json", tmp_path / "nosubject", "--json")
    assert p.returncode == 2 and one_json(p.stdout)["error"]["rule"] == "EVAPI-7"
    assert not (tmp_path / "nosubject").exists()


@pytest.mark.parametrize("run", [EXAMPLES / "inspect-aef" / "run", EXAMPLES / "aef-otel-aef" / "run"])
def test_other_runs_export_and_lose_only_what_is_declared(run: Path) -> None:
    report = fidelity("evaluation-api", run)
    assert report.ok and not report.undeclared, report.to_json()


# -- live ---------------------------------------------------------------------------------------------------------

TOKEN = "s3cr3t-token-value"


class _Api:
    """A loopback HTTP server playing the Evaluation API: per session, a script of answers."""

    def __init__(self, scripts: dict[str, list]) -> None:
        self.scripts = scripts
        self.seen: list[tuple[str, str | None]] = []
        api = self

        class H(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                from urllib.parse import parse_qs, urlsplit

                u = urlsplit(self.path)
                sid = parse_qs(u.query).get("sessionId", [""])[0]
                api.seen.append((u.path, self.headers.get("Authorization")))
                script = api.scripts.get(sid)
                if script is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                step = script.pop(0) if len(script) > 1 else script[0]
                status, body, delay = step if len(step) == 3 else (*step, 0)
                time.sleep(delay)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except BrokenPipeError:  # the client gave up waiting (the slow-answer case)
                    pass

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_live_polls_until_finished_and_never_writes_the_token(tmp_path: Path) -> None:
    finished = json.loads((API / "finished.json").read_bytes())
    api = _Api({SESSION: [(200, {"status": "NOT_READY"}), (503, b"busy"), (200, {"status": "NOT_READY"}),
                          (200, finished, 0.3)],
                "s-none": [(200, {"status": "NO_EVALS"})]})
    try:
        p = aefgate("import", "evaluation-api", tmp_path / "run", "--url", api.url, "--session", SESSION,
                    "--session", "s-none", "--token-env", "EVAL_TOKEN", "--poll", "0.05", "--subject",
                    "agent:acme-support", "--at", AT, "--json", env={"EVAL_TOKEN": TOKEN})
    finally:
        api.close()
    assert p.returncode == 0, p.stderr
    assert [s[0] for s in api.seen] == ["/api/v2/evaluation/status"] * 5
    assert all(auth == f"Bearer {TOKEN}" for _, auth in api.seen)
    run = tmp_path / "run"
    assert verify_run(run).outcome == "intact"
    assert [(x["caseId"], x["path"]) for x in _lines(run)][-1] == ("s-none", "evaluation")
    assert len(_lines(run)) == 7
    for f in run.rglob("*"):
        if f.is_file():
            assert TOKEN.encode() not in f.read_bytes(), f
    assert TOKEN not in p.stdout + p.stderr
    assert jsonio.read_json(run / "run.json")["imported"]["from"] == f"Evaluation API {api.url}"


def test_live_answers_that_are_refused_or_time_out(tmp_path: Path) -> None:
    api = _Api({"slow": [(200, {"status": "NOT_READY"})], "broken": [(500, b"oops")],
                "bad": [(200, b"{not json")]})
    try:
        # NOT_READY past --timeout: the snapshot is the answer (an error line, EVAPI-12)
        (where, body, _h, sid), = fetch_sessions(api.url, ["slow"], timeout=0.3, poll=0.05)
        assert json.loads(body) == {"status": "NOT_READY"} and sid == "slow"
        with pytest.raises(Refusal) as e:
            list(fetch_sessions(api.url, ["missing"], timeout=5, poll=0.05))
        assert e.value.rule == "EVAPI-13" and e.value.exit_code == 2
        with pytest.raises(Refusal) as e:
            list(fetch_sessions(api.url, ["broken"], timeout=0.5, poll=0.05))
        assert e.value.rule == "EVAPI-14" and e.value.exit_code == 1 and "HTTP 500" in e.value.message
        with pytest.raises(Refusal) as e:
            list(fetch_sessions(api.url, ["bad"], timeout=5, poll=0.05))
        assert e.value.rule == "EVAPI-1"
        slow = _Api({"s": [(200, {"status": "FAILED"}, 2.0)]})
        try:  # an answer slower than the whole timeout: given up, EVAPI-14
            with pytest.raises(Refusal) as e:
                list(fetch_sessions(slow.url, ["s"], timeout=0.5, poll=0.05, request_timeout=0.2))
            assert e.value.rule == "EVAPI-14"
        finally:
            slow.close()
        p = aefgate("import", "evaluation-api", tmp_path / "run", "--url", api.url, "--session", "missing",
                    "--subject", "agent:x", "--json")
        assert p.returncode == 2 and one_json(p.stdout)["error"]["rule"] == "EVAPI-13"
        assert not (tmp_path / "run").exists()
    finally:
        api.close()


def test_serve_evaluation_api_answers_from_the_run(finished: Path) -> None:
    import http.client
    import signal
    import subprocess
    import sys

    from tests.bus.test_otlp_receiver import _port
    from tests.conftest import cli_env

    port = _port()
    proc = subprocess.Popen([sys.executable, "-m", "aefgate", "serve", "evaluation-api", str(finished), "--listen",
                             f"127.0.0.1:{port}", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=cli_env())

    def get(path: str) -> tuple[int, bytes]:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if get("/healthz")[0] == 200:
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        status, body = get(f"/api/v2/evaluation/status?sessionId={SESSION}")
        assert status == 200 and json.loads(body) == json.loads((API / "finished.json").read_bytes())
        status, body = get(f"/api/evaluation/status?sessionId={SESSION}")  # v1: an insight is undecided
        assert status == 200 and json.loads(body) == {"status": "NOT_READY"}
        assert get("/api/v2/evaluation/status?sessionId=nope")[0] == 404
        assert get("/api/v2/evaluation/status")[0] == 400
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert json.loads(out)["requests"] == {"200": 2, "404": 1, "400": 1}


def test_a_deeper_path_comes_back_whole(tmp_path: Path):
    """A store v1 run's assertion lines (``scenario/assertions/1``: deeper than a group and its insight) go out as
    the group ``scenario``'s insight ``assertions/1``, named by the path, and come back at the same path, not as
    ``scenario/assertions%2F1`` (docs/mappings/evaluation-api.md); an insight whose name is not its path (a real
    response's) is read as ``<group>/<ref escaped>`` as before."""
    from aefgate.converters.store_v1.importer import from_store_v1

    run = from_store_v1(SAMPLES / "store-v1" / ".agenteval", tmp_path / "run", run="2026-05-20_09-14-07_3fa9c2e1",
                        at="2026-12-01T00:00:00Z").path
    assert "scenario/assertions/1" in {x["path"] for _, x in jsonio.iter_ndjson(run / "results.ndjson")}
    report = fidelity("evaluation-api", run)
    assert report.ok, report.summary()
    assert "results:path" in report.kept, report.summary()
    # the sample's group insight with a ref holding '/': escaped, unless its name is exactly <group>/<ref>
    doc = json.loads((API / "finished.json").read_text())
    group = next(s for s in doc["results"] if s["type"] == "GROUP")
    group["insights"][0]["ref"] = "level/one"
    group["insights"][1]["ref"], group["insights"][1]["name"] = "topics/two", "Engagement/topics/two"
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "finished.json").write_text(json.dumps(doc))
    back = from_evaluation_api(tmp_path / "in" / "finished.json", tmp_path / "imported", subject="agent:acme-support",
                               at="2026-12-01T00:00:00Z")
    paths = {x["path"] for _, x in jsonio.iter_ndjson(Path(back) / "results.ndjson")}
    assert {"Engagement/level%2Fone", "Engagement/topics/two"} <= paths, paths
