"""Benchmark the AEP and CloudEvents exports of large runs, side by side with a baseline.

    python bench/bench_aep.py RUN [RUN2 ...] [--repeat 1]

Each RUN is a sealed run (make one with `python bench/make_runs.py DIR --lines N` then `aefgate seal DIR`). For each,
as separate processes (best wall seconds, peak RSS from wait4):

- `aefgate verify RUN`: the verification every export starts with (AEP-1: only an intact run is exported);
- `aefgate export aep RUN OUT.jsonl` and `aefgate export cloudevents RUN OUT.jsonl` (metadata ceiling);
- baseline: a plain Python loop that reads results.ndjson with msgspec and writes one small JSON line per score
  (or per line without scores), the least any Python exporter of these events does, with no checks.

Events per second are given for the whole command and for the export alone (command time minus verify time).

    python bench/bench_aep.py RUN --rounds 5 [--baseline-src DIR]
    python bench/bench_aep.py RUN --rounds 7 --mapping

Interleaved rounds instead (issue 31): each round runs, one after the other, `export aep`, `export cloudevents`
(with this tree's code, and with ``--baseline-src DIR``, a copy of another version's ``src``, on ``PYTHONPATH``) and
the baseline loop; then the medians, and each export's ratio to the baseline loop (command seconds / loop seconds),
the load average at the start and end noted. The outputs of the two codes are compared byte for byte. With
``--mapping``: the mapping and encoding alone, in this process, CPU time (:func:`mapping`).
"""

from __future__ import annotations

import argparse
import filecmp
import os
import statistics
import subprocess
import sys
import tempfile
import time
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


def _timed(cmd: list[str], env: dict | None = None) -> float:
    t = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                       env={**os.environ, **env} if env else None)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{cmd} exited {p.returncode}")
    return dt


def rounds(run: Path, n: int, baseline_src: Path | None) -> int:
    """Interleaved rounds over ``run``: the exports (this tree, and ``baseline_src``'s) and the baseline loop."""
    aef = [sys.executable, "-m", "aefgate"]
    codes = [("this tree", None)]
    if baseline_src is not None:
        src = str(baseline_src.resolve())
        codes.insert(0, ("baseline src", {"PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}))
    cols = [(f"export {kind} ({code})", kind, env) for kind in ("aep", "cloudevents") for code, env in codes]
    times: dict[str, list[float]] = {c: [] for c, _, _ in cols}
    times["baseline loop"] = []
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as d:
        outs = {c: Path(d) / f"{i}.jsonl" for i, (c, _, _) in enumerate(cols)}
        base_out = Path(d) / "base.jsonl"
        for r in range(n):
            for c, kind, env in cols:
                outs[c].unlink(missing_ok=True)
                times[c].append(_timed([*aef, "export", kind, str(run), str(outs[c])], env))
            base_out.unlink(missing_ok=True)
            times["baseline loop"].append(_timed([sys.executable, "-c", BASELINE, str(run / "results.ndjson"),
                                                  str(base_out)]))
            print(f"round {r + 1}: " + ", ".join(f"{c} {v[-1]:.2f} s" for c, v in times.items()), flush=True)
        same = {kind: filecmp.cmp(*[outs[c] for c, k, _ in cols if k == kind], shallow=False)
                for kind in ("aep", "cloudevents")} if baseline_src is not None else {}
    load1 = os.getloadavg()
    base = statistics.median(times["baseline loop"])
    print(f"\n{run} ({count_lines(run / 'results.ndjson'):,} lines), {n} interleaved rounds, load average "
          f"{load0[0]:.1f} at the start, {load1[0]:.1f} at the end; outputs byte-identical between the codes: "
          f"{same or 'not compared'}\n")
    print("| command | median | min - max | ratio to the baseline loop (medians) |\n|---|---|---|---|")
    for c, v in times.items():
        med = statistics.median(v)
        print(f"| {c} | {med:.2f} s | {min(v):.2f} - {max(v):.2f} s | {med / base:.2f}x |")
    return 0


def mapping(run: Path, n: int) -> int:
    """In this process (``time.process_time``), interleaved rounds, medians: decoding the run's result lines and
    mapping and encoding their events, by the AEP struct path, the CloudEvents dict path (``to_cloudevents``'s
    encode over ``result_events``) and the CloudEvents struct path (``converters.cloudevents.fast``); beside the
    baseline loop's decode and encode of the same lines. No verification, no file writes: the mapping alone, with
    the collector off for every path (as the export maps)."""
    import msgspec

    from aefgate.aef import jsonio
    from aefgate.converters.aep import exporter as X
    from aefgate.converters.cloudevents.fast import encoder
    from aefgate.formats.cloudevents.ndjson import line_value

    raws = (run / "results.ndjson").read_bytes().splitlines(keepends=True)
    run_doc = jsonio.read_json(run / "run.json")
    ctx = X._Export(run, run_doc, "ab" * 32, "metadata", "agent", "aefgate", {})
    dec = msgspec.json.Decoder()
    enc = msgspec.json.Encoder()
    where = str(run)
    ce_fast = encoder(where)

    def base():
        out = []
        for raw in raws:
            line = dec.decode(raw)
            for s in (line.get("scores") or [None]):
                ev = {"id": line["resultId"], "type": "assessment.evaluation.recorded", "run": line["caseId"],
                      "data": {"gen_ai.evaluation.name": (s or {}).get("metric", line["path"]),
                               "gen_ai.evaluation.score.label": line["state"]}}
                if s is not None:
                    ev["data"]["gen_ai.evaluation.score.value"] = s["value"]
                out.append(enc.encode(ev) + b"\n")
        return b"".join(out)

    def docs():
        return [dec.decode(raw) for raw in raws]

    def aep_fast():
        ctx.seq = 0
        return b"".join(X._encode_fast(ctx, docs(), set(), {}))

    def ce_dict():
        ctx.seq = 0
        evs = X.result_events(ctx, docs(), set(), {}, None)
        blobs, batch = [], []
        for ev in evs:
            batch.append(ev)
            if len(batch) >= X._BATCH:
                blobs.append(X._encode([line_value(X._with_aigp(e), where, "structured") for e in batch]))
                batch = []
        if batch:
            blobs.append(X._encode([line_value(X._with_aigp(e), where, "structured") for e in batch]))
        return b"".join(blobs)

    def ce_struct():
        ctx.seq = 0
        return b"".join(ce_fast(ctx, docs(), set(), {}))

    fns = {"baseline loop": base, "export aep, struct path": aep_fast, "export cloudevents, dict path": ce_dict,
           "export cloudevents, struct path": ce_struct}
    assert ce_dict() == ce_struct()
    times: dict[str, list[float]] = {k: [] for k in fns}
    load0 = os.getloadavg()
    import gc

    for _ in range(n):
        for k, f in fns.items():
            gc.collect()
            gc.disable()  # as in the export (the verification maps the lines with the collector off)
            t = time.process_time()
            f()
            times[k].append(time.process_time() - t)
            gc.enable()
    load1 = os.getloadavg()
    base_t = statistics.median(times["baseline loop"])
    print(f"\n{run} ({len(raws):,} lines), mapping and encoding in one process, {n} interleaved rounds, CPU "
          f"seconds, gc off, load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end; the two CloudEvents paths' "
          "bytes equal\n")
    print("| path | median | min - max | us a line | ratio to the baseline loop (medians) |\n|---|---|---|---|---|")
    for k, v in times.items():
        med = statistics.median(v)
        print(f"| {k} | {med:.3f} s | {min(v):.3f} - {max(v):.3f} s | {med / len(raws) * 1e6:.2f} | "
              f"{med / base_t:.2f}x |")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=0, help="interleaved rounds (medians) instead of best-of runs")
    ap.add_argument("--baseline-src", type=Path, help="with --rounds: also the exports with this copy of src")
    ap.add_argument("--mapping", action="store_true", help="with --rounds: the mapping and encoding alone, in this "
                    "process (no verification)")
    a = ap.parse_args(argv)
    if a.rounds and a.mapping:
        for run in a.runs:
            mapping(run, a.rounds)
        return 0
    if a.rounds:
        for run in a.runs:
            rounds(run, a.rounds, a.baseline_src)
        return 0
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
