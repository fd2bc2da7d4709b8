"""Benchmark the AEP and CloudEvents exports of large runs, side by side with a baseline.

    python bench/bench_aep.py RUN [RUN2 ...] [--repeat 1]

Each RUN is a sealed run (make one with `python bench/make_runs.py DIR --lines N` then `aefgate seal DIR`). For each,
as separate processes (best wall seconds, peak RSS from wait4):

- `aefgate verify RUN`: the verification every export starts with (AEP-1: only an intact run is exported);
- `aefgate export aep RUN OUT.jsonl` and `aefgate export cloudevents RUN OUT.jsonl` (metadata ceiling);
- baseline: a plain Python loop that reads results.ndjson with msgspec and writes one small JSON line per score
  (or per line without scores), the least any Python exporter of these events does, with no checks.

Events per second are given for the whole command and for the export alone (command time minus verify time).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import measure  # noqa: E402

BASELINE = r"""
import sys, msgspec
dec = msgspec.json.Decoder(); enc = msgspec.json.Encoder()
with open(sys.argv[1], "rb") as f, open(sys.argv[2], "wb") as out:
    for raw in f:
        line = dec.decode(raw)
        for s in (line.get("scores") or [None]):
            ev = {"id": line["resultId"], "type": "assessment.evaluation.recorded", "run": line["caseId"],
                  "data": {"gen_ai.evaluation.name": (s or {}).get("metric", line["path"]),
                           "gen_ai.evaluation.score.label": line["state"]}}
            if s is not None:
                ev["data"]["gen_ai.evaluation.score.value"] = s["value"]
            out.write(enc.encode(ev) + b"\n")
"""


def count_lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            n += chunk.count(b"\n")
    return n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "out.jsonl"

        def fresh():
            out.unlink(missing_ok=True)

        for run in a.runs:
            aef = [sys.executable, "-m", "aefgate"]
            t_ver, m_ver = measure([*aef, "verify", str(run)], repeat=a.repeat)
            t_aep, m_aep = measure([*aef, "export", "aep", str(run), str(out)], setup=fresh, repeat=a.repeat)
            events = count_lines(out)
            t_ce, m_ce = measure([*aef, "export", "cloudevents", str(run), str(out)], setup=fresh, repeat=a.repeat)
            assert count_lines(out) == events
            t_base, m_base = measure([sys.executable, "-c", BASELINE, str(run / "results.ndjson"), str(out)],
                                     setup=fresh, repeat=a.repeat)
            assert count_lines(out) == events
            rate = lambda t: f"{events / t / 1000:.0f}k/s"  # noqa: E731
            rows.append(
                f"| {run.name} | {events:,} | {t_ver:.2f} s, {m_ver:.0f} MB | {t_aep:.2f} s ({rate(t_aep)}; "
                f"{rate(t_aep - t_ver)} after verify), {m_aep:.0f} MB | {t_ce:.2f} s ({rate(t_ce)}; "
                f"{rate(t_ce - t_ver)} after verify), {m_ce:.0f} MB | {t_base:.2f} s ({rate(t_base)}), "
                f"{m_base:.0f} MB | {t_base / (t_aep - t_ver):.2f} |")
            print(rows[-1], flush=True)
    print("\n| run | events | verify | export aep | export cloudevents | baseline loop | baseline time / aep "
          "export time (after verify) |\n|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
