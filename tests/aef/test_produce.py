"""§9.3 ``produce`` (produce.py): §9.2.1 scenarios -> runs, judged as the conformance runner judges them, and every
input error §9.3 lists, with nothing written."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.produce import produce
from aefgate.aef.schema import validator
from aefgate.aef.summary import summarize
from tests._shared import SEALED_EXAMPLE_RUNS
from tests.aef.test_builder import (
    assert_same_lines,
    assert_same_summary,
    assert_verifies,
    case_facts,
    listing,
    read_lines,
)

# -- scenarios from the worked examples -----------------------------------------------------------------------------

# members that point at files a produced run does not have (evidence records, blobs)
OTHER_FILES = ("evidence", "reasoning")


def _without(node: dict, keys: tuple[str, ...]) -> dict:
    n = {k: v for k, v in node.items() if k not in keys}
    if "children" in n:
        n["children"] = [_without(c, keys) for c in n["children"]]
    return n


def request_of(summary: dict) -> dict:
    """The summarize request (§9.2.1: lane, metric, path, aggregate, rule, verdict, value) of a written summary."""
    lanes = []
    for lane in summary["lanes"]:
        entries = []
        for e in lane["metrics"]:
            r = {k: e[k] for k in ("metric", "path", "aggregate", "rule", "verdict") if k in e}
            if "aggregate" in e and e["aggregate"]["method"] not in ("median", "min", "max"):
                r["value"] = e["value"]
            entries.append(r)
        lanes.append({"lane": lane["lane"], "metrics": entries})
    return {"lanes": lanes}


def scenario_of(run_dir: Path) -> dict:
    """The §9.2.1 scenario of a run: its facts, one case node per case and root path (with its caseId)."""
    cases = []
    for case_id, node, trees, aggregation, k in case_facts(run_dir):
        case = {"caseId": case_id, **_without(node, OTHER_FILES)}
        if trees is not None:
            case["trials"] = {"aggregation": aggregation, **({"k": k} if k is not None else {})}
            case["trees"] = [_without(t, OTHER_FILES) for t in trees]
        cases.append(case)
    return {
        "run": jsonio.read_json(run_dir / "run.json"),
        "metrics": jsonio.read_json(run_dir / "metrics.json"),
        "cases": cases,
        "summary": request_of(jsonio.read_json(run_dir / "summary.json")),
    }


EXAMPLE_RUNS = SEALED_EXAMPLE_RUNS


def judge(out: Path, scenario: dict, expected_lines: list[dict], count: int) -> None:
    """What the conformance runner checks of a produced run (§9.3)."""
    assert sorted(listing(out)) == ["metrics.json", "results.ndjson", "run.json", "summary.json"]
    assert jsonio.read_json(out / "run.json") == scenario["run"]
    assert jsonio.read_json(out / "metrics.json") == scenario["metrics"]
    lines = read_lines(out / "results.ndjson")
    assert len(lines) == count
    assert all(validator("result", "writer")(line) is None for line in lines)
    assert_same_lines(lines, expected_lines)
    summary = jsonio.read_json(out / "summary.json")
    assert validator("summary", "writer")(summary) is None
    assert summary == summarize(out, scenario["summary"])
    assert_verifies(out)


@pytest.mark.parametrize("src", EXAMPLE_RUNS, ids=lambda p: "/".join(p.parts[-2:]))
def test_produce_the_worked_examples(src: Path, tmp_path: Path):
    scenario = scenario_of(src)
    given = copy.deepcopy(scenario)
    out = tmp_path / "out"
    count = produce(scenario, out)
    assert scenario == given  # the scenario is never modified
    expected = [{k: v for k, v in line.items() if k not in OTHER_FILES} for line in read_lines(src / "results.ndjson")]
    judge(out, scenario, expected, count)
    expected_summary = jsonio.read_json(src / "summary.json")
    got = jsonio.read_json(out / "summary.json")
    for lane in expected_summary["lanes"]:  # the producer's own figures are not part of a request
        for e in lane["metrics"]:
            e.pop("stderr", None)
            e.pop("ci", None)
    for k in ("cost", "usage", "ext"):
        expected_summary.pop(k, None)
    assert_same_summary(got, expected_summary)
    assert listing(tmp_path) == ["out"]


# -- hand-written scenarios -----------------------------------------------------------------------------------------

RUN = {
    "schemaVersion": "1.0",
    "runId": "produce-1",
    "status": "completed",
    "producer": {"name": "conformance-scenario", "version": "1"},
    "subject": {"ref": "agent:acme/triage", "kind": "agent"},
    "execution": {"targetMode": "scripted"},
    "startedAt": "2026-10-01T10:00:00Z",
    "endedAt": "2026-10-01T10:00:00.000000001Z",
}
METRICS = {"schemaVersion": "1.0", "metrics": [
    {"id": "q", "kind": "score", "direction": "higher_better", "scale": {"min": 0, "max": 1}},
    {"id": "pass", "kind": "verdict", "direction": "higher_better", "scale": {"min": 0, "max": 1}},
]}


def node(path: str, state: str = "passed", **more: Any) -> dict:
    n: dict[str, Any] = {"path": path, "evaluator": {"id": f"e:{path}"}, "state": state}
    if state in ("not_measured", "not_applicable", "skipped", "error", "pending"):
        n["reason"] = "because"
    n.update(more)
    return n


def comp(w: float = 1, req: bool = True) -> dict:
    return {"weight": w, "required": req}


def scenario(cases: list[dict], summary: dict | None = None, **top: Any) -> dict:
    s = {"run": RUN, "metrics": METRICS, "cases": cases,
         "summary": summary or {"lanes": [{"lane": "main", "metrics": [{"metric": "pass", "path": "q"}]}]}}
    s.update(top)
    return s


COMPOSITE = {
    "caseId": "c1", **node("q", "failed", severity="high", scores=[{"metric": "q", "value": 0.25}],
                           aggregation={"strategy": "CapByWorst", "rulePath": "severity", "threshold": 0.5,
                                        "score": 0.25, "decisive": ["q/b"]}),
    "children": [
        node("q/a", "passed", component=comp(), scores=[{"metric": "q", "value": 1}]),
        node("q/b", "failed", component=comp(2), severity="high"),
        node("q/c", "not_applicable", component=comp(0, False)),
        {**node("q/d", "warn", component=comp(), aggregation={"strategy": "Own", "rulePath": "threshold"}),
         "children": [node("q/d/x", "error", component=comp(0, False))]},
    ],
}
TRIALS = {
    "caseId": "c2", **node("q", "passed", aggregation={"strategy": "Min", "rulePath": "threshold"}),
    "children": [node("q/a", "passed", component=comp())],
    "trials": {"aggregation": "AtLeast"},
    "trees": [
        {**node("q", "passed", aggregation={"strategy": "Min", "rulePath": "threshold"}),
         "children": [node("q/a", "passed", component=comp())]},
        {**node("q", "failed", aggregation={"strategy": "Min", "rulePath": "threshold", "decisive": ["q/a"]}),
         "children": [node("q/a", "failed", component=comp())]},
    ],
}
RUN_TRIALS = {**RUN, "suite": {"ref": "suite:acme/x", "version": "1",
                               "executionPolicy": {"trialsPerCase": 2, "requirePasses": 1, "aggregation": "AtLeast"}}}


def test_produce_a_composite_and_trials(tmp_path: Path):
    s = scenario([COMPOSITE, TRIALS, {"caseId": "c3", **node("q", "skipped")}], run=RUN_TRIALS,
                 summary={"lanes": [{"lane": "main", "metrics": [
                     {"metric": "pass", "path": "q", "rule": "all pass", "verdict": "failed"},
                     {"metric": "q", "path": "q", "aggregate": {"method": "max"}},
                     {"metric": "q", "path": "q/a", "aggregate": {"method": "pass@k", "k": 2}, "value": 0.5}]}]})
    out = tmp_path / "out"
    assert produce(s, out) == 6 + 6 + 1
    lines = {(l["caseId"], l["path"], l.get("trial")): l for l in read_lines(out / "results.ndjson")}
    q = lines[("c1", "q", None)]
    assert q["aggregation"]["measured"] == 3 and q["aggregation"]["total"] == 4  # warn is measured
    assert q["aggregation"]["unmeasured"]["not_applicable"] == 1
    assert q["aggregation"]["decisive"] == [lines[("c1", "q/b", None)]["resultId"]]
    assert lines[("c1", "q/d", None)]["aggregation"]["unmeasured"]["error"] == 1
    assert lines[("c1", "q/d/x", None)]["parentResultId"] == lines[("c1", "q/d", None)]["resultId"]
    assert lines[("c2", "q", None)]["trials"] == {"n": 2, "passed": 1, "aggregation": "AtLeast", "agree": False}
    assert lines[("c2", "q/a", 1)]["trial"] == 1
    assert lines[("c2", "q/a", 1)]["parentResultId"] == lines[("c2", "q", 1)]["resultId"]
    assert lines[("c2", "q", 1)]["aggregation"]["decisive"] == [lines[("c2", "q/a", 1)]["resultId"]]
    summary = jsonio.read_json(out / "summary.json")
    assert summary == summarize(out, s["summary"])
    entries = summary["lanes"][0]["metrics"]
    assert (entries[0]["N"], entries[0]["n"], entries[0]["value"], entries[0]["verdict"]) == (3, 2, 0.5, "failed")
    assert entries[1]["value"] == 0.25 and entries[1]["n"] == 1  # max, recomputed
    assert (entries[2]["N"], entries[2]["n"], entries[2]["value"], entries[2]["verdict"]) == (2, 1, 0.5, "scored")
    assert sorted(listing(out)) == ["metrics.json", "results.ndjson", "run.json", "summary.json"]
    assert_verifies(out)


def test_trees_may_sit_inside_trials(tmp_path: Path):
    case = {k: v for k, v in TRIALS.items() if k not in ("trials", "trees")}
    case["trials"] = {"aggregation": "MajorityVote", "trees": TRIALS["trees"]}
    assert produce(scenario([case]), tmp_path / "out") == 6
    assert_verifies(tmp_path / "out")


def test_an_aborted_run_with_no_case(tmp_path: Path):
    run = {**RUN, "status": "aborted", "abortReason": "nothing answered"}
    assert produce(scenario([], run=run, summary={"lanes": []}), tmp_path / "out") == 0
    assert (tmp_path / "out" / "results.ndjson").read_bytes() == b""
    assert_verifies(tmp_path / "out")


def test_produce_into_an_empty_folder(tmp_path: Path):
    (tmp_path / "out").mkdir()
    assert produce(scenario([{"caseId": "c", **node("q")}]), tmp_path / "out") == 1
    assert_verifies(tmp_path / "out")


# -- input errors: exit 2, nothing written --------------------------------------------------------------------------


def _pending_child():
    return {**COMPOSITE, "children": [*COMPOSITE["children"][:3], node("q/p", "pending", component=comp())]}


REFUSED = {
    # a scenario not of that shape
    "not-an-object": (["cases"], None),
    "no-cases": ({"run": RUN, "metrics": METRICS, "summary": {"lanes": []}}, None),
    "cases-not-a-list": ({"run": RUN, "metrics": METRICS, "cases": {"c": 1}, "summary": {"lanes": []}}, None),
    "no-summary": ({"run": RUN, "metrics": METRICS, "cases": []}, None),
    "case-without-caseId": (scenario([node("q")]), None),
    "trees-without-trials": (scenario([{k: v for k, v in TRIALS.items() if k != "trials"}]), None),
    "trials-not-an-object": (scenario([{**TRIALS, "trials": "AtLeast"}]), None),
    "trees-twice": (scenario([{**TRIALS, "trials": {"aggregation": "AllPass", "trees": TRIALS["trees"]}}]), None),
    "node-with-unknown-member": (scenario([{"caseId": "c", **node("q", colour="red")}]), "VER-2"),
    # the run is not closed
    "run-running": (scenario([], run={k: v for k, v in RUN.items() if k != "endedAt"} | {"status": "running"}),
                    "RUN-5"),
    "run-invalid": (scenario([], run={**RUN, "status": "completed", "endedAt": None}), None),
    # [RES-3]
    "pending-node": (scenario([{"caseId": "c", **node("q", "pending")}]), "RES-3"),
    "pending-child": (scenario([_pending_child()]), "RES-3"),
    # a child whose path is not its parent's and one more level
    "child-path-elsewhere": (scenario([{**COMPOSITE, "children": [node("r/a", component=comp())]}]), "RES-5"),
    "child-path-two-levels": (scenario([{**COMPOSITE, "children": [node("q/a/b", component=comp())]}]), "RES-5"),
    "child-path-same": (scenario([{**COMPOSITE, "children": [node("q", component=comp())]}]), "RES-5"),
    # [RES-6]
    "decisive-not-a-child": (scenario([{**COMPOSITE, "aggregation": {**COMPOSITE["aggregation"],
                                                                     "decisive": ["q/z"]}}]), "RES-6"),
    # [RES-5]
    "children-without-aggregation": (scenario([{k: v for k, v in COMPOSITE.items() if k != "aggregation"}]),
                                     "RES-5"),
    "child-without-component": (scenario([{**COMPOSITE, "children": [node("q/a")]}]), "RES-5"),
    "component-on-a-root": (scenario([{"caseId": "c", **node("q", component=comp())}]), "RES-5"),
    # [RES-8]
    "trial-rooted-elsewhere": (scenario([{**TRIALS, "trees": [TRIALS["trees"][0], {**node("r"), "children": []}]}]),
                               "RES-8"),
    "rollup-path-no-trial-has": (scenario([{**TRIALS, "trees": [node("q"), node("q", "failed")]}]), "RES-8"),
    "trial-path-no-rollup": (scenario([{**TRIALS, "children": []}]), "RES-8"),
    # [RES-4]
    "two-cases-one-path": (scenario([{"caseId": "c", **node("q")}, {"caseId": "c", **node("q", "failed")}]),
                           "RES-4"),
    "two-children-one-path": (scenario([{**COMPOSITE, "children": [node("q/a", component=comp()),
                                                                   node("q/a", component=comp())]}]), "RES-4"),
    # the input errors of summarize
    "undeclared-metric": (scenario([], summary={"lanes": [{"lane": "a", "metrics": [{"metric": "z", "path": "q"}]}]}),
                          "SUM-1"),
    "lane-twice": (scenario([], summary={"lanes": [{"lane": "a", "metrics": []}, {"lane": "a", "metrics": []}]}),
                   "SUM-9"),
    "entry-twice": (scenario([], summary={"lanes": [{"lane": "a", "metrics": [{"metric": "q", "path": "q"},
                                                                              {"metric": "q", "path": "q"}]}]}),
                    "SUM-9"),
    "aggregate-without-value": (scenario([], summary={"lanes": [{"lane": "a", "metrics": [
        {"metric": "q", "path": "q", "aggregate": {"method": "f1"}}]}]}), "SUM-8"),
    "value-for-a-computed-entry": (scenario([], summary={"lanes": [{"lane": "a", "metrics": [
        {"metric": "q", "path": "q", "value": 0.5}]}]}), "SUM-8"),
    "metrics-declared-twice": (scenario([], metrics={"schemaVersion": "1.0", "metrics": [METRICS["metrics"][0]] * 2}),
                               "SUM-1"),
    "metric-not-declared-by-a-line": (scenario([{"caseId": "c", **node("q", scores=[{"metric": "z", "value": 1}])}]),
                                      "SUM-1"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_input_errors_write_nothing(name: str, tmp_path: Path):
    s, rule = REFUSED[name]
    given = copy.deepcopy(s)
    out = tmp_path / "out"
    with pytest.raises(Refusal) as e:
        produce(s, out)
    assert e.value.exit_code == 2
    if rule is not None:
        assert e.value.rule == rule, e.value
    assert listing(tmp_path) == []  # no OUT, no temporary folder
    assert s == given


def test_an_output_folder_holding_a_file_is_refused(tmp_path: Path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "x").write_text("")
    with pytest.raises(Refusal) as e:
        produce(scenario([{"caseId": "c", **node("q")}]), out)
    assert e.value.exit_code == 2
    assert listing(out) == ["x"] and listing(tmp_path) == ["out"]
