"""The run verifier against the shared example runs, and against copies broken in one way each.

Expected problems come from the specification's tables (§3.9, §4.1): each mutation names the code and path the
spec gives for it, written here by hand, never computed by the verifier.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from aefgate.errors import Refusal
from aefgate.aef.problems import order_problems, problem_sort_key
from aefgate.aef.verifier import verify_run
from tests._shared import CONFORMANCE, EXAMPLES, copy_run

COMPLETED_EVAL = EXAMPLES / "aef-inspect" / "input"  # the corpus run completed-eval, sealed
TRIALS_RUN = EXAMPLES / "inspect-aef" / "run"  # two trials per case, with rollups, sealed
BLOB = "blobs/sha256/63/635221c9c64f48e2843e4186b0a1b66f07a1492c14dcb866bb83dba6a5e5fef5"


def _expected_outcomes() -> list[tuple[str, str]]:
    out = []
    for exp in sorted(EXAMPLES.glob("*/expected.json")):
        runs = json.loads(exp.read_text()).get("runs", {})
        for name, outcome in runs.items():
            out.append((f"{exp.parent.name}/{name}", outcome))
    return out


# The shared copies of these folders are incomplete (../shared/spec/README.md): a file the original had is absent.
# They are completed from their example's input before use, as that README says.
INCOMPLETE = {"aef-inspect-edges/input", "aef-inspect-edges/input-off", "aef-otel-aef-redteam/input"}


def test_every_complete_example_run_verifies_as_expected():
    checked = 0
    for rel, outcome in _expected_outcomes():
        d = EXAMPLES / rel
        if rel in INCOMPLETE or not (d / "run.json").is_file() or rel.startswith(("aef-inspect-edges/refusals", "aef-otel-aef/refusals")):
            continue
        v = verify_run(d)
        assert (v.outcome, v.problems) == (outcome, []), rel
        checked += 1
    assert checked >= 8


def test_conformance_completed_eval():
    exp = json.loads((CONFORMANCE / "valid" / "completed-eval" / "expected.json").read_text())
    v = verify_run(CONFORMANCE / "valid" / "completed-eval" / exp["run"])
    assert v.outcome == exp["outcome"]
    assert [list(p) for p in v.problems] == exp["problems"]
    # the run hash of a sealed run is its seal's ([SEAL-4]), and here it is also the one recomputed
    seal = json.loads((CONFORMANCE / "valid" / "completed-eval" / "run" / "seal.json").read_text())
    assert v.run_hash == seal["predicate"]["runHash"]


def _complete(src: Path, dst: Path, rel: str) -> Path:
    """Complete a partial copy: a closed run gets the empty summary its converter output shows (inspect.json's
    ``results.scores`` is ``[]``), and an absent metrics.json is rebuilt declaring the metrics the lines score."""
    copy_run(src, dst)
    run = json.loads((dst / "run.json").read_text())
    if run["status"] != "running" and not (dst / "summary.json").exists():
        (dst / "summary.json").write_text(json.dumps({"schemaVersion": "1.0", "runId": run["runId"], "lanes": []}))
    if not (dst / "metrics.json").exists():
        used = []
        for line in (dst / "results.ndjson").read_text().splitlines():
            for s in json.loads(line).get("scores", ()):
                if s["metric"] not in used:
                    used.append(s["metric"])
        metrics = [{"id": m, "kind": "score", "direction": "none", "scale": "unbounded"} for m in used]
        (dst / "metrics.json").write_text(json.dumps({"schemaVersion": "1.0", "metrics": metrics}))
    return dst


@pytest.mark.parametrize(
    "rel",
    [
        "aef-inspect-edges/input",
        "aef-inspect-edges/input-off",
        "aef-inspect-edges/refusals/roots-differ",
        "aef-inspect-edges/refusals/output-cited",
        "aef-inspect-edges/refusals/reasoning-not-utf8",
        "aef-otel-aef/refusals/before-1970",
        "aef-otel-aef/refusals/reasoning-not-utf8",
    ],
)
def test_incomplete_example_runs_completed(tmp_path, rel):
    outcome = dict(_expected_outcomes())[rel]
    d = _complete(EXAMPLES / rel, tmp_path / "run", rel)
    v = verify_run(d)
    assert (v.outcome, v.problems) == (outcome, [])


# -- one defect each ---------------------------------------------------------------------------------------------


def _lines(p: Path) -> list[bytes]:
    return p.read_bytes().split(b"\n")[:-1]


def _edit_line(run: Path, name: str, lineno: int, fn) -> None:
    lines = _lines(run / name)
    lines[lineno - 1] = fn(lines[lineno - 1])
    (run / name).write_bytes(b"\n".join(lines) + b"\n")


def _add_member(raw_member: bytes):
    return lambda line: line[:-1] + b"," + raw_member + b"}"


def _set_json(run: Path, name: str, lineno: int, fn) -> None:
    def edit(line: bytes) -> bytes:
        d = json.loads(line)
        fn(d)
        return json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode()

    _edit_line(run, name, lineno, edit)


def _nested(depth: int):
    v: object = 1
    for _ in range(depth):
        v = {"a": v}
    return v


MUTATIONS = {
    # name: (base run, edit, expected problems without a seal, files whose bytes change)
    "line-without-final-lf": (
        COMPLETED_EVAL,
        lambda r: (r / "results.ndjson").write_bytes((r / "results.ndjson").read_bytes()[:-1]),
        [("results.ndjson", "encoding")],
        ["results.ndjson"],
    ),
    "cr": (
        COMPLETED_EVAL,
        lambda r: (r / "results.ndjson").write_bytes((r / "results.ndjson").read_bytes().replace(b"\n", b"\r\n", 1)),
        [("results.ndjson", "encoding")],
        ["results.ndjson"],
    ),
    "blank-line": (
        COMPLETED_EVAL,
        lambda r: (r / "evidence.ndjson").write_bytes((r / "evidence.ndjson").read_bytes() + b"\n"),
        [("evidence.ndjson", "encoding")],
        ["evidence.ndjson"],
    ),
    "bom": (
        COMPLETED_EVAL,
        lambda r: (r / "run.json").write_bytes(b"\xef\xbb\xbf" + (r / "run.json").read_bytes()),
        [("run.json", "encoding")],
        ["run.json"],
    ),
    "duplicate-member": (
        COMPLETED_EVAL,
        lambda r: _edit_line(r, "results.ndjson", 5, _add_member(b'"state":"warn"')),
        [("results.ndjson:5", "encoding")],
        ["results.ndjson"],
    ),
    "duplicate-member-deep": (
        COMPLETED_EVAL,
        lambda r: _edit_line(r, "results.ndjson", 5, _add_member(b'"ext":{"a":{"b":1,"b":1}}')),
        [("results.ndjson:5", "encoding")],
        ["results.ndjson"],
    ),
    "unpaired-surrogate": (
        COMPLETED_EVAL,
        lambda r: _edit_line(r, "results.ndjson", 5, _add_member(b'"ext":{"x":"\\ud800"}')),
        [("results.ndjson:5", "encoding")],
        ["results.ndjson"],
    ),
    "nan": (
        COMPLETED_EVAL,
        lambda r: _edit_line(r, "results.ndjson", 5, _add_member(b'"ext":{"x":NaN}')),
        [("results.ndjson:5", "encoding")],
        ["results.ndjson"],
    ),
    "1e400": (
        COMPLETED_EVAL,
        lambda r: _edit_line(r, "results.ndjson", 5, _add_member(b'"ext":{"x":1e400}')),
        [("results.ndjson:5", "encoding")],
        ["results.ndjson"],
    ),
    "integer-2^53": (
        COMPLETED_EVAL,
        lambda r: _edit_line(r, "results.ndjson", 5, _add_member(b'"turns":9007199254740992')),
        [("results.ndjson:5", "schema")],
        ["results.ndjson"],
    ),
    "depth-65": (
        COMPLETED_EVAL,
        lambda r: _set_json(r, "results.ndjson", 5, lambda d: d.update(ext=_nested(64))),
        [("results.ndjson:5", "limit")],
        ["results.ndjson"],
    ),
    "5-mib-line": (
        COMPLETED_EVAL,
        lambda r: _set_json(r, "results.ndjson", 5, lambda d: d.update(ext={"x": "a" * (5 * 1024 * 1024)})),
        [("results.ndjson:5", "limit")],
        ["results.ndjson"],
    ),
    "wrong-result-id": (
        COMPLETED_EVAL,
        lambda r: _set_json(r, "results.ndjson", 5, lambda d: d.update(resultId="r_" + "0" * 32)),
        [("results.ndjson:5", "result-id")],
        ["results.ndjson"],
    ),
    "summary-off-by-1e-6": (
        COMPLETED_EVAL,
        lambda r: (r / "summary.json").write_bytes(
            (r / "summary.json").read_bytes().replace(b'"value": 0.665,', b'"value": 0.665001,')
        ),
        [("summary.json", "summary")],
        ["summary.json"],
    ),
    # R10-3 / R11-2 (the reference verifier): `sum` and `value` compare exactly as binary64, not within 1e-9
    "summary-value-one-ulp-off": (
        COMPLETED_EVAL,
        lambda r: (r / "summary.json").write_bytes(
            (r / "summary.json").read_bytes().replace(b'"value": 0.665,', b'"value": 0.6650000000000001,')
        ),
        [("summary.json", "summary")],
        ["summary.json"],
    ),
    "summary-sum-one-ulp-off": (
        COMPLETED_EVAL,
        lambda r: (r / "summary.json").write_bytes(
            (r / "summary.json").read_bytes().replace(b'"sum": 1.33,', b'"sum": 1.3300000000000003,')
        ),
        [("summary.json", "summary")],
        ["summary.json"],
    ),
    "child-without-component": (
        COMPLETED_EVAL,
        lambda r: _set_json(r, "results.ndjson", 2, lambda d: d.pop("component")),
        [("results.ndjson:2", "component")],
        ["results.ndjson"],
    ),
    "rollup-wrong-n": (
        TRIALS_RUN,
        lambda r: _set_json(r, "results.ndjson", 19, lambda d: d["trials"].update(n=3)),
        [("results.ndjson:19", "trials")],
        ["results.ndjson"],
    ),
    "pending-in-closed-run": (
        COMPLETED_EVAL,
        lambda r: _set_json(r, "results.ndjson", 8, lambda d: d.update(state="pending")),
        [("results.ndjson:8", "pending")],
        ["results.ndjson"],
    ),
    "evidence-id-twice": (
        COMPLETED_EVAL,
        lambda r: _set_json(r, "evidence.ndjson", 2, lambda d: d.update(evidenceId="E-1")),
        # E-2 is then cited by line 3 and held by no record
        [("evidence.ndjson:2", "evidence-id"), ("results.ndjson:3", "evidence")],
        ["evidence.ndjson"],
    ),
    "attack-success-on-pass": (
        COMPLETED_EVAL,
        lambda r: _set_json(r, "results.ndjson", 2, lambda d: d.update(attack={"technique": "t", "success": True})),
        [("results.ndjson:2", "attack")],
        ["results.ndjson"],
    ),
    "undeclared-metric": (
        COMPLETED_EVAL,
        lambda r: _set_json(r, "results.ndjson", 5, lambda d: d["scores"].append({"metric": "nope", "value": 1})),
        [("results.ndjson:5", "metric")],
        ["results.ndjson"],
    ),
    "summary-run-id": (
        COMPLETED_EVAL,
        lambda r: (r / "summary.json").write_bytes(
            (r / "summary.json").read_bytes().replace(b'"runId": "01928f3e', b'"runId": "01928f3f')
        ),
        [("summary.json", "summary-run-id")],
        ["summary.json"],
    ),
    "ended-before-started": (
        COMPLETED_EVAL,
        lambda r: _set_json(
            r, "results.ndjson", 5, lambda d: d.update(startedAt="2026-10-02T14:00:02Z", endedAt="2026-10-02T14:00:01Z")
        ),
        [("results.ndjson:5", "result-times")],
        ["results.ndjson"],
    ),
    "date-that-does-not-exist": (
        COMPLETED_EVAL,
        lambda r: _set_json(r, "results.ndjson", 5, lambda d: d.update(startedAt="2026-02-31T00:00:00Z")),
        [("results.ndjson:5", "schema")],
        ["results.ndjson"],
    ),
    "trace-link-to-nothing": (
        COMPLETED_EVAL,
        lambda r: _set_json(r, "results.ndjson", 5, lambda d: d.update(traceLink={"traceId": "f" * 32})),
        [("results.ndjson:5", "trace-link")],
        ["results.ndjson"],
    ),
    "gate-names-no-line": (
        COMPLETED_EVAL,
        lambda r: _set_json(r, "gates.ndjson", 1, lambda d: d["inputs"].update(results=["r_" + "1" * 32])),
        [("gates.ndjson:1", "gate")],
        ["gates.ndjson"],
    ),
    "parent-of-no-line": (
        COMPLETED_EVAL,
        lambda r: _set_json(r, "results.ndjson", 2, lambda d: d.update(parentResultId="r_" + "2" * 32)),
        # the root then has one child fewer than its aggregation's total
        [("results.ndjson:1", "aggregation"), ("results.ndjson:2", "parent")],
        ["results.ndjson"],
    ),
    "parent-in-another-case": (
        COMPLETED_EVAL,
        lambda r: _set_json(r, "results.ndjson", 5, lambda d: d.update(
            parentResultId="r_479d157f3423e95d566bcbfc0c6d2461", component={"weight": 0, "required": False})),
        # [RES-6]: the node's children are the lines that name it, whatever their case: line 1 now has 4 (total 3)
        [("results.ndjson:1", "aggregation"), ("results.ndjson:5", "parent")],
        ["results.ndjson"],
    ),
    "aggregation-total": (
        COMPLETED_EVAL,
        lambda r: _set_json(r, "results.ndjson", 1, lambda d: d["aggregation"].update(total=4, measured=3)),
        [("results.ndjson:1", "aggregation")],
        ["results.ndjson"],
    ),
    "aggregation-counts": (
        COMPLETED_EVAL,
        lambda r: _set_json(r, "results.ndjson", 1, lambda d: d["aggregation"].update(measured=1)),
        [("results.ndjson:1", "aggregation")],
        ["results.ndjson"],
    ),
    "decisive-not-a-child": (
        COMPLETED_EVAL,
        # line 5's id: a line of the run, but no child of line 1
        lambda r: _set_json(r, "results.ndjson", 1, lambda d: d["aggregation"].update(
            decisive=[json.loads(_lines(r / "results.ndjson")[4])["resultId"]])),
        [("results.ndjson:1", "aggregation")],
        ["results.ndjson"],
    ),
    "node-with-children-without-aggregation": (
        COMPLETED_EVAL,
        lambda r: _set_json(r, "results.ndjson", 1, lambda d: d.pop("aggregation")),
        [("results.ndjson:1", "aggregation")],
        ["results.ndjson"],
    ),
    "panel-agree-above-of": (
        COMPLETED_EVAL,
        lambda r: _set_json(r, "results.ndjson", 5, lambda d: d.update(
            annotator={"kind": "LLM", "panel": {"agree": 3, "of": 2}})),
        [("results.ndjson:5", "annotator")],
        ["results.ndjson"],
    ),
    "evidence-digest": (
        COMPLETED_EVAL,
        lambda r: _set_json(r, "evidence.ndjson", 2, lambda d: d.update(digest="sha256:" + "a" * 64)),
        [("evidence.ndjson:2", "evidence-digest")],
        ["evidence.ndjson"],
    ),
    "summary-duplicate-entry": (
        COMPLETED_EVAL,
        lambda r: (r / "summary.json").write_text(json.dumps((lambda d: (
            d["lanes"][0]["metrics"].append(d["lanes"][0]["metrics"][1]), d)[1])(
            json.loads((r / "summary.json").read_text())))),
        [("summary.json", "summary-duplicate")],
        ["summary.json"],
    ),
    "summary-interval": (
        COMPLETED_EVAL,
        lambda r: (r / "summary.json").write_text(json.dumps((lambda d: (
            d["lanes"][0]["metrics"][0].update(ci={"low": 0.9, "high": 0.1, "level": 0.95}), d)[1])(
            json.loads((r / "summary.json").read_text())))),
        [("summary.json", "interval")],
        ["summary.json"],
    ),
    "content-capture-off-with-reasoning": (
        COMPLETED_EVAL,
        lambda r: (r / "run.json").write_text(json.dumps(
            dict(json.loads((r / "run.json").read_text()), contentCapture="off"))),
        # evidence line 2 is judge_reasoning; line 3 has a reasoning blob and an annotator.promptHash (one problem);
        # the trace carries no attribute [SEC-6] names
        [("evidence.ndjson:2", "content-capture"), ("results.ndjson:3", "content-capture")],
        ["run.json"],
    ),
    "run-ends-before-it-starts": (
        COMPLETED_EVAL,
        lambda r: (r / "run.json").write_text(json.dumps(
            dict(json.loads((r / "run.json").read_text()), startedAt="2026-10-02T15:00:00Z"))),
        [("run.json", "run-times")],
        ["run.json"],
    ),
    "calibration-after-start": (
        COMPLETED_EVAL,
        lambda r: (r / "run.json").write_text(json.dumps((lambda d: (
            d["judges"][0].update(calibration={"labelSet": "labels:x", "n": 10, "dangerousErrors": 11,
                                               "measuredAt": "2026-10-01T00:00:00Z"}), d)[1])(
            json.loads((r / "run.json").read_text())))),
        [("run.json", "calibration")],
        ["run.json"],
    ),
    "require-passes-above-trials": (
        COMPLETED_EVAL,
        lambda r: (r / "run.json").write_text(json.dumps((lambda d: (
            d["suite"].update(executionPolicy={"trialsPerCase": 1, "requirePasses": 2}), d)[1])(
            json.loads((r / "run.json").read_text())))),
        [("run.json", "execution-policy")],
        ["run.json"],
    ),
    "uncertainty-interval": (
        COMPLETED_EVAL,
        lambda r: _set_json(r, "results.ndjson", 5, lambda d: d.update(
            uncertainty={"ci": {"low": 1, "high": 0, "level": 0.9}})),
        [("results.ndjson:5", "interval")],
        ["results.ndjson"],
    ),
    "metric-declared-twice": (
        COMPLETED_EVAL,
        lambda r: (r / "metrics.json").write_text(json.dumps((lambda d: (
            d["metrics"].append(d["metrics"][0]), d)[1])(json.loads((r / "metrics.json").read_text())))),
        [("metrics.json", "metric")],
        ["metrics.json"],
    ),
    "trial-line-without-rollup": (
        TRIALS_RUN,
        lambda r: _set_json(r, "results.ndjson", 25, lambda d: (d.pop("trials"), d.update(trial=2))),
        # case 1's checks now has three trial lines and no rollup; line 25 has another resultId
        [("results.ndjson:3", "trials"), ("results.ndjson:6", "trials"), ("results.ndjson:25", "result-id"),
         ("results.ndjson:25", "trials")],
        ["results.ndjson"],
    ),
}


def _apply(name: str, tmp_path: Path, sealed: bool) -> tuple[Path, list, list]:
    base, edit, expected, changed = MUTATIONS[name]
    run = copy_run(base, tmp_path / "run")
    if not sealed:
        (run / "seal.json").unlink()
    edit(run)
    return run, expected, changed


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_one_defect_unsealed(tmp_path, name):
    run, expected, _ = _apply(name, tmp_path, sealed=False)
    v = verify_run(run)
    assert v.problems == expected
    assert v.outcome == "invalid"


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_one_defect_sealed(tmp_path, name):
    run, expected, changed = _apply(name, tmp_path, sealed=True)
    v = verify_run(run)
    assert v.problems == order_problems(expected + [(f, "digest") for f in changed])
    assert v.outcome == "invalid"


# -- the folder: seal and paths ----------------------------------------------------------------------------------


def test_byte_changed_in_sealed_file(tmp_path):
    run = copy_run(COMPLETED_EVAL, tmp_path / "run")
    p = run / "evidence.ndjson"
    p.write_bytes(p.read_bytes().replace(b"The judge call", b"The judge calm"))
    v = verify_run(run)
    assert (v.outcome, v.problems) == ("invalid", [("evidence.ndjson", "digest")])


def test_file_added(tmp_path):
    run = copy_run(COMPLETED_EVAL, tmp_path / "run")
    (run / "notes.txt").write_text("hello")
    assert verify_run(run).problems == [("notes.txt", "not-sealed")]
    (run / "seal.json").unlink()
    # an unsealed run with a file [RUN-2] does not list: neither not-sealed nor unexpected-file applies
    assert verify_run(run).outcome == "unsealed"


def test_blob_removed(tmp_path):
    run = copy_run(COMPLETED_EVAL, tmp_path / "run")
    (run / BLOB).unlink()
    v = verify_run(run)
    # the blob is cited by evidence line 2 (link) and results line 3 (reasoning)
    assert v.problems == [(BLOB, "missing"), ("evidence.ndjson:2", "blob"), ("results.ndjson:3", "blob")]


def test_blob_bytes_changed(tmp_path):
    run = copy_run(COMPLETED_EVAL, tmp_path / "run")
    (run / "seal.json").unlink()
    with open(run / BLOB, "ab") as f:
        f.write(b"x")
    # its name is no longer its hash; reasoning.bytes is no longer its size
    assert verify_run(run).problems == [(BLOB, "blob-digest"), ("results.ndjson:3", "reasoning-size")]


def test_seal_run_hash_and_predicate(tmp_path):
    run = copy_run(COMPLETED_EVAL, tmp_path / "run")
    seal = json.loads((run / "seal.json").read_text())
    seal["predicate"]["runHash"] = "0" * 64
    (run / "seal.json").write_text(json.dumps(seal))
    assert verify_run(run).problems == [("seal.json", "run-hash")]
    seal = json.loads((COMPLETED_EVAL / "seal.json").read_text())
    seal["predicate"]["closedAt"] = "2026-10-02T14:06:23.004000Z"  # the same time, spelled otherwise
    (run / "seal.json").write_text(json.dumps(seal))
    assert verify_run(run).problems == []
    seal["predicate"]["producer"]["version"] = "9"
    (run / "seal.json").write_text(json.dumps(seal))
    assert verify_run(run).problems == [("seal.json", "predicate")]
    seal["subject"].append(seal["subject"][0])
    (run / "seal.json").write_text(json.dumps(seal))
    assert verify_run(run).problems == [(seal["subject"][0]["name"], "duplicate-subject"), ("seal.json", "predicate")]
    (run / "seal.json").write_text('{"_type": 1}')
    assert verify_run(run).problems == [("seal.json", "seal-invalid")]


def test_symbolic_link_is_a_path_problem_and_never_followed(tmp_path):
    run = copy_run(COMPLETED_EVAL, tmp_path / "run")
    (tmp_path / "outside").write_text("secret")
    os.symlink(tmp_path / "outside", run / "ext-link")
    os.mkdir(run / "ext")
    os.symlink(tmp_path, run / "ext" / "dir-link")
    os.mkfifo(run / "ext" / "pipe")  # a pipe would block a reader that opened it
    assert verify_run(run).problems == [("ext-link", "path"), ("ext/dir-link", "path"), ("ext/pipe", "path")]


@pytest.mark.parametrize(
    "files,expected",
    [
        (["ext/CON.txt"], [("ext/CON.txt", "not-sealed"), ("ext/CON.txt", "path")]),
        (["ext/lpt9"], [("ext/lpt9", "not-sealed"), ("ext/lpt9", "path")]),
        (["ext/x."], [("ext/x.", "not-sealed"), ("ext/x.", "path")]),
        (["ext/..x"], [("ext/..x", "not-sealed"), ("ext/..x", "path")]),
        ([".DS_Store"], [(".DS_Store", "not-sealed"), (".DS_Store", "path")]),
        (
            ["ext/Data/x", "ext/data/y"],
            [("ext/Data/x", "not-sealed"), ("ext/data/y", "not-sealed"), ("ext/data/y", "path")],
        ),
        (["ext/a b"], [("ext/a b", "not-sealed"), ("ext/a b", "path")]),
    ],
)
def test_path_rules(tmp_path, files, expected):
    run = copy_run(COMPLETED_EVAL, tmp_path / "run")
    for f in files:
        (run / f).parent.mkdir(parents=True, exist_ok=True)
        (run / f).write_text("x")
    assert verify_run(run).problems == expected


def test_overlays_are_not_the_runs_problem(tmp_path):
    run = copy_run(COMPLETED_EVAL, tmp_path / "run")
    (run / "overlays").mkdir()
    (run / "overlays" / "notes.txt").write_text("x")
    (run / "overlays" / ".hidden").write_text("x")
    assert verify_run(run).outcome == "intact"


def test_missing_required_files(tmp_path):
    run = copy_run(COMPLETED_EVAL, tmp_path / "run")
    (run / "seal.json").unlink()
    (run / "metrics.json").unlink()
    (run / "summary.json").unlink()
    assert verify_run(run).problems == [("metrics.json", "schema"), ("summary.json", "schema")]


def test_too_many_files_is_a_limit_at_the_folder(tmp_path):
    run = copy_run(COMPLETED_EVAL, tmp_path / "run")
    from aefgate.aef import runfs

    assert runfs.scan(run, max_files=5).too_many
    (run / "ext").mkdir()
    for i in range(100_001 - 9):
        (run / "ext" / str(i)).touch()
    assert verify_run(run).problems == [(".", "limit")]


def test_not_a_folder_is_refused(tmp_path):
    with pytest.raises(Refusal) as e:
        verify_run(tmp_path / "absent")
    assert e.value.rule == "RUN-1"


def test_anchored(tmp_path):
    seal = json.loads((COMPLETED_EVAL / "seal.json").read_text())
    h = seal["predicate"]["runHash"]
    assert verify_run(COMPLETED_EVAL, anchors=[h]).anchored is True
    assert verify_run(COMPLETED_EVAL, anchors=["0" * 64]).anchored is False
    assert verify_run(COMPLETED_EVAL).to_json() == {"outcome": "intact", "problems": []}


def test_problem_order_line_numbers_as_numbers():
    ps = [("results.ndjson:10", "a"), ("results.ndjson:9", "b"), ("results.ndjson", "z"), ("metrics.json", "m"),
          ("run:x", "q"), ("results.ndjson:9", "a")]
    assert sorted(ps, key=problem_sort_key) == [
        ("metrics.json", "m"),
        ("results.ndjson", "z"),
        ("results.ndjson:9", "a"),
        ("results.ndjson:9", "b"),
        ("results.ndjson:10", "a"),
        ("run:x", "q"),
    ]


# -- the parallel path (worker processes checking ranges of results.ndjson) ------------------------------------


@pytest.mark.parametrize(
    "name",
    ["wrong-result-id", "rollup-wrong-n", "cr", "line-without-final-lf", "duplicate-member", "5-mib-line",
     "child-without-component", "summary-off-by-1e-6", "blob-removed"],
)
def test_parallel_checking_gives_the_same_problems(tmp_path, monkeypatch, name):
    from aefgate.aef import verifier

    if name == "blob-removed":
        run = copy_run(COMPLETED_EVAL, tmp_path / "run")
        (run / BLOB).unlink()
    else:
        run, _, _ = _apply(name, tmp_path, sealed=True)
    monkeypatch.setenv("AEFGATE_WORKERS", "0")
    sequential = verify_run(run)
    monkeypatch.setenv("AEFGATE_WORKERS", "2")
    monkeypatch.setattr(verifier, "_RANGE", 200)  # many small ranges: lines cross every kind of boundary
    parallel = verify_run(run)
    assert (parallel.outcome, parallel.problems, parallel.run_hash) == (
        sequential.outcome,
        sequential.problems,
        sequential.run_hash,
    )


def _reseal_by_hand(run: Path, edit=None) -> None:
    """Write seal.json over the run as it is (as another sealer might), then apply ``edit`` to the statement."""
    from aefgate.aef.sealer import EVIDENCE_PREDICATE, STATEMENT_TYPE, build_manifest, predicate_for

    man = build_manifest(run)
    run_doc = json.loads((run / "run.json").read_text())
    st = {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": p, "digest": {"sha256": h}} for p, h, _ in man.entries],
        "predicateType": EVIDENCE_PREDICATE,
        "predicate": predicate_for(run_doc, man.run_hash, "ingest", "2026-12-01T00:00:00Z"),
    }
    if edit:
        edit(st)
    (run / "seal.json").write_text(json.dumps(st))


def test_unexpected_file_sealed_by_another_sealer(tmp_path):
    run = copy_run(COMPLETED_EVAL, tmp_path / "run")
    (run / "seal.json").unlink()
    (run / "notes.txt").write_text("x")
    assert verify_run(run).outcome == "unsealed"
    with pytest.raises(Refusal) as e:  # aefgate itself refuses to seal it
        from aefgate.aef.sealer import seal_run

        seal_run(run)
    assert e.value.rule == "RUN-2" and not (run / "seal.json").exists()
    _reseal_by_hand(run)
    assert verify_run(run).problems == [("notes.txt", "unexpected-file")]


def test_seal_subject_path_run_id_run_open(tmp_path):
    run = copy_run(COMPLETED_EVAL, tmp_path / "run")
    (run / "seal.json").unlink()
    _reseal_by_hand(run, lambda st: st["subject"].append({"name": "overlays/events.ndjson", "digest": {"sha256": "0" * 64}}))
    assert verify_run(run).problems == [("overlays/events.ndjson", "subject-path")]
    _reseal_by_hand(run, lambda st: st["predicate"].update(runId="another-run"))
    assert verify_run(run).problems == [("seal.json", "run-id")]
    _reseal_by_hand(run)
    assert verify_run(run).problems == []
    d = json.loads((run / "run.json").read_text())
    d["status"] = "running"
    d.pop("endedAt")
    (run / "run.json").write_text(json.dumps(d))
    assert verify_run(run).problems == [("run.json", "digest"), ("run.json", "run-open"), ("seal.json", "predicate")]
