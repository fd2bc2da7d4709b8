"""Benchmark the OpenTelemetry import, side by side with a plain ``json.loads`` loop over the same file.

    python bench/bench_otel.py [--events 100000] [--per-line 100] [--repeat 3]

Generates an OTLP/JSON logs file (one ``LogsData`` per line, ``--per-line`` ``gen_ai.evaluation.result`` records
each, parented to spans, shaped as the OpenTelemetry SDK 1.45 writes them: the SDK's resource attributes, an empty
``body``, ``observedTimeUnixNano`` and no ``timeUnixNano`` (``Logger.emit(event_name=...)``), ``flags``; distinct
cases, two metrics), then measures, as
separate processes (best wall seconds of ``--repeat``, peak RSS of the process tree): ``aefgate import otel FILE
OUT --at ...`` (read, check, write, verify, seal: the whole import) and the baseline, a process that reads the file
line by line with ``json.loads``. Prints the events/s of each and the ratio. Run at 10,000 and 100,000 events to see
how the peak RSS grows.
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

BASELINE = "import json, sys\nfor line in open(sys.argv[1], 'rb'):\n    json.loads(line)\n"


def make(path: Path, events: int, per_line: int) -> None:
    with open(path, "w") as f:
        n = 0
        while n < events:
            recs = []
            for _ in range(min(per_line, events - n)):
                case, metric = divmod(n, 2)
                recs.append({
                    "observedTimeUnixNano": str(1796080907512565929 + n * 1000), "severityNumber": 9,
                    "body": {}, "traceId": f"{case + 1:032x}", "spanId": f"{case + 1:016x}", "flags": 1,
                    "eventName": "gen_ai.evaluation.result",
                    "attributes": [
                        {"key": "gen_ai.evaluation.name", "value": {"stringValue": ("Relevance", "Groundedness")[metric]}},
                        {"key": "gen_ai.evaluation.score.value", "value": {"doubleValue": (n % 50) / 10}},
                        {"key": "gen_ai.evaluation.score.label", "value": {"stringValue": "relevant"}},
                        {"key": "gen_ai.evaluation.explanation", "value": {"stringValue": f"explanation {n}"}},
                        {"key": "test.case.name", "value": {"stringValue": f"case-{case}"}},
                    ]})
                n += 1
            doc = {"resourceLogs": [{"resource": {"attributes": [
                {"key": "telemetry.sdk.language", "value": {"stringValue": "python"}},
                {"key": "telemetry.sdk.name", "value": {"stringValue": "opentelemetry"}},
                {"key": "telemetry.sdk.version", "value": {"stringValue": "1.45.2"}},
                {"key": "service.name", "value": {"stringValue": "bench-evals"}}]},
                "scopeLogs": [{"scope": {"name": "bench"}, "logRecords": recs}]}]}
            f.write(json.dumps(doc, separators=(",", ":")) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--per-line", type=int, default=512)  # the SDK's batch exporter: 512 records a request
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="aefgate-bench-otel-"))
    try:
        src = work / "logs.otlp.jsonl"
        make(src, a.events, a.per_line)
        out = work / "run"
        t_imp, rss_imp = measure_tree([sys.executable, "-m", "aefgate", "import", "otel", str(src), str(out), "--at",
                                       "2026-12-01T00:00:00Z", "--json"],
                                      setup=lambda: shutil.rmtree(out, ignore_errors=True), repeat=a.repeat)
        t_base, rss_base = measure_tree([sys.executable, "-c", BASELINE, str(src)], repeat=a.repeat)
        size = src.stat().st_size / 2**20
        print(f"{a.events} events, {size:.1f} MiB, {a.per_line} per line")
        print(f"aefgate import otel : {t_imp:7.2f} s  {a.events / t_imp:9.0f} events/s  peak RSS {rss_imp:6.1f} MB")
        print(f"json.loads loop     : {t_base:7.2f} s  {a.events / t_base:9.0f} events/s  peak RSS {rss_base:6.1f} MB")
        print(f"ratio (import / baseline time): {t_imp / t_base:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
