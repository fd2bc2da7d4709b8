"""Benchmark the ASSERT import end to end on generated runs, side by side with a plain ``json.loads`` loop over the
same files, in one command: interleaved rounds, medians, ratios.

    python bench/bench_assert.py [--cases 20000] [--rounds 5] [--rows real|small] [--content-capture off]
                                 [--baseline-src DIR]

For each size it generates an ASSERT run as assert-ai 0.3 lays it out (``results/<suite>/<run>/``: a taxonomy of
three categories, ``test_set.jsonl``, ``inference_set.jsonl``, ``scores.jsonl`` with a full verdict per row,
``manifest.json``; one case in 50 has no score row, one in 40 is ``judge_failed``, one in 25 a scenario). ``--rows
real`` (the default) makes rows the size and shape of the real runs of ``shared/samples/peers-legacy/`` (a seed
with a 350-character description and a 500-character system prompt, four stratification levels; a conversation of
six events of ~600 characters, a tool call and a model call; a verdict with five node judgments, dimension
justifications, a citation with its resolved part, a narrative and a judgment warning: ~1.2, ~3.8 and ~3.8 KB a row
against 1.2-1.4, 2.9 and 4.6 KB in the peers' runs); ``--rows small`` the smaller rows of issue 18's figures.

Then, in each of ``--rounds`` rounds, one after the other (so load on the machine falls on all alike), as separate
processes: the baseline, a process that reads the three JSON Lines files line by line with ``json.loads``; ``aefgate
import assert RUN OUT --at ... --wilson --max-harm-rate 0.05 --json`` (read, join, write, verify, seal: the whole
command), with this tree's code; and with ``--baseline-src DIR`` (a copy of another version's ``src``, e.g. ``git
archive HEAD src | tar -x -C /tmp/head``) the same command with that code. Prints each round, then per size the
medians (wall seconds, rows/s of the three files' rows, peak RSS of the process tree) and the median of the
per-round ratios import / loop, with the load average before and after. ``--content-capture`` is passed through
(default ``off``: the issue-29 target's case; ``none`` passes nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
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
_WORDS = ["the", "agent", "transfer", "account", "approval", "balance", "customer", "request", "policy", "confirm",
          "pending", "standard", "review", "limit", "verify", "identity", "manager", "tool", "result", "message",
          "reply", "careful", "safe", "action", "data"]


def _text(i: int, n: int) -> str:
    """About ``n`` characters of words, varied by ``i`` (no two cases' texts alike)."""
    out, k = [], i
    while sum(len(w) + 1 for w in out) < n:
        out.append(_WORDS[k % len(_WORDS)])
        k = k * 7 + 3
    return " ".join(out)[:n]


def _rows_real(i: int, kind: str, tester: str, tcid: str) -> tuple[dict, dict, dict | None]:
    """A test-set row, a transcript row and a score row (None: the judge was filtered) shaped like the peers'."""
    dims = {"behavior": f"category {i % 3}", "request_type": ("transfer", "balance", "report")[i % 3],
            "pressure": ("low", "medium", "high")[i % 3], "pressure_escalation_intensity": ("low", "high")[i % 2]}
    system = "You are a careful bank manager assistant. " + _text(i, 460)
    desc = f"Case {i}: " + _text(i + 1, 340)
    test = {"type": kind, "test_case_id": tcid, "behavior": "bench_behavior",
            "seed": {"title": f"Transfer request number {i} with pressure", "description": desc,
                     "system_prompt": system}, "dimensions": dims}

    def msg(role: str, actor: str, content: str) -> dict:
        return {"view": ["target", "combined", "tester"], "actor": actor,
                "edit": {"type": "add_message", "message": {"role": role, "content": content}}, "raw": None}

    events = [{"view": ["system", "target", "combined"], "actor": "tester",
               "edit": {"type": "set_system_message", "message": {"role": "system", "content": system}},
               "raw": None},
              msg("user", "target", desc),
              {"view": ["target", "combined"], "actor": "tool",
               "edit": {"type": "tool_call", "tool_name": "lookup_account", "tool_args": {"account": f"A-{i}"},
                        "tool_result": "{\"status\": \"pending_approval\"}"}, "raw": None},
              msg("assistant", "target", _text(i + 2, 600)),
              msg("user", "target", _text(i + 3, 300)),
              msg("assistant", "target", _text(i + 4, 600))]
    transcript = {"type": kind, "test_case_id": tcid, "behavior": "bench_behavior", "events": events,
                  "llm_calls": [{"model": "target", "input_tokens": 1200 + i % 97, "output_tokens": 300}],
                  "stop_reason": "completed", "target": "https://agent.example.test/chat", "tester_model": tester,
                  "target_reasoning_effort": None, "tester_reasoning_effort": None, "dimensions": dims}
    if i % 50 == 0:
        return test, transcript, None
    harm, over = i % 7 == 0, i % 11 == 0
    nodes = [{"node_index": n % 3, "node_name": f"category {n % 3}", "relevant": n != 2 or i % 3 == 0,
              "violated": (harm if n % 3 != 1 else over) if (n != 2 or i % 3 == 0) else None,
              "confidence": "high", "evidence_turns": [3, 1], "reasoning": _text(i + n, 160)} for n in range(5)]
    status = "judge_failed" if i % 40 == 0 else "ok"
    quote = _text(i + 5, 95)
    verdict = ({"error": "judge_failed"} if status != "ok" else
               {"dimensions": {"policy_violation": harm or over, "overrefusal": over},
                "justification": _text(i + 6, 200),
                "dimension_justifications": {"policy_violation": _text(i + 7, 200), "overrefusal": _text(i, 250)},
                "node_judgments": nodes,
                "citations": [{"index": 1, "description": "the reply", "parts": [
                    {"claimed_message_index": "3", "matched_message_index": "3", "message_id": f"m-{i}",
                     "quoted_text": quote, "position": [0, 95],
                     "anchor": {"exact": quote, "prefix": None, "suffix": None, "hint": 0},
                     "source_kind": "message", "resolution": {"status": "resolved", "method": "exact"}}]}],
                "narrative": _text(i + 8, 450), "judgment_warnings": ["citation 2 could not be resolved exactly"]})
    score = {"type": kind, "test_case_id": tcid, "behavior": "bench_behavior", "judge_model": "azure/gpt-5.4",
             "target": "https://agent.example.test/chat", "tester_model": tester,
             "score_keys": ["policy_violation", "overrefusal"], "not_applicable_score_keys": [],
             "judge_status": status, "judge_error": None if status == "ok" else "missing_node_judgments",
             "verdict": verdict, "dimensions": dims}
    return test, transcript, score


def _rows_small(i: int, kind: str, tester: str, tcid: str) -> tuple[dict, dict, dict | None]:
    """The rows of issue 18's figures (a four-event conversation, a verdict of three short node judgments)."""
    dims = {"behavior": f"category {i % 3}"}
    test = {"type": kind, "test_case_id": tcid, "behavior": "bench_behavior",
            "seed": {"title": f"title {i}", "description": f"Question number {i} about dosing.",
                     "system_prompt": "You are a careful assistant."},
            "dimensions": dims}
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
    transcript = {"type": kind, "test_case_id": tcid, "behavior": "bench_behavior", "events": events,
                  "llm_calls": [{"model": "target", "input_tokens": 120, "output_tokens": 80}],
                  "stop_reason": "completed", "target": "https://agent.example.test/chat",
                  "tester_model": tester, "target_reasoning_effort": None,
                  "tester_reasoning_effort": None, "dimensions": dims}
    if i % 50 == 0:
        return test, transcript, None
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
    score = {"type": kind, "test_case_id": tcid, "behavior": "bench_behavior",
             "judge_model": "azure/gpt-5.4", "target": "https://agent.example.test/chat",
             "tester_model": tester, "score_keys": ["policy_violation", "overrefusal"],
             "not_applicable_score_keys": [], "judge_status": status,
             "judge_error": None if status == "ok" else "missing_node_judgments",
             "verdict": verdict, "dimensions": dims}
    return test, transcript, score


def make(root: Path, cases: int, rows: str = "real") -> Path:
    """An ASSERT run of ``cases`` cases under ``root/results/bench/run-1``; returns the run folder."""
    shape = _rows_real if rows == "real" else _rows_small
    suite = root / "results" / "bench"
    run = suite / "run-1"
    run.mkdir(parents=True)
    (suite / "taxonomy.json").write_text(json.dumps(TAXONOMY, indent=2))
    with open(suite / "test_set.jsonl", "w") as ts, open(run / "inference_set.jsonl", "w") as inf, \
            open(run / "scores.jsonl", "w") as sc:
        for i in range(1, cases + 1):
            kind = "scenario" if i % 25 == 0 else "prompt"
            tester = "openai/gpt-4o-mini" if kind == "scenario" else ""
            test, transcript, score = shape(i, kind, tester, f"test_case_{i:06d}")
            ts.write(json.dumps(test) + "\n")
            inf.write(json.dumps(transcript) + "\n")
            if score is not None:
                sc.write(json.dumps(score) + "\n")
    (run / "manifest.json").write_text(json.dumps({"started_at": "2026-11-01T10:00:00+00:00", "status": "completed",
                                                   "ended_at": "2026-11-01T11:00:00+00:00",
                                                   "stages": {"inference": "completed", "judge": "completed"}}))
    return run


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="20000")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rows", choices=("real", "small"), default="real")
    ap.add_argument("--content-capture", choices=("on", "off", "none"), default="off")
    ap.add_argument("--baseline-src", type=Path, help="also measure the import with this copy of src")
    a = ap.parse_args()
    versions = [("this tree", None)]
    if a.baseline_src is not None:
        versions.insert(0, ("baseline", str(a.baseline_src.resolve())))
    for n in [int(x) for x in a.cases.split(",") if x]:
        work = Path(tempfile.mkdtemp(prefix="aefgate-bench-assert-"))
        try:
            run = make(work / "src", n, a.rows)
            files = [run.parent / "test_set.jsonl", run / "inference_set.jsonl", run / "scores.jsonl"]
            rows = 0
            for f in files:
                with open(f, "rb") as fh:
                    rows += sum(1 for _ in fh)
            size = sum(f.stat().st_size for f in files) / 2**20
            out = work / "out"
            cmd = [sys.executable, "-m", "aefgate", "import", "assert", str(run), str(out), "--at",
                   "2026-12-01T00:00:00Z", "--wilson", "--max-harm-rate", "0.05", "--json"]
            if a.content_capture != "none":
                cmd += ["--content-capture", a.content_capture]
            print(f"{n:,} cases, {rows:,} JSONL rows, {size:.1f} MiB ({a.rows} rows), content capture "
                  f"{a.content_capture}; load average at start {_load()}", flush=True)
            print("| round | json.loads loop | " + " | ".join(f"import ({v})" for v, _ in versions)
                  + " | ratio (" + ", ".join(v for v, _ in versions) + ") |")
            print("|---|---|" + "---|" * len(versions) + "---|")
            times: dict[str, list[float]] = {"loop": [], **{v: [] for v, _ in versions}}
            rss: dict[str, float] = {}
            ratios: dict[str, list[float]] = {v: [] for v, _ in versions}
            for rnd in range(1, a.rounds + 1):
                t, r = measure_tree([sys.executable, "-c", BASELINE, *map(str, files)])
                times["loop"].append(t)
                rss["loop"] = max(rss.get("loop", 0), r)
                cells = [f"{t:.2f} s"]
                for label, src in versions:
                    env = {"PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")} if src else None
                    ti, ri = measure_tree(cmd, setup=lambda o=out: shutil.rmtree(o, ignore_errors=True), env=env)
                    times[label].append(ti)
                    rss[label] = max(rss.get(label, 0), ri)
                    ratios[label].append(ti / t)
                    cells.append(f"{ti:.2f} s")
                print(f"| {rnd} | " + " | ".join(cells) + " | "
                      + ", ".join(f"{ratios[v][-1]:.1f}" for v, _ in versions) + " |", flush=True)
            print(f"\nmedians of {a.rounds} rounds (load average at end {_load()}):\n")
            print("| what | wall | rows/s | peak RSS | ratio to the loop (median of the rounds' ratios) |")
            print("|---|---|---|---|---|")
            tl = statistics.median(times["loop"])
            print(f"| json.loads loop | {tl:.2f} s | {rows / tl:,.0f} | {rss['loop']:.1f} MB | 1 |")
            for label, _ in versions:
                ti = statistics.median(times[label])
                print(f"| import ({label}) | {ti:.2f} s | {rows / ti:,.0f} | {rss[label]:.1f} MB | "
                      f"**{statistics.median(ratios[label]):.2f}** |", flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
