"""RunBuilder (builder.py): runs rebuilt from the facts of the worked examples, every shape the spec names, and
every refusal; nothing mocked, every run read back with the strict reader and the run verifier."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import aefgate
from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.builder import BuiltRun, RunBuilder
from aefgate.aef.resultid import result_id
from aefgate.aef.schema import validator
from aefgate.aef.summary import value_matches
from tests._shared import EXAMPLES, SEALED_EXAMPLE_RUNS

# -- the facts of a run, and comparing runs ---------------------------------------------------------------------------

DERIVED = ("schemaVersion", "resultId", "parentResultId", "caseId", "trial", "trials")
DEFINED_METHODS = ("median", "min", "max")


def read_lines(path: Path) -> list[dict]:
    return [doc for _, doc in jsonio.iter_ndjson(path)] if path.is_file() else []


def case_facts(run_dir: Path) -> list[tuple[str, dict, list[dict] | None, str | None, int | None]]:
    """What a producer knows of each case tree of a run: the lines with every derived member removed
    (ids, parents, caseId, trial numbers, rollup counts, aggregation counts; decisive ids become child paths).

    One entry per case and root path: ``(caseId, node, trial trees or None, trials aggregation, k)``.
    """
    lines = read_lines(run_dir / "results.ndjson")
    by_id = {line["resultId"]: line for line in lines}
    kids: dict[str, list[dict]] = defaultdict(list)
    for line in lines:
        if line.get("parentResultId"):
            kids[line["parentResultId"]].append(line)

    def node(line: dict) -> dict:
        n = {k: v for k, v in line.items() if k not in DERIVED}
        if "aggregation" in line:
            agg = {k: v for k, v in line["aggregation"].items()
                   if k not in ("measured", "total", "unmeasured", "decisive")}
            if "decisive" in line["aggregation"]:
                agg["decisive"] = [by_id[r]["path"] for r in line["aggregation"]["decisive"]]
            n["aggregation"] = agg
        if kids.get(line["resultId"]):
            n["children"] = [node(c) for c in kids[line["resultId"]]]
        return n

    out = []
    for line in lines:
        if line.get("parentResultId") or line.get("trial") is not None:
            continue
        if "trials" in line:
            trees = sorted(
                (t for t in lines if t.get("trial") is not None and not t.get("parentResultId")
                 and t["caseId"] == line["caseId"] and t["path"] == line["path"]),
                key=lambda t: t["trial"],
            )
            assert [t["trial"] for t in trees] == list(range(len(trees)))
            out.append((line["caseId"], node(line), [node(t) for t in trees], line["trials"]["aggregation"],
                        line["trials"].get("k")))
        else:
            out.append((line["caseId"], node(line), None, None, None))
    return out


def summary_request(summary: dict) -> dict:
    """The §9.2.1 summarize request of a written summary (plus the producer's stderr, ci, cost, usage, ext)."""
    lanes = []
    for lane in summary["lanes"]:
        entries = []
        for e in lane["metrics"]:
            r = {"metric": e["metric"], "path": e["path"]}
            for k in ("aggregate", "rule", "verdict", "stderr", "ci"):
                if k in e:
                    r[k] = e[k]
            if "aggregate" in e and e["aggregate"]["method"] not in DEFINED_METHODS:
                r["value"] = e["value"]
            entries.append(r)
        lanes.append({"lane": lane["lane"], "metrics": entries})
    req: dict[str, Any] = {"lanes": lanes}
    for k in ("cost", "usage", "ext"):
        if k in summary:
            req[k] = summary[k]
    return req


def _drop_nulls(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _drop_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_drop_nulls(x) for x in v]
    return v


def norm_line(line: dict) -> dict:
    """§9.3's comparison of produced lines: a null member is none, an unmeasured count of 0 is none, an empty
    decisive is none, decisive is a set."""
    line = _drop_nulls(line)
    agg = line.get("aggregation")
    if agg is not None:
        agg = dict(agg)
        unm = {k: c for k, c in (agg.get("unmeasured") or {}).items() if c != 0}
        agg.pop("unmeasured", None)
        if unm:
            agg["unmeasured"] = unm
        dec = agg.pop("decisive", None)
        if dec:
            agg["decisive"] = sorted(dec)
        line["aggregation"] = agg
    return line


def lines_by_key(lines: list[dict]) -> dict[tuple, dict]:
    out: dict[tuple, dict] = {}
    for line in lines:
        key = (line["caseId"], line["path"], line.get("trial"))
        assert key not in out, f"two lines at {key}"
        out[key] = norm_line(line)
    return out


def assert_same_lines(got: list[dict], expected: list[dict]) -> None:
    g, e = lines_by_key(got), lines_by_key(expected)
    assert set(g) == set(e)
    for key in e:
        assert g[key] == e[key], key


def assert_same_summary(got: dict, expected: dict) -> None:
    assert got["runId"] == expected["runId"]
    assert set(got) == set(expected)
    for k in ("cost", "usage", "ext"):
        assert got.get(k) == expected.get(k)
    assert [lane["lane"] for lane in got["lanes"]] == [lane["lane"] for lane in expected["lanes"]]
    for gl, el in zip(got["lanes"], expected["lanes"]):
        assert len(gl["metrics"]) == len(el["metrics"])
        for ge, ee in zip(gl["metrics"], el["metrics"]):
            for k in ("metric", "path", "N", "n", "notMeasured", "verdict", "rule", "aggregate", "stderr", "ci"):
                assert ge.get(k) == ee.get(k), (ee["metric"], k)
            for k in ("sum", "sumSq", "value"):
                if k in ee:
                    assert value_matches(ge.get(k), ee[k]), (ee["metric"], k, ge.get(k), ee[k])


def verify(path: Path):
    from aefgate.aef.verifier import verify_run

    return verify_run(path)


def assert_verifies(path: Path, outcome: str = "unsealed") -> None:
    v = verify(path)
    assert (v.outcome, v.problems) == (outcome, [])


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


# -- rebuilding the worked examples ---------------------------------------------------------------------------------

SEALED_EXAMPLES = SEALED_EXAMPLE_RUNS


def rebuild(src: Path, out: Path, *, as_given: bool, **finish: Any) -> BuiltRun:
    """Write, with RunBuilder, the run ``src`` from its facts: header, metrics, blobs, evidence, traces, case trees
    (derived members removed), gate decisions and the summary request."""
    run = jsonio.read_json(src / "run.json")
    kwargs: dict[str, Any] = {}
    header = run
    if not as_given:
        header = {k: v for k, v in run.items() if k not in ("producer", "imported")}
        if "imported" in run:
            kwargs = {"imported_from": run["imported"]["from"], "asserted": run["imported"]["asserted"]}
    with RunBuilder(out, header, metrics=jsonio.read_json(src / "metrics.json"), as_given=as_given, **kwargs) as b:
        for blob in sorted((src / "blobs").rglob("*")) if (src / "blobs").is_dir() else []:
            if blob.is_file():
                assert b.add_blob_file(blob) == "sha256:" + blob.name
        for record in read_lines(src / "evidence.ndjson"):
            b.add_evidence_record(record)
        for signal in ("traces", "logs"):
            for data in read_lines(src / f"{signal}.otlp.jsonl"):
                b.add_otlp(signal, data)
        for case_id, node, trees, aggregation, k in case_facts(src):
            b.add_case(case_id, node, trees, aggregation=aggregation, k=k)
        for gate in read_lines(src / "gates.ndjson"):
            b.add_gate(gate)
        return b.finish(summary=summary_request(jsonio.read_json(src / "summary.json")), **finish)


def assert_rebuilt(src: Path, out: Path, *, as_given: bool) -> None:
    assert_same_lines(read_lines(out / "results.ndjson"), read_lines(src / "results.ndjson"))
    assert_same_summary(jsonio.read_json(out / "summary.json"), jsonio.read_json(src / "summary.json"))
    assert jsonio.read_json(out / "metrics.json") == jsonio.read_json(src / "metrics.json")
    for name in ("evidence.ndjson", "gates.ndjson", "traces.otlp.jsonl", "logs.otlp.jsonl"):
        assert read_lines(out / name) == read_lines(src / name), name
    blobs = lambda d: sorted(str(p.relative_to(d)) for p in d.rglob("blobs/**/*") if p.is_file())  # noqa: E731
    assert blobs(out) == blobs(src)
    for rel in blobs(src):
        assert (out / rel).read_bytes() == (src / rel).read_bytes()
    src_run, out_run = jsonio.read_json(src / "run.json"), jsonio.read_json(out / "run.json")
    if as_given:
        assert out_run == src_run
    else:
        assert out_run["producer"] == {"name": "aefgate", "version": aefgate.__version__}
        assert out_run.get("imported") == src_run.get("imported")
        strip = lambda r: {k: v for k, v in r.items() if k != "producer"}  # noqa: E731
        assert strip(out_run) == strip(src_run)
    expected_files = {p.name for p in src.iterdir()} - {"seal.json"}
    assert {p.name for p in out.iterdir()} == expected_files


@pytest.mark.parametrize("src", SEALED_EXAMPLES, ids=lambda p: "/".join(p.parts[-2:]))
@pytest.mark.parametrize("as_given", [True, False], ids=["as-given", "imported"])
def test_rebuild_worked_examples(src: Path, as_given: bool, tmp_path: Path):
    """Every sealed worked example, rebuilt from its facts, has the same lines (matched by caseId, path and trial,
    as §9.3 compares them), summary, metrics, evidence, blobs, gates and traces."""
    out = tmp_path / "run"
    built = rebuild(src, out, as_given=as_given)
    assert built.path == out and built.run_hash is None
    assert built.results == len(read_lines(src / "results.ndjson"))
    assert_rebuilt(src, out, as_given=as_given)
    assert listing(tmp_path) == ["run"]  # no temporary folder left


@pytest.mark.parametrize("src", SEALED_EXAMPLES, ids=lambda p: "/".join(p.parts[-2:]))
def test_rebuilt_examples_verify_and_seal(src: Path, tmp_path: Path):
    built = rebuild(src, tmp_path / "plain", as_given=False)
    assert_verifies(built.path, "unsealed")
    sealed = rebuild(src, tmp_path / "sealed", as_given=False, seal="ingest", sealed_at="2030-01-01T00:00:00Z")
    assert sealed.run_hash and len(sealed.run_hash) == 64
    seal = jsonio.read_json(sealed.path / "seal.json")
    assert seal["predicate"]["sealedBy"] == "ingest" and seal["predicate"]["runHash"] == sealed.run_hash
    assert_verifies(sealed.path, "intact")


def test_the_case_facts_are_the_facts():
    """The facts given to the builder carry nothing it derives."""
    facts = case_facts(EXAMPLES / "inspect-aef" / "run")
    assert len(facts) == 9  # 3 cases x 3 root paths, each in 2 trials
    for _case, node, trees, aggregation, _k in facts:
        assert aggregation == "MajorityVote" and len(trees) == 2
        for n in [node, *trees]:
            assert not set(DERIVED) & set(n)


# -- the worked example aef-inspect/input, by hand ------------------------------------------------------------------

AEF_INSPECT = EXAMPLES / "aef-inspect" / "input"
REASONING = AEF_INSPECT / "blobs" / "sha256" / "63" / "635221c9c64f48e2843e4186b0a1b66f07a1492c14dcb866bb83dba6a5e5fef5"


def test_composite_with_children_absences_reasoning_and_usage(tmp_path: Path):
    """aef-inspect/input from its facts, written out by hand: a WeightedSum composite with three children (one
    not_applicable with weight 0), a reasoning blob given as bytes, usage, a trace link, evidence, every state."""
    src = AEF_INSPECT
    run = jsonio.read_json(src / "run.json")
    header = {k: v for k, v in run.items() if k not in ("status", "endedAt", "producer")}
    out = tmp_path / "run"
    helpfulness = read_lines(src / "results.ndjson")[2]
    with RunBuilder(out, header, metrics=jsonio.read_json(src / "metrics.json")) as b:
        assert b.add_evidence("span", span=("4bf92f3577b34da6a3ce929d0e0e4736", "b7ad6b7169203331"),
                              description="The judge call for triage/helpfulness") == "E-1"
        assert b.add_evidence("judge_reasoning", content=REASONING.read_bytes(),
                              description="Judge reasoning for triage/helpfulness") == "E-2"
        for data in read_lines(src / "traces.otlp.jsonl"):
            b.add_otlp("traces", data)
        ids = b.add_case("case-17", {
            "path": "triage", "evaluator": {"id": "composite:triage", "version": "2"}, "state": "failed",
            "severity": "medium", "scores": [{"metric": "triage", "value": 0.55, "normalized": 0.55}],
            "verdictRule": {"expr": "triage >= threshold", "threshold": 0.8, "source": "run.config.thresholds.triage"},
            "aggregation": {"strategy": "WeightedSum", "threshold": 0.8, "score": 0.55, "rulePath": "threshold",
                            "minimumMeasuredShare": 0.5, "decisive": ["triage/helpfulness"]},
            "durationMs": 4210, "turns": 3, "evidence": ["E-1"],
            "children": [
                {"path": "triage/policy", "evaluator": {"id": "code:refund-escalation", "version": "1"},
                 "state": "passed", "scores": [{"metric": "policy", "value": 1.0, "normalized": 1.0}],
                 "annotator": {"kind": "CODE"}, "component": {"weight": 0.5, "required": True}},
                {"path": "triage/helpfulness", "evaluator": {"id": "llm:helpfulness", "version": "3"},
                 "state": "failed", "severity": "medium",
                 "scores": [{"metric": "helpfulness", "value": 0.1, "normalized": 0.1}],
                 "verdictRule": helpfulness["verdictRule"], "annotator": helpfulness["annotator"],
                 "reasoning": REASONING.read_bytes(),  # stored as a blob by the builder
                 "usage": helpfulness["usage"], "startedAt": "2026-10-02T14:02:11.120Z",
                 "endedAt": "2026-10-02T14:02:15Z", "traceLink": helpfulness["traceLink"],
                 "component": {"weight": 0.5, "required": False}, "evidence": ["E-2"]},
                {"path": "triage/groundedness", "evaluator": {"id": "llm:groundedness", "version": "1"},
                 "state": "not_applicable",
                 "reason": "No retrieved context was recorded for this case: nothing to ground against.",
                 "component": {"weight": 0.0, "required": False}},
            ]})
        assert ids[("triage/helpfulness", None)] == "r_1264eeb36620c9cbe97b71ffdbcfd331"
        b.add_case("case-18", {"path": "triage", "evaluator": {"id": "composite:triage", "version": "2"},
                               "state": "warn", "severity": "low",
                               "scores": [{"metric": "triage", "value": 0.78, "normalized": 0.78}]})
        for case, state, reason in [
            # U+2028 is text ([ENC-6])
            ("case-19", "inconclusive", "The panel split 1–1\u2028(a third judge timed out)."),
            ("case-20", "not_measured", "The agent's reply was empty: there was nothing to grade."),
            ("case-21", "skipped", "Skipped by --max-cases 20."),
            ("case-22", "error", "The judge returned HTTP 429 three times."),
        ]:
            b.add_case(case, {"path": "triage", "evaluator": {"id": "composite:triage", "version": "2"},
                              "state": state, "reason": reason})
        for gate in read_lines(src / "gates.ndjson"):
            b.add_gate(gate)
        built = b.finish("completed", ended_at=run["endedAt"],
                         summary=summary_request(jsonio.read_json(src / "summary.json")))
    assert built.results == 9
    assert_same_lines(read_lines(out / "results.ndjson"), read_lines(src / "results.ndjson"))
    assert_same_summary(jsonio.read_json(out / "summary.json"), jsonio.read_json(src / "summary.json"))
    assert read_lines(out / "evidence.ndjson") == read_lines(src / "evidence.ndjson")
    assert (out / "blobs" / REASONING.relative_to(src / "blobs")).read_bytes() == REASONING.read_bytes()
    written = jsonio.read_json(out / "run.json")
    assert written["status"] == "completed" and written["endedAt"] == run["endedAt"]
    assert written["producer"] == {"name": "aefgate", "version": aefgate.__version__}
    assert "imported" not in written
    assert_verifies(out)


def test_trials_and_rollups_of_inspect_aef(tmp_path: Path):
    """inspect-aef/run: two trials per case at three root paths; trial lines carry `trial`, rollups `trials`."""
    src = EXAMPLES / "inspect-aef" / "run"
    rebuild(src, tmp_path / "run", as_given=True)
    lines = read_lines(tmp_path / "run" / "results.ndjson")
    rollups = [line for line in lines if "trials" in line]
    trial_lines = [line for line in lines if "trial" in line]
    assert len(rollups) == 9 and len(trial_lines) == 18
    expected = {(r["caseId"], r["path"]): r["trials"] for r in read_lines(src / "results.ndjson") if "trials" in r}
    assert {(r["caseId"], r["path"]): r["trials"] for r in rollups} == expected
    assert expected[("1", "correct")] == {"n": 2, "passed": 1, "aggregation": "MajorityVote", "agree": False}


# -- the shapes the spec names --------------------------------------------------------------------------------------

RUN_ID = "builder-test-1"
HEADER = {
    "schemaVersion": "1.0",
    "runId": RUN_ID,
    "subject": {"ref": "agent:acme/triage", "kind": "agent", "version": "1.2.3"},
    "deployment": {"ref": "deployment:acme/triage@dev", "endpoint": "https://triage.example.com/v1/chat"},
    "execution": {"targetMode": "live", "stimulus": "suite"},
    "suite": {"ref": "suite:acme/triage", "version": "7", "executionPolicy": {"trialsPerCase": 3,
                                                                             "aggregation": "MajorityVote"}},
    "startedAt": "2026-10-01T10:00:00Z",
    "contentCapture": "on",
}
END = "2026-10-01T10:30:00.5Z"
METRICS = {"schemaVersion": "1.0", "metrics": [
    {"id": "q", "kind": "score", "direction": "higher_better", "scale": {"min": 0, "max": 1}},
    {"id": "pass", "kind": "rate", "direction": "higher_better", "scale": {"min": 0, "max": 1}},
    {"id": "tokens", "kind": "count", "direction": "lower_better", "scale": "unbounded"},
]}


def leaf(path: str, state: str = "passed", value: float | None = 0.9, **more: Any) -> dict:
    n: dict[str, Any] = {"path": path, "evaluator": {"id": f"check:{path}"}, "state": state}
    if state in ("not_measured", "not_applicable", "skipped", "error", "pending"):
        n["reason"] = f"{state} for a reason"
    elif value is not None:
        n["scores"] = [{"metric": "q", "value": value}]
    n.update(more)
    return n


def child(path: str, state: str = "passed", weight: float = 1, required: bool = True, **more: Any) -> dict:
    return leaf(path, state, component={"weight": weight, "required": required}, **more)


def composite(path: str, children: list[dict], state: str = "failed", node: dict | None = None, **agg: Any) -> dict:
    aggregation = {"strategy": "WeightedSum", "rulePath": "threshold", **agg}
    return leaf(path, state, 0.5, aggregation=aggregation, children=children, **(node or {}))


def builder(out: Path, header: dict | None = None, **kw: Any) -> RunBuilder:
    return RunBuilder(out, header or HEADER, metrics=kw.pop("metrics", METRICS), **kw)


def test_tree_ids_parents_and_aggregation_counts(tmp_path: Path):
    out = tmp_path / "run"
    tree = composite("q", [
        child("q/a", "passed"),
        child("q/b", "failed", severity="high"),
        child("q/c", "not_measured"),
        child("q/d", "skipped"),
        child("q/e", "error", weight=2),
        child("q/f", "not_applicable", weight=0),
        composite("q/g", [child("q/g/x", "warn"), child("q/g/y", "inconclusive")], state="warn",
                  node={"component": {"weight": 1, "required": False}}, decisive=["q/g/x"]),
    ], decisive=["q/b", "q/e"], threshold=0.7, score=0.5)
    with builder(out) as b:
        ids = b.add_case("c-1", tree)
        b.finish(ended_at=END)
    lines = {line["path"]: line for line in read_lines(out / "results.ndjson")}
    assert len(lines) == 10 and len(ids) == 10
    for path, line in lines.items():
        assert line["resultId"] == result_id(RUN_ID, "c-1", path, None) == ids[(path, None)]
        assert line["caseId"] == "c-1" and line["schemaVersion"] == "1.0" and "trial" not in line
    assert "parentResultId" not in lines["q"]
    assert lines["q/a"]["parentResultId"] == lines["q"]["resultId"]
    assert lines["q/g/x"]["parentResultId"] == lines["q/g"]["resultId"]
    assert lines["q"]["aggregation"] == {
        "strategy": "WeightedSum", "rulePath": "threshold", "threshold": 0.7, "score": 0.5,
        "measured": 3, "total": 7,
        "unmeasured": {"not_measured": 1, "not_applicable": 1, "skipped": 1, "error": 1},
        "decisive": [lines["q/b"]["resultId"], lines["q/e"]["resultId"]],
    }
    assert lines["q/g"]["aggregation"]["measured"] == 2 and lines["q/g"]["aggregation"]["total"] == 2
    assert lines["q/g"]["aggregation"]["decisive"] == [lines["q/g/x"]["resultId"]]
    assert_verifies(out)


def test_own_composite_with_weight_zero_children(tmp_path: Path):
    """An `Own` composite: its state is its own verdict, its children recorded beside it with weight 0."""
    out = tmp_path / "run"
    scenario = leaf("scenario", "failed", 0.4, aggregation={"strategy": "Own", "rulePath": "threshold",
                                                             "threshold": 0.5, "score": 0.4},
                    children=[child("scenario/assert-1", "passed", weight=0, required=False),
                              child("scenario/assert-2", "failed", weight=0, required=False, value=0.0)])
    with builder(out) as b:
        b.add_case("s-1", scenario)
        b.finish(ended_at=END, summary={"lanes": [{"lane": "main", "metrics": [
            {"metric": "q", "path": "scenario", "rule": "q >= 0.5", "verdict": "failed"},
            {"metric": "pass", "path": "scenario/assert-1"}]}]})
    lines = {line["path"]: line for line in read_lines(out / "results.ndjson")}
    assert lines["scenario"]["aggregation"]["strategy"] == "Own"
    assert lines["scenario"]["aggregation"]["measured"] == 2
    assert {lines[p]["component"]["weight"] for p in ("scenario/assert-1", "scenario/assert-2")} == {0}
    summary = jsonio.read_json(out / "summary.json")
    entries = summary["lanes"][0]["metrics"]
    assert (entries[0]["N"], entries[0]["n"], entries[0]["value"], entries[0]["verdict"]) == (1, 1, 0.4, "failed")
    assert (entries[1]["N"], entries[1]["n"], entries[1]["value"], entries[1]["verdict"]) == (1, 1, 1.0, "scored")
    assert_verifies(out)


def test_trials_with_rollups_of_a_composite(tmp_path: Path):
    """A composite case in three trials: every line of a trial's tree carries its trial, the rollups form the
    case's tree, and each rollup's n, passed and agree are its trial lines'."""
    out = tmp_path / "run"

    def trial_tree(a: str, b: str, state: str) -> dict:
        return composite("q", [child("q/a", a), child("q/b", b)], state=state)

    rollup = composite("q", [child("q/a", "passed"), child("q/b", "failed")], state="failed")
    with builder(out) as b:
        ids = b.add_case("c-1", rollup, [trial_tree("passed", "failed", "failed"),
                                         trial_tree("passed", "passed", "passed"),
                                         trial_tree("passed", "failed", "failed")])
        b.add_case("c-2", leaf("q", "passed"), [leaf("q", "passed")], aggregation="PassAtK", k=1)
        b.finish(ended_at=END, summary={"lanes": [{"lane": "main", "metrics": [{"metric": "pass", "path": "q"},
                                                                               {"metric": "pass", "path": "q/a"}]}]})
    assert len(ids) == 12  # 3 rollups and 3 x 3 trial lines
    lines = read_lines(out / "results.ndjson")
    by = {(line["caseId"], line["path"], line.get("trial")): line for line in lines}
    assert by[("c-1", "q", None)]["trials"] == {"n": 3, "passed": 1, "aggregation": "MajorityVote", "agree": False}
    assert by[("c-1", "q/a", None)]["trials"] == {"n": 3, "passed": 3, "aggregation": "MajorityVote", "agree": True}
    assert by[("c-1", "q/b", None)]["trials"] == {"n": 3, "passed": 1, "aggregation": "MajorityVote", "agree": False}
    assert by[("c-1", "q/a", None)]["parentResultId"] == by[("c-1", "q", None)]["resultId"]
    for t in range(3):
        root = by[("c-1", "q", t)]
        assert "parentResultId" not in root and "trials" not in root
        assert root["resultId"] == result_id(RUN_ID, "c-1", "q", t)
        assert by[("c-1", "q/a", t)]["parentResultId"] == root["resultId"]
        assert by[("c-1", "q/b", t)]["trial"] == t
    assert by[("c-2", "q", None)]["trials"] == {"n": 1, "passed": 1, "aggregation": "PassAtK", "agree": True, "k": 1}
    summary = jsonio.read_json(out / "summary.json")["lanes"][0]["metrics"]
    assert (summary[0]["N"], summary[0]["n"], summary[0]["value"]) == (2, 2, 0.5)  # rollups counted, trials not
    assert (summary[1]["N"], summary[1]["value"]) == (1, 1.0)
    assert_verifies(out)


def test_a_trial_tree_may_lack_a_child(tmp_path: Path):
    """A trial that errored before its children ran: the rollup at the child's path counts the trials that have it."""
    out = tmp_path / "run"
    with builder(out) as b:
        b.add_case("c-1", composite("q", [child("q/a", "passed")], state="passed"),
                   [composite("q", [child("q/a", "passed")], state="passed"),
                    leaf("q", "error")])
        b.finish(ended_at=END)
    by = {(line["path"], line.get("trial")): line for line in read_lines(out / "results.ndjson")}
    assert by[("q", None)]["trials"]["n"] == 2 and by[("q", None)]["trials"]["agree"] is False
    assert by[("q/a", None)]["trials"] == {"n": 1, "passed": 1, "aggregation": "MajorityVote", "agree": True}
    assert_verifies(out)


@pytest.mark.parametrize("state", ["passed", "failed", "warn", "inconclusive", "scored", "not_measured",
                                   "not_applicable", "skipped", "error"])
def test_every_state(state: str, tmp_path: Path):
    out = tmp_path / "run"
    with builder(out) as b:
        b.add_case("c", leaf("q", state, severity="low") if state in ("failed", "warn") else leaf("q", state))
        b.finish(ended_at=END, summary={"lanes": [{"lane": "main", "metrics": [{"metric": "pass", "path": "q"},
                                                                               {"metric": "q", "path": "q"}]}]})
    (line,) = read_lines(out / "results.ndjson")
    assert line["state"] == state
    rate, score = jsonio.read_json(out / "summary.json")["lanes"][0]["metrics"]
    left_out = state == "not_applicable"
    measured_rate = state in ("passed", "failed", "warn", "inconclusive")
    assert (rate["N"], rate["n"]) == (0 if left_out else 1, 1 if measured_rate else 0)
    assert rate["value"] == ((1.0 if state == "passed" else 0.0) if measured_rate else None)
    assert score["n"] == (1 if state in ("passed", "failed", "warn", "inconclusive", "scored") else 0)
    assert_verifies(out)


def test_blobs_are_content_addressed_and_stored_once(tmp_path: Path):
    out = tmp_path / "run"
    data = "réponse\r\n".encode()
    hexd = hashlib.sha256(data).hexdigest()
    src_file = tmp_path / "input.bin"
    src_file.write_bytes(data)
    before = src_file.stat()
    with builder(out) as b:
        assert b.add_blob(data) == f"sha256:{hexd}"
        assert b.add_blob("réponse\r\n") == f"sha256:{hexd}"
        assert b.add_blob_file(src_file, kind="output") == f"sha256:{hexd}"
        other = b.add_blob(b"")
        b.add_case("c", leaf("q", reasoning={"blob": f"sha256:{hexd}", "bytes": len(data)}))
        b.finish(ended_at=END)
    files = sorted(str(p.relative_to(out)) for p in (out / "blobs").rglob("*") if p.is_file())
    empty = other[7:]
    assert files == sorted([f"blobs/sha256/{hexd[:2]}/{hexd}", f"blobs/sha256/{empty[:2]}/{empty}"])
    assert (out / "blobs" / "sha256" / hexd[:2] / hexd).read_bytes() == data
    assert src_file.read_bytes() == data and src_file.stat().st_mtime_ns == before.st_mtime_ns  # input unchanged
    assert not [p for p in out.rglob("incoming*")]
    assert_verifies(out)


def test_many_blobs_are_all_written_before_the_run_closes(tmp_path: Path):
    """Past the first blobs, blobs are written by the builder's writer process: all of them, byte for byte, before
    finish() seals."""
    out = tmp_path / "run"
    blobs = [f"blob {i} ".encode() * (1 + i % 50) for i in range(3000)]
    with builder(out) as b:
        digests = [b.add_blob(d) for d in blobs]
        b.add_case("c", leaf("q", reasoning={"blob": digests[-1], "bytes": len(blobs[-1])}))
        b.finish(ended_at=END, seal="producer")
    for d, data in zip(digests, blobs):
        assert (out / "blobs" / "sha256" / d[7:9] / d[7:]).read_bytes() == data
    assert verify(out).outcome == "intact"


@pytest.mark.parametrize("before", [0, 2000])
def test_a_blob_that_cannot_be_written_fails_the_run_and_leaves_nothing(tmp_path: Path, before: int):
    """A blob that cannot be created (here: its file exists already, so the exclusive create fails) fails the run
    with the OSError it was, whether it was written in the process (the first blobs) or by the writer process
    (later ones); the temporary folder is removed."""
    out = tmp_path / "run"
    data = b"taken"
    hexd = hashlib.sha256(data).hexdigest()
    with pytest.raises(FileExistsError):
        with builder(out) as b:
            taken = b._tmp / "blobs" / "sha256" / hexd[:2] / hexd
            taken.parent.mkdir(parents=True)
            taken.write_bytes(b"in the way")
            for i in range(before):
                b.add_blob(f"blob {i}")
            b.add_blob(data)
            b.add_case("c", leaf("q"))
            b.finish(ended_at=END)
    assert list(tmp_path.iterdir()) == []


def test_evidence_records(tmp_path: Path):
    out = tmp_path / "run"
    with builder(out) as b:
        e1 = b.add_evidence("input", content="What is the refund window?", description="the case's input")
        e2 = b.add_evidence("span", span={"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00f067aa0ba902b7"})
        e3 = b.add_evidence("document", uri="https://docs.example.com/policy", digest="sha256:" + "a" * 64)
        blob = b.add_blob(b"%PDF-1.7", kind="compliance_artifact")
        e4 = b.add_evidence("compliance_artifact", blob=blob, evidence_id="E-audit.1", ext={"org.example": 1})
        e5 = b.add_evidence_record({"evidenceId": "E-9", "kind": "other", "link": {"uri": "urn:example:x"}})
        b.add_case("c", leaf("q", evidence=[e1, e2, e3, e4, e5]))
        b.finish(ended_at=END)
    assert [e1, e2, e3, e4, e5] == ["E-1", "E-2", "E-3", "E-audit.1", "E-9"]
    records = read_lines(out / "evidence.ndjson")
    assert [r["evidenceId"] for r in records] == [e1, e2, e3, e4, e5]
    digest = "sha256:" + hashlib.sha256(b"What is the refund window?").hexdigest()
    assert records[0] == {"schemaVersion": "1.0", "evidenceId": "E-1", "kind": "input", "digest": digest,
                          "link": {"blob": digest}, "description": "the case's input"}
    assert records[1]["link"] == {"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00f067aa0ba902b7"}
    assert "digest" not in records[1]
    assert records[3]["digest"] == records[3]["link"]["blob"] == blob
    assert all(validator("evidence", "writer")(r) is None for r in records)
    assert_verifies(out)


def test_evidence_refusals(tmp_path: Path):
    with builder(tmp_path / "run") as b:
        b.add_evidence("other", uri="urn:x", evidence_id="E-1")
        with pytest.raises(Refusal) as e:
            b.add_evidence("other", uri="urn:y", evidence_id="E-1")
        assert e.value.rule == "EVD-1"
        with pytest.raises(Refusal) as e:
            b.add_evidence("other", uri="urn:y", blob="sha256:" + "0" * 64)
        assert e.value.rule == "EVD-1"  # two links
        with pytest.raises(Refusal) as e:
            b.add_evidence_record({"evidenceId": "E-2", "kind": "other", "link": {"blob": "sha256:" + "0" * 64},
                                   "digest": "sha256:" + "1" * 64})
        assert e.value.rule == "EVD-2"
        with pytest.raises(Refusal) as e:
            b.add_evidence_record({"evidenceId": "bad id", "kind": "other", "link": {"uri": "urn:x"}})
        assert e.value.rule == "VER-2"
        assert b.add_evidence("other", uri="urn:z") == "E-2"  # the refusals changed nothing
        b.add_case("c", leaf("q", evidence=["E-1", "E-2"]))
        b.finish(ended_at=END)
    assert len(read_lines(tmp_path / "run" / "evidence.ndjson")) == 2


@pytest.mark.parametrize("problem", ["uncited-id", "missing-blob", "missing-reasoning-blob", "reasoning-size",
                                     "missing-span", "unknown-gate-result", "undeclared-metric"])
def test_rules_across_files_are_checked_when_the_run_closes(problem: str, tmp_path: Path):
    out = tmp_path / "run"
    rules = {"uncited-id": "EVD-1", "missing-blob": "EVD-1", "missing-reasoning-blob": "EVD-3",
             "reasoning-size": "EVD-3", "missing-span": "RUN-14", "unknown-gate-result": "GATE-1",
             "undeclared-metric": "SUM-1"}
    with pytest.raises(Refusal) as e:
        with builder(out) as b:
            node = leaf("q")
            if problem == "uncited-id":
                node["evidence"] = ["E-404"]
            elif problem == "missing-blob":
                b.add_evidence("other", blob="sha256:" + "0" * 64)
            elif problem == "missing-reasoning-blob":
                node["reasoning"] = {"blob": "sha256:" + "0" * 64, "bytes": 3}
            elif problem == "reasoning-size":
                node["reasoning"] = {"blob": b.add_blob(b"four"), "bytes": 3}
            elif problem == "missing-span":
                b.add_otlp("traces", {"resourceSpans": [{"scopeSpans": [{"spans": [
                    {"traceId": "1" * 32, "spanId": "2" * 16, "name": "agent"}]}]}]})
                node["traceLink"] = {"traceId": "1" * 32, "spanId": "3" * 16}
            elif problem == "unknown-gate-result":
                b.add_gate({"gateId": "gate:ci", "decisionId": "D-1", "rule": {"strategy": "threshold"},
                            "inputs": {"results": ["r_" + "0" * 32]}, "comparability": "not_applicable",
                            "outcome": "no_ship", "decidedAt": END})
            elif problem == "undeclared-metric":
                node["scores"] = [{"metric": "nobody-declared-me", "value": 1}]
            b.add_case("c", node)
            b.finish(ended_at=END)
    assert e.value.rule == rules[problem]
    assert listing(tmp_path) == []


def test_metrics_can_be_declared_while_writing(tmp_path: Path):
    out = tmp_path / "run"
    with RunBuilder(out, HEADER) as b:
        b.declare_metric("latency", "duration", "lower_better", "unbounded", unit="ms")
        b.add_case("c", leaf("q", scores=[{"metric": "latency", "value": 820}, {"metric": "q", "value": 1}]))
        b.declare_metric({"id": "q", "kind": "score", "direction": "higher_better", "scale": {"min": 0, "max": 1}})
        with pytest.raises(Refusal) as e:
            b.declare_metric("q", "score", "none", "unbounded")
        assert e.value.rule == "SUM-1"
        with pytest.raises(Refusal) as e:
            b.declare_metric("bad", "score", "none", {"min": 2, "max": 1})
        assert e.value.rule == "SUM-1"
        b.finish(ended_at=END, summary={"lanes": [{"lane": "perf", "metrics": [{"metric": "latency", "path": "q"}]}]})
    assert [m["id"] for m in jsonio.read_json(out / "metrics.json")["metrics"]] == ["latency", "q"]
    assert jsonio.read_json(out / "summary.json")["lanes"][0]["metrics"][0]["value"] == 820
    assert_verifies(out)


def test_summary_with_producer_aggregates_and_figures(tmp_path: Path):
    out = tmp_path / "run"
    with builder(out) as b:
        b.declare_metric("latency", "duration", "lower_better", "unbounded", unit="ms")
        for i, v in enumerate([0.2, 0.4, 0.9]):
            b.add_case(f"c{i}", leaf("q", value=v, usage=[{"role": "agent", "gen_ai.usage.input_tokens": 10}],
                                     scores=[{"metric": "q", "value": v}, {"metric": "tokens", "value": 10},
                                             {"metric": "latency", "value": 100 * (i + 1)}]))
        b.add_case("c9", leaf("q", "error"))
        b.finish(ended_at=END, summary={
            "lanes": [{"lane": "quality", "metrics": [
                {"metric": "q", "path": "q", "rule": "q >= 0.5", "verdict": "failed", "stderr": 0.2,
                 "ci": {"low": 0.1, "high": 0.9, "level": 0.95, "method": "bootstrap"}},
                {"metric": "tokens", "path": "q"},
                {"metric": "pass", "path": "q", "aggregate": {"method": "pass@k", "k": 2}, "value": 0.75},
                {"metric": "latency", "path": "q", "aggregate": {"method": "median"}},
            ]}],
            "cost": {"totalUsd": 0.5, "source": "price-table:2026"},
            "usage": [{"role": "agent", "gen_ai.usage.input_tokens": 30}],
            "ext": {"org.example": {"note": "figures"}},
        })
    s = jsonio.read_json(out / "summary.json")
    q, tokens, passk, latency = s["lanes"][0]["metrics"]
    assert (q["N"], q["n"], q["notMeasured"], q["verdict"], q["rule"], q["stderr"]) == (4, 3, 1, "failed",
                                                                                        "q >= 0.5", 0.2)
    assert value_matches(q["value"], 0.5) and q["ci"]["method"] == "bootstrap"
    assert (tokens["value"], tokens["N"], tokens["n"]) == (30, 4, 3)  # a count is summed
    assert passk["value"] == 0.75 and passk["aggregate"] == {"method": "pass@k", "k": 2}  # the producer's, as written
    assert latency["value"] == 200 and latency["aggregate"] == {"method": "median"}  # recomputed
    assert s["cost"] == {"totalUsd": 0.5, "source": "price-table:2026"}
    assert s["ext"] == {"org.example": {"note": "figures"}}
    assert validator("summary", "writer")(s) is None
    assert_verifies(out)


@pytest.mark.parametrize("request_, rule", [
    ({"lanes": [{"lane": "a", "metrics": [{"metric": "nope", "path": "q"}]}]}, "SUM-1"),
    ({"lanes": [{"lane": "a", "metrics": []}, {"lane": "a", "metrics": []}]}, "SUM-9"),
    ({"lanes": [{"lane": "a", "metrics": [{"metric": "q", "path": "q"}, {"metric": "q", "path": "q"}]}]}, "SUM-9"),
    ({"lanes": [{"lane": "a", "metrics": [{"metric": "q", "path": "q", "aggregate": {"method": "f1"}}]}]}, "SUM-8"),
    ({"lanes": [{"lane": "a", "metrics": [{"metric": "q", "path": "q", "value": 0.5}]}]}, "SUM-8"),
    ({"lanes": [{"lane": "a", "metrics": [{"metric": "q", "path": "q"}]}],
      "usage": [{"role": "judge"}, {"role": "judge"}]}, "SUM-9"),
])
def test_summary_request_refusals_leave_nothing(request_: dict, rule: str, tmp_path: Path):
    with pytest.raises(Refusal) as e:
        with builder(tmp_path / "run") as b:
            b.add_case("c", leaf("q"))
            b.finish(ended_at=END, summary=request_)
    assert e.value.rule == rule and e.value.exit_code == 2
    assert listing(tmp_path) == []


# -- content capture off --------------------------------------------------------------------------------------------

OFF = {**HEADER, "contentCapture": "off"}


def test_content_capture_off_writes_a_valid_run(tmp_path: Path):
    out = tmp_path / "run"
    with builder(out, OFF) as b:
        span = b.add_evidence("span", span=("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"))
        blob = b.add_blob(b"audit log", kind="compliance_artifact")
        art = b.add_evidence("compliance_artifact", blob=blob)
        b.add_case("c", leaf("q", annotator={"kind": "LLM", "model": "gpt-5.1",
                                             "rubricDigest": "sha256:" + "2" * 64}, evidence=[span, art]))
        b.finish(ended_at=END)
    assert jsonio.read_json(out / "run.json")["contentCapture"] == "off"
    assert_verifies(out)


@pytest.mark.parametrize("what", ["reasoning", "reasoning-bytes", "prompt-hash", "evidence-input",
                                  "evidence-transcript-uri", "blob-judge-reasoning", "blob-reasoning",
                                  "blob-file-tool-call", "evidence-record-output", "otlp-attribute", "otlp-body"])
def test_content_capture_off_refusals(what: str, tmp_path: Path):
    src = tmp_path / "in.txt"
    src.write_text("the prompt")
    with builder(tmp_path / "run", OFF) as b:
        with pytest.raises(Refusal) as e:
            if what == "reasoning":
                b.add_case("c", leaf("q", reasoning={"blob": b.add_blob(b"x"), "bytes": 1}))
            elif what == "reasoning-bytes":
                b.add_case("c", leaf("q", reasoning=b"the judge thought"))
            elif what == "prompt-hash":
                b.add_case("c", leaf("q", annotator={"kind": "LLM", "promptHash": "sha256:" + "1" * 64}))
            elif what == "evidence-input":
                b.add_evidence("input", content="What is the refund window?")
            elif what == "evidence-transcript-uri":
                b.add_evidence("transcript", uri="https://logs.example.com/t/1")
            elif what == "blob-judge-reasoning":
                b.add_blob(b"the judge thought", kind="judge_reasoning")
            elif what == "blob-reasoning":
                b.add_blob(b"the judge thought", kind="reasoning")
            elif what == "blob-file-tool-call":
                b.add_blob_file(src, kind="tool_call")
            elif what == "evidence-record-output":
                b.add_evidence_record({"evidenceId": "E-1", "kind": "output", "link": {"uri": "urn:x"}})
            elif what == "otlp-attribute":
                b.add_otlp("traces", {"resourceSpans": [{"scopeSpans": [{"spans": [
                    {"traceId": "1" * 32, "spanId": "2" * 16, "name": "chat",
                     "attributes": [{"key": "gen_ai.input.messages", "value": {"stringValue": "hi"}}]}]}]}]})
            elif what == "otlp-body":
                b.add_otlp("logs", {"resourceLogs": [{"scopeLogs": [{"logRecords": [
                    {"timeUnixNano": "1", "body": {"stringValue": "hi"}}]}]}]})
        assert e.value.rule == ("SEC-6" if what.startswith("otlp") else "RUN-11")
        b.add_case("c", leaf("q"))  # the builder goes on: the refused call wrote nothing
        b.finish(ended_at=END)
    assert not (tmp_path / "run" / "blobs").exists() or what == "reasoning"
    assert_verifies(tmp_path / "run")


# -- closing: aborted, imported, sealed -----------------------------------------------------------------------------


def test_aborted_run(tmp_path: Path):
    out = tmp_path / "run"
    with builder(out) as b:
        b.add_case("c", leaf("q"))
        built = b.abort("The endpoint stopped answering.", ended_at=END)
    run = jsonio.read_json(out / "run.json")
    assert (run["status"], run["abortReason"], run["endedAt"]) == ("aborted", "The endpoint stopped answering.", END)
    assert built.results == 1
    assert_verifies(out)


def test_aborted_before_any_result(tmp_path: Path):
    out = tmp_path / "run"
    with builder(out) as b:
        b.finish("aborted", abort_reason="The subject never answered.", ended_at=END)
    assert (out / "results.ndjson").read_bytes() == b""
    assert jsonio.read_json(out / "summary.json") == {"schemaVersion": "1.0", "runId": RUN_ID, "lanes": []}
    assert_verifies(out)


@pytest.mark.parametrize("kwargs, rule", [
    ({"status": "aborted"}, "RUN-5"),  # no reason
    ({"status": "completed", "abort_reason": "why"}, "RUN-5"),
    ({"status": "running"}, "RUN-5"),
    ({"ended_at": "2026-10-01T09:59:59Z"}, "RUN-5"),  # before startedAt
    ({"ended_at": "2026-02-31T10:00:00Z"}, "ENC-8"),  # a day that does not exist
])
def test_closing_refusals(kwargs: dict, rule: str, tmp_path: Path):
    with pytest.raises(Refusal) as e:
        with builder(tmp_path / "run") as b:
            b.add_case("c", leaf("q"))
            b.finish(**kwargs)
    assert e.value.rule == rule
    assert listing(tmp_path) == []


def test_closing_defaults_come_from_the_header(tmp_path: Path):
    header = {**HEADER, "status": "aborted", "endedAt": END, "abortReason": "stopped"}
    with builder(tmp_path / "run", header) as b:
        b.finish()
    run = jsonio.read_json(tmp_path / "run" / "run.json")
    assert (run["status"], run["endedAt"], run["abortReason"]) == ("aborted", END, "stopped")
    with builder(tmp_path / "now") as b:
        b.finish()
    assert jsonio.read_json(tmp_path / "now" / "run.json")["status"] == "completed"  # endedAt: now


def test_imported_run_provenance(tmp_path: Path):
    out = tmp_path / "run"
    header = {**HEADER, "producer": {"name": "inspect_ai", "version": "0.3.277"}}
    with builder(out, header, imported_from="inspect_ai 0.3.277",
                 asserted=["subject.ref", "execution.targetMode", "endedAt", "suite.executionPolicy.aggregation",
                           "subject.ref"]) as b:
        b.finish(ended_at=END)
    run = jsonio.read_json(out / "run.json")
    assert run["producer"] == {"name": "aefgate", "version": aefgate.__version__}
    assert run["imported"] == {"from": "inspect_ai 0.3.277",
                               "asserted": ["subject.ref", "execution.targetMode", "endedAt",
                                            "suite.executionPolicy.aggregation"]}
    assert_verifies(out)


@pytest.mark.parametrize("asserted", [["subject.version.major"], ["judges[0].model"], ["costPolicy"],
                                      ["abortReason"]])
def test_imported_run_asserting_an_absent_field_is_refused(asserted: list[str], tmp_path: Path):
    with pytest.raises(Refusal) as e:
        with builder(tmp_path / "run", imported_from="tool 1", asserted=asserted) as b:
            b.finish(ended_at=END)
    assert e.value.rule == "RUN-15"
    assert listing(tmp_path) == []


def test_asserted_array_items(tmp_path: Path):
    header = {**HEADER, "judges": [{"model": "gpt-5.1"}]}
    with builder(tmp_path / "run", header, imported_from="tool 1", asserted=["judges[0].model", "judges"]) as b:
        b.finish(ended_at=END)
    assert_verifies(tmp_path / "run")


def test_sealed_by_the_producer(tmp_path: Path):
    out = tmp_path / "run"
    with builder(out) as b:
        b.add_case("c", leaf("q"))
        built = b.finish(ended_at=END, seal=True, sealed_at="2026-10-01T10:31:00Z")
    seal = jsonio.read_json(out / "seal.json")
    assert seal["predicate"]["sealedBy"] == "producer" and seal["predicate"]["runHash"] == built.run_hash
    assert seal["predicate"]["closedAt"] == END
    assert_verifies(out, "intact")


def test_a_refused_seal_leaves_nothing(tmp_path: Path):
    with pytest.raises(Refusal):
        with builder(tmp_path / "run") as b:
            b.add_case("c", leaf("q"))
            b.finish(ended_at=END, sealed_by="ingest", sealed_at="2026-10-01T10:00:00Z")  # before endedAt
    assert listing(tmp_path) == []


# -- refusals of the tree rules -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, node, rule", [
    ("pending", leaf("q", "pending"), "RES-3"),
    ("absence-without-reason", {"path": "q", "evaluator": {"id": "e"}, "state": "error"}, "RES-2"),
    ("absence-with-scores", leaf("q", "skipped", scores=[{"metric": "q", "value": 0}]), "RES-2"),
    ("child-without-component", composite("q", [leaf("q/a")]), "RES-5"),
    ("children-without-aggregation", {**leaf("q"), "children": [child("q/a")]}, "RES-5"),
    ("decisive-not-a-child", composite("q", [child("q/a")], decisive=["q/b"]), "RES-6"),
    ("total-disagrees", composite("q", [child("q/a")], total=2, measured=1), "RES-6"),
    ("two-lines-one-path", composite("q", [child("q/a"), child("q/a")]), "RES-4"),
    ("child-at-the-root-path", composite("q", [child("q")]), "RES-4"),
    ("derived-member", {**leaf("q"), "resultId": "r_" + "0" * 32}, "VER-2"),
    ("unknown-state", leaf("q", "sealed"), "VER-2"),
    ("not-writer-valid", leaf("q", evaluator={"name": "no id"}), "VER-2"),
    ("score-twice", leaf("q", scores=[{"metric": "q", "value": 1}, {"metric": "q", "value": 0}]), "SUM-1"),
    ("panel", leaf("q", annotator={"kind": "LLM", "panel": {"agree": 3, "of": 2}}), "RES-10"),
    ("times", leaf("q", startedAt="2026-10-01T10:00:01Z", endedAt="2026-10-01T10:00:00.999Z"), "RES-10"),
    ("no-such-day", leaf("q", startedAt="2026-02-30T10:00:00Z"), "ENC-8"),
    ("usage-twice", leaf("q", usage=[{"role": "judge", "model": "m"}, {"role": "judge", "model": "m"}]), "RES-10"),
    ("attack-succeeded-passed", leaf("q", attack={"technique": "jailbreak", "success": True}), "RES-10"),
    ("interval", leaf("q", uncertainty={"ci": {"low": 0.9, "high": 0.1, "level": 0.95}}), "RES-10"),
    ("line-over-4-mib", leaf("q", ext={"blob": "x" * (4 * 1024 * 1024)}), "ENC-17"),
])
def test_tree_refusals(name: str, node: dict, rule: str, tmp_path: Path):
    """Each refused case changes nothing: the builder goes on and the run it writes is valid."""
    out = tmp_path / "run"
    given = copy.deepcopy(node)
    with builder(out) as b:
        with pytest.raises(Refusal) as e:
            b.add_case("c-1", node)
        assert e.value.rule == rule, e.value
        assert e.value.exit_code == 2
        assert node == given  # the input is never modified
        b.add_case("c-2", leaf("q"))
        b.finish(ended_at=END)
    assert [line["caseId"] for line in read_lines(out / "results.ndjson")] == ["c-2"]
    assert_verifies(out)


def test_a_pending_line_in_a_closed_run_is_refused(tmp_path: Path):
    with pytest.raises(Refusal) as e:
        with builder(tmp_path / "run") as b:
            b.add_case("c", composite("q", [child("q/a", "passed"), child("q/b", "pending")]))
            b.finish(ended_at=END)
    assert e.value.rule == "RES-3"
    assert listing(tmp_path) == []


def test_two_lines_at_one_case_path_and_trial_across_calls(tmp_path: Path):
    with builder(tmp_path / "run") as b:
        b.add_case("c", leaf("q"))
        b.add_case("c", leaf("other-root"))  # a second root path of the same case is fine
        with pytest.raises(Refusal) as e:
            b.add_case("c", leaf("q", "failed"))
        assert e.value.rule == "RES-4"
        with pytest.raises(Refusal) as e:  # a rollup at a path the case already has
            b.add_case("c", leaf("q"), [leaf("q")])
        assert e.value.rule == "RES-4"
        b.add_case("d", leaf("q"), [leaf("q")])
        with pytest.raises(Refusal) as e:
            b.add_case("d", leaf("q"), [leaf("q")])
        assert e.value.rule == "RES-4"
        b.finish(ended_at=END)
    assert len(read_lines(tmp_path / "run" / "results.ndjson")) == 4


@pytest.mark.parametrize("name, rollup, trees, kwargs", [
    ("rooted-elsewhere", leaf("q"), [leaf("q"), leaf("r")], {}),
    ("rollup-path-without-trials", composite("q", [child("q/a")]), [leaf("q")], {}),
    ("trial-path-without-rollup", leaf("q"), [composite("q", [child("q/a")])], {}),
    ("no-trials", leaf("q"), [], {}),
    ("parents-differ", composite("q", [child("q/a"), composite("q/b", [child("q/b/c")],
                                                                node={"component": {"weight": 1, "required": True}})],
                                 ), [composite("q", [child("q/a"), child("q/b", aggregation={
                                     "strategy": "Min", "rulePath": "threshold"}, children=[child("q/a/c")])])],
     {"strict_paths": False}),
    ("trees-inside-a-node", {**leaf("q"), "trees": [leaf("q")]}, None, {}),
    ("aggregation-without-trials", leaf("q"), None, {"aggregation": "AllPass"}),
])
def test_trial_refusals(name: str, rollup: dict, trees: list | None, kwargs: dict, tmp_path: Path):
    strict = kwargs.pop("strict_paths", None)
    with builder(tmp_path / "run", strict_paths=strict) as b:
        with pytest.raises(Refusal) as e:
            b.add_case("c", rollup, trees, **kwargs)
        assert e.value.rule == "RES-8", e.value
        b.finish(ended_at=END)
    assert read_lines(tmp_path / "run" / "results.ndjson") == []


def test_trials_need_an_aggregation(tmp_path: Path):
    header = {**HEADER, "suite": {"ref": "suite:x", "version": "1", "executionPolicy": {"trialsPerCase": 2}}}
    with builder(tmp_path / "run", header) as b:
        with pytest.raises(Refusal) as e:
            b.add_case("c", leaf("q"), [leaf("q"), leaf("q")])
        assert e.value.rule == "RES-8"
        b.add_case("c", leaf("q"), [leaf("q"), leaf("q", "failed")], aggregation="AllPass")
        b.finish(ended_at=END)
    assert_verifies(tmp_path / "run")


def test_strict_paths(tmp_path: Path):
    """With strict paths (the §9.2.1 shape) a child's path is its parent's and one more level, and only children
    carry component; without them a path's spelling decides nothing."""
    tree = composite("q", [child("other/a")])
    with builder(tmp_path / "strict", strict_paths=True) as b:
        with pytest.raises(Refusal) as e:
            b.add_case("c", tree)
        assert e.value.rule == "RES-5"
        with pytest.raises(Refusal) as e:
            b.add_case("c", composite("q", [child("q/a/b")]))
        assert e.value.rule == "RES-5"
        with pytest.raises(Refusal) as e:
            b.add_case("c", child("q"))
        assert e.value.rule == "RES-5"
        b.finish(ended_at=END)
    with builder(tmp_path / "loose") as b:
        b.add_case("c", tree)
        b.add_case("d", child("q"))
        b.finish(ended_at=END)
    assert_verifies(tmp_path / "loose")


# -- run.json rules -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", [
    "https://user:secret@triage.example.com/v1",
    "https://token@triage.example.com",
    "https://triage.example.com/v1?api-key=abc",
    "https://triage.example.com/v1#key=abc",
])
def test_credentials_in_the_endpoint_are_refused(endpoint: str, tmp_path: Path):
    header = {**HEADER, "deployment": {"ref": "deployment:acme/x", "endpoint": endpoint}}
    with pytest.raises(Refusal) as e:
        builder(tmp_path / "run", header)
    assert e.value.rule == "RUN-10"
    assert listing(tmp_path) == []


@pytest.mark.parametrize("member", [{"config": {"apiKey": "sk-123"}}, {"ext": {"org.example": {"password": "p"}}},
                                    {"config": {"client": {"access_token": "t"}}}])
def test_credentials_in_config_or_ext_are_refused(member: dict, tmp_path: Path):
    with pytest.raises(Refusal) as e:
        builder(tmp_path / "run", {**HEADER, **member})
    assert e.value.rule == "RUN-10"


def test_harmless_names_are_not_credentials(tmp_path: Path):
    header = {**HEADER, "config": {"max_tokens": 100, "tokenizer": "o200k", "token": None},
              "deployment": {"ref": "deployment:acme/x", "endpoint": "https://h.example.com/@team/v1"}}
    with builder(tmp_path / "run", header) as b:
        b.finish(ended_at=END)
    assert_verifies(tmp_path / "run")


@pytest.mark.parametrize("header, rule", [
    ({**HEADER, "runId": None}, "RUN-1"),
    ({**HEADER, "subject": {"ref": "not a ref", "kind": "agent"}}, "VER-2"),
    ({**HEADER, "schemaVersion": "2.0"}, "VER-2"),
    ({k: v for k, v in HEADER.items() if k != "execution"}, "VER-2"),
])
def test_header_refusals(header: dict, rule: str, tmp_path: Path):
    with pytest.raises(Refusal) as e:
        builder(tmp_path / "run", header)
    assert e.value.rule == rule


def test_run_rules_across_members(tmp_path: Path):
    header = {**HEADER, "judges": [{"model": "j", "calibration": {"labelSet": "labels:x", "n": 2,
                                                                   "dangerousErrors": 3,
                                                                   "measuredAt": "2026-09-01T00:00:00Z"}}]}
    with pytest.raises(Refusal) as e:
        with builder(tmp_path / "a", header) as b:
            b.finish(ended_at=END)
    assert e.value.rule == "RUN-9"
    header = {**HEADER, "suite": {"ref": "suite:x", "version": "1",
                                  "executionPolicy": {"trialsPerCase": 2, "requirePasses": 3}}}
    with pytest.raises(Refusal) as e:
        with builder(tmp_path / "b", header) as b:
            b.finish(ended_at=END)
    assert e.value.rule == "RUN-8"
    assert listing(tmp_path) == []


# -- atomicity, streaming, files ------------------------------------------------------------------------------------


def test_a_crash_mid_write_leaves_nothing(tmp_path: Path):
    out = tmp_path / "run"
    with pytest.raises(ZeroDivisionError):
        with builder(out) as b:
            b.add_blob(b"some content")
            b.add_case("c", leaf("q"))
            assert (b._tmp / "results.ndjson").stat().st_size > 0  # already on disk
            1 / 0
    assert listing(tmp_path) == []  # no output folder, no temporary sibling


def test_a_with_block_without_finish_leaves_nothing(tmp_path: Path):
    with pytest.raises(RuntimeError):
        with builder(tmp_path / "run") as b:
            b.add_case("c", leaf("q"))
    assert listing(tmp_path) == []


def test_discard(tmp_path: Path):
    b = builder(tmp_path / "run").open()
    b.add_case("c", leaf("q"))
    b.discard()
    assert listing(tmp_path) == []
    with pytest.raises(RuntimeError):
        b.add_case("d", leaf("q"))


def test_a_non_empty_destination_is_refused(tmp_path: Path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(Refusal) as e:
        with builder(out) as b:
            b.finish(ended_at=END)
    assert e.value.rule == "OUT-1"
    assert listing(tmp_path) == ["run"] and listing(out) == ["notes.txt"]
    assert (out / "notes.txt").read_text() == "mine"


def test_an_empty_destination_is_used(tmp_path: Path):
    out = tmp_path / "run"
    out.mkdir()
    with builder(out) as b:
        b.finish(ended_at=END)
    assert listing(tmp_path) == ["run"] and "run.json" in listing(out)


def test_lines_stream_to_disk_and_memory_holds_digests(tmp_path: Path):
    """Each case's lines are on disk once it is added; the builder keeps 16-byte digests of the ids, no lines, and
    past a few thousand of them only the latest in memory (the others in its index on disk)."""
    n = 3000
    with builder(tmp_path / "run") as b:
        for i in range(n):
            b.add_case(f"case-{i}", composite("q", [child("q/a"), child("q/b", "not_applicable")]))
            if i == n // 2:
                on_disk = (b._tmp / "results.ndjson").stat().st_size
        assert on_disk > 0
        assert len(b._ids) == 3 * n and len(b._ids._hot) < 4096 and b._ids._db is not None
        for i in (0, n // 2, n - 1):  # the first cases' ids are on disk, and still refuse a second line
            rid = result_id(b.run_id, f"case-{i}", "q/a", None)
            assert bytes.fromhex(rid[2:]) in b._ids
            with pytest.raises(Refusal) as e:
                b.add_case(f"case-{i}", composite("q", [child("q/a"), child("q/b", "not_applicable")]))
            assert e.value.rule == "RES-4"
        built = b.finish(ended_at=END, summary={"lanes": [{"lane": "main", "metrics": [
            {"metric": "q", "path": "q"}, {"metric": "pass", "path": "q/b"}]}]})
    assert built.results == 3 * n
    q, nb = jsonio.read_json(tmp_path / "run" / "summary.json")["lanes"][0]["metrics"]
    assert (q["N"], q["n"]) == (n, n) and (nb["N"], nb["n"]) == (0, 0)
    assert_verifies(tmp_path / "run")


def test_gates_traces_logs_and_ext_files(tmp_path: Path):
    out = tmp_path / "run"
    trace = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "agent"}, "spans": [
        {"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00f067aa0ba902b7", "name": "invoke_agent",
         "kind": 1, "startTimeUnixNano": "1790949731000000000", "endTimeUnixNano": "1790949735000000000"}]}]}]}
    log = {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"timeUnixNano": "1790949735000000000",
                                                           "eventName": "gen_ai.evaluation.result"}]}]}]}
    with builder(out) as b:
        b.add_otlp("traces", trace)
        b.add_otlp("logs", log)
        ids = b.add_case("c", leaf("q", traceLink={"traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
                                                   "spanId": "00f067aa0ba902b7"}))
        b.add_case("d", leaf("q", traceLink={"traceId": "4bf92f3577b34da6a3ce929d0e0e4736"}))
        b.add_gate({"gateId": "gate:ci/pr", "decisionId": "D-1", "rule": {"strategy": "threshold"},
                    "inputs": {"results": [ids[("q", None)]]}, "comparability": "not_applicable",
                    "outcome": "ship", "exitCode": 0, "decisive": [ids[("q", None)]], "decidedAt": END})
        with pytest.raises(Refusal):
            b.add_gate({"gateId": "gate:ci/pr", "decisionId": "D-2", "rule": {"strategy": "x"}, "inputs": {},
                        "comparability": "incomparable", "outcome": "ship", "decidedAt": END})  # GATE-2
        b.add_ext_file("inspect/log-header.json", b"{}")
        with pytest.raises(Refusal) as e:
            b.add_ext_file("inspect/.hidden", b"")
        assert e.value.rule == "RUN-3"
        with pytest.raises(Refusal) as e:
            b.add_ext_file("Inspect/x", b"")  # a case clash with ext/inspect
        assert e.value.rule == "RUN-3"
        b.finish(ended_at=END)
    assert sorted(listing(out)) == ["ext", "gates.ndjson", "logs.otlp.jsonl", "metrics.json", "results.ndjson",
                                    "run.json", "summary.json", "traces.otlp.jsonl"]
    assert read_lines(out / "traces.otlp.jsonl") == [trace] and read_lines(out / "logs.otlp.jsonl") == [log]
    assert (out / "ext" / "inspect" / "log-header.json").read_bytes() == b"{}"
    assert_verifies(out)


def test_files_are_compact_lf_terminated_json(tmp_path: Path):
    out = tmp_path / "run"
    with builder(out) as b:
        b.add_case("c", leaf("q", durationMs=1500, scores=[{"metric": "q", "value": 1}]))
        b.finish(ended_at=END)
    data = (out / "results.ndjson").read_bytes()
    assert data.endswith(b"\n") and b"\r" not in data and b": " not in data
    assert b'"durationMs":1500' in data and b'"value":1}' in data  # integers in plain digits, as given
    for name in ("run.json", "metrics.json", "summary.json"):
        assert validator(name[:-5], "writer")(jsonio.read_json(out / name)) is None


def test_the_header_and_nodes_may_be_typed_structs(tmp_path: Path):
    """A caller's own msgspec structs (renamed fields included) are written as the JSON they encode to."""
    import msgspec

    class Usage(msgspec.Struct, omit_defaults=True):
        role: str
        input_tokens: int = msgspec.field(name="gen_ai.usage.input_tokens")

    class Producer(msgspec.Struct):
        name: str
        version: str

    header = {**HEADER, "status": "running", "producer": Producer("x", "1")}
    with RunBuilder(tmp_path / "run", header, metrics=METRICS) as b:
        b.add_case("c", leaf("q", usage=[Usage(role="agent", input_tokens=5)]))
        b.finish(ended_at=END)
    (line,) = read_lines(tmp_path / "run" / "results.ndjson")
    assert line["usage"] == [{"role": "agent", "gen_ai.usage.input_tokens": 5}]
    assert_verifies(tmp_path / "run")


def test_the_builder_is_used_once(tmp_path: Path):
    b = builder(tmp_path / "run")
    with pytest.raises(RuntimeError):
        b.add_case("c", leaf("q"))  # not open
    with b:
        b.finish(ended_at=END)
    with pytest.raises(RuntimeError):
        b.add_case("c", leaf("q"))
    with pytest.raises(RuntimeError):
        b.open()
    assert os.path.isdir(tmp_path / "run")
    assert json.loads((tmp_path / "run" / "run.json").read_text())["runId"] == RUN_ID


# -- memory that does not grow with the run ---------------------------------------------------------------------------


def test_spill_index_keeps_every_key_with_bounded_memory():
    from aefgate.aef.spill import SpillIndex

    idx = SpillIndex(hot=100, bloom_bytes=1 << 12)
    keys = [hashlib.sha256(b"%d" % i).digest() for i in range(1000)]
    for i, k in enumerate(keys):
        assert idx.get(k) is None and k not in idx
        idx.add(k, i + 1)
        assert len(idx._hot) < 100
    assert len(idx) == 1000 and idx._db is not None
    assert [idx.get(k) for k in keys] == list(range(1, 1001))
    absent = [hashlib.sha256(b"x%d" % i).digest() for i in range(2000)]
    assert not any(k in idx for k in absent)  # the Bloom filter's false positives are checked on disk
    assert SpillIndex.key("a", 1) == SpillIndex.key("a", 1) != SpillIndex.key("a", "1")
    assert SpillIndex.key("ab", "c") != SpillIndex.key("a", "bc") and len(SpillIndex.key(None)) == 16
    idx.close()
    assert len(idx) == 0 and keys[0] not in idx


def test_blobs_evidence_and_rollups_past_the_memory_index(tmp_path: Path):
    """Thousands of blobs, evidence records and rolled-up trials: duplicates are still found once the builder's
    indexes went to disk, and a trial after its rollup is still refused once the trial's bookkeeping is gone."""
    n = 5000
    header = {**HEADER, "suite": {"ref": "suite:s", "version": "1",
                                        "executionPolicy": {"trialsPerCase": 2, "aggregation": "AnyPass"}}}
    with builder(tmp_path / "run", header) as b:
        digests, eids = [], []
        for i in range(n):
            digests.append(b.add_blob(b"blob %d" % i))
            eids.append(b.add_evidence("input", content=b"content %d" % i))
            b.add_trial(f"c{i}", leaf("q"), 0)
            b.add_trial(f"c{i}", leaf("q", "failed", 0.1), 1)
            b.add_rollup(f"c{i}", leaf("q"))
        assert eids[0] == "E-1" and eids[-1] == f"E-{n}" and b._trial_paths == {}
        assert len(b._blobs) == 2 * n and len(b._blobs._hot) < 4096
        assert b.add_blob(b"blob 0") == digests[0]  # stored once
        assert b.add_evidence("input", blob=digests[0]) == f"E-{n + 1}"
        for bad in ({"evidence_id": "E-1"}, {"evidence_id": f"E-{n}"}):
            with pytest.raises(Refusal) as e:
                b.add_evidence("input", blob=digests[1], **bad)
            assert e.value.rule == "EVD-1"
        with pytest.raises(Refusal) as e:
            b.add_trial("c0", leaf("q"), 2)
        assert e.value.rule == "RES-8" and "after its rollup" in e.value.message
        with pytest.raises(Refusal) as e:
            b.add_rollup("c1", leaf("q"))
        assert e.value.rule == "RES-8" and "second rollup" in e.value.message
        b.add_case("x", leaf("r", evidence=[eids[0], eids[-1]], reasoning=b"why"))
        b.finish(ended_at=END)
    assert_verifies(tmp_path / "run")
    assert len(read_lines(tmp_path / "run" / "evidence.ndjson")) == n + 1


# -- the seal of a built run: the builder's own digests, no second read ------------------------------------------------

SEALED_AT = "2026-10-01T10:31:00Z"
TRACE_ID, SPAN_ID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


def build_every_kind_of_file(out: Path, tmp_path: Path, *, blobs: int = 600, before_seal=None, **finish: Any):
    """A run holding every kind of file a builder writes: blobs (past the writer process's first blob, from bytes and
    from a file), evidence, reasoning, gates, traces, logs, an ext/ file; sealed at SEALED_AT. ``before_seal(tmp)``
    runs on the builder's temporary folder when the seal is about to be made (every file written and closed)."""
    from aefgate.aef import sealer

    src = tmp_path / "input.bin"
    src.write_bytes(b"a file's bytes\n" * 100)
    seal_run = sealer.seal_run

    def sealing(run_dir, **kw):
        if before_seal is not None:
            before_seal(Path(run_dir))
        return seal_run(run_dir, **kw)

    sealer.seal_run = sealing
    try:
        with builder(out) as b:
            digests = [b.add_blob(b"blob %d " % i * (1 + i % 7), kind="input") for i in range(blobs)]
            filed = b.add_blob_file(src, kind="output")
            b.add_otlp("traces", {"resourceSpans": [{"scopeSpans": [{"spans": [
                {"traceId": TRACE_ID, "spanId": SPAN_ID, "name": "agent", "kind": 1,
                 "startTimeUnixNano": "1790949731000000000", "endTimeUnixNano": "1790949735000000000"}]}]}]})
            b.add_otlp("logs", {"resourceLogs": [{"scopeLogs": [{"logRecords": [
                {"timeUnixNano": "1790949735000000000", "eventName": "gen_ai.evaluation.result"}]}]}]})
            e1 = b.add_evidence("input", content="What is the refund window?")
            e2 = b.add_evidence("output", blob=filed)
            e3 = b.add_evidence("input", blob=digests[0])
            ids = b.add_case("c", leaf("q", evidence=[e1, e2, e3], reasoning=b"because",
                                       traceLink={"traceId": TRACE_ID, "spanId": SPAN_ID}))
            b.add_case("d", composite("q", [child("q/a"), child("q/b", "failed")]))
            b.add_gate({"gateId": "gate:ci", "decisionId": "D-1", "rule": {"strategy": "threshold"},
                        "inputs": {"results": [ids[("q", None)]]}, "comparability": "not_applicable",
                        "outcome": "ship", "decidedAt": END})
            b.add_ext_file("tool/notes.json", b'{"a":1}')
            finish.setdefault("seal", "producer")
            return b.finish(ended_at=END, sealed_at=SEALED_AT, **finish)
    finally:
        sealer.seal_run = seal_run


def test_the_builders_digests_are_the_files_bytes_and_its_seal_the_verifiers(tmp_path: Path, monkeypatch):
    """(a) The seal's verification takes the builder's list of files and digests (the blob table on disk here): every
    digest is the SHA-256 of the file's bytes as they are on disk, every file is listed, and the manifest, run hash
    and seal.json are exactly what a verification and a seal without the builder's list compute."""
    from aefgate.aef import runfs
    from aefgate.aef.sealer import check_seal, seal_run

    monkeypatch.setenv("AEFGATE_SPILL_FILES", "16")  # the blob table goes to disk past 16 blobs
    seen: list[list[tuple[str, str, int]]] = []
    scan = runfs.Written.scan

    def recording(self, run_dir, **kw):
        sc = scan(self, run_dir, **kw)
        assert sc is not None, "the builder's list was not taken"
        assert sc.files.on_disk
        seen.append(list(sc.files.sealed_entries()))
        return sc

    monkeypatch.setattr(runfs.Written, "scan", recording)
    out = tmp_path / "run"
    built = build_every_kind_of_file(out, tmp_path)
    (entries,) = seen
    on_disk = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert sorted(p for p, _, _ in entries) == [p for p in on_disk if p != "seal.json"]
    assert {p.split("/")[0] for p, _, _ in entries} == {
        "blobs", "evidence.ndjson", "ext", "gates.ndjson", "logs.otlp.jsonl", "metrics.json", "results.ndjson",
        "run.json", "summary.json", "traces.otlp.jsonl"}
    assert sum(1 for p, _, _ in entries if p.startswith("blobs/")) == 600 + 3
    for path, hexd, size in entries:
        data = (out / path).read_bytes()
        assert (hexd, size) == (hashlib.sha256(data).hexdigest(), len(data)), path
    # the manifest and run hash of the folder as read, without the builder's list
    sc = check_seal(out)
    assert sc.problems == []
    assert sc.manifest == "".join(f"{h}  {s}  {p}\n" for p, h, s in entries)
    assert sc.run_hash == built.run_hash
    v = verify(out)
    assert (v.outcome, v.problems, v.run_hash) == ("intact", [], built.run_hash)
    # the same run sealed again without the builder's list: the same seal, byte for byte
    monkeypatch.undo()
    again = tmp_path / "again"
    shutil.copytree(out, again)
    (again / "seal.json").unlink()
    assert seal_run(again, sealed_by="producer", sealed_at=SEALED_AT) == built.run_hash
    assert (again / "seal.json").read_bytes() == (out / "seal.json").read_bytes()


def _first_blob(tmp: Path) -> Path:
    return next(p for p in sorted((tmp / "blobs").rglob("*")) if p.is_file())


def _overwrite(path: Path, old: bytes, new: bytes) -> None:
    data = path.read_bytes()
    assert len(old) == len(new) and old in data
    path.write_bytes(data.replace(old, new, 1))


def _tamper_result_id(tmp: Path) -> None:  # a line's resultId that is not its own (same size)
    line = jsonio.loads((tmp / "results.ndjson").read_bytes().split(b"\n", 1)[0])
    _overwrite(tmp / "results.ndjson", line["resultId"].encode(), b"r_" + b"0" * 32)


def _tamper_evidence_digest(tmp: Path) -> None:  # a record whose digest is not its blob's (a rule across files)
    rec = jsonio.loads((tmp / "evidence.ndjson").read_bytes().split(b"\n", 1)[0])
    _overwrite(tmp / "evidence.ndjson", b'"digest":"' + rec["digest"].encode(), b'"digest":"sha256:' + b"0" * 64)


def _grow_blob(tmp: Path) -> None:  # bytes appended to a blob the builder wrote
    blob = _first_blob(tmp)
    blob.write_bytes(blob.read_bytes() + b"!")


def _foreign_blob(tmp: Path) -> None:  # a file the builder did not write, in a blob folder, not named by its digest
    blob = _first_blob(tmp)
    (blob.parent / (blob.parent.name + "f" * 62)).write_bytes(b"not mine")


def _foreign_file(tmp: Path) -> None:  # a file [RUN-2] does not list
    (tmp / "notes.txt").write_bytes(b"hello")


def _link_for_a_blob(tmp: Path) -> None:  # a blob replaced by a link to a file of the same bytes
    blob = _first_blob(tmp)
    target = tmp.parent.parent / "elsewhere.bin"
    target.write_bytes(blob.read_bytes())
    blob.unlink()
    blob.symlink_to(target)


@pytest.mark.parametrize("tamper, rule, where, code", [
    (_tamper_result_id, "RUN-4", "results.ndjson:1", "result-id"),
    (_tamper_evidence_digest, "RUN-4", "evidence.ndjson:1", "evidence-digest"),
    (_grow_blob, "RUN-4", "blobs/sha256/", "blob-digest"),
    (_foreign_blob, "RUN-4", "blobs/sha256/", "blob-digest"),
    (_link_for_a_blob, "RUN-4", "blobs/sha256/", "path"),
    (_foreign_file, "RUN-2", "notes.txt", None),
], ids=["result-id", "evidence-digest", "blob-grown", "blob-added", "blob-linked", "file-added"])
def test_a_run_that_would_not_verify_is_still_never_sealed(tamper, rule: str, where: str, code: str | None,
                                                            tmp_path: Path):
    """(b) A file of the builder's temporary folder changed after it was written and before the seal (a line, a
    record breaking a rule across files, a blob grown, a file added, a link): the seal is refused as before, with
    the verification's problem, and nothing is left."""
    from aefgate.aef.sealer import NotVerified

    out = tmp_path / "out" / "run"
    with pytest.raises(Refusal) as e:
        build_every_kind_of_file(out, tmp_path, blobs=20, before_seal=tamper)
    assert e.value.rule == rule
    if code is None:
        assert e.value.where == where
    else:
        assert isinstance(e.value, NotVerified)
        assert any(p.startswith(where) and c == code for p, c in e.value.problems), e.value.problems
    assert listing(tmp_path / "out") == []


def test_the_seal_reads_no_blob_back(tmp_path: Path, monkeypatch):
    """(c) Sealing a built run scans no folder and opens no blob: the verification before the seal takes the
    digests the builder computed of the bytes it wrote (a blob is hashed once, when it is added)."""
    import builtins
    import io

    from aefgate.aef import runfs

    opened: list[str] = []

    def refuse_scan(*a, **kw):
        raise AssertionError("the folder was scanned")

    def refuse_blob_hash(path, **kw):
        raise AssertionError(f"a file was hashed from disk: {path}")

    def spy(real):
        def opening(file, *a, **kw):
            if isinstance(file, (str, bytes, os.PathLike)) and "blobs/sha256" in os.fsdecode(file):
                opened.append(os.fsdecode(file))
            return real(file, *a, **kw)
        return opening

    def before_seal(tmp: Path) -> None:
        monkeypatch.setattr(runfs, "scan", refuse_scan)
        monkeypatch.setattr(runfs, "sha256_file", refuse_blob_hash)
        for mod, name in ((os, "open"), (builtins, "open"), (io, "open")):
            monkeypatch.setattr(mod, name, spy(getattr(mod, name)))

    out = tmp_path / "run"
    built = build_every_kind_of_file(out, tmp_path, before_seal=before_seal)
    monkeypatch.undo()
    assert opened == []
    v = verify(out)
    assert (v.outcome, v.problems, v.run_hash) == ("intact", [], built.run_hash)


def test_a_blob_changed_in_place_keeping_its_size_is_found_by_the_next_verification(tmp_path: Path):
    """What the seal no longer reads: a blob's bytes changed behind the builder's back after it wrote them, keeping
    their size (the folder's listing, names and sizes, is checked; the bytes are not read back). The seal lists the
    digest the builder computed of the bytes it wrote, so the next verification finds the change."""

    def flip(tmp: Path) -> None:
        blob = _first_blob(tmp)
        data = blob.read_bytes()
        blob.write_bytes(bytes([data[0] ^ 1]) + data[1:])

    out = tmp_path / "run"
    built = build_every_kind_of_file(out, tmp_path, blobs=20, before_seal=flip)
    v = verify(out)
    assert v.outcome == "invalid" and v.run_hash == built.run_hash
    assert {c for p, c in v.problems if p.startswith("blobs/sha256/")} == {"blob-digest", "digest"}  # [SEAL-6] too


def test_a_sum_beyond_binary64_has_no_value_and_is_not_measured(tmp_path: Path):
    """R10-3 (the reference verifier's ruling on [SUM-5]): two counts of 1.7e308 sum beyond binary64, so the entry
    has no `sum`, no value (`sum` / n) and is `not_measured`; a summary that writes a number there does not verify,
    nor does one that writes null but keeps a verdict."""
    out = tmp_path / "run"
    big = {"path": "tokens", "evaluator": {"id": "check:tokens"}, "state": "scored",
           "scores": [{"metric": "tokens", "value": 1.7e308}]}
    with builder(out) as b:
        b.add_case("c-1", dict(big))
        b.add_case("c-2", dict(big))
        b.finish(ended_at=END, summary={"lanes": [{"lane": "main", "metrics": [
            {"metric": "tokens", "path": "tokens", "rule": "tokens <= 10", "verdict": "passed"}]}]})
    (entry,) = jsonio.read_json(out / "summary.json")["lanes"][0]["metrics"]
    assert (entry["N"], entry["n"], entry["value"], entry["verdict"]) == (2, 2, None, "not_measured")
    assert "sum" not in entry and "sumSq" not in entry
    assert_verifies(out)
    from aefgate.aef.verifier import verify_run

    for value, verdict in ((1.7e308, "not_measured"), (None, "passed")):
        bad = tmp_path / f"bad-{verdict}"
        shutil.copytree(out, bad)
        (bad / "seal.json").unlink(missing_ok=True)
        doc = jsonio.read_json(bad / "summary.json")
        doc["lanes"][0]["metrics"][0].update(value=value, verdict=verdict)
        (bad / "summary.json").write_text(json.dumps(doc))
        assert ("summary.json", "summary") in verify_run(bad).problems, (value, verdict)


@pytest.mark.parametrize("more", [
    {"scores": [{"metric": ["a"], "value": 1}, {"metric": ["a"], "value": 2}]},
    {"usage": [{"role": {"r": 1}, "inputTokens": 1}]},
    {"usage": [{"role": "subject", "model": ["m"], "inputTokens": 1}]},
])
def test_wrong_typed_members_are_refused_by_rule_not_a_type_error(tmp_path: Path, more: dict) -> None:
    """Issue 28: a member of the wrong type (a list where a string belongs) reached a set in the builder's own line
    rules (TypeError: unhashable); it is now compared and refused by the schema check, by rule, with the place."""
    line = leaf("q", "passed", 1.0)
    line.update(more)
    with pytest.raises(Refusal) as e, builder(tmp_path / "run") as b:
        b.add_case("c-1", line)
        b.finish(ended_at=END)
    assert e.value.rule and e.value.rule != "internal" and "c-1" in str(e.value.where), e.value
    assert not (tmp_path / "run").exists()


def test_decisive_entries_that_are_not_strings_are_refused(tmp_path: Path) -> None:
    tree = composite("q", [child("q/a", "passed")], decisive=[["q/a"]])
    with pytest.raises(Refusal) as e, builder(tmp_path / "run") as b:
        b.add_case("c-1", tree)
    assert e.value.rule == "VER-2" and "decisive" in e.value.message


def test_a_number_beyond_binary64_is_refused_by_rule(tmp_path: Path) -> None:
    """A score of 10**400 encodes as digits that no binary64 reader reads ([ENC-3]): the builder refuses it by rule
    with the place (it raised a bare JsonProblem out of its own read-back), and writes nothing."""
    with pytest.raises(Refusal) as e, builder(tmp_path / "run") as b:
        b.add_case("c-1", leaf("q", "passed", 10 ** 400))
        b.finish(ended_at=END)
    assert e.value.rule.startswith("ENC-") and "results.ndjson:1" in str(e.value.where), e.value
    assert not (tmp_path / "run").exists()
