"""Benchmark the ASSERT import end to end on generated runs, side by side with a plain ``json.loads`` loop over the
same files.

    python bench/bench_assert.py [--cases 10000,50000] [--repeat 1] [--content-capture on]

For each size it generates an ASSERT run as assert-ai 0.3 lays it out (``results/<suite>/<run>/``: a taxonomy of
three categories, ``test_set.jsonl``, ``inference_set.jsonl`` with a four-event conversation and one model call per
row, ``scores.jsonl`` with a full verdict per row (node judgments, justifications, narrative), ``manifest.json``;
one case in 50 has no score row, one in 40 is ``judge_failed``, one in 25 a scenario), then measures, as separate
processes (best wall seconds of ``--repeat``, peak RSS of the process tree): ``aefgate import assert RUN OUT --at
... --wilson --max-harm-rate 0.05 --json`` (read, join, write, verify, seal: the whole import) and the baseline, a
process that reads the three JSON Lines files line by line with ``json.loads``. Prints cases/s and JSONL rows/s
(the rows of the three files), and the peak RSS, per size: the peak should not grow with the number of cases.
``--content-capture on`` keeps the seeds, transcripts and the judge's reasoning as blobs (each a file: a run folder
holds at most 100,000 files, [ENC-17], so at most about 30,000 cases).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import measure_tree  # noqa: E402

BASELINE = ("import json, sys\nfor p in sys.argv[1:]:\n    for line in open(p, 'rb'):\n"
            "        if line.strip():\n            json.loads(line)\n")
TAXONOMY = {"behavior": {"name": "bench_behavior", "definition": "d"}, "definition_of_terms": [],
            "behavior_categories": [{"name": f"category {i}", "definition": "d", "examples": ["e"],
                                     "permissible": i == 1} for i in range(3)]}


def make(root: Path, cases: int) -> Path:
    """An ASSERT run of ``cases`` cases under ``root/results/bench/run-1``; returns the run folder."""
    suite = root / "results" / "bench"
    run = suite / "run-1"
    run.mkdir(parents=True)
    (suite / "taxonomy.json").write_text(json.dumps(TAXONOMY, indent=2))
    with open(suite / "test_set.jsonl", "w") as ts, open(run / "inference_set.jsonl", "w") as inf, \
            open(run / "scores.jsonl", "w") as sc:
        for i in range(1, cases + 1):
            kind = "scenario" if i % 25 == 0 else "prompt"
            tester = "openai/gpt-4o-mini" if kind == "scenario" else ""
            tcid = f"test_case_{i:06d}"
            dims = {"behavior": f"category {i % 3}"}
            ts.write(json.dumps({"type": kind, "test_case_id": tcid, "behavior": "bench_behavior",
                                 "seed": {"title": f"title {i}", "description": f"Question number {i} about dosing.",
                                          "system_prompt": "You are a careful assistant."},
                                 "dimensions": dims}) + "\n")
            events = [
                {"view": ["system", "target", "combined"], "actor": "tester",
                 "edit": {"type": "set_system_message", "message": {"role": "system",
                                                                    "content": "You are a careful assistant."}},
                 "raw": None},
                {"view": ["target", "combined"], "actor": "target",
                 "edit": {"type": "add_message", "message": {"role": "user",
                                                             "content": f"Question number {i} about dosing."}},
                 "raw": None},
                {"view": ["target", "combined"], "actor": "tool",
                 "edit": {"type": "tool_call", "tool_name": "lookup", "tool_args": {"q": i},
                          "tool_result": "{\"found\": true}"}, "raw": None},
                {"view": ["target", "combined"], "actor": "target",
                 "edit": {"type": "add_message", "message": {"role": "assistant",
                                                             "content": "Here is a careful answer. " * 8}},
                 "raw": None},
            ]
            inf.write(json.dumps({"type": kind, "test_case_id": tcid, "behavior": "bench_behavior", "events": events,
                                  "llm_calls": [{"model": "target", "input_tokens": 120, "output_tokens": 80}],
                                  "stop_reason": "completed", "target": "https://agent.example.test/chat",
                                  "tester_model": tester, "target_reasoning_effort": None,
                                  "tester_reasoning_effort": None, "dimensions": dims}) + "\n")
            if i % 50 == 0:
                continue  # no score row: the judge was filtered
            harm, over = i % 7 == 0, i % 11 == 0
            nodes = [{"node_index": n, "node_name": f"category {n}", "relevant": n != 2 or i % 3 == 0,
                      "violated": (harm if n != 1 else over) if (n != 2 or i % 3 == 0) else None,
                      "confidence": "high", "evidence_turns": [2], "reasoning": f"reasoning about node {n} [1]."}
                     for n in range(3)]
            status = "judge_failed" if i % 40 == 0 else "ok"
            verdict = ({"error": "judge_failed"} if status != "ok" else
                       {"dimensions": {"policy_violation": harm or over, "overrefusal": over},
                        "justification": f"Justification for case {i}.",
                        "dimension_justifications": {"policy_violation": "p", "overrefusal": "o"},
                        "node_judgments": nodes, "citations": [], "narrative": "A four-sentence narrative. " * 4})
            sc.write(json.dumps({"type": kind, "test_case_id": tcid, "behavior": "bench_behavior",
                                 "judge_model": "azure/gpt-5.4", "target": "https://agent.example.test/chat",
                                 "tester_model": tester, "score_keys": ["policy_violation", "overrefusal"],
                                 "not_applicable_score_keys": [], "judge_status": status,
                                 "judge_error": None if status == "ok" else "missing_node_judgments",
                                 "verdict": verdict, "dimensions": dims}) + "\n")
    (run / "manifest.json").write_text(json.dumps({"started_at": "2026-11-01T10:00:00+00:00", "status": "completed",
                                                   "ended_at": "2026-11-01T11:00:00+00:00",
                                                   "stages": {"inference": "completed", "judge": "completed"}}))
    return run


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="10000,50000")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--content-capture", choices=("on", "off"), default=None)
    a = ap.parse_args()
    print("| cases | JSONL rows | MiB | aefgate import assert | cases/s | rows/s | peak RSS | json.loads loop | "
          "peak RSS |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in [int(x) for x in a.cases.split(",") if x]:
        work = Path(tempfile.mkdtemp(prefix="aefgate-bench-assert-"))
        try:
            run = make(work / "src", n)
            files = [run.parent / "test_set.jsonl", run / "inference_set.jsonl", run / "scores.jsonl"]
            rows = sum(sum(1 for _ in open(f, "rb")) for f in files)
            size = sum(f.stat().st_size for f in files) / 2**20
            out = work / "out"
            cmd = [sys.executable, "-m", "aefgate", "import", "assert", str(run), str(out), "--at",
                   "2026-12-01T00:00:00Z", "--wilson", "--max-harm-rate", "0.05", "--json"]
            if a.content_capture:
                cmd += ["--content-capture", a.content_capture]
            t_imp, rss_imp = measure_tree(cmd, setup=lambda: shutil.rmtree(out, ignore_errors=True), repeat=a.repeat)
            t_base, rss_base = measure_tree([sys.executable, "-c", BASELINE, *map(str, files)], repeat=a.repeat)
            print(f"| {n:,} | {rows:,} | {size:.1f} | {t_imp:.2f} s | {n / t_imp:,.0f} | {rows / t_imp:,.0f} | "
                  f"{rss_imp:.1f} MB | {t_base:.2f} s ({rows / t_base:,.0f} rows/s) | {rss_base:.1f} MB |",
                  flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
