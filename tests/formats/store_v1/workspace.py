"""Store v1 workspaces built in tests, in the store's real layout (``../shared/samples/store-v1/FORMAT.md`` §1-§3):
``subjects/<agents|workflows>/<Sanitize(name)>/{subject.json,subject.json.lock,runs/<runId>/{manifest.json,
summary.json,scenarios/<Sanitize(id)>.json,traces/agent-trace.json}}``, ``compliance/<reg>/<subject>/<ts>/
evidence.json``, written as AgentEval's serializer writes them (indented, camelCase, nulls omitted).

Nothing here uses aefgate: the files are what AgentEval would have written, so the tests read them as input."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from tests._shared import SAMPLES

SAMPLE = SAMPLES / "store-v1" / ".agenteval"
RUN1 = "2026-05-20_09-14-07_3fa9c2e1"  # completed, FAIL
RUN2 = "2026-05-21_16-02-44_b81d0e5a"  # interrupted (PENDING, no summary)
SUBJECT_DIR = SAMPLE / "subjects" / "agents" / "Support Agent"


def sanitize(name: str) -> str:
    """FileSystemLayout.Sanitize: ``<>:"|?*/\\`` and control characters -> ``-``, leading/trailing ``.`` and space
    trimmed; when anything changed, ``__`` and the first 8 bytes (16 hex) of SHA-256(the original's UTF-8)."""
    out = "".join("-" if c in '<>:"|?*/\\' or ord(c) < 32 else c for c in name).strip(". ")
    if out != name:
        out += "__" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]
    return out


def dotnet(obj: Any) -> bytes:
    """Indented JSON without a trailing newline, nulls omitted, non-ASCII escaped (the default encoder's way)."""
    def strip(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if x is not None}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v
    return json.dumps(strip(obj), indent=2, ensure_ascii=True).encode("utf-8")


def copy_sample(dst: Path) -> Path:
    """A writable copy of the sample workspace (the shared files are read-only); returns its ``.agenteval``."""
    ws = dst / ".agenteval"
    shutil.copytree(SAMPLE, ws)
    for p in [ws, *ws.rglob("*")]:
        if not p.is_symlink():
            p.chmod(0o755 if p.is_dir() else 0o644)
    return ws


def tree(key: str, label: str, *, value: float = 0.5, passed: bool = False, severity: str = "none",
         threshold: float | None = 0.7, measurement: str | None = None, summary: str | None = None,
         recommendations: list[str] | None = None, provenance: dict | None = None, version: str = "1.0.0",
         sub_results: list[dict] | None = None) -> dict:
    """An EvalResult (FORMAT.md §3.6) as a dict; :func:`tree_output` makes the scenario's output string of it."""
    score: dict[str, Any] = {"label": label, "severity": severity, "value": value, "threshold": threshold,
                             "passed": passed, "measurement": measurement}
    details: dict[str, Any] = {"recommendations": recommendations, "subResults": sub_results, "summary": summary}
    return {"metric": {"key": key, "name": key.title(), "category": "test", "version": version}, "score": score,
            "details": {k: v for k, v in details.items() if v is not None} or None,
            "provenance": provenance or {"type": "atomic-code", "estimatedCost": 0, "cacheHit": False},
            "evaluatedAt": "2026-06-01T10:00:01.5+00:00"}


def tree_output(t: dict) -> str:
    def strip(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if x is not None}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v
    return json.dumps(strip(t), separators=(",", ":"))


def scenario(sid: str, *, passed: bool = True, score: float = 1.0, metrics: dict | None = None,
             assertions: list[dict] | None = None, output: str = "the answer", input: str = "the question",
             duration: str = "00:00:01.5", cost: float = 0.001, comparability: dict | None = None,
             **extra: Any) -> dict:
    doc = {"id": sid, "name": f"Scenario {sid}", "input": input, "output": output, "passed": passed,
           "score": score, "metrics": metrics if metrics is not None else {}, "assertions": assertions or [],
           "duration": duration, "estimatedCost": cost, "comparability": comparability}
    doc.update(extra)
    return doc


def assertion(name: str, outcome: str = "passed", message: str | None = None) -> dict:
    return {"assertion": name, "message": message, "passed": outcome == "passed", "outcome": outcome}


class Store:
    """Builds a workspace at ``root`` (the ``.agenteval`` folder)."""

    def __init__(self, root: Path, *, solution: bool = True) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        if solution:
            (root / "solution.json").write_bytes(dotnet({"schemaVersion": "1.0",
                                                         "id": "0b5e6c1a-1111-4222-8333-944455556666",
                                                         "name": "Tests"}))

    def subject(self, name: str, *, kind: str = "agent", version: str | None = "2.0.1",
                subject_json: bool = True) -> Path:
        folder = self.root / "subjects" / ("agents" if kind == "agent" else "workflows") / sanitize(name)
        (folder / "runs").mkdir(parents=True, exist_ok=True)
        if subject_json:
            (folder / "subject.json").write_bytes(dotnet({"schemaVersion": "1.0", "kind": kind, "name": name,
                                                          "version": version, "modelId": "gpt-4o"}))
            (folder / "subject.json.lock").write_bytes(b"")
        return folder

    def run(self, subject_dir: Path, run_id: str, scenarios: list[dict], *, name: str | None = None,
            kind: str = "agent", version: str | None = "2.0.1", run_kind: str = "eval", completed: bool = True,
            verdict: str = "PASS", duration: str = "00:00:10.25", machine: str = "BUILD-HOST-9",
            trace: dict | None = None, summary_cost: dict | None = None, environment: dict | None = None,
            manifest_extra: dict | None = None, files: list[str] | None = None) -> Path:
        """A run folder with ``scenarios`` (each in ``scenarios/<Sanitize(id)>.json``, or ``files[i]``.json)."""
        rdir = subject_dir / "runs" / run_id
        (rdir / "scenarios").mkdir(parents=True)
        subject_name = name if name is not None else json.loads((subject_dir / "subject.json").read_text())["name"]
        manifest = {
            "schemaVersion": "1.0",
            "solution": {"id": "0b5e6c1a-1111-4222-8333-944455556666", "name": "Tests"},
            "subject": {"kind": kind, "name": subject_name, "version": version},
            "run": {"runId": run_id, "timestamp": "2026-06-01T10:00:00.25+00:00",
                    "duration": duration if completed else "00:00:00",
                    "scenarioCount": len(scenarios) if completed else 0,
                    "verdict": verdict if completed else "PENDING", "kind": run_kind, "harness": "xunit"},
            "git": {"commit": "0123456789abcdef0123456789abcdef01234567", "branch": "main", "dirty": False},
            "agentEval": {"version": "0.44.1.0"},
            "environment": environment or {"machine": machine, "os": "Linux", "dotnetVersion": ".NET 9.0.4",
                                           "ci": False},
            "contentHash": "sha256:" + ("ab" * 32 if completed else "0" * 64),
        }
        manifest.update(manifest_extra or {})
        (rdir / "manifest.json").write_bytes(dotnet(manifest))
        for i, sc in enumerate(scenarios):
            stem = files[i] if files else sanitize(str(sc["id"]))
            (rdir / "scenarios" / f"{stem}.json").write_bytes(dotnet(sc))
        if trace is not None:
            (rdir / "traces").mkdir()
            (rdir / "traces" / "agent-trace.json").write_bytes(dotnet({"runId": run_id, **trace}))
        if completed:
            passed = sum(1 for s in scenarios if s.get("passed"))
            summary = {"schemaVersion": "1.0", "runId": run_id, "verdict": verdict,
                       "stats": {"total": len(scenarios), "passed": passed, "failed": len(scenarios) - passed,
                                 "warnings": 0, "skipped": 0},
                       "metrics": {}, "cost": summary_cost}
            (rdir / "summary.json").write_bytes(dotnet(summary))
        return rdir

    def compliance(self, regulation: str, subject: str, ts: str, run_id: str, refs: list[str]) -> Path:
        folder = self.root / "compliance" / regulation / sanitize(subject) / ts
        folder.mkdir(parents=True)
        doc = {"schemaVersion": "1.0", "regulation": regulation, "subject": {"kind": "agent", "name": subject},
               "generatedAt": "2026-06-01T10:05:00+00:00",
               "sourceRun": {"runId": run_id, "manifestHash": "sha256:" + "ab" * 32},
               "controls": [{"id": "c-1", "title": "Control", "status": "pass", "passRate": 1, "scenarioRefs": refs}],
               "summary": {"controlsTotal": 1, "passed": 1, "warnings": 0, "failed": 0, "overallStatus": "pass"},
               "attestation": {"agentEvalVersion": "0.44.1", "evaluator": "x", "evaluatorModel": "y"}}
        (folder / "evidence.json").write_bytes(dotnet(doc))
        return folder / "evidence.json"
