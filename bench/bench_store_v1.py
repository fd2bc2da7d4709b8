"""Benchmark ``aefgate import store-v1 --all``: a generated store v1 workspace migrated with one worker and with all
cores, then once more (every run unchanged: all skipped).

    python bench/bench_store_v1.py [--runs 2000] [--scenarios 50] [--jobs 1,0] [--work DIR]

The workspace (``--runs`` runs of ``--scenarios`` scenarios, spread over 4 agents and 1 workflow) is written in the
store's layout (FORMAT.md): per run a manifest, a summary, an agent trace, and scenario files of three shapes in turn:
a plain answer with three assertions (one failed, one inconclusive), an eval-result tree labelled ``pass``/``fail``
with a comparability fact naming a judge, and a tree labelled ``error``; one compliance document per 100 runs.
Each ``--jobs`` value (0: the number of cores) runs ``python -m aefgate import store-v1 --all WS OUT --json --jobs J
--at ...`` as a process into a fresh OUT: wall seconds, runs/s, the peak RSS of each worker process (from the
report: ``ru_maxrss``) and of the whole process tree (sampled every 50 ms); ``sync`` before each. Content capture is on (the default), so
every scenario writes two blobs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import _tree_rss_kib  # noqa: E402

AT = "2026-12-01T00:00:00Z"


def _w(path: Path, doc) -> None:
    path.write_bytes(json.dumps(doc, indent=2).encode())


def _tree(key: str, label: str, passed: bool, value: float) -> str:
    return json.dumps({"metric": {"key": key, "name": key, "category": "bench", "version": "1.0.0"},
                       "score": {"label": label, "severity": "none" if passed else "medium", "value": value,
                                 "threshold": 0.7, "passed": passed},
                       "details": {"summary": f"The judge found the answer {label}."},
                       "provenance": {"type": "atomic-llm", "judgeModel": "gpt-4o-mini", "promptHash": "0" * 16,
                                      "tokensUsed": 800, "estimatedCost": 0.0002, "cacheHit": False},
                       "evaluatedAt": "2026-06-01T10:00:01.5+00:00"}, separators=(",", ":"))


def make_workspace(root: Path, runs: int, scenarios: int) -> None:
    ws = root / ".agenteval"
    ws.mkdir(parents=True)
    _w(ws / "solution.json", {"schemaVersion": "1.0", "id": "6f3a0c1e-0000-4000-8000-000000000000", "name": "Bench"})
    subjects = [("agents", "agent", f"Bench Agent {i}") for i in range(4)] + [("workflows", "workflow", "Flow")]
    for folder, kind, name in subjects:
        sdir = ws / "subjects" / folder / name
        (sdir / "runs").mkdir(parents=True)
        _w(sdir / "subject.json", {"schemaVersion": "1.0", "kind": kind, "name": name, "version": "1.0.0"})
        (sdir / "subject.json.lock").write_bytes(b"")
    for r in range(runs):
        folder, kind, name = subjects[r % len(subjects)]
        run_id = f"2026-06-{1 + r // 1440 % 28:02d}_{r // 60 % 24:02d}-{r % 60:02d}-00_{r:08x}"
        rdir = ws / "subjects" / folder / name / "runs" / run_id
        (rdir / "scenarios").mkdir(parents=True)
        (rdir / "traces").mkdir()
        _w(rdir / "manifest.json", {
            "schemaVersion": "1.0", "solution": {"id": "6f3a0c1e-0000-4000-8000-000000000000", "name": "Bench"},
            "subject": {"kind": kind, "name": name, "version": "1.0.0"},
            "run": {"runId": run_id, "timestamp": "2026-06-01T10:00:00.1234567+00:00", "duration": "00:01:02.5",
                    "scenarioCount": scenarios, "verdict": "FAIL", "kind": "eval", "harness": "xunit"},
            "git": {"commit": "0" * 40, "branch": "main", "dirty": False}, "agentEval": {"version": "0.43.0.0"},
            "environment": {"machine": "bench-host", "os": "Linux", "dotnetVersion": ".NET 9.0.4", "ci": True},
            "contentHash": "sha256:" + "ab" * 32})
        _w(rdir / "summary.json", {"schemaVersion": "1.0", "runId": run_id, "verdict": "FAIL",
                                   "stats": {"total": scenarios, "passed": 0, "failed": 0, "warnings": 0,
                                             "skipped": 0}, "metrics": {"score": 0.5},
                                   "cost": {"estimatedCost": 0.05, "promptTokens": 10000, "completionTokens": 5000}})
        _w(rdir / "traces" / "agent-trace.json", {"runId": run_id, "scenarioId": "s-0000", "events": [
            {"timestamp": "2026-06-01T10:00:01+00:00", "kind": "tool_call", "name": "Lookup",
             "payload": '{"id":42}'} for _ in range(20)]})
        for s in range(scenarios):
            sid = f"s-{s:04d}"
            shape = s % 3
            doc = {"id": sid, "name": f"Scenario {s}", "input": f"Question {s} of run {r}: what is the status?",
                   "passed": shape == 0 or (shape == 1 and s % 2 == 0), "score": 0.8, "metrics": {"relevance": 0.9},
                   "assertions": [], "duration": "00:00:01.25", "estimatedCost": 0.001}
            if shape == 0:
                doc["output"] = f"The status of item {s} is shipped."
                doc["assertions"] = [{"assertion": "HaveCalledTool(Lookup)", "passed": True, "outcome": "passed"},
                                     {"assertion": "HaveCallCount", "message": "Expected 1, got 2.", "passed": False,
                                      "outcome": "failed"},
                                     {"assertion": "LatencyUnder(2000ms)", "message": "No timing captured.",
                                      "passed": False, "outcome": "inconclusive"}]
                doc["passed"] = True
            elif shape == 1:
                label = "pass" if doc["passed"] else "fail"
                doc["output"] = _tree("bench.quality", label, doc["passed"], 0.8 if doc["passed"] else 0.4)
                doc["comparability"] = {"evalKey": "bench.quality", "evalVersion": "1.0.0", "effectiveBar": 0.7,
                                        "judge": {"subjectRelation": "differentModel", "modelId": "gpt-4o-mini"}}
            else:
                doc["output"] = _tree("bench.tone", "error", False, 0)
                doc["score"] = 0
            _w(rdir / "scenarios" / f"{sid}.json", doc)
        if r % 100 == 0:
            cdir = ws / "compliance" / "gdpr" / name / f"2026-06-01_10-{r // 100 % 60:02d}-00"
            cdir.mkdir(parents=True, exist_ok=True)
            _w(cdir / "evidence.json", {"schemaVersion": "1.0", "regulation": "gdpr",
                                        "subject": {"kind": kind, "name": name},
                                        "generatedAt": "2026-06-01T10:05:00+00:00",
                                        "sourceRun": {"runId": run_id, "manifestHash": "sha256:" + "ab" * 32},
                                        "controls": [{"id": "art-17", "title": "Erasure", "status": "pass",
                                                      "passRate": 1, "scenarioRefs": ["s-0001", "s-0002"]}],
                                        "summary": {"controlsTotal": 1, "passed": 1, "warnings": 0, "failed": 0,
                                                    "overallStatus": "pass"},
                                        "attestation": {"agentEvalVersion": "0.43.0", "evaluator": "x",
                                                        "evaluatorModel": "y"}})


def migrate(ws: Path, out: Path, jobs: int, report_file: Path) -> tuple[float, float, dict]:
    """(wall seconds, peak RSS of the process tree in MiB, the --json report)."""
    cmd = [sys.executable, "-m", "aefgate", "import", "store-v1", "--all", str(ws), str(out), "--json", "--at", AT]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    os.sync()  # the files written before (the workspace, an earlier output) are not flushed during the measure
    peak = 0
    t = time.perf_counter()
    with open(report_file, "wb") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.DEVNULL)
        while p.poll() is None:
            peak = max(peak, _tree_rss_kib(p.pid))
            time.sleep(0.05)
    dt = time.perf_counter() - t
    report = json.loads(report_file.read_bytes())
    if p.returncode != 0:
        raise SystemExit(f"{cmd} exited {p.returncode}: {report.get('counts') or report}")
    return dt, peak / 1024, report


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--scenarios", type=int, default=50)
    ap.add_argument("--jobs", default="1,0", help="comma-separated worker counts; 0 = the number of cores")
    ap.add_argument("--work", type=Path, default=None, help="a folder to work in (default: a temporary one)")
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="aefgate-bench-store-v1-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        t = time.perf_counter()
        make_workspace(work / "ws", a.runs, a.scenarios)
        gen = time.perf_counter() - t
        ws = work / "ws" / ".agenteval"
        print(f"workspace: {a.runs} runs x {a.scenarios} scenarios, generated in {gen:.1f} s; {os.cpu_count()} cores")
        print("| jobs | wall | runs/s | scenarios/s | peak RSS per worker (min-max) | peak RSS, process tree |")
        print("|---|---|---|---|---|---|")
        for j in [int(x) for x in a.jobs.split(",") if x]:
            out = work / f"out-{j}"
            shutil.rmtree(out, ignore_errors=True)
            dt, tree_rss, rep = migrate(ws, out, j, work / f"report-{j}.json")
            assert rep["counts"]["migrated"] == a.runs, rep["counts"]
            rss = [w["peakRssKiB"] / 1024 for w in rep["workers"]]
            print(f"| {rep['jobs']} | {dt:.1f} s | {a.runs / dt:.1f} | {a.runs * a.scenarios / dt:,.0f} | "
                  f"{min(rss):.1f}-{max(rss):.1f} MiB ({len(rss)} workers) | {tree_rss:.1f} MiB |")
            last = (out, j)
        out, j = last
        dt, tree_rss, rep = migrate(ws, out, j, work / "report-again.json")
        assert rep["counts"]["skipped"] == a.runs, rep["counts"]
        print(f"again (every run unchanged, skipped), jobs {rep['jobs']}: {dt:.1f} s, {a.runs / dt:.0f} runs/s")
    finally:
        if a.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
