"""Generate large, valid AEF runs for the benchmarks.

    python bench/make_runs.py OUT_DIR --lines 1000000 [--blob-mib 1024]

The run has cases of four lines each, shaped like the corpus run completed-eval: a composite root (WeightedSum of
three children: a passed policy check, a judged helpfulness score citing a span, and a typed absence), every line
with scores, usage and times as a real producer writes them. ``summary.json`` is computed by aefgate's summary
module; the run is written with aefgate's JSON writer, streaming, so generating a million lines takes little
memory. With ``--blob-mib`` the run also holds one blob of that size (random bytes, content-addressed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
from pathlib import Path

from aefgate.aef import jsonio
from aefgate.aef.resultid import result_id
from aefgate.aef.summary import compute_summary

RUN_ID = "bench-0001"


def case_lines(i: int, rng: random.Random):
    case = f"case-{i:07d}"
    rid = lambda path: result_id(RUN_ID, case, path, None)  # noqa: E731
    root = rid("triage")
    pol = rng.random() < 0.9
    helpful = round(rng.random(), 3)
    score = round((1.0 if pol else 0.0) * 0.5 + helpful * 0.5, 4)
    t0 = f"2026-10-02T14:{i // 600000 % 60:02d}:{i // 10000 % 60:02d}.{i % 10000:04d}Z"
    usage = [{"role": "agent", "model": "gpt-4.1-mini", "gen_ai.usage.input_tokens": 812 + i % 97,
              "gen_ai.usage.output_tokens": 143 + i % 13, "costUsd": 0.00042}]
    children = [
        {"schemaVersion": "1.0", "resultId": rid("triage/policy"), "parentResultId": root, "caseId": case,
         "path": "triage/policy", "evaluator": {"id": "check:policy", "version": "1"},
         "state": "passed" if pol else "failed", **({} if pol else {"severity": "high"}),
         "scores": [{"metric": "policy", "value": 1 if pol else 0}], "component": {"weight": 0.5, "required": True},
         "annotator": {"kind": "CODE"}, "durationMs": 3},
        {"schemaVersion": "1.0", "resultId": rid("triage/helpfulness"), "parentResultId": root, "caseId": case,
         "path": "triage/helpfulness", "evaluator": {"id": "judge:helpfulness", "version": "3"},
         "state": "passed" if helpful >= 0.7 else "failed", **({} if helpful >= 0.7 else {"severity": "medium"}),
         "scores": [{"metric": "helpfulness", "value": helpful, "normalized": helpful}],
         "verdictRule": {"expr": "helpfulness >= 0.7", "threshold": 0.7},
         "component": {"weight": 0.5, "required": False},
         "annotator": {"kind": "LLM", "model": "gpt-5.1"}, "usage": [{"role": "judge", "model": "gpt-5.1",
         "gen_ai.usage.input_tokens": 1200, "gen_ai.usage.output_tokens": 220}], "durationMs": 840},
        {"schemaVersion": "1.0", "resultId": rid("triage/groundedness"), "parentResultId": root, "caseId": case,
         "path": "triage/groundedness", "evaluator": {"id": "judge:groundedness", "version": "3"},
         "state": "not_applicable", "reason": "No documents were retrieved for this case.",
         "component": {"weight": 0.0, "required": False}},
    ]
    measured = 2
    state = "passed" if score >= 0.8 else "failed"
    head = {"schemaVersion": "1.0", "resultId": root, "parentResultId": None, "caseId": case, "path": "triage",
            "evaluator": {"id": "composite:triage", "version": "2"}, "state": state,
            **({} if state == "passed" else {"severity": "medium"}),
            "scores": [{"metric": "triage", "value": score, "normalized": score}],
            "verdictRule": {"expr": "triage >= threshold", "threshold": 0.8},
            "aggregation": {"strategy": "WeightedSum", "threshold": 0.8, "score": score, "rulePath": "threshold",
                            "measured": measured, "total": 3, "unmeasured": {"not_applicable": 1},
                            "decisive": [c["resultId"] for c in children[:2]]},
            "lane": "quality", "usage": usage, "startedAt": t0, "endedAt": t0, "durationMs": 1200, "turns": 3}
    return [head, *children]


def make_run(out: Path, lines: int, blob_mib: int = 0, seed: int = 7) -> Path:
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=False)
    run = {"schemaVersion": "1.0", "runId": RUN_ID, "status": "completed",
           "producer": {"name": "aefgate-bench", "version": "1"},
           "subject": {"ref": "agent:support/support-triage", "kind": "agent", "version": "git:3f2a1c"},
           "execution": {"targetMode": "live", "stimulus": "suite"},
           "startedAt": "2026-10-02T14:00:00Z", "endedAt": "2026-10-02T23:59:59Z", "contentCapture": "on"}
    metrics = {"schemaVersion": "1.0", "metrics": [
        {"id": m, "kind": k, "direction": "higher_better", "scale": {"min": 0, "max": 1}}
        for m, k in (("triage", "score"), ("policy", "score"), ("helpfulness", "score"), ("pass", "rate"))]}
    (out / "run.json").write_bytes(jsonio.dumps(run))
    (out / "metrics.json").write_bytes(jsonio.dumps(metrics))
    request = {"lanes": [{"lane": "quality", "metrics": [
        {"metric": "triage", "path": "triage", "rule": "triage >= 0.8", "verdict": "failed"},
        {"metric": "pass", "path": "triage"},
        {"metric": "helpfulness", "path": "triage/helpfulness", "aggregate": {"method": "median"}},
        {"metric": "policy", "path": "triage/policy", "aggregate": {"method": "min"}}]}]}
    def gen():
        n = 0
        i = 0
        with open(out / "results.ndjson", "wb", buffering=1 << 20) as f:
            while n < lines:
                for line in case_lines(i, rng):
                    if n >= lines:
                        break
                    f.write(jsonio.dump_line(line))
                    n += 1
                    yield line
                i += 1

    summary = compute_summary(RUN_ID, metrics, gen(), request)
    (out / "summary.json").write_bytes(jsonio.dumps(summary))
    if blob_mib:
        h = hashlib.sha256()
        tmp = out / "blob.tmp"
        chunk = os.urandom(1 << 20)
        with open(tmp, "wb") as f:
            for k in range(blob_mib):
                c = chunk[:-8] + k.to_bytes(8, "big")
                h.update(c)
                f.write(c)
        hexd = h.hexdigest()
        d = out / "blobs" / "sha256" / hexd[:2]
        d.mkdir(parents=True)
        tmp.rename(d / hexd)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("out", type=Path)
    ap.add_argument("--lines", type=int, default=10_000)
    ap.add_argument("--blob-mib", type=int, default=0)
    a = ap.parse_args(argv)
    make_run(a.out, a.lines, a.blob_mib)
    json.dump({"run": str(a.out), "lines": a.lines}, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
